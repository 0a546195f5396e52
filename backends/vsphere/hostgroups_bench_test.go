package vsphere

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
)

// benchUpdatesWithHostGroups is benchUpdates with each cluster's
// configurationEx, as a backend reading host groups receives it: a
// stretched cluster, its first half of hosts site A's group, the other
// half site B's, and a VM group per site listing the cluster's VMs (what
// CAPV and OpenShift make, read and dropped: no VM group is held).
func benchUpdatesWithHostGroups(n int) []types.ObjectUpdate {
	updates := benchUpdates(n)
	vmsOf := map[int][]types.ManagedObjectReference{}
	for i := range n {
		c := i % benchClusters
		vmsOf[c] = append(vmsOf[c], vmRef(fmt.Sprintf("vm-%d", i)))
	}
	for i, u := range updates {
		if u.Obj.Type != "ClusterComputeResource" {
			continue
		}
		var c int
		if _, err := fmt.Sscanf(u.Obj.Value, "domain-c%d", &c); err != nil {
			panic(err)
		}
		cfg := &types.ClusterConfigInfoEx{}
		for site, name := range []string{"a", "b"} {
			hg := &types.ClusterHostGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: fmt.Sprintf("site-%s-hosts", name)}}
			for h := site * benchHostsPerCluster / 2; h < (site+1)*benchHostsPerCluster/2; h++ {
				hg.Host = append(hg.Host, types.ManagedObjectReference{Type: "HostSystem", Value: fmt.Sprintf("host-%d-%d", c, h)})
			}
			cfg.Group = append(cfg.Group, hg,
				&types.ClusterVmGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: fmt.Sprintf("site-%s-vms", name)}, Vm: vmsOf[c]})
		}
		updates[i].ChangeSet = append(updates[i].ChangeSet, types.PropertyChange{Name: "configurationEx", Op: types.PropertyChangeOpAssign, Val: cfg})
	}
	return updates
}

// BenchmarkInventoryLoadHostGroups is BenchmarkInventoryLoad with the
// clusters' host groups: vm-bytes is what an inventory holds per VM, with
// them (compare with BenchmarkInventoryLoad's).
func BenchmarkInventoryLoadHostGroups(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		b.Run(fmt.Sprintf("vms=%d", n), func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			s := newInvState()
			s.apply(benchUpdatesWithHostGroups(n))
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(s)
			if len(s.hostGroups) != benchClusters {
				b.Fatalf("host groups of %d clusters held; want %d", len(s.hostGroups), benchClusters)
			}
			updates := benchUpdatesWithHostGroups(n)
			b.ReportAllocs()
			for b.Loop() {
				newInvState().apply(updates)
			}
			b.ReportMetric((float64(after.HeapAlloc)-float64(before.HeapAlloc))/float64(n), "vm-bytes")
		})
	}
}

// BenchmarkPlacementHostGroups is BenchmarkPlacement (a Node's drift
// check) where the VMs' clusters have host groups: the groups of the VM's
// host are resolved at each call.
func BenchmarkPlacementHostGroups(b *testing.B) {
	const n = 50000
	s := newInvState()
	s.apply(benchUpdatesWithHostGroups(n))
	inv := loadedInventory(s)
	snap := &tagSnapshot{attached: map[types.ManagedObjectReference][]namedTag{}, loaded: time.Now()}
	for r := range s.entities {
		var tags []namedTag
		if r.Type == "Datacenter" {
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
	region := []string{"k8s-region"}
	if ps, ok := be.Placement(uuids[1], region); !ok || len(ps) != 1 || !ps[0].VM.HostGroupsKnown || len(ps[0].VM.HostGroups) != 1 {
		b.Fatalf("Placement = %+v, %v", ps, ok)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := be.Placement(uuids[i%len(uuids)], region); !ok {
			b.Fatal("not ok")
		}
		i++
	}
}
