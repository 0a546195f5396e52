package cloud

import (
	"sync/atomic"

	"k8s.io/component-base/metrics"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// vcenterStatus is one current backend's status, as the collectors read
// it at scrape time.
type vcenterStatus struct {
	VCenter string
	backends.Status
}

// scrapedMetrics are the metrics computed at scrape time, from the
// sources the fleet sets (set*Source) and the Node counts of the
// periodic checks (nodeHealth): a backend replaced by a config edit
// starts its counters again (a counter reset, which rate() handles).
type scrapedMetrics struct {
	metrics.BaseStableCollector
	build  BuildInfo
	health *nodeHealth
	descs  []*metrics.Desc // each of the below
	buildInfo, up, synced, vms, updates, budgetWaits, budgetRejections, certificateExpiry,
	deletionHeld, unmanaged, uninitialized, duplicates *metrics.Desc

	statuses      atomic.Pointer[func() []vcenterStatus]
	vcenterHealth atomic.Pointer[func() []discovery.VCenterHealth]
	held          atomic.Pointer[func() []discovery.HeldNodes]
}

// nodeHealth is what the periodic checks tell the scraped gauges: the
// Node counts the nodes owner's tick computed last (nodes.Metrics.Counts:
// absent until its first), and where the duplicate BIOS UUIDs are read
// from.
type nodeHealth struct {
	duplicateSource atomic.Pointer[func() []string]
	nodes           *nodes.Metrics
}

// setDuplicateSource tells the duplicate_uuids metric where to read from.
func (h *nodeHealth) setDuplicateSource(f func() []string) { h.duplicateSource.Store(&f) }

// setStatusSource tells the metrics reading backends' statuses (the
// inventory's, the vCenter's) where to read from.
func (m *Metrics) setStatusSource(f func() []vcenterStatus) { m.scraped.statuses.Store(&f) }

// setHealthSource tells the vcenter_up metric where to read from.
func (m *Metrics) setHealthSource(f func() []discovery.VCenterHealth) {
	m.scraped.vcenterHealth.Store(&f)
}

// setDeletionHeldSource tells the held-Nodes gauge where to read from.
func (m *Metrics) setDeletionHeldSource(f func() []discovery.HeldNodes) { m.scraped.held.Store(&f) }

func newScrapedMetrics(build BuildInfo, health *nodeHealth) *scrapedMetrics {
	c := &scrapedMetrics{build: build, health: health}
	desc := func(name, help string, labels ...string) *metrics.Desc {
		d := metrics.NewDesc(metricsNamespace+"_"+name, help, labels, nil, metrics.ALPHA, "")
		c.descs = append(c.descs, d)
		return d
	}
	c.buildInfo = desc("build_info",
		"1, labelled with the running binary's version, commit and Go version.", "version", "commit", "go_version")
	c.synced = desc("inventory_synced",
		"1 while the vCenter's watch-fed inventory answers lookups (loaded, and its vCenter heard from within heartbeat + requestTimeout); 0 while lookups go to vCenter directly.",
		"vcenter")
	c.vms = desc("inventory_vms",
		"VMs held in the vCenter's inventory while it is in sync.", "vcenter")
	c.up = desc("vcenter_up",
		"1 while the vCenter's last connection-level event (connect, TLS, login, keep-alive, the inventory watch's poll) succeeded; 0 while it is down or not yet connected (lookups then answer at once for it).",
		"vcenter")
	c.updates = desc("inventory_updates_total",
		"Object updates the vCenter's inventory watch has applied, initial loads included, since this backend started.", "vcenter")
	c.budgetWaits = desc("vcenter_request_budget_waits_total",
		"Calls sent to the vCenter directly (not answered from its inventory) that waited for their turn in its request budget (requestsPerSecond, requestBurst), since its backend was built.",
		"vcenter")
	c.budgetRejections = desc("vcenter_request_budget_rejections_total",
		"Calls refused before being sent because their turn in the vCenter's request budget came after their deadline (an error, never an answer about a VM; not a breaker failure).",
		"vcenter")
	c.certificateExpiry = desc("vcenter_certificate_expiry_seconds",
		"When the certificate the vCenter presented at the last TLS handshake expires (its NotAfter), in Unix seconds; alert on it - time() < 30*86400.",
		"vcenter")
	// 0 included for every configured vCenter and reason, so a
	// freeze's end shows as a drop.
	c.deletionHeld = desc("nodes_deletion_held",
		"Nodes whose VM was confirmed absent that the vCenter's deletion policy (nodeDeletion) keeps now, by reason: grace (minAbsence not yet spanned) or frozen.",
		"vcenter", "reason")
	c.unmanaged = desc("nodes_unmanaged",
		"Nodes this CCM leaves alone: label node-restriction.kubernetes.io/vsphere-federated-ccm-unmanaged=true or --unmanaged-node-selector.")
	c.uninitialized = desc("nodes_uninitialized",
		"Nodes of this CCM still carrying node.cloudprovider.kubernetes.io/uninitialized, by reason: why their last InstanceMetadata failed (VMLookupFailed, VMNotFound, DuplicateVMUUID, ZoneTagMissing, NoSuitableNodeAddress, NodeIPNotOnVM, InvalidNodeIP, NodeIdentityConflict, ZoneHostGroupMissing, ZoneHostGroupAmbiguous), or Pending.",
		"reason")
	c.duplicates = desc("duplicate_uuids",
		"BIOS UUIDs held by VMs in more than one vCenter, as the inventories show them; their Nodes' lookups fail until one is changed.")
	return c
}

func (c *scrapedMetrics) DescribeWithStability(ch chan<- *metrics.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *scrapedMetrics) CollectWithStability(ch chan<- metrics.Metric) {
	gauge := func(d *metrics.Desc, v float64, labels ...string) {
		ch <- metrics.NewLazyConstMetric(d, metrics.GaugeValue, v, labels...)
	}
	counter := func(d *metrics.Desc, v float64, labels ...string) {
		ch <- metrics.NewLazyConstMetric(d, metrics.CounterValue, v, labels...)
	}
	gauge(c.buildInfo, 1, c.build.Version, c.build.Commit, c.build.GoVersion)
	if src := c.vcenterHealth.Load(); src != nil {
		for _, h := range (*src)() {
			gauge(c.up, boolValue(h.Reachability.State == backends.ConnUp), h.Name)
		}
	}
	if src := c.statuses.Load(); src != nil {
		for _, s := range (*src)() {
			if inv := s.Inventory; inv != nil {
				gauge(c.synced, boolValue(inv.InService), s.VCenter)
				gauge(c.vms, float64(inv.VMs), s.VCenter)
				counter(c.updates, float64(inv.Updates), s.VCenter)
			}
			if s.Budget != nil {
				counter(c.budgetWaits, float64(s.Budget.Waits), s.VCenter)
				counter(c.budgetRejections, float64(s.Budget.Rejections), s.VCenter)
			}
			if s.Certificate != nil {
				gauge(c.certificateExpiry, float64(s.Certificate.NotAfter.Unix()), s.VCenter)
			}
		}
	}
	if src := c.held.Load(); src != nil {
		for _, h := range (*src)() {
			gauge(c.deletionHeld, float64(h.Grace), h.VCenter, discovery.HeldGrace)
			gauge(c.deletionHeld, float64(h.Frozen), h.VCenter, discovery.HeldFrozen)
		}
	}
	if src := c.health.duplicateSource.Load(); src != nil {
		gauge(c.duplicates, float64(len((*src)())))
	}
	unmanaged, uninitialized, counted := c.health.nodes.Counts()
	if !counted {
		return
	}
	gauge(c.unmanaged, float64(unmanaged))
	for r, n := range uninitialized {
		gauge(c.uninitialized, float64(n), r)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// backendStatuses reads every current backend's status.
func (f *fleet) backendStatuses() []vcenterStatus {
	bs := f.served.Load().backends
	out := make([]vcenterStatus, 0, len(bs))
	for name, b := range bs {
		out = append(out, vcenterStatus{VCenter: name, Status: b.Status()})
	}
	return out
}
