package cloud

import (
	"k8s.io/component-base/metrics"
)

// nodeMetrics are what the nodes owner's pass sees of the Nodes and their
// VMs (drift.go): all from the inventories, no vCenter request.
type nodeMetrics struct {
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
}

func newNodeMetrics(ns string) *nodeMetrics {
	return &nodeMetrics{
		drift: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: ns, Name: "nodes_topology_drift",
			Help:           "Initialized Nodes whose zone or region label differs from their VM's tag now, by kind (zone, region); 0 again once they match (the VM back, or the labels rewritten: nodes.reconcileTopology).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"kind"}),
		moves: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: ns, Name: "nodes_moves_total",
			Help:           "Moves of Nodes' VMs to another vCenter or datacenter seen in the inventories, by kind (vcenter, datacenter); the location labels follow at once.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"kind"}),
		labelUpdates: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: ns, Name: "node_label_updates_total",
			Help:           "Node labels rewritten to follow their VMs, by label (location, zone, region, host, cluster, resource-pool).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"label"}),
		diskUUID: metrics.NewGauge(&metrics.GaugeOpts{
			Namespace: ns, Name: "nodes_disk_uuid_disabled",
			Help:           "Initialized Nodes whose VM has no disk.EnableUUID=TRUE (vSphere CSI needs it).",
			StabilityLevel: metrics.ALPHA,
		}),
		tagMissing: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: ns, Name: "nodes_zone_tag_missing",
			Help:           "Initialized Nodes whose VM has no tag of the configured zone or region category on its ancestries, by category (zone, region).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"category"}),
		hostGroupZone: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: ns, Name: "nodes_zone_host_group_unresolved",
			Help:           "Initialized Nodes whose VM's host is in no DRS host group that labels.zoneHostGroups maps (ZoneHostGroupMissing) or in groups of different zones (ZoneHostGroupAmbiguous), by reason.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"reason"}),
		identityConflicts: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: ns, Name: "node_identity_conflicts_total",
			Help:           "Nodes claiming (by providerID, system UUID or name) the VM another Node holds, once per pair of Nodes, by outcome: refused (the claimant stays uninitialized while the holder lives), replaced (the holder NotReady for 5m and the VM's guest host name the claimant's: the claimant initialized, the holder kept).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"outcome"}),
	}
}

func (m *nodeMetrics) collectors() []metrics.Registerable {
	return []metrics.Registerable{m.drift, m.moves, m.labelUpdates, m.diskUUID, m.tagMissing, m.hostGroupZone, m.identityConflicts}
}
