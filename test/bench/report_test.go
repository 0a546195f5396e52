package main

import (
	"strings"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// TestReadmeRows checks the row per run in the README's columns: a measure
// a run did not reach is a dash, a failover whose standby had not synced
// its inventories says so.
func TestReadmeRows(t *testing.T) {
	r := &report{
		Config: config{VCenters: 2, Datacenters: 1, VMsPerDatacenter: 1000, Nodes: 200},
		Runs: []*runResult{
			{
				Delay: 0, Nodes: 200, Initialized: 200, AllInit: 2500 * time.Millisecond,
				Init:      counters{Wire: wire(30)},
				AfterInit: procSample{HWMKiB: 100 << 10}, End: procSample{HWMKiB: 110 << 10},
				CPUInit: 3200 * time.Millisecond, RestartMeasure: true, RestartTook: 1500 * time.Millisecond,
				FailoverMeasure: true, Failover: failoverResult{First: 120 * time.Millisecond, Warm: true},
			},
			{
				Delay: 200 * time.Millisecond, Nodes: 200, Initialized: 150,
				FailoverMeasure: true, Failover: failoverResult{First: 6100 * time.Millisecond},
			},
		},
	}
	got := r.readmeRows()
	want := []string{
		"| 2 vCenters × 1 DC × 1,000 VMs, 200 Nodes |     0 |      2.5 |                  0.15 |            110 |             3.2 |                      1.5 |                   0.12 |",
		"| 2 vCenters × 1 DC × 1,000 VMs, 200 Nodes | 200ms |        — |                  0.00 |              0 |             0.0 |                        — |    6.10 (cold standby) |",
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("readme rows lack\n%s\ngot:\n%s", w, got)
		}
	}
}

func wire(requests int64) (tr vcsim.Traffic) {
	tr.Requests = requests
	return tr
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 12000: "12,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
