package vcsim

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/simulator/esx"
	"github.com/vmware/govmomi/units"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// computeResource is where a datacenter's VMs go: a cluster or a
// standalone host, its root resource pool and, for a standalone host, the
// host itself (a cluster's VMs are placed on one of its hosts by the
// simulator, as govmomi's model leaves them).
type computeResource struct {
	Name string
	Ref  types.ManagedObjectReference
	Pool types.ManagedObjectReference
	Host *types.ManagedObjectReference
}

// computeResources lists the clusters and standalone hosts of dc by name,
// which is the order the VMs' indexes follow ("DC0_C0" before "DC0_H0").
func computeResources(r *simulator.Registry, dc types.ManagedObjectReference) []computeResource {
	var out []computeResource
	for _, kind := range []string{"ClusterComputeResource", "ComputeResource"} {
		for _, e := range r.All(kind) {
			if !inDatacenter(r, e.Reference(), dc) {
				continue
			}
			var cr *mo.ComputeResource
			standalone := false
			switch e := e.(type) {
			case *simulator.ClusterComputeResource:
				cr = &e.ComputeResource
			case *mo.ComputeResource:
				cr, standalone = e, true
			default:
				continue
			}
			c := computeResource{Name: cr.Name, Ref: cr.Self, Pool: *cr.ResourcePool}
			if standalone && len(cr.Host) > 0 {
				h := cr.Host[0]
				c.Host = &h
			}
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b computeResource) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// vmFolder is the folder govmomi's model puts dc's VMs in: the
// datacenter's VM folder, or the folder it made in it when the datacenter
// itself sits in a folder (Options.Folders).
func vmFolder(r *simulator.Registry, dc *simulator.Datacenter) *simulator.Folder {
	f := r.Get(dc.VmFolder).(*simulator.Folder)
	if p := dc.Parent; p != nil && r.Get(*p).(*simulator.Folder).Parent != nil {
		for _, c := range f.ChildEntity {
			if c.Type == "Folder" {
				return r.Get(c).(*simulator.Folder)
			}
		}
	}
	return f
}

// nicBacking is the backing govmomi's model gives each VM's NIC: the
// datacenter's first distributed port group, or the plain "VM Network".
func nicBacking(r *simulator.Registry, dc *simulator.Datacenter) types.BaseVirtualDeviceBackingInfo {
	net := r.Get(dc.NetworkFolder).(*simulator.Folder)
	for _, c := range net.ChildEntity {
		pg, ok := r.Get(c).(*simulator.DistributedVirtualPortgroup)
		if !ok || pg.Name != dc.Name+"_DVPG0" || pg.Config.DistributedVirtualSwitch == nil {
			continue
		}
		dvs := r.Get(*pg.Config.DistributedVirtualSwitch).(*simulator.DistributedVirtualSwitch)
		return &types.VirtualEthernetCardDistributedVirtualPortBackingInfo{
			Port: types.DistributedVirtualSwitchPortConnection{PortgroupKey: pg.Key, SwitchUuid: dvs.Uuid},
		}
	}
	return &types.VirtualEthernetCardNetworkBackingInfo{
		VirtualDeviceDeviceBackingInfo: types.VirtualDeviceDeviceBackingInfo{DeviceName: "VM Network", UseAutoDetect: types.NewBool(false)},
		InPassthroughMode:              types.NewBool(false),
	}
}

// vmSpec is the configuration govmomi's model creates each VM with (a
// pvscsi controller with a 10 GB disk, an IDE CD-ROM, one e1000 NIC) with
// the federation's name, BIOS UUID, guest OS and size. Every call builds
// fresh values: the simulator keeps, and later changes, what it is given.
func vmSpec(name, uuid string, backing types.BaseVirtualDeviceBackingInfo) types.VirtualMachineConfigSpec {
	spec := types.VirtualMachineConfigSpec{
		Name: name, Uuid: uuid, GuestId: "ubuntu64Guest",
		// vSphere 7.0 U2's hardware, as clusters run today: the
		// simulator's default (vmx-13) is below what the vSphere CSI
		// driver needs, and every Node would be a finding.
		Version: "vmx-19",
		// A realistic size, so instance types read like production ones.
		NumCPUs: 4, MemoryMB: 8192,
		Files: &types.VirtualMachineFileInfo{VmPathName: "[LocalDS_0]"},
	}
	var devices object.VirtualDeviceList
	scsi, _ := devices.CreateSCSIController("pvscsi")
	ide, _ := devices.CreateIDEController()
	cdrom, _ := devices.CreateCdrom(ide.(*types.VirtualIDEController))
	disk := devices.CreateDisk(scsi.(types.BaseVirtualController), types.ManagedObjectReference{},
		spec.Files.VmPathName+" "+path.Join(name, "disk1.vmdk"))
	disk.CapacityInKB = int64(units.GB*10) / units.KB
	disk.StorageIOAllocation = &types.StorageIOAllocationInfo{Limit: types.NewInt64(-1)}
	nic := esx.EthernetCard
	nic.Backing = copyBacking(backing)
	connect := *esx.EthernetCard.Connectable
	nic.Connectable = &connect
	devices = append(devices, scsi, cdrom, disk, &nic)
	spec.DeviceChange, _ = devices.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	return spec
}

func copyBacking(b types.BaseVirtualDeviceBackingInfo) types.BaseVirtualDeviceBackingInfo {
	switch b := b.(type) {
	case *types.VirtualEthernetCardDistributedVirtualPortBackingInfo:
		c := *b
		return &c
	case *types.VirtualEthernetCardNetworkBackingInfo:
		c := *b
		return &c
	}
	return b
}

// powerOnBatch is how many power-ons run at once.
const powerOnBatch = 256

// createVMs creates n VMs in each compute resource of dc (in placements'
// order) and powers them on; it returns them in that order, which is their
// VM index in the datacenter. name and uuid give each its name and BIOS
// UUID by that index. It calls the simulator's own CreateVM_Task and
// PowerOnVM_Task methods in process, as its SOAP handler does, without the
// round trip and the property-collector wait (some 20 ms) a client pays
// per task: the VMs are those govmomi's model builds, 10-20× faster.
// Creations run one after another (each holds the VM folder's lock); the
// power-ons, each holding only its VM's lock, run in batches.
func (vc *VCenter) createVMs(dc *simulator.Datacenter, placements []computeResource, n int, name, uuid func(vmIndex int) string) ([]*simulator.VirtualMachine, error) {
	registry := vc.Model.Map()
	base := vc.Model.Service.Context
	// A context per call: the simulator's locks are held on behalf of a
	// context and shared by whoever holds the same one, so two tasks
	// started with one context could run at once on the same folder.
	fresh := func() *simulator.Context {
		c := *base
		return &c
	}
	// wait returns a task's result once it is done.
	wait := func(ref types.ManagedObjectReference) (types.AnyType, error) {
		t := registry.Get(ref).(*simulator.Task)
		t.Wait()
		var info types.TaskInfo
		registry.WithLock(fresh(), t, func() { info = t.Info })
		if info.Error != nil {
			return nil, fmt.Errorf("%s: %s", info.DescriptionId, info.Error.LocalizedMessage)
		}
		return info.Result, nil
	}
	folder := vmFolder(registry, dc)
	backing := nicBacking(registry, dc)

	var tasks []types.ManagedObjectReference
	for p, cr := range placements {
		for i := range n {
			vmIndex := p*n + i
			req := &types.CreateVM_Task{
				This: folder.Self, Config: vmSpec(name(vmIndex), uuid(vmIndex), backing), Pool: cr.Pool, Host: cr.Host,
			}
			res := folder.CreateVMTask(fresh(), req).(*methods.CreateVM_TaskBody)
			if res.Fault_ != nil {
				return nil, fmt.Errorf("creating %s: %s", req.Config.Name, res.Fault_.String)
			}
			tasks = append(tasks, res.Res.Returnval)
		}
	}
	vms := make([]*simulator.VirtualMachine, len(tasks))
	for i, t := range tasks {
		res, err := wait(t)
		if err != nil {
			return nil, err
		}
		vms[i] = registry.Get(res.(types.ManagedObjectReference)).(*simulator.VirtualMachine)
	}
	for batch := range slices.Chunk(vms, powerOnBatch) {
		tasks = tasks[:0]
		for _, vm := range batch {
			res := vm.PowerOnVMTask(fresh(), &types.PowerOnVM_Task{This: vm.Self}).(*methods.PowerOnVM_TaskBody)
			if res.Fault_ != nil {
				return nil, fmt.Errorf("powering on %s: %s", vm.Name, res.Fault_.String)
			}
			tasks = append(tasks, res.Res.Returnval)
		}
		for _, t := range tasks {
			if _, err := wait(t); err != nil {
				return nil, err
			}
		}
	}
	return vms, nil
}
