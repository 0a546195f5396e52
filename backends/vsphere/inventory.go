package vsphere

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// inventoryKinds are the managed entities the watch keeps: the VMs and
// everything their datacenter and zone/region walks pass through. A real
// vCenter's ContainerView includes subtypes, vcsim's does not: both
// ComputeResource kinds and both pool kinds are named.
var inventoryKinds = []string{
	"VirtualMachine", "HostSystem", "ComputeResource", "ClusterComputeResource",
	"Folder", "Datacenter", "ResourcePool", "VirtualApp",
}

// pageSize bounds the objects per WaitForUpdatesEx answer (vCenter may
// send fewer); the initial load of a large vCenter arrives in pages.
const pageSize = 1000

// inventory is one vCenter's VMs and the entities above them, kept in
// memory by a PropertyCollector watch (WaitForUpdatesEx over a
// ContainerView of the root folder).
//
// It answers only while it is in service, that is provably current: the
// initial load is complete and the watch's last poll answered within
// heartbeat + requestTimeout. Otherwise its lookups report !ok and the backend asks
// vCenter directly. It never decides absence: a VM it does not hold is
// looked for directly (see Backend.Find and Backend.Get).
type inventory struct {
	sessions  *sessions
	heartbeat time.Duration
	log       klog.Logger
	// updates counts the object updates applied since start, loads
	// included: a change seen moves it.
	updates atomic.Uint64
	// firstAttempt is closed when the first load has been published or
	// the watch's first attempt has failed (see awaitFirstAttempt).
	firstAttempt     chan struct{}
	firstAttemptOnce sync.Once
	// started is set when the watch starts (Backend.Start): before that
	// no first load is under way, and nothing waits for one.
	started atomic.Bool
	// loaded, when set, is called after each load is published (the
	// backend reads the tags with it: tagsWithInventory).
	loaded func()

	mu    sync.RWMutex
	state *invState // nil until loaded, and after the watch stops
	// freshUntil is when the current poll becomes overdue: past it, the
	// watch cannot prove it still mirrors vCenter.
	freshUntil time.Time
}

func newInventory(s *sessions, heartbeat time.Duration, log klog.Logger) *inventory {
	return &inventory{sessions: s, heartbeat: heartbeat, log: log, firstAttempt: make(chan struct{})}
}

// firstLoadWait bounds how long a lookup waits for the first load.
const firstLoadWait = 5 * time.Second

// awaitFirstAttempt waits, while the inventory's first load is under way,
// until it ends, for at most half of ctx's remaining time (the other half
// is for a direct lookup) and firstLoadWait. A CCM that starts in a
// running cluster asks about every Node at once, seconds before its
// inventories are loaded; without the wait each of those lookups would
// go to vCenter directly, the storm the inventory exists to prevent.
// Once the first attempt has ended, loaded or failed, nothing waits.
func (inv *inventory) awaitFirstAttempt(ctx context.Context) {
	if !inv.started.Load() {
		return
	}
	select {
	case <-inv.firstAttempt:
		return
	default:
	}
	wait := firstLoadWait
	if deadline, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(deadline)/2)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-inv.firstAttempt:
	case <-t.C:
	case <-ctx.Done():
	}
}

func (inv *inventory) endFirstAttempt() {
	inv.firstAttemptOnce.Do(func() { close(inv.firstAttempt) })
}

// run keeps the watch going until ctx ends, reconnecting with backoff.
func (inv *inventory) run(ctx context.Context) {
	backoff := newWatchBackoff()
	for {
		started := time.Now()
		err := inv.watch(ctx)
		inv.setState(nil, time.Time{})
		// Its connect or a poll got no answer (or a fault: an answer): a
		// connection-level event, also before any lookup was made.
		inv.sessions.recordReachability(ctx, "inventory watch", err)
		inv.endFirstAttempt()
		if ctx.Err() != nil || errors.Is(err, backends.ErrClosed) {
			return
		}
		if time.Since(started) > time.Minute {
			backoff = newWatchBackoff() // it was healthy for a while: start over
		}
		delay := backoff.Step()
		inv.log.Info("vCenter inventory watch stopped; lookups go to vCenter directly until it is back", "err", err, "retryIn", delay.Round(time.Millisecond))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func newWatchBackoff() wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: 2 * time.Minute}
}

// watch sets up what the inventory is read through (a property collector
// of its own, a container view, a filter), then follows it until an
// error; what it created is destroyed on the way out.
func (inv *inventory) watch(ctx context.Context) error {
	const op = "vsphere.inventory.watch"
	timeout := inv.sessions.requestTimeout()
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	vc, err := inv.sessions.client(sctx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	// A collector of its own: the default one serves direct lookups, and
	// one collector allows one WaitForUpdatesEx at a time.
	// destroy removes a server-side object of the watch under a fresh
	// deadline, also when closing: destroying the collector ends a poll
	// vCenter would otherwise hold open until its MaxWaitSeconds, and a
	// view left behind costs vCenter memory until the session ends.
	destroy := func(d func(context.Context) error) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		_ = d(dctx)
	}
	pc, err := property.DefaultCollector(vc).Create(sctx)
	if err != nil {
		return fmt.Errorf("%s: create property collector: %w", op, err)
	}
	defer destroy(pc.Destroy)
	v, err := view.NewManager(vc).CreateContainerView(sctx, vc.ServiceContent.RootFolder, inventoryKinds, true)
	if err != nil {
		return fmt.Errorf("%s: create container view: %w", op, err)
	}
	defer destroy(v.Destroy)
	if _, err := pc.CreateFilter(sctx, types.CreateFilter{Spec: filterSpec(v.Reference()), PartialUpdates: false}); err != nil {
		return fmt.Errorf("%s: create filter: %w", op, err)
	}
	cancel()
	return inv.follow(ctx, vc, pc.Reference())
}

// follow polls the collector pc, whose filter covers the inventory: the
// first pages are the initial load, published once complete; the next
// are changes, applied as they come. It returns at the first error, a
// poll unanswered past its deadline included.
func (inv *inventory) follow(ctx context.Context, vc *vim25.Client, pc types.ManagedObjectReference) error {
	const op = "vsphere.inventory.watch"
	timeout := inv.sessions.requestTimeout()
	wait := int32(inv.heartbeat / time.Second)
	req := types.WaitForUpdatesEx{
		This:    pc,
		Options: &types.WaitOptions{MaxWaitSeconds: &wait, MaxObjectUpdates: pageSize},
	}
	loading := newInvState() // the initial load, published when complete
	// The view holds what is below the root folder, not the folder
	// itself: held here, it ends every ancestry as a direct read's does, so
	// that datacenters' paths are known complete (invState.datacenter).
	loading.entities[vc.ServiceContent.RootFolder] = entity{}
	applied := 0
	for {
		// The poll's deadline: vCenter answers by MaxWaitSeconds even
		// when nothing changed, so silence beyond that plus the request
		// timeout is a vCenter that cannot answer.
		deadline := time.Now().Add(inv.heartbeat + timeout)
		pctx, cancel := context.WithDeadline(ctx, deadline)
		res, err := methods.WaitForUpdatesEx(pctx, vc, &req)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: wait for updates: %w", op, err)
		}
		now := time.Now()
		set := res.Returnval
		if set == nil { // MaxWaitSeconds passed without a change
			if loading == nil {
				inv.touch(now.Add(inv.heartbeat + timeout))
			}
			continue
		}
		req.Version = set.Version
		truncated := set.Truncated != nil && *set.Truncated
		if loading != nil {
			for _, fs := range set.FilterSet {
				loading.apply(fs.ObjectSet)
				applied += len(fs.ObjectSet)
			}
			if !truncated {
				inv.log.V(2).Info("vCenter inventory loaded", "vms", len(loading.vms), "entities", len(loading.entities))
				// Counted before it is published: a reader that sees the
				// state sees its version (UUIDs, Inventory).
				inv.updates.Add(uint64(applied))
				inv.setState(loading, now.Add(inv.heartbeat+timeout))
				inv.endFirstAttempt()
				if inv.loaded != nil {
					inv.loaded()
				}
				loading = nil
				applied = 0
			}
			continue
		}
		inv.mu.Lock()
		for _, fs := range set.FilterSet {
			inv.state.apply(fs.ObjectSet)
			applied += len(fs.ObjectSet)
		}
		if !truncated {
			inv.freshUntil = now.Add(inv.heartbeat + timeout)
		}
		inv.updates.Add(uint64(applied)) // under the lock, with the state it counts
		inv.mu.Unlock()
		applied = 0
	}
}

func (inv *inventory) setState(s *invState, freshUntil time.Time) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.state, inv.freshUntil = s, freshUntil
}

func (inv *inventory) touch(freshUntil time.Time) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.freshUntil = freshUntil
}

// status is what the inventory shows of itself.
func (inv *inventory) status() backends.InventoryStatus {
	st := backends.InventoryStatus{Updates: inv.updates.Load()}
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	if s := inv.inService(); s != nil {
		st.InService, st.VMs = true, len(s.vms)
	}
	return st
}

// inService returns the state while the inventory is in service, nil
// otherwise; the caller holds inv.mu for reading.
func (inv *inventory) inService() *invState {
	if inv.state == nil || !time.Now().Before(inv.freshUntil) {
		return nil
	}
	return inv.state
}

// filterSpec asks for every entity of the view, with only the properties
// the CCM reads.
func filterSpec(v types.ManagedObjectReference) types.PropertyFilterSpec {
	return types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{{
			Obj: v, Skip: types.NewBool(true),
			SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{Type: "ContainerView", Path: "view"}},
		}},
		PropSet: []types.PropertySpec{
			{Type: "VirtualMachine", PathSet: vmProperties},
			{Type: "HostSystem", PathSet: []string{"name", "parent"}},
			{Type: "ComputeResource", PathSet: []string{"name", "parent"}},
			{Type: "ClusterComputeResource", PathSet: []string{"name", "parent"}},
			{Type: "Folder", PathSet: []string{"name", "parent"}},
			{Type: "Datacenter", PathSet: []string{"name", "parent"}},
			{Type: "ResourcePool", PathSet: []string{"name", "parent"}},
			{Type: "VirtualApp", PathSet: []string{"name", "parent", "parentVApp"}},
		},
	}
}

// find answers q from memory. ok is false when the inventory cannot answer
// (out of service, or a match whose datacenter it cannot place); an empty
// answer with ok is "none known", never "none exists".
func (inv *inventory) find(q backends.Query) (vms []backends.VM, ok bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	s := inv.inService()
	if s == nil {
		return nil, false
	}
	var idx map[string][]string
	switch q.By {
	case backends.ByUUID:
		idx = s.byUUID
	case backends.ByName:
		idx = s.byName
	case backends.ByIP:
		idx = s.byIP
	case backends.ByDNSName:
		idx = s.byDNS
	default:
		return nil, false
	}
	seen := map[string]bool{}
	for _, v := range q.Values {
		switch q.By {
		case backends.ByUUID:
			v = strings.ToLower(v)
		case backends.ByDNSName:
			v = backends.DNSNameKey(v)
		}
		for _, id := range idx[v] {
			if seen[id] {
				continue
			}
			seen[id] = true
			vm, ok := s.vm(id)
			if !ok {
				return nil, false
			}
			if backends.InDatacenters(q.Datacenters, &vm) {
				vms = append(vms, vm)
			}
		}
	}
	slices.SortFunc(vms, func(a, b backends.VM) int { return cmp.Compare(a.Ref.ID, b.Ref.ID) })
	return vms, true
}

// get answers a re-read of ref from memory; ok is false when the inventory
// does not hold the VM there (the caller asks vCenter).
func (inv *inventory) get(ref backends.VMRef) (*backends.VM, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	s := inv.inService()
	if s == nil {
		return nil, false
	}
	vm, ok := s.vm(ref.ID)
	if !ok || vm.Ref.Datacenter != ref.Datacenter {
		return nil, false
	}
	return &vm, true
}

// datacenters is invState.datacenters while the inventory is in service.
func (inv *inventory) datacenters() ([]config.Datacenter, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	s := inv.inService()
	if s == nil {
		return nil, false
	}
	return s.datacenters(), true
}

// tagAncestries is invState.tagAncestries while the inventory is in
// service; ok is false when it cannot place the VM (the caller reads the
// ancestries from vCenter).
func (inv *inventory) tagAncestries(vm *backends.VM) ([][]types.ManagedObjectReference, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	s := inv.inService()
	if s == nil {
		return nil, false
	}
	return s.tagAncestries(vm)
}

// entityRefs lists every entity held, VMs too (CPI reads a VM's own
// tags last): what the tag cache loads.
func (inv *inventory) entityRefs() ([]types.ManagedObjectReference, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	s := inv.inService()
	if s == nil {
		return nil, false
	}
	out := make([]types.ManagedObjectReference, 0, len(s.entities)+len(s.vms))
	for r := range s.entities {
		out = append(out, r)
	}
	for id := range s.vms {
		out = append(out, vmRef(id))
	}
	slices.SortFunc(out, func(a, b types.ManagedObjectReference) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Value, b.Value))
	})
	return out, true
}

// uuids lists the BIOS UUIDs held while in service, with the update
// count as version (nil uuids when it equals unchangedSince).
func (inv *inventory) uuids(unchangedSince uint64) ([]string, uint64, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	s := inv.inService()
	if s == nil {
		return nil, 0, false
	}
	version := inv.updates.Load()
	if version == unchangedSince {
		return nil, version, true
	}
	out := make([]string, 0, len(s.byUUID))
	for u := range s.byUUID {
		out = append(out, u)
	}
	return out, version, true
}
