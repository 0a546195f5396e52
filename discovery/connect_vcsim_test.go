package discovery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// A vCenter across a WAN takes a second or more to connect (TCP, TLS,
// the service content, the login: a round trip each). The lookups made
// meanwhile — the CCM's first, at its start — wait for it while it
// answers step by step, and find their VMs, instead of failing "still
// connecting" after ConnectWait (as they did). Without an inventory the
// backend connects at its first lookup, however long after it was made.
func TestFirstLookupAcrossAWANWaitsForTheConnect(t *testing.T) {
	const wanDelay = 200 * time.Millisecond // every request, of the TLS handshake and the login too
	for _, inventory := range []bool{true, false} {
		t.Run(fmt.Sprintf("inventory=%v", inventory), func(t *testing.T) {
			fed, err := vcsim.Start(vcsim.Options{VCenters: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(fed.Close)
			vc := fed.VCenters[0]
			p, err := vc.NewProxy()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			p.SetDelay(wanDelay)
			b := vsphere.New(vsphere.Options{
				Config: config.VCenter{Name: vc.Name, Server: p.Host(), Port: p.Port(), InsecureFlag: true, RoundTripCount: 1,
					RequestTimeout: 10 * time.Second}.WithDefaults(),
				Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)},
				Inventory:   inventory,
			})
			b.Start()
			t.Cleanup(func() { closeWithin(b, 5*time.Second) })
			d := discovery.New([]discovery.Target{{Name: vc.Name, Server: discovery.ServerKey(p.Host(), p.Port()), Backend: b,
				RequestTimeout: 10 * time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute}}, discovery.Options{})
			scanEvery(t, d, time.Second)
			t.Cleanup(d.Close)
			if !inventory {
				time.Sleep(2 * wanDelay) // longer than ConnectWait since it was made
			}
			if st := b.State().Reachability.State; st != backends.ConnUnknown {
				t.Fatalf("reachability %v before the first connect ended; the test proves nothing", st)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			start := time.Now()
			seen := map[string]bool{}
			for _, vm := range vc.VMs {
				if seen[vm.Datacenter] {
					continue
				}
				seen[vm.Datacenter] = true
				res, err := d.Locate(ctx, byUUID(vm.UUID))
				if err != nil || res == nil || res.VM.Ref.ID != vm.Ref {
					t.Fatalf("Locate(%s) %v after the start = %v, %v; want found", vm.Name, time.Since(start).Round(time.Millisecond), res, err)
				}
			}
			if took := time.Since(start); took < 2*wanDelay {
				t.Fatalf("the lookups took %v: connected before they asked, the test proves nothing", took)
			}
			if pr := b.Status().Connect; pr.RoundTrip < wanDelay*9/10 {
				t.Errorf("Status().Connect = %+v; want a round trip of %v or more", pr, wanDelay)
			}
		})
	}
}
