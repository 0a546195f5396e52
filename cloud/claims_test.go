package cloud_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/instances"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// The two opt-out keys: the one no kubelet may set (NodeRestriction
// forbids kubelets every label under node-restriction.kubernetes.io/),
// and the legacy one, which a kubelet sets with --node-labels.
const (
	unmanagedKey = "node-restriction.kubernetes.io/vsphere-federated-ccm-unmanaged"
	legacyKey    = "vsphere-federated-ccm.io/unmanaged"
)

// holderNode is a Node the cloud-node controller initialized with the VM
// of BIOS UUID bios (its kubelet reports the system UUID in its own byte
// order), whose Ready condition is ready since since.
func holderNode(name, bios string, ready v1.ConditionStatus, since time.Time) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec:       v1.NodeSpec{ProviderID: discovery.ProviderID(bios)},
		Status: v1.NodeStatus{
			NodeInfo:   v1.NodeSystemInfo{SystemUUID: discovery.SwapByteOrder(bios)},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since)}},
		},
	}
}

// newcomerNode is a Node as its kubelet registers it: tainted, Ready,
// with the keys set.
func newcomerNode(name string, set func(*v1.Node)) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec:       v1.NodeSpec{Taints: uninitializedTaint()},
		Status:     v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}},
	}
	set(n)
	return n
}

// eventWith waits for an Event on the object name of reason whose message
// names each of words.
func eventWith(t *testing.T, client kubernetes.Interface, name, reason string, words ...string) {
	t.Helper()
	var seen []string
	eventually(t, "a "+reason+" Event on "+name+" naming "+strings.Join(words, ", "), func() bool {
		seen = eventsOn(t, client, name)
		return slices.ContainsFunc(seen, func(e string) bool {
			if !strings.HasPrefix(e, reason+": ") {
				return false
			}
			for _, w := range words {
				if !strings.Contains(e, w) {
					return false
				}
			}
			return true
		})
	})
}

// noEvent fails if the object name has an Event of reason.
func noEvent(t *testing.T, client kubernetes.Interface, name, reason string) {
	t.Helper()
	for _, e := range eventsOn(t, client, name) {
		if strings.HasPrefix(e, reason+": ") {
			t.Fatalf("Event on %s: %q; want no %s", name, e, reason)
		}
	}
}

func conflicts(t *testing.T, reg metrics.KubeRegistry, outcome string) float64 {
	t.Helper()
	v, _ := seriesValue(t, reg, "cloudprovider_vsphere_node_identity_conflicts_total", "outcome", outcome, true)
	return v
}

// A kubelet sets its own providerID and reports its own system UUID: one
// that claims the VM of a live Node — by providerID, or by system UUID in
// either byte order — is not given that VM's identity. Its InstanceMetadata
// fails (the Node keeps its uninitialized taint), both Nodes get an Event
// naming the other, the conflict is counted once however often the
// controller retries, and the Node is counted uninitialized for that
// reason. The holder itself is served as before.
func TestImpostorDoesNotTakeALiveVMsIdentity(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*v1.Node)
	}{
		{"providerID", func(n *v1.Node) { n.Spec.ProviderID = discovery.ProviderID(uuidA) }},
		{"providerID in the kubelet's byte order", func(n *v1.Node) { n.Spec.ProviderID = discovery.ProviderID(discovery.SwapByteOrder(uuidA)) }},
		{"system UUID in the kubelet's byte order", func(n *v1.Node) { n.Status.NodeInfo.SystemUUID = discovery.SwapByteOrder(uuidA) }},
		{"system UUID in the BIOS byte order", func(n *v1.Node) { n.Status.NodeInfo.SystemUUID = strings.ToUpper(uuidA) }},
		// The legacy opt-out label, which the kubelet set itself, opts it
		// out of nothing: it is looked up, and refused, as any other.
		{"providerID, with the legacy unmanaged label", func(n *v1.Node) {
			n.Spec.ProviderID = discovery.ProviderID(uuidA)
			n.Labels = map[string]string{legacyKey: "true"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFleet("vcA")
			f["vcA"].Add(fakeVM("dc0", "vm-1", "node-a", uuidA), nil)
			holder := holderNode("node-a", uuidA, v1.ConditionTrue, time.Now().Add(-time.Hour))
			impostor := newcomerNode("impostor", tc.set)
			client := stateClient(holder, impostor)
			m, reg := registered()
			c := f.start(t, f.yaml("", "vcA"), client, func(o *cloud.Options) {
				o.Metrics, o.RecoveryPoll, o.UninitializedAfter = m, 20*time.Millisecond, time.Nanosecond
			})
			ctx := t.Context()
			for range 3 { // the controller retries: one conflict
				md, err := c.InstanceMetadata(ctx, impostor)
				if err == nil {
					t.Fatalf("InstanceMetadata(impostor) = %+v, nil; want an error: node-a holds the VM and is Ready", md)
				}
				if !strings.Contains(err.Error(), "node-a") {
					t.Fatalf("InstanceMetadata(impostor): %v; want it to name the holder node-a", err)
				}
			}
			if md, err := c.InstanceMetadata(ctx, holder); err != nil || md.ProviderID != discovery.ProviderID(uuidA) {
				t.Fatalf("InstanceMetadata(holder) = %+v, %v; want its VM's identity", md, err)
			}
			eventWith(t, client, "impostor", nodes.ReasonNodeIdentityConflict, "node-a", "Ready")
			eventWith(t, client, "node-a", nodes.ReasonNodeIdentityConflict, "impostor")
			if got := conflicts(t, reg, "refused"); got != 1 {
				t.Fatalf("node_identity_conflicts_total{outcome=refused} = %v; want 1", got)
			}
			eventually(t, "nodes_uninitialized{reason=NodeIdentityConflict} 1", func() bool {
				v, ok := gauge(t, reg, "cloudprovider_vsphere_nodes_uninitialized", map[string]string{"reason": nodes.ReasonNodeIdentityConflict})
				return ok && v == 1
			})
			eventWith(t, client, "impostor", nodes.ReasonNodeUninitialized, "("+nodes.ReasonNodeIdentityConflict+")", "node-a")
		})
	}
}

// A VM re-registered under another Node name (a reinstall under a new
// host name): the old Node stays, NotReady. The new kubelet's Node is
// initialized once the old one has been NotReady for
// instances.ReplacedNodeGrace and the VM, powered on, reports through VMware
// Tools the new Node's host name, not the old one's; until then, or when
// the VM's guest still calls itself the old Node (an impostor claiming a
// VM whose kubelet is down), it is refused as any other claim. The old
// Node is left as it is: its VM exists, so nothing deletes it.
func TestReplacedNode(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ready    v1.ConditionStatus
		ago      time.Duration // since the holder's Ready condition changed
		guest    string        // the VM's guest host name now
		off      bool          // the VM is powered off
		admitted bool
	}{
		{name: "old Node NotReady past the grace, the VM's guest is the new Node", ready: v1.ConditionUnknown, ago: 10 * time.Minute, guest: "node-a2", admitted: true},
		{name: "the guest's FQDN", ready: v1.ConditionFalse, ago: 10 * time.Minute, guest: "NODE-A2.example.com", admitted: true},
		{name: "old Node NotReady within the grace", ready: v1.ConditionUnknown, ago: time.Minute, guest: "node-a2"},
		{name: "the VM's guest is still the old Node", ready: v1.ConditionUnknown, ago: 10 * time.Minute, guest: "node-a"},
		{name: "no guest host name", ready: v1.ConditionUnknown, ago: 10 * time.Minute, guest: ""},
		{name: "the VM powered off", ready: v1.ConditionUnknown, ago: 10 * time.Minute, guest: "node-a2", off: true},
		{name: "old Node Ready", ready: v1.ConditionTrue, ago: 10 * time.Minute, guest: "node-a2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFleet("vcA")
			vm := fakeVM("dc0", "vm-1", "node-a", uuidA)
			vm.GuestHostName = tc.guest
			if tc.off {
				vm.PowerState = "poweredOff"
			}
			f["vcA"].Add(vm, nil)
			old := holderNode("node-a", uuidA, tc.ready, time.Now().Add(-tc.ago))
			newcomer := newcomerNode("node-a2", func(n *v1.Node) { n.Status.NodeInfo.SystemUUID = discovery.SwapByteOrder(uuidA) })
			client := stateClient(old, newcomer)
			m, reg := registered()
			c := f.start(t, f.yaml("", "vcA"), client, func(o *cloud.Options) { o.Metrics = m })
			md, err := c.InstanceMetadata(t.Context(), newcomer)
			if !tc.admitted {
				if err == nil {
					t.Fatalf("InstanceMetadata(node-a2) = %+v, nil; want an error: node-a holds the VM", md)
				}
				eventWith(t, client, "node-a2", nodes.ReasonNodeIdentityConflict, "node-a")
				eventWith(t, client, "node-a", nodes.ReasonNodeIdentityConflict, "node-a2")
				if got := conflicts(t, reg, "refused"); got != 1 {
					t.Fatalf("node_identity_conflicts_total{outcome=refused} = %v; want 1", got)
				}
				return
			}
			if err != nil || md == nil || md.ProviderID != discovery.ProviderID(uuidA) {
				t.Fatalf("InstanceMetadata(node-a2) = %+v, %v; want the VM's identity (node-a replaced)", md, err)
			}
			eventWith(t, client, "node-a2", instances.ReasonNodeReplaced, "node-a")
			eventWith(t, client, "node-a", instances.ReasonNodeReplaced, "node-a2", "delete")
			if got := conflicts(t, reg, "replaced"); got != 1 {
				t.Fatalf("node_identity_conflicts_total{outcome=replaced} = %v; want 1", got)
			}
			noEvent(t, client, "node-a2", nodes.ReasonNodeIdentityConflict)
			// The old Node's VM exists: it is kept, for its operator to
			// delete.
			if ok, err := c.InstanceExists(t.Context(), old); !ok || err != nil {
				t.Fatalf("InstanceExists(node-a) = %v, %v; want true: its VM exists", ok, err)
			}
		})
	}
}

// The opt-out is a label no kubelet can set. The legacy key a kubelet
// can set (--node-labels) counts on a Node that an operator also gave the
// new key; alone, on a Node created since this version first ran (the
// cutoff), it opts out of nothing, and the Node gets a Warning saying
// which key to set.
func TestUnmanagedLabelKeys(t *testing.T) {
	if nodes.LabelUnmanaged != unmanagedKey || nodes.LabelUnmanagedLegacy != legacyKey {
		t.Fatalf("LabelUnmanaged = %q, LabelUnmanagedLegacy = %q; want %q, %q", nodes.LabelUnmanaged, nodes.LabelUnmanagedLegacy, unmanagedKey, legacyKey)
	}
	f := newFakeFleet("vcA")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "vm-1", uuidA), nil)
	metalAddrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.7"}}
	metal := func(name string, labels map[string]string) *v1.Node {
		return &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       v1.NodeSpec{ProviderID: "metal://rack1/" + name, Taints: uninitializedTaint()},
			Status:     v1.NodeStatus{Addresses: metalAddrs},
		}
	}
	newKey := metal("metal-new", map[string]string{unmanagedKey: "true"})
	both := metal("metal-both", map[string]string{unmanagedKey: "true", legacyKey: "true"})
	// A VM's kubelet registered with --node-labels=<legacy key>=true and
	// addresses of its choosing.
	kubeletSet := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-1", Labels: map[string]string{legacyKey: "true"}, CreationTimestamp: metav1.Now()},
		Spec:       v1.NodeSpec{Taints: uninitializedTaint()},
		Status:     v1.NodeStatus{Addresses: metalAddrs, NodeInfo: v1.NodeSystemInfo{SystemUUID: discovery.SwapByteOrder(uuidA)}},
	}
	client := stateClient(newKey, both, kubeletSet)
	seedCutoff(t, client, time.Now().Add(-time.Hour))
	c := f.start(t, f.yaml("", "vcA"), client)
	ctx := t.Context()
	eventually(t, "the cutoff read: vm-1's legacy key ignored", func() bool {
		_, _ = c.InstanceExists(ctx, kubeletSet)
		return slices.ContainsFunc(eventsOn(t, client, "vm-1"), func(e string) bool {
			return strings.HasPrefix(e, nodes.ReasonUnmanagedLabelIgnored+": ")
		})
	})
	calls := f["vcA"].Calls() + f["vcA"].CachedCalls()
	for _, n := range []*v1.Node{newKey, both} {
		md, err := c.InstanceMetadata(ctx, n)
		if err != nil || md == nil || md.ProviderID != n.Spec.ProviderID || !slices.Equal(md.NodeAddresses, metalAddrs) {
			t.Fatalf("InstanceMetadata(%s) = %+v, %v; want its own providerID and addresses (unmanaged)", n.Name, md, err)
		}
		if why := c.Unmanaged(n); !strings.Contains(why, unmanagedKey) {
			t.Fatalf("Unmanaged(%s) = %q; want it to name %s", n.Name, why, unmanagedKey)
		}
	}
	if got := f["vcA"].Calls() + f["vcA"].CachedCalls() - calls; got != 0 {
		t.Fatalf("%d vCenter calls for unmanaged Nodes; want 0", got)
	}
	if why := c.Unmanaged(kubeletSet); why != "" {
		t.Fatalf("Unmanaged(vm-1) = %q; want \"\": only the kubelet set the legacy key", why)
	}
	md, err := c.InstanceMetadata(ctx, kubeletSet)
	if err != nil || md == nil || md.ProviderID != discovery.ProviderID(uuidA) || slices.Equal(md.NodeAddresses, metalAddrs) {
		t.Fatalf("InstanceMetadata(vm-1) = %+v, %v; want its VM's providerID and addresses, not its own", md, err)
	}
	eventWith(t, client, "vm-1", nodes.ReasonUnmanagedLabelIgnored, legacyKey, unmanagedKey)
	eventWith(t, client, "metal-new", nodes.ReasonNodeUnmanaged, unmanagedKey)
	noEvent(t, client, "metal-both", nodes.ReasonUnmanagedLabelIgnored)
}

// What the unmanaged check remembers of a Node (its NodeUnmanaged Event
// recorded), and the claims check of a conflict (counted once), goes
// with the Node: Nodes that come and go leave nothing.
func TestUnmanagedForgetsDeletedNodes(t *testing.T) {
	f := newFakeFleet("vcA")
	f["vcA"].Add(fakeVM("dc0", "vm-1", "node-a", uuidA), nil)
	var metal []*v1.Node
	for _, name := range []string{"metal-1", "metal-2", "metal-3"} {
		metal = append(metal, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{nodes.LabelUnmanaged: "true"}}})
	}
	holder := holderNode("node-a", uuidA, v1.ConditionTrue, time.Now())
	impostor := newcomerNode("impostor", func(n *v1.Node) { n.Spec.ProviderID = discovery.ProviderID(uuidA) })
	client := stateClient(append([]*v1.Node{holder, impostor}, metal...)...)
	c := f.start(t, f.yaml("", "vcA"), client)
	ctx := t.Context()
	for _, n := range metal {
		if ok, err := c.InstanceExists(ctx, n); !ok || err != nil {
			t.Fatalf("InstanceExists(%s) = %v, %v", n.Name, ok, err)
		}
	}
	if got := c.AnnouncedUnmanaged(); got != len(metal) {
		t.Fatalf("%d Nodes announced; want %d", got, len(metal))
	}
	if _, err := c.InstanceMetadata(ctx, impostor); err == nil {
		t.Fatal("InstanceMetadata(impostor) succeeded; want a conflict")
	}
	if got := c.CountedConflicts(); got != 1 {
		t.Fatalf("%d conflicts remembered; want 1", got)
	}
	metal = append(metal, impostor)
	// A fake clientset's watch sees only what happens once it is open.
	eventually(t, "the Node informer watching", func() bool {
		return slices.ContainsFunc(client.Actions(), func(a k8stesting.Action) bool {
			return a.GetVerb() == "watch" && a.GetResource().Resource == "nodes"
		})
	})
	for _, n := range metal {
		if err := client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the deleted Nodes forgotten", func() bool { return c.AnnouncedUnmanaged() == 0 && c.CountedConflicts() == 0 })
}
