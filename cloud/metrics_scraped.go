package cloud

import (
	"sync/atomic"

	"k8s.io/component-base/metrics"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// scrapedMetrics are the metrics computed at scrape time, from the fleet
// the provider sets (its discovery's Health, one read per scrape: each
// vCenter's status, its backend's, the deletions it holds; duplicates)
// and the Node counts of the nodes owner's tick (nodes.Metrics.Counts:
// absent until its first): a backend replaced by a config edit starts its
// counters again (a counter reset, which rate() handles).
type scrapedMetrics struct {
	metrics.BaseStableCollector
	build BuildInfo
	nodes *nodes.Metrics
	descs []*metrics.Desc // each of the below
	buildInfo, up, synced, vms, updates, budgetWaits, budgetRejections, certificateExpiry,
	deletionHeld, unmanaged, uninitialized, duplicates *metrics.Desc

	fleet atomic.Pointer[fleet]
}

func newScrapedMetrics(build BuildInfo, nm *nodes.Metrics) *scrapedMetrics {
	c := &scrapedMetrics{build: build, nodes: nm}
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
	if f := c.fleet.Load(); f != nil {
		for _, h := range f.discovery.Health() {
			name, s := h.Name, h.Backend
			gauge(c.up, boolValue(h.Reachability.State == backends.ConnUp), name)
			if inv := s.Inventory; inv != nil {
				gauge(c.synced, boolValue(inv.InService), name)
				gauge(c.vms, float64(inv.VMs), name)
				counter(c.updates, float64(inv.Updates), name)
			}
			if s.Budget != nil {
				counter(c.budgetWaits, float64(s.Budget.Waits), name)
				counter(c.budgetRejections, float64(s.Budget.Rejections), name)
			}
			if s.Certificate != nil {
				gauge(c.certificateExpiry, float64(s.Certificate.NotAfter.Unix()), name)
			}
			gauge(c.deletionHeld, float64(h.Held.Grace), name, discovery.HeldGrace)
			gauge(c.deletionHeld, float64(h.Held.Frozen), name, discovery.HeldFrozen)
		}
		gauge(c.duplicates, float64(len(f.discovery.Duplicates())))
	}
	unmanaged, uninitialized, counted := c.nodes.Counts()
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
