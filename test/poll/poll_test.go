package poll

import (
	"testing"
	"time"
)

func TestHolds(t *testing.T) {
	s := Schedule{Every: time.Millisecond, Within: time.Second}
	calls := 0
	if !s.Holds(func() bool { calls++; return calls == 3 }) || calls != 3 {
		t.Fatalf("a condition true at the third check: %d checks", calls)
	}
	calls = 0
	if !s.Holds(func() bool { calls++; return true }) || calls != 1 {
		t.Fatalf("a condition true at once: %d checks, want 1", calls)
	}
	start := time.Now()
	if (Schedule{Every: 5 * time.Millisecond, Within: 50 * time.Millisecond}).Holds(func() bool { return false }) {
		t.Fatal("a condition never true held")
	}
	if took := time.Since(start); took < 50*time.Millisecond || took > 5*time.Second {
		t.Fatalf("gave up after %v, want 50ms", took)
	}
}
