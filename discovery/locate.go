package discovery

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// NodeKeys identify a Node's VM, strongest first: providerID, the
// kubelet's system UUID, the Node's name (as a VM name, then as CPI uses
// it: a guest host name, then a guest IP).
type NodeKeys struct {
	Name       string
	ProviderID string
	SystemUUID string
	// ClaimedVCenter, ClaimedServer and ClaimedDatacenter are the Node's
	// location labels (LabelValue-encoded: the vCenter's name, its server
	// and the datacenter's name). A kubelet can write them, so they only
	// ever keep a Node: one that names a vCenter, server or datacenter not
	// configured makes absence an error; one that names a configured
	// vCenter proves nothing.
	ClaimedVCenter, ClaimedServer, ClaimedDatacenter string
}

func (k NodeKeys) lookup() (lookup, error) {
	switch {
	case k.ProviderID != "":
		u, err := ParseProviderID(k.ProviderID)
		if err != nil {
			return lookup{}, err
		}
		// Both byte orders, as the system UUID: some kubelets set
		// --provider-id from the UUID they read (CPI's
		// shakeOutNodeIDLookup tries the reversed form too).
		return uuidLookup(u)
	case k.SystemUUID != "":
		return uuidLookup(k.SystemUUID)
	default:
		// By VM name: CPI has no such search, but Nodes without a system
		// UUID have always resolved so here. Dropping it would leave
		// tainted those whose VM is named like the Node while their guest
		// host name is not (an FQDN against a short Node name, VMware
		// Tools not running), so it stays, ahead of CPI's searches.
		return newLookup(backends.ByName, k.Name), nil
	}
}

// fallbacks are CPI's searches for a Node without providerID, after its
// own key (lookup) found nothing: the Node's name as a guest host name,
// then, when it is an IP address, as a guest IP (CPI: nodemanager.go
// shakeOutNodeIDLookup, connectionmanager/search.go). They are strict
// lookups: a match counts only if unique in every vCenter's answer. The
// host name is trimmed and lowercased as CPI sends it (vclib
// GetVMByDNSName), the IP in its canonical form.
func (k NodeKeys) fallbacks() []lookup {
	name := strings.TrimSpace(k.Name)
	if k.ProviderID != "" || name == "" {
		return nil
	}
	out := []lookup{newLookup(backends.ByDNSName, backends.DNSNameKey(name))}
	if ip, err := netip.ParseAddr(name); err == nil {
		out = append(out, newLookup(backends.ByIP, ip.String()))
	}
	return out
}

// Searches names the searches Locate makes for a Node with keys k, in the
// order it makes them: its strongest key's (lookup), then, while none has
// found its VM and none has failed, the fallbacks. Each is named by
// SearchName, so that `diagnose` states the search order this code
// follows rather than restating it. An error is a providerID or system
// UUID that cannot be parsed (Locate fails the same way).
func (k NodeKeys) Searches() ([]string, error) {
	const op = "discovery.NodeKeys.Searches"
	l, err := k.lookup()
	if err != nil {
		return nil, fmt.Errorf("%s: node %s: %w", op, k.Name, err)
	}
	out := []string{l.what}
	for _, f := range k.fallbacks() {
		out = append(out, f.what)
	}
	return out, nil
}

// Locate finds the VM of a Node by its strongest key, then, for a Node
// without providerID, by its fallbacks. (nil, nil) means every search
// found nothing; that is not yet grounds to delete the Node (see Exists).
func (d *Discoverer) Locate(ctx context.Context, k NodeKeys) (res *Result, err error) {
	const op = "discovery.Locate"
	defer func() { d.count(res, err) }()
	l, err := k.lookup()
	if err != nil {
		return nil, fmt.Errorf("%s: node %s: %w", op, k.Name, err)
	}
	s, err := d.searched(l.what)
	if err != nil {
		return nil, err
	}
	res, err = d.find(ctx, s, l)
	if err != nil || res != nil {
		return res, err
	}
	if res, err = d.fallback(ctx, s, k, l); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return res, nil
}

// fallback runs k's fallbacks in order, after primary found nothing, until
// one finds the VM or fails: an error stops it (a later, weaker search
// must not stand in for an answer that could not be had). It never
// yields absence: (nil, nil) only says these searches found nothing.
func (d *Discoverer) fallback(ctx context.Context, s *snapshot, k NodeKeys, primary lookup) (*Result, error) {
	for _, l := range k.fallbacks() {
		res, err := d.find(ctx, s, l)
		if err != nil {
			return nil, fmt.Errorf("node %s: %s found no VM, then %w", k.Name, primary.what, err)
		}
		if res != nil {
			logMismatch(ctx, k, l, res)
			return res, nil
		}
	}
	return nil, nil
}

// logMismatch says when a VM found by a fallback is not the one the
// Node's system UUID names (in neither byte order). It is still the
// Node's, as in CPI: that UUID matched no VM in any vCenter, and the
// providerID the Node gets is this VM's own UUID, which is all later
// lookups use.
func logMismatch(ctx context.Context, k NodeKeys, l lookup, res *Result) {
	if k.SystemUUID == "" {
		return
	}
	if byUUID, err := uuidLookup(k.SystemUUID); err == nil && slices.Contains(byUUID.q.Values, res.VM.UUID) {
		return
	}
	klog.FromContext(ctx).Info("Node's VM found by a fallback search has another UUID than the Node's system UUID; using it, as no VM has that system UUID",
		"node", k.Name, "lookup", l.what, "vm", res.String(), "vmUUID", res.VM.UUID, "systemUUID", k.SystemUUID)
}
