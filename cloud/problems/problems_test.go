package problems

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

type recorded struct {
	mu     sync.Mutex
	events []string
}

func (r *recorded) Event(obj runtime.Object, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := "config"
	if n, ok := obj.(*v1.Node); ok {
		name = n.Name
	}
	r.events = append(r.events, fmt.Sprintf("%s %s %s: %s", name, eventType, reason, message))
}

func (r *recorded) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func parse(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func labelled(name string, labels map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

const twoVCenters = "labels:\n  zone: k8s-zone\n  region: k8s-region\nvcenter:\n" +
	"  vc1:\n    server: vc1.example.com\n    user: u\n    password: p\n    datacenters: [DC0, /F1/DC1]\n" +
	"  vc2:\n    server: vc2.example.com\n    user: u\n    password: p\n    datacenters: DC0\n"

// Each check finds what it should and nothing else; the gauge counts the
// findings; an Event when one appears and when it clears, not at every
// pass.
func TestDetector(t *testing.T) {
	cfg := parse(t, twoVCenters)
	in := Inputs{Config: cfg, Datacenters: map[string][]config.Datacenter{
		"vc1": {{Name: "DC0", ID: "datacenter-1", Path: "/DC0"}}, // /F1/DC1 missing
		// vc2 did not answer: not judged.
	}, Nodes: []*v1.Node{
		labelled("agree", map[string]string{v1.LabelTopologyZone: "z1", CSITopologyPrefix + "k8s-zone": "z1", v1.LabelTopologyRegion: "r1", CSITopologyPrefix + "k8s-region": "r1"}),
		labelled("moved", map[string]string{v1.LabelTopologyZone: "z1", CSITopologyPrefix + "k8s-zone": "z2", v1.LabelTopologyRegion: "r1"}),
		labelled("no-csi", map[string]string{v1.LabelTopologyZone: "z1"}),
	}}
	rec := &recorded{}
	m := NewMetrics()
	reg := metrics.NewKubeRegistry()
	reg.MustRegister(m.Collectors()...)
	d := New(func(context.Context) Inputs { return in }, rec, &v1.ObjectReference{Kind: "Lease"}, m, 0)
	found := d.Pass(t.Context())
	if len(found) != 2 {
		t.Fatalf("findings %+v; want a missing datacenter and one Node in disagreement", found)
	}
	events := rec.take()
	if len(events) != 2 ||
		!strings.Contains(events[0], `config Warning ProblemDetected: datacenter-missing: vcenter vc1 has no datacenter "/F1/DC1" (it has DC0)`) ||
		!strings.Contains(events[1], "moved Warning ProblemDetected: csi-topology-mismatch: Node moved: zone topology.kubernetes.io/zone=z1 but topology.csi.vmware.com/k8s-zone=z2") {
		t.Fatalf("events %q", events)
	}
	for check, want := range map[string]float64{CheckDatacenterMissing: 1, CheckCSITopology: 1, CheckCSIVCenterLimit: 0} {
		if got, _ := testutil.GetGaugeMetricValue(m.findings.WithLabelValues(check)); got != want {
			t.Errorf("problems{check=%s} = %v; want %v", check, got, want)
		}
	}
	// Unchanged: no Event again.
	d.Pass(t.Context())
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("events %q at a pass that found the same", got)
	}
	// The Node relabelled: cleared.
	in.Nodes[1] = labelled("moved", map[string]string{v1.LabelTopologyZone: "z2", CSITopologyPrefix + "k8s-zone": "z2"})
	d.Pass(t.Context())
	if got := rec.take(); len(got) != 1 || !strings.Contains(got[0], "moved Normal ProblemCleared: csi-topology-mismatch") {
		t.Fatalf("events %q; want the Node's finding cleared", got)
	}
	if got, _ := testutil.GetGaugeMetricValue(m.findings.WithLabelValues(CheckCSITopology)); got != 0 {
		t.Fatalf("csi-topology-mismatch gauge %v after the fix", got)
	}
	// vc1 does not answer this pass: its missing datacenter is not
	// judged, and stands (no Cleared, then Detected again, at a blip).
	delete(in.Datacenters, "vc1")
	if found := d.Pass(t.Context()); len(found) != 1 || found[0].Check != CheckDatacenterMissing {
		t.Fatalf("findings %+v with vc1 silent; want its missing datacenter standing", found)
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("events %q with vc1 silent", got)
	}
	// The config no longer names the datacenter: cleared, answer or not.
	in.Config = parse(t, strings.Replace(twoVCenters, "datacenters: [DC0, /F1/DC1]", "datacenters: [DC0]", 1))
	if found := d.Pass(t.Context()); len(found) != 0 {
		t.Fatalf("findings %+v once the config names DC0 only", found)
	}
	if got := rec.take(); len(got) != 1 || !strings.Contains(got[0], "config Normal ProblemCleared: datacenter-missing: cleared (vcenter vc1 datacenter /F1/DC1)") {
		t.Fatalf("events %q; want the missing datacenter cleared", got)
	}
}

// More vCenters than the CSI driver serves: entries of one server count
// once.
func TestCSIVCenterLimit(t *testing.T) {
	yaml := "vcenter:\n"
	for i := range CSIVCenterLimit {
		yaml += fmt.Sprintf("  vc%d:\n    server: vc%d.example.com\n    user: u\n    password: p\n", i, i)
	}
	tenant := yaml + "  tenant:\n    server: vc0.example.com\n    user: v\n    password: q\n"
	if f := Detect(Inputs{Config: parse(t, tenant)}); len(f) != 0 {
		t.Fatalf("findings %+v for %d servers (one with two entries)", f, CSIVCenterLimit)
	}
	six := yaml + "  vc9:\n    server: vc9.example.com\n    user: u\n    password: p\n"
	f := Detect(Inputs{Config: parse(t, six)})
	if len(f) != 1 || f[0].Check != CheckCSIVCenterLimit || !strings.Contains(f[0].Message, "6 vCenters configured") {
		t.Fatalf("findings %+v; want the limit named", f)
	}
}

// One pass's cost at the bench's scale: 5,000 Nodes (every tenth
// disagreeing with CSI, every twentieth on an old VM), 10 vCenters of 2
// datacenters each.
func BenchmarkDetect(b *testing.B) {
	yaml := "labels:\n  zone: k8s-zone\n  region: k8s-region\nvcenter:\n"
	dcs := map[string][]config.Datacenter{}
	for i := range 10 {
		name := fmt.Sprintf("vc%d", i)
		yaml += fmt.Sprintf("  %s:\n    server: %s.example.com\n    user: u\n    password: p\n    datacenters: [DC0, DC1]\n", name, name)
		dcs[name] = []config.Datacenter{{Name: "DC0", ID: "datacenter-1", Path: "/DC0"}, {Name: "DC1", ID: "datacenter-2", Path: "/DC1"}}
	}
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		b.Fatal(err)
	}
	var nodes []*v1.Node
	vms := map[string]*NodeVM{}
	for i := range 5000 {
		csi := "z1"
		if i%10 == 0 {
			csi = "z2"
		}
		name := fmt.Sprintf("n%d", i)
		nodes = append(nodes, labelled(name, map[string]string{v1.LabelTopologyZone: "z1", CSITopologyPrefix + "k8s-zone": csi, v1.LabelTopologyRegion: "r1"}))
		hw := "vmx-19"
		if i%20 == 1 {
			hw = "vmx-13"
		}
		vms[name] = &NodeVM{VCenter: fmt.Sprintf("vc%d", i%10), Name: name, ID: fmt.Sprintf("vm-%d", i), HardwareVersion: hw}
	}
	// Each vCenter's login lacks a privilege on one datacenter.
	privs := map[string]backends.PrivilegeReport{}
	for i := range 10 {
		privs[fmt.Sprintf("vc%d", i)] = backends.PrivilegeReport{User: "ccm", Missing: []backends.MissingOn{{Entity: "datacenter DC1", Privileges: []string{"System.Read"}}}}
	}
	in := Inputs{Config: cfg, Datacenters: dcs, Nodes: nodes, VMs: vms, Privileges: privs}
	b.ReportAllocs()
	for b.Loop() {
		// 500 zones disagreeing with CSI, 250 old VMs, 10 vCenters
		// lacking a privilege, and more vCenters than CSI serves.
		if f := Detect(in); len(f) != 761 {
			b.Fatalf("%d findings; want 761", len(f))
		}
	}
}

// A Node's VM below the CSI driver's hardware version is a finding on
// the Node naming the version and the minimum; at or above it, or not
// known, none. A Node memory cannot place this pass keeps its finding;
// an upgrade clears it.
func TestHardwareVersion(t *testing.T) {
	cfg := parse(t, twoVCenters)
	old, fine, odd := labelled("old", nil), labelled("fine", nil), labelled("odd", nil)
	in := Inputs{Config: cfg, Nodes: []*v1.Node{old, fine, odd}, VMs: map[string]*NodeVM{
		"old":  {VCenter: "vc1", Name: "old-vm", ID: "vm-1", HardwareVersion: "vmx-13"},
		"fine": {VCenter: "vc1", Name: "fine-vm", ID: "vm-2", HardwareVersion: "vmx-15"},
		"odd":  {VCenter: "vc2", Name: "odd-vm", ID: "vm-3"},
	}}
	rec := &recorded{}
	m := NewMetrics()
	metrics.NewKubeRegistry().MustRegister(m.Collectors()...)
	d := New(func(context.Context) Inputs { return in }, rec, &v1.ObjectReference{Kind: "Lease"}, m, 0)
	found := d.Pass(t.Context())
	if len(found) != 1 || found[0].Check != CheckHardwareVersion || found[0].Node != old ||
		!strings.Contains(found[0].Message, `VM "old-vm" (vm-1, vcenter vc1) has virtual hardware vmx-13; the vSphere CSI driver needs vmx-15 or later`) {
		t.Fatalf("findings %+v; want Node old's VM at vmx-13 below vmx-15", found)
	}
	if got := rec.take(); len(got) != 1 || !strings.HasPrefix(got[0], "old Warning ProblemDetected: hardware-version: ") {
		t.Fatalf("events %q", got)
	}
	// Not placed from memory this pass: nothing concluded, no Event.
	in.VMs["old"] = nil
	if found := d.Pass(t.Context()); len(found) != 1 {
		t.Fatalf("findings %+v with the VM unplaced; want the finding standing", found)
	}
	if got, _ := testutil.GetGaugeMetricValue(m.findings.WithLabelValues(CheckHardwareVersion)); got != 1 {
		t.Fatalf("hardware-version gauge %v with the VM unplaced; want 1", got)
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("events %q with the VM unplaced", got)
	}
	in.VMs["old"] = &NodeVM{VCenter: "vc1", Name: "old-vm", ID: "vm-1", HardwareVersion: "vmx-19"}
	if found := d.Pass(t.Context()); len(found) != 0 {
		t.Fatalf("findings %+v after the upgrade", found)
	}
	if got := rec.take(); len(got) != 1 || !strings.HasPrefix(got[0], "old Normal ProblemCleared: hardware-version") {
		t.Fatalf("events %q; want the finding cleared", got)
	}
}

// A vCenter whose login lacks privileges is one finding naming them and
// the entity; a vCenter that gave no answer (no session) keeps its
// finding; one that answers with nothing missing clears it.
func TestMissingPrivileges(t *testing.T) {
	cfg := parse(t, twoVCenters)
	lacking := backends.PrivilegeReport{User: "VSPHERE.LOCAL\\ccm", Missing: []backends.MissingOn{{Entity: "datacenter DC0", Privileges: []string{"System.Read"}}}}
	in := Inputs{Config: cfg, Privileges: map[string]backends.PrivilegeReport{"vc1": lacking, "vc2": {User: "u"}}}
	rec := &recorded{}
	m := NewMetrics()
	metrics.NewKubeRegistry().MustRegister(m.Collectors()...)
	d := New(func(context.Context) Inputs { return in }, rec, &v1.ObjectReference{Kind: "Lease"}, m, 0)
	found := d.Pass(t.Context())
	if len(found) != 1 || found[0].Check != CheckMissingPrivileges ||
		!strings.Contains(found[0].Message, `vcenter vc1: user VSPHERE.LOCAL\ccm lacks System.Read on datacenter DC0`) {
		t.Fatalf("findings %+v; want vc1's login lacking System.Read on DC0", found)
	}
	if got := rec.take(); len(got) != 1 || !strings.HasPrefix(got[0], "config Warning ProblemDetected: missing-privileges: vcenter vc1") {
		t.Fatalf("events %q", got)
	}
	// No session on vc1 this pass: unknown, the finding stands.
	delete(in.Privileges, "vc1")
	if found := d.Pass(t.Context()); len(found) != 1 {
		t.Fatalf("findings %+v with vc1 unknown; want its finding standing", found)
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("events %q with vc1 unknown", got)
	}
	if got, _ := testutil.GetGaugeMetricValue(m.findings.WithLabelValues(CheckMissingPrivileges)); got != 1 {
		t.Fatalf("missing-privileges gauge %v with vc1 unknown; want 1", got)
	}
	in.Privileges["vc1"] = backends.PrivilegeReport{User: "VSPHERE.LOCAL\\ccm"}
	if found := d.Pass(t.Context()); len(found) != 0 {
		t.Fatalf("findings %+v after the grant", found)
	}
	if got := rec.take(); len(got) != 1 || !strings.Contains(got[0], "config Normal ProblemCleared: missing-privileges: cleared (vcenter vc1)") {
		t.Fatalf("events %q; want the finding cleared", got)
	}
}
