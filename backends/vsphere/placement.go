package vsphere

import (
	"cmp"
	"slices"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// Placement implements backends.Backend from the inventory and the bulk tag
// cache only: no request to vCenter, and no bulk tag read started (the
// cache is loaded by lookups and refreshed in the background).
func (b *Backend) Placement(uuid string, categories []string) ([]backends.Placement, bool) {
	if b.inv == nil {
		return nil, false
	}
	out, ancestries, ok := b.inv.placement(uuid)
	if !ok {
		return nil, false
	}
	var snap *tagSnapshot
	if b.bulkTags != nil {
		snap = b.bulkTags.get()
	}
	for i := range out {
		switch {
		case len(categories) == 0:
			out[i].Tags, out[i].TagsKnown = map[string]string{}, true
		case ancestries[i] != nil && covers(snap, ancestries[i]):
			out[i].Tags, out[i].TagsKnown = firstCompleteAncestry(ancestries[i], snap.attached, categories), true
		}
	}
	return out, true
}

// placement lists, by ID, the VMs of BIOS UUID uuid held while in
// service for every datacenter configured, each placed (see
// invState.placed), with its tag ancestries (nil when incomplete). VMs
// whose datacenter it cannot place are left out.
func (inv *inventory) placement(uuid string) ([]backends.Placement, [][][]types.ManagedObjectReference, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	held, ok := inv.scopeLocked(inv.specs, time.Now())
	if !ok {
		return nil, nil, false
	}
	type placed struct {
		backends.Placement
		ancestries [][]types.ManagedObjectReference
	}
	var found []placed
	var buf [2]string
	for _, s := range held {
		ids := s.byUUID.appendIDs(buf[:0], uuid)
		slices.Sort(ids)
		for _, id := range ids {
			rec, held := s.vms[id]
			if !held || slices.ContainsFunc(found, func(p placed) bool { return p.VM.Ref.ID == id }) {
				continue // a VM moving between datacenters: the first placed counts
			}
			p := placed{Placement: backends.Placement{VM: s.placed(rec)}}
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
	slices.SortStableFunc(found, func(a, b placed) int { return cmp.Compare(a.VM.Ref.ID, b.VM.Ref.ID) })
	var out []backends.Placement
	var ancestries [][][]types.ManagedObjectReference
	for _, p := range found {
		out, ancestries = append(out, p.Placement), append(ancestries, p.ancestries)
	}
	return out, ancestries, true
}
