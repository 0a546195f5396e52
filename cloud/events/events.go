// Package events is the one way this provider records Events: on Nodes,
// Secrets and its own object, through one Log that records nothing until
// Start binds it to the cluster's Event sink (never for a read-only
// provider, `diagnose`). It is a room of its own because every owner
// records through it — the fleet (configuration, credentials), instances
// (lookups), nodes (drift, reports) and the periodic checks — and none of
// them owns it. The reasons stay with the code that raises them.
package events

import (
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/problems"
)

var _ problems.Recorder = (*Log)(nil)

// Log records this provider's Events on Nodes, Secrets and its own
// object. It records nothing until Start binds it to the cluster's Event
// sink, nor ever for a read-only provider (diagnose), whose Start does not.
type Log struct {
	recorder atomic.Pointer[record.EventRecorder]

	mu sync.Mutex
	// causes are the cause and message of the last RecordCause Event of
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

// Bind makes r record every Event from now on.
func (l *Log) Bind(r record.EventRecorder) { l.recorder.Store(&r) }

// Record records an Event about obj (a Node, or a reference).
func (l *Log) Record(obj runtime.Object, eventType, reason, msg string) {
	if r := l.recorder.Load(); r != nil {
		(*r).Event(obj, eventType, reason, msg)
	}
}

// RecordCause records an Event about node whose cause recurs at each pass
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
func (l *Log) RecordCause(node *v1.Node, eventType, reason, cause, msg string) {
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
	l.Record(node, eventType, reason, msg)
}

// Event implements problems.Recorder.
func (l *Log) Event(obj runtime.Object, eventType, reason, message string) {
	l.Record(obj, eventType, reason, message)
}
