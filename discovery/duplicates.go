package discovery

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery/vcenter"
)

// duplicateIndex knows, from the backends' inventories, which BIOS UUIDs
// are held by VMs in more than one vCenter. A lookup that found a VM
// without waiting for a vCenter not known up (found-fast) checks it, so a
// twin there is not missed; and a twin is reported (Options.OnDuplicate)
// as soon as it appears, not only when a lookup happens to ask.
//
// A vCenter whose inventory is out of service keeps its last known UUIDs:
// its VMs still exist as far as anyone knows. One with its inventory off
// that has answered is never covered: the index cannot rule out a twin
// there, and a VM found while it cannot answer is not served. One with an
// inventory that was never in service at a scan, or one never seen up
// since it was configured (down since the CCM started), does not hold the
// others up: one dead vCenter must not cost the others their Nodes; its
// Health says the twin check is blind to it.
//
// Entries are by backend, not by name: a name repointed to another
// server is a new backend, and the old one's UUIDs say nothing of it.
// A twin is a UUID held in two vCenters, not in two entries: entries of
// one server (CPI's tenants) see one vCenter's VMs, each its own backend.
type duplicateIndex struct {
	mu       sync.Mutex
	answered map[backends.Backend]bool // seen up since configured
	held     map[backends.Backend]heldUUIDs
	twins    map[string][]holder // UUID -> entries holding it, by name
	reported map[string]bool     // twins already reported
}

type heldUUIDs struct {
	holder
	version uint64
	uuids   map[string]struct{}
}

// holder is a configured entry holding a UUID, and the vCenter it is.
type holder struct {
	name  string
	where Identity
}

func newDuplicateIndex() *duplicateIndex {
	return &duplicateIndex{answered: map[backends.Backend]bool{}, held: map[backends.Backend]heldUUIDs{}, twins: map[string][]holder{}, reported: map[string]bool{}}
}

// refresh reads every configured vCenter's inventory UUIDs (when they
// changed) and returns the twins not reported before.
func (x *duplicateIndex) refresh(vcs []*vcenter.Member) map[string][]string {
	x.mu.Lock()
	defer x.mu.Unlock()
	changed := false
	configured := map[backends.Backend]bool{}
	for _, v := range vcs {
		configured[v.Backend] = true
		prev, had := x.held[v.Backend]
		// One read of its identity, afresh (the scan is no lookup with a
		// snapshot): two could disagree.
		cur := holder{name: v.Name, where: Identity{Server: v.Server, InstanceUUID: v.Backend.State().InstanceUUID}}
		if had && prev.holder != cur {
			prev.holder = cur // renamed, or its instance UUID learnt
			x.held[v.Backend] = prev
			changed = true
		}
		uuids, version, ok := v.Backend.UUIDs(prev.version)
		if !ok || (had && version == prev.version) {
			continue
		}
		set := make(map[string]struct{}, len(uuids))
		for _, u := range uuids {
			set[u] = struct{}{}
		}
		x.held[v.Backend] = heldUUIDs{holder: cur, version: version, uuids: set}
		changed = true
	}
	n := len(x.held)
	maps.DeleteFunc(x.held, func(b backends.Backend, _ heldUUIDs) bool { return !configured[b] })
	maps.DeleteFunc(x.answered, func(b backends.Backend, _ bool) bool { return !configured[b] })
	changed = changed || len(x.held) != n
	if !changed {
		return nil
	}
	holders := map[string][]holder{}
	for _, h := range x.held {
		for u := range h.uuids {
			holders[u] = append(holders[u], h.holder)
		}
	}
	x.twins = map[string][]holder{}
	fresh := map[string][]string{}
	for u, hs := range holders {
		// Held by entries of one vCenter alone (CPI's tenants): no twin.
		if !slices.ContainsFunc(hs[1:], func(h holder) bool { return !h.where.sameVCenter(hs[0].where) }) {
			continue
		}
		slices.SortFunc(hs, func(a, b holder) int { return strings.Compare(a.name, b.name) })
		x.twins[u] = hs
		if !x.reported[u] {
			x.reported[u] = true
			for _, h := range hs {
				fresh[u] = append(fresh[u], h.name)
			}
		}
	}
	maps.DeleteFunc(x.reported, func(u string, _ bool) bool { return x.twins[u] == nil })
	return fresh
}

// sawAnswer notes that b has answered since it was configured.
func (x *duplicateIndex) sawAnswer(b backends.Backend) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.answered[b] = true
}

// uncovered lists the vCenters of vcs with their inventory off that have
// answered: a twin there cannot be ruled out without their answer.
func (x *duplicateIndex) uncovered(vcs []*vcenter.Member) []*vcenter.Member {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []*vcenter.Member
	for _, v := range vcs {
		if _, ok := x.held[v.Backend]; !ok && x.answered[v.Backend] && !v.Backend.State().Inventoried {
			out = append(out, v)
		}
	}
	return out
}

func (x *duplicateIndex) holds(b backends.Backend) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.held[b]
	return ok
}

// ScanDuplicates makes one pass over the vCenters' inventories, bringing
// the twin index up to date, and tells Options.OnDuplicate of each twin
// new since the last pass. It starts nothing: the caller owns the loop
// (package cloud's, every cloud.Options.DuplicateScan), so the index is as
// current as the caller's last pass. Safe for concurrent use.
func (d *Discoverer) ScanDuplicates() {
	fresh := d.duplicates.refresh(d.members.Load().vcs)
	if d.opts.OnDuplicate == nil {
		return
	}
	for u, vcs := range fresh {
		d.opts.OnDuplicate(u, vcs)
	}
}

// twinError is a DuplicateError when the index holds res's UUID in a
// vCenter whose answer the lookup does not have (answered lists those it
// has: their answers are current): a VM found without every vCenter's
// answer is not trusted over an inventory that holds its twin.
func (d *Discoverer) twinError(res *Result, what string, answered []string) error {
	if res.VM.UUID == "" {
		return nil
	}
	x := d.duplicates
	x.mu.Lock()
	defer x.mu.Unlock()
	matches := []*Result{res}
	for _, h := range x.twins[res.VM.UUID] { // entries of other vCenters holding it
		if !h.where.sameVCenter(res.Where) && !slices.Contains(answered, h.name) {
			matches = append(matches, &Result{VCenter: h.name, VM: backends.VM{UUID: res.VM.UUID}})
		}
	}
	if len(matches) == 1 {
		return nil
	}
	return &DuplicateError{What: what, Matches: matches}
}

// Duplicates lists, sorted, the BIOS UUIDs the duplicate index holds in
// more than one vCenter now, from memory: no vCenter is asked. Their
// Nodes' lookups fail (DuplicateError) until one of the VMs is changed.
func (d *Discoverer) Duplicates() []string {
	x := d.duplicates
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Sorted(maps.Keys(x.twins))
}
