// Package backendtest is an in-memory backends.Backend, a test double for
// controller logic. It answers from a map, counts calls and can be told to
// fail or to block until the caller's deadline.
package backendtest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

var _ backends.Backend = (*Backend)(nil)

// Inert implements the methods of backends.Backend that configure,
// refresh or start a backend, as a fake with nothing to configure,
// refresh or start does: nothing. A fake embeds it.
type Inert struct{}

// SetBudget implements backends.Backend: no budget.
func (Inert) SetBudget(float64, int) {}

// SetDatacenters implements backends.Backend: no inventory to scope.
func (Inert) SetDatacenters([]config.DatacenterSpec) {}

// RefreshCredentials implements backends.Backend: no login.
func (Inert) RefreshCredentials(context.Context, time.Duration) (bool, error) { return false, nil }

// Start implements backends.Backend: no background work.
func (Inert) Start() {}

// Backend is a fake vCenter.
type Backend struct {
	Inert
	mu    sync.Mutex
	vms   map[string]backends.VM       // by ref ID
	tags  map[string]map[string]string // ref ID -> category -> tag
	err   error                        // returned by every call when set
	hang  bool                         // block until ctx is done
	calls atomic.Int64
	// lagging VMs are missing from the simulated inventory: AllowCached
	// queries do not see them (see Lag).
	lagging     map[string]bool
	inventoried bool
	directErr   error // returned by Find calls that do not allow a cached answer
	cachedCalls atomic.Int64
	byErr       map[backends.By]error // returned by Find calls of that kind
	reach       backends.Reachability
	probes      atomic.Int64
	closed      bool
	version     uint64 // of the VMs held: changes with every Add and Remove
	instance    string // InstanceUUID's answer
	noUUIDs     bool   // UUIDs reports no inventory in service
	// datacenters are those added by AddDatacenter; the VMs' own are
	// listed too.
	datacenters []config.Datacenter
	dcCalls     atomic.Int64
	dcErr       error // returned by Datacenters when set
	// privileges is MissingPrivileges' answer (SetPrivileges), privErr
	// its error.
	privileges backends.PrivilegeReport
	privErr    error
}

// SetPrivileges sets MissingPrivileges' answer: report, or err (such as
// backends.ErrNoSession) when err is not nil.
func (b *Backend) SetPrivileges(report backends.PrivilegeReport, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.privileges, b.privErr = report, err
}

// MissingPrivileges implements backends.Backend: what SetPrivileges set
// (by default every privilege held); it fails as every call does.
func (b *Backend) MissingPrivileges(ctx context.Context) (backends.PrivilegeReport, error) {
	if err := b.enter(ctx); err != nil {
		return backends.PrivilegeReport{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.privErr != nil {
		return backends.PrivilegeReport{}, b.privErr
	}
	return b.privileges, nil
}

// FailDatacenters makes Datacenters return err (nil heals), as a vCenter
// that answers lookups but not that question (a timeout, a fault).
func (b *Backend) FailDatacenters(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dcErr = err
}

// AddDatacenter makes Datacenters list dc, holding a VM or not.
func (b *Backend) AddDatacenter(dc config.Datacenter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.datacenters = append(b.datacenters, dc)
}

// Datacenters implements backends.Backend: those added, and those of the
// VMs held (by their Datacenter), once each; it fails as every call does.
func (b *Backend) Datacenters(ctx context.Context) ([]config.Datacenter, error) {
	b.dcCalls.Add(1)
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dcErr != nil {
		return nil, b.dcErr
	}
	out := slices.Clone(b.datacenters)
	for _, vm := range b.vms {
		if dc := vm.Datacenter(); !slices.Contains(out, dc) {
			out = append(out, dc)
		}
	}
	slices.SortFunc(out, func(x, y config.Datacenter) int {
		return cmp.Or(strings.Compare(x.Name, y.Name), strings.Compare(x.ID, y.ID), strings.Compare(x.Path, y.Path))
	})
	return out, nil
}

// DatacenterCalls counts Datacenters calls.
func (b *Backend) DatacenterCalls() int64 { return b.dcCalls.Load() }

// Lag makes the VM with the given ref ID missing from the backend's
// simulated inventory, as one created a moment ago is from a watch that
// has not caught up: AllowCached queries miss it, others find it. It also
// makes the backend report an inventory (Status).
func (b *Backend) Lag(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lagging == nil {
		b.lagging = map[string]bool{}
	}
	b.lagging[id] = true
	b.inventoried = true
}

// State implements backends.Backend: its reachability (a connect
// attempt started when it was set, which never progresses, while it is
// unknown), its instance UUID, and an inventory once Lag or Inventoried
// was called.
func (b *Backend) State() backends.State {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := backends.State{Reachability: b.reach, InstanceUUID: b.instance}
	if b.reach.State == backends.ConnUnknown {
		st.Connect = backends.ConnectProgress{Phase: "dialing", Last: b.reach.Since}
	}
	st.Inventoried = b.inventoried
	return st
}

// Status implements backends.Backend: its State and its inventory, in
// service as UUIDs is; a fake has no session, budget or certificate.
func (b *Backend) Status() backends.Status {
	st := backends.Status{State: b.State()}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inventoried {
		inv := backends.InventoryStatus{InService: b.err == nil && !b.hang && !b.closed && !b.noUUIDs, Updates: b.version}
		if inv.InService {
			inv.VMs = len(b.vms)
		}
		st.Inventory = &inv
	}
	return st
}

// Inventoried makes the backend report an inventory (Status), as Lag
// does, without leaving any VM out of it: its Updates count every Add and
// Remove.
func (b *Backend) Inventoried() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inventoried = true
}

// FailDirect makes Find calls without AllowCached return err (nil heals),
// as a vCenter whose inventory is current while it cannot answer.
func (b *Backend) FailDirect(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.directErr = err
}

// FailQuery makes Find calls of kind by return err (nil heals), as a
// vCenter whose searches of one kind time out while others answer.
func (b *Backend) FailQuery(by backends.By, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byErr == nil {
		b.byErr = map[backends.By]error{}
	}
	b.byErr[by] = err
}

// CachedCalls counts the Find calls that allowed a cached answer.
func (b *Backend) CachedCalls() int64 { return b.cachedCalls.Load() }

// New returns an empty fake vCenter, reachable.
func New() *Backend {
	return &Backend{
		vms: map[string]backends.VM{}, tags: map[string]map[string]string{},
		reach: backends.Reachability{State: backends.ConnUp, Since: time.Now()},
	}
}

// SetReachability sets the reachability Status reports (a probe changes it too).
func (b *Backend) SetReachability(state backends.ConnState, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reach = backends.Reachability{State: state, Err: err, Since: time.Now()}
}

// Probe implements backends.Backend: it fails as every call does (Fail,
// Hang) and sets the reachability from the outcome.
func (b *Backend) Probe(ctx context.Context) error {
	b.probes.Add(1)
	err := b.enter(ctx)
	state := backends.ConnUp
	if err != nil {
		state = backends.ConnDown
	}
	b.SetReachability(state, err)
	return err
}

// WithoutInventory makes UUIDs report no inventory in service, as a
// vCenter configured with inventory off.
func (b *Backend) WithoutInventory() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.noUUIDs = true
}

// SetInstanceUUID sets the instance UUID Status reports: another value is
// another vCenter answering at the same address.
func (b *Backend) SetInstanceUUID(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.instance = id
}

// Probes counts Probe calls.
func (b *Backend) Probes() int64 { return b.probes.Load() }

// Add puts vm in the inventory; tags maps category to tag name.
func (b *Backend) Add(vm backends.VM, tags map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	vm.UUID = strings.ToLower(vm.UUID)
	b.vms[vm.Ref.ID] = vm
	b.version++
	b.tags[vm.Ref.ID] = tags
}

// Remove deletes the VM with the given ref ID.
func (b *Backend) Remove(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.vms, id)
	delete(b.tags, id)
	b.version++
}

// UUIDs implements backends.Backend: the fake's inventory is everything
// it holds, in service unless the backend fails.
func (b *Backend) UUIDs(unchangedSince uint64) ([]string, uint64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil || b.hang || b.closed || b.noUUIDs {
		return nil, 0, false
	}
	if b.version == unchangedSince {
		return nil, b.version, true
	}
	out := make([]string, 0, len(b.vms))
	for _, vm := range b.vms {
		if vm.UUID != "" {
			out = append(out, vm.UUID)
		}
	}
	return out, b.version, true
}

// SetPower changes a VM's power state.
func (b *Backend) SetPower(id string, s backends.PowerState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	vm := b.vms[id]
	vm.PowerState = s
	b.vms[id] = vm
}

// Fail makes every call return err (nil heals).
func (b *Backend) Fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err = err
}

// Hang makes every call block until its context ends, like a vCenter that
// accepts a connection and never answers.
func (b *Backend) Hang(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hang = on
}

// Calls is how many calls reached the backend.
func (b *Backend) Calls() int64 { return b.calls.Load() }

func (b *Backend) enter(ctx context.Context) error {
	b.calls.Add(1)
	b.mu.Lock()
	hang, err := b.hang, b.err
	if b.closed {
		err = backends.ErrClosed
	}
	b.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

// Find implements backends.Backend.
func (b *Backend) Find(ctx context.Context, q backends.Query) ([]backends.VM, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	if q.AllowCached {
		b.cachedCalls.Add(1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !q.AllowCached && b.directErr != nil {
		return nil, b.directErr
	}
	if err := b.byErr[q.By]; err != nil {
		return nil, err
	}
	var out []backends.VM
	for _, vm := range b.vms {
		if q.AllowCached && b.lagging[vm.Ref.ID] {
			continue
		}
		if !backends.InDatacenters(q.Datacenters, &vm) {
			continue
		}
		if q.Matches(&vm) {
			out = append(out, vm)
		}
	}
	slices.SortFunc(out, func(a, b backends.VM) int { return strings.Compare(a.Ref.ID, b.Ref.ID) })
	return out, nil
}

// Get implements backends.Backend.
func (b *Backend) Get(ctx context.Context, ref backends.VMRef) (*backends.VM, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	vm, ok := b.vms[ref.ID]
	if !ok || vm.Ref.Datacenter != ref.Datacenter {
		return nil, fmt.Errorf("vm %s: %w", ref.ID, backends.ErrNotFound)
	}
	return &vm, nil
}

// Tags implements backends.Backend.
func (b *Backend) Tags(ctx context.Context, vm *backends.VM, categories []string) (map[string]string, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.vms[vm.Ref.ID]; !ok {
		return nil, fmt.Errorf("vm %s: %w", vm.Ref.ID, backends.ErrNotFound)
	}
	out := map[string]string{}
	for _, c := range categories {
		if t, ok := b.tags[vm.Ref.ID][c]; ok {
			out[c] = t
		}
	}
	return out, nil
}

// Placement implements backends.Backend: from the fake's inventory,
// in service as UUIDs is, without the lagging VMs; tags are always known.
// It is no call: Calls does not count it.
func (b *Backend) Placement(uuid string, categories []string) ([]backends.Placement, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil || b.hang || b.closed || b.noUUIDs {
		return nil, false
	}
	var out []backends.Placement
	for _, vm := range b.vms {
		if vm.UUID != strings.ToLower(uuid) || b.lagging[vm.Ref.ID] {
			continue
		}
		p := backends.Placement{VM: vm, Tags: map[string]string{}, TagsKnown: true}
		for _, c := range categories {
			if t, ok := b.tags[vm.Ref.ID][c]; ok {
				p.Tags[c] = t
			}
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(x, y backends.Placement) int { return strings.Compare(x.VM.Ref.ID, y.VM.Ref.ID) })
	return out, true
}

// Close implements backends.Backend: later calls fail with ErrClosed.
func (b *Backend) Close(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}
