package vsphere

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// coldLoad starts a backend with the inventory scoped to specs, reached
// through p, its inventory tuned by tune, and returns how long until it
// was in service, the SOAP calls vc handled meanwhile, and the VMs held.
func coldLoad(t *testing.T, vc *vcsim.VCenter, p *vcsim.Proxy, tune func(*inventory), specs ...string) (time.Duration, map[string]int64, int) {
	t.Helper()
	opts := optionsVia(vc, p.Host(), p.Port(), 30*time.Second)
	opts.Config.Datacenters = specs
	opts.Inventory, opts.Heartbeat, opts.TagRefresh = true, time.Minute, time.Hour
	b := New(opts)
	tune(b.inv)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	}()
	var took time.Duration
	var held int
	calls := soapDelta(vc, func() {
		start := time.Now()
		b.Start()
		deadline := start.Add(5 * time.Minute)
		for !inService(b) {
			if time.Now().After(deadline) {
				t.Fatal("the inventory did not load")
			}
			time.Sleep(5 * time.Millisecond)
		}
		took = time.Since(start)
		st := inventoryOf(b)
		held = st.VMs
	})
	return took, calls, held
}

func keep(*inventory) {}

func total(calls map[string]int64) (n int64) {
	for _, c := range calls {
		n += c
	}
	return n
}

// Measured, not asserted beyond what is held: a vCenter of 10
// datacenters of which the config names 1, and a vCenter of 5,000 VMs at
// WAN latency (200 ms per request) with pages of 1,000 (the former size),
// 5,000 and 10,000, in one datacenter and spread over 5 (loaded in
// parallel). Slow: run with INVENTORY_MEASURE=1.
func TestInventoryColdLoadMeasured(t *testing.T) {
	if os.Getenv("INVENTORY_MEASURE") == "" {
		t.Skip("a measurement; INVENTORY_MEASURE=1 runs it")
	}
	t.Run("one of ten datacenters", func(t *testing.T) {
		vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 10, MachinesPerPool: 50})
		p.SetDelay(20 * time.Millisecond)
		allTook, allCalls, allHeld := coldLoad(t, vc, p, keep)
		oneTook, oneCalls, oneHeld := coldLoad(t, vc, p, keep, "DC0")
		t.Logf("all 10 datacenters: %v, %d SOAP calls (%d WaitForUpdatesEx), %d VMs held", allTook.Round(time.Millisecond), total(allCalls), allCalls["WaitForUpdatesEx"], allHeld)
		t.Logf("DC0 only:           %v, %d SOAP calls (%d WaitForUpdatesEx), %d VMs held", oneTook.Round(time.Millisecond), total(oneCalls), oneCalls["WaitForUpdatesEx"], oneHeld)
		if allHeld != len(vc.VMs) || oneHeld != len(vmsOf(vc, "DC0")) {
			t.Fatalf("held %d and %d; want %d and %d", allHeld, oneHeld, len(vc.VMs), len(vmsOf(vc, "DC0")))
		}
	})
	for _, shape := range []struct{ dcs, perPool int }{{1, 2500}, {5, 500}} {
		t.Run(fmt.Sprintf("5000 VMs in %d datacenters at 200ms", shape.dcs), func(t *testing.T) {
			vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: shape.dcs, MachinesPerPool: shape.perPool})
			p.SetDelay(200 * time.Millisecond)
			for _, size := range []int32{1000, 5000, 10000} {
				took, calls, held := coldLoad(t, vc, p, func(inv *inventory) { inv.pageSize = size })
				t.Logf("pages of %5d: %v, %d SOAP calls (%d WaitForUpdatesEx), %d VMs held", size, took.Round(time.Millisecond), total(calls), calls["WaitForUpdatesEx"], held)
				if held != len(vc.VMs) {
					t.Fatalf("held %d; want %d", held, len(vc.VMs))
				}
			}
		})
	}
}
