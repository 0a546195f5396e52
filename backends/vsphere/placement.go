package vsphere

import (
	"cmp"
	"slices"

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
	vms, ancestries, ok := b.inv.placement(uuid)
	if !ok {
		return nil, false
	}
	var snap *tagSnapshot
	if b.bulkTags != nil {
		snap = b.bulkTags.get()
	}
	out := make([]backends.Placement, len(vms))
	for i := range vms {
		out[i] = backends.Placement{VM: vms[i]}
		var order []types.ManagedObjectReference
		for _, a := range ancestries[i] {
			order = append(order, a...)
		}
		if len(categories) == 0 {
			out[i].Tags, out[i].TagsKnown = map[string]string{}, true
		} else if ancestries[i] != nil && covers(snap, order) {
			out[i].Tags, out[i].TagsKnown = firstCompleteAncestry(ancestries[i], snap.attached, categories), true
		}
	}
	return out, true
}

// placement lists the VMs of BIOS UUID uuid held while in service, each
// placed in its datacenter, with its tag ancestries (nil when incomplete).
// VMs whose datacenter it cannot place are left out.
func (inv *inventory) placement(uuid string) ([]backends.VM, [][][]types.ManagedObjectReference, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	s := inv.inService()
	if s == nil {
		return nil, nil, false
	}
	var vms []backends.VM
	var ancestries [][][]types.ManagedObjectReference
	for _, id := range s.byUUID[uuid] {
		vm, ok := s.vm(id)
		if !ok {
			continue
		}
		a, complete := s.tagAncestries(&vm)
		if !complete {
			a = nil
		}
		vms = append(vms, vm)
		ancestries = append(ancestries, a)
	}
	idx := make([]int, len(vms))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(x, y int) int { return cmp.Compare(vms[x].Ref.ID, vms[y].Ref.ID) })
	sortedVMs := make([]backends.VM, len(vms))
	sortedAnc := make([][][]types.ManagedObjectReference, len(vms))
	for i, j := range idx {
		sortedVMs[i], sortedAnc[i] = vms[j], ancestries[j]
	}
	return sortedVMs, sortedAnc, true
}
