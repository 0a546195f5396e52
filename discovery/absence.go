package discovery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/sony/gobreaker/v2"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery/vcenter"
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
		return nameLookup(k.Name), nil
	}
}

// fallbacks are CPI's searches for a Node without providerID, after its
// own key (lookup) found nothing: the Node's name as a guest host name,
// then, when it is an IP address, as a guest IP (CPI: nodemanager.go
// shakeOutNodeIDLookup, connectionmanager/search.go). They are strict
// lookups: a match counts only if unique in every vCenter's answer.
func (k NodeKeys) fallbacks() []lookup {
	if k.ProviderID != "" || strings.TrimSpace(k.Name) == "" {
		return nil
	}
	out := []lookup{dnsLookup(k.Name)}
	if ip, err := netip.ParseAddr(strings.TrimSpace(k.Name)); err == nil {
		out = append(out, ipLookup(ip))
	}
	return out
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
	u, err := NormalizeUUID(k.SystemUUID)
	if err == nil && (res.VM.UUID == u || res.VM.UUID == SwapByteOrder(u)) {
		return
	}
	klog.FromContext(ctx).Info("Node's VM found by a fallback search has another UUID than the Node's system UUID; using it, as no VM has that system UUID",
		"node", k.Name, "lookup", l.what, "vm", res.String(), "vmUUID", res.VM.UUID, "systemUUID", k.SystemUUID)
}

// Exists decides whether a Node's VM still exists: (res, nil) found, an
// error when that cannot be decided, and (nil, nil) — the Node may be
// deleted — only when every vCenter that could hold the VM answered that
// it does not, and every guard agrees:
//   - the Node has a vsphere:// providerID: one without may be a machine
//     that was never a VM (bare metal beside the VMs), one with another
//     scheme is not ours;
//   - for a Node without providerID, no VM has its name as guest host
//     name, or as guest IP (CPI's searches): one that does keeps it, and
//     a vCenter that cannot answer those searches makes it an error;
//   - its location labels name no vCenter, server or datacenter that has
//     left the config;
//   - no vCenter or datacenter that could hold it has left the config
//     and is still remembered (History): it could hold the VM — moved
//     there, or a twin of it — and cannot be asked, even when the VM was
//     last seen in one still configured that now says it is gone. A
//     vCenter is what it is (Identity), so a name now meaning another
//     server, or an address answering as another appliance, is one that
//     left;
//   - no VM of the Node's name exists whose UUID vCenter cannot read
//     (inaccessible, orphaned), asked of every vCenter itself: any one
//     that does not answer makes it an error.
//
// Then the deletion policy of the vCenters that could hold it
// (Target.NodeDeletion, deletion.go): a frozen one makes it a
// DeletionHeldError naming the freeze; so does a VM confirmed absent for
// less than the longest minAbsence, counted from the first of an unbroken
// run of such answers (an answer that finds it starts over; an error
// does not).
//
// This is the only place absence is concluded.
func (d *Discoverer) Exists(ctx context.Context, k NodeKeys) (res *Result, err error) {
	const op = "discovery.Exists"
	defer func() { d.count(res, err) }()
	l, err := k.lookup()
	if err != nil {
		return nil, fmt.Errorf("%s: node %s: %w", op, k.Name, err)
	}
	// One view of the vCenters for every search and check below.
	s, err := d.searched(l.what)
	if err != nil {
		return nil, err
	}
	res, err = d.find(ctx, s, l)
	if err != nil || res != nil {
		return res, err
	}
	// A VM found by CPI's searches keeps the Node; one that fails keeps
	// it too. Only when they found nothing do the guards below decide,
	// exactly as without them.
	if res, err := d.fallback(ctx, s, k, l); err != nil || res != nil {
		if err != nil {
			err = fmt.Errorf("%s: %w", op, err)
		}
		return res, err
	}
	if l.nameOnly {
		return nil, ErrNameOnly
	}
	if k.ProviderID == "" {
		return nil, ErrNoProviderID
	}
	if err := d.checkClaim(ctx, s, k); err != nil {
		return nil, err
	}
	if err := d.checkInstances(s); err != nil {
		return nil, err
	}
	if err := d.checkRetired(l.what); err != nil {
		return nil, err
	}
	if err := d.checkNamesake(ctx, s, k.Name); err != nil {
		return nil, err
	}
	if err := d.holds.absent(l.key, l.what, s.vcs); err != nil {
		klog.FromContext(ctx).V(2).Info("VM confirmed absent in every vCenter; the deletion policy holds its Node back", "node", k.Name, "lookup", l.what, "err", err)
		return nil, err
	}
	klog.FromContext(ctx).Info("VM confirmed absent in every vCenter", "node", k.Name, "lookup", l.what)
	return nil, nil
}

// checkClaim is an error when the Node's labels place its VM in a vCenter,
// server or datacenter that is not configured. A datacenter configured by
// ID says its name only through its vCenter: one that cannot answer makes
// it an error, never a match or a mismatch.
func (d *Discoverer) checkClaim(ctx context.Context, s *snapshot, k NodeKeys) error {
	vcs := s.vcs
	if k.ClaimedServer != "" && !slices.ContainsFunc(vcs, func(v *vcenter.Member) bool { return ServerLabelValue(v.Server) == k.ClaimedServer }) {
		return fmt.Errorf("its VM was in a vCenter at server %s (by its label), which is no longer configured; not deleting", k.ClaimedServer)
	}
	if k.ClaimedVCenter == "" {
		return nil
	}
	i := slices.IndexFunc(vcs, func(v *vcenter.Member) bool { return LabelValue(v.Name) == k.ClaimedVCenter })
	if i < 0 {
		return fmt.Errorf("its VM was in vcenter %s (by its label), which is no longer configured; not deleting", k.ClaimedVCenter)
	}
	v := vcs[i]
	if k.ClaimedDatacenter == "" || len(v.Datacenters) == 0 {
		return nil
	}
	var byID []config.DatacenterSpec
	for _, s := range v.Datacenters {
		name, ok := s.Name()
		if !ok {
			byID = append(byID, s)
			continue
		}
		if LabelValue(name) == k.ClaimedDatacenter {
			return nil
		}
	}
	if len(byID) > 0 {
		dcs, err := call(ctx, d, v, "datacenters", func(ctx context.Context, b backends.Backend) ([]config.Datacenter, error) {
			return b.Datacenters(ctx)
		})
		if err == nil {
			err = s.confirm(v) // another appliance's datacenters are not its
		}
		if err != nil {
			return fmt.Errorf("its VM was in datacenter %s of vcenter %s (by its labels); whether a datacenter configured by ID (%s) is that one cannot be told: %w; not deleting",
				k.ClaimedDatacenter, v.Name, rawSpecs(byID), err)
		}
		for _, dc := range dcs {
			if LabelValue(dc.Name) == k.ClaimedDatacenter && slices.ContainsFunc(byID, func(s config.DatacenterSpec) bool { return s.Matches(dc) }) {
				return nil
			}
		}
	}
	return fmt.Errorf("its VM was in datacenter %s of vcenter %s (by its labels), which is no longer configured; not deleting", k.ClaimedDatacenter, v.Name)
}

// rawSpecs lists specs as written.
func rawSpecs(specs []config.DatacenterSpec) string {
	raw := make([]string, len(specs))
	for i, s := range specs {
		raw[i] = s.Raw
	}
	return strings.Join(raw, ", ")
}

// checkInstances is an error when a configured entry answered (as the
// lookup knows it: s) with another instance UUID than the History
// records for its server, by any entry of it: another appliance now
// answers at that address, and the one that held the VMs cannot be
// asked. The record then retires the old one (OnIdentity).
func (d *Discoverer) checkInstances(s *snapshot) error {
	h := d.history.Load()
	for _, v := range s.vcs {
		now := s.identity(v).InstanceUUID
		if now == "" {
			continue
		}
		for _, was := range h.instances[v.Server] {
			if was != now {
				return fmt.Errorf("vcenter %s: server %s answers as vCenter instance %s, but instance %s served there before, and cannot be asked; not deleting", v.Name, v.Server, now, was)
			}
		}
	}
	return nil
}

// checkRetired is an error while the history of the config is unknown,
// or while a vCenter or datacenter that left it is remembered.
func (d *Discoverer) checkRetired(what string) error {
	h := d.history.Load()
	if h.unknown != "" {
		return fmt.Errorf("%s: not found, but which vCenters this CCM served before is not known yet (%s); not deleting", what, h.unknown)
	}
	now := time.Now()
	var live []Retired
	for _, r := range h.retired {
		if r.Until.IsZero() || now.Before(r.Until) {
			live = append(live, r)
		}
	}
	if len(live) > 0 {
		return &RetiredError{What: what, Remembered: live}
	}
	return nil
}

// checkNamesake looks, in every vCenter itself, for a VM of the Node's
// name whose UUID cannot be read: a search by UUID misses such a VM
// though it exists. Any vCenter that does not answer makes it an error,
// whatever the others found: the one that did not answer may hold it.
func (d *Discoverer) checkNamesake(ctx context.Context, s *snapshot, name string) error {
	what := fmt.Sprintf("vm name %q (looking for an unreadable VM of the Node's name)", name)
	var failed *multierror.Error
	var answered []string
	for _, a := range d.ask(ctx, s, s.vcs, backends.Query{By: backends.ByName, Values: []string{name}}, false) {
		if a.err != nil {
			failed = multierror.Append(failed, a.err)
			continue
		}
		answered = append(answered, a.vc.Name)
		for _, vm := range a.vms {
			if vm.UUID == "" {
				r := &Result{VCenter: a.vc.Name, VM: vm}
				return fmt.Errorf("not found by UUID, and %s cannot be read (state %q); not deleting", r, vm.ConnectionState)
			}
		}
	}
	if failed != nil {
		return &LookupError{What: what, Answered: answered, Failed: failed}
	}
	return nil
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

// VCenterHealth is what a Discoverer knows of one vCenter's health.
type VCenterHealth struct {
	Name         string
	Reachability backends.Reachability
	BreakerOpen  bool   // open or half-open: lookups fail fast or probe
	Breaker      string // its state: closed, half-open or open
	// Indexed says the duplicate index holds its UUIDs: a VM found
	// elsewhere is served while it cannot answer, and a twin it holds is
	// still seen. With its inventory off, such lookups fail while it
	// cannot answer, once it has answered since it was configured;
	// otherwise (its inventory never in service at a scan, or down since
	// the CCM started) the twin check is blind to it.
	Indexed bool
}

// Healthy reports whether lookups reach the vCenter normally.
func (h VCenterHealth) Healthy() bool {
	return h.Reachability.State != backends.ConnDown && !h.BreakerOpen
}

// Health lists the configured vCenters' health.
func (d *Discoverer) Health() []VCenterHealth {
	vcs := *d.vcenters.Load()
	out := make([]VCenterHealth, len(vcs))
	for i, v := range vcs {
		st := v.Status()
		out[i] = VCenterHealth{Name: v.Name, Reachability: st.Reachability, BreakerOpen: st.Breaker != gobreaker.StateClosed, Breaker: st.Breaker.String(),
			Indexed: d.duplicates.holds(v.Backend)}
	}
	return out
}

// Connected lists, once each time, the vCenters that refused a lookup as
// still connecting (ErrVCenterConnecting) and are up now: the lookups
// they failed are worth making again at once, as after an outage. A
// lookup refused after the vCenter came up (it began before) is listed
// at the next call.
func (d *Discoverer) Connected() []string {
	var out []string
	for _, v := range *d.vcenters.Load() {
		if v.UpAfterRefusing() {
			out = append(out, v.Name)
		}
	}
	return out
}
