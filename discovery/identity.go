package discovery

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery/vcenter"
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

// snapshot is what one lookup works with: the vCenters configured when
// it began, and what each of them was then, its instance UUID read once.
// Every decision of the lookup — is a remembered location still
// configured, which entry asks about it, where is a VM found, did an
// appliance change — is made from it: two reads of a backend's instance
// UUID may differ (a session ends between them, the backend then answers
// "", or logs in again to another appliance), and decisions made from
// different reads contradict each other (issue 32 §2: a location found
// configured by one read had no entry by the next, and the lookup
// dereferenced it).
//
// An instance unknown when the lookup began is learnt from the vCenter's
// first answer (confirm); one that changes once known makes every answer
// of that vCenter in the lookup an error (ErrInstanceChanged): the
// lookup cannot tell which appliance answered.
type snapshot struct {
	vcs []*vcenter.Member
	mu  sync.Mutex // answers are confirmed in parallel (ask)
	// instances are by entry: entries of one server may be logged in to
	// different appliances (one re-logged in after a re-image, another
	// not yet).
	instances map[*vcenter.Member]string
	moved     map[*vcenter.Member]bool
}

// ErrInstanceChanged is a vCenter whose instance UUID changed during a
// lookup (its session lost, or logged in to another appliance): what it
// answered cannot be attributed to either appliance.
var ErrInstanceChanged = errors.New("its instance UUID changed during the lookup")

// newSnapshot reads every vCenter's instance UUID, once.
func newSnapshot(vcs []*vcenter.Member) *snapshot {
	s := &snapshot{vcs: vcs, instances: make(map[*vcenter.Member]string, len(vcs)), moved: map[*vcenter.Member]bool{}}
	for _, v := range vcs {
		s.instances[v] = v.Backend.State().InstanceUUID
	}
	return s
}

// identity is what the lookup knows v as.
func (s *snapshot) identity(v *vcenter.Member) Identity {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Identity{Server: v.Server, InstanceUUID: s.instances[v]}
}

// confirm is called once v has answered: the answer is v's as the lookup
// knows it only if v is still that instance. The instance read now is
// the session's that answered, or a later one's: unknown before, it is
// learnt; known and now another (or none: the session ended, and the
// next login may reach another appliance), the answer is an error.
func (s *snapshot) confirm(v *vcenter.Member) error {
	now := v.Backend.State().InstanceUUID
	s.mu.Lock()
	defer s.mu.Unlock()
	was, ok := s.instances[v]
	switch {
	case !ok:
		// Not a vCenter of this lookup (cannot happen: calls are made
		// to the snapshot's entries); nothing to attribute it to.
		return fmt.Errorf("%w: vcenter %s is not one this lookup began with", ErrInstanceChanged, v.Name)
	case s.moved[v]:
		return fmt.Errorf("%w: it was instance %s when the lookup began", ErrInstanceChanged, instanceOrNone(was))
	case now == was:
		return nil
	case was == "":
		s.instances[v] = now
		return nil
	}
	s.moved[v] = true
	return fmt.Errorf("%w: it was instance %s, and is %s now", ErrInstanceChanged, was, instanceOrNone(now))
}

func instanceOrNone(id string) string {
	if id == "" {
		return "unknown (no session)"
	}
	return id
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
func entryFor(s *snapshot, name string, id Identity, dc config.Datacenter) *vcenter.Member {
	vs := entriesOf(s, id, dc)
	if i := slices.IndexFunc(vs, func(v *vcenter.Member) bool { return v.Name == name }); i >= 0 {
		return vs[i]
	}
	if len(vs) == 0 {
		return nil
	}
	return vs[0]
}

// entriesOf lists, in config order, the configured entries that are
// vCenter id and serve dc.
func entriesOf(s *snapshot, id Identity, dc config.Datacenter) []*vcenter.Member {
	var out []*vcenter.Member
	for _, v := range s.vcs {
		if id.Is(s.identity(v)) && v.Serves(dc) {
			out = append(out, v)
		}
	}
	return out
}

// ServerLabelValue is a vCenter's server, ServerKey form, as a label
// value: the host alone for the default port 443.
func ServerLabelValue(server string) string {
	if host, port, err := net.SplitHostPort(server); err == nil && port == "443" {
		server = host
	}
	return LabelValue(server)
}

// LabelValue is name as a label value: itself when valid, else
// "sha256-" and 40 hex digits of its digest (an IPv6 server's colons, a
// name over 63 characters), so every vCenter and datacenter can be named.
func LabelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "sha256-" + hex.EncodeToString(sum[:20])
}
