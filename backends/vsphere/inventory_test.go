package vsphere

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

var zoneRegion = []string{"k8s-zone", "k8s-region"}

type invFixture struct {
	t      *testing.T
	vc     *vcsim.VCenter
	b      *Backend // with the inventory
	direct *Backend // without: the reference answers
	n      atomic.Int64
}

// newInvFixture starts one simulated vCenter (2 datacenters, 8 VMs) and a
// backend with the inventory, reached through host:port (a proxy in some
// tests), and waits until the inventory is in service.
func newInvFixture(t *testing.T, heartbeat, timeout time.Duration, via func(vc *vcsim.VCenter) (string, int)) *invFixture {
	t.Helper()
	f, err := vcsim.Start(vcsim.Options{VCenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	fx := &invFixture{t: t, vc: f.VCenters[0]}
	host, port := fx.vc.Host, fx.vc.Port
	if via != nil {
		host, port = via(fx.vc)
	}
	opts := func(inventory bool) Options {
		o := optionsVia(fx.vc, host, port, timeout)
		o.Inventory, o.Heartbeat, o.TagRefresh = inventory, heartbeat, time.Hour
		readingHostGroups(&o)
		return o
	}
	o := opts(true)
	o.WrapTransport = vcsim.CountRequests(&fx.n)
	fx.b = New(o)
	fx.b.Start()
	fx.direct = New(opts(false))
	fx.direct.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = fx.b.Close(ctx)
		_ = fx.direct.Close(ctx)
	})
	fx.eventually("the inventory is in service", func() bool { return inService(fx.b) })
	return fx
}

// readingHostGroups makes o's backend read the clusters' host groups:
// every inventory test watches their configurationEx as a stretched
// cluster's CCM does (labels.zoneHostGroups).
func readingHostGroups(o *Options) {
	o.Config.ZoneHostGroups = &config.HostGroupZones{Groups: map[string]string{"site-a": "site-a"}}
}

// optionsVia are the options of a backend for vc, reached at host:port.
func optionsVia(vc *vcsim.VCenter, host string, port int, timeout time.Duration) Options {
	return Options{
		Config: config.VCenter{
			Name: vc.Name, Server: host, Port: port, InsecureFlag: true, RoundTripCount: 1, RequestTimeout: timeout,
		}.WithDefaults(),
		Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)},
	}
}

// eventually polls cond every 20ms for up to 20s.
func (fx *invFixture) eventually(what string, cond func() bool) {
	fx.t.Helper()
	poll.Schedule{Every: 20 * time.Millisecond, Within: 20 * time.Second}.Until(fx.t, what, cond)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func queriesFor(vm *vcsim.VM) []backends.Query {
	return []backends.Query{
		{By: backends.ByUUID, Values: []string{vm.UUID}, AllowCached: true},
		{By: backends.ByUUID, Values: []string{"42ffffff-ffff-4fff-8fff-ffffffffffff", vm.UUID}, AllowCached: true},
		{By: backends.ByName, Values: []string{vm.Name}, AllowCached: true},
		{By: backends.ByIP, Values: []string{vm.IP}, AllowCached: true},
		{By: backends.ByDNSName, Values: []string{vm.HostName}, AllowCached: true},
		{By: backends.ByUUID, Values: []string{vm.UUID}, Datacenters: byName(vm.Datacenter), AllowCached: true},
	}
}

// The inventory answers Find, Get and Tags exactly as vCenter does, and
// once the tags are read in bulk, without a single request.
func TestInventoryAnswersLikeVCenterFromMemory(t *testing.T) {
	fx := newInvFixture(t, time.Minute, 5*time.Second, nil)
	ctx := ctxFor(t)
	round := func() {
		for _, want := range fx.vc.VMs {
			for _, q := range queriesFor(want) {
				got, err := fx.b.Find(ctx, q)
				if err != nil {
					t.Fatalf("Find(%+v): %v", q, err)
				}
				ref, err := fx.direct.Find(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != 1 || got[0].Ref.ID != want.Ref || got[0].Ref.Datacenter != want.Datacenter || !reflect.DeepEqual(got, ref) {
					t.Fatalf("Find(%+v) from the inventory = %+v, vCenter says %+v", q, got, ref)
				}
				vm, err := fx.b.Get(ctx, got[0].Ref)
				if err != nil || !reflect.DeepEqual(*vm, ref[0]) {
					t.Fatalf("Get(%v) = %+v, %v; want %+v", got[0].Ref, vm, err, ref[0])
				}
			}
			vm, _ := fx.b.Get(ctx, backends.VMRef{Datacenter: want.Datacenter, ID: want.Ref})
			tg, err := fx.b.Tags(ctx, vm, zoneRegion)
			if err != nil || tg["k8s-zone"] != want.Zone || tg["k8s-region"] != want.Region {
				t.Fatalf("Tags(%s) = %v, %v; want zone %s region %s", want.Name, tg, err, want.Zone, want.Region)
			}
		}
		// Another datacenter's VM is not served for this one.
		other := fx.vc.VMs[len(fx.vc.VMs)-1]
		if other.Datacenter == fx.vc.VMs[0].Datacenter {
			t.Fatal("fixture: want VMs in two datacenters")
		}
		if vms, err := fx.b.Find(ctx, backends.Query{By: backends.ByName, Values: []string{other.Name}, Datacenters: byName(fx.vc.VMs[0].Datacenter), AllowCached: true}); err != nil || len(vms) != 0 {
			t.Fatalf("Find in the wrong datacenter = %v, %v", vms, err)
		}
	}
	round() // reads the tags in bulk
	fx.n.Store(0)
	round()
	if n := fx.n.Load(); n != 0 {
		t.Fatalf("a second round of %d lookups cost %d vCenter requests, want 0", (len(queriesFor(fx.vc.VMs[0]))+1)*len(fx.vc.VMs), n)
	}
}

// Power, UUID and deletion changes reach the inventory through the watch;
// a VM it no longer holds is NotFound only on vCenter's word.
func TestInventoryFollowsChanges(t *testing.T) {
	fx := newInvFixture(t, time.Minute, 5*time.Second, nil)
	ctx := ctxFor(t)
	vm := fx.vc.VMs[0]
	ref := backends.VMRef{Datacenter: vm.Datacenter, ID: vm.Ref}
	if err := fx.vc.PowerOff(ctx, vm); err != nil {
		t.Fatal(err)
	}
	fx.eventually("the inventory sees the VM powered off", func() bool {
		got, ok := fx.b.inv.get(ref)
		return ok && got.PowerState == backends.PoweredOff
	})

	newUUID := "42abcdef-0000-4000-8000-00000000abcd"
	fx.vc.SetUUID(vm, newUUID)
	fx.eventually("the inventory indexes the new UUID", func() bool {
		vms, ok := fx.b.inv.find(backends.Query{By: backends.ByUUID, Values: []string{newUUID}})
		return ok && len(vms) == 1 && vms[0].Ref == ref
	})
	if vms, ok := fx.b.inv.find(backends.Query{By: backends.ByUUID, Values: []string{vm.UUID}}); !ok || len(vms) != 0 {
		t.Fatalf("old UUID still indexed: %v %v", vms, ok)
	}

	victim := fx.vc.VMs[1]
	if err := fx.vc.Destroy(ctx, victim); err != nil {
		t.Fatal(err)
	}
	fx.eventually("the inventory drops the destroyed VM", func() bool {
		vms, ok := fx.b.inv.find(backends.Query{By: backends.ByName, Values: []string{victim.Name}})
		return ok && len(vms) == 0
	})
	fx.n.Store(0)
	_, err := fx.b.Get(ctx, backends.VMRef{Datacenter: victim.Datacenter, ID: victim.Ref})
	if !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get(destroyed) = %v, want ErrNotFound", err)
	}
	if fx.n.Load() == 0 {
		t.Fatal("Get reported NotFound from memory: only vCenter may say a VM is gone")
	}
}

// Guest host names are indexed as vCenter's FindAllByDnsName matches them
// (whole name, any case) and follow the guest's changes; the inventory
// answers from memory what vCenter answers, twins included.
func TestInventoryFindsByGuestHostName(t *testing.T) {
	fx := newInvFixture(t, time.Minute, 5*time.Second, nil)
	ctx := ctxFor(t)
	vm, twin := fx.vc.VMs[0], fx.vc.VMs[5]
	old := vm.HostName
	dns := func(name string) backends.Query {
		return backends.Query{By: backends.ByDNSName, Values: []string{name}, AllowCached: true}
	}
	refs := func(vms []backends.VM) []string {
		var out []string
		for _, v := range vms {
			out = append(out, v.Ref.Datacenter+"/"+v.Ref.ID)
		}
		return out
	}
	// Both paths agree, and the inventory's answer costs no request.
	same := func(q backends.Query, want ...*vcsim.VM) {
		t.Helper()
		fx.n.Store(0)
		got, err := fx.b.Find(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if n := fx.n.Load(); n != 0 {
			t.Fatalf("Find(%v) from the inventory cost %d requests", q.Values, n)
		}
		ref, err := fx.direct.Find(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var wantRefs []string
		for _, w := range want {
			wantRefs = append(wantRefs, w.Datacenter+"/"+w.Ref)
		}
		if fmt.Sprint(refs(got)) != fmt.Sprint(wantRefs) || !reflect.DeepEqual(got, ref) {
			t.Fatalf("Find(%v): inventory %v, vCenter %v, want %v", q.Values, refs(got), refs(ref), wantRefs)
		}
	}

	fx.vc.SetGuestHostName(vm, "node-a.example.com")
	fx.eventually("the inventory indexes the new host name", func() bool {
		vms, ok := fx.b.inv.find(dns("node-a.example.com"))
		return ok && len(vms) == 1 && vms[0].Ref.ID == vm.Ref
	})
	same(dns("node-a.example.com"), vm)
	same(dns("NODE-A.Example.com"), vm) // CPI lowercases what it sends
	same(dns(old))                      // the old name is gone
	same(dns("node-a"))                 // a short name is not the FQDN
	same(dns("node-a.example"))
	same(dns(""))

	// A guest reporting capitals: vCenter matches it case-insensitively
	// (vcsim only exactly, so only the inventory is asked here).
	fx.vc.SetGuestHostName(vm, "Node-A.Example.COM")
	fx.eventually("the inventory indexes the capitalised host name", func() bool {
		vms, ok := fx.b.inv.find(dns("node-a.example.com"))
		return ok && len(vms) == 1 && vms[0].Ref.ID == vm.Ref && vms[0].GuestHostName == "Node-A.Example.COM"
	})

	// Two VMs reporting one name: both are answered, the caller decides.
	fx.vc.SetGuestHostName(vm, "shared.example.com")
	fx.vc.SetGuestHostName(twin, "shared.example.com")
	fx.eventually("the inventory indexes both", func() bool {
		vms, ok := fx.b.inv.find(dns("shared.example.com"))
		return ok && len(vms) == 2
	})
	want := []*vcsim.VM{vm, twin}
	if want[1].Ref < want[0].Ref {
		want[0], want[1] = want[1], want[0]
	}
	same(dns("shared.example.com"), want...)
	q := dns("shared.example.com")
	q.Datacenters = byName(twin.Datacenter)
	if vm.Datacenter == twin.Datacenter {
		t.Fatal("fixture: want the two VMs in two datacenters")
	}
	same(q, twin)
}

// A VM missing from the inventory (a watch that has not caught up) is
// "none known" to AllowCached queries and found by direct ones: the
// backend never turns the inventory's silence into absence.
func TestInventorySilenceIsNotAbsence(t *testing.T) {
	fx := newInvFixture(t, time.Minute, 5*time.Second, nil)
	ctx := ctxFor(t)
	vm := fx.vc.VMs[2]
	fx.b.inv.mu.Lock()
	st := fx.b.inv.holding(vm.Ref)
	rec := st.vms[vm.Ref]
	st.unindex(rec)
	delete(st.vms, vm.Ref)
	fx.b.inv.mu.Unlock()

	q := backends.Query{By: backends.ByUUID, Values: []string{vm.UUID}, AllowCached: true}
	if vms, err := fx.b.Find(ctx, q); err != nil || len(vms) != 0 {
		t.Fatalf("AllowCached Find of a VM the inventory lacks = %v, %v; want none known", vms, err)
	}
	q.AllowCached = false
	if vms, err := fx.b.Find(ctx, q); err != nil || len(vms) != 1 || vms[0].Ref.ID != vm.Ref {
		t.Fatalf("direct Find = %v, %v; want the VM", vms, err)
	}
	got, err := fx.b.Get(ctx, backends.VMRef{Datacenter: vm.Datacenter, ID: vm.Ref})
	if err != nil || got.UUID != vm.UUID {
		t.Fatalf("Get of a VM the inventory lacks = %v, %v; want it, from vCenter", got, err)
	}
}

// The watch is lost (every WaitForUpdatesEx fails): lookups fall back to
// direct calls and stay right, a VM deleted meanwhile is NotFound only
// after vCenter said so, and the watch comes back by itself.
func TestInventoryWatchLostFallsBack(t *testing.T) {
	fx := newInvFixture(t, 500*time.Millisecond, 2*time.Second, nil)
	ctx := ctxFor(t)
	faults := fx.vc.InjectFault(simulator.FaultTypeGeneric, 1, "WaitForUpdatesEx")
	fx.eventually("the inventory goes out of service", func() bool { return !inService(fx.b) })

	victim := fx.vc.VMs[3]
	fx.destroyWithoutWatching(ctx, victim)
	for _, vm := range fx.vc.VMs {
		if vm == victim {
			continue
		}
		fx.n.Store(0)
		vms, err := fx.b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{vm.UUID}, AllowCached: true})
		if err != nil || len(vms) != 1 || vms[0].Name != vm.Name {
			t.Fatalf("Find(%s) with the watch down = %v, %v", vm.Name, vms, err)
		}
		if fx.n.Load() == 0 {
			t.Fatalf("Find(%s) answered from an out-of-sync inventory", vm.Name)
		}
	}
	fx.n.Store(0)
	if _, err := fx.b.Get(ctx, backends.VMRef{Datacenter: victim.Datacenter, ID: victim.Ref}); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get(deleted while the watch was down) = %v, want ErrNotFound", err)
	}
	if fx.n.Load() == 0 {
		t.Fatal("NotFound without asking vCenter")
	}
	if vms, err := fx.b.Find(ctx, backends.Query{By: backends.ByName, Values: []string{victim.Name}, AllowCached: true}); err != nil || len(vms) != 0 {
		t.Fatalf("Find(deleted) = %v, %v", vms, err)
	}

	faults.Remove()
	fx.eventually("the inventory is back in service", func() bool { return inService(fx.b) })
	if vms, ok := fx.b.inv.find(backends.Query{By: backends.ByName, Values: []string{victim.Name}}); !ok || len(vms) != 0 {
		t.Fatalf("reloaded inventory still holds the deleted VM: %v", vms)
	}
}

// A vCenter that stops answering takes the inventory out of service within
// heartbeat + requestTimeout: its lookups then fail instead of being served
// from a copy nobody can vouch for.
func TestInventoryOutOfServiceWhenVCenterGoesSilent(t *testing.T) {
	var proxy *vcsim.Proxy
	fx := newInvFixture(t, time.Second, time.Second, func(vc *vcsim.VCenter) (string, int) {
		p, err := vc.NewProxy()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		proxy = p
		return p.Host(), p.Port()
	})
	ctx := ctxFor(t)
	if err := proxy.SetMode(vcsim.Blackhole); err != nil {
		t.Fatal(err)
	}
	silent := time.Now()
	fx.eventually("the inventory goes out of service", func() bool { return !inService(fx.b) })
	if d := time.Since(silent); d > 5*time.Second {
		t.Fatalf("out of service after %s, want within heartbeat + requestTimeout (2s)", d)
	}
	vm := fx.vc.VMs[0]
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if vms, err := fx.b.Find(cctx, backends.Query{By: backends.ByUUID, Values: []string{vm.UUID}, AllowCached: true}); err == nil {
		t.Fatalf("Find with vCenter silent = %v, want an error", vms)
	}
	if err := proxy.SetMode(vcsim.Pass); err != nil {
		t.Fatal(err)
	}
	fx.eventually("the inventory is back in service", func() bool { return inService(fx.b) })
}

// Tags: one bulk read serves every VM; a category not in the cache is read
// from vCenter at once (a tag just attached is seen), and the cache is
// re-read in the background once stale.
func TestTagCache(t *testing.T) {
	fx := newInvFixture(t, time.Minute, 5*time.Second, nil)
	ctx := ctxFor(t)
	vmOf := func(v *vcsim.VM) *backends.VM {
		got, err := fx.b.Get(ctx, backends.VMRef{Datacenter: v.Datacenter, ID: v.Ref})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := vmOf(fx.vc.VMs[0])
	if _, err := fx.b.Tags(ctx, first, zoneRegion); err != nil {
		t.Fatal(err)
	}
	fx.n.Store(0)
	for _, v := range fx.vc.VMs {
		if tg, err := fx.b.Tags(ctx, vmOf(v), zoneRegion); err != nil || tg["k8s-zone"] != v.Zone {
			t.Fatalf("Tags(%s) = %v, %v", v.Name, tg, err)
		}
	}
	if n := fx.n.Load(); n != 0 {
		t.Fatalf("tags of %d VMs after the bulk read cost %d requests, want 0", len(fx.vc.VMs), n)
	}

	// A new category attached to the VM's datacenter: not in the cache,
	// read directly, then served from the cache.
	tm := fx.tagManager(ctx)
	cat, err := tm.CreateCategory(ctx, &tags.Category{Name: "k8s-rack", Cardinality: "SINGLE"})
	if err != nil {
		t.Fatal(err)
	}
	dc := fx.entityOf(first.Ref.Datacenter, "Datacenter")
	fx.attach(ctx, tm, cat, "rack-7", dc)
	fx.n.Store(0)
	if tg, err := fx.b.Tags(ctx, first, []string{"k8s-rack"}); err != nil || tg["k8s-rack"] != "rack-7" {
		t.Fatalf("Tags(k8s-rack) just after attaching = %v, %v", tg, err)
	}
	if fx.n.Load() == 0 {
		t.Fatal("a category missing from the cache was not looked for in vCenter")
	}
	fx.n.Store(0)
	if tg, err := fx.b.Tags(ctx, first, []string{"k8s-rack"}); err != nil || tg["k8s-rack"] != "rack-7" || fx.n.Load() != 0 {
		t.Fatalf("Tags(k8s-rack) again = %v, %v, %d requests; want from the cache", tg, err, fx.n.Load())
	}

	// A re-tagged datacenter (another rack): seen after the background
	// refresh that a lookup on a stale cache starts.
	fx.b.bulkTags.refresh = 0 // every snapshot is stale from now on
	cat2, err := tm.CreateCategory(ctx, &tags.Category{Name: "k8s-row", Cardinality: "SINGLE"})
	if err != nil {
		t.Fatal(err)
	}
	fx.attach(ctx, tm, cat2, "row-1", dc)
	fx.eventually("the background refresh reads the new tag", func() bool {
		tg, err := fx.b.cachedTags(ctx, first, []string{"k8s-row"})
		return err && tg["k8s-row"] == "row-1"
	})
}

// destroyWithoutWatching powers vm off and destroys it, following the
// tasks by polling properties: task.Wait would use WaitForUpdatesEx, which
// the test has broken.
func (fx *invFixture) destroyWithoutWatching(ctx context.Context, vm *vcsim.VM) {
	fx.t.Helper()
	c, err := fx.vc.Client(ctx)
	if err != nil {
		fx.t.Fatal(err)
	}
	defer func() { _ = c.Logout(context.Background()) }()
	o := object.NewVirtualMachine(c.Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: vm.Ref})
	ref := backends.VMRef{Datacenter: vm.Datacenter, ID: vm.Ref}
	if _, err := o.PowerOff(ctx); err != nil {
		fx.t.Fatal(err)
	}
	fx.eventually("the VM is powered off", func() bool {
		got, err := fx.direct.Get(ctx, ref)
		return err == nil && got.PowerState == backends.PoweredOff
	})
	if _, err := o.Destroy(ctx); err != nil {
		fx.t.Fatal(err)
	}
	fx.eventually("the VM is destroyed", func() bool {
		_, err := fx.direct.Get(ctx, ref)
		return errors.Is(err, backends.ErrNotFound)
	})
}

func (fx *invFixture) tagManager(ctx context.Context) *tags.Manager {
	c, err := fx.vc.Client(ctx)
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.t.Cleanup(func() { _ = c.Logout(context.Background()) })
	rc := rest.NewClient(c.Client)
	if err := rc.Login(ctx, url.UserPassword(fx.vc.User, fx.vc.Password)); err != nil {
		fx.t.Fatal(err)
	}
	return tags.NewManager(rc)
}

func (fx *invFixture) attach(ctx context.Context, tm *tags.Manager, category, name string, obj types.ManagedObjectReference) {
	id, err := tm.CreateTag(ctx, &tags.Tag{Name: name, CategoryID: category})
	if err != nil {
		fx.t.Fatal(err)
	}
	if err := tm.AttachTag(ctx, id, obj); err != nil {
		fx.t.Fatal(err)
	}
}

func (fx *invFixture) entityOf(name, kind string) types.ManagedObjectReference {
	fx.b.inv.mu.RLock()
	defer fx.b.inv.mu.RUnlock()
	for _, w := range fx.b.inv.views {
		for r, e := range w.state.entities {
			if r.Type == kind && e.name == name {
				return r
			}
		}
	}
	fx.t.Fatalf("no %s %q in the inventory", kind, name)
	return types.ManagedObjectReference{}
}

// A CCM that starts in a running cluster asks about every Node at once,
// before its inventory has loaded: those lookups wait for the first load
// and are answered from it, instead of each going to vCenter.
func TestLookupsAtStartWaitForTheFirstLoad(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{})
	// Login, collector, view, filter and the load are round trips of their
	// own: at this delay the load is under way for a second or more.
	p.SetDelay(200 * time.Millisecond)
	before, _ := vc.SOAPCalls()
	o := optionsVia(vc, p.Host(), p.Port(), 20*time.Second)
	o.Inventory, o.Heartbeat, o.TagRefresh = true, time.Second, time.Hour
	b := New(o)
	b.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	ctx := ctxFor(t)
	if inService(b) {
		t.Fatal("the inventory loaded before the first lookup: the test proves nothing")
	}
	for _, want := range firstPerDatacenter(vc) {
		vms, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{want.UUID}, AllowCached: true})
		if err != nil || len(vms) != 1 || vms[0].Ref.ID != want.Ref {
			t.Fatalf("Find(%s) at start = %+v, %v", want.Name, vms, err)
		}
		tg, err := b.Tags(ctx, &vms[0], zoneRegion)
		if err != nil || tg["k8s-zone"] != want.Zone || tg["k8s-region"] != want.Region {
			t.Fatalf("Tags(%s) at start = %v, %v; want zone %s region %s", want.Name, tg, err, want.Zone, want.Region)
		}
	}
	after, _ := vc.SOAPCalls()
	// The inventory's own: one snapshot per watch (the datacenter list's
	// and each datacenter's).
	snapshots := int64(1 + len(firstPerDatacenter(vc)))
	for m, inventory := range map[string]int64{"FindAllByUuid": 0, "RetrieveProperties": 0, "RetrievePropertiesEx": snapshots} {
		if n := after[m] - before[m]; n != inventory {
			t.Errorf("%d %s calls, the inventory's %d: lookups at start went to vCenter directly", n, m, inventory)
		}
	}
}

// firstPerDatacenter is the first VM of each datacenter of vc.
func firstPerDatacenter(vc *vcsim.VCenter) []*vcsim.VM {
	var out []*vcsim.VM
	seen := map[string]bool{}
	for _, vm := range vc.VMs {
		if !seen[vm.Datacenter] {
			seen[vm.Datacenter] = true
			out = append(out, vm)
		}
	}
	return out
}

// Zone and region are looked for as CPI looks for them
// (pkg/cloudprovider/vsphere/zones.go): on the VM's host and what holds
// it, then on its resource pool and what holds that, then on the VM and
// its folders; the first of these ancestries that has both wins, whole (a
// zone from one ancestry is never paired with a region from another). The
// inventory's cached answer and vCenter's direct one agree.
func TestZoneAndRegionInCPIsAncestryOrder(t *testing.T) {
	fx := newInvFixture(t, time.Minute, 5*time.Second, nil)
	ctx := ctxFor(t)
	tm := fx.tagManager(ctx)
	category := func(name string) string {
		id, err := tm.CreateCategory(ctx, &tags.Category{Name: name, Cardinality: "SINGLE"})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	zoneCat, regionCat := category("cpi-zone"), category("cpi-region")
	cats := []string{"cpi-zone", "cpi-region"}
	vm, err := fx.direct.Get(ctx, backends.VMRef{Datacenter: fx.vc.VMs[0].Datacenter, ID: fx.vc.VMs[0].Ref})
	if err != nil {
		t.Fatal(err)
	}
	if vm.Host == "" || vm.ResourcePool == "" {
		t.Fatalf("VM %s: host %q, resource pool %q; want both", vm.Name, vm.Host, vm.ResourcePool)
	}
	host := types.ManagedObjectReference{Type: "HostSystem", Value: vm.Host}
	pool := types.ManagedObjectReference{Type: vm.ResourcePoolType, Value: vm.ResourcePool}
	want := func(step, zone, region string) {
		t.Helper()
		got, err := fx.direct.Tags(ctx, vm, cats)
		if err != nil || got["cpi-zone"] != zone || got["cpi-region"] != region {
			t.Fatalf("%s: direct Tags = %v, %v; want zone %q region %q", step, got, err, zone, region)
		}
		fx.b.bulkTags.refresh = 0 // a stale cache refreshes in the background
		fx.eventually(step+": the inventory's answer agrees", func() bool {
			got, err := fx.b.Tags(ctx, vm, cats)
			return err == nil && got["cpi-zone"] == zone && got["cpi-region"] == region
		})
	}

	// The host ancestry has a zone only: incomplete, so the resource pool's
	// ancestry answers, both from there.
	fx.attach(ctx, tm, zoneCat, "host-zone", host)
	fx.attach(ctx, tm, zoneCat, "pool-zone", pool)
	fx.attach(ctx, tm, regionCat, "pool-region", pool)
	want("host zone only", "pool-zone", "pool-region")
	// A region on the host's datacenter completes the host ancestry: it wins.
	fx.attach(ctx, tm, regionCat, "dc-region", fx.entityOf(vm.Ref.Datacenter, "Datacenter"))
	want("host ancestry complete", "host-zone", "dc-region")
	// CPI's walk (issue 22): a zone on the host's cluster too, the region
	// above both: the cluster's zone overwrites the host's, as CPI's
	// LookupZoneByMoref does until it has found the region as well.
	fx.b.inv.mu.RLock()
	cluster := fx.b.inv.holding(vm.Ref.ID).entities[host].parent
	fx.b.inv.mu.RUnlock()
	if cluster.Type != "ClusterComputeResource" && cluster.Type != "ComputeResource" {
		t.Fatalf("host %s's parent is %v; want its compute resource", host.Value, cluster)
	}
	fx.attach(ctx, tm, zoneCat, "cluster-zone", cluster)
	want("zone on host and cluster, region on the datacenter", "cluster-zone", "dc-region")
	// A region on the host: both found there, the walk stops at the host.
	fx.attach(ctx, tm, regionCat, "host-region", host)
	want("zone and region on the host", "host-zone", "host-region")

	// Another VM whose own tags are the only complete set: the VM ancestry,
	// the VM itself included.
	other, err := fx.direct.Get(ctx, backends.VMRef{Datacenter: fx.vc.VMs[len(fx.vc.VMs)-1].Datacenter, ID: fx.vc.VMs[len(fx.vc.VMs)-1].Ref})
	if err != nil {
		t.Fatal(err)
	}
	zoneCat2, regionCat2 := category("vm-zone"), category("vm-region")
	fx.attach(ctx, tm, zoneCat2, "own-zone", vmRef(other.Ref.ID))
	fx.attach(ctx, tm, regionCat2, "own-region", vmRef(other.Ref.ID))
	got, err := fx.direct.Tags(ctx, other, []string{"vm-zone", "vm-region"})
	if err != nil || got["vm-zone"] != "own-zone" || got["vm-region"] != "own-region" {
		t.Fatalf("tags on the VM itself: %v, %v", got, err)
	}
	fx.eventually("the inventory reads tags on the VM itself", func() bool {
		got, err := fx.b.Tags(ctx, other, []string{"vm-zone", "vm-region"})
		return err == nil && got["vm-zone"] == "own-zone"
	})
}

// inventoryOf is b's inventory's status; zero without one.
func inventoryOf(b *Backend) backends.InventoryStatus {
	if st := b.Status().Inventory; st != nil {
		return *st
	}
	return backends.InventoryStatus{}
}

// inService reports whether b's inventory answers lookups now.
func inService(b *Backend) bool {
	st := b.Status().Inventory
	return st != nil && st.InService
}
