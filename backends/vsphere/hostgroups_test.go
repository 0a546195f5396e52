package vsphere

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// A stretched cluster: DC0_C0 with a host per site, each site's host
// group. A backend that reads host groups gives each VM the groups of the
// host it runs on, from the inventory's memory (followed as hosts move
// between groups and VMs between hosts, without a request) and from a
// direct read alike; one that does not read them says they are unknown.
func TestHostGroupsFollowHostsAndVMs(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	ctx := ctxFor(t)
	if err := vc.AddClusterHost(ctx, "DC0_C0", "DC0_C0_H1"); err != nil {
		t.Fatal(err)
	}
	if err := vc.SetHostGroup(ctx, "DC0_C0", "site-a-hosts", "DC0_C0_H0"); err != nil {
		t.Fatal(err)
	}
	if err := vc.SetHostGroup(ctx, "DC0_C0", "site-b-hosts", "DC0_C0_H1"); err != nil {
		t.Fatal(err)
	}
	var vm, standalone *vcsim.VM
	for _, v := range vc.VMs {
		switch v.Host {
		case "DC0_C0_H0":
			vm = v
		case "DC0_H0":
			standalone = v
		}
	}
	if vm == nil || standalone == nil {
		t.Fatalf("VMs %v: want one on DC0_C0_H0 and one on DC0_H0", vc.VMs)
	}

	zones := &config.HostGroupZones{Groups: map[string]string{"site-a-hosts": "site-a"}}
	backend := func(inventory, hostGroups bool) *Backend {
		o := optionsVia(vc, vc.Host, vc.Port, 5*time.Second)
		if hostGroups {
			o.Config.ZoneHostGroups = zones
		}
		o.Inventory, o.TagRefresh = inventory, time.Hour
		b := New(o)
		b.Start()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = b.Close(ctx)
		})
		return b
	}
	inv, direct, without := backend(true, true), backend(false, true), backend(true, false)
	fx := &invFixture{t: t, vc: vc, b: inv}
	fx.eventually("the inventories are in service", func() bool { return inService(inv) && inService(without) })

	placed := func(b *Backend, v *vcsim.VM) backends.VM {
		t.Helper()
		ps, ok := b.Placement(v.UUID, nil)
		if !ok || len(ps) != 1 {
			t.Fatalf("Placement(%s) = %v, %v", v.Name, ps, ok)
		}
		return ps[0].VM
	}
	found := func(b *Backend, v *vcsim.VM) backends.VM {
		t.Helper()
		vms, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{v.UUID}})
		if err != nil || len(vms) != 1 {
			t.Fatalf("Find(%s) = %v, %v", v.Name, vms, err)
		}
		return vms[0]
	}
	want := func(what string, got backends.VM, groups ...string) {
		t.Helper()
		if !got.HostGroupsKnown || !slices.Equal(got.HostGroups, groups) {
			t.Errorf("%s: host groups %v (known %v); want %v", what, got.HostGroups, got.HostGroupsKnown, groups)
		}
	}
	want("inventory", placed(inv, vm), "site-a-hosts")
	want("direct read", found(direct, vm), "site-a-hosts")
	want("standalone host, inventory", placed(inv, standalone))
	want("standalone host, direct read", found(direct, standalone))
	if got := placed(without, vm); got.HostGroupsKnown || got.HostGroups != nil {
		t.Errorf("a backend that does not read host groups: %v (known %v); want unknown", got.HostGroups, got.HostGroupsKnown)
	}
	if got := placed(without, standalone); !got.HostGroupsKnown {
		t.Errorf("a standalone host is in no group, known even unread")
	}

	inGroups := func(v *vcsim.VM, groups ...string) func() bool {
		return func() bool {
			got := placed(inv, v)
			return got.HostGroupsKnown && slices.Equal(got.HostGroups, groups)
		}
	}
	// The administrator moves H0 to site B: in both groups a moment (a
	// host in two), then in B's only. The watch sends it.
	if err := vc.SetHostGroup(ctx, "DC0_C0", "site-b-hosts", "DC0_C0_H0", "DC0_C0_H1"); err != nil {
		t.Fatal(err)
	}
	fx.eventually("the inventory sees H0 in both groups", inGroups(vm, "site-a-hosts", "site-b-hosts"))
	if err := vc.SetHostGroup(ctx, "DC0_C0", "site-a-hosts"); err != nil {
		t.Fatal(err)
	}
	fx.eventually("the inventory sees H0 in site B's group only", inGroups(vm, "site-b-hosts"))
	want("direct read after the move", found(direct, vm), "site-b-hosts")

	// Back, then a vMotion of the VM to H1, site B's.
	if err := vc.SetHostGroup(ctx, "DC0_C0", "site-a-hosts", "DC0_C0_H0"); err != nil {
		t.Fatal(err)
	}
	if err := vc.SetHostGroup(ctx, "DC0_C0", "site-b-hosts", "DC0_C0_H1"); err != nil {
		t.Fatal(err)
	}
	fx.eventually("the inventory sees H0 back in site A's group", inGroups(vm, "site-a-hosts"))
	if err := f.Relocate(ctx, vm, "DC0_C0_H1"); err != nil {
		t.Fatal(err)
	}
	fx.eventually("the inventory sees the VM on H1, in site B's group", inGroups(vm, "site-b-hosts"))
	want("direct read after the vMotion", found(direct, vm), "site-b-hosts")
}
