package nodes

import (
	"strings"
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery/vcenter"
)

// One record of each vCenter's last health gives both readers their
// transitions: the connection's down and up (Events; a vCenter still
// connecting keeps its last known state, and a first sight down is
// reported), and recovery to healthy (the re-queue; a first sight is no
// recovery, an open breaker is unhealthy, a vCenter removed is forgotten).
func TestVCenterTransitions(t *testing.T) {
	const (
		up, down, connecting = backends.ConnUp, backends.ConnDown, backends.ConnUnknown
	)
	h := func(state backends.ConnState, breakerOpen bool) discovery.VCenterHealth {
		return discovery.VCenterHealth{Status: vcenter.Status{Name: "vc1", Reachability: backends.Reachability{State: state}, BreakerOpen: breakerOpen}}
	}
	for _, tc := range []struct {
		name  string
		ticks []discovery.VCenterHealth
		want  []string // per tick: "", "down", "up", "recovered", "up recovered"
	}{
		{"first sight up: nothing", []discovery.VCenterHealth{h(up, false)}, []string{""}},
		{"first sight down: down", []discovery.VCenterHealth{h(down, false)}, []string{"down"}},
		{"down then up: up and recovered", []discovery.VCenterHealth{h(up, false), h(down, false), h(up, false)}, []string{"", "down", "up recovered"}},
		{"down twice: one down", []discovery.VCenterHealth{h(up, false), h(down, false), h(down, false)}, []string{"", "down", ""}},
		{"connecting keeps the last known state", []discovery.VCenterHealth{h(up, false), h(connecting, false), h(down, false), h(connecting, false), h(up, false)},
			[]string{"", "", "down", "recovered", "up"}},
		{"breaker open then closed: recovered, no Event", []discovery.VCenterHealth{h(up, false), h(up, true), h(up, false)}, []string{"", "", "recovered"}},
		{"connecting at first: neither", []discovery.VCenterHealth{h(connecting, false), h(up, false)}, []string{"", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr vcenterTransitions
			for i, health := range tc.ticks {
				changes := tr.next([]discovery.VCenterHealth{health})
				if len(changes) != 1 {
					t.Fatalf("tick %d: %d changes", i, len(changes))
				}
				if got := transitionOf(changes[0]); got != tc.want[i] {
					t.Errorf("tick %d (%v, breaker open %v): %q, want %q", i, health.Reachability.State, health.BreakerOpen, got, tc.want[i])
				}
			}
		})
	}
	// A vCenter removed from the config and added back unhealthy, then
	// healthy: the second tick is a first sight, no recovery.
	var tr vcenterTransitions
	tr.next([]discovery.VCenterHealth{h(down, false)})
	tr.next(nil)
	tr.next([]discovery.VCenterHealth{h(up, true)})
	if c := tr.next([]discovery.VCenterHealth{h(up, false)}); !c[0].recovered {
		t.Errorf("re-added, unhealthy then healthy: %s, want recovered", transitionOf(c[0]))
	}
	tr.next(nil)
	if c := tr.next([]discovery.VCenterHealth{h(up, false)}); transitionOf(c[0]) != "" {
		t.Errorf("removed while healthy, back healthy: %q, want nothing", transitionOf(c[0]))
	}
}

func transitionOf(c vcenterChange) string {
	var words []string
	if c.down {
		words = append(words, "down")
	}
	if c.up {
		words = append(words, "up")
	}
	if c.recovered {
		words = append(words, "recovered")
	}
	return strings.Join(words, " ")
}
