package vsphere

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// budget is a vCenter's request budget: the calls sent to it directly
// (those the inventory does not answer; never the inventory's watch, whose
// long poll is one request, nor logins and keep-alives) take tokens from a
// bucket refilled at requestsPerSecond and holding requestBurst. A call
// waits for its tokens under its own deadline, at most half the time left
// to it (the rest is the request's: a call that waited until its deadline
// would then time out, and a breaker count that as vCenter's failure);
// one whose turn comes later is refused at once with backends.ErrBudget,
// before anything is sent.
// So a status pass or a burst of lookups while the inventory is out of
// service reaches vCenter at the configured pace, not all at once.
type budget struct {
	name string // the vCenter's, for errors
	lim  *rate.Limiter
	// waits and rejections count the calls that waited and those refused.
	waits, rejections atomic.Uint64
}

func newBudget(name string, perSecond float64, burst int) *budget {
	return &budget{name: name, lim: rate.NewLimiter(rate.Limit(perSecond), max(burst, 1))}
}

// take waits for n tokens under ctx: at once when the bucket holds them,
// after the refill otherwise; when that would take more than half the
// time left to ctx's deadline, it fails at once with ErrBudget (the
// caller sends nothing). A ctx ended while waiting is ctx's error.
func (b *budget) take(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n = min(max(n, 1), b.lim.Burst())
	now := time.Now()
	r := b.lim.ReserveN(now, n)
	if !r.OK() { // the burst shrank since it was read: no wait can serve n
		b.rejections.Add(1)
		return b.refused(0)
	}
	delay := r.DelayFrom(now)
	if delay == 0 {
		return nil
	}
	if deadline, ok := ctx.Deadline(); ok && delay > deadline.Sub(now)/2 {
		r.CancelAt(now) // the tokens go back to the calls that can wait
		b.rejections.Add(1)
		return b.refused(delay)
	}
	b.waits.Add(1)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.Cancel()
		return fmt.Errorf("waiting for the request budget: %w", ctx.Err())
	}
}

// refused is ErrBudget naming the keys that set it (and so the vCenter); it
// wraps no context error (it is not a deadline reached, nor vCenter's).
func (b *budget) refused(wait time.Duration) error {
	return fmt.Errorf("%w: the call would wait %s for its turn, more than half the time to its deadline (vcenter.%s.requestsPerSecond %g, requestBurst %d)",
		backends.ErrBudget, wait.Round(time.Millisecond), b.name, float64(b.lim.Limit()), b.lim.Burst())
}

func (b *budget) status() backends.BudgetStatus {
	return backends.BudgetStatus{RequestsPerSecond: float64(b.lim.Limit()), RequestBurst: b.lim.Burst(), Waits: b.waits.Load(), Rejections: b.rejections.Load()}
}

// SetBudget implements backends.Backend.
func (b *Backend) SetBudget(perSecond float64, burst int) {
	now := time.Now()
	b.budget.lim.SetLimitAt(now, rate.Limit(perSecond))
	b.budget.lim.SetBurstAt(now, max(burst, 1))
}

// searches is how many requests a search for q sends: one SearchIndex
// call per value, a container view's creation and read for a name.
func searches(q backends.Query) int {
	if q.By == backends.ByName {
		return 2 * len(q.Values)
	}
	return len(q.Values)
}
