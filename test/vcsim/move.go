package vcsim

// Moving simulated VMs, as vMotion, DRS, a cross-vCenter vMotion or a
// failover to another site move real ones: for the tests of Nodes that
// follow their VMs.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

// Hosts lists the names of the ESXi hosts of datacenter dc ("DC0"), in
// name order: each cluster's (DC0_C0_H0) and each standalone one's
// (DC0_H0).
func (vc *VCenter) Hosts(dc string) []string {
	r := vc.Model.Map()
	dcRef, ok := vc.datacenter(dc)
	if !ok {
		return nil
	}
	var out []string
	for _, e := range r.All("HostSystem") {
		if inDatacenter(r, e.Reference(), dcRef) {
			out = append(out, e.Entity().Name)
		}
	}
	slices.Sort(out)
	return out
}

func (vc *VCenter) datacenter(name string) (types.ManagedObjectReference, bool) {
	for _, e := range vc.Model.Map().All("Datacenter") {
		if e.Entity().Name == name {
			return e.Reference(), true
		}
	}
	return types.ManagedObjectReference{}, false
}

func (vc *VCenter) host(name string) (types.ManagedObjectReference, bool) {
	for _, e := range vc.Model.Map().All("HostSystem") {
		if e.Entity().Name == name {
			return e.Reference(), true
		}
	}
	return types.ManagedObjectReference{}, false
}

// zoneOf is the zone tag of host's compute resource, as populate gave
// it: the Zone of another VM on it ("" when none is left there).
func (f *Federation) zoneOf(vc *VCenter, dc, host string, moving *VM) string {
	for _, v := range f.AllVMs() {
		if v != moving && v.VCenter == vc.Name && v.Datacenter == dc && v.Host == host {
			return v.Zone
		}
	}
	return ""
}

// Relocate vMotions vm to the host named host of its vCenter (another
// host of its cluster, another cluster, a standalone host) through the
// API: its runtime host and resource pool (the root pool of the host's
// compute resource) change; vm's Host, Zone and Region follow.
func (f *Federation) Relocate(ctx context.Context, vm *VM, host string) error {
	vc := f.VCenter(vm.VCenter)
	ref, ok := vc.host(host)
	if !ok {
		return fmt.Errorf("vcsim: no host %q in %s", host, vc.Name)
	}
	err := vc.vmTask(ctx, vm, func(o *object.VirtualMachine) (*object.Task, error) {
		h := object.NewHostSystem(o.Client(), ref)
		pool, err := h.ResourcePool(ctx)
		if err != nil {
			return nil, err
		}
		poolRef := pool.Reference()
		return o.Relocate(ctx, types.VirtualMachineRelocateSpec{Host: &ref, Pool: &poolRef}, types.VirtualMachineMovePriorityDefaultPriority)
	})
	if err != nil {
		return fmt.Errorf("vcsim: relocate %s to %s: %w", vm.Name, host, err)
	}
	vm.Host, vm.Zone = host, f.zoneOf(vc, vm.Datacenter, host, vm)
	return nil
}

// Move moves vm to the host named host of datacenter dc of vCenter to
// (vm's own vCenter for another datacenter), as a cross-vCenter vMotion
// or a failover re-registering it does: a VM with vm's BIOS UUID, name and
// guest appears there (a clone of a VM of that datacenter given vm's
// identity), then vm's old VM is destroyed. A twin for a moment, never a
// moment without the VM, which would read as its deletion. vm, and the
// vCenters' VMs, follow.
func (f *Federation) Move(ctx context.Context, vm *VM, to *VCenter, dc, host string) error {
	from := f.VCenter(vm.VCenter)
	dcRef, ok := to.datacenter(dc)
	if !ok {
		return fmt.Errorf("vcsim: no datacenter %q in %s", dc, to.Name)
	}
	hostRef, ok := to.host(host)
	if !ok {
		return fmt.Errorf("vcsim: no host %q in %s", host, to.Name)
	}
	var source *VM
	for _, v := range to.VMs {
		if v.Datacenter == dc && v != vm && to.Exists(v) {
			source = v
			break
		}
	}
	if source == nil {
		return fmt.Errorf("vcsim: no VM to clone in %s %s", to.Name, dc)
	}
	guest := *from.Object(vm).Guest
	c, err := to.Client(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = c.Logout(context.WithoutCancel(ctx)) }()
	folders, err := object.NewDatacenter(c.Client, dcRef).Folders(ctx)
	if err != nil {
		return err
	}
	pool, err := object.NewHostSystem(c.Client, hostRef).ResourcePool(ctx)
	if err != nil {
		return err
	}
	poolRef := pool.Reference()
	src := object.NewVirtualMachine(c.Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: source.Ref})
	task, err := src.Clone(ctx, folders.VmFolder, vm.Name, types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Host: &hostRef, Pool: &poolRef}, PowerOn: true,
	})
	if err != nil {
		return fmt.Errorf("vcsim: clone into %s %s: %w", to.Name, dc, err)
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		return fmt.Errorf("vcsim: clone into %s %s: %w", to.Name, dc, err)
	}
	newRef, ok := info.Result.(types.ManagedObjectReference)
	if !ok {
		return fmt.Errorf("vcsim: clone into %s %s: no VM in the task's result", to.Name, dc)
	}
	clone := to.Model.Map().Get(newRef).(*simulator.VirtualMachine)
	to.Model.Map().AtomicUpdate(to.Model.Service.Context, clone, []types.PropertyChange{
		{Name: "config.uuid", Val: vm.UUID},
		{Name: "summary.config.uuid", Val: vm.UUID},
		// Path by path, as watches ask for them: a change of "guest"
		// whole is not reported to a watch of guest.hostName.
		{Name: "guest.hostName", Val: guest.HostName},
		{Name: "guest.ipAddress", Val: guest.IpAddress},
		{Name: "guest.net", Val: guest.Net},
	})
	if err := from.Destroy(ctx, vm); err != nil {
		return fmt.Errorf("vcsim: destroying %s in %s: %w", vm.Name, from.Name, err)
	}
	zone := f.zoneOf(to, dc, host, vm)
	from.VMs = slices.DeleteFunc(from.VMs, func(v *VM) bool { return v == vm })
	to.VMs = append(to.VMs, vm)
	vm.VCenter, vm.Datacenter, vm.Ref, vm.Host = to.Name, dc, newRef.Value, host
	vm.DatacenterID, vm.DatacenterPath = dcRef.Value, inventoryPath(to.Model.Map(), dcRef)
	vm.Zone = zone
	vm.Region = fmt.Sprintf("region-%s-%s", to.Name, strings.ToLower(dc))
	return nil
}
