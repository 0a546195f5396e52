package config

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"
)

// NodeDeletion is a vCenter's deletion policy for the Nodes whose VMs it
// could hold (every Node of a vsphere:// providerID: any configured
// vCenter could hold any VM). The stricter of all vCenters' applies.
type NodeDeletion struct {
	// MinAbsence is how long a VM must have been confirmed absent, by
	// answers spanning at least that long, before its Node is reported
	// gone; an answer that finds it in between starts over. 0: at the
	// first confirmed absence.
	//
	// The default, DefaultMinAbsence (30s), costs a destroyed VM's Node
	// seconds, not minutes: the Node has already been NotReady for the
	// lifecycle controller's node-monitor-grace-period (40s) before it
	// is first asked about, and it is asked again every
	// node-monitor-period (5s), so at least six answers span the grace.
	// It outlasts the moments in which a VM that exists is in no vCenter's
	// answer: a cross-vCenter vMotion's switch-over, an SRM failover
	// registering it at the recovery site, an operator's unregister and
	// register again, which take seconds.
	MinAbsence time.Duration
	// Frozen: no Node is reported gone while a vCenter that could hold
	// its VM is frozen (a maintenance window, a DR drill); absence is an
	// error naming the freeze. FrozenBy is the key that froze it
	// ("vcenter.<name>.nodeDeletion" or "global.nodeDeletion").
	Frozen   bool
	FrozenBy string
}

// nodeDeletionSection is nodeDeletion as written: a mapping, or the
// scalar frozen, short for {frozen: true}.
type nodeDeletionSection struct {
	// MinAbsence is a Go duration, 0 or more.
	MinAbsence string `yaml:"minAbsence"`
	Frozen     *bool  `yaml:"frozen"`
}

// frozenScalar is the one scalar nodeDeletion takes.
const frozenScalar = "frozen"

// UnmarshalYAML implements yaml.Unmarshaler: the scalar frozen, or the
// mapping. Any other scalar is a TypeError (the key walk has named the
// key: see shorthandSection).
func (s *nodeDeletionSection) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.ShortTag() == "!!str" && n.Value == frozenScalar {
			*s = nodeDeletionSection{Frozen: new(true)}
			return nil
		}
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, s.accepts())}}
	}
	type plain nodeDeletionSection // without this method
	return n.Decode((*plain)(s))
}

// accepts implements shorthandSection.
func (*nodeDeletionSection) accepts() string {
	return "want " + frozenScalar + ", or a section of keys (minAbsence: a duration such as 30s, frozen: true or false)"
}

// shorthandSection is a section that one scalar may stand for; accepts
// says which forms it takes, for the error naming its key.
type shorthandSection interface{ accepts() string }

// resolveNodeDeletion is s over parent, field by field; path names s
// ("global.nodeDeletion", "vcenter.a.nodeDeletion") in errors.
func resolveNodeDeletion(s *nodeDeletionSection, parent NodeDeletion, path string, add func(string, string, ...any)) NodeDeletion {
	out := parent
	if s == nil {
		return out
	}
	if s.MinAbsence != "" {
		d, err := time.ParseDuration(s.MinAbsence)
		switch {
		case err != nil:
			add(path+".minAbsence", "not a duration (like 30s, or 0s for none)")
		case d < 0:
			add(path+".minAbsence", "must be 0 or more")
		default:
			out.MinAbsence = d
		}
	}
	if s.Frozen != nil {
		out.Frozen, out.FrozenBy = *s.Frozen, ""
		if *s.Frozen {
			out.FrozenBy = path
		}
	}
	return out
}
