package vsphere

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// newReachBackend is a backend of vc through proxy p, with the inventory
// when inventory is set; closed at the end of the test.
func newReachBackend(t *testing.T, vc *vcsim.VCenter, p *vcsim.Proxy, timeout time.Duration, inventory bool) *Backend {
	t.Helper()
	o := optionsVia(vc, p.Host(), p.Port(), timeout)
	o.Inventory, o.Heartbeat, o.TagRefresh = inventory, time.Second, time.Hour
	b := New(o)
	b.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	return b
}

// awaitState waits until b's reachability is want, at most within, and
// returns it with how long it took.
func awaitState(t *testing.T, b *Backend, want backends.ConnState, within time.Duration) (backends.Reachability, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		r := b.Status().Reachability
		if r.State == want {
			return r, time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("reachability %v (err %v) after %s, want %v", r.State, r.Err, within, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func errContains(t *testing.T, r backends.Reachability, words ...string) {
	t.Helper()
	if r.Err == nil {
		t.Fatalf("reachability %v without an error", r.State)
	}
	for _, w := range words {
		if !strings.Contains(r.Err.Error(), w) {
			t.Errorf("reachability error %q does not say %q", r.Err, w)
		}
	}
}

// A vCenter that refuses connections is Down as soon as the inventory
// watch's first connect fails, long before any timeout, with no lookup
// made; once it accepts again, Probe brings it Up.
func TestReachabilityRefused(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
	if err := p.SetMode(vcsim.Refuse); err != nil {
		t.Fatal(err)
	}
	const timeout = 10 * time.Second
	b := newReachBackend(t, vc, p, timeout, true)
	r, took := awaitState(t, b, backends.ConnDown, timeout)
	if took > timeout/4 {
		t.Errorf("Down after %s: a refused connection is known at once, not after the %s timeout", took, timeout)
	}
	errContains(t, r, "dial", "refused")
	if err := p.SetMode(vcsim.Pass); err != nil {
		t.Fatal(err)
	}
	if err := b.Probe(ctxFor(t)); err != nil {
		t.Fatalf("Probe once vCenter accepts again: %v", err)
	}
	if r := b.Status().Reachability; r.State != backends.ConnUp || r.Err != nil {
		t.Fatalf("after a successful Probe: %v (%v), want up", r.State, r.Err)
	}
}

// A black-holed vCenter: Unknown until the watch's first connect ends,
// Down when its deadline passes, with an error that says so; healed, Probe
// brings it Up.
func TestReachabilityBlackholed(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
	if err := p.SetMode(vcsim.Blackhole); err != nil {
		t.Fatal(err)
	}
	const timeout = 2 * time.Second
	start := time.Now()
	b := newReachBackend(t, vc, p, timeout, true)
	if r := b.Status().Reachability; r.State != backends.ConnUnknown {
		t.Fatalf("reachability before the first connect ended = %v (%v), want unknown", r.State, r.Err)
	}
	r, _ := awaitState(t, b, backends.ConnDown, 5*timeout)
	if took := time.Since(start); took < timeout/2 {
		t.Errorf("Down after %s, before the connect's %s deadline", took, timeout)
	}
	errContains(t, r, "timeout")
	if err := p.SetMode(vcsim.Pass); err != nil {
		t.Fatal(err)
	}
	if err := b.Probe(ctxFor(t)); err != nil {
		t.Fatalf("Probe once vCenter answers again: %v", err)
	}
	if r := b.Status().Reachability; r.State != backends.ConnUp {
		t.Fatalf("after a successful Probe: %v (%v), want up", r.State, r.Err)
	}
}

// The inventory watch's polls: a vCenter that goes silent after the watch
// is in service is Down once a poll gets no answer within its deadline, and
// Up again when the watch is back, without any lookup or probe.
func TestReachabilityFollowsTheWatch(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
	const timeout = time.Second
	b := newReachBackend(t, vc, p, timeout, true)
	awaitState(t, b, backends.ConnUp, 10*time.Second)
	if err := p.SetMode(vcsim.Blackhole); err != nil {
		t.Fatal(err)
	}
	r, _ := awaitState(t, b, backends.ConnDown, 10*(time.Second+timeout))
	errContains(t, r, "timeout")
	if err := p.SetMode(vcsim.Pass); err != nil {
		t.Fatal(err)
	}
	awaitState(t, b, backends.ConnUp, 30*time.Second)
}

// The keep-alive ping is a connection-level event too: with no inventory
// and no lookups, a silent vCenter is Down once a ping gets no answer.
func TestReachabilityKeepAlive(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
	const timeout = time.Second
	o := optionsVia(vc, p.Host(), p.Port(), timeout)
	o.KeepAlive = 200 * time.Millisecond
	b := New(o)
	b.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	ctx := ctxFor(t)
	if err := b.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	awaitState(t, b, backends.ConnUp, time.Second)
	if err := p.SetMode(vcsim.Blackhole); err != nil {
		t.Fatal(err)
	}
	r, _ := awaitState(t, b, backends.ConnDown, 10*(o.KeepAlive+timeout))
	errContains(t, r, "keep-alive")
	if err := p.SetMode(vcsim.Pass); err != nil {
		t.Fatal(err)
	}
	if err := b.Probe(ctx); err != nil {
		t.Fatalf("Probe once vCenter answers again: %v", err)
	}
	awaitState(t, b, backends.ConnUp, time.Second)
}

// Rejected credentials make the vCenter Down with an error that says the
// login was rejected and never holds the password.
func TestReachabilityWrongPassword(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	const pw = "wr0ng-Passw0rd-in-reach"
	o := optionsVia(vc, vc.Host, vc.Port, 5*time.Second)
	o.Credentials = credentials.Static{User: vc.User, Password: config.Password(pw)}
	b := New(o)
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	err = b.Probe(ctxFor(t))
	if err == nil {
		t.Fatal("Probe with a wrong password succeeded")
	}
	r := b.Status().Reachability
	if r.State != backends.ConnDown {
		t.Fatalf("after a rejected login: %v, want down", r.State)
	}
	errContains(t, r, "login rejected")
	for _, e := range []error{err, r.Err} {
		if strings.Contains(e.Error(), pw) || strings.Contains(e.Error(), vc.Password) {
			t.Fatalf("error leaks a password: %v", e)
		}
	}
}

// Answers are Up, faults included: a VM vCenter says is gone, a session
// lost and logged in again.
func TestReachabilityAnswersAreUp(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	b := New(optionsVia(vc, vc.Host, vc.Port, 5*time.Second))
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	ctx := ctxFor(t)
	victim := vc.VMs[1]
	ref := backends.VMRef{Datacenter: victim.Datacenter, ID: victim.Ref}
	if _, err := b.Get(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := vc.Destroy(ctx, victim); err != nil {
		t.Fatal(err)
	}
	down := errors.New("test: marked down")
	b.sessions.setReachability(down)
	if _, err := b.Get(ctx, ref); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get(destroyed) = %v, want ErrNotFound", err)
	}
	if r := b.Status().Reachability; r.State != backends.ConnUp {
		t.Fatalf("after vCenter answered ManagedObjectNotFound: %v (%v), want up", r.State, r.Err)
	}

	b.sessions.setReachability(down)
	if err := vc.TerminateSessions(ctx); err != nil {
		t.Fatal(err)
	}
	q := backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}
	if vms, err := b.Find(ctx, q); err != nil || len(vms) != 1 {
		t.Fatalf("Find after the session was lost = %v, %v", vms, err)
	}
	if r := b.Status().Reachability; r.State != backends.ConnUp {
		t.Fatalf("after NotAuthenticated and a re-login: %v (%v), want up", r.State, r.Err)
	}
}
