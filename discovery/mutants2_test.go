package discovery

// Tests of single decisions that the scenario tests pass through without
// telling their branches apart (mutation test survivors, see
// test/mutation.sh): the connect wait of a vCenter not known up, the
// duplicate index's holders, the location cache's sweep. In package
// discovery: the location cache and the stall description are internal.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// crawling is a vCenter whose first connect answers step by step and
// never ends: every call hangs, and its progress is always fresh.
type crawling struct{ *backendtest.Backend }

func (c crawling) State() backends.State {
	st := c.Backend.State()
	st.Connect = backends.ConnectProgress{Phase: "answering", Last: time.Now(), RoundTrip: time.Millisecond}
	return st
}

func crawlingDiscoverer(t *testing.T, connectWait, timeout time.Duration) *Discoverer {
	t.Helper()
	b := backendtest.New()
	b.SetReachability(backends.ConnUnknown, nil)
	b.Hang(true)
	d := New(nil, Options{ConnectWait: connectWait})
	d.SetVCenters([]Target{{Name: "vc1", Server: "vc1:443", Backend: crawling{b}, RequestTimeout: timeout, ConsecutiveFailures: 5, OpenTimeout: time.Minute}})
	t.Cleanup(d.Close)
	return d
}

const crawlingUUID = "42000000-0000-4000-8000-000000000001"

// A connect that crawls on is waited for half its request timeout once,
// from when a lookup first met it connecting: the lookup after the one
// that waited that long is refused at once, not given as long again.
func TestCrawlingConnectIsWaitedForHalfItsRequestTimeoutOnce(t *testing.T) {
	const timeout = 2 * time.Second
	d := crawlingDiscoverer(t, 50*time.Millisecond, timeout)
	start := time.Now()
	if _, err := d.Locate(t.Context(), NodeKeys{SystemUUID: crawlingUUID}); !errors.Is(err, ErrVCenterConnecting) {
		t.Fatalf("first lookup: err = %v, want ErrVCenterConnecting", err)
	}
	if took := time.Since(start); took < timeout/2-50*time.Millisecond {
		t.Fatalf("first lookup gave up after %v, want about half the request timeout (%v)", took, timeout/2)
	}
	start = time.Now()
	if _, err := d.Locate(t.Context(), NodeKeys{SystemUUID: crawlingUUID}); !errors.Is(err, ErrVCenterConnecting) {
		t.Fatalf("second lookup: err = %v, want ErrVCenterConnecting", err)
	}
	if took := time.Since(start); took > timeout/4 {
		t.Fatalf("second lookup took %v: it waited for the crawling connect again (half the request timeout is %v, from the first lookup)", took, timeout/2)
	}
}

// A lookup whose deadline is shorter than the request timeout waits for a
// crawling connect half of what its deadline leaves, not past it.
func TestCrawlingConnectIsWaitedForHalfTheLookupsDeadline(t *testing.T) {
	const lookup = time.Second
	d := crawlingDiscoverer(t, 50*time.Millisecond, 20*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), lookup)
	defer cancel()
	start := time.Now()
	_, err := d.Locate(ctx, NodeKeys{SystemUUID: crawlingUUID})
	took := time.Since(start)
	if !errors.Is(err, ErrVCenterConnecting) {
		t.Fatalf("err = %v, want ErrVCenterConnecting (given up waiting, not out of time)", err)
	}
	if took > lookup*3/4 {
		t.Fatalf("lookup took %v, want about half its deadline (%v)", took, lookup/2)
	}
}

// A vCenter renamed in the config holds its UUIDs under its new name: a
// twin found later names it so, though its own inventory did not change.
func TestRenamedVCenterHoldsItsUUIDsUnderItsNewName(t *testing.T) {
	const twin = "42000000-0000-4000-8000-0000000000aa"
	b1, b2 := backendtest.New(), backendtest.New()
	b2.Add(backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: "vm-2"}, Name: "b", UUID: twin, PowerState: backends.PoweredOn}, nil)
	var mu sync.Mutex
	reported := map[string][]string{}
	d := New(nil, Options{OnDuplicate: func(uuid string, vcs []string) {
		mu.Lock()
		defer mu.Unlock()
		reported[uuid] = slices.Clone(vcs)
	}})
	target := func(name string, b backends.Backend) Target {
		return Target{Name: name, Server: name + ":443", Backend: b, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute}
	}
	d.SetVCenters([]Target{target("vc1", b1), target("vc2", b2)})
	t.Cleanup(d.Close)
	d.ScanDuplicates()
	d.SetVCenters([]Target{target("vc1", b1), {Name: "vc9", Server: "vc2:443", Backend: b2, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute}})
	d.ScanDuplicates()
	b1.Add(backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: "vm-1"}, Name: "a", UUID: twin, PowerState: backends.PoweredOn}, nil)
	d.ScanDuplicates()
	mu.Lock()
	vcs, ok := reported[twin]
	mu.Unlock()
	if !ok {
		t.Fatal("the twin was not reported")
	}
	if want := []string{"vc1", "vc9"}; !slices.Equal(vcs, want) {
		t.Fatalf("twin reported in %v, want %v", vcs, want)
	}
}

// The location cache sweeps once it reaches its sweep size (not one
// entry later), expires an entry exactly its TTL old, and next sweeps at
// twice the size it kept.
func TestLocationCacheSweepBoundaries(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0
	fill := func(c *locationCache, prefix string, n int) {
		for i := range n {
			c.set(prefix+strings.Repeat("x", i), location{vcenter: "vc1"})
		}
	}

	c := newLocationCache(time.Second)
	c.now = func() time.Time { return now }
	fill(c, "a", 64)
	now = t0.Add(2 * time.Second)
	c.set("late", location{vcenter: "vc1"})
	if n := c.size(); n != 1 {
		t.Errorf("64 expired entries and one set at the sweep size: %d entries, want 1", n)
	}

	now = t0
	c = newLocationCache(time.Second)
	c.now = func() time.Time { return now }
	c.set("old", location{vcenter: "vc1"})
	now = t0.Add(time.Second)
	c.sweepAt = 0
	c.set("new", location{vcenter: "vc1"})
	if n := c.size(); n != 1 {
		t.Errorf("an entry exactly the TTL old was kept by a sweep: %d entries, want 1", n)
	}

	now = t0
	c = newLocationCache(time.Second)
	c.now = func() time.Time { return now }
	fill(c, "b", 65) // swept at 64 live entries: the next sweep at 128
	now = t0.Add(2 * time.Second)
	c.set("late", location{vcenter: "vc1"})
	if n := c.size(); n != 66 {
		t.Errorf("65 entries, then one more: %d entries, want 66 (no sweep before 128)", n)
	}
}

// Placed gives the tags of the VM found, read through the vCenter that
// holds it, not through another configured before it.
func TestPlacedTagsAreOfTheVCenterHoldingTheVM(t *testing.T) {
	const uuid = "42000000-0000-4000-8000-0000000000bb"
	b1, b2 := backendtest.New(), backendtest.New()
	vm := backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: "vm-1"}, Name: "a", UUID: uuid, PowerState: backends.PoweredOn}
	b2.Add(vm, map[string]string{"zone": "z2"})
	d := New(nil, Options{})
	var vcs []Target
	for i, b := range []*backendtest.Backend{b1, b2} {
		name := []string{"vc1", "vc2"}[i]
		vcs = append(vcs, Target{Name: name, Server: name + ":443", Backend: b, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
	}
	d.SetVCenters(vcs)
	t.Cleanup(d.Close)
	p, ok := d.Placed(uuid, []string{"zone"})
	if !ok || p.VCenter != "vc2" || !p.TagsKnown || p.Tags["zone"] != "z2" {
		t.Fatalf("Placed = %+v, %v; want the VM in vc2 with its zone z2", p, ok)
	}
}
