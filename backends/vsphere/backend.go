package vsphere

import (
	"cmp"
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

var _ backends.Backend = (*Backend)(nil)

// Backend talks to one vCenter.
type Backend struct {
	sessions *sessions
	// budget paces the calls sent to vCenter directly (see budget).
	budget *budget
	// names remembers tag and category names by ID for tagTTL, for every
	// read of attached tags (direct, and the bulk cache's loads): a tag's
	// ID -> tagName{name, its category's ID}, a category's ID ->
	// tagName{name}. vSphere's tag and category IDs never collide (urn:
	// vmomi:InventoryServiceTag:… and …Category:…).
	names *cache.Expiring

	// inv and bulkTags are set when Options.Inventory is: lookups are
	// answered from memory while the inventory is in service.
	inv      *inventory
	bulkTags *attachedTagCache
	// work owns the background work (the watch, tag refreshes): Close
	// stops it and waits for it.
	work *owner
}

// owner owns goroutines: each one spawn starts runs until its work is
// done or ctx ends; stop ends ctx, after which none starts, and wait
// waits for those started.
type owner struct {
	ctx    context.Context
	cancel context.CancelFunc
	// mu orders spawn's wg.Go before stop: none is added once wait may
	// have begun.
	mu sync.Mutex
	wg sync.WaitGroup
}

func newOwner() *owner {
	ctx, cancel := context.WithCancel(context.Background())
	return &owner{ctx: ctx, cancel: cancel}
}

// spawn runs fn in a goroutine unless o is stopped; it reports whether it
// did.
func (o *owner) spawn(fn func()) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ctx.Err() != nil {
		return false
	}
	o.wg.Go(fn)
	return true
}

func (o *owner) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cancel()
}

// wait returns once the goroutines started have returned, or ctx's error
// if it ends first.
func (o *owner) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		o.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// New returns a backend; it connects on first use, or on Start to start
// the inventory watch when Options.Inventory is set. It starts nothing.
func New(opts Options) *Backend {
	b := &Backend{
		sessions: newSessions(opts),
		budget:   newBudget(opts.Config.Name, opts.Config.RequestsPerSecond, opts.Config.RequestBurst),
		names:    cache.NewExpiring(),
		work:     newOwner(),
	}
	log := b.sessions.log
	if c := opts.Config; c.InsecureFlag && (len(c.Thumbprints) > 0 || c.CAFile != "") {
		log.Info("insecureFlag is overridden: the vCenter's certificate is verified against its thumbprint or caFile")
	}
	if !opts.Inventory {
		return b
	}
	b.inv = newInventory(b.sessions, orDefault(opts.Heartbeat, DefaultHeartbeat), opts.Config.DatacenterSpecs(), log)
	b.bulkTags = &attachedTagCache{refresh: orDefault(opts.TagRefresh, DefaultTagRefresh)}
	b.inv.loaded = b.refreshTagsInBackground
	return b
}

// Start implements backends.Backend: the inventory's watch begins (until
// Close); without an inventory there is nothing to start.
func (b *Backend) Start() {
	if b.inv == nil || !b.inv.started.CompareAndSwap(false, true) {
		return
	}
	b.work.spawn(func() { b.inv.run(b.work.ctx) })
}

// SetDatacenters implements backends.Backend (inventory.setDatacenters).
// Without an inventory there is nothing to scope: direct lookups search
// what each query names.
func (b *Backend) SetDatacenters(specs []config.DatacenterSpec) {
	if b.inv != nil {
		b.inv.setDatacenters(specs)
	}
}

// UUIDs implements backends.Backend.
func (b *Backend) UUIDs(unchangedSince uint64) ([]string, uint64, bool) {
	if b.inv == nil {
		return nil, 0, false
	}
	return b.inv.uuids(unchangedSince)
}

// Find implements backends.Backend.
func (b *Backend) Find(ctx context.Context, q backends.Query) (_ []backends.VM, err error) {
	defer sortFailure("vsphere.Find", &err)
	if err := b.sessions.open(); err != nil {
		return nil, err
	}
	if b.inv != nil && q.AllowCached {
		b.inv.awaitFirstAttempt(ctx)
		if vms, ok := b.inv.find(q); ok {
			return vms, nil
		}
	}
	vc, err := b.direct(ctx, searches(q))
	if err != nil {
		return nil, err
	}
	refs, err := b.search(ctx, vc, q)
	if err != nil {
		return nil, fmt.Errorf("by %s: %w", q.By, err)
	}
	if len(refs) == 0 {
		return nil, nil
	}
	vms, err := b.load(ctx, vc, refs)
	if isNotFound(err) {
		// A VM vanished between search and read: search again, once.
		if err = b.budget.take(ctx, searches(q)); err == nil {
			if refs, err = b.search(ctx, vc, q); err == nil {
				vms, err = b.load(ctx, vc, refs)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(vms, func(vm backends.VM) bool { return !backends.InDatacenters(q.Datacenters, &vm) })
	slices.SortFunc(out, func(a, b backends.VM) int { return cmp.Compare(a.Ref.ID, b.Ref.ID) })
	return out, nil
}

// direct readies a call sent to vCenter directly: n tokens of the
// budget, then a logged-in client.
func (b *Backend) direct(ctx context.Context, n int) (*vim25.Client, error) {
	if err := b.budget.take(ctx, n); err != nil {
		return nil, err
	}
	c, err := b.sessions.current(ctx)
	if err != nil {
		return nil, err
	}
	return c.vim, nil
}

// search returns the references matching q in the whole vCenter; the
// datacenter filter is applied on the VMs' real ancestry afterwards, which
// costs no extra call and does not trust the server to honour it.
func (b *Backend) search(ctx context.Context, vc *vim25.Client, q backends.Query) ([]types.ManagedObjectReference, error) {
	si := object.NewSearchIndex(vc)
	seen := map[types.ManagedObjectReference]bool{}
	var out []types.ManagedObjectReference
	for _, v := range q.Values {
		var refs []object.Reference
		var err error
		switch q.By {
		case backends.ByUUID:
			refs, err = si.FindAllByUuid(ctx, nil, strings.ToLower(v), true, types.NewBool(false))
		case backends.ByIP:
			refs, err = si.FindAllByIp(ctx, nil, v, true)
		case backends.ByDNSName:
			if v == "" {
				continue // names no VM (vcsim would match every VM without one)
			}
			// Lowercased as CPI sends it (vclib GetVMByDNSName); vCenter
			// compares case-insensitively, vcsim exactly. The datacenter
			// is left out for the same reason as above.
			refs, err = si.FindAllByDnsName(ctx, nil, backends.DNSNameKey(v), true)
		case backends.ByName:
			refs, err = b.findByName(ctx, vc, v)
		default:
			return nil, fmt.Errorf("unsupported query %v", q.By)
		}
		if err != nil {
			return nil, err
		}
		for _, r := range refs {
			if ref := r.Reference(); ref.Type == "VirtualMachine" && !seen[ref] {
				seen[ref] = true
				out = append(out, ref)
			}
		}
	}
	return out, nil
}

// viewRead reads what spec selects of v, a container view of the kind's
// objects below root (retrieveSpec), destroying the view afterwards.
func (b *Backend) viewRead(ctx context.Context, vc *vim25.Client, root types.ManagedObjectReference, kind string,
	spec func(v types.ManagedObjectReference) types.PropertyFilterSpec,
) (*invState, error) {
	v, err := view.NewManager(vc).CreateContainerView(ctx, root, []string{kind}, true)
	if err != nil {
		return nil, err
	}
	defer destroy(ctx, b.sessions.requestTimeout(), v.Destroy)
	return retrieveSpec(ctx, vc, spec(v.Reference()))
}

// vmNamesSpec asks for the name of every VM of v, a container view.
func vmNamesSpec(v types.ManagedObjectReference) types.PropertyFilterSpec {
	spec := filterSpec(v)
	spec.PropSet = []types.PropertySpec{{Type: "VirtualMachine", PathSet: []string{"name"}}}
	return spec
}

// destroy removes a server-side object of ours (a view, a collector)
// under a deadline of its own, also once ctx has ended: a view left
// behind costs vCenter memory until the session ends.
func destroy(ctx context.Context, timeout time.Duration, d func(context.Context) error) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	_ = d(dctx)
}

func (b *Backend) findByName(ctx context.Context, vc *vim25.Client, name string) ([]object.Reference, error) {
	// Names are compared here, exactly (the index checks the key):
	// property.Match would glob.
	s, err := b.viewRead(ctx, vc, vc.ServiceContent.RootFolder, "VirtualMachine", vmNamesSpec)
	if err != nil {
		return nil, err
	}
	var out []object.Reference
	for _, id := range s.byName.appendIDs(nil, name) {
		out = append(out, vmRef(id))
	}
	return out, nil
}

// Get implements backends.Backend.
func (b *Backend) Get(ctx context.Context, ref backends.VMRef) (_ *backends.VM, err error) {
	defer sortFailure("vsphere.Get", &err)
	if err := b.sessions.open(); err != nil {
		return nil, err
	}
	if b.inv != nil {
		b.inv.awaitFirstAttempt(ctx)
		// Held in memory: current. Not held: vCenter decides.
		if vm, ok := b.inv.get(ref); ok {
			return vm, nil
		}
	}
	vc, err := b.direct(ctx, 1)
	if err != nil {
		return nil, err
	}
	vms, err := b.load(ctx, vc, []types.ManagedObjectReference{vmRef(ref.ID)})
	if isNotFound(err) {
		return nil, fmt.Errorf("vm %s: %w", ref.ID, backends.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if len(vms) != 1 || vms[0].Ref != ref {
		// Gone from the datacenter we knew it in.
		return nil, fmt.Errorf("vm %s in %s: %w", ref.ID, ref.Datacenter, backends.ErrNotFound)
	}
	return &vms[0], nil
}

// Datacenters implements backends.Backend.
func (b *Backend) Datacenters(ctx context.Context) (_ []config.Datacenter, err error) {
	defer sortFailure("vsphere.Datacenters", &err)
	if err := b.sessions.open(); err != nil {
		return nil, err
	}
	if b.inv != nil {
		b.inv.awaitFirstAttempt(ctx)
		if dcs, ok := b.inv.datacenters(); ok {
			return dcs, nil
		}
	}
	vc, err := b.direct(ctx, 2) // a view, then its read
	if err != nil {
		return nil, err
	}
	return b.readDatacenters(ctx, vc)
}

// readDatacenters asks vCenter for every datacenter and its folders up to
// the root folder, through a container view (read as the inventory's
// list reads it).
func (b *Backend) readDatacenters(ctx context.Context, vc *vim25.Client) ([]config.Datacenter, error) {
	s, err := b.viewRead(ctx, vc, vc.ServiceContent.RootFolder, "Datacenter", datacenterListSpec)
	if err != nil {
		return nil, fmt.Errorf("list datacenters: %w", err)
	}
	return s.datacenters(), nil
}

func vmRef(id string) types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "VirtualMachine", Value: id}
}

// load reads the VMs and their ancestors in one PropertyCollector call;
// a second, for the hosts and their ancestors, only when a VM runs on a
// host its resource pool's compute resource does not list (a template
// has no pool).
func (b *Backend) load(ctx context.Context, vc *vim25.Client, refs []types.ManagedObjectReference) ([]backends.VM, error) {
	read := func(objs []types.ManagedObjectReference) (*invState, error) {
		return retrieveSpec(ctx, vc, b.sessions.withHostGroups(ancestrySpec(objs)))
	}
	s, err := read(refs)
	if err != nil {
		return nil, err
	}
	var hosts []types.ManagedObjectReference
	for _, ref := range refs {
		rec, ok := s.vms[ref.Value]
		if !ok || rec.vm.Host.get() == "" {
			continue
		}
		h := types.ManagedObjectReference{Type: "HostSystem", Value: rec.vm.Host.get()}
		if _, held := s.entities[h]; !held && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) > 0 {
		more, err := read(hosts)
		if err != nil && !isNotFound(err) { // a host gone since: the VM's host name is unknown
			return nil, err
		}
		if more != nil {
			maps.Copy(s.entities, more.entities)
			maps.Copy(s.hostGroups, more.hostGroups)
		}
	}
	out := make([]backends.VM, 0, len(refs))
	for _, ref := range refs {
		if rec, ok := s.vms[ref.Value]; ok {
			out = append(out, s.placed(rec))
		}
	}
	return out, nil
}

// retrieveSpec reads what spec selects into an invState of its own, in
// one call, each object as the watch would see it enter (one code path,
// invState.apply, reads both). A property vCenter could not read is an
// error, as govmomi's ObjectContentToType makes it.
func retrieveSpec(ctx context.Context, vc *vim25.Client, spec types.PropertyFilterSpec) (*invState, error) {
	res, err := property.DefaultCollector(vc).RetrieveProperties(ctx, types.RetrieveProperties{SpecSet: []types.PropertyFilterSpec{spec}})
	if err != nil {
		return nil, err
	}
	for _, c := range res.Returnval {
		for _, p := range c.MissingSet {
			return nil, soap.WrapVimFault(p.Fault.Fault)
		}
	}
	s := newInvState()
	s.applyContent(res.Returnval)
	return s, nil
}

// ancestrySpec asks for objs and their ancestors, with the properties the
// CCM reads. A TraversalSpec follows a top-level property only (not a
// VM's runtime.host): the VM's host is reached through its resource pool,
// up to the pool's compute resource, and down to that one's hosts (names
// and parents: a few per cluster), so that a VM is placed in one call.
func ancestrySpec(objs []types.ManagedObjectReference) types.PropertyFilterSpec {
	const up, vAppUp, hosts = "up", "vAppUp", "hosts"
	// Where a walk goes on: up, and from a compute resource down to its
	// hosts; from the VM itself, up only (next[:2]).
	next := []types.BaseSelectionSpec{
		&types.SelectionSpec{Name: up}, &types.SelectionSpec{Name: vAppUp}, &types.SelectionSpec{Name: hosts},
	}
	selectUp := []types.BaseSelectionSpec{
		&types.TraversalSpec{
			SelectionSpec: types.SelectionSpec{Name: up}, Type: "ManagedEntity", Path: "parent", SelectSet: next,
		},
		// A vApp nested in another has no parent but a parentVApp.
		&types.TraversalSpec{
			SelectionSpec: types.SelectionSpec{Name: vAppUp}, Type: "VirtualApp", Path: "parentVApp", SelectSet: next,
		},
		&types.TraversalSpec{SelectionSpec: types.SelectionSpec{Name: hosts}, Type: "ComputeResource", Path: "host"},
		&types.TraversalSpec{Type: "VirtualMachine", Path: "parentVApp", SelectSet: next[:2]},
		&types.TraversalSpec{Type: "VirtualMachine", Path: "resourcePool", SelectSet: next[:2]},
	}
	spec := types.PropertyFilterSpec{
		PropSet: []types.PropertySpec{
			{Type: "ManagedEntity", PathSet: []string{"name", "parent"}},
			{Type: "VirtualApp", PathSet: []string{"parentVApp"}},
			{Type: "VirtualMachine", PathSet: vmProperties},
		},
	}
	for _, o := range objs {
		spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{Obj: o, SelectSet: selectUp})
	}
	return spec
}

// RefreshCredentials implements backends.Backend.
func (b *Backend) RefreshCredentials(ctx context.Context, grace time.Duration) (bool, error) {
	const op = "vsphere.RefreshCredentials"
	if err := b.sessions.open(); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	rotated, err := b.sessions.refresh(ctx, grace)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	return rotated, nil
}

// Close implements backends.Backend: from its start every call fails with
// ErrClosed and nothing connects again; it returns once the watch, the
// background tag refresh and the sessions' own goroutines have ended and
// the sessions are logged out, or when ctx ends.
func (b *Backend) Close(ctx context.Context) error {
	const op = "vsphere.Close"
	b.sessions.shut()
	b.work.stop()
	_ = b.work.wait(ctx) // the sessions' close reports ctx's end
	if err := b.sessions.close(ctx); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// isNotFound reports vCenter's "no such object" fault.
func isNotFound(err error) bool {
	return err != nil && fault.Is(err, &types.ManagedObjectNotFound{})
}

// Status implements backends.Backend: a snapshot of memory, never a call
// to vCenter. Never a credential: the source's name only.
func (b *Backend) Status() backends.Status {
	now := time.Now()
	st := backends.Status{State: b.State(), Budget: new(b.budget.status())}
	s := b.sessions
	s.mu.Lock()
	if c := s.cur; c != nil {
		age := now.Sub(c.loggedIn).Round(time.Second).Seconds()
		st.Session = &backends.Session{LoggedIn: c.loggedIn.UTC(), AgeSeconds: age, Credentials: c.served.Source}
	}
	s.mu.Unlock()
	if b.inv != nil {
		st.Inventory = new(b.inv.status())
	}
	for _, r := range s.chain.Refused() {
		st.RefusedCredentials = append(st.RefusedCredentials, backends.RefusedCredentials{Source: r.Source, Refusals: r.Refusals, Last: r.Last.UTC(), Retry: r.Retry.UTC()})
	}
	if c := s.peerCert.Load(); c != nil {
		cert := *c
		cert.ExpiresInSeconds = cert.NotAfter.Sub(now).Round(time.Second).Seconds()
		st.Certificate = &cert
	}
	return st
}

// State implements backends.Backend: two short locks, no allocation. The
// instance UUID is the current session's; "" without one.
func (b *Backend) State() backends.State {
	s := b.sessions
	st := backends.State{Inventoried: b.inv != nil}
	s.mu.Lock()
	if s.cur != nil && s.cur.vim != nil {
		st.InstanceUUID = strings.ToLower(s.cur.vim.ServiceContent.About.InstanceUuid)
	}
	s.mu.Unlock()
	st.Reachability, st.Connect = s.reachState()
	return st
}

// Probe implements backends.Backend: a login when there is no session,
// then one cheap request.
func (b *Backend) Probe(ctx context.Context) (err error) {
	defer sortFailure("vsphere.Probe", &err)
	if err := b.budget.take(ctx, 1); err != nil {
		// Refused before anything was sent: nothing learned of vCenter.
		return err
	}
	c, err := b.sessions.current(ctx)
	if err == nil {
		_, err = methods.GetCurrentTime(ctx, c.vim)
	}
	// No answer within ctx's deadline is Down too: that is what a probe
	// asks (a login's own failure is recorded by the login).
	b.sessions.recordReachability(ctx, "probe", err)
	return err
}

// Options configure one vCenter backend.
type Options struct {
	// Config is resolved (config.Parse, or WithDefaults): New panics on a
	// zero Port or RequestTimeout.
	Config config.VCenter
	// Credentials are the vCenter's logins; a *credentials.Chain is tried
	// in order (see there), any other Source alone.
	Credentials credentials.Source
	// RefusedRetry is when credentials this vCenter refused are sent
	// again unchanged; nil: credentials.DefaultRetry.
	RefusedRetry *credentials.Retry
	// SessionServiceRootCAs are the roots a session service's
	// certificate is verified against (credentials of that form); nil: the
	// system's, as CPI.
	SessionServiceRootCAs *x509.CertPool
	// ServiceAccountTokenFile is sent to a session service when the
	// credentials carry no token; default DefaultServiceAccountTokenFile.
	ServiceAccountTokenFile string
	// WrapTransport, when set, wraps the HTTP transport of both sessions
	// (tests count or delay requests with it).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// KeepAlive is the idle time after which the SOAP session is pinged;
	// default 5 minutes.
	KeepAlive time.Duration
	// TokenLifetime is the lifetime a certificate login asks of vCenter's
	// STS for its token (STS may grant less); the session is renewed with
	// a fresh token when three quarters of it have passed. Default
	// DefaultTokenLifetime.
	TokenLifetime time.Duration
	// UserAgent names the product and version in every request (vCenter's
	// session list shows it); empty: govmomi's.
	UserAgent string
	// Inventory keeps the vCenter's VMs and the entities above them in
	// memory, fed by a PropertyCollector watch, and the tags on those
	// entities, read in bulk; lookups are answered from memory while the
	// inventory is in service. Off, every lookup asks vCenter.
	Inventory bool
	// Heartbeat is the longest the watch waits on vCenter for a change
	// before it must answer anyway; a vCenter silent for Heartbeat plus
	// the request timeout takes the inventory out of service. Default
	// DefaultHeartbeat.
	Heartbeat time.Duration
	// TagRefresh is the age after which the bulk tag cache is re-read in
	// the background; default DefaultTagRefresh.
	TagRefresh time.Duration
}

// orDefault is d, an Options duration, or def when d is not positive.
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Defaults of Options.Heartbeat (the inventory watch's longest silence)
// and Options.TagRefresh (the tag cache's age before a background refresh).
const (
	DefaultHeartbeat  = 5 * time.Second
	DefaultTagRefresh = 5 * time.Minute
)
