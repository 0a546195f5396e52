package discovery

import (
	"net"
	"strconv"
	"strings"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Identity is what a vCenter is, as opposed to the name a config gives
// it: the server it is dialled at and, once it has answered, its instance
// UUID. A name repointed to another server, or an address that now
// answers as another appliance, is another vCenter: what was seen in the
// old one says nothing about the new one.
type Identity struct {
	// Server is ServerKey of the configured server and port.
	Server string
	// InstanceUUID is "" until the vCenter has answered once.
	InstanceUUID string
}

// ServerKey is how servers compare: the host lowercased, with its port.
func ServerKey(host string, port int) string {
	return net.JoinHostPort(strings.ToLower(strings.Trim(host, "[]")), strconv.Itoa(port))
}

// Is reports whether id and cur are the same vCenter, cur being what a
// configured one is now. An instance UUID known for id must be cur's:
// until cur has answered, it cannot be told from another appliance at
// the same address.
func (id Identity) Is(cur Identity) bool {
	return id.Server == cur.Server && (id.InstanceUUID == "" || id.InstanceUUID == cur.InstanceUUID)
}

func (id Identity) String() string {
	if id.InstanceUUID == "" {
		return id.Server
	}
	return id.Server + " (instance " + id.InstanceUUID + ")"
}

// identity is v's Identity now.
func (v *targetState) identity() Identity {
	return Identity{Server: v.Server, InstanceUUID: v.Backend.InstanceUUID()}
}

// sameVCenter reports whether two vCenters that answered (or indexed
// their inventories) are one: entries of one server (CPI's tenants)
// unless both instance UUIDs are known and differ.
func (id Identity) sameVCenter(o Identity) bool {
	return id.Server == o.Server && (id.InstanceUUID == "" || o.InstanceUUID == "" || id.InstanceUUID == o.InstanceUUID)
}

// entryFor returns the configured entry to ask about a VM in datacenter
// dc of vCenter id: entry name while it is still that vCenter and serves
// dc (its own login found the VM), else the first entry in config order
// that is that vCenter and serves dc; nil when none does.
func entryFor(vcs []*targetState, name string, id Identity, dc config.Datacenter) *targetState {
	var first *targetState
	for _, v := range vcs {
		if !id.Is(v.identity()) || !v.serves(dc) {
			continue
		}
		if v.Name == name {
			return v
		}
		if first == nil {
			first = v
		}
	}
	return first
}

// entriesOf counts the configured entries that are vCenter id and
// serve dc.
func entriesOf(vcs []*targetState, id Identity, dc config.Datacenter) int {
	n := 0
	for _, v := range vcs {
		if id.Is(v.identity()) && v.serves(dc) {
			n++
		}
	}
	return n
}
