// Package problems runs, all the time, the read-only checks an operator
// would otherwise run on demand (validate, diagnose) for what breaks a
// vSphere cluster later: configured datacenters that do not exist, Nodes
// whose zone or region disagrees with the vSphere CSI driver's topology
// labels, more vCenters than the CSI driver serves, Nodes whose VM's
// virtual hardware is older than the CSI driver needs, a login lacking
// privileges the CCM needs. Each check is a gauge (how many findings)
// and, when a finding appears or clears, an Event. From memory where it
// can: a datacenter list and a privilege read per vCenter per pass, on
// the session it has, are its only requests.
package problems

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// The checks, as the gauge's check label and the Events name them.
const (
	CheckDatacenterMissing = "datacenter-missing"
	CheckCSITopology       = "csi-topology-mismatch"
	CheckCSIVCenterLimit   = "csi-vcenter-limit"
	CheckHardwareVersion   = "hardware-version"
	CheckMissingPrivileges = "missing-privileges"
)

// AllChecks lists every check, for the gauge's series (0 when fine).
func AllChecks() []string {
	return []string{CheckDatacenterMissing, CheckCSITopology, CheckCSIVCenterLimit, CheckHardwareVersion, CheckMissingPrivileges}
}

// Event reasons: a finding appeared (Warning), or cleared (Normal).
const (
	ReasonProblemDetected = "ProblemDetected"
	ReasonProblemCleared  = "ProblemCleared"
)

// CSIVCenterLimit is the most vCenters the vSphere CSI driver's
// multi-vCenter topology serves.
const CSIVCenterLimit = 5

// CSIMinHardwareVersion is the oldest virtual hardware version (vmx-15,
// ESXi 6.7 U2) the vSphere CSI driver supports on the VMs of Nodes: on an
// older one it cannot attach volumes.
const CSIMinHardwareVersion = 15

// CSITopologyPrefix prefixes the vSphere CSI driver's Node topology
// labels: topology.csi.vmware.com/<tag category>.
const CSITopologyPrefix = "topology.csi.vmware.com/"

// Finding is one problem found: its check, what it is about (a vCenter,
// a Node, the config), and what to do.
type Finding struct {
	Check   string
	Subject string
	// Node is set when the finding is about a Node (its Events go there).
	Node *v1.Node
	// VCenter is set when the finding is about one vCenter's answer.
	VCenter string
	Message string
}

func (f Finding) key() string { return f.Check + "\x00" + f.Subject }

// Inputs are what one pass judges.
type Inputs struct {
	Config *config.Config
	// Datacenters lists each vCenter's datacenters, by name; a vCenter
	// absent (it did not answer) is not judged this pass.
	Datacenters map[string][]config.Datacenter
	Nodes       []*v1.Node
	// VMs maps the name of each Node this CCM serves to its VM as the
	// inventories hold it; nil for one they cannot place from memory
	// this pass (its previous finding stands). A Node absent is not
	// judged.
	VMs map[string]*NodeVM
	// Privileges is each vCenter's answer of what its login lacks; a
	// vCenter absent (no session, no answer) is unknown this pass: its
	// previous finding stands.
	Privileges map[string]backends.PrivilegeReport
}

// NodeVM is a Node's VM, as memory holds it.
type NodeVM struct {
	VCenter, Name, ID string
	// HardwareVersion is config.version ("vmx-15"); "" when not known.
	HardwareVersion string
}

// Detect runs every check over in.
func Detect(in Inputs) []Finding {
	return slices.Concat(missingDatacenters(in.Config, in.Datacenters), csiTopology(in.Config, in.Nodes),
		csiVCenterLimit(in.Config), hardwareVersions(in.Nodes, in.VMs), missingPrivileges(in.Config, in.Privileges))
}

// unjudged reports whether in leaves f's subject unknown: a Node still
// there whose VM memory cannot place, a vCenter still configured that
// gave no answer. Such a finding stands until an answer clears it.
func (in Inputs) unjudged(f Finding) bool {
	switch f.Check {
	case CheckDatacenterMissing:
		if _, ok := in.Datacenters[f.VCenter]; ok {
			return false
		}
		i := slices.IndexFunc(in.Config.VCenters, func(vc config.VCenter) bool { return vc.Name == f.VCenter })
		return i >= 0 && slices.ContainsFunc(in.Config.VCenters[i].DatacenterSpecs(), func(s config.DatacenterSpec) bool {
			return datacenterSubject(f.VCenter, s) == f.Subject
		})
	case CheckHardwareVersion:
		vm, ok := in.VMs[f.Node.Name]
		return ok && vm == nil
	case CheckMissingPrivileges:
		if _, ok := in.Privileges[f.VCenter]; ok {
			return false
		}
		return slices.ContainsFunc(in.Config.VCenters, func(vc config.VCenter) bool { return vc.Name == f.VCenter })
	}
	return false
}

// hardwareVersion is "vmx-NN"'s NN; ok is false for any other form.
func hardwareVersion(s string) (n int, ok bool) {
	v, found := strings.CutPrefix(s, "vmx-")
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n > 0
}

func hardwareVersions(nodes []*v1.Node, vms map[string]*NodeVM) []Finding {
	var out []Finding
	for _, n := range nodes {
		vm := vms[n.Name]
		if vm == nil {
			continue
		}
		v, ok := hardwareVersion(vm.HardwareVersion)
		if !ok || v >= CSIMinHardwareVersion {
			continue
		}
		out = append(out, Finding{Check: CheckHardwareVersion, Subject: fmt.Sprintf("node %s vm %s/%s", n.Name, vm.VCenter, vm.ID), Node: n,
			Message: fmt.Sprintf("Node %s: its VM %q (%s, vcenter %s) has virtual hardware %s; the vSphere CSI driver needs vmx-%d or later: upgrade the VM's compatibility (powered off)",
				n.Name, vm.Name, vm.ID, vm.VCenter, vm.HardwareVersion, CSIMinHardwareVersion)})
	}
	return out
}

func missingPrivileges(cfg *config.Config, answers map[string]backends.PrivilegeReport) []Finding {
	var out []Finding
	for _, vc := range cfg.VCenters {
		p, ok := answers[vc.Name]
		if !ok || len(p.Missing) == 0 {
			continue
		}
		var lacks []string
		for _, m := range p.Missing {
			lacks = append(lacks, fmt.Sprintf("%s on %s", strings.Join(m.Privileges, ", "), m.Entity))
		}
		out = append(out, Finding{Check: CheckMissingPrivileges, Subject: "vcenter " + vc.Name, VCenter: vc.Name,
			Message: fmt.Sprintf("vcenter %s: user %s lacks %s: lookups or tag reads fail where it does; grant the CCM's role (read-only) there", vc.Name, p.User, strings.Join(lacks, "; "))})
	}
	return out
}

func missingDatacenters(cfg *config.Config, known map[string][]config.Datacenter) []Finding {
	var out []Finding
	for _, vc := range cfg.VCenters {
		dcs, ok := known[vc.Name]
		if !ok {
			continue
		}
		for _, spec := range vc.DatacenterSpecs() {
			if slices.ContainsFunc(dcs, spec.Matches) {
				continue
			}
			names := make([]string, len(dcs))
			for i, dc := range dcs {
				names[i] = dc.Name
			}
			out = append(out, Finding{Check: CheckDatacenterMissing, Subject: datacenterSubject(vc.Name, spec), VCenter: vc.Name,
				Message: fmt.Sprintf("vcenter %s has no datacenter %q (it has %s): its Nodes are found nowhere; correct the config's datacenters", vc.Name, spec.Raw, strings.Join(names, ", "))})
		}
	}
	return out
}

// datacenterSubject is a missing datacenter's finding's subject.
func datacenterSubject(vcenter string, spec config.DatacenterSpec) string {
	return "vcenter " + vcenter + " datacenter " + spec.Raw
}

func csiTopology(cfg *config.Config, nodes []*v1.Node) []Finding {
	if cfg.Labels.Zone == "" || cfg.Labels.Region == "" {
		return nil
	}
	var out []Finding
	for _, n := range nodes {
		var diffs []string
		for _, t := range []struct{ kind, ours, category string }{
			{"zone", v1.LabelTopologyZone, cfg.Labels.Zone},
			{"region", v1.LabelTopologyRegion, cfg.Labels.Region},
		} {
			ours, ok1 := n.Labels[t.ours]
			csi, ok2 := n.Labels[CSITopologyPrefix+t.category]
			if ok1 && ok2 && ours != csi {
				diffs = append(diffs, fmt.Sprintf("%s %s=%s but %s=%s", t.kind, t.ours, ours, CSITopologyPrefix+t.category, csi))
			}
		}
		if len(diffs) > 0 {
			out = append(out, Finding{Check: CheckCSITopology, Subject: "node " + n.Name, Node: n,
				Message: fmt.Sprintf("Node %s: %s: the scheduler and the CSI driver place its volumes in different zones (the VM moved, or a tag changed: see nodes.reconcileTopology)", n.Name, strings.Join(diffs, "; "))})
		}
	}
	return out
}

func csiVCenterLimit(cfg *config.Config) []Finding {
	servers := map[string]bool{}
	for _, vc := range cfg.VCenters {
		servers[strings.ToLower(vc.Server)] = true
	}
	if len(servers) <= CSIVCenterLimit {
		return nil
	}
	return []Finding{{Check: CheckCSIVCenterLimit, Subject: "config",
		Message: fmt.Sprintf("%d vCenters configured; the vSphere CSI driver serves at most %d: the volumes of Nodes in the others cannot be provisioned by one CSI deployment", len(servers), CSIVCenterLimit)}}
}

// Recorder records Events (the CCM's event log).
type Recorder interface {
	Event(obj runtime.Object, eventType, reason, message string)
}

// Metrics are the checks' gauges; built per process, registered by the
// caller.
type Metrics struct {
	findings *metrics.GaugeVec
	lastRun  *metrics.Gauge
}

// NewMetrics builds the checks' metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		findings: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: "cloudprovider", Subsystem: "vsphere", Name: "problems",
			Help:           "Problems the periodic checks found at their last pass, by check (datacenter-missing, csi-topology-mismatch, csi-vcenter-limit, hardware-version, missing-privileges); 0 when fine.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"check"}),
		lastRun: metrics.NewGauge(&metrics.GaugeOpts{
			Namespace: "cloudprovider", Subsystem: "vsphere", Name: "problems_last_check_timestamp_seconds",
			Help:           "When the periodic checks last ran (Unix time).",
			StabilityLevel: metrics.ALPHA,
		}),
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []metrics.Registerable {
	return []metrics.Registerable{m.findings, m.lastRun}
}

// Detector runs the checks every interval. New only builds; Run runs
// until its context ends.
type Detector struct {
	read     func(ctx context.Context) Inputs
	events   Recorder
	object   runtime.Object // where findings about no Node go
	metrics  *Metrics
	interval time.Duration
	last     map[string]Finding
}

// New builds a detector reading its inputs with read, every interval.
func New(read func(ctx context.Context) Inputs, events Recorder, object runtime.Object, m *Metrics, interval time.Duration) *Detector {
	return &Detector{read: read, events: events, object: object, metrics: m, interval: interval, last: map[string]Finding{}}
}

// Run checks at once, then every interval, until ctx ends.
func (d *Detector) Run(ctx context.Context) {
	t := time.NewTicker(d.interval)
	defer t.Stop()
	for {
		d.Pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Pass runs every check once: the gauges set, an Event per finding that
// appeared or cleared since the last pass. A finding whose subject the
// pass could not judge stands.
func (d *Detector) Pass(ctx context.Context) []Finding {
	in := d.read(ctx)
	found := Detect(in)
	for _, f := range d.last {
		if in.unjudged(f) {
			found = append(found, f)
		}
	}
	counts := map[string]int{}
	now := map[string]Finding{}
	for _, f := range found {
		counts[f.Check]++
		now[f.key()] = f
		if _, ok := d.last[f.key()]; !ok {
			d.events.Event(d.objectOf(f), v1.EventTypeWarning, ReasonProblemDetected, f.Check+": "+f.Message)
			klog.FromContext(ctx).Info("Problem detected", "check", f.Check, "subject", f.Subject, "message", f.Message)
		}
	}
	for k, f := range d.last {
		if _, ok := now[k]; !ok {
			d.events.Event(d.objectOf(f), v1.EventTypeNormal, ReasonProblemCleared, f.Check+": cleared ("+f.Subject+")")
		}
	}
	d.last = now
	for _, c := range AllChecks() {
		d.metrics.findings.WithLabelValues(c).Set(float64(counts[c]))
	}
	d.metrics.lastRun.SetToCurrentTime()
	return found
}

func (d *Detector) objectOf(f Finding) runtime.Object {
	if f.Node != nil {
		return f.Node
	}
	return d.object
}
