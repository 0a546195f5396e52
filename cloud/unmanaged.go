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
// (Options.UnmanagedNodeSelector marks more).
const LabelUnmanaged = "vsphere-federated-ccm.io/unmanaged"

// ReasonNodeUnmanaged is the Normal Event recorded once on a Node when this
// CCM is first asked about it and finds it unmanaged, saying why.
const ReasonNodeUnmanaged = "NodeUnmanaged"

// unmanagedNodes decides which Nodes are not this CCM's, and announces
// each one once.
type unmanagedNodes struct {
	events   *eventLog
	selector labels.Selector // nil: only LabelUnmanaged

	mu sync.Mutex
	// announced are the Nodes whose NodeUnmanaged Event was recorded, by
	// name; a Node that becomes managed again is forgotten, so a later
	// return is announced again.
	announced map[string]bool
}

func newUnmanagedNodes(events *eventLog, selector labels.Selector) *unmanagedNodes {
	if selector != nil && selector.Empty() {
		// An empty selector matches every Node: surely not what was meant.
		selector = nil
	}
	return &unmanagedNodes{events: events, selector: selector, announced: map[string]bool{}}
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

// ask is unmanaged, and records the NodeUnmanaged Event the first time a
// Node is found unmanaged.
func (u *unmanagedNodes) ask(node *v1.Node) bool {
	why := u.why(node)
	u.mu.Lock()
	first := why != "" && !u.announced[node.Name]
	if why == "" {
		delete(u.announced, node.Name)
	} else {
		u.announced[node.Name] = true
	}
	u.mu.Unlock()
	if first {
		u.events.record(node, v1.EventTypeNormal, ReasonNodeUnmanaged, fmt.Sprintf(
			"unmanaged (%s): this CCM leaves it alone: no vCenter lookup, no write; it is reported present and running, never deleted. "+
				"The cloud-node controller initializes it only with a providerID of its own (kubelet --provider-id)", why))
	}
	return why != ""
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
