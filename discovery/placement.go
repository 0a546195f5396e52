package discovery

import (
	"encoding/binary"
	"hash/fnv"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// Placed is where a VM is now as the inventories hold it, and its tags
// of the categories asked for (TagsKnown: see backends.Placement).
type Placed struct {
	Result
	Tags      map[string]string
	TagsKnown bool
}

// Placed answers from the vCenters' inventories alone, never asking
// vCenter, where the VM of BIOS UUID uuid (either byte order) is now:
// how Nodes follow their VMs without a request per Node. ok is true only
// when every configured vCenter answered from memory and exactly one VM
// was found in the configured datacenters, none outside them: a twin, a
// VM outside the datacenters served, or an inventory out of service
// concludes nothing. One VM seen through several entries of one vCenter
// (CPI's tenants) is one VM, attributed as a lookup attributes it.
func (d *Discoverer) Placed(uuid string, categories []string) (p *Placed, ok bool) {
	l, err := uuidLookup(uuid) // either byte order
	if err != nil {
		return nil, false
	}
	vcs := d.members.Load().vcs
	if len(vcs) == 0 {
		return nil, false
	}
	s := newSnapshot(vcs)
	answers := make([]answer, len(vcs))
	// By entry and VM: the placement whose tags go with a VM found.
	type at struct {
		vcenter string
		ref     backends.VMRef
	}
	tags := map[at]backends.Placement{}
	for i, v := range vcs {
		answers[i].vc = v
		for _, id := range l.q.Values {
			ps, ok := v.Backend.Placement(id, categories)
			if !ok {
				return nil, false
			}
			for _, p := range ps {
				answers[i].vms = append(answers[i].vms, p.VM)
				tags[at{v.Name, p.VM.Ref}] = p
			}
		}
	}
	t := tally(s, answers)
	if len(t.found) != 1 || len(t.outside) > 0 {
		return nil, false
	}
	found := t.found[0]
	pl := tags[at{found.VCenter, found.VM.Ref}]
	return &Placed{Result: *found, Tags: pl.Tags, TagsKnown: pl.TagsKnown}, true
}

// InventoryVersion changes whenever what Placed may answer could have:
// the vCenters configured (entries, servers, instances, datacenters) or
// any of their inventories (its updates, its being in service). Memory
// only. Tags refreshed without an inventory update do not change it.
func (d *Discoverer) InventoryVersion() uint64 {
	h := fnv.New64a()
	var buf [8]byte
	num := func(n uint64) {
		binary.LittleEndian.PutUint64(buf[:], n)
		_, _ = h.Write(buf[:])
	}
	str := func(s string) {
		num(uint64(len(s)))
		_, _ = h.Write([]byte(s))
	}
	for _, v := range d.members.Load().vcs {
		str(v.Name)
		str(v.Server)
		st := v.Backend.Status() // once per vCenter and pass: not a lookup's read
		str(st.InstanceUUID)
		for _, dc := range v.Datacenters {
			str(dc.String())
		}
		var state, updates uint64 // none, out of service, in service
		if inv := st.Inventory; inv != nil {
			state, updates = 1, inv.Updates
			if inv.InService {
				state = 2
			}
		}
		num(state)
		num(updates)
	}
	return h.Sum64()
}
