// Package vcenter is one configured vCenter entry as discovery asks it: a
// Member owns the entry's Target, its backend, its circuit breaker, the
// deadline of each call, what is known of its reachability and first
// connect, and the background probe of it while it is known down. It
// decides nothing about VMs: discovery, above it, is the policy (which
// vCenters to ask, and what their answers mean) and starts no goroutine
// of its own for a vCenter's health.
package vcenter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Target is one vCenter entry to search; several may be entries of one
// vCenter (CPI's tenants).
type Target struct {
	// Name is the config's name for it, used in messages and metrics;
	// what it is, is Server and its instance UUID.
	Name string
	// Server is the ServerKey of its configured server and port; required.
	// Host is that server as configured, as people read it.
	Server, Host string
	Backend      backends.Backend
	// Datacenters to search, each a name, a managed object ID or an
	// inventory path (config.DatacenterSpec); empty means all.
	Datacenters []config.DatacenterSpec
	// RequestTimeout is the deadline of each call; required.
	RequestTimeout time.Duration
	// ConsecutiveFailures open the breaker; it probes again after
	// OpenTimeout. Both required: the config resolves their defaults.
	ConsecutiveFailures uint32
	OpenTimeout         time.Duration
	// NodeDeletion is its deletion policy (discovery's deletion.go);
	// zero: none. A change keeps the breaker, the backend and what is
	// held.
	NodeDeletion config.NodeDeletion
}

// Serves reports whether t's configured datacenters include dc, by
// whichever of its name, ID or path each names it.
func (t *Target) Serves(dc config.Datacenter) bool {
	return len(t.Datacenters) == 0 ||
		slices.ContainsFunc(t.Datacenters, func(s config.DatacenterSpec) bool { return s.Matches(dc) })
}

// ErrBreakerOpen is returned, without a network call, for a vCenter whose
// breaker is open.
var ErrBreakerOpen = errors.New("circuit breaker open after consecutive failures")

// ErrVCenterDown is returned, without a network call, for a vCenter whose
// backend's last connection-level event failed; a background probe tells
// when it is back.
var ErrVCenterDown = errors.New("vCenter known down")

// ErrVCenterConnecting is a vCenter not waited for: its first connection
// attempt had not ended, and had made no progress within ConnectWait (or
// its stall window), or had taken half the lookup's deadline.
var ErrVCenterConnecting = errors.New("vCenter still connecting")

// Observer is told about each vCenter call and breaker change, for
// metrics.
type Observer interface {
	Call(vcenter, operation string, d time.Duration, err error)
	BreakerState(vcenter string, state gobreaker.State)
}

// Options tune every Member alike.
type Options struct {
	// Observer is required.
	Observer Observer
	// ProbeInterval spaces the probes of a vCenter known down; required.
	ProbeInterval time.Duration
	// ConnectWait is how long a first connect may make no progress
	// before it counts as stalled; required.
	ConnectWait time.Duration
}

// Member is one configured vCenter entry: its Target and what is known
// of it. It is safe for concurrent use; Close stops its probe.
type Member struct {
	Target
	opts    Options
	breaker *gobreaker.CircuitBreaker[any]

	// probe is of its backend: a successor goes on with it.
	probe *probe

	// connectingSince is when a lookup first found it not yet connected
	// (unix nanoseconds; 0 once it is up or down).
	connectingSince atomic.Int64
	// stalled is the progress its connect had made when a lookup judged
	// it stalled; nil when none did, or once it is up or down. Until it
	// progresses beyond that, no lookup waits for it.
	stalled atomic.Pointer[stallMark]
	// refusedConnecting is set when a call got ErrVCenterConnecting from
	// it, until UpAfterRefusing reports it up.
	refusedConnecting atomic.Bool
	// noted is the instance UUID last returned by NewInstance.
	noted atomic.Pointer[string]
}

// New returns the Member of t with a new breaker; it starts nothing.
func New(t Target, opts Options) *Member {
	p := &probe{}
	p.ctx, p.stop = context.WithCancel(context.Background())
	return &Member{Target: t, opts: opts, breaker: newBreaker(t, opts.Observer), probe: p}
}

// Successor is m's entry with the settings t, of the same backend: its
// breaker is kept while its settings are, its probe goes on, and its
// first connect is judged by what it has shown so far; the lookups it
// refused stay owed (UpAfterRefusing). m is then not to be closed: its
// probe is the successor's.
func (m *Member) Successor(t Target) *Member {
	breaker := m.breaker
	if t.ConsecutiveFailures != m.ConsecutiveFailures || t.OpenTimeout != m.OpenTimeout {
		breaker = newBreaker(t, m.opts.Observer)
	}
	n := &Member{Target: t, opts: m.opts, breaker: breaker, probe: m.probe}
	n.refusedConnecting.Store(m.refusedConnecting.Load())
	n.connectingSince.Store(m.connectingSince.Load())
	n.stalled.Store(m.stalled.Load())
	return n
}

// Close stops its probe and waits for it; none is started after.
func (m *Member) Close() { m.probe.close() }

func newBreaker(t Target, o Observer) *gobreaker.CircuitBreaker[any] {
	failures := t.ConsecutiveFailures
	cb := gobreaker.NewCircuitBreaker[any](gobreaker.Settings{
		Name:        t.Name,
		MaxRequests: 1,
		Timeout:     t.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		// An answer about the VM is a healthy vCenter.
		IsSuccessful: func(err error) bool { return err == nil || errors.Is(err, backends.ErrNotFound) },
		// The caller giving up says nothing about the vCenter, nor does a
		// call its request budget refused before sending it.
		IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) || errors.Is(err, backends.ErrBudget) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			klog.Background().Info("vCenter circuit breaker changed state", "vcenter", name, "from", from.String(), "to", to.String())
			o.BreakerState(name, to)
		},
	})
	o.BreakerState(t.Name, gobreaker.StateClosed)
	return cb
}

// Breaker is its breaker's state now.
func (m *Member) Breaker() gobreaker.State { return m.breaker.State() }

// Status is what a Member shows of itself: what it is configured as, and
// what is known of it now.
type Status struct {
	Name, Host, Server string // Target's
	// Reachability is its backend's (Backend.State's).
	Reachability backends.Reachability
	BreakerOpen  bool   // open or half-open: calls fail fast or probe
	Breaker      string // its state: closed, half-open or open
	// Backend is what its backend shows of itself: its identity
	// (State.InstanceUUID), session, inventory, request budget.
	Backend      backends.Status
	NodeDeletion config.NodeDeletion
}

// Status reads m's status from memory: never a call to vCenter.
func (m *Member) Status() Status {
	b, breaker := m.Backend.Status(), m.Breaker()
	return Status{Name: m.Name, Host: m.Host, Server: m.Server, Reachability: b.Reachability, Backend: b,
		BreakerOpen: breaker != gobreaker.StateClosed, Breaker: breaker.String(), NodeDeletion: m.NodeDeletion}
}

// Healthy reports whether calls reach the vCenter normally.
func (s Status) Healthy() bool {
	return s.Reachability.State != backends.ConnDown && !s.BreakerOpen
}

// Call runs fn against m's backend under its breaker and its request
// deadline. A vCenter known down, or whose first connect stalled, answers
// at once (unready); a call cut short by ctx's cancellation says nothing
// about the vCenter and is not observed.
func Call[T any](ctx context.Context, m *Member, op string, fn func(context.Context, backends.Backend) (T, error)) (T, error) {
	var zero T
	start := time.Now()
	if err := m.unready(start); err != nil { //nolint:contextcheck // the probe outlives the call that found the vCenter down: m.probe owns it
		m.opts.Observer.Call(m.Name, op, time.Since(start), err)
		return zero, err
	}
	out, err := m.breaker.Execute(func() (any, error) {
		cctx, cancel := context.WithTimeout(ctx, m.RequestTimeout)
		defer cancel()
		r, err := fn(cctx, m.Backend)
		if err != nil && cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			err = fmt.Errorf("no answer within requestTimeout %s: %w", m.RequestTimeout, err)
		}
		return r, err
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		err = ErrBreakerOpen
	}
	if !errors.Is(err, context.Canceled) {
		m.opts.Observer.Call(m.Name, op, time.Since(start), err)
	}
	if err != nil {
		return zero, err
	}
	return out.(T), nil
}

// NewInstance returns m's instance UUID when it is known and another than
// the one it last returned: each value once.
func (m *Member) NewInstance() (string, bool) {
	id := m.Backend.State().InstanceUUID
	if id == "" {
		return "", false
	}
	if p := m.noted.Load(); p != nil && *p == id {
		return "", false
	}
	m.noted.Store(&id)
	return id, true
}

// UpAfterRefusing reports, once each time, that m refused a call as still
// connecting (ErrVCenterConnecting) and is up now: the calls it refused
// are worth making again at once, as after an outage.
func (m *Member) UpAfterRefusing() bool {
	return m.refusedConnecting.Load() && m.Backend.State().Reachability.State == backends.ConnUp && m.refusedConnecting.CompareAndSwap(true, false)
}

// probe is the background probe of a vCenter known down, one at a time:
// calls fail fast for it, so something else must notice when it is back.
type probe struct {
	// running is set while a probe runs; last is when the last one
	// started (unix nanoseconds).
	running atomic.Bool
	last    atomic.Int64
	// ctx ends a probe at close (stop); mu orders wg.Go after close's
	// Wait and guards closed.
	ctx    context.Context
	stop   context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (p *probe) close() {
	p.mu.Lock()
	p.closed = true
	p.stop()
	p.mu.Unlock()
	p.wg.Wait()
}

// probeLater starts a probe of m in the background unless one runs or
// ran within ProbeInterval. m's probe owns it: Close ends it and waits.
func (m *Member) probeLater() {
	p := m.probe
	now := time.Now().UnixNano()
	if now-p.last.Load() < int64(m.opts.ProbeInterval) || !p.running.CompareAndSwap(false, true) {
		return
	}
	p.last.Store(now)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.running.Store(false)
		return
	}
	p.wg.Go(func() {
		defer p.running.Store(false)
		ctx, cancel := context.WithTimeout(p.ctx, m.RequestTimeout)
		defer cancel()
		log := klog.FromContext(ctx).WithValues("vcenter", m.Name)
		if err := m.Backend.Probe(ctx); err != nil {
			log.V(2).Info("vCenter still down", "err", err)
			return
		}
		log.Info("vCenter is reachable again")
	})
}
