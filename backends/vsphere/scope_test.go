package vsphere

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// holding is the state of the datacenter watch holding VM id, nil when
// none does; the caller holds inv.mu.
func (inv *inventory) holding(id string) *invState {
	for _, w := range inv.views {
		if w.state != nil {
			if _, ok := w.state.vms[id]; ok {
				return w.state
			}
		}
	}
	return nil
}

// loadedInventory is an inventory in service for an hour holding s, a
// whole vCenter: its list and every datacenter's state.
func loadedInventory(s *invState) *inventory {
	fresh := time.Now().Add(time.Hour)
	inv := &inventory{list: &watched{state: s, freshUntil: fresh}, views: map[types.ManagedObjectReference]*watched{}}
	for r := range s.entities {
		if r.Type == "Datacenter" {
			inv.views[r] = &watched{dc: r, state: s, freshUntil: fresh}
		}
	}
	return inv
}

// scopedFixture starts one simulated vCenter of o's shape and a backend
// with the inventory scoped to specs, counting its requests, and waits
// until the inventory is in service.
func scopedFixture(t *testing.T, o vcsim.Options, specs ...string) (*vcsim.VCenter, *Backend) {
	t.Helper()
	o.VCenters = 1
	f, err := vcsim.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	opts := optionsVia(vc, vc.Host, vc.Port, 5*time.Second)
	opts.Config.Datacenters = specs
	opts.Inventory, opts.Heartbeat, opts.TagRefresh = true, time.Minute, time.Hour
	b := New(opts)
	b.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	waitUntil(t, "the inventory is in service", func() bool { return inService(b) })
	return vc, b
}

// waitUntil polls cond every 10ms for up to 20s.
var waitUntil = poll.Schedule{Every: 10 * time.Millisecond, Within: 20 * time.Second}.Until

func vmsOf(vc *vcsim.VCenter, dc string) []*vcsim.VM {
	var out []*vcsim.VM
	for _, vm := range vc.VMs {
		if vm.Datacenter == dc {
			out = append(out, vm)
		}
	}
	return out
}

func specsOf(t *testing.T, raw ...string) []config.DatacenterSpec {
	t.Helper()
	return config.VCenter{Datacenters: raw}.DatacenterSpecs()
}

// soapDelta runs fn and returns the SOAP calls vc handled meanwhile, by
// method.
func soapDelta(vc *vcsim.VCenter, fn func()) map[string]int64 {
	before, _ := vc.SOAPCalls()
	fn()
	after, _ := vc.SOAPCalls()
	for m, n := range before {
		after[m] -= n
	}
	return after
}

// The inventory holds the datacenters the config names, by name and by
// path, and nothing of the others; a VM there is still found, by a direct
// call, whenever a query searches its datacenter, and the datacenter list
// (Backend.Datacenters) still lists every datacenter.
func TestInventoryHoldsOnlyConfiguredDatacenters(t *testing.T) {
	vc, b := scopedFixture(t, vcsim.Options{Datacenters: 3, Folders: 1}, "DC0", "/F0/DC2")
	ctx := ctxFor(t)
	if got := vmsOf(vc, "DC2"); len(got) == 0 || got[0].DatacenterPath != "/F0/DC2" {
		t.Fatalf("the fixture's DC2 is not /F0/DC2: %+v", got)
	}
	held := len(vmsOf(vc, "DC0")) + len(vmsOf(vc, "DC2"))
	if st := inventoryOf(b); st.VMs != held {
		t.Fatalf("inventory holds %d VMs; want %d, those of DC0 and /F0/DC2 only", st.VMs, held)
	}
	outside := vmsOf(vc, "DC1")[0]
	if _, ok := b.inv.get(backends.VMRef{Datacenter: "DC1", ID: outside.Ref}); ok {
		t.Fatal("the inventory holds a VM of DC1, which the config does not name")
	}
	for _, specs := range [][]config.DatacenterSpec{nil, specsOf(t, "DC1"), specsOf(t, "DC0", "DC1")} {
		q := backends.Query{By: backends.ByUUID, Values: []string{outside.UUID}, Datacenters: specs, AllowCached: true}
		if _, ok := b.inv.find(q); ok {
			t.Fatalf("the inventory answered a query searching %v, which it does not hold all of", specs)
		}
		var vms []backends.VM
		calls := soapDelta(vc, func() {
			var err error
			if vms, err = b.Find(ctx, q); err != nil {
				t.Fatal(err)
			}
		})
		if len(vms) != 1 || vms[0].Ref.ID != outside.Ref || vms[0].Ref.Datacenter != "DC1" || calls["FindAllByUuid"] != 1 {
			t.Fatalf("Find in %v of a VM of DC1 = %+v (calls %v); want it, asked of vCenter", specs, vms, calls)
		}
	}
	// The configured ones are answered from memory: the VM of DC1 is none
	// known there, without a call.
	q := backends.Query{By: backends.ByUUID, Values: []string{outside.UUID}, Datacenters: specsOf(t, "DC0", "/F0/DC2"), AllowCached: true}
	if vms, ok := b.inv.find(q); !ok || len(vms) != 0 {
		t.Fatalf("inventory find in its datacenters = %v, %v; want none known", vms, ok)
	}
	for _, vm := range append(vmsOf(vc, "DC0"), vmsOf(vc, "DC2")...) {
		q.Values = []string{vm.UUID}
		if vms, ok := b.inv.find(q); !ok || len(vms) != 1 || vms[0].Ref.ID != vm.Ref || vms[0].DatacenterPath != vm.DatacenterPath {
			t.Fatalf("inventory find of %s = %+v, %v; want it", vm.Name, vms, ok)
		}
	}
	got, err := b.Get(ctx, backends.VMRef{Datacenter: "DC1", ID: outside.Ref})
	if err != nil || got.UUID != outside.UUID {
		t.Fatalf("Get of a VM of DC1 = %v, %v; want it, from vCenter", got, err)
	}
	dcs, err := b.Datacenters(ctx)
	if err != nil || len(dcs) != 3 {
		t.Fatalf("Datacenters = %v, %v; want all 3", dcs, err)
	}
}

// A datacenter added to the config gets a watch of its own, the others
// keep theirs (no collector, filter or load of theirs again); one removed
// has its watch stopped and its VMs dropped.
func TestInventoryFollowsDatacenterEdits(t *testing.T) {
	vc, b := scopedFixture(t, vcsim.Options{Datacenters: 3}, "DC0")
	dc0, dc1 := vmsOf(vc, "DC0"), vmsOf(vc, "DC1")
	ref0 := datacenterRef(dc0[0].DatacenterID)
	b.inv.mu.RLock()
	kept := b.inv.views[ref0]
	keptState := kept.state
	b.inv.mu.RUnlock()
	if st := inventoryOf(b); st.VMs != len(dc0) {
		t.Fatalf("inventory holds %d VMs; want DC0's %d", st.VMs, len(dc0))
	}
	calls := soapDelta(vc, func() {
		b.SetDatacenters(specsOf(t, "DC0", dc1[0].DatacenterID))
		waitUntil(t, "DC1 held", func() bool {
			st := inventoryOf(b)
			return st.InService && st.VMs == len(dc0)+len(dc1)
		})
	})
	if calls["CreatePropertyCollector"] != 1 || calls["CreateFilter"] != 1 || calls["CreateContainerView"] != 1 {
		t.Fatalf("adding DC1 made %v; want one collector, view and filter: DC1's", calls)
	}
	b.inv.mu.RLock()
	same := b.inv.views[ref0] == kept && kept.state == keptState
	b.inv.mu.RUnlock()
	if !same {
		t.Fatal("adding DC1 reloaded DC0")
	}
	q := backends.Query{By: backends.ByUUID, Values: []string{dc1[0].UUID}, Datacenters: specsOf(t, "DC1"), AllowCached: true}
	if vms, ok := b.inv.find(q); !ok || len(vms) != 1 {
		t.Fatalf("inventory find in DC1 after the edit = %v, %v; want its VM", vms, ok)
	}

	calls = soapDelta(vc, func() {
		b.SetDatacenters(specsOf(t, dc1[0].DatacenterID))
		waitUntil(t, "DC0 dropped", func() bool {
			st := inventoryOf(b)
			return st.InService && st.VMs == len(dc1)
		})
	})
	if calls["CreateFilter"] != 0 {
		t.Fatalf("removing DC0 made %v; want no new watch", calls)
	}
	if _, ok := b.inv.get(backends.VMRef{Datacenter: "DC0", ID: dc0[0].Ref}); ok {
		t.Fatal("a VM of DC0 is still held after DC0 left the config")
	}
	q = backends.Query{By: backends.ByUUID, Values: []string{dc0[0].UUID}, Datacenters: specsOf(t, "DC0"), AllowCached: true}
	if _, ok := b.inv.find(q); ok {
		t.Fatal("the inventory answers for DC0 after it left the config")
	}
	waitUntil(t, "DC0's collector destroyed", func() bool {
		c, _ := vc.SOAPCalls()
		return c["DestroyPropertyCollector"] >= 1
	})
}

// With every datacenter configured, one created later is watched too;
// until it is loaded, a query searching every datacenter is not answered
// from memory.
func TestInventoryWatchesADatacenterCreatedLater(t *testing.T) {
	vc, b := scopedFixture(t, vcsim.Options{Datacenters: 1})
	ctx := ctxFor(t)
	c, err := vc.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := object.NewRootFolder(c.Client).CreateDatacenter(ctx, "DC-late")
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "DC-late watched and loaded", func() bool {
		b.inv.mu.RLock()
		defer b.inv.mu.RUnlock()
		w := b.inv.views[dc.Reference()]
		return w != nil && w.state != nil
	})
	if dcs, ok := b.inv.datacenters(); !ok || !slices.ContainsFunc(dcs, func(d config.Datacenter) bool { return d.Name == "DC-late" && d.Path == "/DC-late" }) {
		t.Fatalf("datacenters = %v, %v; want DC-late among them", dcs, ok)
	}
	if _, ok := b.inv.find(backends.Query{By: backends.ByName, Values: []string{"x"}}); !ok {
		t.Fatal("the inventory of every datacenter, all loaded, does not answer")
	}
}

// A query is answered from memory only when every datacenter it searches
// is loaded: one still loading, or not watched, sends it to vCenter.
func TestInventoryNeverAnswersForADatacenterLoading(t *testing.T) {
	s := newInvState()
	s.apply(benchUpdates(10)) // datacenter-1, "dc", and its 10 VMs
	list := newInvState()
	list.apply(benchUpdates(0))
	list.apply([]types.ObjectUpdate{{Kind: types.ObjectUpdateKindEnter, Obj: datacenterRef("datacenter-2"), ChangeSet: []types.PropertyChange{
		{Name: "name", Op: types.PropertyChangeOpAssign, Val: "dc2"},
		{Name: "parent", Op: types.PropertyChangeOpAssign, Val: types.ManagedObjectReference{Type: "Folder", Value: "group-d1"}},
	}}})
	fresh := time.Now().Add(time.Hour)
	inv := &inventory{
		list:  &watched{state: list, freshUntil: fresh},
		specs: specsOf(t, "dc", "dc2"),
		views: map[types.ManagedObjectReference]*watched{
			datacenterRef("datacenter-1"): {dc: datacenterRef("datacenter-1"), state: s, freshUntil: fresh},
			datacenterRef("datacenter-2"): {dc: datacenterRef("datacenter-2")}, // loading
		},
	}
	q := func(dcs ...string) backends.Query {
		return backends.Query{By: backends.ByUUID, Values: []string{benchUUID(3)}, Datacenters: specsOf(t, dcs...)}
	}
	if vms, ok := inv.find(q("dc")); !ok || len(vms) != 1 {
		t.Fatalf("find in the loaded datacenter = %v, %v; want its VM", vms, ok)
	}
	for _, dcs := range [][]string{{"dc2"}, {"dc", "dc2"}, nil} {
		if _, ok := inv.find(q(dcs...)); ok {
			t.Fatalf("find in %v answered from memory while dc2 loads", dcs)
		}
	}
	if st := inv.status(); st.InService {
		t.Fatal("in service while a configured datacenter loads")
	}
	if _, _, ok := inv.uuids(0); ok {
		t.Fatal("UUIDs answered while a configured datacenter loads: a twin there would be missed")
	}
	if vm, ok := inv.get(backends.VMRef{Datacenter: "dc", ID: "vm-3"}); !ok || vm.UUID != benchUUID(3) {
		t.Fatalf("get of a VM of the loaded datacenter = %v, %v; want it", vm, ok)
	}
	inv.views[datacenterRef("datacenter-2")].state, inv.views[datacenterRef("datacenter-2")].freshUntil = newInvState(), fresh
	if _, ok := inv.find(q("dc", "dc2")); !ok {
		t.Fatal("find in both, both loaded, not answered")
	}
	if st := inv.status(); !st.InService || st.VMs != 10 {
		t.Fatalf("status %+v; want in service, 10 VMs", st)
	}
}
