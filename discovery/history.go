package discovery

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// History is the record of what the config held before: the vCenters
// served, and those (or their datacenters) that have left it and are
// remembered for a while, so that their VMs' Nodes are not deleted after
// a restart. cloud keeps it where it outlives the process (its state
// ConfigMap, as this JSON) and hands it over (Members.WithHistory); Exists judges
// absence with it.
//
// A vCenter is what it is — its server and port, and once it answered
// its instance UUID — not its name: a name repointed to another server,
// or an address that now answers as another appliance, retires the old
// vCenter exactly as a removal does; a rename retires nothing.
type History struct {
	// Served are the vCenters of the last config recorded, by name (a
	// second vCenter merged in under a name taken is "name@server").
	Served map[string]Served `json:"served"`
	// Retired left the config; remembered until their Until.
	Retired []Retired `json:"retired,omitempty"`
}

// VCenterRecord is what a record says a vCenter is.
type VCenterRecord struct {
	Server string `json:"server"`
	// Port is 0 in records written before it was kept: any port.
	Port int `json:"port,omitempty"`
	// InstanceUUID is empty until the vCenter has answered.
	InstanceUUID string `json:"instanceUUID,omitempty"`
}

// Served is a vCenter of the last config recorded.
type Served struct {
	VCenterRecord
	// Datacenters is empty for every datacenter.
	Datacenters []string `json:"datacenters,omitempty"`
}

// Retired is a vCenter, or a datacenter of one, that has left the config.
type Retired struct {
	// VCenter is its name when it left; the record's server is empty in
	// records written before identities were kept (then the name is all
	// there is to go by).
	VCenter string `json:"vcenter"`
	VCenterRecord
	// Datacenter: empty for the whole vCenter, "*" for every datacenter
	// but those now listed (an empty list narrowed to some).
	Datacenter string    `json:"datacenter,omitempty"`
	Since      time.Time `json:"since"`
	// Until is when it is forgotten (zero: never).
	Until time.Time `json:"until"`
}

func (r Retired) String() string {
	where := "vcenter " + r.VCenter
	if r.Server != "" {
		port := cmp.Or(r.Port, config.DefaultPort) // 0: written before the port was kept
		where += " at " + Identity{Server: ServerKey(r.Server, port), InstanceUUID: r.InstanceUUID}.String()
	}
	switch r.Datacenter {
	case "":
	case "*":
		where = "the datacenters no longer listed of " + where
	default:
		where = "datacenter " + r.Datacenter + " of " + where
	}
	if !r.Since.IsZero() {
		where += fmt.Sprintf(" (left the config %s", r.Since.UTC().Format(time.RFC3339))
		if !r.Until.IsZero() {
			where += ", remembered until " + r.Until.UTC().Format(time.RFC3339)
		}
		where += ")"
	}
	return where
}

// Instances are the instance UUIDs recorded for the servers served, by
// ServerKey (those known): every one that an entry of the server records,
// never one entry's, so that entries whose records disagree (one
// re-logged in to a new appliance, another not) are never folded into
// whichever the map's order keeps (issue 32 §1).
func (h History) Instances() map[string][]string {
	out := map[string][]string{}
	for _, s := range h.Served {
		if s.InstanceUUID == "" || s.Port == 0 {
			continue
		}
		key := ServerKey(s.Server, s.Port)
		if !slices.Contains(out[key], s.InstanceUUID) {
			out[key] = append(out[key], s.InstanceUUID)
			slices.Sort(out[key])
		}
	}
	return out
}
