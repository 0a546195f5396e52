package vsphere

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// wanDelay is a vCenter across a WAN: every request waits this long.
const wanDelay = 200 * time.Millisecond

// startedVia is a backend, with the inventory or not, to vc
// through p, closed at the end of the test; restCalls counts its REST
// (tags) requests.
func startedVia(t *testing.T, vc *vcsim.VCenter, p *vcsim.Proxy, restCalls *atomic.Int64, inventory bool) *Backend {
	t.Helper()
	o := optionsVia(vc, p.Host(), p.Port(), 10*time.Second)
	o.Inventory, o.TagRefresh = inventory, time.Hour
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

// The tags are read in bulk as soon as the inventory has loaded, not at
// the first lookup that needs them: that lookup asks vCenter nothing.
func TestTagsAreReadWithTheInventory(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{})
	p.SetDelay(wanDelay / 4)
	var rest atomic.Int64
	b := startedVia(t, vc, p, &rest, true)
	if !(poll.Schedule{Every: 10 * time.Millisecond, Within: 20 * time.Second}).Holds(func() bool {
		return inService(b) && rest.Load() != 0 && b.bulkTags.get() != nil
	}) {
		t.Fatalf("no tags read in bulk %v after the inventory loaded (in service %v, %d REST requests)", 20*time.Second, inService(b), rest.Load())
	}
	ctx := ctxFor(t)
	before := rest.Load()
	for _, want := range firstPerDatacenter(vc) {
		vms, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{want.UUID}, AllowCached: true})
		if err != nil || len(vms) != 1 {
			t.Fatalf("Find(%s) = %+v, %v", want.Name, vms, err)
		}
		tg, err := b.Tags(ctx, &vms[0], zoneRegion)
		if err != nil || tg["k8s-zone"] != want.Zone || tg["k8s-region"] != want.Region {
			t.Fatalf("Tags(%s) = %v, %v; want zone %s region %s", want.Name, tg, err, want.Zone, want.Region)
		}
	}
	if n := rest.Load() - before; n != 0 {
		t.Errorf("the first lookups' tags cost %d REST requests; want them read with the inventory", n)
	}
}

// The bulk read of the tags reads the names of the tags and categories
// it meets several at a time: one after another they cost a round trip
// each, seconds across a WAN for a vCenter with a few dozen tags.
func TestBulkTagReadReadsNamesInParallel(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{})
	var rest atomic.Int64
	b := startedVia(t, vc, p, &rest, true)
	poll.Schedule{Every: 10 * time.Millisecond, Within: 20 * time.Second}.Until(t, "the inventory and its tags to load", func() bool {
		return inService(b) && b.bulkTags.get() != nil
	})
	p.SetDelay(wanDelay / 2)
	ctx := ctxFor(t)
	// The baseline: one REST request (the tags on an object without any).
	start := time.Now()
	if _, err := b.attachedTags(ctx, nil); err != nil {
		t.Fatal(err)
	}
	one := time.Since(start)
	b.names = cache.NewExpiring() // every name to read again
	before := rest.Load()
	start = time.Now()
	if _, err := b.loadTags(ctx, b.bulkTags.get()); err != nil {
		t.Fatal(err)
	}
	took, requests := time.Since(start), rest.Load()-before
	if requests < 6 {
		t.Fatalf("the bulk read made %d REST requests; the test needs names to read", requests)
	}
	t.Logf("bulk read: %d REST requests in %v; one request %v", requests, took, one)
	// One after another they take requests × one; at nameReads at a time
	// about half of that here (each concurrent read opens a connection of
	// its own: a TLS handshake more).
	if float64(took) > float64(requests)*float64(one)*3/4 {
		t.Errorf("the bulk read took %v for %d requests of %v each: its names were read one after another", took, requests, one)
	}
}
