package vsphere_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// Every request to vCenter — SOAP and the tags (REST) client alike —
// names the product and version, so vCenter's session list shows who is
// logged in.
func TestRequestsCarryTheUserAgent(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	const ua = "vsphere-federated-ccm/v1.2.3-test"
	var mu sync.Mutex
	seen := map[string]int{}
	b := vsphere.New(vsphere.Options{
		Config:      config.VCenter{Name: vc.Name, Server: vc.Host, Port: vc.Port, InsecureFlag: true, RoundTripCount: 1}.WithDefaults(),
		Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)},
		UserAgent:   ua,
		WrapTransport: func(next http.RoundTripper) http.RoundTripper {
			return roundTrip(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				seen[r.Header.Get("User-Agent")]++
				mu.Unlock()
				return next.RoundTrip(r)
			})
		},
	})
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	ctx := t.Context()
	vms, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}})
	if err != nil || len(vms) != 1 {
		t.Fatalf("Find = %v, %v", vms, err)
	}
	if _, err := b.Tags(ctx, &vms[0], []string{"k8s-zone", "k8s-region"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[ua] < 3 {
		t.Fatalf("User-Agents seen (value: requests) = %v; want only %q, on every request", seen, ua)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
