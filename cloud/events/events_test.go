package events_test

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/events"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
)

// boundLog is an events.Log recording through a real broadcaster into a
// fake API server, as Start binds it.
func boundLog(t *testing.T) (*events.Log, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	l := &events.Log{}
	l.Bind(b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "test"}))
	return l, client
}

// waitEvents waits until the Events of reason add up to count, and
// returns them.
func waitEvents(t *testing.T, client *fake.Clientset, reason string, count int32) []v1.Event {
	t.Helper()
	var got []v1.Event
	var n int32
	if !(poll.Schedule{Every: 20 * time.Millisecond, Within: 10 * time.Second}).Holds(func() bool {
		evs, err := client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, n = got[:0], 0
		for _, e := range evs.Items {
			if e.Reason == reason {
				got = append(got, e)
				n += max(e.Count, 1)
			}
		}
		return n >= count
	}) {
		t.Fatalf("%d %s Events recorded, want %d: %v", n, reason, count, got)
	}
	return got
}

// A cause met at each pass is one Event whose count grows, whatever its
// error's text says each time; a new cause is an Event of its own.
func TestRecordCauseFoldsPassesIntoOneEvent(t *testing.T) {
	l, client := boundLog(t)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}}
	for i := range 5 {
		l.RecordCause(node, v1.EventTypeWarning, nodes.ReasonLookupFailed, "vcB: connection", fmt.Sprintf("vcB: read tcp 10.0.0.1:%d: reset", 50000+i))
	}
	evs := waitEvents(t, client, nodes.ReasonLookupFailed, 5)
	if len(evs) != 1 || evs[0].Count != 5 || evs[0].Message != "vcB: read tcp 10.0.0.1:50000: reset" {
		t.Fatalf("Events: %+v; want one, count 5, with the first pass's message", evs)
	}
	l.RecordCause(node, v1.EventTypeWarning, nodes.ReasonLookupFailed, "vcB: auth", "vcB: login refused")
	evs = waitEvents(t, client, nodes.ReasonLookupFailed, 6)
	if len(evs) != 2 {
		t.Fatalf("Events after a new cause: %+v; want a second Event", evs)
	}
}
