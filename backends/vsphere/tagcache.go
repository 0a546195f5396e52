package vsphere

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// tagBatch bounds the objects of one list-attached-tags call.
const tagBatch = 1000

// attachedTagCache holds the tags attached to every non-VM entity of the
// inventory (hosts, clusters, folders, datacenters), read in bulk and
// re-read in the background once older than refresh.
type attachedTagCache struct {
	refresh time.Duration
	log     klog.Logger

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
			c.log.Info("Refreshing the tag cache failed; keeping the last one", "err", err)
		}
		c.mu.Lock()
		c.refreshing = false
		c.mu.Unlock()
	})
}
