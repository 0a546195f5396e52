package cloud

import (
	"slices"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Issue 32 §1, the record: entries a and b of one server recorded as
// appliance X. Once any entry answers as another appliance, X is retired
// for the server, whatever the others answer or do not (down: unknown;
// still on X; not logged in yet after a restart), and no entry's record
// keeps X. It used to match X against b's unknown instance, retire
// nothing and keep X for b; which of X and Y the record then handed to
// discovery for the server was map order.
func TestHistoryEntriesOfOneServerAnotherAppliance(t *testing.T) {
	const x, y, z = "uuid-x", "uuid-y", "uuid-z"
	entry := func(name, instance string, dcs ...string) serving {
		return serving{VCenter: config.VCenter{Name: name, Server: "vc.example.com", Port: 443, Datacenters: dcs}, instance: instance}
	}
	retired := func(h *configHistory) []string {
		var out []string
		for _, r := range h.Retired {
			out = append(out, r.InstanceUUID)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		name  string
		after []serving // the entries once the address answers as Y
		// retired: the instances retired; served: what each entry's
		// record says.
		retired []string
		served  map[string]string
	}{
		{"b down", []serving{entry("a", y), entry("b", "")}, []string{x}, map[string]string{"a": y, "b": y}},
		{"a down", []serving{entry("a", ""), entry("b", y)}, []string{x}, map[string]string{"a": y, "b": y}},
		{"b still on X", []serving{entry("a", y), entry("b", x)}, []string{x, y}, map[string]string{"a": y, "b": x}},
		{"b down, datacenters of their own", []serving{entry("a", y, "dc0"), entry("b", "", "dc1")}, []string{x}, map[string]string{"a": y, "b": y}},
		{"b down, c on a third", []serving{entry("a", y), entry("b", ""), entry("c", z)}, []string{x, y, z}, map[string]string{"a": y, "b": "", "c": z}},
		{"both down", []serving{entry("a", ""), entry("b", "")}, nil, map[string]string{"a": x, "b": x}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			h := &configHistory{}
			var before []serving
			for _, e := range tc.after {
				before = append(before, entry(e.Name, x, e.Datacenters...))
			}
			h.update(before, now, time.Hour)
			// Twice: the first records what it sees (a third entry's
			// instance, say), the second judges the record against it.
			for range 2 {
				now = now.Add(time.Minute)
				h.update(tc.after, now, time.Hour)
			}
			if got := retired(h); !slices.Equal(got, tc.retired) {
				t.Errorf("retired instances %v; want %v (retired %+v)", got, tc.retired, h.Retired)
			}
			for name, want := range tc.served {
				if got := h.Served[name].InstanceUUID; got != want {
					t.Errorf("entry %s recorded as instance %q; want %q", name, got, want)
				}
			}
			// Discovery is handed every instance an entry records for
			// the server, never one entry's by chance.
			got := h.Instances()["vc.example.com:443"]
			var want []string
			for _, inst := range tc.served {
				if inst != "" && !slices.Contains(want, inst) {
					want = append(want, inst)
				}
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("instances handed to discovery %v; want %v", got, want)
			}
			// Every entry back, as Y: X stays retired, Y is served.
			back := slices.Clone(tc.after)
			for i := range back {
				back[i].instance = y
			}
			h.update(back, now.Add(time.Minute), time.Hour)
			if got := retired(h); !slices.Contains(got, x) || slices.Contains(got, y) {
				t.Errorf("every entry back as Y: retired instances %v; want X's, not Y's", got)
			}
		})
	}
}
