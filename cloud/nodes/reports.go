package nodes

// What the CCM already knows, shown all the time rather than when asked
// (`diagnose`): Nodes stuck uninitialized and why, vCenters going down and
// coming back, BIOS UUIDs held in several vCenters. Computed from memory — the informer's Nodes, the reasons
// lookups failed, discovery's health — never from an extra vCenter call.

import (
	"errors"
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// Event reasons of the periodic reports.
const (
	// ReasonNodeUninitialized: a Warning on a Node still carrying the
	// uninitialized taint after Options.UninitializedAfter, naming why
	// (an UninitializedReason value) and the last lookup error; recorded
	// again when the reason changes.
	ReasonNodeUninitialized = "NodeUninitialized"
	// ReasonVCenterDown and ReasonVCenterUp, on the CCM's event object
	// (Options.EventObject): a vCenter's connection went down (the
	// vcenter_up metric goes 0), and came back.
	ReasonVCenterDown = "VCenterDown"
	ReasonVCenterUp   = "VCenterUp"
)

// Why a Node is still uninitialized, as the nodes_uninitialized metric's
// reason label and the NodeUninitialized Event say it: the Event reason
// its last failed InstanceMetadata recorded, VMNotFound when every vCenter
// answered that its VM is not there, UninitializedPending when no
// InstanceMetadata has failed for it in this process (not asked yet, or
// asked and about to be initialized).
const (
	UninitializedPending = "Pending"
	UninitializedNoVM    = "VMNotFound"
)

// uninitializedReasons is the fixed set of the metric's reason values.
var uninitializedReasons = []string{
	UninitializedPending, ReasonLookupFailed, UninitializedNoVM, ReasonDuplicateUUID, ReasonZoneTagMissing, ReasonNoNodeAddress,
	ReasonNodeIPNotOnVM, ReasonInvalidNodeIP, ReasonNodeIdentityConflict, metadata.ReasonZoneHostGroupMissing, metadata.ReasonZoneHostGroupAmbiguous,
}

// DefaultUninitializedAfter is how long a Node may stay uninitialized
// before its NodeUninitialized Event.
const DefaultUninitializedAfter = 2 * time.Minute

type lookupFailure struct {
	reason, message string
}

// MetadataAnswered notes how InstanceMetadata ended for node: why it
// failed (err's kind), or that it succeeded.
func (n *Owner) MetadataAnswered(node *v1.Node, err error) {
	n.failuresMu.Lock()
	defer n.failuresMu.Unlock()
	if err == nil {
		delete(n.failures, node.Name)
		return
	}
	f := lookupFailure{reason: failureReason(err), message: err.Error()}
	if f.reason == UninitializedNoVM {
		f.message = "every vCenter that could hold its VM answered that it is not there: " + f.message
	}
	n.failures[node.Name] = f
}

// failureReason is the reason value of an InstanceMetadata error: the Event
// reason its lookup recorded, by the error's kind, never its text.
func failureReason(err error) string {
	var groups *metadata.ZoneHostGroupError
	switch {
	case errors.As(err, &groups):
		return groups.Reason()
	case errors.As(err, new(*discovery.DuplicateError)):
		return ReasonDuplicateUUID
	case errors.As(err, new(*metadata.ZoneTagError)):
		return ReasonZoneTagMissing
	case errors.As(err, new(*IdentityConflictError)):
		return ReasonNodeIdentityConflict
	case errors.As(err, new(*metadata.NodeIPError)):
		return ReasonNodeIPNotOnVM
	case errors.Is(err, metadata.ErrInvalidNodeIP):
		return ReasonInvalidNodeIP
	case errors.Is(err, metadata.ErrGuestHostNameEmpty), errors.Is(err, metadata.ErrGuestNICsEmpty), errors.Is(err, metadata.ErrNoSuitableIP), errors.Is(err, metadata.ErrGuestInfoMetadata):
		return ReasonNoNodeAddress
	case errors.Is(err, cloudprovider.InstanceNotFound):
		return UninitializedNoVM
	}
	return ReasonLookupFailed
}

// tick runs the periodic checks over the informer's Nodes and the
// vCenters' changes since the last tick (Owner.Run, every poll): the
// nodes gauges, NodeUninitialized Events, VCenterDown and VCenterUp
// Events.
func (n *Owner) tick(all []*v1.Node, changes []vcenterChange, now time.Time) {
	n.reportVCenters(changes)
	byReason := make(map[string]int, len(uninitializedReasons))
	for _, r := range uninitializedReasons {
		byReason[r] = 0
	}
	unmanaged := 0
	type warning struct {
		node            *v1.Node
		reason, message string
	}
	var warnings []warning
	n.failuresMu.Lock()
	present := make(map[string]bool, len(all))
	for _, node := range all {
		present[node.Name] = true
		if n.Unmanaged(node) {
			unmanaged++
			continue
		}
		if !Uninitialized(node) {
			delete(n.failures, node.Name)
			delete(n.warned, node.Name)
			continue
		}
		f, ok := n.failures[node.Name]
		if !ok {
			f = lookupFailure{reason: UninitializedPending, message: "no lookup of it has failed yet: the cloud-node controller has not asked, or is about to initialize it"}
		}
		byReason[f.reason]++
		if now.Sub(node.CreationTimestamp.Time) >= n.uninitializedAfter && n.warned[node.Name] != f.reason {
			n.warned[node.Name] = f.reason
			warnings = append(warnings, warning{node, f.reason, f.message})
		}
	}
	maps.DeleteFunc(n.failures, func(name string, _ lookupFailure) bool { return !present[name] })
	maps.DeleteFunc(n.warned, func(name, _ string) bool { return !present[name] })
	n.failuresMu.Unlock()
	n.metrics.setNodes(unmanaged, byReason)
	for _, w := range warnings {
		n.events.Record(w.node, v1.EventTypeWarning, ReasonNodeUninitialized, fmt.Sprintf(
			"still uninitialized after %s (%s): %s", n.uninitializedAfter, w.reason, w.message))
	}
}

// reportVCenters records VCenterDown when a vCenter's connection goes down
// and VCenterUp when it comes back, as the vcenter_up metric reads it.
func (n *Owner) reportVCenters(changes []vcenterChange) {
	for _, ch := range changes {
		h := ch.health
		switch {
		case ch.down:
			msg := fmt.Sprintf("vcenter %s is down: lookups of its VMs fail, and its Nodes are kept, until it is back", h.Name)
			if h.Reachability.Err != nil {
				msg += ": " + h.Reachability.Err.Error()
			}
			n.events.Record(n.eventObject, v1.EventTypeWarning, ReasonVCenterDown, msg)
		case ch.up:
			n.events.Record(n.eventObject, v1.EventTypeNormal, ReasonVCenterUp, fmt.Sprintf("vcenter %s is back", h.Name))
		}
	}
}

// NoteDuplicate is discovery's OnDuplicate: reported at the next poll.
func (n *Owner) NoteDuplicate(uuid string, vcenters []string) {
	klog.Background().Info("A BIOS UUID is held by VMs in several vCenters; lookups of its Nodes fail until one is changed", "uuid", uuid, "vcenters", vcenters)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pendingDuplicates[uuid] = vcenters
}

// reportDuplicates records an Event on every Node of each UUID noted.
func (n *Owner) reportDuplicates(all []*v1.Node) {
	pending := take(&n.mu, &n.pendingDuplicates)
	if len(pending) == 0 {
		return
	}
	for _, node := range all {
		if n.Unmanaged(node) {
			continue
		}
		for _, u := range nodeUUIDs(node) {
			if vcs, ok := pending[u]; ok {
				n.events.Record(node, v1.EventTypeWarning, ReasonDuplicateUUID,
					fmt.Sprintf("BIOS UUID %s is held by VMs in vcenters %v; the Node is not served until one is changed", u, vcs))
				break
			}
		}
	}
}

// nodeUUIDs are the BIOS UUIDs a Node may stand for: its providerID's, and
// its system UUID in both byte orders.
func nodeUUIDs(n *v1.Node) []string {
	var out []string
	if u, err := discovery.ParseProviderID(n.Spec.ProviderID); err == nil {
		out = append(out, u)
	}
	if u, err := discovery.NormalizeUUID(n.Status.NodeInfo.SystemUUID); err == nil {
		out = append(out, u, discovery.SwapByteOrder(u))
	}
	return out
}
