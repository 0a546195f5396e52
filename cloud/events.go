package cloud

// The Events this provider records, and the one way it records them.

import (
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

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

// Event reasons about configuration and credentials.
const (
	ReasonConfigInvalid = "ConfigInvalid"
	ReasonConfigApplied = "ConfigApplied"
	// ReasonConfigUnknownKey: a key of the applied config that neither CPI
	// nor this CCM reads (a typo?); it is ignored, as CPI ignores it.
	ReasonConfigUnknownKey   = "ConfigUnknownKey"
	ReasonCredentialsFailed  = "CredentialsFailed"
	ReasonCredentialsRotated = "CredentialsRotated"
)

// eventLog records this provider's Events on Nodes, Secrets and its own
// object. It records nothing until Start binds it to the cluster's Event
// sink, nor ever for a read-only provider (diagnose), whose Start does not.
type eventLog struct {
	recorder atomic.Pointer[record.EventRecorder]
}

// bind makes r record every Event from now on.
func (l *eventLog) bind(r record.EventRecorder) { l.recorder.Store(&r) }

// record records an Event about obj (a Node, or a reference).
func (l *eventLog) record(obj runtime.Object, eventType, reason, msg string) {
	if r := l.recorder.Load(); r != nil {
		(*r).Event(obj, eventType, reason, msg)
	}
}
