package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// How a vCenter was asked, as the report's FROM column names it.
const (
	// passInventory: the backend could answer from its watch-fed
	// inventory (it was in service when asked).
	passInventory = "inventory"
	// passDirect: vCenter itself was asked.
	passDirect = "direct"
	// passRemembered: the VM's remembered location was re-read.
	passRemembered = "remembered location"
	// passNotAsked: nothing was sent; the vCenter is known down, its
	// breaker is open, or it was not waited for.
	passNotAsked = "not asked"
)

// callLog keeps the searches each vCenter's backend answered under a
// context that carries it (withCallLog): diagnose's account of each
// vCenter's answer, taken from outside the lookup (recordCalls wraps the
// backends), which answers the same with or without one.
type callLog struct {
	mu    sync.Mutex
	calls []vcenterCall
}

// vcenterCall is one search a vCenter's backend answered.
type vcenterCall struct {
	lookup, vcenter, pass string
	vms                   []backends.VM
	err                   error // backends.ErrNotFound is an answer: none
	latency               time.Duration
}

type callLogKey struct{}

func withCallLog(ctx context.Context, l *callLog) context.Context {
	return context.WithValue(ctx, callLogKey{}, l)
}

func (l *callLog) list() []vcenterCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// addCall appends c to the log ctx carries, if any.
func addCall(ctx context.Context, c vcenterCall) {
	if l, ok := ctx.Value(callLogKey{}).(*callLog); ok {
		l.mu.Lock()
		l.calls = append(l.calls, c)
		l.mu.Unlock()
	}
}

// recordCalls makes opts build each backend so that it logs the searches
// it answers under a context with a callLog.
func recordCalls(opts *cloud.Options) {
	build := opts.NewBackend
	opts.NewBackend = func(vc config.VCenter, creds credentials.Source) backends.Backend {
		return &recordedBackend{Backend: build(vc, creds), vcenter: vc.Name}
	}
}

type recordedBackend struct {
	backends.Backend
	vcenter string
}

func (b *recordedBackend) Find(ctx context.Context, q backends.Query) ([]backends.VM, error) {
	pass := passDirect
	if q.AllowCached && b.State().Inventoried {
		pass = passInventory
	}
	start := time.Now()
	vms, err := b.Backend.Find(ctx, q)
	addCall(ctx, vcenterCall{lookup: discovery.SearchName(q), vcenter: b.vcenter, pass: pass, vms: vms, err: err, latency: time.Since(start)})
	return vms, err
}

func (b *recordedBackend) Get(ctx context.Context, ref backends.VMRef) (*backends.VM, error) {
	start := time.Now()
	vm, err := b.Backend.Get(ctx, ref)
	c := vcenterCall{lookup: "vm " + ref.ID, vcenter: b.vcenter, pass: passRemembered, err: err, latency: time.Since(start)}
	if vm != nil {
		c.vms = []backends.VM{*vm}
	}
	addCall(ctx, c)
	return vm, err
}

// answersOf is each vCenter's answer to the searches of one lookup, in
// the config's order: the calls made, and a "not asked" answer of each
// vCenter a search did not reach (known down, its breaker open, not
// waited for), with the error the lookup gave for it when it gave one.
func answersOf(calls []vcenterCall, lookupErr error, statuses []cloud.VCenterStatus) []vcenterAnswer {
	var searches []string
	for _, c := range calls {
		if c.pass != passRemembered && !slices.Contains(searches, c.lookup) {
			searches = append(searches, c.lookup)
		}
	}
	// The lookup's own error of each vCenter it could not ask, by search.
	failed := map[[2]string]error{}
	if le := (*discovery.LookupError)(nil); errors.As(lookupErr, &le) {
		if !slices.Contains(searches, le.What) {
			searches = append(searches, le.What)
		}
		for _, err := range le.Failed.Errors {
			if ve := (*discovery.VCenterError)(nil); errors.As(err, &ve) {
				failed[[2]string{le.What, ve.VCenter}] = ve
			}
		}
	}
	out := []vcenterAnswer{}
	for _, st := range statuses {
		for _, c := range calls {
			if c.vcenter == st.Name && c.pass == passRemembered {
				out = append(out, answerOf(c, st, nil))
			}
		}
	}
	for _, search := range searches {
		for _, st := range statuses {
			asked := false
			for _, c := range calls {
				if c.vcenter == st.Name && c.lookup == search && c.pass != passRemembered {
					asked = true
					out = append(out, answerOf(c, st, failed[[2]string{search, st.Name}]))
				}
			}
			if !asked {
				c := vcenterCall{lookup: search, vcenter: st.Name, pass: passNotAsked, err: errors.New(notAskedWhy(st))}
				out = append(out, answerOf(c, st, failed[[2]string{search, st.Name}]))
			}
		}
	}
	return out
}

// notAskedWhy is why a vCenter that no error names was not asked: the
// VM was found elsewhere while it was known down, its breaker open, or
// it was not known up and so not waited for.
func notAskedWhy(st cloud.VCenterStatus) string {
	switch {
	case st.Reachability == backends.ConnDown.String():
		return "not asked: vCenter down: " + st.LastError
	case st.Breaker != "closed":
		return "not asked: its breaker is " + st.Breaker
	}
	return "not waited for: the VM was found elsewhere, and this vCenter is not known up"
}

// answerOf is c of the vCenter st as the report shows it; named is the
// lookup's error for it, which names a failure better than c's own.
func answerOf(c vcenterCall, st cloud.VCenterStatus, named error) vcenterAnswer {
	a := vcenterAnswer{Lookup: c.lookup, VCenter: c.vcenter, Pass: c.pass, Breaker: st.Breaker, Reachability: st.Reachability,
		LatencyMS: float64(c.latency) / float64(time.Millisecond)}
	switch {
	case c.err != nil && !errors.Is(c.err, backends.ErrNotFound):
		err := named
		if err == nil {
			err = &discovery.VCenterError{VCenter: c.vcenter, Err: c.err}
		}
		a.Answer, a.Error = "error", err.Error()
	case len(c.vms) > 0:
		a.Answer = "found"
		for _, vm := range c.vms {
			a.Found = append(a.Found, (&discovery.Result{VCenter: c.vcenter, VM: vm}).String())
		}
	default:
		a.Answer = "absent"
	}
	return a
}
