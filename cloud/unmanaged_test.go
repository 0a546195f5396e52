package cloud_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
)

// registered returns metrics registered in a registry of their own, and
// the registry.
func registered() (*cloud.Metrics, metrics.KubeRegistry) {
	m := cloud.NewMetrics(cloud.BuildInfo{})
	reg := metrics.NewKubeRegistry()
	reg.MustRegister(m.Collectors()...)
	reg.CustomMustRegister(m.CustomCollectors()...)
	return m, reg
}

// gauge reads the series name{labels} from reg; ok is false when absent.
func gauge(t *testing.T, reg metrics.KubeRegistry, name string, want map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue series
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// eventsOn lists the Events about the object name, as "Reason: message",
// each as many times as it was recorded.
func eventsOn(t *testing.T, client kubernetes.Interface, name string) []string {
	t.Helper()
	evs, err := client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == name {
			for range max(e.Count, 1) {
				out = append(out, e.Reason+": "+e.Message)
			}
		}
	}
	return out
}

// Nodes that are not VMs — labelled unmanaged, or matched by the selector
// — cost no vCenter call, are never written or re-queued, are reported
// present and running, get only what they already have from
// InstanceMetadata, and one NodeUnmanaged Event each.
func TestUnmanagedNodesAreLeftAlone(t *testing.T) {
	f := newFakeFleet("vcA")
	f["vcA"].SetReachability(backends.ConnDown, errors.New("dial tcp: connection refused"))
	f["vcA"].Fail(errors.New("dial tcp: connection refused"))
	addrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.7"}, {Type: v1.NodeHostName, Address: "metal-1"}}
	byLabel := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "metal-1", Labels: map[string]string{nodes.LabelUnmanaged: "true"}},
		Spec:       v1.NodeSpec{ProviderID: "metal://rack1/metal-1", Taints: uninitializedTaint()},
		Status:     v1.NodeStatus{Addresses: addrs, NodeInfo: v1.NodeSystemInfo{SystemUUID: uuidB}},
	}
	bySelector := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "metal-2", Labels: map[string]string{"node.example.com/metal": "true"}},
		Spec:       v1.NodeSpec{Taints: uninitializedTaint()},
	}
	ours := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vm-1"}, Spec: v1.NodeSpec{Taints: uninitializedTaint()},
		Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: uuidA}}}
	client := stateClient(byLabel, bySelector, ours)
	sel, err := labels.Parse("node.example.com/metal=true")
	if err != nil {
		t.Fatal(err)
	}
	m, reg := registered()
	c := f.start(t, f.yaml("", "vcA"), client, func(o *cloud.Options) {
		o.UnmanagedNodeSelector, o.Metrics, o.RecoveryPoll = sel, m, 20*time.Millisecond
	})
	ctx := t.Context()
	// Inventory answers are calls too: none may be made.
	calls := f["vcA"].Calls() + f["vcA"].CachedCalls()
	for range 3 {
		for _, n := range []*v1.Node{byLabel, bySelector} {
			if ok, err := c.InstanceExists(ctx, n); !ok || err != nil {
				t.Fatalf("InstanceExists(%s) = %v, %v; want true, nil", n.Name, ok, err)
			}
			if off, err := c.InstanceShutdown(ctx, n); off || err != nil {
				t.Fatalf("InstanceShutdown(%s) = %v, %v; want false, nil", n.Name, off, err)
			}
		}
		md, err := c.InstanceMetadata(ctx, byLabel)
		if err != nil || md == nil {
			t.Fatalf("InstanceMetadata(%s) = %v, %v", byLabel.Name, md, err)
		}
		if md.ProviderID != byLabel.Spec.ProviderID || !slices.Equal(md.NodeAddresses, addrs) || len(md.AdditionalLabels) > 0 || md.Zone != "" || md.Region != "" || md.InstanceType != "" {
			t.Fatalf("InstanceMetadata(%s) = %+v; want its own providerID and addresses, nothing of ours", byLabel.Name, md)
		}
		// No providerID, still tainted: nil, which the cloud-node
		// controller skips quietly (it initializes no Node without one).
		if md, err := c.InstanceMetadata(ctx, bySelector); md != nil || err != nil {
			t.Fatalf("InstanceMetadata(%s) = %+v, %v; want nil, nil", bySelector.Name, md, err)
		}
	}
	if got := f["vcA"].Calls() + f["vcA"].CachedCalls() - calls; got != 0 {
		t.Fatalf("%d vCenter calls for unmanaged Nodes; want 0", got)
	}
	if ok, err := c.InstanceExists(ctx, ours); err == nil {
		t.Fatalf("the managed Node with its vCenter down: InstanceExists = %v, nil; want an error", ok)
	}
	eventually(t, "nodes_unmanaged 2", func() bool {
		v, ok := gauge(t, reg, "cloudprovider_vsphere_nodes_unmanaged", nil)
		return ok && v == 2
	})
	// vcA comes back: the managed Node is re-queued, the unmanaged not.
	f["vcA"].Fail(nil)
	f["vcA"].SetReachability(backends.ConnUp, nil)
	eventually(t, "the managed Node to be re-queued", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, ours.Name, metav1.GetOptions{})
		return err == nil && n.Annotations[nodes.AnnotationLookupRetry] != ""
	})
	eventually(t, "a NodeUnmanaged Event on each", func() bool {
		return len(eventsOn(t, client, byLabel.Name)) > 0 && len(eventsOn(t, client, bySelector.Name)) > 0
	})
	time.Sleep(100 * time.Millisecond) // five polls more
	for _, n := range []*v1.Node{byLabel, bySelector} {
		got, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != n.ResourceVersion || len(got.Annotations) > 0 {
			t.Fatalf("unmanaged Node %s was written: %+v", n.Name, got.ObjectMeta)
		}
		evs := eventsOn(t, client, n.Name)
		if len(evs) != 1 || !strings.HasPrefix(evs[0], nodes.ReasonNodeUnmanaged+": ") {
			t.Fatalf("Events on %s: %q; want one %s", n.Name, evs, nodes.ReasonNodeUnmanaged)
		}
	}
	if evs := eventsOn(t, client, byLabel.Name); !strings.Contains(evs[0], "label "+nodes.LabelUnmanaged) {
		t.Fatalf("Event %q does not say why (the label)", evs[0])
	}
	if evs := eventsOn(t, client, bySelector.Name); !strings.Contains(evs[0], `selector "node.example.com/metal=true"`) {
		t.Fatalf("Event %q does not say why (the selector)", evs[0])
	}
	// No longer matched: the Node is looked up at the next ask.
	managed := bySelector.DeepCopy()
	managed.Labels = nil
	calls = f["vcA"].Calls() + f["vcA"].CachedCalls()
	_, _ = c.InstanceExists(ctx, managed)
	if f["vcA"].Calls()+f["vcA"].CachedCalls() == calls {
		t.Fatal("a Node no longer unmanaged was not looked up")
	}
}

// A Node stuck uninitialized is counted by why its InstanceMetadata
// failed, and gets a NodeUninitialized Event once past the threshold,
// again when the reason changes; a Node whose VM is found leaves the
// count.
func TestUninitializedNodesByReason(t *testing.T) {
	f := newFakeFleet("vcA", "vcB")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "found", uuidA), nil)
	tainted := func(name, uuid string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{Taints: uninitializedTaint()},
			Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{SystemUUID: uuid}}}
	}
	found, missing, waiting := tainted("found", uuidA), tainted("missing", uuidB), tainted("waiting", uuidC)
	client := stateClient(found, missing, waiting)
	m, reg := registered()
	c := f.start(t, f.yaml("", "vcA", "vcB"), client, func(o *cloud.Options) {
		o.Metrics, o.RecoveryPoll, o.UninitializedAfter = m, 20*time.Millisecond, time.Nanosecond
	})
	ctx := t.Context()
	if _, err := c.InstanceMetadata(ctx, found); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InstanceMetadata(ctx, missing); err == nil {
		t.Fatal("InstanceMetadata of a Node without a VM succeeded")
	}
	want := map[string]float64{nodes.UninitializedPending: 2, nodes.UninitializedNoVM: 1, nodes.ReasonLookupFailed: 0, nodes.ReasonDuplicateUUID: 0}
	eventually(t, "nodes_uninitialized by reason", func() bool {
		for r, n := range want {
			if v, ok := gauge(t, reg, "cloudprovider_vsphere_nodes_uninitialized", map[string]string{"reason": r}); !ok || v != n {
				return false
			}
		}
		return true
	})
	// uninitialized lists the NodeUninitialized Events on the Node name
	// that name reason.
	uninitialized := func(name, reason string) []string {
		return slices.DeleteFunc(eventsOn(t, client, name), func(e string) bool {
			return !strings.HasPrefix(e, nodes.ReasonNodeUninitialized+": ") || !strings.Contains(e, "("+reason+")")
		})
	}
	eventually(t, "a NodeUninitialized Event on missing", func() bool { return len(uninitialized("missing", nodes.UninitializedNoVM)) == 1 })
	// vcB fails: the reason changes, and a second Event says so.
	f["vcB"].Fail(errors.New("dial tcp: connection refused"))
	if _, err := c.InstanceMetadata(ctx, missing); err == nil {
		t.Fatal("InstanceMetadata with vcB failing succeeded")
	}
	eventually(t, "a second NodeUninitialized Event, naming the new reason", func() bool { return len(uninitialized("missing", nodes.ReasonLookupFailed)) == 1 })
	v, _ := gauge(t, reg, "cloudprovider_vsphere_nodes_uninitialized", map[string]string{"reason": nodes.UninitializedNoVM})
	if v != 0 {
		t.Fatalf("nodes_uninitialized{reason=%s} = %v after the reason changed; want 0", nodes.UninitializedNoVM, v)
	}
	time.Sleep(100 * time.Millisecond) // five polls: no repeat
	if evs := eventsOn(t, client, "waiting"); len(evs) != 1 || !strings.Contains(evs[0], "("+nodes.UninitializedPending+")") {
		t.Fatalf("Events on waiting: %q; want one NodeUninitialized (Pending)", evs)
	}
	for _, r := range []string{nodes.UninitializedNoVM, nodes.ReasonLookupFailed} {
		if evs := uninitialized("missing", r); len(evs) != 1 {
			t.Fatalf("NodeUninitialized (%s) on missing: %q; want it once", r, evs)
		}
	}
}

// Twins held in two vCenters are counted at scrape time, from the
// duplicate index.
func TestDuplicateUUIDsGauge(t *testing.T) {
	f := newFakeFleet("vcA", "vcB")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "node-a", uuidA), nil)
	f["vcA"].Add(fakeVM("dc0", "vm-2", "node-b", uuidB), nil)
	m, reg := registered()
	f.start(t, f.yaml("", "vcA", "vcB"), nil, func(o *cloud.Options) {
		o.Metrics = m
		o.DuplicateScan = 20 * time.Millisecond
	})
	eventually(t, "duplicate_uuids 0", func() bool {
		v, ok := gauge(t, reg, "cloudprovider_vsphere_duplicate_uuids", nil)
		return ok && v == 0
	})
	f["vcB"].Add(fakeVM("dc1", "vm-9", "clone-of-a", uuidA), nil)
	f["vcB"].Add(fakeVM("dc1", "vm-8", "clone-of-b", uuidB), nil)
	eventually(t, "duplicate_uuids 2", func() bool {
		v, ok := gauge(t, reg, "cloudprovider_vsphere_duplicate_uuids", nil)
		return ok && v == 2
	})
	f["vcB"].Remove("vm-9")
	eventually(t, "duplicate_uuids 1", func() bool {
		v, ok := gauge(t, reg, "cloudprovider_vsphere_duplicate_uuids", nil)
		return ok && v == 1
	})
}

// A vCenter going down and coming back is an Event on the CCM's object.
func TestVCenterDownAndUpEvents(t *testing.T) {
	f := newFakeFleet("vcA")
	client := stateClient()
	obj := &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "kube-system", Name: "ccm-0"}
	f.start(t, f.yaml("", "vcA"), client, func(o *cloud.Options) { o.RecoveryPoll, o.EventObject = 20*time.Millisecond, obj })
	vcEvents := func() []string {
		var out []string
		for _, e := range eventsOn(t, client, obj.Name) {
			if strings.HasPrefix(e, "VCenter") {
				out = append(out, e)
			}
		}
		return out
	}
	f["vcA"].SetReachability(backends.ConnUp, nil)
	time.Sleep(100 * time.Millisecond)
	if evs := vcEvents(); len(evs) != 0 {
		t.Fatalf("Events while vcA is up: %q", evs)
	}
	f["vcA"].SetReachability(backends.ConnDown, errors.New("dial tcp: connection refused"))
	eventually(t, "VCenterDown", func() bool {
		evs := vcEvents()
		return len(evs) == 1 && strings.HasPrefix(evs[0], nodes.ReasonVCenterDown+": vcenter vcA is down") && strings.Contains(evs[0], "connection refused")
	})
	f["vcA"].SetReachability(backends.ConnUp, nil)
	eventually(t, "VCenterUp", func() bool {
		evs := vcEvents()
		return len(evs) == 2 && slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, nodes.ReasonVCenterUp+": vcenter vcA is back") })
	})
}
