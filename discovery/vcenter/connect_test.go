package vcenter

import (
	"testing"
	"time"
)

// A stalled connect's error says how far it got, or that it got nowhere.
func TestStalledConnectDescribesItsProgress(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	since := now.Add(-time.Second)
	far := now.Add(time.Hour)
	none := connectState{since: since, met: since, last: since, window: 250 * time.Millisecond, until: far}
	if got, want := none.describe(now), "for 1s without progress"; got != want {
		t.Errorf("no progress: describe = %q, want %q", got, want)
	}
	some := connectState{since: since, met: since, last: now.Add(-300 * time.Millisecond), phase: "tcp connected", window: 250 * time.Millisecond, until: far}
	if got, want := some.describe(now), "for 1s; its last progress (tcp connected) was 300ms ago, beyond its stall window 250ms"; got != want {
		t.Errorf("progress: describe = %q, want %q", got, want)
	}
}
