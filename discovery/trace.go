package discovery

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery/vcenter"
)

// Trace records each vCenter's answer to the lookups made under a context
// that carries it (WithTrace): what `diagnose` shows. Lookups without one
// record nothing and behave exactly the same; a Trace never changes an
// answer. It is safe for concurrent use.
type Trace struct {
	mu      sync.Mutex
	answers []TraceAnswer
}

// Pass names how a vCenter was asked.
const (
	// PassInventory: the backend could answer from its watch-fed inventory
	// (it was in service when asked).
	PassInventory = "inventory"
	// PassDirect: vCenter itself was asked.
	PassDirect = "direct"
	// PassRemembered: the VM's remembered location was re-read.
	PassRemembered = "remembered location"
	// PassNotAsked: nothing was sent; the vCenter is known down, its
	// breaker is open, or it was not waited for.
	PassNotAsked = "not asked"
)

// TraceAnswer is one vCenter's answer to one search.
type TraceAnswer struct {
	Lookup  string // e.g. `uuid "…"`
	VCenter string
	Pass    string // PassInventory, PassDirect or PassRemembered
	// Found are the VMs it returned (every datacenter, also those the
	// config leaves out); empty with a nil Err: it answered "none".
	Found []Result
	// Err is why it did not answer (never backends.ErrNotFound, which is
	// an answer).
	Err     error
	Latency time.Duration
	// Breaker is its breaker's state after the call: closed, half-open or
	// open.
	Breaker string
	// Reachability is its backend's connection state after the call.
	Reachability string
}

type traceKey struct{}

// WithTrace returns ctx carrying t: lookups under it record their answers
// there.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

func traceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// Answers returns what was recorded, in order.
func (t *Trace) Answers() []TraceAnswer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]TraceAnswer(nil), t.answers...)
}

// record appends v's answer when ctx carries a trace.
func record(ctx context.Context, what, pass string, v *vcenter.Member, vms []backends.VM, err error, latency time.Duration) {
	t := traceFrom(ctx)
	if t == nil {
		return
	}
	a := TraceAnswer{
		Lookup: what, VCenter: v.Name, Pass: pass, Latency: latency,
	}
	st := v.Status()
	a.Breaker, a.Reachability = st.Breaker.String(), st.Reachability.State.String()
	if err != nil && !errors.Is(err, backends.ErrNotFound) {
		a.Err = err
		if errors.Is(err, ErrVCenterDown) || errors.Is(err, ErrBreakerOpen) || errors.Is(err, ErrVCenterConnecting) || errors.Is(err, errNotWaited) {
			a.Pass = PassNotAsked
		}
	}
	for _, vm := range vms {
		a.Found = append(a.Found, Result{VCenter: v.Name, VM: vm})
	}
	t.mu.Lock()
	t.answers = append(t.answers, a)
	t.mu.Unlock()
}

// Connect settles every vCenter's connection once: each backend is
// probed (a login when it has none) under its request deadline, in
// parallel, and Connect returns when all have answered. A short-lived
// caller (diagnose) uses it so that its one lookup meets vCenters known up
// or down, as the running CCM's do, not "still connecting". It never
// writes anything to vCenter.
func (d *Discoverer) Connect(ctx context.Context) {
	var wg sync.WaitGroup
	for _, v := range *d.vcenters.Load() {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, v.RequestTimeout)
			defer cancel()
			_ = v.Backend.Probe(pctx) // its outcome is the backend's Reachability
		})
	}
	wg.Wait()
}

// breakerName names a gobreaker state as the trace and health show it.
func breakerName(s gobreaker.State) string { return s.String() }
