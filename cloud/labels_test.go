package cloud_test

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
)

// --node-labels (CPI's flag) are given at initialization; on an
// initialized Node only the location labels are added, so an operator's
// later edit of a --node-labels label stands.
func TestNodeLabelsAtInitializationOnly(t *testing.T) {
	f := newFakeFleet("vcA")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "node-a", uuidA), nil)
	initialized := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"example.com/pool": "edited"}},
		Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuidA}}
	client := stateClient(initialized)
	c := f.start(t, f.yaml("", "vcA"), client, func(o *cloud.Options) {
		o.NodeLabels = map[string]string{"example.com/pool": "vsphere", "node.example.com/site": ""}
	})
	md, err := c.InstanceMetadata(t.Context(), initialized)
	if err != nil {
		t.Fatal(err)
	}
	if md.AdditionalLabels["example.com/pool"] != "vsphere" || md.AdditionalLabels[nodes.LabelVCenter] != "vcA" {
		t.Fatalf("AdditionalLabels = %v; want the --node-labels and the location labels", md.AdditionalLabels)
	}
	// The nodes owner writes the labels, after the lookup.
	var got *v1.Node
	eventually(t, "the location labels on the initialized Node", func() bool {
		got, err = client.CoreV1().Nodes().Get(t.Context(), "node-a", metav1.GetOptions{})
		return err == nil && got.Labels[nodes.LabelVCenter] == "vcA"
	})
	if got.Labels["example.com/pool"] != "edited" {
		t.Fatalf("initialized Node's labels %v: want the edited label kept", got.Labels)
	}
}

// InstanceMetadata only reads: the location labels it finds missing on an
// initialized Node are written by the nodes owner, so a Node write that
// hangs never holds up the answer to the cloud-node controller (before,
// InstanceMetadata patched the Node itself and waited for it).
func TestInstanceMetadataWaitsOnNoNodeWrite(t *testing.T) {
	f := newFakeFleet("vcA")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "node-a", uuidA), nil)
	initialized := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuidA}}
	client := stateClient(initialized)
	release := make(chan struct{})
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release // every Node write hangs until the answer is in
		return false, nil, nil
	})
	c := f.start(t, f.yaml("", "vcA"), client)
	answered := make(chan error, 1)
	go func() {
		_, err := c.InstanceMetadata(t.Context(), initialized)
		answered <- err
	}()
	// A bound on a hang, not a timing: the answer needs no write at all.
	select {
	case err := <-answered:
		close(release)
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("InstanceMetadata waited on a Node write")
	}
	eventually(t, "the location labels written once writes go through", func() bool {
		got, err := client.CoreV1().Nodes().Get(t.Context(), "node-a", metav1.GetOptions{})
		return err == nil && got.Labels[nodes.LabelVCenter] == "vcA"
	})
}
