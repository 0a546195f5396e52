package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestFirstCleanPassSkipsPassesWithFailedLookups checks that a restart
// ends at the first pass over every Node in which no lookup failed, not at
// the first pass: one whose lookups failed served nothing.
func TestFirstCleanPassSkipsPassesWithFailedLookups(t *testing.T) {
	passes := make(chan pass, 4)
	passes <- pass{Nodes: 10, Took: time.Second, Failed: 10} // every lookup failed
	passes <- pass{Nodes: 9, Took: time.Second}              // before the Node list was complete
	passes <- pass{Nodes: 10, Took: time.Second, Failed: 1}
	passes <- pass{Nodes: 10, Took: 2 * time.Second}
	got, before, err := firstCleanPass(context.Background(), passes, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got.Took != 2*time.Second || got.Failed != 0 {
		t.Errorf("ended at %+v, want the pass of 2s without failures", got)
	}
	if want := (passesBefore{Partial: 1, Failing: 2, Failed: 11}); before != want {
		t.Errorf("passes before: %+v, want %+v", before, want)
	}
}

// TestFirstCleanPassTimesOut checks that failing passes only are an error
// that says so.
func TestFirstCleanPassTimesOut(t *testing.T) {
	passes := make(chan pass, 1)
	passes <- pass{Nodes: 10, Failed: 3}
	_, before, err := firstCleanPass(context.Background(), passes, 10, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "1 with 3 failed lookups") || before.Failing != 1 {
		t.Errorf("firstCleanPass = %+v, %v; want an error naming 1 pass with 3 failed lookups", before, err)
	}
}

// TestPassScannerCountsFailedLookups checks that each pass carries the
// cloud-node controller's failed lookups logged since the previous pass.
func TestPassScannerCountsFailedLookups(t *testing.T) {
	log := `I1124 14:15:16.000001   4242 node_controller.go:274] Update 3 nodes status took 1.5s.
E1124 14:15:46.000001   4242 node_controller.go:288] Error getting instance metadata for node addresses: vc1: context deadline exceeded
E1124 14:15:46.000002   4242 node_controller.go:288] Error getting instance metadata for node addresses: vc1: context deadline exceeded
I1124 14:15:46.100000   4242 node_controller.go:274] Update 3 nodes status took 250ms.
I1124 14:16:16.000001   4242 node_controller.go:274] Update 3 nodes status took 120.5ms.
`
	var s passScanner
	var got []pass
	for line := range strings.Lines(log) {
		if p, ok := s.line(strings.TrimSuffix(line, "\n"), time.Time{}); ok {
			got = append(got, p)
		}
	}
	want := []pass{
		{Nodes: 3, Took: 1500 * time.Millisecond},
		{Nodes: 3, Took: 250 * time.Millisecond, Failed: 2},
		{Nodes: 3, Took: 120500 * time.Microsecond},
	}
	if len(got) != len(want) {
		t.Fatalf("passes %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pass %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
