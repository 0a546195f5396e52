package discovery_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// BenchmarkLocateByUUID looks up kubelet system UUIDs over 3 simulated
// vCenters × 2 datacenters through the govmomi backend, with and without
// its inventory, and reports lookups/s and vCenter HTTP requests per
// lookup: "cold" searches every vCenter (nothing remembered), "cached"
// re-reads the remembered location.
func BenchmarkLocateByUUID(b *testing.B) {
	fed, err := vcsim.Start(vcsim.Options{VCenters: 3, Datacenters: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer fed.Close()
	var requests atomic.Int64
	vms := fed.AllVMs()
	ctx := context.Background()
	for _, inventory := range []bool{false, true} {
		var vcs []discovery.Target
		for _, vc := range fed.VCenters {
			be := vsphere.New(vsphere.Options{
				Config:        config.VCenter{Name: vc.Name, Server: vc.Host, Port: vc.Port, InsecureFlag: true}.WithDefaults(),
				Credentials:   credentials.Static{User: vc.User, Password: config.Password(vc.Password)},
				WrapTransport: vcsim.CountRequests(&requests),
				// Polls only on change: the requests counted are the lookups'.
				Inventory: inventory, Heartbeat: time.Hour,
			})
			be.Start()
			defer closeWithin(be, time.Second)
			vcs = append(vcs, discovery.Target{Name: vc.Name, Server: vc.Name + ":443", Backend: be, RequestTimeout: 10 * time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
		}
		run := func(b *testing.B, d func() *discovery.Discoverer) {
			disc := d()
			deadline := time.Now().Add(10 * time.Second)
			for _, be := range vcs { // wait for the inventories to load
				for inventory && !inSync(ctx, be.Backend, vms[0], &requests) && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
			}
			for _, vm := range vms { // log in everywhere and warm the cache
				if _, err := disc.Locate(ctx, byUUID(vm.SystemUUID())); err != nil {
					b.Fatal(err)
				}
			}
			requests.Store(0)
			b.ResetTimer()
			start := time.Now()
			for i := 0; b.Loop(); i++ {
				vm := vms[i%len(vms)]
				res, err := d().Locate(ctx, byUUID(vm.SystemUUID()))
				if err != nil || res == nil || res.VM.UUID != vm.UUID {
					b.Fatalf("Locate(%s) = %v, %v", vm.Name, res, err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lookups/s")
			b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/lookup")
		}
		mode := "direct"
		if inventory {
			mode = "inventory"
		}
		b.Run(mode+"/cold", func(b *testing.B) {
			// A fresh Discoverer per lookup remembers nothing, but shares
			// the logged-in backends.
			run(b, func() *discovery.Discoverer { return discovery.New(vcs, discovery.Options{}) })
		})
		b.Run(mode+"/cached", func(b *testing.B) {
			d := discovery.New(vcs, discovery.Options{})
			scanEvery(b, d, time.Second)
			run(b, func() *discovery.Discoverer { return d })
		})
	}
}

// inSync reports whether be answers a lookup from its inventory: at no
// request (one out of service asks vCenter).
func inSync(ctx context.Context, be backends.Backend, vm *vcsim.VM, requests *atomic.Int64) bool {
	before := requests.Load()
	_, err := be.Find(ctx, backends.Query{By: backends.ByName, Values: []string{vm.Name}, AllowCached: true})
	return err == nil && requests.Load() == before
}

// BenchmarkHealthyVCenterWithBlackholedNeighbour measures cold lookups of
// VMs in healthy vCenters, first with every vCenter answering, then with
// vc3 black-holed (accepts connections, never answers) once its breaker has
// opened: the two latencies should match.
func BenchmarkHealthyVCenterWithBlackholedNeighbour(b *testing.B) {
	fed, err := vcsim.Start(vcsim.Options{VCenters: 3, Datacenters: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer fed.Close()
	proxies := map[string]*vcsim.Proxy{}
	var vcs []discovery.Target
	for _, vc := range fed.VCenters {
		p, err := vc.NewProxy()
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		proxies[vc.Name] = p
		be := vsphere.New(vsphere.Options{
			Config:      config.VCenter{Name: vc.Name, Server: vc.Host, Port: p.Port(), InsecureFlag: true}.WithDefaults(),
			Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)},
		})
		be.Start()
		defer closeWithin(be, time.Second)
		vcs = append(vcs, discovery.Target{Name: vc.Name, Server: vc.Name + ":443", Backend: be, RequestTimeout: 500 * time.Millisecond, ConsecutiveFailures: 3, OpenTimeout: time.Hour})
	}
	healthy := append(append([]*vcsim.VM(nil), fed.VCenter("vc1").VMs...), fed.VCenter("vc2").VMs...)
	ctx := context.Background()
	// A nanosecond TTL: every lookup searches every vCenter (cold), while
	// the Discoverer, and so vc3's breaker, lives on.
	cold := discovery.Options{LocationTTL: time.Nanosecond}
	run := func(b *testing.B, d *discovery.Discoverer) {
		var total time.Duration
		for i := 0; b.Loop(); i++ {
			vm := healthy[i%len(healthy)]
			start := time.Now()
			res, err := d.Locate(ctx, byUUID(vm.SystemUUID()))
			total += time.Since(start)
			if err != nil || res == nil {
				b.Fatalf("Locate(%s) = %v, %v", vm.Name, res, err)
			}
		}
		b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/lookup")
	}
	b.Run("all-healthy", func(b *testing.B) { run(b, discovery.New(vcs, cold)) })
	b.Run("vc3-blackholed", func(b *testing.B) {
		if err := proxies["vc3"].SetMode(vcsim.Blackhole); err != nil {
			b.Fatal(err)
		}
		d := discovery.New(vcs, cold)
		scanEvery(b, d, time.Second)
		ghost := "42ffffff-ffff-4fff-8fff-ffffffffffff"
		for range 3 { // trip vc3's breaker: three deadlines
			_, _ = d.Locate(ctx, byUUID(ghost))
		}
		if _, err := d.Locate(ctx, byUUID(ghost)); !errors.Is(err, discovery.ErrBreakerOpen) {
			b.Fatalf("vc3's breaker is not open: %v", err)
		}
		run(b, d)
	})
}

// closeWithin logs a backend out, giving up after d (a black-holed vCenter
// never answers the logout).
func closeWithin(b interface{ Close(context.Context) error }, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = b.Close(ctx)
}
