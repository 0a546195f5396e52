package vsphere

import (
	"testing"

	"github.com/vmware/govmomi/vim25/types"
)

// CPI's zone and region walk (connectionmanager's LookupZoneByMoref,
// called on the host, then the resource pool, then the VM: zones.go), as
// table cases: CPI's own (zones_test.go: no tags, region only, host tags,
// host tags removed, region on the datacenter and zone on the cluster)
// and every order of tags its walk can meet.
func TestCPIWalk(t *testing.T) {
	ref := func(kind, id string) types.ManagedObjectReference {
		return types.ManagedObjectReference{Type: kind, Value: id}
	}
	host, cluster, hostFolder, dc, root := ref("HostSystem", "host-1"), ref("ClusterComputeResource", "domain-c1"),
		ref("Folder", "group-h1"), ref("Datacenter", "datacenter-1"), ref("Folder", "group-d1")
	pool, rootPool := ref("ResourcePool", "resgroup-2"), ref("ResourcePool", "resgroup-1")
	vm, vmFolder := ref("VirtualMachine", "vm-1"), ref("Folder", "group-v1")
	ancestries := [][]types.ManagedObjectReference{
		{host, cluster, hostFolder, dc, root},
		{pool, rootPool, cluster, hostFolder, dc, root},
		{vm, vmFolder, dc, root},
	}
	zone := func(name string) namedTag { return namedTag{name: name, category: "k8s-zone"} }
	region := func(name string) namedTag { return namedTag{name: name, category: "k8s-region"} }
	both := []string{"k8s-zone", "k8s-region"}
	for _, tc := range []struct {
		name         string
		tags         map[types.ManagedObjectReference][]namedTag
		categories   []string
		zone, region string // "" ⇒ not found
	}{
		{name: "no tags (CPI: an error)", categories: both},
		{name: "region on the host only (CPI: an error; the last ancestry's partial answer, empty)", categories: both,
			tags: map[types.ManagedObjectReference][]namedTag{host: {region("r")}}},
		{name: "zone and region on the host", categories: both,
			tags: map[types.ManagedObjectReference][]namedTag{host: {zone("z-host"), region("r-host")}}, zone: "z-host", region: "r-host"},
		{name: "region on the datacenter, zone on the cluster", categories: both,
			tags: map[types.ManagedObjectReference][]namedTag{dc: {region("r-dc")}, cluster: {zone("z-cluster")}}, zone: "z-cluster", region: "r-dc"},
		{name: "zone on host and cluster, region on the datacenter: the cluster's zone", categories: both,
			tags: map[types.ManagedObjectReference][]namedTag{host: {zone("z-host")}, cluster: {zone("z-cluster")}, dc: {region("r-dc")}},
			zone: "z-cluster", region: "r-dc"},
		{name: "zone on host, cluster and root folder, region on the datacenter: the cluster's (the walk stops at the region)", categories: both,
			tags: map[types.ManagedObjectReference][]namedTag{host: {zone("z-host")}, cluster: {zone("z-cluster")}, dc: {region("r-dc")}, root: {zone("z-root")}},
			zone: "z-cluster", region: "r-dc"},
		{name: "zone on the host, region on the cluster, zone on the datacenter: the host's", categories: both,
			tags: map[types.ManagedObjectReference][]namedTag{host: {zone("z-host")}, cluster: {region("r-cluster")}, dc: {zone("z-dc")}},
			zone: "z-host", region: "r-cluster"},
		{name: "region on the host, zone on cluster and datacenter: the cluster's", categories: both,
			tags: map[types.ManagedObjectReference][]namedTag{host: {region("r-host")}, cluster: {zone("z-cluster")}, dc: {zone("z-dc")}},
			zone: "z-cluster", region: "r-host"},
		{name: "region on host and datacenter, zone on the folder between: the host's region", categories: both,
			tags: map[types.ManagedObjectReference][]namedTag{host: {region("r-host")}, hostFolder: {zone("z-folder")}, dc: {region("r-dc")}},
			zone: "z-folder", region: "r-host"},
		{name: "host ancestry without a region: the resource pool's ancestry, whole", categories: both,
			tags: map[types.ManagedObjectReference][]namedTag{host: {zone("z-host")}, pool: {zone("z-pool"), region("r-pool")}},
			zone: "z-pool", region: "r-pool"},
		{name: "zone on pool and root pool, region on the datacenter: the host ancestry lacks a zone, the pool's walk gives the root pool's", categories: both,
			tags: map[types.ManagedObjectReference][]namedTag{pool: {zone("z-pool")}, rootPool: {zone("z-root-pool")}, dc: {region("r-dc")}},
			zone: "z-root-pool", region: "r-dc"},
		{name: "only the VM and its folder: the VM ancestry", categories: both,
			tags: map[types.ManagedObjectReference][]namedTag{vm: {zone("z-vm")}, vmFolder: {zone("z-vmfolder"), region("r-vmfolder")}},
			zone: "z-vmfolder", region: "r-vmfolder"},
		{name: "a zone in one ancestry, a region in another: never paired (the VM ancestry's partial answer)", categories: both,
			tags:   map[types.ManagedObjectReference][]namedTag{pool: {zone("z-pool")}, vm: {region("r-vm")}},
			region: "r-vm"},
		{name: "two zone tags on one object: the first by name", categories: both,
			tags: map[types.ManagedObjectReference][]namedTag{host: {zone("z-b"), zone("z-a"), region("r")}}, zone: "z-a", region: "r"},
		{name: "zone alone asked for: the nearest", categories: []string{"k8s-zone"},
			tags: map[types.ManagedObjectReference][]namedTag{host: {zone("z-host")}, cluster: {zone("z-cluster")}}, zone: "z-host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := firstCompleteAncestry(ancestries, tc.tags, tc.categories)
			if got["k8s-zone"] != tc.zone || got["k8s-region"] != tc.region {
				t.Fatalf("got zone %q region %q; want zone %q region %q", got["k8s-zone"], got["k8s-region"], tc.zone, tc.region)
			}
		})
	}
}
