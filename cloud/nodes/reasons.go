package nodes

import "fmt"

// Event reasons this provider records on Nodes. Those of a failed
// InstanceMetadata (a lookup, an address, a zone tag, an identity claim)
// are raised by instances and counted here, as the reason a Node is still
// uninitialized (reports.go): they live in the room both read.
const (
	ReasonZoneTagMissing = "ZoneTagMissing"
	ReasonDuplicateUUID  = "DuplicateVMUUID"
	ReasonLookupFailed   = "VMLookupFailed"
	// ReasonNoNodeAddress: the VM's guest networking gives no address by
	// CPI's rules (no host name, no NICs, a listed IP family without an
	// address, the named VM networks absent); the Node stays tainted.
	ReasonNoNodeAddress = "NoSuitableNodeAddress"
	// ReasonNodeIPNotOnVM: the kubelet's --node-ip (the Node's
	// alpha.kubernetes.io/provided-node-ip annotation) is not an IP its VM
	// reports; the Node stays tainted, as the cloud-node controller would
	// keep it. The message names the IP and the VM's IPs.
	ReasonNodeIPNotOnVM = "NodeIPNotOnVM"
	// ReasonInvalidNodeIP: that annotation is not one IP or a dual-stack
	// pair a kubelet could have been given; the Node stays tainted.
	ReasonInvalidNodeIP = "InvalidNodeIP"
	// ReasonNodeIdentityConflict: a Warning on a Node refused the identity
	// of the VM another Node holds, and on that Node, each naming the
	// other; the refused Node stays tainted (IdentityConflictError).
	ReasonNodeIdentityConflict = "NodeIdentityConflict"
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
	// ReasonTagLabelsUpdated: the labels from tag categories
	// (nodes.tagLabels) were rewritten as the VM's tags changed.
	ReasonTagLabelsUpdated = "TagLabelsUpdated"
)

// IdentityConflictError is a claim on a VM another Node holds:
// InstanceMetadata fails with it, and the claimant keeps its
// uninitialized taint.
type IdentityConflictError struct {
	Node   string // the claimant
	Holder string // the Node holding the VM
	VM     string // the VM, as discovery.Result names it
	// State is why the holder keeps the VM: "is Ready", or why it is not
	// replaced.
	State string
}

func (e *IdentityConflictError) Error() string {
	return fmt.Sprintf("%s is held by Node %s, which %s: node %s is not given its identity", e.VM, e.Holder, e.State, e.Node)
}
