package cloud

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
)

// VCenterStatus is what this process knows of one configured vCenter, as
// the /vcenters endpoint and `diagnose` show it. It holds no secret: the
// credential source is named, never read out.
type VCenterStatus struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	// Reachability: "up", "down" or "unknown" (its first connection
	// attempt has not ended), since when, and the failure that made it
	// down: the backend's State().Reachability, served flat (it shadows
	// that field).
	Reachability string    `json:"reachability"`
	Since        time.Time `json:"since,omitzero"`
	LastError    string    `json:"lastError,omitempty"`
	// Status is what its backend shows of itself (instance UUID,
	// session, inventory, refused credentials, budget, certificate);
	// zero while no backend is built.
	backends.Status
	// Breaker: "closed", "half-open" or "open".
	Breaker string `json:"breaker"`
	// TwinsIndexed: the duplicate index holds its UUIDs, so a VM found
	// in another vCenter is served while this one cannot answer (see
	// discovery.VCenterHealth.Indexed).
	TwinsIndexed bool `json:"twinsIndexed"`
	// NodeDeletion is its deletion policy and the Nodes it holds back.
	NodeDeletion NodeDeletionStatus `json:"nodeDeletion"`
}

// NodeDeletionStatus is a vCenter's deletion policy (config
// nodeDeletion) and the Nodes whose VMs were confirmed absent that it
// holds back now (discovery.VCenterHealth.Held).
type NodeDeletionStatus struct {
	MinAbsence string `json:"minAbsence"` // a Go duration
	Frozen     bool   `json:"frozen"`
	// FrozenBy is the key that froze it.
	FrozenBy  string `json:"frozenBy,omitempty"`
	HeldNodes int    `json:"heldNodes"`
}

// VCenterStatuses lists every configured vCenter's status, in the
// config's order (discovery's Health, whose members are applied with the
// config). It reads memory only: never a call to vCenter.
func (c *Cloud) VCenterStatuses() []VCenterStatus {
	health := c.fleet.discovery.Health()
	out := make([]VCenterStatus, len(health))
	for i, h := range health {
		nd := h.NodeDeletion
		out[i] = VCenterStatus{Name: h.Name, Server: h.Host, Reachability: h.Reachability.State.String(), Since: h.Reachability.Since.UTC(),
			Status: h.Backend, Breaker: h.Breaker, TwinsIndexed: h.Indexed,
			NodeDeletion: NodeDeletionStatus{MinAbsence: nd.MinAbsence.String(), Frozen: nd.Frozen, FrozenBy: nd.FrozenBy, HeldNodes: h.Held.Nodes()}}
		if h.Reachability.Err != nil {
			out[i].LastError = h.Reachability.Err.Error()
		}
	}
	return out
}

// Searches names the searches Locate makes for node, in the order it
// makes them (discovery.NodeKeys.Searches), for `diagnose`.
func (c *Cloud) Searches(node *v1.Node) ([]string, error) { return nodes.NodeKeys(node).Searches() }

// HistoryObject is the ConfigMap recording the vCenters served
// (Options.HistoryObject, defaulted), for `diagnose`.
func (c *Cloud) HistoryObject() types.NamespacedName { return c.fleet.opts.HistoryObject }
