package discovery_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
)

// A VM found in one vCenter does not wait for a vCenter that is not known
// up (still connecting, or down): a dead vCenter costs the healthy ones'
// Nodes nothing. One known up is waited for, so a duplicate there is seen.
func TestFoundDoesNotWaitForAVCenterNotKnownUp(t *testing.T) {
	const timeout = time.Second
	f := newFleet()
	d := f.discoverer(t, timeout, 5, time.Minute)
	ctx := t.Context()
	vm := f.vms["vc1"][1]
	f.backends["vc3"].Hang(true)

	f.backends["vc3"].SetReachability(backends.ConnUnknown, nil)
	start := time.Now()
	res, err := d.Locate(ctx, byUUID(vm.UUID))
	notUp := time.Since(start)
	if err != nil || res == nil || res.VCenter != "vc1" {
		t.Fatalf("vc3 connecting: Locate = %v, %v; want found in vc1", res, err)
	}
	if notUp > timeout/4 {
		t.Fatalf("vc3 connecting: the lookup took %v, waiting on vc3's deadline %v", notUp, timeout)
	}

	// Absence still waits for vc3's answer, and without it is an error.
	if res, err := d.Locate(ctx, byUUID("42ffffff-ffff-4fff-8fff-ffffffffffff")); err == nil || res != nil {
		t.Fatalf("vc3 connecting, VM nowhere: %v, %v; want an error", res, err)
	}

	f.backends["vc3"].SetReachability(backends.ConnUp, nil)
	other := f.vms["vc1"][2] // not remembered: every vCenter is asked
	start = time.Now()
	if res, err := d.Locate(ctx, byUUID(other.UUID)); err != nil || res == nil {
		t.Fatalf("vc3 up and hanging: Locate = %v, %v", res, err)
	}
	if up := time.Since(start); up < timeout*9/10 {
		t.Fatalf("vc3 known up: the lookup took %v, did not wait for vc3 (deadline %v)", up, timeout)
	}
}

// A vCenter known down answers every lookup at once, without a call, and
// is probed in the background; once a probe succeeds lookups reach it.
func TestKnownDownFailsFastAndIsProbed(t *testing.T) {
	f := newFleet()
	d := discovery.New(nil, discovery.Options{ProbeInterval: 20 * time.Millisecond})
	scanEvery(t, d, time.Second)
	var vcs []discovery.Target
	for _, n := range f.names {
		vcs = append(vcs, discovery.Target{Name: n, Server: n + ":443", Backend: f.backends[n], RequestTimeout: 300 * time.Millisecond, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
	}
	d.SetVCenters(vcs)
	t.Cleanup(d.Close)
	ctx := t.Context()
	down := f.backends["vc2"]
	down.Hang(true)
	down.SetReachability(backends.ConnDown, errors.New("dial tcp: connection refused"))
	vm := f.vms["vc2"][0]
	const deadline, interval = 300 * time.Millisecond, 20 * time.Millisecond
	begin := time.Now()
	for range 10 {
		start := time.Now()
		_, err := d.Locate(ctx, byUUID(vm.UUID))
		if !errors.Is(err, discovery.ErrVCenterDown) {
			t.Fatalf("vc2 known down: err = %v, want ErrVCenterDown", err)
		}
		if took := time.Since(start); took >= deadline*9/10 {
			t.Fatalf("vc2 known down: a lookup took %v (its deadline is %v): it waited on vc2", took, deadline)
		}
	}
	// One probe in flight at a time, at most one per ProbeInterval.
	if n, most := down.Probes(), 1+int64(time.Since(begin)/interval); n < 1 || n > most {
		t.Fatalf("%d probes during 10 quick lookups; want 1 to %d (one per %v)", n, most, interval)
	}
	for _, h := range d.Health() {
		if h.Name == "vc2" && h.Healthy() {
			t.Fatal("Health says vc2 is healthy while it is down")
		}
	}
	down.Hang(false)
	eventually(t, "a probe to bring vc2 back", func() bool {
		res, err := d.Locate(ctx, byUUID(vm.UUID))
		return err == nil && res != nil && res.VCenter == "vc2"
	})
}

// eventually polls cond every 20ms for up to 10s.
var eventually = poll.Schedule{Every: 20 * time.Millisecond, Within: 10 * time.Second}.Until

// The inventories' UUIDs are compared across vCenters: a twin is
// reported once as soon as it appears, and a lookup that found a VM
// without waiting for the vCenter holding its twin is a DuplicateError.
func TestTwinsAreSeenFromTheInventories(t *testing.T) {
	f := newFleet()
	var mu sync.Mutex
	reported := map[string][]string{}
	calls := 0
	d := discovery.New(nil, discovery.Options{OnDuplicate: func(uuid string, vcs []string) {
		mu.Lock()
		defer mu.Unlock()
		reported[uuid] = vcs
		calls++
	}})
	scanEvery(t, d, 10*time.Millisecond)
	var vcs []discovery.Target
	for _, n := range f.names {
		vcs = append(vcs, discovery.Target{Name: n, Server: n + ":443", Backend: f.backends[n], RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
	}
	d.SetVCenters(vcs)
	t.Cleanup(d.Close)
	ctx := t.Context()
	orig := f.vms["vc1"][0]
	twin := f.vms["vc3"][3]
	twin.Ref.ID, twin.UUID = "vm-twin", orig.UUID
	f.backends["vc3"].Add(twin, nil)
	eventually(t, "the twin to be reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprint(reported[orig.UUID]) == "[vc1 vc3]"
	})
	// vc3 now connecting and hanging: the lookup does not wait for it, but
	// its inventory's last word holds the twin.
	f.backends["vc3"].Hang(true)
	f.backends["vc3"].SetReachability(backends.ConnUnknown, nil)
	_, err := d.Locate(ctx, byUUID(orig.UUID))
	var de *discovery.DuplicateError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "vcenter vc3") || !strings.Contains(err.Error(), "vcenter vc1") {
		t.Fatalf("Locate with vc3 not waited for: err = %v; want a DuplicateError naming vc1 and vc3", err)
	}
	time.Sleep(50 * time.Millisecond) // several scans
	mu.Lock()
	if calls != 1 {
		t.Errorf("twin reported %d times, want once", calls)
	}
	mu.Unlock()
	// The twin removed: the VM is served again.
	f.backends["vc3"].Hang(false)
	f.backends["vc3"].SetReachability(backends.ConnUp, nil)
	f.backends["vc3"].Remove("vm-twin")
	eventually(t, "the VM to be served once its twin is gone", func() bool {
		res, err := d.Locate(ctx, byUUID(orig.UUID))
		return err == nil && res != nil && res.VCenter == "vc1"
	})
}

// A vCenter still connecting for the first time (a black hole from the
// CCM's start) holds a lookup that found nothing elsewhere for at most
// ConnectWait, not its whole request deadline: the lookup is an error,
// never absence, and the Node is retried.
func TestConnectingVCenterIsWaitedForAtMostConnectWait(t *testing.T) {
	const timeout, connectWait = 2 * time.Second, 100 * time.Millisecond
	f := newFleet()
	d := discovery.New(nil, discovery.Options{ConnectWait: connectWait})
	scanEvery(t, d, time.Second)
	var vcs []discovery.Target
	for _, n := range f.names {
		vcs = append(vcs, discovery.Target{Name: n, Server: n + ":443", Backend: f.backends[n], RequestTimeout: timeout, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
	}
	d.SetVCenters(vcs)
	t.Cleanup(d.Close)
	f.backends["vc3"].Hang(true)
	f.backends["vc3"].SetReachability(backends.ConnUnknown, nil)
	start := time.Now()
	res, err := d.Locate(t.Context(), byUUID(f.vms["vc3"][0].UUID))
	took := time.Since(start)
	if res != nil || !errors.Is(err, discovery.ErrVCenterConnecting) || !strings.Contains(err.Error(), "vcenter vc3") {
		t.Fatalf("vc3 connecting: Locate = %v, %v; want ErrVCenterConnecting naming vc3", res, err)
	}
	if took >= timeout/2 {
		t.Fatalf("the lookup took %v: it waited on vc3's request deadline (%v), not ConnectWait (%v)", took, timeout, connectWait)
	}
}

// Once a vCenter has been connecting for longer than ConnectWait, later
// lookups do not wait for it at all: a black hole from the start costs a
// worker ConnectWait once, not at every Node until its first connect
// times out.
func TestLongConnectingVCenterIsNotWaitedForAgain(t *testing.T) {
	const connectWait = 100 * time.Millisecond
	f := newFleet()
	d := discovery.New(nil, discovery.Options{ConnectWait: connectWait})
	scanEvery(t, d, time.Second)
	var vcs []discovery.Target
	for _, n := range f.names {
		vcs = append(vcs, discovery.Target{Name: n, Server: n + ":443", Backend: f.backends[n], RequestTimeout: 5 * time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
	}
	d.SetVCenters(vcs)
	t.Cleanup(d.Close)
	f.backends["vc3"].Hang(true)
	f.backends["vc3"].SetReachability(backends.ConnUnknown, nil)
	ctx := t.Context()
	if _, err := d.Locate(ctx, byUUID(f.vms["vc3"][0].UUID)); !errors.Is(err, discovery.ErrVCenterConnecting) {
		t.Fatalf("first lookup: err = %v, want ErrVCenterConnecting", err)
	}
	time.Sleep(connectWait) // connecting for longer than ConnectWait now
	start := time.Now()
	for _, vm := range f.vms["vc3"] {
		if _, err := d.Locate(ctx, byUUID(vm.UUID)); !errors.Is(err, discovery.ErrVCenterConnecting) {
			t.Fatalf("later lookup: err = %v, want ErrVCenterConnecting", err)
		}
	}
	if took := time.Since(start); took > connectWait {
		t.Fatalf("%d later lookups took %v: they waited on vc3 again (ConnectWait %v)", len(f.vms["vc3"]), took, connectWait)
	}
	// Connected: lookups reach it again.
	f.backends["vc3"].Hang(false)
	f.backends["vc3"].SetReachability(backends.ConnUp, nil)
	if res, err := d.Locate(ctx, byUUID(f.vms["vc3"][0].UUID)); err != nil || res == nil {
		t.Fatalf("vc3 up: %v, %v", res, err)
	}
}
