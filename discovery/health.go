package discovery

import (
	"github.com/sony/gobreaker/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// VCenterHealth is what a Discoverer knows of one vCenter's health.
type VCenterHealth struct {
	Name         string
	Reachability backends.Reachability
	BreakerOpen  bool   // open or half-open: lookups fail fast or probe
	Breaker      string // its state: closed, half-open or open
	// Indexed says the duplicate index holds its UUIDs: a VM found
	// elsewhere is served while it cannot answer, and a twin it holds is
	// still seen. With its inventory off, such lookups fail while it
	// cannot answer, once it has answered since it was configured;
	// otherwise (its inventory never in service at a scan, or down since
	// the CCM started) the twin check is blind to it.
	Indexed bool
}

// Healthy reports whether lookups reach the vCenter normally.
func (h VCenterHealth) Healthy() bool {
	return h.Reachability.State != backends.ConnDown && !h.BreakerOpen
}

// Health lists the configured vCenters' health.
func (d *Discoverer) Health() []VCenterHealth {
	vcs := d.members.Load().vcs
	out := make([]VCenterHealth, len(vcs))
	for i, v := range vcs {
		breaker := v.Breaker()
		out[i] = VCenterHealth{
			Name: v.Name, Reachability: v.Backend.State().Reachability, Indexed: d.duplicates.holds(v.Backend),
			BreakerOpen: breaker != gobreaker.StateClosed, Breaker: breaker.String(),
		}
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
