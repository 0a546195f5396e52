package vcsim

import (
	"testing"

	"github.com/vmware/govmomi/vim25/types"
)

// A relocated VM runs on the host asked for, in its compute resource's
// pool; a moved one is in the other vCenter's datacenter with the same
// BIOS UUID, name and guest, and gone from its old vCenter.
func TestRelocateAndMove(t *testing.T) {
	f, err := Start(Options{VCenters: 2, Datacenters: 2, MachinesPerPool: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	ctx := t.Context()
	vc1, vc2 := f.VCenter("vc1"), f.VCenter("vc2")
	hosts := vc1.Hosts("DC0")
	if len(hosts) != 2 {
		t.Fatalf("DC0's hosts %v; want a cluster's and a standalone one", hosts)
	}
	vm := vc1.VMs[0]
	other := hosts[0]
	if other == vm.Host {
		other = hosts[1]
	}
	oldZone := vm.Zone
	if err := f.Relocate(ctx, vm, other); err != nil {
		t.Fatal(err)
	}
	obj := vc1.Object(vm)
	h, _ := vc1.host(other)
	if *obj.Runtime.Host != h || vm.Host != other || vm.Zone == oldZone || vm.Zone == "" {
		t.Fatalf("relocated: runtime.host %v (want %v), vm %+v (zone was %s)", obj.Runtime.Host, h, vm, oldZone)
	}
	uuid, name, oldRef := vm.UUID, vm.Name, vm.Ref
	if err := f.Move(ctx, vm, vc2, "DC1", vc2.Hosts("DC1")[0]); err != nil {
		t.Fatal(err)
	}
	moved := vc2.Object(vm)
	if moved.Config.Uuid != uuid || moved.Name != name || vm.VCenter != "vc2" || vm.Datacenter != "DC1" || vm.Region != "region-vc2-dc1" || vm.Zone == "" {
		t.Fatalf("moved: uuid %s name %s, vm %+v", moved.Config.Uuid, moved.Name, vm)
	}
	if moved.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn || moved.Guest.IpAddress != vm.IP || moved.Guest.HostName != vm.HostName || len(moved.Guest.Net) != 1 {
		t.Fatalf("moved: power %s, guest ip %s; want on, %s", moved.Runtime.PowerState, moved.Guest.IpAddress, vm.IP)
	}
	if vc1.Model.Map().Get(types.ManagedObjectReference{Type: "VirtualMachine", Value: oldRef}) != nil {
		t.Fatal("the VM is still in vc1")
	}
}
