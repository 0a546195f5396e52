package cloud

// The Events this provider records, and the one way it records them.

import (
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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

	mu sync.Mutex
	// causes are the cause and message of the last recordCause Event of
	// each Node and reason.
	causes map[causeKey]causeEntry
}

type causeKey struct {
	node   string
	uid    types.UID
	reason string
}

type causeEntry struct{ cause, message string }

// maxCauses bounds the causes remembered. Past it they are all forgotten:
// the cost is one Event per Node and reason with its current message,
// not a leak as Nodes come and go.
const maxCauses = 8192

// bind makes r record every Event from now on.
func (l *eventLog) bind(r record.EventRecorder) { l.recorder.Store(&r) }

// record records an Event about obj (a Node, or a reference).
func (l *eventLog) record(obj runtime.Object, eventType, reason, msg string) {
	if r := l.recorder.Load(); r != nil {
		(*r).Event(obj, eventType, reason, msg)
	}
}

// recordCause records an Event about node whose cause recurs at each pass
// of a controller while it lasts (a lookup failing, a deletion held back,
// an address not found): every 5 s for a NotReady Node. While cause is
// what it was at the last such Event of this reason on this Node, the
// message recorded then is recorded again, word for word, so that
// client-go's recorder folds them into one Event object, its count and
// lastTimestamp saying the cause still holds, instead of a new Event each
// pass because an error's text carries what changes from one pass to the
// next (a duration, a port). A new cause records its own message. cause is
// what tells causes apart: the message itself where it never varies for
// one cause.
func (l *eventLog) recordCause(node *v1.Node, eventType, reason, cause, msg string) {
	if l.recorder.Load() == nil {
		return
	}
	k := causeKey{node: node.Name, uid: node.UID, reason: reason}
	l.mu.Lock()
	if e, ok := l.causes[k]; ok && e.cause == cause {
		msg = e.message
	} else {
		if l.causes == nil || len(l.causes) >= maxCauses {
			l.causes = map[causeKey]causeEntry{}
		}
		l.causes[k] = causeEntry{cause: cause, message: msg}
	}
	l.mu.Unlock()
	l.record(node, eventType, reason, msg)
}
