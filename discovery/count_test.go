package discovery_test

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// lookupCounts is an Observer that counts lookup outcomes, as the
// discovery_total metric does.
type lookupCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (*lookupCounts) Call(string, string, time.Duration, error) {}
func (*lookupCounts) BreakerState(string, gobreaker.State)      {}
func (*lookupCounts) Cache(bool)                                {}
func (o *lookupCounts) Lookup(result string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[result]++
}

func (o *lookupCounts) take() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.n
	o.n = map[string]int{}
	return out
}

// Issue 21 §5: each lookup is counted once, at its entry, whatever
// searches it makes, and a retired vCenter is an error wherever it is
// found. Before the fix a Node without providerID that no search found
// counted three not_found, and a vCenter remembered in the History
// counted not_found.
func TestEachLookupIsCountedOnce(t *testing.T) {
	f := newFleet()
	counts := &lookupCounts{n: map[string]int{}}
	d := discovery.New(f.targets(nil), discovery.Options{Observer: counts})
	scanEvery(t, d, 10*time.Millisecond)
	t.Cleanup(d.Close)
	waitFor(t, "the duplicate index holds every vCenter", func() bool { return indexed(d) })
	ctx := t.Context()
	vm := f.vms["vc2"][1]
	for _, c := range []struct {
		name   string
		lookup func(context.Context) error
		want   string
	}{
		{"found by providerID", func(ctx context.Context) error {
			res, err := d.Exists(ctx, discovery.NodeKeys{Name: vm.Name, ProviderID: discovery.ProviderID(vm.UUID)})
			return wantFound(res, err)
		}, "found"},
		{"found by providerID", func(ctx context.Context) error {
			res, err := d.Locate(ctx, byProviderID(discovery.ProviderID(vm.UUID)))
			return wantFound(res, err)
		}, "found"},
		{"found by system UUID", func(ctx context.Context) error {
			res, err := d.Locate(ctx, discovery.NodeKeys{Name: "some-node", SystemUUID: vm.UUID})
			return wantFound(res, err)
		}, "found"},
		{"not found through every fallback (Locate)", func(ctx context.Context) error {
			res, err := d.Locate(ctx, discovery.NodeKeys{Name: "10.99.0.1", SystemUUID: noSuchUUID})
			if res != nil || err != nil {
				return errors.New("want (nil, nil)")
			}
			return nil
		}, "not_found"},
		{"not found through every fallback (Exists)", func(ctx context.Context) error {
			if _, err := d.Exists(ctx, discovery.NodeKeys{Name: "10.99.0.1", SystemUUID: noSuchUUID}); !errors.Is(err, discovery.ErrNoProviderID) {
				return errors.New("want ErrNoProviderID")
			}
			return nil
		}, "not_found"},
		{"error from one vCenter", func(ctx context.Context) error {
			f.backends["vc3"].Fail(errors.New("connection refused"))
			defer f.backends["vc3"].Fail(nil)
			var le *discovery.LookupError
			if _, err := d.Exists(ctx, discovery.NodeKeys{Name: "n", ProviderID: discovery.ProviderID(noSuchUUID)}); !errors.As(err, &le) {
				return errors.New("want a LookupError")
			}
			return nil
		}, "error"},
		{"error from one vCenter, Node without providerID", func(ctx context.Context) error {
			f.backends["vc3"].Fail(errors.New("connection refused"))
			defer f.backends["vc3"].Fail(nil)
			if _, err := d.Locate(ctx, discovery.NodeKeys{Name: "10.99.0.1", SystemUUID: noSuchUUID}); err == nil {
				return errors.New("want an error")
			}
			return nil
		}, "error"},
		{"retired vCenter remembered in the History", func(ctx context.Context) error {
			old := discovery.Retired{VCenter: "old", VCenterRecord: discovery.VCenterRecord{Server: "old", Port: 443}}
			d.SetHistory(discovery.History{Retired: []discovery.Retired{old}}, "")
			defer d.SetHistory(discovery.History{}, "")
			var re *discovery.RetiredError
			if _, err := d.Exists(ctx, discovery.NodeKeys{Name: "n", ProviderID: discovery.ProviderID(noSuchUUID)}); !errors.As(err, &re) {
				return errors.New("want a RetiredError")
			}
			return nil
		}, "error"},
	} {
		counts.take()
		if err := c.lookup(ctx); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, want := counts.take(), map[string]int{c.want: 1}; !maps.Equal(got, want) {
			t.Errorf("%s: counted %v; want %v", c.name, got, want)
		}
	}
}

// A VM last seen in a vCenter that has left the config counts as an
// error too, as the History's retired vCenter does.
func TestRetiredLastSeenIsCountedAsAnError(t *testing.T) {
	f := newFleet()
	counts := &lookupCounts{n: map[string]int{}}
	d := discovery.New(f.targets(nil), discovery.Options{Observer: counts})
	scanEvery(t, d, time.Second)
	t.Cleanup(d.Close)
	ctx := t.Context()
	vm := f.vms["vc1"][0]
	keys := discovery.NodeKeys{Name: vm.Name, ProviderID: discovery.ProviderID(vm.UUID)}
	if res, err := d.Exists(ctx, keys); wantFound(res, err) != nil {
		t.Fatalf("before vc1 left: Exists = %v, %v", res, err)
	}
	d.SetVCenters(f.targets(nil)[1:])
	counts.take()
	var re *discovery.RetiredError
	if res, err := d.Exists(ctx, keys); res != nil || !errors.As(err, &re) || re.LastSeen == nil {
		t.Fatalf("vc1 left the config: Exists = %v, %v; want a RetiredError naming where it was last seen", res, err)
	}
	if got, want := counts.take(), map[string]int{"error": 1}; !maps.Equal(got, want) {
		t.Errorf("counted %v; want %v", got, want)
	}
}

func wantFound(res *discovery.Result, err error) error {
	if err != nil || res == nil {
		return errors.New("want the VM")
	}
	return nil
}
