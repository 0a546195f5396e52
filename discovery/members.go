package discovery

import (
	"slices"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery/vcenter"
)

// Members is what lookups ask: the configured vCenter entries in config
// order, each a vcenter.Member (its backend, breaker, deadline and probe),
// and the record of the config's past (History) Exists judges with. It is
// immutable: the fleet builds one per config applied or record learnt
// (Next, WithHistory) and hands it over (Discoverer.Use); a lookup in
// flight finishes on the one it began with.
type Members struct {
	vcs []*vcenter.Member
	// retired are the places that left the config (History.Retired),
	// instances the instance UUIDs recorded by server (History.Instances);
	// unknown, when set, says why the record is not known: absence is
	// then an error.
	retired   []Retired
	instances map[string][]string
	unknown   string
	opts      vcenter.Options
}

// Next is m with the entries vcs, in their order. A vCenter whose name and
// backend are unchanged goes on as its member's successor (keeping its
// breaker while its settings are, and its probe); dropped are m's members
// that have none, for the caller to close once next is in use (closed,
// a member called by a lookup still on m starts no probe).
func (m *Members) Next(vcs []Target) (next *Members, dropped []*vcenter.Member) {
	for _, v := range vcs {
		missing := ""
		switch {
		case v.Server == "":
			// Without it every vCenter would be the same one.
			missing = "Server"
		case v.RequestTimeout <= 0:
			missing = "RequestTimeout"
		case v.ConsecutiveFailures == 0:
			missing = "ConsecutiveFailures"
		case v.OpenTimeout <= 0:
			missing = "OpenTimeout"
		}
		if missing != "" {
			panic("discovery: Target " + v.Name + " has no " + missing)
		}
	}
	kept := *m
	kept.vcs = make([]*vcenter.Member, 0, len(vcs))
	dropped = slices.Clone(m.vcs)
	for _, v := range vcs {
		i := slices.IndexFunc(dropped, func(o *vcenter.Member) bool { return o.Name == v.Name && o.Backend == v.Backend })
		if i < 0 {
			kept.vcs = append(kept.vcs, vcenter.New(v, m.opts))
			continue
		}
		kept.vcs = append(kept.vcs, dropped[i].Successor(v))
		dropped = slices.Delete(dropped, i, i+1) // its probe is its successor's
	}
	return &kept, dropped
}

// WithHistory is m with what is known of the config's past: h, unless
// unknown says why it is not known (yet). The caller keeps it growing: a
// place that left the config stays in it, written or not.
func (m *Members) WithHistory(h History, unknown string) *Members {
	next := *m
	next.retired = slices.Clone(h.Retired)
	next.instances = h.Instances()
	next.unknown = unknown
	return &next
}

// Close closes every member: their probes end, and are waited for.
func (m *Members) Close() {
	for _, v := range m.vcs {
		v.Close()
	}
}

// Members is the set lookups begin with now, for the caller to build the
// next one from.
func (d *Discoverer) Members() *Members { return d.members.Load() }

// Use makes m the set lookups begin with; those in flight finish on the
// one they began with.
func (d *Discoverer) Use(m *Members) { d.members.Store(m) }
