package vcsim

// Fault helpers on a simulated vCenter for the e2e fault matrix and the
// chaos soak: simulator-side fault injection (SOAP faults such as
// NotAuthenticated), session accounting, and undoing MakeInaccessible and
// SetUUID.

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// faultRulesMu serialises the management of fault rules (the injector's
// rules are addressed by index).
var faultRulesMu sync.Mutex

// lockedSource is a rand.Source safe for concurrent use.
type lockedSource struct {
	mu  sync.Mutex
	src rand.Source64
}

func (s *lockedSource) Int63() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.src.Int63()
}

func (s *lockedSource) Uint64() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.src.Uint64()
}

func (s *lockedSource) Seed(seed int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.src.Seed(seed)
}

// withLockedRNG gives rule a random number generator that is safe for
// concurrent use. The simulator (v0.56.0) draws each rule's probability
// from an unexported *rand.Rand while holding only a read lock, so two
// requests answered at once use a math/rand source concurrently, which can
// corrupt its state and panic (index out of range) inside the test process.
// AddRule keeps an rng already set, so setting it first is enough.
func withLockedRNG(rule *simulator.FaultInjectionRule) {
	f := reflect.ValueOf(rule).Elem().FieldByName("rng")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*rand.Rand]() {
		return // another simulator version: keep its own
	}
	src := rand.NewSource(time.Now().UnixNano()).(rand.Source64)
	rng := rand.New(&lockedSource{src: src})
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(rng))
}

// FaultRules is a set of injection rules added to one simulator.
type FaultRules struct {
	vc    *VCenter
	rules []*simulator.FaultInjectionRule
}

// InjectFault makes the simulator answer each of methods (SOAP method
// names such as "RetrieveProperties"; "*" for all) on any object with a
// fault of type ft, with the given probability (0 to 1). The session stays
// valid: the fault is only the answer. Remove undoes it.
func (vc *VCenter) InjectFault(ft simulator.FaultType, probability float64, methods ...string) *FaultRules {
	faultRulesMu.Lock()
	defer faultRulesMu.Unlock()
	fr := &FaultRules{vc: vc}
	for _, m := range methods {
		rule := &simulator.FaultInjectionRule{
			MethodName:  m,
			ObjectType:  "*",
			ObjectName:  "*",
			Probability: probability,
			FaultType:   ft,
			Message:     "injected by test/vcsim",
			Enabled:     true,
		}
		withLockedRNG(rule)
		vc.Model.Service.AddFaultRule(rule)
		fr.rules = append(fr.rules, rule)
	}
	return fr
}

// Injected is how many faults each of the rules has injected so far, by
// SOAP method name (read from the simulator's statistics, which number the
// rules by position).
func (fr *FaultRules) Injected() map[string]int64 {
	faultRulesMu.Lock()
	defer faultRulesMu.Unlock()
	stats := fr.vc.Model.Service.GetFaultStats()
	out := map[string]int64{}
	for _, r := range fr.rules {
		if i := slices.Index(fr.vc.Model.Service.GetFaultRules(), r); i >= 0 {
			n, _ := stats[fmt.Sprintf("rule_%d_count", i)].(int64)
			out[r.MethodName] += n
		}
	}
	return out
}

// Remove takes the rules out of the simulator; safe to call more than once.
func (fr *FaultRules) Remove() {
	faultRulesMu.Lock()
	defer faultRulesMu.Unlock()
	for _, r := range fr.rules {
		if i := slices.Index(fr.vc.Model.Service.GetFaultRules(), r); i >= 0 {
			fr.vc.Model.Service.RemoveFaultRule(i)
		}
	}
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
