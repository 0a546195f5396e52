package vsphere

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
)

// benchClusters and benchHostsPerCluster shape the bench's vCenter: one
// datacenter of clusters, each with its hosts and its root resource pool.
const benchClusters, benchHostsPerCluster = 8, 8

// benchUpdates is the initial load of a vCenter of n VMs, each with every
// property the CCM reads, as the watch receives it, and the entities
// above them (the root folder, as the watch holds it, first). Every
// string of a VM's update is its own, as the SOAP decoder makes them:
// what the inventory keeps of them is counted per VM.
func benchUpdates(n int) []types.ObjectUpdate {
	ref := func(kind, id string) types.ManagedObjectReference {
		return types.ManagedObjectReference{Type: strings.Clone(kind), Value: strings.Clone(id)}
	}
	str := strings.Clone
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
			Obj:  ref("VirtualMachine", fmt.Sprintf("vm-%d", i)),
			ChangeSet: []types.PropertyChange{
				assign("name", fmt.Sprintf("node-%d", i)),
				assign("parent", ref(vmFolder.Type, vmFolder.Value)),
				assign("config.uuid", benchUUID(i)),
				assign("config.hardware.numCPU", int32(4)),
				assign("config.hardware.memoryMB", int32(8192)),
				assign("config.guestId", str("ubuntu64Guest")),
				assign("config.version", str("vmx-19")),
				assign("runtime.powerState", types.VirtualMachinePowerState(str(string(types.VirtualMachinePowerStatePoweredOn)))),
				assign("runtime.connectionState", types.VirtualMachineConnectionState(str(string(types.VirtualMachineConnectionStateConnected)))),
				assign("runtime.host", ref("HostSystem", fmt.Sprintf("host-%d-%d", c, h))),
				assign("resourcePool", ref("ResourcePool", fmt.Sprintf("resgroup-%d", c))),
				assign("guest.hostName", fmt.Sprintf("node-%d.example.com", i)),
				assign("guest.net", benchNet(i, 0)),
				assign(`config.extraConfig["guestinfo.metadata"]`, types.OptionValue{Key: str("guestinfo.metadata"), Value: str("aW5zdGFuY2UtaWQ6IHgK")}),
				assign(`config.extraConfig["guestinfo.metadata.encoding"]`, types.OptionValue{Key: str("guestinfo.metadata.encoding"), Value: str("base64")}),
				assign(`config.extraConfig["disk.EnableUUID"]`, types.OptionValue{Key: str("disk.EnableUUID"), Value: str("TRUE")}),
			},
		})
	}
	return out
}

func benchUUID(i int) string {
	return fmt.Sprintf("4210%04x-0000-4000-8000-%012x", i%0xffff, i)
}

// benchNet is VM i's guest NICs: one, with an IPv4 address in subnet
// 10.net.0.0/16 and an IPv6 link-local one, as guests report.
func benchNet(i, net int) types.ArrayOfGuestNicInfo {
	return types.ArrayOfGuestNicInfo{GuestNicInfo: []types.GuestNicInfo{{
		Network: strings.Clone("VM Network"), MacAddress: fmt.Sprintf("00:50:56:00:%02x:%02x", i/256%256, i%256),
		IpAddress: []string{
			fmt.Sprintf("10.%d.%d.%d", net, i/256%256, i%256),
			fmt.Sprintf("fe80::250:56ff:fe00:%x", i%0x10000),
		},
		DeviceConfigId: 4000,
	}}}
}

// BenchmarkInventoryLoad applies the initial load of n VMs; vm-bytes is
// the heap the loaded inventory holds per VM once the updates it was
// loaded from are gone, as the watch's decoded pages are.
func BenchmarkInventoryLoad(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		b.Run(fmt.Sprintf("vms=%d", n), func(b *testing.B) {
			held := heldPerVM(n)
			updates := benchUpdates(n)
			b.ReportAllocs()
			for b.Loop() {
				newInvState().apply(updates)
			}
			b.ReportMetric(held, "vm-bytes")
		})
	}
}

// heldPerVM is the live heap an inventory loaded with n VMs holds per VM.
func heldPerVM(n int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := newInvState()
	s.apply(benchUpdates(n))
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
}

// BenchmarkInventoryUpdate applies one change to a VM of an inventory of
// 10000 VMs, as the watch receives it: a power state, or the guest's
// addresses (a new IPv4 address: the IP index changes too). Each VM's
// change goes there and back, so the inventory does not grow.
func BenchmarkInventoryUpdate(b *testing.B) {
	const n = 10000
	s := newInvState()
	s.apply(benchUpdates(n))
	changes := []struct {
		name   string
		change func(i, round int) types.PropertyChange
	}{
		{"runtime.powerState", func(i, round int) types.PropertyChange {
			st := []types.VirtualMachinePowerState{types.VirtualMachinePowerStatePoweredOff, types.VirtualMachinePowerStatePoweredOn}[round]
			return types.PropertyChange{Name: "runtime.powerState", Op: types.PropertyChangeOpAssign, Val: types.VirtualMachinePowerState(strings.Clone(string(st)))}
		}},
		{"guest.net", func(i, round int) types.PropertyChange {
			return types.PropertyChange{Name: "guest.net", Op: types.PropertyChangeOpAssign, Val: benchNet(i, 1-round)}
		}},
	}
	for _, c := range changes {
		b.Run(c.name, func(b *testing.B) {
			updates := make([][]types.ObjectUpdate, 0, 2*n)
			for round := range 2 {
				for i := range n {
					updates = append(updates, []types.ObjectUpdate{{
						Kind: types.ObjectUpdateKindModify, Obj: vmRef(fmt.Sprintf("vm-%d", i)),
						ChangeSet: []types.PropertyChange{c.change(i, round)},
					}})
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.apply(updates[i%len(updates)])
				i++
			}
			if len(s.vms) != n || s.byIP.len() != 2*n {
				b.Fatalf("after the updates: %d VMs, %d IPs indexed; want %d, %d", len(s.vms), s.byIP.len(), n, 2*n)
			}
		})
	}
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
