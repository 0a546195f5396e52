package vsphere

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
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

// defaultPageSize bounds the objects per answer of the first load's
// RetrievePropertiesEx and of WaitForUpdatesEx (vCenter may send fewer).
// At WAN latency every page costs a round trip, but each is one request
// under one requestTimeout, also when 20 datacenters load at once on a
// busy host: pages of 5,000 VMs timed out so in the 50,000-VM bench;
// 1,000 cost a 5,000-VM load at 200 ms ~0.5 s more (see
// TestInventoryColdLoadMeasured).
const defaultPageSize = 1000

// inventory is one vCenter's VMs and the entities above them, in the
// datacenters the config names (every datacenter when it names none),
// kept in memory by PropertyCollector watches: one per datacenter (its
// own collector, a ContainerView of the datacenter, and the datacenter
// and its folders up to the root folder), loaded in parallel (a snapshot
// in RetrievePropertiesEx pages, see snapshot) and followed each by its
// own long poll (WaitForUpdatesEx), and one of the list of
// datacenters (what the configured ones resolve to, and what
// Backend.Datacenters answers). A datacenter added to the config, or
// created later and named by it, gets a watch of its own; one removed
// from it has its watch stopped and its VMs dropped; the other watches
// go on untouched.
//
// It answers only while it is in service for what is asked, that is
// provably current: the datacenters a lookup searches are all loaded, and
// their watches' last polls (and the list's) answered within heartbeat +
// requestTimeout. Otherwise its lookups report !ok and the backend asks
// vCenter directly. It never decides absence: a VM it does not hold is
// looked for directly (see Backend.Find and Backend.Get).
type inventory struct {
	sessions  *sessions
	heartbeat time.Duration
	pageSize  int32
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
	// rescoped (one slot) tells the watch that the configured datacenters
	// or the list of datacenters changed: it starts and stops datacenter
	// watches to match.
	rescoped chan struct{}
	// loaded, when set, is called whenever a load completes what is
	// configured (the backend reads the tags with it: refreshTagsInBackground).
	loaded func()

	mu sync.RWMutex
	// specs are the configured datacenters; empty: every datacenter.
	specs []config.DatacenterSpec
	// list is the datacenter list's watch, nil while the watch is down.
	list *watched
	// views are the datacenters watched, by reference.
	views map[types.ManagedObjectReference]*watched
}

// watched is one watch's state: a datacenter's, or the datacenter list's
// (dc zero).
type watched struct {
	dc    types.ManagedObjectReference
	state *invState // nil until loaded
	// freshUntil is when the current poll becomes overdue: past it, the
	// watch cannot prove it still mirrors vCenter.
	freshUntil time.Time
	stop       context.CancelFunc
}

// current reports whether w is loaded and its last poll answered in time.
func (w *watched) current(now time.Time) bool {
	return w != nil && w.state != nil && now.Before(w.freshUntil)
}

func newInventory(s *sessions, heartbeat time.Duration, specs []config.DatacenterSpec, log klog.Logger) *inventory {
	return &inventory{
		sessions: s, heartbeat: heartbeat, pageSize: defaultPageSize, log: log, specs: specs,
		firstAttempt: make(chan struct{}), rescoped: make(chan struct{}, 1),
	}
}

// setDatacenters makes specs the datacenters watched (empty: all): one
// added gets a watch, one removed loses its watch and what it held at
// once, one kept keeps its watch and what it holds.
func (inv *inventory) setDatacenters(specs []config.DatacenterSpec) {
	inv.mu.Lock()
	inv.specs = slices.Clone(specs)
	if inv.list != nil && inv.list.state != nil {
		inv.dropUnwantedLocked(inv.wantedLocked(inv.specs)) // at once; the watch starts the new ones
	}
	inv.mu.Unlock()
	inv.rescope()
}

func (inv *inventory) rescope() {
	select {
	case inv.rescoped <- struct{}{}:
	default: // one is pending: it will read the latest
	}
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
		inv.mu.Lock()
		inv.list, inv.views = nil, nil // the watch has stopped: what it held goes
		inv.mu.Unlock()
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
		case <-inv.sessions.loginDue:
			// Credentials that may log in now (see sessions.refresh):
			// a standby need not wait out the backoff to be warm.
			t.Stop()
		}
	}
}

func newWatchBackoff() wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: 2 * time.Minute}
}

// watch runs the datacenter list's watch and one watch per datacenter
// configured, started and stopped as the config and the list change,
// until one of them fails (a connection-level event: every watch starts
// over) or ctx ends.
func (inv *inventory) watch(ctx context.Context) error {
	const op = "vsphere.inventory.watch"
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	sctx, scancel := context.WithTimeout(ctx, inv.sessions.requestTimeout())
	c, err := inv.sessions.current(sctx)
	scancel()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	vc := c.vim
	failed := make(chan error, 1)
	start := func(w *watched) {
		wctx, stop := context.WithCancel(ctx)
		w.stop = stop
		wg.Go(func() {
			err := inv.follow(wctx, vc, w)
			if wctx.Err() != nil && ctx.Err() == nil {
				return // stopped: its datacenter left the config
			}
			select {
			case failed <- err:
			default: // another failed first
			}
		})
	}
	list := &watched{}
	inv.mu.Lock()
	inv.list, inv.views = list, map[types.ManagedObjectReference]*watched{}
	start(list)
	inv.mu.Unlock()
	for {
		select {
		case err := <-failed:
			return err
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", op, ctx.Err())
		case <-inv.rescoped:
			inv.reconcile(start)
		}
	}
}

// reconcile starts a watch for each configured datacenter the list holds
// that has none, and stops those of the datacenters no longer configured
// (or gone): what they held leaves memory at once. The others go on.
func (inv *inventory) reconcile(start func(*watched)) {
	inv.mu.Lock()
	if inv.list == nil || inv.list.state == nil {
		inv.mu.Unlock()
		return // the list, once loaded, rescopes
	}
	want := inv.wantedLocked(inv.specs)
	inv.dropUnwantedLocked(want)
	for _, ref := range want {
		if inv.views[ref] == nil {
			w := &watched{dc: ref}
			inv.views[ref] = w
			start(w)
		}
	}
	complete := inv.loadedLocked()
	inv.mu.Unlock()
	if complete {
		inv.endFirstAttempt() // nothing (more) to load
	}
}

// dropUnwantedLocked stops the watches of the datacenters not in want
// and drops what they held; the caller holds inv.mu.
func (inv *inventory) dropUnwantedLocked(want []types.ManagedObjectReference) {
	for ref, w := range inv.views {
		if !slices.Contains(want, ref) {
			w.stop()
			delete(inv.views, ref)
			inv.log.V(2).Info("vCenter inventory: datacenter no longer watched", "datacenter", ref.Value)
		}
	}
}

// wantedLocked lists the datacenters specs name (every one when empty),
// as the list holds them; the caller holds inv.mu and the list is loaded.
func (inv *inventory) wantedLocked(specs []config.DatacenterSpec) []types.ManagedObjectReference {
	var out []types.ManagedObjectReference
	for _, dc := range inv.list.state.datacenters() {
		if backends.Searched(specs, dc) {
			out = append(out, datacenterRef(dc.ID))
		}
	}
	return out
}

func compareRefs(a, b types.ManagedObjectReference) int {
	return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Value, b.Value))
}

func datacenterRef(id string) types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "Datacenter", Value: id}
}

// follow sets up one watch (a property collector of its own, a container
// view, a filter) and follows it until an error or ctx ends; what it
// created is destroyed on the way out. Its first pages are the initial
// load, published once complete; the next are changes, applied as they
// come. It returns at the first error, a poll unanswered past its
// deadline included.
func (inv *inventory) follow(ctx context.Context, vc *vim25.Client, w *watched) error {
	const op = "vsphere.inventory.watch"
	timeout := inv.sessions.requestTimeout()
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A collector of its own: the default one serves direct lookups, and
	// one collector allows one WaitForUpdatesEx at a time.
	pc, err := property.DefaultCollector(vc).Create(sctx)
	if err != nil {
		return fmt.Errorf("%s: create property collector: %w", op, err)
	}
	// Destroyed also when closing: that ends a poll vCenter would
	// otherwise hold open until its MaxWaitSeconds.
	defer destroy(ctx, timeout, pc.Destroy)
	root, kinds := w.dc, inventoryKinds
	if root.Value == "" {
		root, kinds = vc.ServiceContent.RootFolder, []string{"Datacenter"}
	}
	v, err := view.NewManager(vc).CreateContainerView(sctx, root, kinds, true)
	if err != nil {
		return fmt.Errorf("%s: create container view: %w", op, err)
	}
	defer destroy(ctx, timeout, v.Destroy)
	spec := datacenterListSpec(v.Reference())
	if w.dc.Value != "" {
		spec = inv.sessions.withHostGroups(datacenterSpec(v.Reference(), w.dc))
	}
	if _, err := pc.CreateFilter(sctx, types.CreateFilter{Spec: spec, PartialUpdates: false}); err != nil {
		return fmt.Errorf("%s: create filter: %w", op, err)
	}
	cancel()

	wait := int32(inv.heartbeat / time.Second)
	req := types.WaitForUpdatesEx{
		This:    pc.Reference(),
		Options: &types.WaitOptions{MaxWaitSeconds: &wait, MaxObjectUpdates: inv.pageSize},
	}
	// The initial load, published when complete. The root folder is held
	// before the watch sends it: it ends every ancestry as a direct
	// read's does, so that datacenters' paths are known complete
	// (invState.datacenter).
	newLoad := func() *invState {
		s := newInvState()
		s.entities[vc.ServiceContent.RootFolder] = entity{}
		return s
	}
	loading, applied := newLoad(), 0
	// publish makes loading, applied objects, w's state. Counted before
	// it is published: a reader that sees the state sees its version
	// (UUIDs, Inventory).
	publish := func(now time.Time, snapshot bool) {
		inv.log.V(2).Info("vCenter inventory loaded", "datacenter", w.dc.Value,
			"vms", len(loading.vms), "entities", len(loading.entities), "snapshot", snapshot)
		inv.updates.Add(uint64(applied))
		inv.setState(w, loading, now.Add(inv.heartbeat+timeout))
		loading, applied = nil, 0
	}
	// seen, while the watch's initial set is applied over a published
	// snapshot, is what the set named: the rest is dropped when it ends.
	var seen map[types.ManagedObjectReference]struct{}
	n, err := inv.snapshot(ctx, vc, pc.Reference(), spec, loading)
	switch {
	case err == nil:
		applied = n
		publish(time.Now(), true)
		seen = map[types.ManagedObjectReference]struct{}{vc.ServiceContent.RootFolder: {}}
	case ctx.Err() != nil:
		return fmt.Errorf("%s: snapshot: %w", op, err)
	default:
		// Only slower: the watch's own pages load it.
		inv.log.Info("vCenter inventory snapshot failed, loading from the watch", "datacenter", w.dc.Value, "err", err)
		loading = newLoad()
	}
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
				inv.mu.Lock()
				w.freshUntil = now.Add(inv.heartbeat + timeout)
				inv.mu.Unlock()
			}
			continue
		}
		req.Version = set.Version
		truncated := set.Truncated != nil && *set.Truncated
		state := loading
		if state == nil {
			inv.mu.Lock() // the published state: changed under the lock
			state = w.state
		}
		for _, fs := range set.FilterSet {
			state.apply(fs.ObjectSet)
			applied += len(fs.ObjectSet)
			if seen != nil {
				for _, u := range fs.ObjectSet {
					seen[u.Obj] = struct{}{}
				}
			}
		}
		if loading != nil {
			if !truncated {
				publish(now, false)
			}
			continue
		}
		if !truncated {
			if seen != nil {
				w.state.keepOnly(seen)
				seen = nil
			}
			w.freshUntil = now.Add(inv.heartbeat + timeout)
		}
		inv.updates.Add(uint64(applied)) // under the lock, with the state it counts
		inv.mu.Unlock()
		if w.dc.Value == "" && applied > 0 {
			inv.rescope() // a datacenter created, renamed, moved or gone
		}
		applied = 0
	}
}

// snapshot reads what spec selects into s in RetrievePropertiesEx pages
// of pageSize, each under its own deadline, and returns the objects read.
// It is the first load: vCenter may answer a WaitForUpdatesEx with far
// fewer objects than asked (vcsim: 100, a round trip each, 50 for 5,000
// VMs), a RetrievePropertiesEx with as many as asked. The watch's own
// initial set follows and corrects it: the load is read twice (~4 s of
// CPU at 50,000 VMs), always, as the setup's round trips cannot tell a
// WAN from a busy host (29-155 ms at 0 ms under load). Until that set
// ends the state lags vCenter by at most its length, and is current only
// for heartbeat + requestTimeout after the snapshot, as after any poll.
func (inv *inventory) snapshot(ctx context.Context, vc *vim25.Client, pc types.ManagedObjectReference, spec types.PropertyFilterSpec, s *invState) (int, error) {
	timeout := inv.sessions.requestTimeout()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	res, err := methods.RetrievePropertiesEx(rctx, vc, &types.RetrievePropertiesEx{
		This: pc, SpecSet: []types.PropertyFilterSpec{spec}, Options: types.RetrieveOptions{MaxObjects: inv.pageSize},
	})
	cancel()
	if err != nil {
		return 0, err
	}
	page, n := res.Returnval, 0
	for page != nil {
		n += s.applyContent(page.Objects)
		if page.Token == "" {
			break
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		next, err := methods.ContinueRetrievePropertiesEx(rctx, vc, &types.ContinueRetrievePropertiesEx{This: pc, Token: page.Token})
		cancel()
		if err != nil {
			return n, err
		}
		page = &next.Returnval
	}
	return n, nil
}

// setState publishes w's initial load s: the one place a load is
// published. The first load is over when every datacenter configured is
// loaded.
func (inv *inventory) setState(w *watched, s *invState, freshUntil time.Time) {
	inv.mu.Lock()
	w.state, w.freshUntil = s, freshUntil
	complete := inv.loadedLocked()
	inv.mu.Unlock()
	if w.dc.Value == "" {
		inv.rescope() // the list is known: its datacenters are watched
	}
	if complete {
		inv.endFirstAttempt()
		if inv.loaded != nil {
			inv.loaded()
		}
	}
}

// status is what the inventory shows of itself.
func (inv *inventory) status() backends.InventoryStatus {
	st := backends.InventoryStatus{Updates: inv.updates.Load()}
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	if held, ok := inv.scopeLocked(inv.specs, time.Now()); ok {
		st.InService = true
		for _, s := range held {
			st.VMs += len(s.vms)
		}
	}
	return st
}

// loadedLocked reports whether the list and every datacenter configured
// have been loaded, current or not: the first load is over when the last
// is published, also if another went overdue meanwhile (a snapshot whose
// watch's initial set outlasts heartbeat + requestTimeout), which nothing
// would publish again: each is current as of the zero time, before any
// freshUntil a load sets. The caller holds inv.mu.
func (inv *inventory) loadedLocked() bool {
	_, ok := inv.scopeLocked(inv.specs, time.Time{})
	return ok
}

// scopeLocked returns the states of the datacenters specs name (every
// datacenter of the vCenter when empty; inv.specs: the datacenters
// configured, the inventory in service) while each is loaded and current;
// ok is false when one is not watched, still loading or overdue: a
// lookup there cannot be answered from memory. The caller holds inv.mu.
func (inv *inventory) scopeLocked(specs []config.DatacenterSpec, now time.Time) ([]*invState, bool) {
	if !inv.list.current(now) {
		return nil, false
	}
	var out []*invState
	for _, ref := range inv.wantedLocked(specs) {
		w := inv.views[ref]
		if !w.current(now) {
			return nil, false
		}
		out = append(out, w.state)
	}
	return out, true
}

// currentLocked returns the states of the datacenters loaded and current,
// whatever the others' state; the caller holds inv.mu.
func (inv *inventory) currentLocked(now time.Time) []*invState {
	var out []*invState
	for _, w := range inv.views {
		if w.current(now) {
			out = append(out, w.state)
		}
	}
	return out
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

// withHostGroups is spec asking, when the vCenter's zones come from DRS
// host groups (config.VCenter.ZoneHostGroups), for each cluster's
// configurationEx too: its host groups; otherwise spec, and no read of a
// VM reads them. The whole property, not configurationEx.group: a path
// into a subtype's field (group is ClusterConfigInfoEx's, the property is
// declared ComputeResourceConfigInfo) is not one every vCenter version is
// documented to accept, and a filter vCenter refuses would stop the whole
// inventory.
func (s *sessions) withHostGroups(spec types.PropertyFilterSpec) types.PropertyFilterSpec {
	if s.opts.Config.ZoneHostGroups == nil {
		return spec
	}
	const path = "configurationEx"
	props := slices.Clone(spec.PropSet)
	for i, ps := range props {
		if ps.Type == "ClusterComputeResource" {
			if !slices.Contains(ps.PathSet, path) {
				props[i].PathSet = append(slices.Clip(ps.PathSet), path)
			}
			spec.PropSet = props
			return spec
		}
	}
	props = append(props, types.PropertySpec{Type: "ClusterComputeResource", PathSet: []string{path}})
	spec.PropSet = props
	return spec
}

// upSpec walks "parent" up to the root folder: the folders above a
// datacenter, watched so that its path follows a rename or a move.
func upSpec() *types.TraversalSpec {
	const up = "up"
	return &types.TraversalSpec{
		SelectionSpec: types.SelectionSpec{Name: up}, Type: "ManagedEntity", Path: "parent",
		SelectSet: []types.BaseSelectionSpec{&types.SelectionSpec{Name: up}},
	}
}

// datacenterSpec is filterSpec over v, a container view of the datacenter
// dc, and dc itself with its folders up to the root folder (the view holds
// what is below dc only): what places its VMs and names its path.
func datacenterSpec(v, dc types.ManagedObjectReference) types.PropertyFilterSpec {
	spec := filterSpec(v)
	spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{Obj: dc, SelectSet: []types.BaseSelectionSpec{upSpec()}})
	return spec
}

// datacenterListSpec asks for every datacenter of v (a container view of
// the root folder's datacenters) and its folders up to the root folder.
func datacenterListSpec(v types.ManagedObjectReference) types.PropertyFilterSpec {
	return types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{{
			Obj: v, Skip: types.NewBool(true),
			SelectSet: []types.BaseSelectionSpec{&types.TraversalSpec{
				Type: "ContainerView", Path: "view", SelectSet: []types.BaseSelectionSpec{upSpec()},
			}},
		}},
		PropSet: []types.PropertySpec{
			{Type: "Folder", PathSet: []string{"name", "parent"}},
			{Type: "Datacenter", PathSet: []string{"name", "parent"}},
		},
	}
}

// find answers q from memory, from the datacenters q searches (every
// datacenter of the vCenter when q names none). ok is false when the
// inventory cannot answer: one of those datacenters not watched (outside
// the config), not loaded yet or overdue, or a match whose datacenter it
// cannot place. An empty answer with ok is "none known", never "none
// exists".
func (inv *inventory) find(q backends.Query) (vms []backends.VM, ok bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	states, ok := inv.scopeLocked(q.Datacenters, time.Now())
	if !ok {
		return nil, false
	}
	// key is how a value is held in the index of q.By.
	key := func(v string) string { return v }
	switch q.By {
	case backends.ByUUID:
		key = strings.ToLower
	case backends.ByDNSName:
		key = backends.DNSNameKey
	case backends.ByName, backends.ByIP:
	default:
		return nil, false
	}
	seen := map[string]bool{}
	for _, s := range states {
		idx := [...]*vmIndex{
			backends.ByUUID: s.byUUID, backends.ByName: s.byName, backends.ByIP: s.byIP, backends.ByDNSName: s.byDNS,
		}[q.By]
		for _, v := range q.Values {
			for _, id := range idx.appendIDs(nil, key(v)) {
				// A VM moving between datacenters may be in two
				// states a moment: the first placed counts.
				if seen[id] {
					continue
				}
				vm, ok := s.vm(id)
				if !ok {
					return nil, false
				}
				seen[id] = true
				if backends.InDatacenters(q.Datacenters, &vm) {
					vms = append(vms, vm)
				}
			}
		}
	}
	slices.SortFunc(vms, func(a, b backends.VM) int { return cmp.Compare(a.Ref.ID, b.Ref.ID) })
	return vms, true
}

// get answers a re-read of ref from memory; ok is false when no
// datacenter loaded and current holds the VM there (the caller asks
// vCenter).
func (inv *inventory) get(ref backends.VMRef) (*backends.VM, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	for _, s := range inv.currentLocked(time.Now()) {
		if vm, ok := s.vm(ref.ID); ok && vm.Ref.Datacenter == ref.Datacenter {
			return &vm, true
		}
	}
	return nil, false
}

// datacenters is every datacenter of the vCenter, configured or not
// (invState.datacenters of the list), while the list is current.
func (inv *inventory) datacenters() ([]config.Datacenter, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	if !inv.list.current(time.Now()) {
		return nil, false
	}
	return inv.list.state.datacenters(), true
}

// tagAncestries is invState.tagAncestries of the datacenter holding vm,
// loaded and current; ok is false when none does or it cannot place the
// VM (the caller reads the ancestries from vCenter).
func (inv *inventory) tagAncestries(vm *backends.VM) ([][]types.ManagedObjectReference, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	for _, s := range inv.currentLocked(time.Now()) {
		if _, held := s.vms[vm.Ref.ID]; held {
			return s.tagAncestries(vm)
		}
	}
	return nil, false
}

// entityRefs lists every entity held, VMs too (CPI reads a VM's own
// tags last): what the tag cache loads.
func (inv *inventory) entityRefs() ([]types.ManagedObjectReference, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	held, ok := inv.scopeLocked(inv.specs, time.Now())
	if !ok {
		return nil, false
	}
	var out []types.ManagedObjectReference
	for _, s := range held {
		// The folders above the datacenters are in each datacenter's
		// state: compacted below.
		out = slices.AppendSeq(out, maps.Keys(s.entities))
		for id := range s.vms {
			out = append(out, vmRef(id))
		}
	}
	slices.SortFunc(out, compareRefs)
	return slices.Compact(out), true
}

// uuids lists the BIOS UUIDs held while in service for every datacenter
// configured, with the update count as version (nil uuids when it equals
// unchangedSince).
func (inv *inventory) uuids(unchangedSince uint64) ([]string, uint64, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	held, ok := inv.scopeLocked(inv.specs, time.Now())
	if !ok {
		return nil, 0, false
	}
	version := inv.updates.Load()
	if version == unchangedSince {
		return nil, version, true
	}
	n := 0
	for _, s := range held {
		n += s.byUUID.len()
	}
	out := make([]string, 0, n)
	for _, s := range held {
		out = s.appendUUIDs(out)
	}
	if len(held) > 1 {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	return out, version, true
}

// Placement implements backends.Backend from the inventory and the bulk tag
// cache only: no request to vCenter, and no bulk tag read started (the
// cache is loaded by lookups and refreshed in the background).
func (b *Backend) Placement(uuid string, categories []string) ([]backends.Placement, bool) {
	if b.inv == nil {
		return nil, false
	}
	found, ok := b.inv.placement(uuid)
	if !ok {
		return nil, false
	}
	snap := b.bulkTags.get() // an inventory has its tag cache (New)
	var out []backends.Placement
	for _, p := range found {
		switch {
		case len(categories) == 0:
			p.Tags, p.TagsKnown = map[string]string{}, true
		case p.ancestries != nil && covers(snap, p.ancestries):
			p.Tags, p.TagsKnown = firstCompleteAncestry(p.ancestries, snap.attached, categories), true
		}
		out = append(out, p.Placement)
	}
	return out, true
}

// placedVM is a VM placed from memory, with its tag ancestries.
type placedVM struct {
	backends.Placement
	ancestries [][]types.ManagedObjectReference
}

// placement lists, by ID, the VMs of BIOS UUID uuid held while in
// service for every datacenter configured, each placed (see
// invState.placed), with its tag ancestries (nil when incomplete). VMs
// whose datacenter it cannot place are left out.
func (inv *inventory) placement(uuid string) ([]placedVM, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	held, ok := inv.scopeLocked(inv.specs, time.Now())
	if !ok {
		return nil, false
	}
	var found []placedVM
	var buf [2]string
	for _, s := range held {
		ids := s.byUUID.appendIDs(buf[:0], uuid)
		slices.Sort(ids)
		for _, id := range ids {
			rec, held := s.vms[id]
			if !held || slices.ContainsFunc(found, func(p placedVM) bool { return p.VM.Ref.ID == id }) {
				continue // a VM moving between datacenters: the first placed counts
			}
			p := placedVM{Placement: backends.Placement{VM: s.placed(rec)}}
			if p.VM.Ref.Datacenter == "" {
				continue
			}
			if a, complete := s.tagAncestries(&p.VM); complete {
				p.ancestries = a
			}
			found = append(found, p)
		}
	}
	// By ID, as one state lists them.
	slices.SortStableFunc(found, func(a, b placedVM) int { return cmp.Compare(a.VM.Ref.ID, b.VM.Ref.ID) })
	return found, true
}
