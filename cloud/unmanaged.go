package cloud

// Nodes that are not this CCM's: bare-metal or another cloud's machines
// beside the VMs. Such a Node is never looked up, never written and never
// an error: InstanceExists says it exists, InstanceShutdown that it runs,
// and InstanceMetadata gives back what the Node already says.

import (
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	cloudprovider "k8s.io/cloud-provider"
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
// it (--node-labels), so alone it opts out of nothing: it counts only on a
// Node an operator also gave LabelUnmanaged, which is what tells that an
// operator set it on purpose. The Node informer keeps no managedFields
// (dropManagedFields), and they would not tell anyway: a field manager is
// whatever name the client sends, a kubelet's credential can send any.
// A Node carrying it alone is looked up as any other and gets one
// UnmanagedLabelIgnored Warning, saying which key to set.
const LabelUnmanagedLegacy = "vsphere-federated-ccm.io/unmanaged"

// ReasonNodeUnmanaged is the Normal Event recorded once on a Node when this
// CCM is first asked about it and finds it unmanaged, saying why.
const ReasonNodeUnmanaged = "NodeUnmanaged"

// ReasonUnmanagedLabelIgnored is the Warning recorded once on a Node
// carrying LabelUnmanagedLegacy=true without LabelUnmanaged.
const ReasonUnmanagedLabelIgnored = "UnmanagedLabelIgnored"

// unmanagedNodes decides which Nodes are not this CCM's, and announces
// each one once.
type unmanagedNodes struct {
	events   *eventLog
	selector labels.Selector // nil: only LabelUnmanaged

	mu sync.Mutex
	// announced is what was announced of each Node, by name: unmanaged
	// (its NodeUnmanaged Event) or legacyOnly (its UnmanagedLabelIgnored
	// Event). A Node that becomes managed again is forgotten, so a later
	// return is announced again; one deleted is forgotten (claims.gone,
	// from the Node informer), and past maxAnnounced all are.
	announced map[string]announcement
}

type announcement int

const (
	announcedUnmanaged announcement = iota + 1
	announcedLegacyOnly
)

// maxAnnounced bounds announced without a Node informer to prune it (a
// provider without a cluster): the cost of forgetting is one Event again.
const maxAnnounced = 8192

func newUnmanagedNodes(events *eventLog, selector labels.Selector) *unmanagedNodes {
	if selector != nil && selector.Empty() {
		// An empty selector matches every Node: surely not what was meant.
		selector = nil
	}
	return &unmanagedNodes{events: events, selector: selector, announced: map[string]announcement{}}
}

// why says why node is unmanaged, or "" when it is this CCM's.
func (u *unmanagedNodes) why(node *v1.Node) string {
	if node.Labels[LabelUnmanaged] == "true" {
		return fmt.Sprintf("label %s=true", LabelUnmanaged)
	}
	if u.selector != nil && u.selector.Matches(labels.Set(node.Labels)) {
		return fmt.Sprintf("selector %q (--unmanaged-node-selector)", u.selector.String())
	}
	return ""
}

// unmanaged reports whether node is not this CCM's (a label change is
// followed at the next ask).
func (u *unmanagedNodes) unmanaged(node *v1.Node) bool { return u.why(node) != "" }

// legacyOnly reports whether node carries LabelUnmanagedLegacy=true but
// not LabelUnmanaged=true: a label its kubelet may have set, which
// counts for nothing.
func legacyOnly(node *v1.Node) bool {
	return node.Labels[LabelUnmanagedLegacy] == "true" && node.Labels[LabelUnmanaged] != "true"
}

// ask is unmanaged, and records the NodeUnmanaged Event the first time a
// Node is found unmanaged, or the UnmanagedLabelIgnored Event the first
// time it carries the legacy key alone.
func (u *unmanagedNodes) ask(node *v1.Node) bool {
	why := u.why(node)
	var now announcement
	switch {
	case why != "":
		now = announcedUnmanaged
	case legacyOnly(node):
		now = announcedLegacyOnly
	}
	u.mu.Lock()
	first := now != 0 && u.announced[node.Name] != now
	if now == 0 {
		delete(u.announced, node.Name)
	} else {
		if _, ok := u.announced[node.Name]; !ok && len(u.announced) >= maxAnnounced {
			u.announced = map[string]announcement{}
		}
		u.announced[node.Name] = now
	}
	u.mu.Unlock()
	switch {
	case first && now == announcedUnmanaged:
		u.events.record(node, v1.EventTypeNormal, ReasonNodeUnmanaged, fmt.Sprintf(
			"unmanaged (%s): this CCM leaves it alone: no vCenter lookup, no write; it is reported present and running, never deleted. "+
				"The cloud-node controller initializes it only with a providerID of its own (kubelet --provider-id)", why))
	case first:
		u.events.record(node, v1.EventTypeWarning, ReasonUnmanagedLabelIgnored, fmt.Sprintf(
			"label %s=true is ignored: a kubelet can set it (--node-labels), so alone it no longer opts a Node out; this Node is looked up as a VM "+
				"and deleted once its VM is confirmed absent. To have this CCM leave it alone, set %s=true "+
				"(kubelets cannot: the NodeRestriction admission plugin forbids them node-restriction.kubernetes.io/ labels)",
			LabelUnmanagedLegacy, LabelUnmanaged))
	}
	return why != ""
}

// forget drops what was announced of a Node deleted.
func (u *unmanagedNodes) forget(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.announced, name)
}

// unmanagedMetadata is InstanceMetadata's answer for an unmanaged Node:
// the Node's own providerID and addresses, nothing of ours (no labels,
// zone, region or instance type). The cloud-node controller then removes
// the uninitialized taint of a Node whose kubelet set a providerID, and
// keeps its addresses (the kubelet's --node-ip is among them, as the
// controller requires). One without a providerID gets nil: the controller
// initializes no Node without one (kubernetes/kubernetes#123024) and skips
// it quietly on nil, instead of retrying an error; an initialized one never
// gets nil, which the controller's address update does not expect.
func unmanagedMetadata(node *v1.Node) *cloudprovider.InstanceMetadata {
	if node.Spec.ProviderID == "" && uninitialized(node) {
		return nil
	}
	return &cloudprovider.InstanceMetadata{ProviderID: node.Spec.ProviderID, NodeAddresses: slices.Clone(node.Status.Addresses)}
}

// unmanaged reports whether node is not this CCM's: nothing looks it up,
// writes it or reports on it.
func (n *nodes) unmanaged(node *v1.Node) bool { return n.checks.unmanaged.unmanaged(node) }

// Unmanaged says why node is not this CCM's ("" when it is), for
// `diagnose`; it records nothing.
func (c *Cloud) Unmanaged(node *v1.Node) string { return c.instances.checks.unmanaged.why(node) }
