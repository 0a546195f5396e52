package vsphere

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

var (
	_ backends.Backend             = (*Backend)(nil)
	_ backends.CredentialRefresher = (*Backend)(nil)
	_ backends.DatacenterScope     = (*Backend)(nil)
	_ backends.ConnectReporter     = (*Backend)(nil)
)

// tagTTL bounds how long a tag's or category's name is served from memory.
const tagTTL = 10 * time.Minute

// Backend talks to one vCenter.
type Backend struct {
	sessions *sessions
	// budget paces the calls sent to vCenter directly (see budget).
	budget *budget
	// names remembers tag and category names by ID for tagTTL, for every
	// read of attached tags (direct, and the bulk cache's loads): a tag's
	// ID -> tagName{name, its category's ID}, a category's ID ->
	// tagName{name}. vSphere's tag and category IDs never collide (urn:
	// vmomi:InventoryServiceTag:… and …Category:…).
	names *cache.Expiring

	// inv and bulkTags are set when Options.Inventory is: lookups are
	// answered from memory while the inventory is in service.
	inv      *inventory
	bulkTags *attachedTagCache
	// hostGroups: the vCenter's zones come from DRS host groups
	// (config.VCenter.ZoneHostGroups), so reads of a VM read its
	// cluster's configurationEx too; without them, none is read.
	hostGroups bool
	// stopped, closed once by Close, ends the background work (watch, tag
	// refreshes); done is closed when the watch has returned, or by Close
	// when it never started (startOnce: one of Start and Close does).
	stopped   chan struct{}
	stopOnce  sync.Once
	startOnce sync.Once
	done      chan struct{}
}

// New returns a backend; it connects on first use, or on Start to start
// the inventory watch when Options.Inventory is set. It starts nothing.
func New(opts Options) *Backend {
	b := &Backend{
		sessions: newSessions(opts),
		budget:   newBudget(opts.Config.Name, opts.Config.RequestsPerSecond, opts.Config.RequestBurst),
		names:    cache.NewExpiring(),
		done:     make(chan struct{}),
		stopped:  make(chan struct{}),

		hostGroups: opts.Config.ZoneHostGroups != nil,
	}
	log := klog.Background().WithValues("vcenter", opts.Config.Name)
	if c := opts.Config; c.InsecureFlag && (len(c.Thumbprints) > 0 || c.CAFile != "") {
		log.Info("insecureFlag is overridden: the vCenter's certificate is verified against its thumbprint or caFile")
	}
	if !opts.Inventory {
		return b
	}
	heartbeat := opts.Heartbeat
	if heartbeat <= 0 {
		heartbeat = DefaultHeartbeat
	}
	refresh := opts.TagRefresh
	if refresh <= 0 {
		refresh = DefaultTagRefresh
	}
	b.inv = newInventory(b.sessions, heartbeat, opts.Config.DatacenterSpecs(), log)
	b.inv.hostGroups = b.hostGroups
	b.bulkTags = &attachedTagCache{refresh: refresh, stopped: b.stopped, log: log}
	b.inv.loaded = b.tagsWithInventory
	return b
}

// Start implements backends.Backend: the inventory's watch begins (until
// Close); without an inventory there is nothing to start. Only the first
// call counts, and none after Close.
func (b *Backend) Start() {
	if b.inv == nil {
		return
	}
	b.startOnce.Do(func() {
		b.inv.started.Store(true)
		go func() {
			defer close(b.done)
			b.inv.run(wait.ContextForChannel(b.stopped))
		}()
	})
}

// Inventory implements backends.Backend.
func (b *Backend) Inventory() (backends.InventoryStatus, bool) {
	if b.inv == nil {
		return backends.InventoryStatus{}, false
	}
	return b.inv.status(), true
}

// SetDatacenters implements backends.DatacenterScope: the inventory
// watches the datacenters specs name (every one when empty) from now on,
// starting a watch for each one added and dropping what it held of each
// one removed; the others' watches go on. Without an inventory there is
// nothing to scope: direct lookups search what each query names.
func (b *Backend) SetDatacenters(specs []config.DatacenterSpec) {
	if b.inv != nil {
		b.inv.setDatacenters(specs)
	}
}

// UUIDs implements backends.Backend.
func (b *Backend) UUIDs(unchangedSince uint64) ([]string, uint64, bool) {
	if b.inv == nil {
		return nil, 0, false
	}
	return b.inv.uuids(unchangedSince)
}

// Find implements backends.Backend.
func (b *Backend) Find(ctx context.Context, q backends.Query) (_ []backends.VM, err error) {
	const op = "vsphere.Find"
	defer sortFailure(&err)
	if err := b.sessions.open(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if b.inv != nil && q.AllowCached {
		b.inv.awaitFirstAttempt(ctx)
		if vms, ok := b.inv.find(q); ok {
			return vms, nil
		}
	}
	if err := b.budget.take(ctx, searches(q)); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	vc, err := b.sessions.client(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	refs, err := b.search(ctx, vc, q)
	if err != nil {
		return nil, fmt.Errorf("%s: by %s: %w", op, q.By, err)
	}
	if len(refs) == 0 {
		return nil, nil
	}
	vms, err := b.load(ctx, vc, refs)
	if isNotFound(err) {
		// A VM vanished between search and read: search again, once.
		if err = b.budget.take(ctx, searches(q)); err == nil {
			if refs, err = b.search(ctx, vc, q); err == nil {
				vms, err = b.load(ctx, vc, refs)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out := vms[:0]
	for _, vm := range vms {
		if backends.InDatacenters(q.Datacenters, &vm) {
			out = append(out, vm)
		}
	}
	slices.SortFunc(out, func(a, b backends.VM) int { return cmp.Compare(a.Ref.ID, b.Ref.ID) })
	return out, nil
}

// search returns the references matching q in the whole vCenter; the
// datacenter filter is applied on the VMs' real ancestry afterwards, which
// costs no extra call and does not trust the server to honour it.
func (b *Backend) search(ctx context.Context, vc *vim25.Client, q backends.Query) ([]types.ManagedObjectReference, error) {
	si := object.NewSearchIndex(vc)
	seen := map[types.ManagedObjectReference]bool{}
	var out []types.ManagedObjectReference
	add := func(refs []object.Reference) {
		for _, r := range refs {
			if ref := r.Reference(); ref.Type == "VirtualMachine" && !seen[ref] {
				seen[ref] = true
				out = append(out, ref)
			}
		}
	}
	for _, v := range q.Values {
		switch q.By {
		case backends.ByUUID:
			refs, err := si.FindAllByUuid(ctx, nil, strings.ToLower(v), true, types.NewBool(false))
			if err != nil {
				return nil, err
			}
			add(refs)
		case backends.ByIP:
			refs, err := si.FindAllByIp(ctx, nil, v, true)
			if err != nil {
				return nil, err
			}
			add(refs)
		case backends.ByDNSName:
			if v == "" {
				continue // names no VM (vcsim would match every VM without one)
			}
			// Lowercased as CPI sends it (vclib GetVMByDNSName); vCenter
			// compares case-insensitively, vcsim exactly. The datacenter
			// is left out for the same reason as above.
			refs, err := si.FindAllByDnsName(ctx, nil, backends.DNSNameKey(v), true)
			if err != nil {
				return nil, err
			}
			add(refs)
		case backends.ByName:
			refs, err := findByName(ctx, vc, v)
			if err != nil {
				return nil, err
			}
			add(refs)
		default:
			return nil, fmt.Errorf("unsupported query %v", q.By)
		}
	}
	return out, nil
}

// viewRetrieve reads props of every object of kind below root into dst
// (a pointer to a slice of mo types), through a container view destroyed
// afterwards.
func viewRetrieve(ctx context.Context, vc *vim25.Client, root types.ManagedObjectReference, kind string, props []string, dst any) error {
	v, err := view.NewManager(vc).CreateContainerView(ctx, root, []string{kind}, true)
	if err != nil {
		return err
	}
	defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }()
	return v.Retrieve(ctx, []string{kind}, props, dst)
}

func findByName(ctx context.Context, vc *vim25.Client, name string) ([]object.Reference, error) {
	// Names are compared here, exactly: property.Match would glob.
	var vms []mo.VirtualMachine
	if err := viewRetrieve(ctx, vc, vc.ServiceContent.RootFolder, "VirtualMachine", []string{"name"}, &vms); err != nil {
		return nil, err
	}
	var out []object.Reference
	for i := range vms {
		if vms[i].Name == name {
			out = append(out, vms[i].Self)
		}
	}
	return out, nil
}

// Get implements backends.Backend.
func (b *Backend) Get(ctx context.Context, ref backends.VMRef) (_ *backends.VM, err error) {
	const op = "vsphere.Get"
	defer sortFailure(&err)
	if err := b.sessions.open(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if b.inv != nil {
		b.inv.awaitFirstAttempt(ctx)
		// Held in memory: current. Not held: vCenter decides.
		if vm, ok := b.inv.get(ref); ok {
			return vm, nil
		}
	}
	if err := b.budget.take(ctx, 1); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	vc, err := b.sessions.client(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	vms, err := b.load(ctx, vc, []types.ManagedObjectReference{vmRef(ref.ID)})
	if isNotFound(err) {
		return nil, fmt.Errorf("%s: vm %s: %w", op, ref.ID, backends.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(vms) != 1 || vms[0].Ref != ref {
		// Gone from the datacenter we knew it in.
		return nil, fmt.Errorf("%s: vm %s in %s: %w", op, ref.ID, ref.Datacenter, backends.ErrNotFound)
	}
	return &vms[0], nil
}

// Datacenters implements backends.Backend.
func (b *Backend) Datacenters(ctx context.Context) (_ []config.Datacenter, err error) {
	const op = "vsphere.Datacenters"
	defer sortFailure(&err)
	if err := b.sessions.open(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if b.inv != nil {
		b.inv.awaitFirstAttempt(ctx)
		if dcs, ok := b.inv.datacenters(); ok {
			return dcs, nil
		}
	}
	if err := b.budget.take(ctx, 2); err != nil { // the list, then their folders
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	vc, err := b.sessions.client(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	dcs, err := readDatacenters(ctx, vc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return dcs, nil
}

// readDatacenters asks vCenter for every datacenter and its ancestors (two
// calls), read as the inventory holds them.
func readDatacenters(ctx context.Context, vc *vim25.Client) ([]config.Datacenter, error) {
	var list []mo.Datacenter
	if err := viewRetrieve(ctx, vc, vc.ServiceContent.RootFolder, "Datacenter", []string{"name"}, &list); err != nil {
		return nil, fmt.Errorf("list datacenters: %w", err)
	}
	if len(list) == 0 {
		return nil, nil
	}
	refs := make([]types.ManagedObjectReference, len(list))
	for i := range list {
		refs[i] = list[i].Self
	}
	s, err := retrieveWithAncestors(ctx, vc, refs)
	if err != nil {
		return nil, fmt.Errorf("read datacenters' folders: %w", err)
	}
	return s.datacenters(), nil
}

func vmRef(id string) types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "VirtualMachine", Value: id}
}

// load reads the VMs and their ancestors in one PropertyCollector call;
// a second, for the hosts and their ancestors, only when a VM runs on a
// host its resource pool's compute resource does not list (a template
// has no pool).
func (b *Backend) load(ctx context.Context, vc *vim25.Client, refs []types.ManagedObjectReference) ([]backends.VM, error) {
	spec := ancestrySpec(refs)
	if b.hostGroups {
		spec = withHostGroups(spec)
	}
	s, err := retrieveSpec(ctx, vc, spec)
	if err != nil {
		return nil, err
	}
	var hosts []types.ManagedObjectReference
	for _, ref := range refs {
		rec, ok := s.vms[ref.Value]
		if !ok || rec.vm.Host.get() == "" {
			continue
		}
		h := types.ManagedObjectReference{Type: "HostSystem", Value: rec.vm.Host.get()}
		if _, held := s.entities[h]; !held && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) > 0 {
		spec := ancestrySpec(hosts)
		if b.hostGroups {
			spec = withHostGroups(spec)
		}
		more, err := retrieveSpec(ctx, vc, spec)
		if err != nil && !isNotFound(err) { // a host gone since: the VM's host name is unknown
			return nil, err
		}
		if more != nil {
			for r, e := range more.entities {
				s.entities[r] = e
			}
			for r, g := range more.hostGroups {
				s.hostGroups[r] = g
			}
		}
	}
	out := make([]backends.VM, 0, len(refs))
	for _, ref := range refs {
		if rec, ok := s.vms[ref.Value]; ok {
			out = append(out, s.placed(rec))
		}
	}
	return out, nil
}

// retrieveWithAncestors reads objs and every ancestor of them, walking
// "parent" (and a VM's or vApp's "parentVApp") up to the root folder, and
// from a VM its resource pool's and from each compute resource its hosts,
// into an invState of their own, read as the inventory reads its watch's.
func retrieveWithAncestors(ctx context.Context, vc *vim25.Client, objs []types.ManagedObjectReference) (*invState, error) {
	return retrieveSpec(ctx, vc, ancestrySpec(objs))
}

// retrieveSpec reads what spec selects into an invState of its own, read
// as the inventory reads its watch's, in one call.
func retrieveSpec(ctx context.Context, vc *vim25.Client, spec types.PropertyFilterSpec) (*invState, error) {
	res, err := property.DefaultCollector(vc).RetrieveProperties(ctx, types.RetrieveProperties{SpecSet: []types.PropertyFilterSpec{spec}})
	if err != nil {
		return nil, err
	}
	updates := make([]types.ObjectUpdate, len(res.Returnval))
	for i, c := range res.Returnval {
		if updates[i], err = asUpdate(c); err != nil {
			return nil, err
		}
	}
	s := newInvState()
	s.apply(updates)
	return s, nil
}

// ancestrySpec asks for objs and their ancestors, with the properties the
// CCM reads. A TraversalSpec follows a top-level property only (not a
// VM's runtime.host): the VM's host is reached through its resource pool,
// up to the pool's compute resource, and down to that one's hosts (names
// and parents: a few per cluster), so that a VM is placed in one call.
func ancestrySpec(objs []types.ManagedObjectReference) types.PropertyFilterSpec {
	const up, vAppUp, hosts = "up", "vAppUp", "hosts"
	selectUp := []types.BaseSelectionSpec{
		&types.TraversalSpec{
			SelectionSpec: types.SelectionSpec{Name: up}, Type: "ManagedEntity", Path: "parent",
			SelectSet: []types.BaseSelectionSpec{&types.SelectionSpec{Name: up}, &types.SelectionSpec{Name: vAppUp}, &types.SelectionSpec{Name: hosts}},
		},
		// A vApp nested in another has no parent but a parentVApp.
		&types.TraversalSpec{
			SelectionSpec: types.SelectionSpec{Name: vAppUp}, Type: "VirtualApp", Path: "parentVApp",
			SelectSet: []types.BaseSelectionSpec{&types.SelectionSpec{Name: up}, &types.SelectionSpec{Name: vAppUp}, &types.SelectionSpec{Name: hosts}},
		},
		&types.TraversalSpec{SelectionSpec: types.SelectionSpec{Name: hosts}, Type: "ComputeResource", Path: "host"},
		&types.TraversalSpec{
			Type: "VirtualMachine", Path: "parentVApp",
			SelectSet: []types.BaseSelectionSpec{&types.SelectionSpec{Name: up}, &types.SelectionSpec{Name: vAppUp}},
		},
		&types.TraversalSpec{
			Type: "VirtualMachine", Path: "resourcePool",
			SelectSet: []types.BaseSelectionSpec{&types.SelectionSpec{Name: up}, &types.SelectionSpec{Name: vAppUp}},
		},
	}
	spec := types.PropertyFilterSpec{
		PropSet: []types.PropertySpec{
			{Type: "ManagedEntity", PathSet: []string{"name", "parent"}},
			{Type: "VirtualApp", PathSet: []string{"parentVApp"}},
			{Type: "VirtualMachine", PathSet: vmProperties},
		},
	}
	for _, o := range objs {
		spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{Obj: o, SelectSet: selectUp})
	}
	return spec
}

// Tags implements backends.Backend. With the inventory, the walk is done
// in memory over tags read in bulk; a category not found there is looked
// for again in vCenter itself, so a tag just attached is seen at once.
func (b *Backend) Tags(ctx context.Context, vm *backends.VM, categories []string) (_ map[string]string, err error) {
	const op = "vsphere.Tags"
	defer sortFailure(&err)
	if err := b.sessions.open(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(categories) == 0 {
		return map[string]string{}, nil
	}
	if b.inv != nil {
		b.inv.awaitFirstAttempt(ctx)
		if out, ok := b.cachedTags(ctx, vm, categories); ok {
			return out, nil
		}
	}
	// The ancestries, then the tags on them (their names are cached).
	if err := b.budget.take(ctx, 2); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	vc, err := b.sessions.client(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	s, err := retrieveWithAncestors(ctx, vc, tagRoots(vm))
	if isNotFound(err) {
		return nil, fmt.Errorf("%s: vm %s: %w", op, vm.Ref.ID, backends.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	// What vCenter holds of them, complete or not: the ancestries are
	// walked as far as they go.
	ancestries, _ := s.tagAncestries(vm)
	var all []types.ManagedObjectReference
	for _, a := range ancestries {
		for _, r := range a {
			if !slices.Contains(all, r) {
				all = append(all, r)
			}
		}
	}
	attached, err := b.attachedTags(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if b.bulkTags != nil {
		b.bulkTags.merge(all, attached)
	}
	return firstCompleteAncestry(ancestries, attached, categories), nil
}

// tagRoots are where CPI looks for a VM's zone and region, in its order
// (pkg/cloudprovider/vsphere/zones.go): the host running it, its resource
// pool, the VM itself; each with its ancestors.
func tagRoots(vm *backends.VM) []types.ManagedObjectReference {
	roots := make([]types.ManagedObjectReference, 0, 3) // one allocation: a drift check per Node per pass makes them
	if vm.Host != "" {
		roots = append(roots, types.ManagedObjectReference{Type: "HostSystem", Value: vm.Host})
	}
	if vm.ResourcePool != "" {
		roots = append(roots, types.ManagedObjectReference{Type: vm.ResourcePoolType, Value: vm.ResourcePool})
	}
	return append(roots, vmRef(vm.Ref.ID))
}

// firstCompleteAncestry is CPI's choice among the ancestries (nearest
// first each): the first whose walk (cpiWalk) finds a tag of every
// category; when none does, the last ancestry's partial answer (the caller
// says which category is missing, as CPI fails then). Tags of one ancestry
// are never mixed with another's.
func firstCompleteAncestry(ancestries [][]types.ManagedObjectReference, attached map[types.ManagedObjectReference][]namedTag, categories []string) map[string]string {
	var out map[string]string
	for _, a := range ancestries {
		if out = cpiWalk(a, attached, categories); len(out) == len(categories) {
			return out
		}
	}
	if out == nil {
		out = map[string]string{}
	}
	return out
}

// cpiWalk is CPI's walk up one ancestry (connectionmanager's
// LookupZoneByMoref), kept on purpose so that a Node gets the zone CPI
// gives its neighbours: from the nearest object up, each tag of a
// category sets that category, overwriting what a nearer object set,
// until every category is set. So with a zone on a host and on its
// cluster and the region on the datacenter, the cluster's zone wins (the
// region is found above both); with the region on the host too, the
// host's. Several tags of one category on one object: the first by name
// (CPI takes them in the order vCenter lists them, which no API fixes).
func cpiWalk(order []types.ManagedObjectReference, attached map[types.ManagedObjectReference][]namedTag, categories []string) map[string]string {
	out := make(map[string]string, len(categories))
	for _, r := range order {
		tags := attached[r]
		for _, cat := range categories {
			first, found := "", false
			for _, t := range tags {
				if t.category == cat && (!found || t.name < first) {
					first, found = t.name, true
				}
			}
			if found {
				out[cat] = first
			}
		}
		if len(out) == len(categories) {
			return out
		}
	}
	return out
}

type namedTag struct{ name, category string }

// attachedTags lists the tags on objs in one REST call, resolving tag and
// category names through the caches.
func (b *Backend) attachedTags(ctx context.Context, objs []types.ManagedObjectReference) (map[types.ManagedObjectReference][]namedTag, error) {
	var lists []tags.AttachedTags
	var m *tags.Manager
	for attempt := 0; ; attempt++ {
		rc, err := b.sessions.restClient(ctx)
		if err != nil {
			return nil, err
		}
		m = tags.NewManager(rc)
		ids := make([]mo.Reference, len(objs))
		for i := range objs {
			ids[i] = objs[i]
		}
		lists, err = m.ListAttachedTagsOnObjects(ctx, ids)
		if err != nil && rest.IsStatusError(err, http.StatusUnauthorized) && attempt == 0 {
			b.sessions.restUnauthorized()
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list attached tags: %w", err)
		}
		break
	}
	var ids []string
	for _, l := range lists {
		ids = append(ids, l.TagIDs...)
	}
	if err := b.readNames(ctx, m, ids); err != nil {
		return nil, err
	}
	out := map[types.ManagedObjectReference][]namedTag{}
	for _, l := range lists {
		ref := l.ObjectID.Reference()
		for _, id := range l.TagIDs {
			t, err := b.tag(ctx, m, id)
			if err != nil {
				return nil, err
			}
			out[ref] = append(out[ref], t)
		}
	}
	return out, nil
}

// tagName is what names remembers of a tag or a category.
type tagName struct {
	name     string
	category string // a tag's category ID; "" for a category
}

// nameReads bounds the tag and category names read at once.
const nameReads = 8

// readNames reads the names of the tags ids that names does not hold,
// then of their categories it does not hold, nameReads at a time: one
// after another, a bulk read of a vCenter with a few dozen tags took
// seconds across a WAN, a round trip per name.
func (b *Backend) readNames(ctx context.Context, m *tags.Manager, ids []string) error {
	missing := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			if _, ok := b.names.Get(id); !ok && id != "" && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
		return out
	}
	if err := parallel(ctx, missing(ids), func(id string) error {
		_, err := b.name(id, func() (tagName, error) {
			got, err := m.GetTag(ctx, id)
			if err != nil {
				return tagName{}, fmt.Errorf("tag %s: %w", id, err)
			}
			return tagName{name: got.Name, category: got.CategoryID}, nil
		})
		return err
	}); err != nil {
		return err
	}
	var cats []string
	for _, id := range ids {
		if v, ok := b.names.Get(id); ok {
			cats = append(cats, v.(tagName).category)
		}
	}
	return parallel(ctx, missing(cats), func(id string) error {
		_, err := b.name(id, func() (tagName, error) {
			got, err := m.GetCategory(ctx, id)
			if err != nil {
				return tagName{}, fmt.Errorf("category %s: %w", id, err)
			}
			return tagName{name: got.Name}, nil
		})
		return err
	})
}

// parallel runs fn on each of ids, nameReads at a time, and returns the
// first error; after one, or once ctx ends, it starts no more.
func parallel(ctx context.Context, ids []string, fn func(id string) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	slots := make(chan struct{}, nameReads)
	for _, id := range ids {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		if err := ctx.Err(); err != nil {
			mu.Lock()
			first = err
			mu.Unlock()
			break
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := fn(id); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// tag names the tag id and its category, through names.
func (b *Backend) tag(ctx context.Context, m *tags.Manager, id string) (namedTag, error) {
	t, err := b.name(id, func() (tagName, error) {
		got, err := m.GetTag(ctx, id)
		if err != nil {
			return tagName{}, fmt.Errorf("tag %s: %w", id, err)
		}
		return tagName{name: got.Name, category: got.CategoryID}, nil
	})
	if err != nil {
		return namedTag{}, err
	}
	cat, err := b.name(t.category, func() (tagName, error) {
		got, err := m.GetCategory(ctx, t.category)
		if err != nil {
			return tagName{}, fmt.Errorf("category %s: %w", t.category, err)
		}
		return tagName{name: got.Name}, nil
	})
	if err != nil {
		return namedTag{}, err
	}
	return namedTag{name: t.name, category: cat.name}, nil
}

// name is names' entry for id, read when absent or expired.
func (b *Backend) name(id string, read func() (tagName, error)) (tagName, error) {
	if v, ok := b.names.Get(id); ok {
		return v.(tagName), nil
	}
	n, err := read()
	if err != nil {
		return tagName{}, err
	}
	b.names.Set(id, n, tagTTL)
	return n, nil
}

// RefreshCredentials implements backends.CredentialRefresher.
func (b *Backend) RefreshCredentials(ctx context.Context, grace time.Duration) (bool, error) {
	const op = "vsphere.RefreshCredentials"
	if err := b.sessions.open(); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	rotated, err := b.sessions.refresh(ctx, grace)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	return rotated, nil
}

// RefusedCredentials implements backends.CredentialReporter. Never a value.
func (b *Backend) RefusedCredentials() []backends.RefusedCredentials {
	var out []backends.RefusedCredentials
	for _, r := range b.sessions.chain.Refused() {
		out = append(out, backends.RefusedCredentials{Source: r.Source, Refusals: r.Refusals, Last: r.Last, Retry: r.Retry})
	}
	return out
}

// Close implements backends.Backend: from its start every call fails with
// ErrClosed and nothing connects again; it returns once the watch, the
// background tag refresh and the sessions' own goroutines have ended and
// the sessions are logged out, or when ctx ends.
func (b *Backend) Close(ctx context.Context) error {
	const op = "vsphere.Close"
	b.sessions.shut()
	b.stopOnce.Do(func() { close(b.stopped) })
	b.startOnce.Do(func() { close(b.done) }) // never started: nothing to wait for, nothing to start
	select {
	case <-b.done:
	case <-ctx.Done():
	}
	if b.bulkTags != nil {
		b.bulkTags.wait(ctx)
	}
	if err := b.sessions.close(ctx); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// isNotFound reports vCenter's "no such object" fault.
func isNotFound(err error) bool {
	return err != nil && fault.Is(err, &types.ManagedObjectNotFound{})
}

// Session reports the current session; ok is false without one.
func (b *Backend) Session() (s backends.Session, ok bool) {
	b.sessions.mu.Lock()
	defer b.sessions.mu.Unlock()
	if b.sessions.cur == nil {
		return backends.Session{}, false
	}
	return backends.Session{LoggedIn: b.sessions.cur.loggedIn, Credentials: b.sessions.cur.served.Source}, true
}

// InstanceUUID implements backends.Backend: the current session's
// ServiceContent.About.InstanceUuid.
func (b *Backend) InstanceUUID() string {
	b.sessions.mu.Lock()
	defer b.sessions.mu.Unlock()
	if b.sessions.cur == nil || b.sessions.cur.vim == nil || b.sessions.cur.vim.ServiceContent.About.InstanceUuid == "" {
		return ""
	}
	return strings.ToLower(b.sessions.cur.vim.ServiceContent.About.InstanceUuid)
}

// Reachability implements backends.Backend.
func (b *Backend) Reachability() backends.Reachability { return b.sessions.reachability() }

// ConnectProgress implements backends.ConnectReporter.
func (b *Backend) ConnectProgress() backends.ConnectProgress { return b.sessions.connectProgress() }

// Probe implements backends.Backend: a login when there is no session,
// then one cheap request.
func (b *Backend) Probe(ctx context.Context) (err error) {
	const op = "vsphere.Probe"
	defer sortFailure(&err)
	if err := b.budget.take(ctx, 1); err != nil {
		// Refused before anything was sent: nothing learned of vCenter.
		return fmt.Errorf("%s: %w", op, err)
	}
	vc, err := b.sessions.client(ctx)
	if err == nil {
		_, err = methods.GetCurrentTime(ctx, vc)
	}
	// No answer within ctx's deadline is Down too: that is what a probe
	// asks (a login's own failure is recorded by the login).
	b.sessions.recordReachability(ctx, "probe", err)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}
