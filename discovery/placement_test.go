package discovery_test

import (
	"errors"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// Placed answers from the inventories alone: only one VM, seen by every
// vCenter's memory, is an answer; anything else concludes nothing. It
// never makes a call.
func TestPlacedAnswersFromMemoryOnly(t *testing.T) {
	tn := newTenants(map[string]string{"tenant-a": "", "tenant-b": "dc0"})
	vc2 := tn.withOther("vc2")
	tn.dcs["vc2"] = []string{"dc0"}
	vm := tenantVM("dc0", "vm-1", 1)
	tn.add(vm)
	for _, b := range tn.backends {
		b.Inventoried()
	}
	d := tn.discoverer(t, discovery.Options{})
	calls := func() (n int64) {
		for _, b := range tn.backends {
			n += b.Calls()
		}
		return n
	}
	cats := []string{"zone"}
	p, ok := d.Placed(vm.UUID, cats)
	if !ok || p.VCenter != "tenant-a" || p.VM.Ref != vm.Ref || p.Where.Server != "vc1:443" || !p.TagsKnown || p.Tags["zone"] != "z-dc0" {
		t.Fatalf("Placed = %+v, %v; want the VM through tenant-a, zone z-dc0", p, ok)
	}
	// The kubelet's byte order finds it too.
	if p, ok := d.Placed(discovery.SwapByteOrder(vm.UUID), cats); !ok || p.VM.Ref != vm.Ref {
		t.Fatalf("Placed(swapped) = %+v, %v; want the VM", p, ok)
	}
	v0 := d.InventoryVersion()
	if d.InventoryVersion() != v0 {
		t.Fatal("InventoryVersion changed with nothing changed")
	}

	// A twin in another vCenter: nothing concluded.
	twin := vm
	twin.Ref.ID = "vm-9"
	vc2.Add(twin, nil)
	if p, ok := d.Placed(vm.UUID, cats); ok {
		t.Fatalf("with a twin in vc2: Placed = %+v, true; want nothing concluded", p)
	}
	vc2.Remove("vm-9")
	// An inventory out of service: nothing concluded.
	vc2.Fail(errors.New("down"))
	if p, ok := d.Placed(vm.UUID, cats); ok {
		t.Fatalf("vc2's inventory out of service: Placed = %+v, true; want nothing concluded", p)
	}
	vc2.Fail(nil)
	// Moved to a datacenter no entry serves... but tenant-a serves every
	// datacenter: found there; outside every entry's: nothing concluded.
	moved := vm
	moved.Ref.Datacenter = "dc1"
	tn.add(moved)
	if p, ok := d.Placed(vm.UUID, cats); !ok || p.VM.Ref.Datacenter != "dc1" || p.Tags["zone"] != "z-dc1" {
		t.Fatalf("moved to dc1: Placed = %+v, %v; want it in dc1, zone z-dc1", p, ok)
	}
	if d.InventoryVersion() == v0 {
		t.Fatal("InventoryVersion unchanged after a move")
	}
	vc2.Add(backends.VM{Ref: backends.VMRef{Datacenter: "dc7", ID: "vm-8"}, UUID: vm.UUID}, nil)
	if p, ok := d.Placed(vm.UUID, cats); ok {
		t.Fatalf("a VM of the UUID outside vc2's datacenters: Placed = %+v, true; want nothing concluded", p)
	}
	vc2.Remove("vm-8")
	tn.remove("vm-1")
	if p, ok := d.Placed(vm.UUID, cats); ok {
		t.Fatalf("no VM: Placed = %+v, true; want nothing concluded (none known is not absence)", p)
	}
	time.Sleep(30 * time.Millisecond) // duplicate scans run; they call nothing either
	if n := calls(); n != 0 {
		t.Fatalf("%d backend calls; Placed and InventoryVersion must make none", n)
	}
}
