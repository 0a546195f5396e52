package vsphere

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// gatedSource blocks every Get from the from-th on (counted from 1) until
// open is closed or the caller's context ends: a Secret informer that has
// not synced, a vault agent that hangs.
type gatedSource struct {
	credentials.Source
	from  int64
	calls atomic.Int64
	open  chan struct{}
}

func newGatedSource(src credentials.Source, from int64) *gatedSource {
	return &gatedSource{Source: src, from: from, open: make(chan struct{})}
}

func (g *gatedSource) Get(ctx context.Context) (credentials.Credentials, error) {
	if g.calls.Add(1) >= g.from {
		select {
		case <-g.open:
		case <-ctx.Done():
			return credentials.Credentials{}, ctx.Err()
		}
	}
	return g.Source.Get(ctx)
}

// The short deadline of a caller that waits for someone else's login, and
// how late it may return (generous: the machine may be loaded). The login
// it waits for hangs for loginTimeout, many times longer.
const (
	shortDeadline = 200 * time.Millisecond
	lateMargin    = 10 * shortDeadline
	loginTimeout  = 8 * time.Second
)

// waitFor runs a lookup under shortDeadline and reports how long it took.
func waitFor(t *testing.T, what string, call func(ctx context.Context) error) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), shortDeadline)
	defer cancel()
	start := time.Now()
	err := call(ctx)
	took := time.Since(start)
	if took > lateMargin {
		t.Errorf("%s with a %s deadline returned after %s (err %v): it waited on a login it did not start, which hangs for %s",
			what, shortDeadline, took.Round(time.Millisecond), err, loginTimeout)
	}
	return took, err
}

// awaitCalls waits until src has been asked n times.
func awaitCalls(t *testing.T, src *gatedSource, n int64) {
	t.Helper()
	if !(poll.Schedule{Every: 5 * time.Millisecond, Within: 10 * time.Second}).Holds(func() bool { return src.calls.Load() >= n }) {
		t.Fatalf("credentials asked %d times, want %d", src.calls.Load(), n)
	}
}

// A first login that hangs (credentials not available yet) does not make
// a concurrent lookup wait past its own deadline; once the credentials
// come, the login that was under way completes for its own caller.
func TestHangingLoginDoesNotHoldOtherCallers(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	o := optionsVia(vc, vc.Host, vc.Port, loginTimeout)
	src := newGatedSource(o.Credentials, 1)
	o.Credentials = src
	b := New(o)
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	q := backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}

	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*loginTimeout)
		defer cancel()
		_, err := b.Find(ctx, q)
		first <- err
	}()
	awaitCalls(t, src, 1)
	_, err = waitFor(t, "Find", func(ctx context.Context) error { _, err := b.Find(ctx, q); return err })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Find while the login hangs: err = %v, want its deadline", err)
	}
	close(src.open)
	if err := <-first; err != nil {
		t.Fatalf("the first caller's Find, once credentials came: %v", err)
	}
}

// The same when the login hangs on the network: a vCenter that accepts
// connections and never answers, met first by the inventory watch.
func TestBlackholedLoginDoesNotHoldOtherCallers(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1})
	if err := p.SetMode(vcsim.Blackhole); err != nil {
		t.Fatal(err)
	}
	o := optionsVia(vc, p.Host(), p.Port(), loginTimeout)
	o.Inventory, o.Heartbeat, o.TagRefresh = true, time.Second, time.Hour
	b := New(o)
	b.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	time.Sleep(100 * time.Millisecond) // the watch is logging in
	_, err := waitFor(t, "Find", func(ctx context.Context) error {
		_, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}})
		return err
	})
	if err == nil {
		t.Fatal("Find through a black hole succeeded")
	}
}

// A re-login that hangs (the session was lost, the credentials do not
// come) does not make other lookups wait past their deadlines.
func TestHangingReloginDoesNotHoldOtherCallers(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	o := optionsVia(vc, vc.Host, vc.Port, loginTimeout)
	src := newGatedSource(o.Credentials, 2)
	o.Credentials = src
	b := New(o)
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	ctx := ctxFor(t)
	q := backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}
	if _, err := b.Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := vc.TerminateSessions(ctx); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*loginTimeout)
		defer cancel()
		_, err := b.Find(ctx, q)
		first <- err
	}()
	awaitCalls(t, src, 2) // the re-login is under way
	_, err = waitFor(t, "Find", func(ctx context.Context) error { _, err := b.Find(ctx, q); return err })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Find while the re-login hangs: err = %v, want its deadline", err)
	}
	close(src.open)
	if err := <-first; err != nil {
		t.Fatalf("the first caller's Find after the re-login: %v", err)
	}
}

// A REST login that hangs does not hold SOAP lookups at all: they succeed.
func TestHangingRESTLoginDoesNotHoldLookups(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	o := optionsVia(vc, vc.Host, vc.Port, loginTimeout)
	src := newGatedSource(o.Credentials, 2)
	o.Credentials = src
	b := New(o)
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	ctx := ctxFor(t)
	want := vc.VMs[0]
	q := backends.Query{By: backends.ByUUID, Values: []string{want.UUID}}
	vms, err := b.Find(ctx, q)
	if err != nil || len(vms) != 1 {
		t.Fatal(vms, err)
	}
	tagged := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*loginTimeout)
		defer cancel()
		tg, err := b.Tags(ctx, &vms[0], zoneRegion)
		if err == nil && tg["k8s-zone"] != want.Zone {
			err = errors.New("wrong zone " + tg["k8s-zone"])
		}
		tagged <- err
	}()
	awaitCalls(t, src, 2) // the REST login is under way
	_, err = waitFor(t, "Find", func(ctx context.Context) error { _, err := b.Find(ctx, q); return err })
	if err != nil {
		t.Errorf("Find while the REST login hangs: %v", err)
	}
	close(src.open)
	if err := <-tagged; err != nil {
		t.Fatalf("Tags after the REST login: %v", err)
	}
}
