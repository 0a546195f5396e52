package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// Mixed clusters: bare-metal Nodes beside the VMs, marked unmanaged by the
// label or by --unmanaged-node-selector, NotReady. The CCM never looks them
// up (discovery_total stands still while the lifecycle controller asks
// about them every second), never deletes or writes them, records no
// lookup failure on them; the one with a providerID of its own is
// initialized by the cloud-node controller with its own addresses and
// nothing of ours. Beside them, a Node whose VM exists nowhere is counted
// in nodes_uninitialized{reason="VMNotFound"} and gets a NodeUninitialized
// Event once past --uninitialized-node-event-after; a vCenter going down
// and back is a VCenterDown and a VCenterUp Event.
func TestUnmanagedNodes(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 2, Datacenters: 1, MachinesPerPool: 1})
	ctx := t.Context()
	vms := env.Fed.AllVMs()
	createNodes(t, env, vms)
	metalAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}, {Type: corev1.NodeHostName, Address: "metal-1"}}
	metal := func(name string, labels map[string]string, providerID string, addrs []corev1.NodeAddress) {
		n := harness.KubeletNode(name, "", false)
		for k, v := range labels {
			n.Labels[k] = v
		}
		n.Spec.ProviderID = providerID
		n.Status.Addresses = addrs
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// By the label, with a providerID its kubelet set (--provider-id).
	metal("metal-1", map[string]string{nodes.LabelUnmanaged: "true"}, "metal://rack1/metal-1", metalAddrs)
	// By the selector, without providerID.
	metal("metal-2", map[string]string{"node.example.com/metal": "true"}, "", nil)
	// Ours, but its VM exists in no vCenter.
	const ghostUUID = "56ffffff-0000-4000-8000-00000000e2e0"
	if _, err := harness.CreateKubeletNode(ctx, env.Client, "ghost", ghostUUID); err != nil {
		t.Fatal(err)
	}
	deletions := watchDeletions(t, env)
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{Flags: map[string]string{
		"unmanaged-node-selector":        "node.example.com/metal=true",
		"uninitialized-node-event-after": "3s",
	}})
	token := metricsReaderToken(t, env)
	waitInitialized(t, env, append(names(vms), "metal-1"), time.Minute)

	// metal-1: initialized by the cloud-node controller with what it had.
	n, err := env.Client.CoreV1().Nodes().Get(ctx, "metal-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.ProviderID != "metal://rack1/metal-1" || !slices.Equal(n.Status.Addresses, metalAddrs) {
		t.Errorf("metal-1: providerID %q, addresses %v; want its own", n.Spec.ProviderID, n.Status.Addresses)
	}
	for k := range n.Labels {
		if strings.HasPrefix(k, "vsphere-federated-ccm.io/") && k != nodes.LabelUnmanaged || strings.HasPrefix(k, "topology.kubernetes.io/") || strings.HasPrefix(k, "node.kubernetes.io/instance-type") {
			t.Errorf("metal-1 got label %s=%s from the CCM", k, n.Labels[k])
		}
	}
	waitEvent(t, env, "", "Node", "metal-1", nodes.ReasonNodeUnmanaged, 30*time.Second)
	waitEvent(t, env, "", "Node", "metal-2", nodes.ReasonNodeUnmanaged, 30*time.Second)

	// Both NotReady: the lifecycle controller asks about them every
	// second (--node-monitor-period=1s); the VM Nodes are Ready and
	// initialized, so every lookup in this window would be theirs.
	var ss harness.Samples
	scrape := func() harness.Samples {
		t.Helper()
		s, _, err := ccm.Scrape(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		ss = s
		return s
	}
	lookups := func() float64 { v, _ := scrape().Sum("cloudprovider_vsphere_discovery_total"); return v }
	// The ghost is retried with backoff by the cloud-node controller:
	// wait until its retries are seconds apart, then watch a window.
	time.Sleep(5 * time.Second)
	before := lookups()
	soapBefore := soapTotals(env.Fed)
	if err := holds(ctx, 5*time.Second, func() error {
		for _, e := range append(events(t, env, "", "Node", "metal-1"), events(t, env, "", "Node", "metal-2")...) {
			if e.Type == corev1.EventTypeWarning {
				return fmt.Errorf("warning Event on unmanaged %s: %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	after := lookups()
	soapAfter := soapTotals(env.Fed)
	// At most the ghost's backoff retries (1 lookup each, ≥ 8 s apart by
	// now); an unmanaged Node looked up would add 2 per second each.
	if after-before > 2 {
		t.Errorf("discovery_total rose by %v in a 5 s window with 2 unmanaged NotReady Nodes; want ≤ 2 (the ghost's retries)", after-before)
	}
	t.Logf("in the window: %v lookups, SOAP calls %v (the inventories' watches and keep-alives included)", after-before, soapAfter-soapBefore)
	n2, err := env.Client.CoreV1().Nodes().Get(ctx, "metal-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n2.Spec.ProviderID != "" || !harness.HasTaint(n2, harness.UninitializedTaint) || len(n2.Annotations) > 0 {
		t.Errorf("metal-2: providerID %q, taints %v, annotations %v; want it untouched (no providerID: the controller initializes no Node without one)",
			n2.Spec.ProviderID, n2.Spec.Taints, n2.Annotations)
	}

	// The ghost: counted by why, and a NodeUninitialized Event.
	scrapeFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			scrape()
			return cond(), nil
		}); err != nil {
			t.Fatalf("/metrics: not %s: %v", what, ss.Find("cloudprovider_vsphere_nodes_uninitialized"))
		}
	}
	scrapeFor("nodes_unmanaged 2, nodes_uninitialized{VMNotFound} 1", func() bool {
		u, _ := ss.Sum("cloudprovider_vsphere_nodes_unmanaged")
		g, _ := ss.Sum("cloudprovider_vsphere_nodes_uninitialized", "reason", nodes.UninitializedNoVM)
		all, _ := ss.Sum("cloudprovider_vsphere_nodes_uninitialized")
		return u == 2 && g == 1 && all == 1
	})
	if v, ok := ss.Sum("cloudprovider_vsphere_duplicate_uuids"); !ok || v != 0 {
		t.Errorf("duplicate_uuids = %v (present %v); want 0", v, ok)
	}
	e := waitEvent(t, env, "", "Node", "ghost", nodes.ReasonNodeUninitialized, 30*time.Second)
	if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, "("+nodes.UninitializedNoVM+")") || !strings.Contains(e.Message, "not there") {
		t.Errorf("NodeUninitialized on ghost: %s %q; want a Warning naming %s", e.Type, e.Message, nodes.UninitializedNoVM)
	}

	// A vCenter down and back: Events on the CCM's object (outside a Pod,
	// its Lease kube-system/cloud-controller-manager).
	if err := env.Proxies["vc2"].SetMode(vcsim.Refuse); err != nil {
		t.Fatal(err)
	}
	down := waitEvent(t, env, "kube-system", "Lease", "cloud-controller-manager", nodes.ReasonVCenterDown, time.Minute)
	if !strings.Contains(down.Message, "vcenter vc2 is down") {
		t.Errorf("VCenterDown: %q", down.Message)
	}
	if err := env.Proxies["vc2"].SetMode(vcsim.Pass); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, env, "kube-system", "Lease", "cloud-controller-manager", nodes.ReasonVCenterUp, time.Minute)

	if d := deletions.Deleted(nil); len(d) > 0 {
		t.Errorf("Nodes deleted: %v", d)
	}
	for _, name := range []string{"metal-1", "metal-2", "ghost"} {
		if _, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// soapTotals is the SOAP calls every vCenter of fed has handled.
func soapTotals(fed *vcsim.Federation) int64 {
	var n int64
	for _, vc := range fed.VCenters {
		_, total := vc.SOAPCalls()
		n += total
	}
	return n
}
