package vcsim

// Fault helpers on a simulated vCenter for the e2e fault matrix and the
// chaos soak: simulator-side fault injection (SOAP faults such as
// NotAuthenticated), session accounting, undoing MakeInaccessible and
// SetUUID, and a user lacking privileges.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// faultRules are the fault rules of one simulator, matched by its
// Registry.Handler (vcsim.go) on every call. Not the simulator's own
// FaultInjector: v0.56.0 matches its rules under a read lock and counts
// their injections unsynchronised, a data race between two requests
// answered at once (an inventory's snapshots of two datacenters).
type faultRules struct {
	mu    sync.Mutex
	rules []*faultRule
}

type faultRule struct {
	method      string // SOAP method name; "*" for all
	probability float64
	ft          simulator.FaultType
	injected    int64
}

// match returns the fault for a call of method on this, or nil. Only a
// call with a session is faulted, as the simulator's injector faults only
// calls it would answer: one without a session stays NotAuthenticated.
func (r *faultRules) match(ctx *simulator.Context, method *simulator.Method) types.BaseMethodFault {
	if ctx.Session == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rule := range r.rules {
		if rule.method != "*" && rule.method != method.Name {
			continue
		}
		if rule.probability < 1 && rand.Float64() >= rule.probability {
			continue
		}
		rule.injected++
		return rule.fault(method)
	}
	return nil
}

// fault is the fault rule injects, as the simulator's injector makes it
// for the types these tests use; any other type is a SystemError.
func (rule *faultRule) fault(method *simulator.Method) types.BaseMethodFault {
	switch rule.ft {
	case simulator.FaultTypeNotAuthenticated:
		return &types.NotAuthenticated{NoPermission: types.NoPermission{Object: &method.This, PrivilegeId: "System.View"}}
	case simulator.FaultTypeNoPermission:
		return &types.NoPermission{Object: &method.This, PrivilegeId: "System.Modify"}
	}
	return &types.SystemErrorFault{Reason: "injected by test/vcsim"}
}

// FaultRules is a set of injection rules added to one simulator.
type FaultRules struct {
	vc    *VCenter
	rules []*faultRule
}

// InjectFault makes the simulator answer each of methods (SOAP method
// names such as "RetrieveProperties"; "*" for all) on any object with a
// fault of type ft, with the given probability (0 to 1), to calls made in
// a session. The session stays valid: the fault is only the answer.
// Remove undoes it.
func (vc *VCenter) InjectFault(ft simulator.FaultType, probability float64, methods ...string) *FaultRules {
	vc.faults.mu.Lock()
	defer vc.faults.mu.Unlock()
	fr := &FaultRules{vc: vc}
	for _, m := range methods {
		rule := &faultRule{method: m, probability: probability, ft: ft}
		vc.faults.rules = append(vc.faults.rules, rule)
		fr.rules = append(fr.rules, rule)
	}
	return fr
}

// Injected is how many faults each of the rules has injected so far, by
// SOAP method name; nothing once removed.
func (fr *FaultRules) Injected() map[string]int64 {
	fr.vc.faults.mu.Lock()
	defer fr.vc.faults.mu.Unlock()
	out := map[string]int64{}
	for _, r := range fr.rules {
		out[r.method] += r.injected
	}
	return out
}

// Remove takes the rules out of the simulator; safe to call more than once.
func (fr *FaultRules) Remove() {
	fr.vc.faults.mu.Lock()
	defer fr.vc.faults.mu.Unlock()
	fr.vc.faults.rules = slices.DeleteFunc(fr.vc.faults.rules, func(r *faultRule) bool { return slices.Contains(fr.rules, r) })
	fr.rules = nil
}

// Sessions lists the sessions open on the simulator other than the one
// this call logs in with (which it logs out again).
func (vc *VCenter) Sessions(ctx context.Context) ([]types.UserSession, error) {
	c, err := vc.Client(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Logout(context.WithoutCancel(ctx)) }()
	var sm mo.SessionManager
	if err := c.RetrieveOne(ctx, *c.ServiceContent.SessionManager, []string{"sessionList", "currentSession"}, &sm); err != nil {
		return nil, err
	}
	var out []types.UserSession
	for _, s := range sm.SessionList {
		if sm.CurrentSession == nil || s.Key != sm.CurrentSession.Key {
			out = append(out, s)
		}
	}
	return out, nil
}

// TerminateOtherSessions ends every client session, as TerminateSessions
// does, and returns how many it ended.
func (vc *VCenter) TerminateOtherSessions(ctx context.Context) (int, error) {
	c, err := vc.Client(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.Logout(context.WithoutCancel(ctx)) }()
	var sm mo.SessionManager
	if err := c.RetrieveOne(ctx, *c.ServiceContent.SessionManager, []string{"sessionList", "currentSession"}, &sm); err != nil {
		return 0, err
	}
	var ids []string
	for _, s := range sm.SessionList {
		if sm.CurrentSession == nil || s.Key != sm.CurrentSession.Key {
			ids = append(ids, s.Key)
		}
	}
	// One at a time: a session that logs out meanwhile (another fixture
	// client) is not an error, and does not spare the others.
	n := 0
	for _, id := range ids {
		err := session.NewManager(c.Client).TerminateSession(ctx, []string{id})
		switch {
		case err == nil:
			n++
		case fault.Is(err, &types.NotFound{}):
		default:
			return n, fmt.Errorf("terminating session %d of %d: %w", n+1, len(ids), err)
		}
	}
	return n, nil
}

// MakeAccessible undoes MakeInaccessible (and SetUUID): the VM is
// connected again with its own BIOS UUID.
func (vc *VCenter) MakeAccessible(vm *VM) {
	vc.update(vm,
		types.PropertyChange{Name: "runtime.connectionState", Val: types.VirtualMachineConnectionStateConnected},
		types.PropertyChange{Name: "config.uuid", Val: vm.UUID},
		types.PropertyChange{Name: "summary.config.uuid", Val: vm.UUID})
}

// AcceptedPassword is the password the vCenter accepts now (see SetPassword).
func (vc *VCenter) AcceptedPassword() string { return vc.currentPassword() }

// Exists reports whether the VM is still in the simulator's inventory (not
// destroyed).
func (vc *VCenter) Exists(vm *VM) bool {
	return vc.Model.Map().Get(types.ManagedObjectReference{Type: "VirtualMachine", Value: vm.Ref}) != nil
}

// LimitPrivileges makes FetchUserPrivilegeOnEntities answer that every
// user holds only privileges, on every entity; nil grants the simulator's
// Admin role again. The simulator grants that role to every user, so a
// user lacking a privilege is modelled by replacing its answer.
func (vc *VCenter) LimitPrivileges(privileges []string) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	reg := vc.Model.Map()
	ref := *vc.Model.ServiceContent.AuthorizationManager
	am, ok := reg.Get(ref).(*limitedAuthorization)
	if !ok {
		am = &limitedAuthorization{AuthorizationManager: reg.Get(ref).(*simulator.AuthorizationManager)}
		reg.Put(am)
	}
	if privileges == nil {
		am.limit.Store(nil)
		return
	}
	am.limit.Store(&privileges)
}

// limitedAuthorization is the simulator's AuthorizationManager with
// FetchUserPrivilegeOnEntities answering limit when set.
type limitedAuthorization struct {
	*simulator.AuthorizationManager
	limit atomic.Pointer[[]string]
}

func (m *limitedAuthorization) FetchUserPrivilegeOnEntities(req *types.FetchUserPrivilegeOnEntities) soap.HasFault {
	limit := m.limit.Load()
	if limit == nil {
		return m.AuthorizationManager.FetchUserPrivilegeOnEntities(req)
	}
	var res []types.UserPrivilegeResult
	for _, e := range req.Entities {
		res = append(res, types.UserPrivilegeResult{Entity: e, Privileges: slices.Clone(*limit)})
	}
	return &methods.FetchUserPrivilegeOnEntitiesBody{Res: &types.FetchUserPrivilegeOnEntitiesResponse{Returnval: res}}
}
