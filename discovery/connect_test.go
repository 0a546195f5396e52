package discovery_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// slowConnect is a vCenter making its first connection: calls wait until
// connect, Reachability is Unknown until then, and ConnectProgress
// reports what step tells it (a far-away vCenter answering step by step,
// or one stalled).
type slowConnect struct {
	*backendtest.Backend
	connected chan struct{}
	once      sync.Once

	mu       sync.Mutex
	progress backends.ConnectProgress
}

func newSlowConnect(b *backendtest.Backend) *slowConnect {
	s := &slowConnect{Backend: b, connected: make(chan struct{})}
	s.step("dialing", 0)
	return s
}

// step records progress now, with the slowest answer so far.
func (s *slowConnect) step(phase string, roundTrip time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.progress = backends.ConnectProgress{Phase: phase, Last: time.Now(), RoundTrip: max(s.progress.RoundTrip, roundTrip)}
}

// progressEvery makes a step every d until connect or stop.
func (s *slowConnect) progressEvery(d time.Duration, stop <-chan struct{}) {
	go func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-s.connected:
				return
			case <-stop:
				return
			case <-t.C:
				s.step("answering", d)
			}
		}
	}()
}

func (s *slowConnect) connect() {
	s.once.Do(func() {
		s.Backend.SetReachability(backends.ConnUp, nil)
		close(s.connected)
	})
}

// State is the fake's, with the connect's progress.
func (s *slowConnect) State() backends.State {
	st := s.Backend.State()
	s.mu.Lock()
	defer s.mu.Unlock()
	st.Connect = s.progress
	return st
}

// Probe waits for the connect, as a real backend's waits for its login.
func (s *slowConnect) Probe(ctx context.Context) error {
	select {
	case <-s.connected:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slowConnect) Find(ctx context.Context, q backends.Query) ([]backends.VM, error) {
	select {
	case <-s.connected:
		return s.Backend.Find(ctx, q)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// slowFleet is the fleet with vc3 connecting slowly.
func slowFleet(t *testing.T, connectWait, timeout time.Duration) (*fleet, *slowConnect, *discovery.Discoverer) {
	t.Helper()
	f := newFleet()
	f.backends["vc3"].SetReachability(backends.ConnUnknown, nil)
	slow := newSlowConnect(f.backends["vc3"])
	d := discovery.New(nil, discovery.Options{ConnectWait: connectWait})
	var vcs []discovery.Target
	for _, n := range f.names {
		var b backends.Backend = f.backends[n]
		if n == "vc3" {
			b = slow
		}
		vcs = append(vcs, discovery.Target{Name: n, Server: n + ":443", Backend: b, RequestTimeout: timeout, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
	}
	d.SetVCenters(vcs)
	scanEvery(t, d, time.Second)
	t.Cleanup(d.Close)
	return f, slow, d
}

// A vCenter whose first connect makes progress (a TLS handshake and a
// login across a WAN, each step a round trip) is waited for beyond
// ConnectWait: the lookups made while it connects find their VMs there
// instead of failing as "still connecting". Before, every lookup gave up
// after ConnectWait.
func TestConnectingVCenterMakingProgressIsWaitedFor(t *testing.T) {
	const connectWait, step, connectAfter = 100 * time.Millisecond, 50 * time.Millisecond, 600 * time.Millisecond
	f, slow, d := slowFleet(t, connectWait, 10*time.Second)
	stop := make(chan struct{})
	defer close(stop)
	slow.progressEvery(step, stop)
	time.AfterFunc(connectAfter, slow.connect)
	start := time.Now()
	// Lookups one after another, as one worker makes them: the first
	// began with the connect, the later ones past ConnectWait since.
	for _, vm := range f.vms["vc3"][:2] {
		res, err := d.Locate(t.Context(), byUUID(vm.UUID))
		if err != nil || res == nil || res.VCenter != "vc3" {
			t.Fatalf("vc3 connecting with progress (after %v): Locate = %v, %v; want found in vc3", time.Since(start), res, err)
		}
	}
	if took := time.Since(start); took < connectAfter*9/10 {
		t.Fatalf("the lookups took %v, before vc3 connected (%v)", took, connectAfter)
	}
	if got := d.Connected(); len(got) != 0 {
		t.Errorf("Connected = %v; no lookup was refused", got)
	}
}

// A vCenter whose connect stalls (TCP connected, then silence: a TLS
// front end that hangs) costs a lookup ConnectWait once; the later ones
// fail at once. Once it connects, Connected lists it, once.
func TestConnectingVCenterStalledIsNotWaitedFor(t *testing.T) {
	const connectWait, timeout = 100 * time.Millisecond, 4 * time.Second
	f, slow, d := slowFleet(t, connectWait, timeout)
	slow.step("tcp connected", time.Millisecond)
	start := time.Now()
	_, err := d.Locate(t.Context(), byUUID(f.vms["vc3"][0].UUID))
	first := time.Since(start)
	if !errors.Is(err, discovery.ErrVCenterConnecting) {
		t.Fatalf("vc3 stalled: err = %v, want ErrVCenterConnecting", err)
	}
	if first > timeout/4 {
		t.Fatalf("the first lookup took %v: it waited on vc3's deadline (%v), not ConnectWait (%v)", first, timeout, connectWait)
	}
	time.Sleep(connectWait)
	start = time.Now()
	for _, vm := range f.vms["vc3"] {
		if _, err := d.Locate(t.Context(), byUUID(vm.UUID)); !errors.Is(err, discovery.ErrVCenterConnecting) {
			t.Fatalf("later lookup: err = %v, want ErrVCenterConnecting", err)
		}
	}
	if took := time.Since(start); took > connectWait {
		t.Fatalf("%d later lookups took %v: they waited on the stalled vc3 again", len(f.vms["vc3"]), took)
	}
	if got := d.Connected(); len(got) != 0 {
		t.Fatalf("Connected = %v before vc3 is up", got)
	}
	slow.connect()
	if got := d.Connected(); !slices.Equal(got, []string{"vc3"}) {
		t.Fatalf("Connected = %v once vc3 is up after refusing lookups; want [vc3]", got)
	}
	if got := d.Connected(); len(got) != 0 {
		t.Fatalf("Connected = %v the second time; want it listed once", got)
	}
}

// However steadily it progresses, a connecting vCenter holds a lookup
// for at most half of its deadline: the rest is the lookup's own.
func TestConnectingVCenterIsWaitedForAtMostHalfTheDeadline(t *testing.T) {
	const connectWait, timeout = 50 * time.Millisecond, time.Second
	f, slow, d := slowFleet(t, connectWait, timeout)
	stop := make(chan struct{})
	defer close(stop)
	slow.progressEvery(20*time.Millisecond, stop)
	start := time.Now()
	_, err := d.Locate(t.Context(), byUUID(f.vms["vc3"][0].UUID))
	took := time.Since(start)
	if !errors.Is(err, discovery.ErrVCenterConnecting) {
		t.Fatalf("vc3 connecting for ever: err = %v, want ErrVCenterConnecting", err)
	}
	if took < timeout*4/10 || took > timeout*8/10 {
		t.Fatalf("the lookup took %v; want about half its deadline %v", took, timeout)
	}
}

// Connect probes every vCenter and waits: afterwards each is known up or
// down, so a lookup meets no "still connecting" vCenter.
func TestConnectSettlesEveryVCenter(t *testing.T) {
	f := newFleet()
	for _, b := range f.backends {
		b.SetReachability(backends.ConnUnknown, nil)
	}
	d := f.discoverer(t, time.Second, 5, time.Minute)
	defer d.Close()
	d.Connect(t.Context())
	for _, h := range d.Health() {
		if f.backends[h.Name].Probes() != 1 {
			t.Errorf("%s probed %d times; want 1", h.Name, f.backends[h.Name].Probes())
		}
		if h.Breaker != "closed" {
			t.Errorf("%s breaker %q; want closed", h.Name, h.Breaker)
		}
	}
}
