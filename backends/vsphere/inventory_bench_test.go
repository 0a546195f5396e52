package vsphere

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/vmware/govmomi/vim25/types"
)

// benchUpdates is the initial load of a vCenter of n VMs, each with every
// property the CCM reads, as the watch receives it.
func benchUpdates(n int) []types.ObjectUpdate {
	dc := types.ManagedObjectReference{Type: "Datacenter", Value: "datacenter-1"}
	folder := types.ManagedObjectReference{Type: "Folder", Value: "group-v1"}
	host := types.ManagedObjectReference{Type: "HostSystem", Value: "host-1"}
	pool := types.ManagedObjectReference{Type: "ResourcePool", Value: "resgroup-1"}
	assign := func(name string, v any) types.PropertyChange {
		return types.PropertyChange{Name: name, Op: types.PropertyChangeOpAssign, Val: v}
	}
	out := []types.ObjectUpdate{
		{Kind: types.ObjectUpdateKindEnter, Obj: dc, ChangeSet: []types.PropertyChange{assign("name", "dc")}},
		{Kind: types.ObjectUpdateKindEnter, Obj: folder, ChangeSet: []types.PropertyChange{assign("name", "vm"), assign("parent", dc)}},
	}
	for i := range n {
		out = append(out, types.ObjectUpdate{
			Kind: types.ObjectUpdateKindEnter,
			Obj:  vmRef(fmt.Sprintf("vm-%d", i)),
			ChangeSet: []types.PropertyChange{
				assign("name", fmt.Sprintf("node-%d", i)),
				assign("parent", folder),
				assign("config.uuid", fmt.Sprintf("4210%04x-0000-4000-8000-%012x", i%0xffff, i)),
				assign("config.hardware.numCPU", int32(4)),
				assign("config.hardware.memoryMB", int32(8192)),
				assign("config.guestId", "ubuntu64Guest"),
				assign("runtime.powerState", types.VirtualMachinePowerStatePoweredOn),
				assign("runtime.connectionState", types.VirtualMachineConnectionStateConnected),
				assign("runtime.host", host),
				assign("resourcePool", pool),
				assign("guest.hostName", fmt.Sprintf("node-%d.example.com", i)),
				assign("guest.net", types.ArrayOfGuestNicInfo{GuestNicInfo: []types.GuestNicInfo{{
					Network: "VM Network", MacAddress: fmt.Sprintf("00:50:56:00:%02x:%02x", i/256%256, i%256),
					IpAddress: []string{fmt.Sprintf("10.0.%d.%d", i/256%256, i%256)}, DeviceConfigId: 4000,
				}}}),
				assign(`config.extraConfig["guestinfo.metadata"]`, types.OptionValue{Key: "guestinfo.metadata", Value: "aW5zdGFuY2UtaWQ6IHgK"}),
				assign(`config.extraConfig["guestinfo.metadata.encoding"]`, types.OptionValue{Key: "guestinfo.metadata.encoding", Value: "base64"}),
			},
		})
	}
	return out
}

// BenchmarkInventoryLoad applies the initial load of 10000 VMs; vm-bytes
// is the heap the loaded inventory holds per VM.
func BenchmarkInventoryLoad(b *testing.B) {
	const n = 10000
	updates := benchUpdates(n)
	var held uint64
	b.ReportAllocs()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := newInvState()
		s.apply(updates)
		runtime.GC()
		runtime.ReadMemStats(&after)
		held = after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(s)
	}
	b.ReportMetric(float64(held)/n, "vm-bytes")
}
