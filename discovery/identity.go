package discovery

import (
	"net"
	"strconv"
	"strings"
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

// byIdentity returns the configured vCenter that id is, or nil.
func byIdentity(vcs []*targetState, id Identity) *targetState {
	for _, v := range vcs {
		if id.Is(v.identity()) {
			return v
		}
	}
	return nil
}
