package discovery

import "github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery/vcenter"

// VCenterHealth is what a Discoverer knows of one configured vCenter: its
// member's Status, and what discovery adds to it.
type VCenterHealth struct {
	vcenter.Status
	// Indexed says the duplicate index holds its UUIDs: a VM found
	// elsewhere is served while it cannot answer, and a twin it holds is
	// still seen. With its inventory off, such lookups fail while it
	// cannot answer, once it has answered since it was configured;
	// otherwise (its inventory never in service at a scan, or down since
	// the CCM started) the twin check is blind to it.
	Indexed bool
	// Held are the Nodes its deletion policy holds back now (those asked
	// about lately: see holdsForget), by the policy now.
	Held HeldNodes
}

// Health lists the configured vCenters, in the config's order, from one
// snapshot of the members: memory only, never a call to vCenter.
func (d *Discoverer) Health() []VCenterHealth {
	vcs := d.members.Load().vcs
	held := d.holds.count(vcs)
	out := make([]VCenterHealth, len(vcs))
	for i, v := range vcs {
		out[i] = VCenterHealth{Status: v.Status(), Indexed: d.duplicates.holds(v.Backend), Held: held[i]}
	}
	return out
}

// Connected lists, once each time, the vCenters that refused a lookup as
// still connecting (ErrVCenterConnecting) and are up now: the lookups
// they failed are worth making again at once, as after an outage. A
// lookup refused after the vCenter came up (it began before) is listed
// at the next call.
func (d *Discoverer) Connected() []string {
	var out []string
	for _, v := range d.members.Load().vcs {
		if v.UpAfterRefusing() {
			out = append(out, v.Name)
		}
	}
	return out
}
