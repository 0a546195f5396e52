package nodes

// Nodes that are not this CCM's: bare-metal or another cloud's machines
// beside the VMs. Such a Node is never looked up, never written and never
// an error: InstanceExists says it exists, InstanceShutdown that it runs,
// and InstanceMetadata gives back what the Node already says.

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// LabelUnmanaged set to "true" on a Node marks it as not this CCM's
// (Options.UnmanagedNodeSelector marks more). It is under
// node-restriction.kubernetes.io/, which the NodeRestriction admission
// plugin forbids a kubelet to set, change or remove on its Node, at
// registration (--node-labels) as after: the opt-out is its operator's,
// never the kubelet's, which would otherwise take its Node out of
// deletion and give it the providerID and addresses it chose.
const LabelUnmanaged = "node-restriction.kubernetes.io/vsphere-federated-ccm-unmanaged"

// LabelUnmanagedLegacy is the key earlier versions read. A kubelet can set
// it (--node-labels), so it counts only where a kubelet cannot have been
// the one to set it (LegacyCutoff): on a Node an operator also gave
// LabelUnmanaged, or on one created before a leader of this version first
// ran, when it was the opt-out — an operator labelled that Node, and an
// upgrade must not delete it. On a Node created since, alone, it opts out
// of nothing: the Node is looked up as any other and gets one
// UnmanagedLabelIgnored Warning, saying which key to set. The Node
// informer keeps no managedFields (dropManagedFields), and they would not
// tell who set it anyway: a field manager is whatever name the client
// sends, a kubelet's credential can send any.
const LabelUnmanagedLegacy = "vsphere-federated-ccm.io/unmanaged"

// ReasonNodeUnmanaged is the Normal Event recorded once on a Node when this
// CCM is first asked about it and finds it unmanaged, saying why.
const ReasonNodeUnmanaged = "NodeUnmanaged"

// ReasonUnmanagedLabelIgnored is the Warning recorded once on a Node
// carrying LabelUnmanagedLegacy=true without LabelUnmanaged, created at or
// after the cutoff.
const ReasonUnmanagedLabelIgnored = "UnmanagedLabelIgnored"

// ReasonUnmanagedLabelLegacy is the Warning recorded once, beside
// NodeUnmanaged, on a Node that LabelUnmanagedLegacy alone still opts out
// (created before the cutoff): it gives the command that sets the new key.
const ReasonUnmanagedLabelLegacy = "UnmanagedLabelLegacy"

// ReasonUnmanagedLabelUndecided is the Warning recorded once on a Node
// carrying LabelUnmanagedLegacy=true alone while the cutoff is not known:
// it is looked up, but not reported deleted.
const ReasonUnmanagedLabelUndecided = "UnmanagedLabelUndecided"

// LegacyCutoff is when a leader of this version first ran, recorded once
// in the state ConfigMap (legacyCutoffKey, history.go) and never moved: a
// Node created before it that carries LabelUnmanagedLegacy alone got it
// while that key was the opt-out, from its operator (or at least with the
// earlier version honouring it), so it is honoured still; on a Node
// created since, only a kubelet may have set it. At is zero while unknown
// (not read yet, unreadable, not written), and Why then says why: the
// rule cannot be applied, so such a Node is looked up for its metadata
// (a kubelet does not get to choose its addresses) but never reported
// deleted.
type LegacyCutoff struct {
	At  time.Time
	Why string
	// Pending: the ConfigMap not read yet since the start, which the
	// first reload does at once; not worth an Event.
	Pending bool
}

// legacyVerdict is what LabelUnmanagedLegacy alone does on a Node.
type legacyVerdict int

const (
	legacyNone      legacyVerdict = iota // not carried alone
	legacyHonoured                       // created before the cutoff: unmanaged
	legacyIgnored                        // created at or after it: managed
	legacyUndecided                      // the cutoff unknown: managed, never deleted
)

// maxAnnounced bounds Owner.announced without a Node informer to prune it
// (a provider without a cluster): the cost of forgetting is one Event again.
const maxAnnounced = 8192

// SetCutoff makes c the cutoff the legacy key is judged by (the fleet
// reads it from the state ConfigMap). A cutoff known is never replaced by
// an unknown one: it is written once, and a later read that fails does
// not make it less true.
func (n *Owner) SetCutoff(c LegacyCutoff) {
	if c.At.IsZero() {
		if cur := n.cutoff.Load(); cur != nil && !cur.At.IsZero() {
			return
		}
	}
	n.cutoff.Store(&c)
}

// Verdict is what this CCM makes of a Node: why it is unmanaged ("" when
// it is this CCM's), and what the legacy key alone does on it, judged by
// cutoff (one read of it for the whole verdict).
type Verdict struct {
	Why    string
	legacy legacyVerdict
	cutoff LegacyCutoff
}

// Judge is the verdict on node, for `diagnose` (Verdict.Why: why node is
// not this CCM's, "" when it is); it records nothing.
func (n *Owner) Judge(node *v1.Node) Verdict {
	if node.Labels[LabelUnmanaged] == "true" {
		return Verdict{Why: fmt.Sprintf("label %s=true", LabelUnmanaged)}
	}
	if n.selector != nil && n.selector.Matches(labels.Set(node.Labels)) {
		return Verdict{Why: fmt.Sprintf("selector %q (--unmanaged-node-selector)", n.selector.String())}
	}
	// The legacy key alone (LabelUnmanaged is not "true"): a label its
	// kubelet may have set, which counts only by the cutoff.
	if node.Labels[LabelUnmanagedLegacy] != "true" {
		return Verdict{}
	}
	c := LegacyCutoff{Why: "the state ConfigMap has not been read yet", Pending: true}
	if known := n.cutoff.Load(); known != nil {
		c = *known
	}
	created := node.CreationTimestamp.Time
	switch {
	case c.At.IsZero():
		return Verdict{legacy: legacyUndecided, cutoff: c}
	case created.IsZero():
		// Every Node the API server returns has one: this one cannot be
		// placed either side of the cutoff.
		return Verdict{legacy: legacyUndecided, cutoff: LegacyCutoff{Why: "the Node has no creationTimestamp"}}
	case created.Before(c.At):
		return Verdict{legacy: legacyHonoured, cutoff: c, Why: fmt.Sprintf(
			"label %s=true, on a Node created %s, before this version of the CCM first ran (%s)",
			LabelUnmanagedLegacy, created.UTC().Format(time.RFC3339), c.At.UTC().Format(time.RFC3339))}
	}
	return Verdict{legacy: legacyIgnored, cutoff: c}
}

// Unmanaged reports whether node is not this CCM's: nothing looks it up,
// writes it or reports on it (a label change is followed at the next ask).
func (n *Owner) Unmanaged(node *v1.Node) bool { return n.Judge(node).Why != "" }

// Decide is Judge's verdict on node for a lookup (instances), and records
// the Events of what was found the first time it is found (see announced).
func (n *Owner) Decide(node *v1.Node) Verdict {
	v := n.Judge(node)
	if v.legacy == legacyUndecided && v.cutoff.Pending {
		return v // announced once read, whatever it says
	}
	announce := v.Why != "" || v.legacy != legacyNone
	n.announcedMu.Lock()
	was, known := n.announced[node.Name]
	first := announce && (!known || was != v.legacy)
	if !announce {
		delete(n.announced, node.Name)
	} else {
		if !known && len(n.announced) >= maxAnnounced {
			n.announced = map[string]legacyVerdict{}
		}
		n.announced[node.Name] = v.legacy
	}
	n.announcedMu.Unlock()
	if !first {
		return v
	}
	setNew := fmt.Sprintf("kubectl label node %s %s=true", node.Name, LabelUnmanaged)
	if v.Why != "" {
		n.events.Record(node, v1.EventTypeNormal, ReasonNodeUnmanaged, fmt.Sprintf(
			"unmanaged (%s): this CCM leaves it alone: no vCenter lookup, no write; it is reported present and running, never deleted. "+
				"The cloud-node controller initializes it only with a providerID of its own (kubelet --provider-id)", v.Why))
	}
	switch v.legacy {
	case legacyHonoured:
		n.events.Record(node, v1.EventTypeWarning, ReasonUnmanagedLabelLegacy, fmt.Sprintf(
			"label %s=true alone still opts this Node out: it was created before this version of the CCM first ran (%s), when that key was the opt-out. "+
				"A kubelet can set that key (--node-labels), so on Nodes created since it is ignored. Set the key kubelets cannot set: %s",
			LabelUnmanagedLegacy, v.cutoff.At.UTC().Format(time.RFC3339), setNew))
	case legacyIgnored:
		n.events.Record(node, v1.EventTypeWarning, ReasonUnmanagedLabelIgnored, fmt.Sprintf(
			"label %s=true is ignored: a kubelet can set it (--node-labels), so alone it opts out only Nodes created before this version of the CCM first ran (%s), "+
				"and this one was created %s; it is looked up as a VM and deleted once its VM is confirmed absent. To have this CCM leave it alone, set %s=true "+
				"(kubelets cannot: the NodeRestriction admission plugin forbids them node-restriction.kubernetes.io/ labels): %s",
			LabelUnmanagedLegacy, v.cutoff.At.UTC().Format(time.RFC3339), node.CreationTimestamp.UTC().Format(time.RFC3339), LabelUnmanaged, setNew))
	case legacyUndecided:
		n.events.Record(node, v1.EventTypeWarning, ReasonUnmanagedLabelUndecided, fmt.Sprintf(
			"label %s=true alone opts out only Nodes created before this version of the CCM first ran, and that cannot be told now (%s): "+
				"until it is, this Node is looked up as a VM, but never reported deleted (InstanceExists answers an error instead of absence). "+
				"To have this CCM leave it alone, set the key kubelets cannot set: %s",
			LabelUnmanagedLegacy, v.cutoff.Why, setNew))
	}
	return v
}

// UndecidedError is InstanceExists's answer for a Node whose VM is absent
// when v is the legacy key alone while the cutoff is not known: absence
// would delete a Node its operator may have opted out. nil for any other
// verdict.
func (v Verdict) UndecidedError() error {
	if v.legacy != legacyUndecided {
		return nil
	}
	return fmt.Errorf("its VM was not found, but it carries %s=true alone, which opts out a Node created before this version of the CCM first ran, "+
		"and that cannot be told now (%s): not reporting it deleted (set %s=true to have it left alone)",
		LabelUnmanagedLegacy, v.cutoff.Why, LabelUnmanaged)
}

// AnnouncedUnmanaged is how many Nodes the unmanaged check remembers
// having announced. Exported for package cloud's tests only (that
// deleted Nodes are forgotten); nothing else reads it.
func (n *Owner) AnnouncedUnmanaged() int {
	n.announcedMu.Lock()
	defer n.announcedMu.Unlock()
	return len(n.announced)
}
