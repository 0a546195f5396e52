package vsphere

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// tagTTL bounds how long a tag's or category's name is served from memory.
const tagTTL = 10 * time.Minute

// Tags implements backends.Backend. With the inventory, the walk is done
// in memory over tags read in bulk; a category not found there is looked
// for again in vCenter itself, so a tag just attached is seen at once.
func (b *Backend) Tags(ctx context.Context, vm *backends.VM, categories []string) (_ map[string]string, err error) {
	defer sortFailure("vsphere.Tags", &err)
	if err := b.sessions.open(); err != nil {
		return nil, err
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
	vc, err := b.direct(ctx, 2)
	if err != nil {
		return nil, err
	}
	s, err := retrieveSpec(ctx, vc, ancestrySpec(tagRoots(vm)))
	if isNotFound(err) {
		return nil, fmt.Errorf("vm %s: %w", vm.Ref.ID, backends.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	// What vCenter holds of them, complete or not: the ancestries are
	// walked as far as they go.
	ancestries, _ := s.tagAncestries(vm)
	all := slices.Concat(ancestries...)
	slices.SortFunc(all, compareRefs)
	all = slices.Compact(all)
	attached, err := b.attachedTags(ctx, all)
	if err != nil {
		return nil, err
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
	refs := make([]mo.Reference, len(objs))
	for i := range objs {
		refs[i] = objs[i]
	}
	var lists []tags.AttachedTags
	var m *tags.Manager
	for attempt := 0; ; attempt++ {
		rc, err := b.sessions.restClient(ctx)
		if err != nil {
			return nil, err
		}
		m = tags.NewManager(rc)
		if lists, err = m.ListAttachedTagsOnObjects(ctx, refs); err == nil {
			break
		}
		if attempt > 0 || !rest.IsStatusError(err, http.StatusUnauthorized) {
			return nil, fmt.Errorf("list attached tags: %w", err)
		}
		b.sessions.restUnauthorized() // logged in again once
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
			t, err := b.name(ctx, m, id, false)
			if err != nil {
				return nil, err
			}
			cat, err := b.name(ctx, m, t.category, true)
			if err != nil {
				return nil, err
			}
			out[ref] = append(out[ref], namedTag{name: t.name, category: cat.name})
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
// seconds across a WAN, a round trip per name. After a failure, or once
// ctx ends, no more reads start; those started go on under ctx (not the
// group's) and the first error is returned.
func (b *Backend) readNames(ctx context.Context, m *tags.Manager, ids []string) error {
	read := func(ids []string, category bool) error {
		g, failed := errgroup.WithContext(ctx)
		g.SetLimit(nameReads)
		var started []string
		for _, id := range ids {
			if _, ok := b.names.Get(id); ok || id == "" || slices.Contains(started, id) {
				continue
			}
			if failed.Err() != nil {
				// A read's error, else ctx ended before every one was started.
				return cmp.Or(g.Wait(), ctx.Err())
			}
			started = append(started, id)
			g.Go(func() error {
				_, err := b.name(ctx, m, id, category)
				return err
			})
		}
		return g.Wait()
	}
	if err := read(ids, false); err != nil {
		return err
	}
	var cats []string
	for _, id := range ids {
		if v, ok := b.names.Get(id); ok {
			cats = append(cats, v.(tagName).category)
		}
	}
	return read(cats, true)
}

// name is names' entry for the tag id, or the category id, read when
// absent or expired.
func (b *Backend) name(ctx context.Context, m *tags.Manager, id string, category bool) (tagName, error) {
	if v, ok := b.names.Get(id); ok {
		return v.(tagName), nil
	}
	var n tagName
	if category {
		got, err := m.GetCategory(ctx, id)
		if err != nil {
			return tagName{}, fmt.Errorf("category %s: %w", id, err)
		}
		n = tagName{name: got.Name}
	} else {
		got, err := m.GetTag(ctx, id)
		if err != nil {
			return tagName{}, fmt.Errorf("tag %s: %w", id, err)
		}
		n = tagName{name: got.Name, category: got.CategoryID}
	}
	b.names.Set(id, n, tagTTL)
	return n, nil
}

// tagBatch bounds the objects of one list-attached-tags call.
const tagBatch = 1000

// attachedTagCache holds the tags attached to every non-VM entity of the
// inventory (hosts, clusters, folders, datacenters), read in bulk and
// re-read in the background once older than refresh.
type attachedTagCache struct {
	refresh time.Duration

	mu         sync.Mutex
	snap       *tagSnapshot
	refreshing bool // a background refresh is under way

	loadMu sync.Mutex // one bulk load at a time
}

// tagSnapshot is immutable once published.
type tagSnapshot struct {
	// attached has an entry, possibly empty, for every object read.
	attached map[types.ManagedObjectReference][]namedTag
	loaded   time.Time
}

func (c *attachedTagCache) get() *tagSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap
}

// merge records fresh tags of objs (read directly) into the snapshot.
func (c *attachedTagCache) merge(objs []types.ManagedObjectReference, attached map[types.ManagedObjectReference][]namedTag) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap == nil {
		return
	}
	next := &tagSnapshot{attached: maps.Clone(c.snap.attached), loaded: c.snap.loaded}
	for _, r := range objs {
		next.attached[r] = attached[r]
	}
	c.snap = next
}

// cachedTags answers Tags from the inventory and the tag cache; ok is
// false when they cannot place the VM, or some category was not found
// (the caller then asks vCenter).
func (b *Backend) cachedTags(ctx context.Context, vm *backends.VM, categories []string) (map[string]string, bool) {
	ancestries, ok := b.inv.tagAncestries(vm)
	if !ok {
		return nil, false
	}
	snap := b.bulkTags.get()
	if !covers(snap, ancestries) {
		var err error
		if snap, err = b.loadTags(ctx, snap); err != nil {
			klog.FromContext(ctx).V(2).Info("Bulk tag read failed; reading this VM's tags directly", "vcenter", b.sessions.opts.Config.Name, "err", err)
			return nil, false
		}
		if !covers(snap, ancestries) {
			return nil, false
		}
	} else if time.Since(snap.loaded) > b.bulkTags.refresh {
		b.refreshTagsInBackground() //nolint:contextcheck // the refresh outlives the lookup that noticed the age: it ends when the backend stops
	}
	out := firstCompleteAncestry(ancestries, snap.attached, categories)
	if len(out) < len(categories) {
		return nil, false
	}
	return out, true
}

// covers reports whether snap holds the tags of every object of the
// ancestries.
func covers(snap *tagSnapshot, ancestries [][]types.ManagedObjectReference) bool {
	if snap == nil {
		return false
	}
	for _, a := range ancestries {
		for _, r := range a {
			if _, ok := snap.attached[r]; !ok {
				return false
			}
		}
	}
	return true
}

// loadTags reads the tags of every inventory entity, unless someone else
// did since seen was taken.
func (b *Backend) loadTags(ctx context.Context, seen *tagSnapshot) (*tagSnapshot, error) {
	c := b.bulkTags
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	if cur := c.get(); cur != seen {
		return cur, nil
	}
	refs, ok := b.inv.entityRefs()
	if !ok {
		return nil, fmt.Errorf("inventory out of service")
	}
	next := &tagSnapshot{attached: make(map[types.ManagedObjectReference][]namedTag, len(refs)), loaded: time.Now()}
	for start := 0; start < len(refs); start += tagBatch {
		batch := refs[start:min(start+tagBatch, len(refs))]
		attached, err := b.attachedTags(ctx, batch)
		if err != nil {
			return nil, err
		}
		for _, r := range batch {
			next.attached[r] = attached[r]
		}
	}
	c.mu.Lock()
	c.snap = next
	c.mu.Unlock()
	return next, nil
}

// refreshTagsInBackground re-reads the tag cache once, unless the tags
// held are fresh, off the lookup's path (the backend's work: Close ends
// and waits for it); lookups keep the current snapshot meanwhile. It is
// also called as soon as an inventory load is published: the first
// Node's lookup finds the tags read instead of reading them itself
// (seconds across a WAN, one vCenter after another as their first Nodes
// come up), and every vCenter reads its own as its inventory loads.
func (b *Backend) refreshTagsInBackground() {
	c := b.bulkTags
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refreshing || c.snap != nil && time.Since(c.snap.loaded) <= c.refresh {
		return
	}
	seen := c.snap
	c.refreshing = b.work.spawn(func() {
		ctx, cancel := context.WithTimeout(b.work.ctx, b.sessions.requestTimeout())
		defer cancel()
		if _, err := b.loadTags(ctx, seen); err != nil && b.work.ctx.Err() == nil {
			b.sessions.log.Info("Refreshing the tag cache failed; keeping the last one", "err", err)
		}
		c.mu.Lock()
		c.refreshing = false
		c.mu.Unlock()
	})
}
