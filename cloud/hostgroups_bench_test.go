package cloud

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/backendtest"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// BenchmarkFollowVMsHostGroups is BenchmarkFollowVMs (one pass over 5,000
// initialized Nodes, steady state, 50,000 VMs in two vCenters) with zones
// from host groups: each VM's host in one of a stretched cluster's two
// site groups, the region from its tag (a second lookup of the VM from
// memory, the region walked alone). Compare ns/node with
// BenchmarkFollowVMs/tagLabels=0.
func BenchmarkFollowVMsHostGroups(b *testing.B) {
	const vcenters, vmsPer, nodeCount = 2, 25_000, 5_000
	zones := &config.HostGroupZones{Groups: map[string]string{"site-a-hosts": "site-a", "site-b-hosts": "site-b"}, From: "labels"}
	cfg := &config.Config{Labels: config.Labels{Region: "region"},
		PlacementLabels: []config.PlacementLabel{config.PlacementHost, config.PlacementCluster}}
	tags := map[string]string{"region": "r"}
	var targets []discovery.Target
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for v := range vcenters {
		be := &indexed{Backend: backendtest.New(), byUUID: map[string][]backends.Placement{}}
		name := fmt.Sprintf("vc%d", v)
		cfg.VCenters = append(cfg.VCenters, config.VCenter{Name: name, ZoneHostGroups: zones})
		targets = append(targets, discovery.Target{Name: name, Server: name + ":443", Backend: be,
			RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
		for i := range vmsPer {
			uuid := fmt.Sprintf("42%06x-0000-4000-8000-%012x", v, i)
			site := []string{"site-a", "site-b"}[i%64/32]
			vm := backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: fmt.Sprintf("vm-%d", i)}, Name: fmt.Sprintf("vm-%d-%d", v, i),
				UUID: uuid, HostName: fmt.Sprintf("esx-%d", i%64), Cluster: "stretched", DiskEnableUUID: "TRUE",
				HostGroups: []string{site + "-hosts"}, HostGroupsKnown: true}
			be.byUUID[uuid] = []backends.Placement{{VM: vm, Tags: tags, TagsKnown: true}}
			if i%(vmsPer*vcenters/nodeCount) != 0 { // every 10th VM is a Node's
				continue
			}
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: vm.Name, Labels: map[string]string{
				LabelVCenter: name, LabelServer: name, LabelDatacenter: "dc0",
				LabelHost: vm.HostName, LabelCluster: vm.Cluster,
				v1.LabelTopologyZone: site, v1.LabelTopologyRegion: "r",
			}}, Spec: v1.NodeSpec{ProviderID: discovery.ProviderID(uuid)}}
			if err := indexer.Add(node); err != nil {
				b.Fatal(err)
			}
		}
	}
	d := discovery.New(targets, discovery.Options{})
	n := newNodes(&eventLog{}, time.Second, time.Hour, NewMetrics(BuildInfo{}).nodes)
	n.discovery, n.config = d, func() *config.Config { return cfg }
	events := &eventLog{}
	n.checks = newNodeChecks(events, NewMetrics(BuildInfo{}), &v1.ObjectReference{}, time.Hour, newUnmanagedNodes(events, nil))
	lister := corelisters.NewNodeLister(indexer)
	client := fake.NewClientset()
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		n.lastFull = time.Time{} // every pass a full one
		n.followVMs(ctx, client, lister, time.Now().Add(time.Duration(i)))
	}
	b.StopTimer()
	if w := len(client.Actions()); w != 0 {
		b.Fatalf("%d writes in the steady state; want none (%v)", w, client.Actions()[0])
	}
	for _, r := range n.reports {
		if len(r.drift) > 0 || r.groupErr != "" {
			b.Fatalf("a report %+v in the steady state", r)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/nodeCount, "ns/node")
}
