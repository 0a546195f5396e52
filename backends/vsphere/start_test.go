package vsphere_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// New builds; Start starts (issue 21): a backend with an inventory talks
// to vCenter only once started — watched, unstarted, five times as long
// as a started one took to make its first request — and one never
// started closes without waiting for a watch that never ran.
func TestNewStartsNothing(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	backend := func(requests *atomic.Int64) *vsphere.Backend {
		return vsphere.New(vsphere.Options{
			Config:      config.VCenter{Name: vc.Name, Server: vc.Host, Port: vc.Port, InsecureFlag: true, RoundTripCount: 1, RequestTimeout: 10 * time.Second}.WithDefaults(),
			Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)},
			Inventory:   true,
			WrapTransport: func(next http.RoundTripper) http.RoundTripper {
				return roundTrip(func(r *http.Request) (*http.Response, error) {
					requests.Add(1)
					return next.RoundTrip(r)
				})
			},
		})
	}
	var started, idle atomic.Int64
	s := backend(&started)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	b := backend(&idle)
	begin := time.Now()
	s.Start()
	waitFor(t, "the started backend's first request", func() bool { return started.Load() > 0 })
	time.Sleep(5 * time.Since(begin))
	if n := idle.Load(); n != 0 {
		t.Fatalf("a backend never started made %d requests", n)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := b.Close(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("Close of a backend never started = %v (ctx %v); want it to return at once", err, ctx.Err())
	}
	b.Start() // after Close: nothing
	if n := idle.Load(); n != 0 {
		t.Fatalf("Start after Close made %d requests", n)
	}
}
