package discovery

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-multierror"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery/vcenter"
)

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
				k.ClaimedDatacenter, v.Name, join(byID, ", "), err)
		}
		for _, dc := range dcs {
			if LabelValue(dc.Name) == k.ClaimedDatacenter && slices.ContainsFunc(byID, func(s config.DatacenterSpec) bool { return s.Matches(dc) }) {
				return nil
			}
		}
	}
	return fmt.Errorf("its VM was in datacenter %s of vcenter %s (by its labels), which is no longer configured; not deleting", k.ClaimedDatacenter, v.Name)
}

// checkInstances is an error when a configured entry answered (as the
// lookup knows it: s) with another instance UUID than the History
// records for its server, by any entry of it: another appliance now
// answers at that address, and the one that held the VMs cannot be
// asked. The record then retires the old one (OnIdentity).
func (d *Discoverer) checkInstances(s *snapshot) error {
	h := d.members.Load()
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
	h := d.members.Load()
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
