package cloud_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// driftWorld is a provider over fake vCenters vcA and vcB, with
// inventories, zone and region categories, started from a config file
// with a Node client: the nodes owner's pass runs.
type driftWorld struct {
	f      fakeFleet
	client *fake.Clientset
	c      *cloud.Cloud
	reg    metrics.KubeRegistry
	path   string
	base   string // the labels section
}

const driftBase = "labels:\n  zone: zone\n  region: region\n"

func newDriftWorld(t *testing.T, nodesSection string, nodes ...*v1.Node) *driftWorld {
	t.Helper()
	return newDriftWorldBase(t, driftBase, nodesSection, nodes...)
}

// newDriftWorldBase is newDriftWorld with base (the labels section) in
// place of driftBase.
func newDriftWorldBase(t *testing.T, base, nodesSection string, nodes ...*v1.Node) *driftWorld {
	t.Helper()
	w := &driftWorld{f: newFakeFleet("vcA", "vcB"), client: stateClient(nodes...), path: filepath.Join(t.TempDir(), "vsphere.conf"), base: base}
	for _, b := range w.f {
		b.Inventoried()
	}
	w.writeConfig(t, nodesSection)
	m := cloud.NewMetrics(cloud.BuildInfo{})
	w.reg = metrics.NewKubeRegistry()
	w.reg.MustRegister(m.Collectors()...)
	opts := w.f.options()
	opts.Metrics = m
	opts.RecoveryPoll = 10 * time.Millisecond
	// Only an inventory change, a config change or a Node change makes
	// a pass: every change below is seen through one of them.
	opts.NodeResync = time.Hour
	// The periodic checks list each vCenter's datacenters (a request);
	// these tests count the pass's requests: none.
	opts.ProblemCheckInterval = -1
	c, err := cloud.NewFromFile(w.path, opts)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	startLeader(c, w.client, stop)
	t.Cleanup(func() { close(stop); stopCloud(t, c) })
	w.c = c
	return w
}

func (w *driftWorld) writeConfig(t *testing.T, nodesSection string) {
	writeAtomically(t, w.path, w.f.yaml("", "vcA", "vcB")+w.base+nodesSection)
}

// calls are the backend calls made so far, in every fake vCenter.
func (w *driftWorld) calls() (n int64) {
	for _, b := range w.f {
		n += b.Calls()
	}
	return n
}

func (w *driftWorld) node(t *testing.T, name string) *v1.Node {
	t.Helper()
	n, err := w.client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// events are the messages of the Events of reason recorded, each as
// many times as it was counted.
func (w *driftWorld) events(t *testing.T, reason string) []string {
	t.Helper()
	evs, err := w.client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.Reason == reason {
			for range max(e.Count, 1) {
				out = append(out, e.Message)
			}
		}
	}
	return out
}

func (w *driftWorld) waitEvent(t *testing.T, reason, contains string) {
	t.Helper()
	eventually(t, "a "+reason+" Event saying "+contains, func() bool {
		return slices.ContainsFunc(w.events(t, reason), func(m string) bool { return strings.Contains(m, contains) })
	})
}

// gauge is the value of the series name{labels...} (pairs), 0 if absent.
func (w *driftWorld) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := w.reg.Gather()
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
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func (w *driftWorld) waitValue(t *testing.T, want float64, name string, labels ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s%v to be %v", name, labels, want), func() bool {
		return w.value(t, name, labels...) == want
	})
}

func (w *driftWorld) waitLabel(t *testing.T, node, key, want string) {
	t.Helper()
	eventually(t, node+"'s label "+key+" to be "+want, func() bool {
		v, ok := w.node(t, node).Labels[key]
		return want == "" && !ok || ok && v == want
	})
}

// placedVM is node-a's VM on host esx-1 of cluster c-1, disk.EnableUUID
// set.
func placedVM(dc, host, cluster string) backends.VM {
	vm := fakeVM(dc, "vm-1", "node-a", uuidA)
	vm.HostName, vm.Cluster, vm.DiskEnableUUID = host, cluster, "TRUE"
	vm.ResourcePoolPath = "/" + dc + "/host/" + cluster + "/Resources"
	return vm
}

func tags(zone, region string) map[string]string {
	out := map[string]string{}
	if zone != "" {
		out["zone"] = zone
	}
	if region != "" {
		out["region"] = region
	}
	return out
}

// initializedNode is node-a as initialized in vcA's dc0, zone z-1 of
// region r-1 (with the beta zone label an old cloud-node controller set).
func initializedNode() *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{
		nodes.LabelVCenter: "vcA", nodes.LabelServer: "vca.example.com", nodes.LabelDatacenter: "dc0",
		v1.LabelTopologyZone: "z-1", v1.LabelTopologyRegion: "r-1", v1.LabelFailureDomainBetaZone: "z-1",
	}}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + uuidA}}
}

const (
	driftGauge   = "cloudprovider_vsphere_nodes_topology_drift"
	movesCounter = "cloudprovider_vsphere_nodes_moves_total"
	diskGauge    = "cloudprovider_vsphere_nodes_disk_uuid_disabled"
	missingGauge = "cloudprovider_vsphere_nodes_zone_tag_missing"
	updatesCount = "cloudprovider_vsphere_node_label_updates_total"
)

// A VM moving between hosts, clusters, zones, datacenters and vCenters:
// the Node's location and placement labels follow it, zone and region
// drift is reported once per change and cleared when it matches again,
// and the topology labels are rewritten only once reconcileTopology is
// set (a config edit, no restart). The pass asks no vCenter anything.
func TestNodeFollowsItsVM(t *testing.T) {
	w := newDriftWorld(t, "nodes:\n  placementLabels: [host, cluster]\n", initializedNode())
	vcA, vcB := w.f["vcA"], w.f["vcB"]
	vcA.Add(placedVM("dc0", "esx-1", "c-1"), tags("z-1", "r-1"))
	w.waitLabel(t, "node-a", metadata.LabelHost, "esx-1")
	w.waitLabel(t, "node-a", metadata.LabelCluster, "c-1")
	if _, ok := w.node(t, "node-a").Labels[metadata.LabelResourcePool]; ok {
		t.Fatal("resource-pool label set; not asked for")
	}
	if got := w.events(t, nodes.ReasonTopologyDrift); len(got) != 0 {
		t.Fatalf("TopologyDrift Events %q with nothing moved", got)
	}
	calls := w.calls()

	// A vMotion to another host of the cluster.
	vcA.Add(placedVM("dc0", "esx-2", "c-1"), tags("z-1", "r-1"))
	w.waitLabel(t, "node-a", metadata.LabelHost, "esx-2")
	w.waitEvent(t, nodes.ReasonPlacementLabelsUpdated, "host esx-1 → esx-2")

	// To another cluster, in another zone: drift, the zone label kept.
	vcA.Add(placedVM("dc0", "esx-3", "c-2"), tags("z-2", "r-1"))
	w.waitLabel(t, "node-a", metadata.LabelCluster, "c-2")
	w.waitEvent(t, nodes.ReasonTopologyDrift, "zone z-1 → z-2")
	w.waitValue(t, 1, driftGauge, "kind", "zone")
	if w.value(t, driftGauge, "kind", "region") != 0 {
		t.Fatal("region drift reported; only the zone changed")
	}
	time.Sleep(100 * time.Millisecond) // passes: the drift is reported once
	if got := w.events(t, nodes.ReasonTopologyDrift); len(got) != 1 {
		t.Fatalf("TopologyDrift Events %q; want one", got)
	}
	if n := w.node(t, "node-a"); n.Labels[v1.LabelTopologyZone] != "z-1" || n.Labels[v1.LabelFailureDomainBetaZone] != "z-1" {
		t.Fatalf("zone labels %v rewritten; reconcileTopology is off", n.Labels)
	}

	// Back: cleared.
	vcA.Add(placedVM("dc0", "esx-1", "c-1"), tags("z-1", "r-1"))
	w.waitEvent(t, nodes.ReasonTopologyDriftCleared, "match")
	w.waitValue(t, 0, driftGauge, "kind", "zone")

	// To another datacenter of vcA: the location labels follow.
	vcA.Add(placedVM("dc1", "esx-4", "c-4"), tags("z-1", "r-1"))
	w.waitLabel(t, "node-a", nodes.LabelDatacenter, "dc1")
	w.waitEvent(t, nodes.ReasonTopologyDrift, "datacenter dc0 → dc1")
	w.waitValue(t, 1, movesCounter, "kind", "datacenter")

	// To vcB (a cross-vCenter vMotion): gone from vcA, then in vcB.
	vcA.Remove("vm-1")
	vcB.Add(placedVM("dc0", "esx-9", "c-9"), tags("z-1", "r-1"))
	w.waitLabel(t, "node-a", nodes.LabelVCenter, "vcB")
	w.waitLabel(t, "node-a", nodes.LabelServer, "vcb.example.com")
	w.waitLabel(t, "node-a", nodes.LabelDatacenter, "dc0")
	w.waitEvent(t, nodes.ReasonTopologyDrift, "vcenter vcA → vcB")
	w.waitValue(t, 1, movesCounter, "kind", "vcenter")

	// Retagged into z-3, then reconcileTopology set by an edit.
	vcB.Add(placedVM("dc0", "esx-9", "c-9"), tags("z-3", "r-1"))
	w.waitEvent(t, nodes.ReasonTopologyDrift, "zone z-1 → z-3")
	w.writeConfig(t, "nodes:\n  placementLabels: [host, cluster]\n  reconcileTopology: true\n")
	w.c.Reload(t.Context())
	w.waitLabel(t, "node-a", v1.LabelTopologyZone, "z-3")
	w.waitLabel(t, "node-a", v1.LabelFailureDomainBetaZone, "z-3")
	w.waitEvent(t, nodes.ReasonTopologyReconciled, "zone z-1 → z-3")
	w.waitValue(t, 0, driftGauge, "kind", "zone")
	w.waitValue(t, 1, updatesCount, "label", "zone")
	if _, ok := w.node(t, "node-a").Labels[v1.LabelFailureDomainBetaRegion]; ok {
		t.Fatal("beta region label added; only the labels the Node carries are rewritten")
	}

	// A hand edit of our labels is undone.
	if _, err := w.client.CoreV1().Nodes().Patch(t.Context(), "node-a", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"vsphere-federated-ccm.io/host":"edited"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitLabel(t, "node-a", metadata.LabelHost, "esx-9")

	// What CSI and the scheduler need: disk.EnableUUID, the tags.
	off := placedVM("dc0", "esx-9", "c-9")
	off.DiskEnableUUID = "FALSE"
	vcB.Add(off, tags("z-3", ""))
	w.waitEvent(t, nodes.ReasonDiskUUIDDisabled, "disk.EnableUUID")
	w.waitValue(t, 1, diskGauge)
	w.waitEvent(t, nodes.ReasonZoneTagMissing, `region (category "region")`)
	w.waitValue(t, 1, missingGauge, "category", "region")
	vcB.Add(placedVM("dc0", "esx-9", "c-9"), tags("z-3", "r-1"))
	w.waitValue(t, 0, diskGauge)
	w.waitValue(t, 0, missingGauge, "category", "region")

	// Unasked, a placement label is ours to remove.
	w.writeConfig(t, "nodes:\n  placementLabels: host\n")
	w.c.Reload(t.Context())
	w.waitLabel(t, "node-a", metadata.LabelCluster, "")
	if got := w.calls(); got != calls {
		t.Fatalf("%d backend calls since the Node was labelled; the pass must make none", got-calls)
	}
}

// A VM the inventories cannot place alone (a twin in the other vCenter)
// concludes nothing: no label is rewritten, no drift reported.
func TestTwinConcludesNoDrift(t *testing.T) {
	w := newDriftWorld(t, "", initializedNode())
	w.f["vcA"].Add(placedVM("dc0", "esx-1", "c-1"), tags("z-1", "r-1"))
	twin := placedVM("dc1", "esx-2", "c-2")
	twin.Ref.ID = "vm-2"
	w.f["vcB"].Add(twin, tags("z-2", "r-2"))
	time.Sleep(200 * time.Millisecond) // passes
	n := w.node(t, "node-a")
	if n.Labels[nodes.LabelVCenter] != "vcA" || n.Labels[nodes.LabelDatacenter] != "dc0" {
		t.Fatalf("labels %v rewritten from a twin", n.Labels)
	}
	if got := w.events(t, nodes.ReasonTopologyDrift); len(got) != 0 {
		t.Fatalf("TopologyDrift Events %q from a twin", got)
	}
}

// InstanceMetadata gives the placement labels asked for at
// initialization, each value a valid label value (a resource pool's path
// is encoded as the location labels are); a VM without a cluster gives
// no cluster label.
func TestPlacementLabelsAtInitialization(t *testing.T) {
	w := newDriftWorld(t, "nodes:\n  placementLabels: [host, cluster, resourcePool]\n")
	vm := placedVM("dc0", "esx-1", "")
	w.f["vcA"].Add(vm, tags("z-1", "r-1"))
	md, err := w.c.InstanceMetadata(t.Context(), providerNode("node-a", uuidA))
	if err != nil {
		t.Fatal(err)
	}
	got := md.AdditionalLabels
	if got[metadata.LabelHost] != "esx-1" || got[metadata.LabelResourcePool] != discovery.LabelValue(vm.ResourcePoolPath) ||
		!strings.HasPrefix(got[metadata.LabelResourcePool], "sha256-") {
		t.Fatalf("AdditionalLabels %v; want host esx-1 and the resource pool's path encoded", got)
	}
	if _, ok := got[metadata.LabelCluster]; ok {
		t.Fatalf("AdditionalLabels %v: a cluster label for a VM of a standalone host", got)
	}
}

// An unmanaged Node is left alone by the pass, even with a vsphere://
// providerID whose VM moved: only its managed neighbour, moved alike, is
// relabelled.
func TestDriftLeavesUnmanagedNodesAlone(t *testing.T) {
	unmanaged := initializedNode()
	unmanaged.Labels[nodes.LabelUnmanaged] = "true"
	managed := initializedNode()
	managed.Name, managed.Spec.ProviderID = "node-b", "vsphere://"+uuidB
	w := newDriftWorld(t, "", unmanaged, managed)
	w.f["vcB"].Add(placedVM("dc1", "esx-2", "c-2"), tags("z-1", "r-1"))
	vmB := fakeVM("dc1", "vm-2", "node-b", uuidB)
	w.f["vcB"].Add(vmB, tags("z-1", "r-1"))
	w.waitLabel(t, "node-b", nodes.LabelVCenter, "vcB")
	time.Sleep(100 * time.Millisecond) // a few more passes
	if n := w.node(t, "node-a"); n.Labels[nodes.LabelVCenter] != "vcA" || n.Labels[nodes.LabelDatacenter] != "dc0" {
		t.Fatalf("unmanaged Node relabelled: %v", n.Labels)
	}
	if got := w.events(t, nodes.ReasonTopologyDrift); len(got) != 1 {
		t.Fatalf("TopologyDrift Events %q, want node-b's alone", got)
	}
}
