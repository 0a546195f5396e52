package vsphere

import (
	"cmp"
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// byName restricts a query to the datacenters named.
func byName(names ...string) []config.DatacenterSpec {
	var out []config.DatacenterSpec
	for _, n := range names {
		out = append(out, config.DatacenterSpec{Raw: n, Kind: config.DatacenterByName, Value: n})
	}
	return out
}

func mustSpec(t *testing.T, s string) config.DatacenterSpec {
	t.Helper()
	spec, err := config.ParseDatacenter(s)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// dcFixture is one simulated vCenter whose second datacenter sits in a
// folder (/F0/DC1), read by a backend with the inventory and one without.
type dcFixture struct {
	vc                *vcsim.VCenter
	inventory, direct *Backend
}

func newDCFixture(t *testing.T) *dcFixture {
	t.Helper()
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 2, Folders: 1, MachinesPerPool: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	fx := &dcFixture{vc: f.VCenters[0]}
	o := optionsVia(fx.vc, fx.vc.Host, fx.vc.Port, 10*time.Second)
	fx.direct = New(o)
	fx.direct.Start()
	o.Inventory, o.TagRefresh = true, time.Hour
	fx.inventory = New(o)
	fx.inventory.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = fx.inventory.Close(ctx)
		_ = fx.direct.Close(ctx)
	})
	poll.Schedule{Every: 20 * time.Millisecond, Within: 20 * time.Second}.Until(t, "the inventory in service", func() bool { return inService(fx.inventory) })
	return fx
}

// lookups are the two ways the backend answers: from the inventory, and
// from vCenter directly.
func (fx *dcFixture) lookups() map[string]struct {
	b           *Backend
	allowCached bool
} {
	return map[string]struct {
		b           *Backend
		allowCached bool
	}{"inventory": {fx.inventory, true}, "direct": {fx.direct, false}}
}

// A VM carries its datacenter's name, ID and inventory path, the same
// whether read from the inventory or directly; the path is what
// govmomi's finder (CPI's lookup) gives its datacenter.
func TestVMsCarryTheirDatacentersIDAndPath(t *testing.T) {
	fx := newDCFixture(t)
	ctx := ctxFor(t)
	cur, err := fx.direct.sessions.current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vc := cur.vim
	finder := find.NewFinder(vc, false)
	sawFolder := false
	for _, want := range fx.vc.VMs {
		dc, err := finder.Datacenter(ctx, want.Datacenter)
		if err != nil {
			t.Fatal(err)
		}
		if dc.InventoryPath != want.DatacenterPath || dc.Reference().Value != want.DatacenterID {
			t.Fatalf("fixture: finder says %s %s, vcsim %s %s", dc.InventoryPath, dc.Reference().Value, want.DatacenterPath, want.DatacenterID)
		}
		sawFolder = sawFolder || want.DatacenterPath == "/F0/"+want.Datacenter
		for how, l := range fx.lookups() {
			vms, err := l.b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{want.UUID}, AllowCached: l.allowCached})
			if err != nil || len(vms) != 1 {
				t.Fatalf("%s: Find(%s) = %v, %v", how, want.Name, vms, err)
			}
			got := vms[0].Datacenter()
			if wantDC := (config.Datacenter{Name: want.Datacenter, ID: want.DatacenterID, Path: want.DatacenterPath}); got != wantDC {
				t.Errorf("%s: %s is in %+v, want %+v", how, want.Name, got, wantDC)
			}
		}
	}
	if !sawFolder {
		t.Fatal("fixture: no datacenter in a folder")
	}
}

// A query restricted to a datacenter finds its VMs by whichever form
// names it (CPI's cases), in both lookup paths, and none by a spec of
// another datacenter.
func TestFindByEachDatacenterForm(t *testing.T) {
	fx := newDCFixture(t)
	ctx := ctxFor(t)
	var nested *vcsim.VM
	for _, vm := range fx.vc.VMs {
		if vm.DatacenterPath != "/"+vm.Datacenter {
			nested = vm
		}
	}
	if nested == nil {
		t.Fatal("fixture: no VM in a datacenter inside a folder")
	}
	other := "DC0"
	if nested.Datacenter == other {
		other = "DC1"
	}
	for how, l := range fx.lookups() {
		for _, c := range []struct {
			spec  string
			found bool
		}{
			{nested.Datacenter, true},
			{nested.DatacenterPath, true},
			{nested.DatacenterPath[1:], true}, // relative to the root folder
			{"Datacenter:" + nested.DatacenterID, true},
			{nested.DatacenterID, true},
			{"/" + nested.Datacenter, false}, // not at the root
			{other, false},
			{"/no-such-folder/" + nested.Datacenter, false},
			{"Datacenter:datacenter-999", false},
		} {
			q := backends.Query{By: backends.ByUUID, Values: []string{nested.UUID}, AllowCached: l.allowCached,
				Datacenters: []config.DatacenterSpec{mustSpec(t, c.spec)}}
			vms, err := l.b.Find(ctx, q)
			if err != nil || (len(vms) == 1) != c.found {
				t.Errorf("%s: Find in %q = %v, %v; want found %v", how, c.spec, vms, err, c.found)
			}
		}
	}
}

// Datacenters lists every datacenter with its ID and path, from the
// inventory as from vCenter, a datacenter two folders deep and one with no
// VM included.
func TestDatacentersListsEveryDatacenter(t *testing.T) {
	fx := newDCFixture(t)
	ctx := ctxFor(t)
	cur, err := fx.direct.sessions.current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vc := cur.vim
	outer, err := object.NewRootFolder(vc).CreateFolder(ctx, "outer")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := outer.CreateFolder(ctx, "inner")
	if err != nil {
		t.Fatal(err)
	}
	deep, err := inner.CreateDatacenter(ctx, "dc-deep")
	if err != nil {
		t.Fatal(err)
	}
	finder := find.NewFinder(vc, false)
	all, err := finder.DatacenterList(ctx, "*")
	if err != nil {
		t.Fatal(err)
	}
	var want []config.Datacenter
	for _, dc := range all {
		name, err := dc.ObjectName(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, config.Datacenter{Name: name, ID: dc.Reference().Value, Path: dc.InventoryPath})
	}
	slices.SortFunc(want, func(a, b config.Datacenter) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	if !slices.Contains(want, config.Datacenter{Name: "dc-deep", ID: deep.Reference().Value, Path: "/outer/inner/dc-deep"}) || len(want) != 3 {
		t.Fatalf("fixture: finder lists %+v", want)
	}
	for how, l := range fx.lookups() {
		var got []config.Datacenter
		// The inventory follows the new datacenter within a poll.
		if !(poll.Schedule{Every: 20 * time.Millisecond, Within: 20 * time.Second}).Holds(func() bool {
			got, err = l.b.Datacenters(ctx)
			if err != nil {
				t.Fatalf("%s: Datacenters: %v", how, err)
			}
			return reflect.DeepEqual(got, want)
		}) {
			t.Errorf("%s: Datacenters = %+v, want %+v", how, got, want)
		}
	}
}
