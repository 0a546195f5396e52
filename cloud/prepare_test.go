package cloud_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// startCounted is a fake vCenter's backend that counts its starts (the
// inventory watch of a real one) and its tag lookups.
type startCounted struct {
	*backendtest.Backend
	starts, tags *atomic.Int32
}

func (b startCounted) Start() { b.starts.Add(1) }

func (b startCounted) Tags(ctx context.Context, vm *backends.VM, categories []string) (map[string]string, error) {
	b.tags.Add(1)
	return b.Backend.Tags(ctx, vm, categories)
}

// standby is a provider over two fake vCenters whose backends are counted
// as built and started, with a Node whose VM moved to vcB (the Node owner
// relabels it), and a config key nobody reads (an Event once reported).
type standby struct {
	w              *driftWorld
	c              *cloud.Cloud
	stop           chan struct{}
	built, started atomic.Int32
	tags           atomic.Int32
}

func newStandby(t *testing.T) *standby {
	t.Helper()
	s := &standby{w: &driftWorld{f: newFakeFleet("vcA", "vcB"), client: stateClient(initializedNode()), path: filepath.Join(t.TempDir(), "vsphere.conf")}}
	for _, b := range s.w.f {
		b.Inventoried()
	}
	s.w.f["vcA"].Add(fakeVM("dc0", "vm-9", "node-z", uuidC), tags("z-1", "r-1"))
	s.w.f["vcB"].Add(placedVM("dc1", "esx-2", "c-2"), tags("z-1", "r-1"))
	writeAtomically(t, s.w.path, s.w.f.yaml("  notAKey: 1\n", "vcA")+driftBase)
	opts := s.w.f.options()
	opts.RecoveryPoll = 10 * time.Millisecond
	opts.NewBackend = func(vc config.VCenter, _ credentials.Source) backends.Backend {
		s.built.Add(1)
		return startCounted{Backend: s.w.f[vc.Name], starts: &s.started, tags: &s.tags}
	}
	c, err := cloud.NewFromFile(s.w.path, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.c, s.w.c, s.stop = c, c, make(chan struct{})
	t.Cleanup(func() { close(s.stop); stopCloud(t, c) })
	return s
}

// writes are the client's actions other than reads.
func writes(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if v := a.GetVerb(); !slices.Contains([]string{"get", "list", "watch"}, v) {
			out = append(out, v+" "+a.GetResource().Resource)
		}
	}
	return out
}

// eventRecorded reports whether an Event of reason was created.
func eventRecorded(client *fake.Clientset, reason string) bool {
	for _, a := range client.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "events" {
			if e, ok := c.GetObject().(*v1.Event); ok && e.Reason == reason {
				return true
			}
		}
	}
	return false
}

func reads(client *fake.Clientset, verb, resource string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// A standby replica (Prepare, before it holds the lease) has its vCenters'
// backends built and started — their inventories load and stay current,
// their tag caches are read — and follows edits of the config, but writes nothing to the cluster: no
// Event (not even about the config), no Node relabelled, no history
// written (it is read).
func TestPreparedStandbyStartsBackendsAndWritesNothing(t *testing.T) {
	s := newStandby(t)
	s.c.Prepare(s.w.client, s.stop)
	if s.built.Load() != 1 || s.started.Load() != 1 {
		t.Fatalf("prepared: %d backends built, %d started; want vcA's, started", s.built.Load(), s.started.Load())
	}
	eventually(t, "the history to be read", func() bool { return reads(s.w.client, "get", "configmaps") > 0 })
	// Its tag cache is loaded as a lookup would load it.
	eventually(t, "a tag lookup ahead of leadership", func() bool { return s.tags.Load() > 0 })
	// An edit adds vcB, where node-a's VM is now: applied at once.
	writeAtomically(t, s.w.path, s.w.f.yaml("  notAKey: 1\n", "vcA", "vcB")+driftBase)
	eventually(t, "vcB's backend to start", func() bool { return s.started.Load() == 2 })
	ctx := t.Context()
	if _, err := s.c.InstanceMetadata(ctx, s.w.node(t, "node-a")); err != nil {
		t.Fatalf("a prepared provider's lookup: %v", err)
	}
	eventually(t, "the edit's history to be read", func() bool { return reads(s.w.client, "get", "configmaps") > 1 })
	time.Sleep(200 * time.Millisecond) // room for a write, were there one
	if w := writes(s.w.client); len(w) > 0 {
		t.Fatalf("a standby wrote %v", w)
	}
	if got := s.w.node(t, "node-a").Labels[nodes.LabelVCenter]; got != "vcA" {
		t.Fatalf("a standby relabelled node-a: vcenter %q", got)
	}
}

// Start after Prepare (this replica took the lease) keeps the prepared
// backends — none built or started again — and adds the writers: the
// history written, the config's notice reported as an Event, the Node
// that follows its VM relabelled.
func TestStartAfterPrepareKeepsTheBackends(t *testing.T) {
	s := newStandby(t)
	writeAtomically(t, s.w.path, s.w.f.yaml("  notAKey: 1\n", "vcA", "vcB")+driftBase)
	s.c.Prepare(s.w.client, s.stop)
	eventually(t, "the history to be read", func() bool { return reads(s.w.client, "get", "configmaps") > 0 })
	if _, err := s.c.InstanceMetadata(t.Context(), s.w.node(t, "node-a")); err != nil {
		t.Fatalf("a prepared provider's lookup: %v", err)
	}
	built, started := s.built.Load(), s.started.Load()
	startLeader(s.c, s.w.client, s.stop)
	waitHistory(t, s.w.client, `"vcB"`)
	s.w.waitLabel(t, "node-a", nodes.LabelVCenter, "vcB")
	eventually(t, "the notice's Event", func() bool { return eventRecorded(s.w.client, cloud.ReasonConfigUnknownKey) })
	if s.built.Load() != built || s.started.Load() != started {
		t.Fatalf("Start after Prepare: %d backends built, %d started; want %d, %d (Prepare's kept)", s.built.Load(), s.started.Load(), built, started)
	}
}
