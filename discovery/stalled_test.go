package discovery_test

import (
	"errors"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// A vCenter judged stalled (TCP connected, then silence) is not waited
// for again when its connect only seems to move (issue 33): a retry
// dialing and connecting TCP once more, even reported as progress with
// the seconds since the last attempt as a round trip (what the vsphere
// backend reported before), costs the later lookups nothing. Real
// progress (a TLS handshake) makes it worth waiting for again.
func TestStalledVCenterRetryingIsNotWaitedForAgain(t *testing.T) {
	const connectWait, timeout = 100 * time.Millisecond, 4 * time.Second
	f, slow, d := slowFleet(t, connectWait, timeout)
	slow.step("tcp connected", time.Millisecond)
	if _, err := d.Locate(t.Context(), byUUID(f.vms["vc3"][0].UUID)); !errors.Is(err, discovery.ErrVCenterConnecting) {
		t.Fatalf("vc3 stalled: err = %v, want ErrVCenterConnecting", err)
	}
	// The retry, after its handshake timed out.
	slow.step("dialing", 0)
	slow.step("tcp connected", 2*time.Second)
	start := time.Now()
	for _, vm := range f.vms["vc3"] {
		if _, err := d.Locate(t.Context(), byUUID(vm.UUID)); !errors.Is(err, discovery.ErrVCenterConnecting) {
			t.Fatalf("lookup after the retry: err = %v, want ErrVCenterConnecting", err)
		}
	}
	if took := time.Since(start); took > connectWait {
		t.Fatalf("%d lookups after the retry took %v: they waited for vc3 again (its stall window %v)", len(f.vms["vc3"]), took, connectWait)
	}

	// A step further is progress: the next lookup waits, and is served
	// once vc3 is up.
	slow.step("tls done", 20*time.Millisecond)
	time.AfterFunc(connectWait/2, slow.connect)
	res, err := d.Locate(t.Context(), byUUID(f.vms["vc3"][1].UUID))
	if err != nil || res == nil || res.VCenter != "vc3" {
		t.Fatalf("vc3 progressing again, then up: Locate = %v, %v; want found in vc3", res, err)
	}
}

// The wait for a vCenter's first connect is shared (issue 33): lookups
// that begin while it is connecting wait until its connect counts as
// stalled — ConnectWait after its last progress — not each ConnectWait
// from its own start. A worker that looks up one Node after another
// pays ConnectWait once.
func TestConnectWaitIsSharedByTheLookups(t *testing.T) {
	const connectWait, timeout = 400 * time.Millisecond, 4 * time.Second
	f, slow, d := slowFleet(t, connectWait, timeout)
	slow.step("tcp connected", time.Millisecond)
	start := time.Now()
	time.Sleep(connectWait * 3 / 4)
	for _, vm := range f.vms["vc3"] {
		if _, err := d.Locate(t.Context(), byUUID(vm.UUID)); !errors.Is(err, discovery.ErrVCenterConnecting) {
			t.Fatalf("vc3 stalled: err = %v, want ErrVCenterConnecting", err)
		}
	}
	// Without the TCP connect's 3/4 ConnectWait before the first lookup:
	// it waited the rest of ConnectWait, the others nothing.
	if took := time.Since(start); took > connectWait*3/2 {
		t.Fatalf("%d lookups begun %v into the connect took until %v after it: each waited ConnectWait (%v) of its own",
			len(f.vms["vc3"]), connectWait*3/4, took, connectWait)
	}
}
