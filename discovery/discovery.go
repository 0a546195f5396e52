package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/sony/gobreaker/v2"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery/vcenter"
)

// Target is one vCenter entry to search; several may be entries of one
// vCenter (CPI's tenants). Its vcenter.Member owns what is known of it.
type Target = vcenter.Target

// Result is a located VM.
type Result struct {
	// VCenter is the name of the vCenter that answered; Where is what it
	// is (empty for a VM known only from the duplicate index).
	VCenter string
	Where   Identity
	VM      backends.VM
}

// String names the VM for messages.
func (r *Result) String() string {
	if r.VM.Ref.ID == "" { // known only from an inventory's UUID index
		return fmt.Sprintf("vcenter %s (a VM of BIOS UUID %s in its inventory)", r.VCenter, r.VM.UUID)
	}
	return fmt.Sprintf("vcenter %s datacenter %s vm %q (%s)", r.VCenter, r.VM.Ref.Datacenter, r.VM.Name, r.VM.Ref.ID)
}

// Options tune a Discoverer.
type Options struct {
	// LocationTTL bounds how long a location is remembered; a remembered
	// location is always re-read before it is used. Default 30 minutes.
	LocationTTL time.Duration
	// Observer, when set, is told about each vCenter call and breaker change.
	Observer Observer
	// ProbeInterval spaces the probes of a vCenter known down (see
	// State().Reachability); default 1s.
	ProbeInterval time.Duration
	// ConnectWait bounds how long lookups wait for a vCenter that is not
	// known up (its first connection attempt under way) while the attempt
	// makes no progress; one that reports progress (State().Connect: a
	// vCenter across a WAN) is waited for while it does, up to half its
	// request timeout after a lookup first met it connecting: one wait
	// shared by every lookup, not one each. Once judged stalled it is not
	// waited for again until it progresses. Default 250ms.
	ConnectWait time.Duration
	// OnDuplicate, when set, is told by ScanDuplicates of each BIOS UUID
	// newly held by VMs in several vCenters.
	OnDuplicate func(uuid string, vcenters []string)
	// OnIdentity, when set, is told when a vCenter answers with an
	// instance UUID the History does not record for its server, so that
	// the record can be brought up to date. It must not block.
	OnIdentity func()
	// Clock times the deletion grace (NodeDeletion.MinAbsence); default
	// the real one.
	Clock clock.PassiveClock
}

// Observer receives what a Discoverer does, for metrics: each vCenter
// call and breaker change (vcenter.Observer), and each lookup.
type Observer interface {
	vcenter.Observer
	Lookup(result string)
	Cache(hit bool)
}

// noObserver is the Observer of a Discoverer given none.
type noObserver struct{}

func (noObserver) Call(string, string, time.Duration, error) {}
func (noObserver) BreakerState(string, gobreaker.State)      {}
func (noObserver) Lookup(string)                             {}
func (noObserver) Cache(bool)                                {}

// Discoverer locates VMs. It is safe for concurrent use; Use swaps the
// set of vCenters while lookups in flight finish on the set they began with.
type Discoverer struct {
	opts Options
	// members are the configured entries and the record of the config's
	// past, as the caller built them last.
	members   atomic.Pointer[Members]
	locations *locationCache
	// holds are the Nodes whose absence the deletion policy holds back.
	holds *holds
	// duplicates is fed by the inventories (ScanDuplicates).
	duplicates *duplicateIndex
}

// New returns a Discoverer over vcs. It starts nothing: the twin index
// is brought up to date by the caller's ScanDuplicates.
func New(vcs []Target, opts Options) *Discoverer {
	opts.LocationTTL = cmp.Or(opts.LocationTTL, 30*time.Minute)
	opts.ProbeInterval = cmp.Or(opts.ProbeInterval, time.Second)
	opts.ConnectWait = cmp.Or(opts.ConnectWait, 250*time.Millisecond)
	opts.Observer = cmp.Or[Observer](opts.Observer, noObserver{})
	opts.Clock = cmp.Or[clock.PassiveClock](opts.Clock, clock.RealClock{})
	d := &Discoverer{opts: opts, locations: newLocationCache(opts.LocationTTL), duplicates: newDuplicateIndex(),
		holds: &holds{clock: opts.Clock, by: map[string]*hold{}}}
	none := &Members{opts: vcenter.Options{
		Observer: opts.Observer, ProbeInterval: opts.ProbeInterval, ConnectWait: opts.ConnectWait,
	}}
	members, _ := none.Next(vcs)
	d.Use(members)
	return d
}

// Connect settles every vCenter's connection once: each backend is
// probed (a login when it has none) under its request deadline, in
// parallel, and Connect returns when all have answered. A short-lived
// caller (diagnose) uses it so that its one lookup meets vCenters known up
// or down, as the running CCM's do, not "still connecting". It never
// writes anything to vCenter.
func (d *Discoverer) Connect(ctx context.Context) {
	var wg sync.WaitGroup
	for _, v := range d.members.Load().vcs {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, v.RequestTimeout)
			defer cancel()
			_ = v.Backend.Probe(pctx) // its outcome is the backend's Reachability
		})
	}
	wg.Wait()
}

// call runs fn against v under its breaker and request deadline
// (vcenter.Call); an answer tells the duplicate index that v has
// answered, and OnIdentity of an instance UUID other than the one the
// History records for its server (once per value): also when any entry
// of the server records another beside it, so that an entry's old
// instance is retired once every entry answers as the new.
func call[T any](ctx context.Context, d *Discoverer, v *vcenter.Member, op string, fn func(context.Context, backends.Backend) (T, error)) (T, error) {
	out, err := vcenter.Call(ctx, v, op, fn)
	if err != nil {
		return out, &VCenterError{VCenter: v.Name, Err: err}
	}
	d.duplicates.sawAnswer(v.Backend)
	if d.opts.OnIdentity == nil {
		return out, nil
	}
	if id, ok := v.NewInstance(); ok {
		recorded := d.members.Load().instances[v.Server]
		if len(recorded) == 0 || slices.ContainsFunc(recorded, func(was string) bool { return was != id }) {
			d.opts.OnIdentity()
		}
	}
	return out, nil
}

// lookup is one search: the query, its location cache key and its name
// in messages.
type lookup struct {
	q        backends.Query
	key      string
	what     string
	nameOnly bool // by VM name: the weakest key, never grounds for absence
	// strict: a guest host name or IP, which other VMs may share (clones,
	// clusters reusing node names, private networks). Its match counts
	// only when every vCenter answered, so that a second VM in one that
	// did not cannot be missed; and it is not served from the location
	// cache (key unused), so every answer is checked that way.
	strict bool
}

// newLookup searches by for values, its key By and first value, its
// name SearchName; by VM name it is nameOnly, by guest host name or IP
// strict.
func newLookup(by backends.By, values ...string) lookup {
	q := backends.Query{By: by, Values: values}
	return lookup{q: q, key: by.String() + ":" + values[0], what: SearchName(q),
		nameOnly: by == backends.ByName, strict: by == backends.ByDNSName || by == backends.ByIP}
}

// SearchName names the search q by its first value, as a lookup and its
// errors name it (LookupError.What): `uuid "…"`, `vm name "…"`, `guest
// host name "…"`, `guest ip "…"`.
func SearchName(q backends.Query) string {
	switch q.By {
	case backends.ByUUID:
		return fmt.Sprintf("uuid %q", q.Values[0])
	case backends.ByName:
		return fmt.Sprintf("vm name %q", q.Values[0])
	case backends.ByDNSName:
		return fmt.Sprintf("guest host name %q", q.Values[0])
	}
	return fmt.Sprintf("guest ip %q", q.Values[0])
}

func uuidLookup(uuid string) (lookup, error) {
	u, err := NormalizeUUID(uuid)
	if err != nil {
		return lookup{}, err
	}
	if s := SwapByteOrder(u); s != u {
		return newLookup(backends.ByUUID, u, s), nil
	}
	return newLookup(backends.ByUUID, u), nil
}

// outcome sorts a lookup's answer into the outcomes discovery_total counts
// (found, not_found, duplicate, error): the one place a lookup is
// classified. Not found is every vCenter answering without the VM, also
// when a guard then keeps the Node for a reason that is no vCenter's
// (ErrNameOnly, ErrNoProviderID); any answer that could not be had is an
// error, a vCenter or datacenter that left the config (RetiredError)
// included.
func outcome(res *Result, err error) string {
	switch {
	case err == nil && res != nil:
		return "found"
	case err == nil, errors.Is(err, ErrNameOnly), errors.Is(err, ErrNoProviderID), errors.As(err, new(*DeletionHeldError)):
		return "not_found"
	case errors.As(err, new(*DuplicateError)):
		return "duplicate"
	default:
		return "error"
	}
}

// count records one lookup's outcome. Each exported lookup defers it at
// its entry, and only there, so that discovery_total counts lookups, not
// the searches one makes (a Node without providerID makes up to three).
func (d *Discoverer) count(res *Result, err error) {
	d.opts.Observer.Lookup(outcome(res, err))
}

// searched returns the vCenters a lookup asks and what each is, read
// once for the whole lookup (snapshot); none is an error, so that "every
// vCenter answered" never holds vacuously.
func (d *Discoverer) searched(what string) (*snapshot, error) {
	vcs := d.members.Load().vcs
	if len(vcs) == 0 {
		return nil, fmt.Errorf("%s: no vCenter is configured", what)
	}
	return newSnapshot(vcs), nil
}

// find searches every vCenter of s for l; an answer that a VM of l's key
// exists starts its deletion grace over.
func (d *Discoverer) find(ctx context.Context, s *snapshot, l lookup) (*Result, error) {
	res, err := d.search(ctx, s, l)
	if vmSeen(res, err) {
		d.holds.seen(l.key)
	}
	return res, err
}

func (d *Discoverer) search(ctx context.Context, s *snapshot, l lookup) (*Result, error) {
	vcs := s.vcs
	if !l.strict {
		if res, ok, err := d.fromCache(ctx, s, l.q, l.key); ok {
			return res, err
		}
		d.opts.Observer.Cache(false)
	}
	// First from the backends' inventories where they have one; if every
	// vCenter answered and none found it, again from vCenter itself: an
	// inventory's "none known" is not absence.
	q := l.q
	q.AllowCached = true
	answers := d.ask(ctx, s, vcs, q, !l.strict)
	if !slices.ContainsFunc(answers, func(a answer) bool { return a.err != nil || len(a.vms) > 0 }) {
		notInventoried := func(v *vcenter.Member) bool { return !v.Backend.State().Inventoried }
		if again := slices.DeleteFunc(slices.Clone(vcs), notInventoried); len(again) > 0 {
			q.AllowCached = false
			for _, a := range d.ask(ctx, s, again, q, !l.strict) {
				answers[slices.IndexFunc(answers, func(b answer) bool { return b.vc == a.vc })] = a
			}
		}
	}
	return d.judge(ctx, s, answers, l)
}

// judge turns every vCenter's answer into the lookup's, and maintains
// the location cache entry of a lookup that is not strict.
func (d *Discoverer) judge(ctx context.Context, s *snapshot, answers []answer, l lookup) (*Result, error) {
	t := tally(s, answers)
	switch {
	case len(t.found) > 1:
		return nil, &DuplicateError{What: l.what, Matches: t.found}
	case l.strict && len(t.found) == 1 && len(t.outside) > 0:
		// A shared key matching a VM outside the configured datacenters
		// too: either could be the Node's.
		return nil, &DuplicateError{What: l.what, Matches: append(t.found, t.outside...)}
	case len(t.found) == 1:
		return d.foundOne(ctx, l, t.found[0], t)
	case t.failed != nil:
		return nil, &LookupError{What: l.what, Answered: t.answered, Failed: t.failed}
	case len(t.outside) > 0:
		// It exists, in a datacenter the config leaves out (moved there,
		// or its datacenter was removed): not ours to serve, not gone.
		return nil, &OutsideError{What: l.what, Matches: t.outside}
	case l.strict:
		return nil, nil
	default:
		return nil, d.absent(s, l)
	}
}

// foundOne decides a lookup whose answers hold exactly one VM in the
// configured datacenters.
func (d *Discoverer) foundOne(ctx context.Context, l lookup, found *Result, t answersTally) (*Result, error) {
	if err := d.twinError(found, l.what, t.answered); err != nil {
		return nil, err
	}
	if t.failed != nil {
		// A strict lookup's match counts only when every vCenter answered.
		// Otherwise a twin in a vCenter that did not answer is ruled out
		// only by the duplicate index, for the vCenters whose UUIDs it holds.
		if l.strict || len(d.duplicates.uncovered(t.unanswered)) > 0 {
			return nil, &LookupError{What: l.what, Answered: t.answered, Failed: t.failed, Found: found}
		}
		klog.FromContext(ctx).V(2).Info("Found VM while some vCenters could not be asked; their inventories hold no twin", "lookup", l.what, "found", found.String(), "unanswered", len(t.failed.Errors))
	}
	if l.strict {
		return found, nil // a shared key's match is never remembered (lookup.strict)
	}
	// A VM found while its vCenter's instance is not known (between an
	// appliance change and the next connection, its inventory still
	// answering) is served, but does not replace a location that names
	// an instance: one without would match whatever appliance answers at
	// the address next, and a "not found" there would forget the VM.
	if prev, ok := d.locations.get(l.key); !ok || found.Where.InstanceUUID != "" || prev.where.InstanceUUID == "" {
		d.locations.set(l.key, location{vcenter: found.VCenter, where: found.Where, ref: found.VM.Ref, dc: found.VM.Datacenter()})
	}
	return found, nil
}

// absent decides a lookup every vCenter answered without a match: nil
// (absence), unless the VM was last seen where the config no longer looks.
func (d *Discoverer) absent(s *snapshot, l lookup) error {
	if loc, ok := d.locations.get(l.key); ok && entryFor(s, loc.vcenter, loc.where, loc.dc) == nil {
		// Last seen in a vCenter (what it is, not its name) or datacenter
		// that no entry searches now: leaving the config is not the VM
		// being deleted. Refreshed, so it lasts as long as someone asks.
		d.locations.set(l.key, loc)
		return &RetiredError{What: l.what, LastSeen: &Result{VCenter: loc.vcenter, Where: loc.where, VM: backends.VM{Ref: loc.ref}}}
	}
	d.locations.forget(l.key)
	return nil
}

// answersTally sorts a lookup's answers: VMs in the configured
// datacenters, VMs outside them, the vCenters that failed and those that
// answered.
type answersTally struct {
	found, outside []*Result
	failed         *multierror.Error
	answered       []string
	unanswered     []*vcenter.Member
}

func tally(s *snapshot, answers []answer) answersTally {
	var t answersTally
	for _, a := range answers {
		if a.err != nil {
			t.failed = multierror.Append(t.failed, a.err)
			t.unanswered = append(t.unanswered, a.vc)
			continue
		}
		t.answered = append(t.answered, a.vc.Name)
		for _, vm := range a.vms {
			r := &Result{VCenter: a.vc.Name, Where: s.identity(a.vc), VM: vm}
			served := a.vc.Serves(vm.Datacenter())
			// One VM seen through several entries of one vCenter (CPI's
			// tenants) is one VM: the first entry in config order that
			// serves its datacenter has it (answers are in config order).
			if slices.ContainsFunc(t.found, r.sameVM) {
				continue
			}
			if i := slices.IndexFunc(t.outside, r.sameVM); i >= 0 {
				if !served {
					continue
				}
				t.outside = slices.Delete(t.outside, i, i+1)
			}
			if !served {
				t.outside = append(t.outside, r)
				continue
			}
			t.found = append(t.found, r)
		}
	}
	return t
}

// sameVM reports whether r and o are one VM: one object of one vCenter,
// seen through two entries of it.
func (r *Result) sameVM(o *Result) bool {
	return r.VM.Ref == o.VM.Ref && r.Where.sameVCenter(o.Where)
}

type answer struct {
	vc  *vcenter.Member
	vms []backends.VM
	err error
}

// ask puts q to every vCenter in parallel. Every datacenter is searched;
// the configured ones are applied by the caller, so a VM outside them is
// seen, not absent. Except for an inventory's answer (AllowCached) with
// foundFast (a lookup whose outside matches are not its concern): that
// one searches the configured datacenters, the ones an inventory holds,
// so that it can answer from memory; finding nothing, the caller asks
// again without AllowCached, every datacenter.
//
// It always waits for vCenters known up. One that is not (connecting for
// the first time) is waited for until its connect counts as stalled
// (patience: ConnectWait without progress, one wait every lookup shares),
// and not at all with foundFast once a VM is found in a served
// datacenter: its call is cancelled and counts as not answered — which a
// found VM does not need, and which makes absence an error. A vCenter known down answers at once
// (call). So a dead vCenter costs the others' lookups nothing, a
// duplicate in a vCenter known up is always seen (and in the others the
// inventories' duplicate index sees it), and absence still needs every
// answer.
func (d *Discoverer) ask(ctx context.Context, s *snapshot, vcs []*vcenter.Member, q backends.Query, foundFast bool) []answer {
	q.Datacenters = nil
	outer := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make([]answer, len(vcs))
	start := time.Now()
	done := make(chan int, len(vcs))
	var wg sync.WaitGroup
	for i, v := range vcs {
		q := q
		if q.AllowCached && foundFast && v.Backend.State().Inventoried {
			q.Datacenters = v.Datacenters
		}
		wg.Go(func() {
			vms, err := call(ctx, d, v, "find", func(ctx context.Context, b backends.Backend) ([]backends.VM, error) {
				return b.Find(ctx, q)
			})
			if err == nil {
				// An answer is of the vCenter the lookup knows only if
				// it still is that one.
				if cerr := s.confirm(v); cerr != nil {
					vms, err = nil, &VCenterError{VCenter: v.Name, Err: cerr}
				}
			}
			answers[i] = answer{vc: v, vms: vms, err: err}
			done <- i
		})
	}
	pending := maps.Collect(slices.All(vcs))
	// Patience is judged again at each answer and when it would end.
	check := time.NewTimer(0)
	defer check.Stop()
	found := false
	var why error
	for len(pending) > 0 {
		select {
		case i := <-done:
			delete(pending, i)
			found = found || slices.ContainsFunc(answers[i].vms, func(vm backends.VM) bool { return vcs[i].Serves(vm.Datacenter()) })
		case <-check.C:
		}
		if waitingForUp(pending) {
			continue
		}
		if foundFast && found && len(d.duplicates.uncovered(slices.Collect(maps.Values(pending)))) == 0 {
			why = errNotWaited
			break
		}
		now := time.Now()
		until := d.patience(outer, pending, start, now)
		if !now.Before(until) {
			why = fmt.Errorf("%w: no answer within %s while connecting", ErrVCenterConnecting, now.Sub(start).Round(time.Millisecond))
			for _, v := range pending {
				v.GaveUp(now)
			}
			break
		}
		if len(pending) > 0 {
			check.Reset(until.Sub(now))
		}
	}
	cancel()
	wg.Wait()
	for i, v := range pending {
		answers[i].err = &VCenterError{VCenter: v.Name, Err: why}
	}
	return answers
}

// errNotWaited is a vCenter not waited for because the VM was found
// elsewhere, it is not known up, and the duplicate index holds its UUIDs.
var errNotWaited = errors.New("not waited for: the VM was found elsewhere, this vCenter is not known up, and its inventory holds no twin")

// patience is until when a lookup started at start waits for its pending
// vCenters none of which is known up. For one still connecting: until its
// connect counts as stalled (connecting: no progress within its stall
// window, or half its request timeout after a lookup first met it
// connecting, whichever is first; a wait every lookup shares, so a dead
// vCenter costs ConnectWait once, not once per lookup), but never past
// half of what is left of the lookup's deadline (its ctx's and the
// vCenter's request timeout, whichever is first): the other half is for
// the lookup itself once connected. For one that went down under way:
// ConnectWait after the lookup's start, its call's answer due any moment.
func (d *Discoverer) patience(ctx context.Context, pending map[int]*vcenter.Member, start, now time.Time) time.Time {
	var until time.Time
	for _, v := range pending {
		st := v.Backend.State()
		t := start.Add(d.opts.ConnectWait)
		if st.Reachability.State == backends.ConnUnknown {
			deadline := start.Add(v.RequestTimeout)
			if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
				deadline = dl
			}
			bound := start.Add(max(d.opts.ConnectWait, deadline.Sub(start)/2))
			t = v.StalledAt(now)
			if bound.Before(t) {
				t = bound
			}
		}
		if t.After(until) {
			until = t
		}
	}
	return until
}

// waitingForUp reports whether a pending vCenter is known up.
func waitingForUp(pending map[int]*vcenter.Member) bool {
	for _, v := range pending {
		if v.Backend.State().Reachability.State == backends.ConnUp {
			return true
		}
	}
	return false
}

// fromCache re-reads a remembered location. ok is false when the lookup must
// search every vCenter: nothing remembered, or the VM is no longer there.
func (d *Discoverer) fromCache(ctx context.Context, s *snapshot, q backends.Query, key string) (*Result, bool, error) {
	loc, ok := d.locations.get(key)
	if !ok {
		return nil, false, nil
	}
	// The first entry serving it, as a search attributes it (tally),
	// by the lookup's one view of what each entry is.
	v := entryFor(s, "", loc.where, loc.dc)
	if v == nil {
		// Its vCenter or datacenter left the config (or its address
		// answers as another appliance): search the others, and keep
		// the entry so absence there is not taken for deletion.
		return nil, false, nil
	}
	vm, err := call(ctx, d, v, "get", func(ctx context.Context, b backends.Backend) (*backends.VM, error) {
		return b.Get(ctx, loc.ref)
	})
	if err == nil || errors.Is(err, backends.ErrNotFound) {
		// It answered, as the vCenter that held the VM only if it
		// still is that one: a session that logged in again to another
		// appliance at the address meanwhile answered for that one,
		// where the reference may name another VM, or none. As an
		// error, that is never taken for the VM's absence.
		if cerr := s.confirm(v); cerr != nil {
			vm, err = nil, &VCenterError{VCenter: v.Name, Err: cerr}
		}
	}
	switch {
	case err == nil && (q.Matches(vm) || vm.UUID == ""):
		// An inaccessible or orphaned VM has no readable UUID, but the
		// object at a remembered reference (never reused) is still it.
		res := &Result{VCenter: v.Name, Where: loc.where, VM: *vm}
		if err := d.twinError(res, key, []string{v.Name}); err != nil {
			return nil, true, err
		}
		d.opts.Observer.Cache(true)
		return res, true, nil
	case err == nil || errors.Is(err, backends.ErrNotFound):
		// Gone or changed: forget it and search everywhere.
		d.locations.forget(key)
		return nil, false, nil
	case errors.Is(err, ErrInstanceChanged), len(entriesOf(s, loc.where, loc.dc)) > 1:
		// Which appliance answered is not known, or this entry cannot
		// answer (its own login refused?) and another of the same vCenter
		// may: search everywhere, keeping the entry.
		return nil, false, nil
	default:
		// Its vCenter cannot answer: that is an error, not absence.
		return nil, true, &LookupError{What: key, Failed: multierror.Append(nil, err)}
	}
}

// Tags reads the zone/region tags of a located VM through its vCenter's
// breaker and deadline.
func (d *Discoverer) Tags(ctx context.Context, r *Result, categories []string) (map[string]string, error) {
	const op = "discovery.Tags"
	// Through the entry that found it (its login saw the VM), or another
	// entry of its vCenter serving its datacenter.
	s := newSnapshot(d.members.Load().vcs)
	v := entryFor(s, r.VCenter, r.Where, r.VM.Datacenter())
	if v == nil {
		return nil, fmt.Errorf("%s: vcenter %s (%s) is no longer configured", op, r.VCenter, r.Where)
	}
	tags, err := call(ctx, d, v, "tags", func(ctx context.Context, b backends.Backend) (map[string]string, error) {
		return b.Tags(ctx, &r.VM, categories)
	})
	if err != nil {
		return nil, err
	}
	// Tags read from another appliance than the VM's are not its.
	if err := s.confirm(v); err != nil {
		return nil, fmt.Errorf("%s: %w", op, &VCenterError{VCenter: v.Name, Err: err})
	}
	return tags, nil
}
