package vsphere

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
)

// benchClusters and benchHostsPerCluster shape the bench's vCenter: one
// datacenter of clusters, each with its hosts and its root resource pool.
const benchClusters, benchHostsPerCluster = 8, 8

// benchUpdates is the initial load of a vCenter of n VMs, each with every
// property the CCM reads, as the watch receives it, and the entities
// above them (the root folder, as the watch holds it, first).
func benchUpdates(n int) []types.ObjectUpdate {
	ref := func(kind, id string) types.ManagedObjectReference {
		return types.ManagedObjectReference{Type: kind, Value: id}
	}
	root := ref("Folder", "group-d1")
	dc := ref("Datacenter", "datacenter-1")
	vmFolder := ref("Folder", "group-v1")
	hostFolder := ref("Folder", "group-h1")
	assign := func(name string, v any) types.PropertyChange {
		return types.PropertyChange{Name: name, Op: types.PropertyChangeOpAssign, Val: v}
	}
	entity := func(obj types.ManagedObjectReference, name string, parent types.ManagedObjectReference) types.ObjectUpdate {
		cs := []types.PropertyChange{assign("name", name)}
		if parent.Value != "" {
			cs = append(cs, assign("parent", parent))
		}
		return types.ObjectUpdate{Kind: types.ObjectUpdateKindEnter, Obj: obj, ChangeSet: cs}
	}
	out := []types.ObjectUpdate{
		entity(root, "Datacenters", types.ManagedObjectReference{}),
		entity(dc, "dc", root),
		entity(vmFolder, "vm", dc),
		entity(hostFolder, "host", dc),
	}
	for c := range benchClusters {
		cluster := ref("ClusterComputeResource", fmt.Sprintf("domain-c%d", c))
		out = append(out, entity(cluster, fmt.Sprintf("cluster-%d", c), hostFolder),
			entity(ref("ResourcePool", fmt.Sprintf("resgroup-%d", c)), "Resources", cluster))
		for h := range benchHostsPerCluster {
			out = append(out, entity(ref("HostSystem", fmt.Sprintf("host-%d-%d", c, h)), fmt.Sprintf("esx-%d-%d.example.com", c, h), cluster))
		}
	}
	for i := range n {
		c, h := i%benchClusters, i/benchClusters%benchHostsPerCluster
		out = append(out, types.ObjectUpdate{
			Kind: types.ObjectUpdateKindEnter,
			Obj:  vmRef(fmt.Sprintf("vm-%d", i)),
			ChangeSet: []types.PropertyChange{
				assign("name", fmt.Sprintf("node-%d", i)),
				assign("parent", vmFolder),
				assign("config.uuid", benchUUID(i)),
				assign("config.hardware.numCPU", int32(4)),
				assign("config.hardware.memoryMB", int32(8192)),
				assign("config.guestId", "ubuntu64Guest"),
				assign("runtime.powerState", types.VirtualMachinePowerStatePoweredOn),
				assign("runtime.connectionState", types.VirtualMachineConnectionStateConnected),
				assign("runtime.host", ref("HostSystem", fmt.Sprintf("host-%d-%d", c, h))),
				assign("resourcePool", ref("ResourcePool", fmt.Sprintf("resgroup-%d", c))),
				assign("guest.hostName", fmt.Sprintf("node-%d.example.com", i)),
				assign("guest.net", types.ArrayOfGuestNicInfo{GuestNicInfo: []types.GuestNicInfo{{
					Network: "VM Network", MacAddress: fmt.Sprintf("00:50:56:00:%02x:%02x", i/256%256, i%256),
					IpAddress: []string{fmt.Sprintf("10.0.%d.%d", i/256%256, i%256)}, DeviceConfigId: 4000,
				}}}),
				assign(`config.extraConfig["guestinfo.metadata"]`, types.OptionValue{Key: "guestinfo.metadata", Value: "aW5zdGFuY2UtaWQ6IHgK"}),
				assign(`config.extraConfig["guestinfo.metadata.encoding"]`, types.OptionValue{Key: "guestinfo.metadata.encoding", Value: "base64"}),
				assign(`config.extraConfig["disk.EnableUUID"]`, types.OptionValue{Key: "disk.EnableUUID", Value: "TRUE"}),
			},
		})
	}
	return out
}

func benchUUID(i int) string {
	return fmt.Sprintf("4210%04x-0000-4000-8000-%012x", i%0xffff, i)
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

// BenchmarkPlacement is one Placement call (a Node's drift check) in an
// inventory of 50000 VMs whose tags are all cached: zones on the
// clusters, the region on the datacenter.
func BenchmarkPlacement(b *testing.B) {
	const n = 50000
	s := newInvState()
	s.apply(benchUpdates(n))
	inv := loadedInventory(s)
	snap := &tagSnapshot{attached: map[types.ManagedObjectReference][]namedTag{}, loaded: time.Now()}
	for r := range s.entities {
		var tags []namedTag
		switch r.Type {
		case "ClusterComputeResource":
			tags = []namedTag{{name: "zone-" + r.Value, category: "k8s-zone"}}
		case "Datacenter":
			tags = []namedTag{{name: "region-1", category: "k8s-region"}}
		}
		snap.attached[r] = tags
	}
	for id := range s.vms {
		snap.attached[vmRef(id)] = nil
	}
	be := &Backend{inv: inv, bulkTags: &attachedTagCache{snap: snap}}
	uuids := make([]string, 1024)
	for i := range uuids {
		uuids[i] = benchUUID(i * (n / len(uuids)))
	}
	c := (n / len(uuids)) % benchClusters // of uuids[1]
	if ps, ok := be.Placement(uuids[1], zoneRegion); !ok || len(ps) != 1 || !ps[0].TagsKnown ||
		ps[0].Tags["k8s-zone"] != fmt.Sprintf("zone-domain-c%d", c) || ps[0].Tags["k8s-region"] != "region-1" ||
		ps[0].VM.Cluster != fmt.Sprintf("cluster-%d", c) || ps[0].VM.ResourcePoolPath != fmt.Sprintf("/dc/host/cluster-%d/Resources", c) {
		b.Fatalf("Placement = %+v, %v", ps, ok)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := be.Placement(uuids[i%len(uuids)], zoneRegion); !ok {
			b.Fatal("not ok")
		}
		i++
	}
}
