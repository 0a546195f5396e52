package vsphere

import (
	"time"

	"github.com/vmware/govmomi/vim25/types"
)

// holding is the state of the datacenter watch holding VM id, nil when
// none does; the caller holds inv.mu.
func (inv *inventory) holding(id string) *invState {
	for _, w := range inv.views {
		if w.state != nil {
			if _, ok := w.state.vms[id]; ok {
				return w.state
			}
		}
	}
	return nil
}

// loadedInventory is an inventory in service for an hour holding s, a
// whole vCenter: its list and every datacenter's state.
func loadedInventory(s *invState) *inventory {
	fresh := time.Now().Add(time.Hour)
	inv := &inventory{list: &watched{state: s, freshUntil: fresh}, views: map[types.ManagedObjectReference]*watched{}}
	for r := range s.entities {
		if r.Type == "Datacenter" {
			inv.views[r] = &watched{dc: r, state: s, freshUntil: fresh}
		}
	}
	return inv
}
