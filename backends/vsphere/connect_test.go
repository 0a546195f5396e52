package vsphere

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// wanDelay is a vCenter across a WAN: every request of a TLS handshake
// and of the login waits this long.
const wanDelay = 200 * time.Millisecond

// startedVia is a backend with the inventory, as the CCM makes it, to vc
// through p, closed at the end of the test; restCalls counts its REST
// (tags) requests.
func startedVia(t *testing.T, vc *vcsim.VCenter, p *vcsim.Proxy, restCalls *atomic.Int64) *Backend {
	t.Helper()
	o := optionsVia(vc, p.Host(), p.Port(), 10*time.Second)
	o.Inventory, o.TagRefresh = true, time.Hour
	if restCalls != nil {
		o.WrapTransport = func(next http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if !strings.HasPrefix(r.URL.Path, "/sdk") {
					restCalls.Add(1)
				}
				return next.RoundTrip(r)
			})
		}
	}
	b := New(o)
	b.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	return b
}

// A vCenter across a WAN takes a second or more to connect (TCP, TLS,
// the service content, the login: a round trip each). The lookups made
// meanwhile — the CCM's first, at its start — wait for it while it
// answers step by step, and find their VMs, instead of failing "still
// connecting" after ConnectWait (as they did).
func TestFirstLookupAcrossAWANWaitsForTheConnect(t *testing.T) {
	vc, p := proxiedVCenter(t, vcsim.Options{})
	p.SetDelay(wanDelay)
	b := startedVia(t, vc, p, nil)
	d := discovery.New([]discovery.Target{{Name: vc.Name, Server: discovery.ServerKey(p.Host(), p.Port()), Backend: b,
		RequestTimeout: 10 * time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute}}, discovery.Options{})
	d.Start()
	t.Cleanup(d.Close)
	if st := b.Reachability().State; st != backends.ConnUnknown {
		t.Fatalf("reachability %v before the first connect ended; the test proves nothing", st)
	}
	start := time.Now()
	for _, vm := range firstPerDatacenter(vc) {
		res, err := d.FindByUUID(ctxFor(t), vm.UUID)
		if err != nil || res == nil || res.VM.Ref.ID != vm.Ref {
			t.Fatalf("FindByUUID(%s) %v after the start = %v, %v; want found", vm.Name, time.Since(start).Round(time.Millisecond), res, err)
		}
	}
	if took := time.Since(start); took < 2*wanDelay {
		t.Fatalf("the lookups took %v: connected before they asked, the test proves nothing", took)
	}
	if pr := b.ConnectProgress(); pr.RoundTrip < wanDelay*9/10 {
		t.Errorf("ConnectProgress = %+v; want a round trip of %v or more", pr, wanDelay)
	}
}
