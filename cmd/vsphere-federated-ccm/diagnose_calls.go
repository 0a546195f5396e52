package main

import (
	"cmp"
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

// How a vCenter was asked (the report's FROM column).
const (
	passInventory  = "inventory" // its backend could answer from its inventory
	passDirect     = "direct"    // vCenter itself was asked
	passRemembered = "remembered location"
	// passNotAsked: nothing was sent; the vCenter is known down, its
	// breaker is open, or it was not waited for.
	passNotAsked = "not asked"
)

// callLog is each vCenter's answer to the searches made under a context
// carrying it: what diagnose shows, seen from outside the lookup (its
// backends log themselves: logCalls), which answers the same without it.
type callLog struct {
	mu      sync.Mutex
	answers []vcenterAnswer
}

type callLogKey struct{}

// logCalls makes opts build each backend so that it logs the searches it
// answers under a context carrying a callLog.
func logCalls(opts *cloud.Options) {
	build := opts.NewBackend
	opts.NewBackend = func(vc config.VCenter, creds credentials.Source) backends.Backend {
		return loggedBackend{Backend: build(vc, creds), vcenter: vc.Name}
	}
}

type loggedBackend struct {
	backends.Backend
	vcenter string
}

func (b loggedBackend) Find(ctx context.Context, q backends.Query) ([]backends.VM, error) {
	pass := passDirect
	if q.AllowCached && b.State().Inventoried {
		pass = passInventory
	}
	start := time.Now()
	vms, err := b.Backend.Find(ctx, q)
	b.log(ctx, vcenterAnswer{Lookup: discovery.SearchName(q), Pass: pass}, vms, err, start)
	return vms, err
}

func (b loggedBackend) Get(ctx context.Context, ref backends.VMRef) (*backends.VM, error) {
	start := time.Now()
	vm, err := b.Backend.Get(ctx, ref)
	var vms []backends.VM
	if vm != nil {
		vms = []backends.VM{*vm}
	}
	b.log(ctx, vcenterAnswer{Lookup: "vm " + ref.ID, Pass: passRemembered}, vms, err, start)
	return vm, err
}

// log adds a, the answer vms, err of a call made at start, to the
// callLog ctx carries, if any.
func (b loggedBackend) log(ctx context.Context, a vcenterAnswer, vms []backends.VM, err error, start time.Time) {
	l, ok := ctx.Value(callLogKey{}).(*callLog)
	if !ok {
		return
	}
	a.VCenter, a.Answer, a.LatencyMS = b.vcenter, "absent", float64(time.Since(start))/float64(time.Millisecond)
	switch {
	case err != nil && !errors.Is(err, backends.ErrNotFound):
		a.Answer, a.Error = "error", (&discovery.VCenterError{VCenter: b.vcenter, Err: err}).Error()
	case len(vms) > 0:
		a.Answer = "found"
		for _, vm := range vms {
			a.Found = append(a.Found, (&discovery.Result{VCenter: b.vcenter, VM: vm}).String())
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers = append(l.answers, a)
}

// report is the log of one lookup as the report shows it, in the
// config's order, with a "not asked" answer of each vCenter that no
// search reached. The lookup's error names a vCenter's failure better
// than its call's own error (it adds its request timeout, or why it was
// not asked).
func (l *callLog) report(lookupErr error, statuses []cloud.VCenterStatus) []vcenterAnswer {
	search, failed := "", map[string]string{}
	if le, ok := errors.AsType[*discovery.LookupError](lookupErr); ok {
		search = le.What
		for _, err := range le.Failed.Errors {
			if ve, ok := errors.AsType[*discovery.VCenterError](err); ok {
				failed[ve.VCenter] = ve.Error()
			}
		}
	}
	// A lookup answered from its remembered location (its re-read alone
	// logged) asked no other vCenter.
	switch i := slices.IndexFunc(l.answers, func(a vcenterAnswer) bool { return a.Pass != passRemembered }); {
	case i >= 0 && search == "":
		search = l.answers[i].Lookup
	case i < 0 && len(l.answers) > 0:
		search = ""
	}
	out := []vcenterAnswer{}
	for _, st := range statuses {
		n := len(out)
		for _, a := range l.answers {
			if a.VCenter != st.Name {
				continue
			}
			if a.Answer == "error" && failed[st.Name] != "" {
				a.Error = failed[st.Name]
			}
			a.Breaker, a.Reachability = st.Breaker, st.Reachability
			out = append(out, a)
		}
		if len(out) == n && search != "" { // not asked
			why := cmp.Or(failed[st.Name], (&discovery.VCenterError{VCenter: st.Name, Err: errors.New(notAskedWhy(st))}).Error())
			out = append(out, vcenterAnswer{Lookup: search, VCenter: st.Name, Pass: passNotAsked, Answer: "error", Error: why,
				Breaker: st.Breaker, Reachability: st.Reachability})
		}
	}
	return out
}

// notAskedWhy is why a vCenter that the lookup's error does not name was
// not asked: the VM was found elsewhere while it was known down, behind
// its open breaker, or not known up (so not waited for).
func notAskedWhy(st cloud.VCenterStatus) string {
	switch {
	case st.Reachability == backends.ConnDown.String():
		return "not asked: vCenter down: " + st.LastError
	case st.Breaker != "closed":
		return "not asked: its breaker is " + st.Breaker
	}
	return "not waited for: the VM was found elsewhere, and this vCenter is not known up"
}
