package cloud_test

import (
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// A Node whose lookup failed because a vCenter was still making its
// first connection (never down: a first connect is no recovery) is
// re-queued the moment that vCenter is up, not at the controller's next
// backoff step.
func TestUninitializedNodesAreRequeuedWhenAConnectingVCenterIsUp(t *testing.T) {
	f := newFakeFleet("vcA", "vcB")
	f["vcB"].Add(fakeVM("dc0", "vm-1", "waiting", uuidB), nil)
	f["vcB"].SetReachability(backends.ConnUnknown, nil)
	f["vcB"].Hang(true)
	tainted := kubeletNode("waiting", discovery.SwapByteOrder(uuidB))
	tainted.Spec.Taints = []v1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}}
	client := stateClient(tainted)
	c := f.start(t, f.yaml("", "vcA", "vcB"), client, func(o *cloud.Options) {
		o.RecoveryPoll = 20 * time.Millisecond
		o.Discovery.ConnectWait = 50 * time.Millisecond
	})
	annotation := func() string {
		n, err := client.CoreV1().Nodes().Get(t.Context(), "waiting", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Annotations[nodes.AnnotationLookupRetry]
	}
	if _, err := c.InstanceMetadata(t.Context(), tainted); !errors.Is(err, discovery.ErrVCenterConnecting) {
		t.Fatalf("InstanceMetadata while vcB connects: %v; want ErrVCenterConnecting", err)
	}
	time.Sleep(200 * time.Millisecond) // ten polls with vcB connecting
	if a := annotation(); a != "" {
		t.Fatalf("re-queued while vcB is still connecting (%s)", a)
	}
	f["vcB"].Hang(false)
	f["vcB"].SetReachability(backends.ConnUp, nil)
	eventually(t, "the Node that failed while vcB connected to be re-queued", func() bool { return annotation() != "" })
}
