package nodes

import (
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// vcenterTransitions is the nodes owner's one record of each vCenter's
// health at its last tick: what it tells transitions from, for its
// VCenterDown and VCenterUp Events and its re-queue of uninitialized
// Nodes when a vCenter is back. Only the owner's loop uses it.
type vcenterTransitions struct {
	last map[string]lastHealth
}

// lastHealth is a vCenter's health at the last tick.
type lastHealth struct {
	// healthy: reachable and its breaker closed (VCenterHealth.Healthy).
	healthy bool
	// up is its last known connection state, up or down; known false
	// until the first. A vCenter still connecting keeps it.
	up, known bool
}

// vcenterChange is a vCenter's health now and how it changed since the
// last tick.
type vcenterChange struct {
	health discovery.VCenterHealth
	// down: its connection went down, or is down at its first tick; up:
	// it came back.
	down, up bool
	// recovered: healthy now, unhealthy (known down or behind an open
	// breaker) at the last tick. A first sight is no recovery.
	recovered bool
}

// next records health as the last and returns each configured vCenter's
// change; a vCenter no longer configured is forgotten.
func (t *vcenterTransitions) next(health []discovery.VCenterHealth) []vcenterChange {
	out := make([]vcenterChange, 0, len(health))
	now := make(map[string]lastHealth, len(health))
	for _, h := range health {
		was, seen := t.last[h.Name]
		c, is := vcenterChange{health: h}, was
		is.healthy = h.Healthy()
		c.recovered = seen && !was.healthy && is.healthy
		// A vCenter still connecting keeps its last known state.
		if st := h.Reachability.State; st == backends.ConnUp || st == backends.ConnDown {
			up := st == backends.ConnUp
			is.up, is.known = up, true
			c.down = !up && (!was.known || was.up)
			c.up = up && was.known && !was.up
		}
		now[h.Name] = is
		out = append(out, c)
	}
	t.last = now
	return out
}
