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
