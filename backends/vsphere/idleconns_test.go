package vsphere

import (
	"sync"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// Concurrent lookups sent to vCenter directly (no inventory) reuse the
// session's connections: once as many are open as lookups run at once,
// none is dialled again. With net/http's default of 2 idle connections
// per host, every round of 8 lookups closed 6 and dialled 6 anew, a TLS
// handshake each.
func TestConcurrentLookupsReuseConnections(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{})
	b := newReachBackend(t, vc, p, 10*time.Second, false)
	ctx := ctxFor(t)
	q := backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}
	const workers = 8
	round := func() {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				if vms, err := b.Find(ctx, q); err != nil || len(vms) != 1 {
					t.Errorf("Find: %v, %v", vms, err)
				}
			})
		}
		wg.Wait()
	}
	round() // logs in and opens what the rounds need
	before, start := p.Traffic(), time.Now()
	const rounds = 5
	for range rounds {
		round()
	}
	took := time.Since(start) / rounds
	tr := p.Traffic().Sub(before)
	if tr.Connections > workers/2 {
		t.Fatalf("%d rounds of %d concurrent lookups dialled %d connections (%d requests): the session's idle connections were not kept",
			rounds, workers, tr.Connections, tr.Requests)
	}
	t.Logf("%d rounds of %d concurrent lookups: %d connections dialled, %d requests, %s a round", rounds, workers, tr.Connections, tr.Requests, took)
}
