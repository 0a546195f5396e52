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
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// Placement answers, from memory and without a request, where a VM is
// (host, cluster, resource pool, disk.EnableUUID) as a direct read says;
// its tags once the bulk tag cache holds them, and not before; and
// follows a migration to another cluster through the watch alone.
func TestPlacementFromMemoryFollowsAMove(t *testing.T) {
	fx := newInvFixture(t, time.Minute, 5*time.Second, nil)
	ctx := ctxFor(t)
	want := fx.vc.VMs[0]
	ref := backends.VMRef{Datacenter: want.Datacenter, ID: want.Ref}
	if err := fx.vc.SetExtraConfig(ctx, want, "disk.EnableUUID", "TRUE"); err != nil {
		t.Fatal(err)
	}
	fx.eventually("the inventory holds disk.EnableUUID", func() bool {
		vm, ok := fx.b.inv.get(ref)
		return ok && vm.DiskEnableUUID == "TRUE"
	})
	direct, err := fx.direct.Get(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if direct.HostName == "" || direct.Cluster == "" || direct.ResourcePoolPath == "" {
		t.Fatalf("fixture: VM %s on host %q in cluster %q, pool %q; want all three", want.Name, direct.HostName, direct.Cluster, direct.ResourcePoolPath)
	}

	placementOf := func() backends.Placement {
		t.Helper()
		// The counter sees the backend's own background requests too (the
		// watch's polls, keep-alives): one in the window is not
		// Placement's. A Placement that asks vCenter asks every time.
		var ps []backends.Placement
		var ok bool
		for try := 1; ; try++ {
			n := fx.n.Load()
			ps, ok = fx.b.Placement(want.UUID, zoneRegion)
			got := fx.n.Load() - n
			if got == 0 {
				break
			}
			if try == 3 {
				t.Fatalf("Placement made %d requests at each of 3 tries, want none", got)
			}
		}
		if !ok || len(ps) != 1 || ps[0].VM.Ref != ref {
			t.Fatalf("Placement(%s) = %+v, %v; want the one VM %v", want.UUID, ps, ok, ref)
		}
		return ps[0]
	}

	// Whether or not the tags are read yet (they are read with the
	// inventory): the VM, and tags only when known.
	p := placementOf()
	if !reflect.DeepEqual(p.VM, *direct) {
		t.Fatalf("Placement's VM = %+v, a direct read %+v", p.VM, *direct)
	}
	if !p.TagsKnown && p.Tags != nil {
		t.Fatalf("tags not known yet: Tags %v; want nil", p.Tags)
	}
	// Once the cache is loaded (a lookup waits for it), Placement has
	// the tags too.
	if _, err := fx.b.Tags(ctx, direct, zoneRegion); err != nil {
		t.Fatal(err)
	}
	p = placementOf()
	if !p.TagsKnown || p.Tags["k8s-zone"] != want.Zone || p.Tags["k8s-region"] != want.Region {
		t.Fatalf("after the tag cache is loaded: Tags %v, TagsKnown %v; want zone %s region %s", p.Tags, p.TagsKnown, want.Zone, want.Region)
	}
	if ps, ok := fx.b.Placement(want.UUID, nil); !ok || len(ps) != 1 || !ps[0].TagsKnown || len(ps[0].Tags) != 0 {
		t.Fatalf("Placement without categories = %+v, %v; want the VM, no tags, known", ps, ok)
	}

	// vMotion to a host of another cluster: the watch alone moves it.
	host, pool := fx.newClusterHost(ctx, want.Datacenter, "C9", "C9_H0")
	fx.restartInventory()
	if _, err := fx.b.Tags(ctx, direct, zoneRegion); err != nil { // the new backend's tag cache
		t.Fatal(err)
	}
	if p := placementOf(); p.VM.HostName != direct.HostName || !p.TagsKnown {
		t.Fatalf("before the move: host %q, tags known %v; want %s, known", p.VM.HostName, p.TagsKnown, direct.HostName)
	}
	updates := fx.b.inv.updates.Load()
	fx.relocate(ctx, want, &host, &pool)
	var moved backends.Placement
	fx.eventually("Placement follows the move", func() bool {
		moved = placementOf()
		return moved.VM.HostName == "C9_H0"
	})
	if fx.b.inv.updates.Load() == updates {
		t.Fatal("the move was seen without an update from the watch")
	}
	direct, err = fx.direct.Get(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(moved.VM, *direct) || moved.VM.Cluster != "C9" || moved.VM.ResourcePoolPath != direct.DatacenterPath+"/host/C9/Resources" {
		t.Fatalf("after the move: Placement's VM = %+v, a direct read %+v; want cluster C9 and its pool", moved.VM, *direct)
	}
}

// A UUID held by two VMs answers both, by ID; one held by none answers
// none, ok; without an inventory in service, Placement cannot answer.
func TestPlacementTwinsAndOutOfService(t *testing.T) {
	fx := newInvFixture(t, time.Minute, 5*time.Second, nil)
	ctx := ctxFor(t)
	a, b := fx.vc.VMs[0], fx.vc.VMs[len(fx.vc.VMs)-1]
	fx.vc.SetUUID(b, a.UUID)
	fx.eventually("the inventory holds the twin", func() bool {
		ps, ok := fx.b.Placement(a.UUID, nil)
		return ok && len(ps) == 2
	})
	ps, _ := fx.b.Placement(a.UUID, nil)
	twins := []*vcsim.VM{a, b}
	slices.SortFunc(twins, func(x, y *vcsim.VM) int { return cmp.Compare(x.Ref, y.Ref) }) // answered by ID
	for i, want := range twins {
		direct, err := fx.direct.Get(ctx, backends.VMRef{Datacenter: want.Datacenter, ID: want.Ref})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ps[i].VM, *direct) {
			t.Errorf("twin %d: Placement's VM = %+v, a direct read %+v", i, ps[i].VM, *direct)
		}
	}
	if ps, ok := fx.b.Placement("42ffffff-ffff-4fff-8fff-ffffffffffff", zoneRegion); !ok || len(ps) != 0 {
		t.Fatalf("Placement(unknown UUID) = %+v, %v; want none, ok", ps, ok)
	}

	if _, ok := fx.direct.Placement(a.UUID, nil); ok {
		t.Fatal("a backend without an inventory answered Placement")
	}
	o := optionsVia(fx.vc, fx.vc.Host, fx.vc.Port, 5*time.Second)
	o.Inventory = true
	notStarted := New(o)
	t.Cleanup(func() { _ = notStarted.Close(context.Background()) })
	if _, ok := notStarted.Placement(a.UUID, nil); ok {
		t.Fatal("an inventory never loaded answered Placement")
	}
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := fx.b.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	if _, ok := fx.b.Placement(a.UUID, nil); ok {
		t.Fatal("a closed backend's inventory answered Placement")
	}
}

// Every VM is placed alike by both reads: on a cluster's host or on a
// standalone one (no cluster). A VM on a host its resource pool's compute
// resource does not list still has its host named by a direct read (a
// second call, then).
func TestDirectAndInventoryPlaceEveryVM(t *testing.T) {
	fx := newInvFixture(t, time.Minute, 5*time.Second, nil)
	ctx := ctxFor(t)
	agree := func(vm *vcsim.VM) *backends.VM {
		t.Helper()
		ref := backends.VMRef{Datacenter: vm.Datacenter, ID: vm.Ref}
		direct, err := fx.direct.Get(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		fx.eventually("the inventory places "+vm.Name+" as vCenter does", func() bool {
			held, ok := fx.b.inv.get(ref)
			return ok && reflect.DeepEqual(*held, *direct)
		})
		return direct
	}
	var standalone *backends.VM
	for _, vm := range fx.vc.VMs {
		got := agree(vm)
		if got.HostName != vm.Host || got.ResourcePoolPath == "" {
			t.Errorf("%s: host %q, pool %q; want host %s and a pool", vm.Name, got.HostName, got.ResourcePoolPath, vm.Host)
		}
		if got.Cluster == "" && got.Ref.Datacenter == fx.vc.VMs[0].Datacenter {
			standalone = got
		}
	}
	first := agree(fx.vc.VMs[0])
	if standalone == nil || first.Cluster == "" {
		t.Fatal("fixture: want a VM in a cluster and one on a standalone host in the first datacenter")
	}

	// Moved to the standalone host, its pool left in the cluster: its host
	// is not among its pool's compute resource's.
	vm := fx.vc.VMs[0]
	fx.relocate(ctx, vm, &types.ManagedObjectReference{Type: "HostSystem", Value: standalone.Host}, nil)
	vm.Host = standalone.HostName
	if got := agree(vm); got.HostName != standalone.HostName || got.Cluster != "" || got.ResourcePoolPath != first.ResourcePoolPath {
		t.Fatalf("VM on a host outside its pool's cluster: host %q, cluster %q, pool %q; want %s, none, %s", got.HostName, got.Cluster, got.ResourcePoolPath, standalone.HostName, first.ResourcePoolPath)
	}
}

// restartInventory replaces fx.b with a new backend whose inventory is
// loaded afresh, and waits until it is in service. vcsim's container view
// misses a host or pool created after it (they are registered before
// being linked to their parent): a new inventory's view holds them.
func (fx *invFixture) restartInventory() {
	fx.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = fx.b.Close(ctx)
	o := optionsVia(fx.vc, fx.vc.Host, fx.vc.Port, 5*time.Second)
	o.Inventory, o.Heartbeat, o.TagRefresh = true, time.Minute, time.Hour
	o.WrapTransport = vcsim.CountRequests(&fx.n)
	readingHostGroups(&o) // as the fixture's
	b := New(o)
	b.Start()
	fx.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	fx.b = b
	fx.eventually("the new inventory is in service", func() bool { return inService(fx.b) })
}

// newClusterHost adds a cluster named cluster, with one host named host,
// to datacenter dc: a place to migrate to. It returns the host and the
// cluster's root resource pool.
func (fx *invFixture) newClusterHost(ctx context.Context, dc, cluster, host string) (types.ManagedObjectReference, types.ManagedObjectReference) {
	fx.t.Helper()
	c, err := fx.vc.Client(ctx)
	if err != nil {
		fx.t.Fatal(err)
	}
	defer func() { _ = c.Logout(context.WithoutCancel(ctx)) }()
	finder := find.NewFinder(c.Client)
	d, err := finder.Datacenter(ctx, dc)
	if err != nil {
		fx.t.Fatal(err)
	}
	folders, err := d.Folders(ctx)
	if err != nil {
		fx.t.Fatal(err)
	}
	cl, err := folders.HostFolder.CreateCluster(ctx, cluster, types.ClusterConfigSpecEx{})
	if err != nil {
		fx.t.Fatal(err)
	}
	task, err := cl.AddHost(ctx, types.HostConnectSpec{HostName: host}, true, nil, nil)
	if err != nil {
		fx.t.Fatal(err)
	}
	res, err := task.WaitForResult(ctx)
	if err != nil {
		fx.t.Fatal(err)
	}
	pool, err := cl.ResourcePool(ctx)
	if err != nil {
		fx.t.Fatal(err)
	}
	return res.Result.(types.ManagedObjectReference), pool.Reference()
}

// relocate migrates vm to host and pool (nil: unchanged).
func (fx *invFixture) relocate(ctx context.Context, vm *vcsim.VM, host, pool *types.ManagedObjectReference) {
	fx.t.Helper()
	c, err := fx.vc.Client(ctx)
	if err != nil {
		fx.t.Fatal(err)
	}
	defer func() { _ = c.Logout(context.WithoutCancel(ctx)) }()
	o := object.NewVirtualMachine(c.Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: vm.Ref})
	task, err := o.Relocate(ctx, types.VirtualMachineRelocateSpec{Host: host, Pool: pool}, types.VirtualMachineMovePriorityDefaultPriority)
	if err != nil {
		fx.t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		fx.t.Fatal(err)
	}
}
