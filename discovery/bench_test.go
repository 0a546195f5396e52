package discovery_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// BenchmarkFindByUUID looks up kubelet system UUIDs over 3 simulated
// vCenters × 2 datacenters through the govmomi backend, and reports
// lookups/s and vCenter HTTP requests per lookup: "cold" searches every
// vCenter (nothing remembered), "cached" re-reads the remembered location.
func BenchmarkFindByUUID(b *testing.B) {
	fed, err := vcsim.Start(vcsim.Options{VCenters: 3, Datacenters: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer fed.Close()
	var requests atomic.Int64
	var vcs []discovery.VCenter
	for _, vc := range fed.VCenters {
		be := vsphere.New(vsphere.Options{
			Config:        config.VCenterConfig{Name: vc.Name, Server: vc.Host, Port: vc.Port, InsecureFlag: true},
			Credentials:   credentials.Static{User: vc.User, Password: config.Password(vc.Password)},
			WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &requests} },
		})
		defer func() { _ = be.Close(context.Background()) }()
		vcs = append(vcs, discovery.VCenter{Name: vc.Name, Backend: be, RequestTimeout: 10 * time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
	}
	vms := fed.AllVMs()
	ctx := context.Background()
	run := func(b *testing.B, d func() *discovery.Discoverer) {
		disc := d()
		for _, vm := range vms { // log in everywhere and warm the cache
			if _, err := disc.FindByUUID(ctx, vm.SystemUUID()); err != nil {
				b.Fatal(err)
			}
		}
		requests.Store(0)
		b.ResetTimer()
		start := time.Now()
		for i := 0; b.Loop(); i++ {
			vm := vms[i%len(vms)]
			res, err := d().FindByUUID(ctx, vm.SystemUUID())
			if err != nil || res == nil || res.VM.UUID != vm.UUID {
				b.Fatalf("FindByUUID(%s) = %v, %v", vm.Name, res, err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lookups/s")
		b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/lookup")
	}
	b.Run("cold", func(b *testing.B) {
		// A fresh Discoverer per lookup remembers nothing, but shares the
		// logged-in backends.
		run(b, func() *discovery.Discoverer { return discovery.New(vcs, discovery.Options{}) })
	})
	b.Run("cached", func(b *testing.B) {
		d := discovery.New(vcs, discovery.Options{})
		run(b, func() *discovery.Discoverer { return d })
	})
}
