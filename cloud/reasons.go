package cloud

// Event reasons this provider records on Nodes.
const (
	ReasonZoneTagMissing = "ZoneTagMissing"
	ReasonDuplicateUUID  = "DuplicateVMUUID"
	ReasonLookupFailed   = "VMLookupFailed"
	// ReasonNoNodeAddress: the VM's guest networking gives no address by
	// CPI's rules (no host name, no NICs, a listed IP family without an
	// address, the named VM networks absent); the Node stays tainted.
	ReasonNoNodeAddress = "NoSuitableNodeAddress"
	// ReasonNodeDeletionHeld: its VM is confirmed absent, but the deletion
	// policy (nodeDeletion: a freeze, or minAbsence not yet spanned) keeps
	// the Node for now.
	ReasonNodeDeletionHeld = "NodeDeletionHeld"
	// ReasonNodeIPNotOnVM: the kubelet's --node-ip (the Node's
	// alpha.kubernetes.io/provided-node-ip annotation) is not an IP its VM
	// reports; the Node stays tainted, as the cloud-node controller would
	// keep it. The message names the IP and the VM's IPs.
	ReasonNodeIPNotOnVM = "NodeIPNotOnVM"
	// ReasonInvalidNodeIP: that annotation is not one IP or a dual-stack
	// pair a kubelet could have been given; the Node stays tainted.
	ReasonInvalidNodeIP = "InvalidNodeIP"
	// ReasonTopologyDrift: a Node's VM moved to another vCenter or
	// datacenter (the location labels follow), or its zone or region tag
	// differs from the Node's label; once per change. Warning.
	ReasonTopologyDrift = "TopologyDrift"
	// ReasonTopologyDriftCleared: a drifted Node's zone and region labels
	// match its VM again.
	ReasonTopologyDriftCleared = "TopologyDriftCleared"
	// ReasonTopologyReconciled: the zone and region labels were rewritten
	// to the VM's (nodes.reconcileTopology).
	ReasonTopologyReconciled = "TopologyReconciled"
	// ReasonPlacementLabelsUpdated: the host, cluster or resource-pool
	// labels (nodes.placementLabels) were rewritten as the VM moved.
	ReasonPlacementLabelsUpdated = "PlacementLabelsUpdated"
	// ReasonDiskUUIDDisabled: the VM lacks disk.EnableUUID=TRUE, which
	// vSphere CSI needs; once per change. Warning.
	ReasonDiskUUIDDisabled = "DiskUUIDDisabled"
)
