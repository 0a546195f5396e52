package nodes

import (
	"sync"

	"k8s.io/component-base/metrics"
)

// metricsNamespace prefixes every metric, as cloud's.
const metricsNamespace = "cloudprovider_vsphere"

// counterVec and gaugeVec build an ALPHA vector named metricsNamespace_name.
func counterVec(name, help string, labels ...string) *metrics.CounterVec {
	opts := metrics.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help, StabilityLevel: metrics.ALPHA}
	return metrics.NewCounterVec(&opts, labels)
}

func gaugeVec(name, help string, labels ...string) *metrics.GaugeVec {
	opts := metrics.GaugeOpts{Namespace: metricsNamespace, Name: name, Help: help, StabilityLevel: metrics.ALPHA}
	return metrics.NewGaugeVec(&opts, labels)
}

// Metrics are what the nodes owner's pass sees of the Nodes and their
// VMs (drift.go): all from the inventories, no vCenter request; and the
// Node counts of its periodic checks (reports.go), which cloud's scraped
// gauges read (Counts). Built by NewMetrics, unregistered: cloud.Metrics
// holds them and lists them for registration (Collectors).
type Metrics struct {
	drift        *metrics.GaugeVec
	moves        *metrics.CounterVec
	labelUpdates *metrics.CounterVec
	diskUUID     *metrics.Gauge
	tagMissing   *metrics.GaugeVec
	// hostGroupZone counts the Nodes whose VM's host groups give no zone
	// (labels.zoneHostGroups), by Event reason.
	hostGroupZone *metrics.GaugeVec
	// identityConflicts counts the claims on a VM another Node holds
	// (claims.go), once each.
	identityConflicts *metrics.CounterVec

	// The Node counts the tick computed last (absent until its first).
	mu      sync.Mutex
	counted bool
	nodes   int            // unmanaged
	reasons map[string]int // uninitialized, by reason
}

// NewMetrics builds the metrics, unregistered.
func NewMetrics() *Metrics {
	return &Metrics{
		drift: gaugeVec("nodes_topology_drift",
			"Initialized Nodes whose zone or region label differs from their VM's tag now, by kind (zone, region); 0 again once they match (the VM back, or the labels rewritten: nodes.reconcileTopology).",
			"kind"),
		moves: counterVec("nodes_moves_total",
			"Moves of Nodes' VMs to another vCenter or datacenter seen in the inventories, by kind (vcenter, datacenter); the location labels follow at once.",
			"kind"),
		labelUpdates: counterVec("node_label_updates_total",
			"Node labels rewritten to follow their VMs, by label (location, zone, region, host, cluster, resource-pool).", "label"),
		diskUUID: metrics.NewGauge(&metrics.GaugeOpts{
			Namespace: metricsNamespace, Name: "nodes_disk_uuid_disabled",
			Help:           "Initialized Nodes whose VM has no disk.EnableUUID=TRUE (vSphere CSI needs it).",
			StabilityLevel: metrics.ALPHA,
		}),
		tagMissing: gaugeVec("nodes_zone_tag_missing",
			"Initialized Nodes whose VM has no tag of the configured zone or region category on its ancestries, by category (zone, region).",
			"category"),
		hostGroupZone: gaugeVec("nodes_zone_host_group_unresolved",
			"Initialized Nodes whose VM's host is in no DRS host group that labels.zoneHostGroups maps (ZoneHostGroupMissing) or in groups of different zones (ZoneHostGroupAmbiguous), by reason.",
			"reason"),
		identityConflicts: counterVec("node_identity_conflicts_total",
			"Nodes claiming (by providerID, system UUID or name) the VM another Node holds, once per pair of Nodes, by outcome: refused (the claimant stays uninitialized while the holder lives), replaced (the holder NotReady for 5m and the VM's guest host name the claimant's: the claimant initialized, the holder kept).",
			"outcome"),
	}
}

// Collectors lists the metrics for registration.
func (m *Metrics) Collectors() []metrics.Registerable {
	return []metrics.Registerable{m.drift, m.moves, m.labelUpdates, m.diskUUID, m.tagMissing, m.hostGroupZone,
		m.identityConflicts}
}

// CountIdentityConflict counts a claim on a VM another Node holds, by
// outcome (the claims of package instances, once each).
func (n *Owner) CountIdentityConflict(outcome string) {
	n.metrics.identityConflicts.WithLabelValues(outcome).Inc()
}

// setNodes stores the tick's Node counts.
func (m *Metrics) setNodes(unmanaged int, uninitialized map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counted, m.nodes, m.reasons = true, unmanaged, uninitialized
}

// Counts are the Node counts the tick computed last: the unmanaged Nodes
// and the uninitialized ones by reason (a map the tick no longer
// changes); ok is false until its first.
func (m *Metrics) Counts() (unmanaged int, uninitialized map[string]int, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nodes, m.reasons, m.counted
}
