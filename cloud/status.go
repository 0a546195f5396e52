package cloud

import (
	"context"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// VCenterStatus is what this process knows of one configured vCenter, as
// the /vcenters endpoint and `diagnose` show it. It holds no secret: the
// credential source is named, never read out.
type VCenterStatus struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	// Reachability: "up", "down" or "unknown" (its first connection
	// attempt has not ended), since when, and the failure that made it
	// down.
	Reachability string    `json:"reachability"`
	Since        time.Time `json:"since,omitzero"`
	LastError    string    `json:"lastError,omitempty"`
	// InstanceUUID is the vCenter's instance UUID as its session read it
	// (with the server, what it is).
	InstanceUUID string `json:"instanceUUID,omitempty"`
	// Breaker: "closed", "half-open" or "open".
	Breaker string `json:"breaker"`
	// TwinsIndexed: the duplicate index holds its UUIDs, so a VM found
	// in another vCenter is served while this one cannot answer (see
	// discovery.VCenterHealth.Indexed).
	TwinsIndexed bool              `json:"twinsIndexed"`
	Session      *SessionStatus    `json:"session,omitempty"`
	Inventory    *InventorySummary `json:"inventory,omitempty"`
	// RefusedCredentials are the credential sources whose credentials
	// this vCenter refused: sent again only when they change or at their
	// retry time.
	RefusedCredentials []RefusedCredentials `json:"refusedCredentials,omitempty"`
	// Budget is its request budget (metrics_vcenter.go).
	Budget *BudgetStatus `json:"budget,omitempty"`
	// Certificate is the one it presented at the last TLS handshake.
	Certificate *CertificateStatus `json:"certificate,omitempty"`
	// NodeDeletion is its deletion policy and the Nodes it holds back.
	NodeDeletion NodeDeletionStatus `json:"nodeDeletion"`
}

// NodeDeletionStatus is a vCenter's deletion policy (config
// nodeDeletion) and the Nodes whose VMs were confirmed absent that it
// holds back now (discovery.Discoverer.Held).
type NodeDeletionStatus struct {
	MinAbsence string `json:"minAbsence"` // a Go duration
	Frozen     bool   `json:"frozen"`
	// FrozenBy is the key that froze it.
	FrozenBy  string `json:"frozenBy,omitempty"`
	HeldNodes int    `json:"heldNodes"`
}

// RefusedCredentials is a credential source a vCenter refused (its name,
// never a value), and when its credentials are sent again unchanged.
type RefusedCredentials struct {
	Source   string    `json:"source"`
	Refusals int       `json:"refusals"`
	Last     time.Time `json:"lastRefused"`
	// Retry is zero when they are never sent again unchanged.
	Retry time.Time `json:"retry,omitzero"`
}

// SessionStatus is a vCenter's current SOAP session.
type SessionStatus struct {
	LoggedIn    time.Time `json:"loggedIn"`
	AgeSeconds  float64   `json:"ageSeconds"`
	Credentials string    `json:"credentials"` // the source's name
}

// InventorySummary is a vCenter's watch-fed inventory.
type InventorySummary struct {
	InService bool   `json:"inService"` // answering lookups now
	VMs       int    `json:"vms"`
	Updates   uint64 `json:"updates"`
}

// vcenterStatuses lists every configured vCenter's status, in the
// config's order. It reads memory only: never a call to vCenter.
func (f *fleet) vcenterStatuses() []VCenterStatus {
	cfg := f.cfg.Load()
	health := f.discovery.Health()
	held := f.discovery.Held()
	bs := f.builtBackends()
	now := time.Now()
	out := make([]VCenterStatus, 0, len(cfg.VCenters))
	for _, vc := range cfg.VCenters {
		st := VCenterStatus{Name: vc.Name, Server: vc.Server, Reachability: backends.ConnUnknown.String(),
			NodeDeletion: NodeDeletionStatus{MinAbsence: vc.NodeDeletion.MinAbsence.String(), Frozen: vc.NodeDeletion.Frozen, FrozenBy: vc.NodeDeletion.FrozenBy}}
		if i := slices.IndexFunc(held, func(h discovery.HeldNodes) bool { return h.VCenter == vc.Name }); i >= 0 {
			st.NodeDeletion.HeldNodes = held[i].Nodes()
		}
		if i := slices.IndexFunc(health, func(h discovery.VCenterHealth) bool { return h.Name == vc.Name }); i >= 0 {
			h := health[i]
			st.Reachability, st.Since, st.Breaker, st.TwinsIndexed = h.Reachability.State.String(), h.Reachability.Since.UTC(), h.Breaker, h.Indexed
			if h.Reachability.Err != nil {
				st.LastError = h.Reachability.Err.Error()
			}
		}
		if b, ok := bs[vc.Name]; ok {
			budgetAndCertificate(&st, b.Backend, now)
			st.InstanceUUID = b.InstanceUUID()
			if inv, ok := b.Inventory(); ok {
				st.Inventory = &InventorySummary{InService: inv.InService, VMs: inv.VMs, Updates: inv.Updates}
			}
			if r, ok := b.Backend.(backends.SessionReporter); ok {
				if s, ok := r.Session(); ok {
					st.Session = &SessionStatus{LoggedIn: s.LoggedIn.UTC(), AgeSeconds: now.Sub(s.LoggedIn).Round(time.Second).Seconds(), Credentials: s.Credentials}
				}
			}
			if r, ok := b.Backend.(backends.CredentialReporter); ok {
				for _, rc := range r.RefusedCredentials() {
					st.RefusedCredentials = append(st.RefusedCredentials, RefusedCredentials{Source: rc.Source, Refusals: rc.Refusals, Last: rc.Last.UTC(), Retry: rc.Retry.UTC()})
				}
			}
		}
		out = append(out, st)
	}
	return out
}

// settle prepares a started provider for one lookup as the running CCM
// would make it: the record of the vCenters served is read (written too,
// unless ReadOnly), and every vCenter's connection is settled once (a
// login each, in parallel; none is written to), so that no vCenter is
// "still connecting". It reports whether the record could be read; until
// it is, no VM is reported gone.
func (f *fleet) settle(ctx context.Context) bool {
	ok := f.recordHistory(ctx)
	f.discovery.Connect(ctx)
	return ok
}

// Searches names the searches Locate makes for node, in the order it
// makes them (discovery.NodeKeys.Searches), for `diagnose`.
func (c *Cloud) Searches(node *v1.Node) ([]string, error) { return nodeKeys(node).Searches() }

// HistoryObject is the ConfigMap recording the vCenters served
// (Options.HistoryObject, defaulted), for `diagnose`.
func (c *Cloud) HistoryObject() types.NamespacedName { return c.fleet.opts.HistoryObject }
