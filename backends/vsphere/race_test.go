package vsphere

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// refresh compares the session's credential fingerprint while a relogin
// rewrites it: go test -race must find nothing.
func TestRefreshConcurrentWithRelogin(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	b := New(optionsVia(vc, vc.Host, vc.Port, 10*time.Second))
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	ctx := ctxFor(t)
	c, err := b.sessions.current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		seen := b.sessions.currentGeneration()
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := b.sessions.relogin(ctx, c, seen); err != nil {
				t.Errorf("relogin: %v", err)
			}
		})
		wg.Go(func() {
			if rotated, err := b.sessions.refresh(ctx, time.Minute); rotated || err != nil {
				t.Errorf("refresh with unchanged credentials: rotated=%v err=%v", rotated, err)
			}
		})
		wg.Wait()
	}
}

// Closing the sessions reads the REST session's state while a first REST
// login writes it: go test -race must find nothing. Before the fix the
// race window was a few instructions (between restClient's two
// acquisitions of the sessions' lock): the goroutines start together, and
// close a little later each round, to sweep it.
func TestCloseConcurrentWithRESTLogin(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	ctx := ctxFor(t)
	var spin atomic.Int64 // busy work the compiler cannot drop
	for i := range 600 {
		o := optionsVia(vc, vc.Host, vc.Port, 10*time.Second)
		// The REST login fails before any request (the race is in the
		// sessions' memory, not on the wire): rounds stay cheap.
		o.Credentials = &onceSource{Source: o.Credentials}
		b := New(o)
		b.Start()
		if _, err := b.sessions.current(ctx); err != nil {
			t.Fatal(err)
		}
		var ready atomic.Int32
		start := func() {
			ready.Add(1)
			for ready.Load() < 2 {
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			start()
			_, _ = b.sessions.restClient(ctx)
		})
		wg.Go(func() {
			start()
			for range i % 60 {
				spin.Add(1)
			}
			_ = b.sessions.close(ctx)
		})
		wg.Wait()
		_ = b.Close(ctx)
	}
}

// onceSource gives its credentials once, then fails.
type onceSource struct {
	credentials.Source
	used atomic.Bool
}

func (s *onceSource) Get(ctx context.Context) (credentials.Credentials, error) {
	if s.used.Swap(true) {
		return credentials.Credentials{}, errors.New("no more credentials")
	}
	return s.Source.Get(ctx)
}
