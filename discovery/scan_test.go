package discovery_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// scanEvery runs d's duplicate scan every interval, as package cloud's
// loop does, until the test ends: discovery runs none of its own.
func scanEvery(t testing.TB, d *discovery.Discoverer, interval time.Duration) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			d.ScanDuplicates()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
}

// A Discoverer scans for twins only when told to (issue 21, and "the
// house, third step"): it runs no scan of its own, however long it lives,
// and one ScanDuplicates reports a twin at once.
func TestDiscovererScansOnlyWhenTold(t *testing.T) {
	f := newFleet()
	orig := f.vms["vc1"][0]
	twin := f.vms["vc3"][3]
	twin.Ref.ID, twin.UUID = "vm-twin", orig.UUID
	f.backends["vc3"].Add(twin, nil)
	var reported atomic.Int64
	d := discovery.New(f.targets(nil), discovery.Options{OnDuplicate: func(string, []string) { reported.Add(1) }})
	t.Cleanup(d.Close)
	time.Sleep(50 * time.Millisecond)
	if n := reported.Load(); n != 0 {
		t.Fatalf("a Discoverer never told to scan reported %d twins: it scans on its own", n)
	}
	d.ScanDuplicates()
	if n := reported.Load(); n != 1 {
		t.Fatalf("one ScanDuplicates reported %d twins, want 1", n)
	}
	d.ScanDuplicates()
	if n := reported.Load(); n != 1 {
		t.Fatalf("a second pass reported the twin again: %d reports", n)
	}
}
