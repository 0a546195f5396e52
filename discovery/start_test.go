package discovery_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// New builds; Start starts (issue 21): a Discoverer never started runs no
// duplicate scan, however long it lives — watched here five times as long
// as a started one took to report the same twin.
func TestNewStartsNoScan(t *testing.T) {
	f := newFleet()
	orig := f.vms["vc1"][0]
	twin := f.vms["vc3"][3]
	twin.Ref.ID, twin.UUID = "vm-twin", orig.UUID
	f.backends["vc3"].Add(twin, nil)
	var vcs []discovery.Target
	for _, n := range f.names {
		vcs = append(vcs, discovery.Target{Name: n, Server: n + ":443", Backend: f.backends[n], RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
	}
	var started, idle atomic.Int64
	s := discovery.New(vcs, discovery.Options{DuplicateScan: 5 * time.Millisecond, OnDuplicate: func(string, []string) { started.Add(1) }})
	t.Cleanup(s.Close)
	d := discovery.New(vcs, discovery.Options{DuplicateScan: 5 * time.Millisecond, OnDuplicate: func(string, []string) { idle.Add(1) }})
	t.Cleanup(d.Close)
	begin := time.Now()
	s.Start()
	eventually(t, "the started Discoverer to report the twin", func() bool { return started.Load() > 0 })
	time.Sleep(5 * time.Since(begin))
	if n := idle.Load(); n != 0 {
		t.Fatalf("a Discoverer never started reported %d twins: its scan runs", n)
	}
	d.Start()
	eventually(t, "the twin once started", func() bool { return idle.Load() > 0 })
	d.Close()
	d.Start() // after Close: nothing, and nothing to wait for
	d.Close()
}
