// Package poll is the tests' one wait for a condition: checked at once,
// then at each interval, until it holds or the time is up
// (k8s.io/apimachinery's wait.PollUntilContextTimeout underneath).
package poll

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Schedule is how long and how often a test polls: every Every, for up
// to Within. A package whose tests share one binds its Until once:
//
//	var eventually = poll.Schedule{Every: 50 * time.Millisecond, Within: 10 * time.Second}.Until
type Schedule struct {
	Every, Within time.Duration
}

// Holds reports whether cond held within s.Within: it is checked at once,
// then every s.Every. For a test that says itself what it found when it
// did not (Until says only what it waited for).
func (s Schedule) Holds(cond func() bool) bool {
	err := wait.PollUntilContextTimeout(context.Background(), s.Every, s.Within, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	return err == nil
}

// Until waits as Holds does, and fails t, naming what it waited for,
// when cond did not hold within s.Within.
func (s Schedule) Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !s.Holds(cond) {
		t.Fatalf("timed out after %v waiting for %s", s.Within, what)
	}
}
