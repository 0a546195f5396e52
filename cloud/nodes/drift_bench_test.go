package nodes

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/events"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// indexed answers Placement from a map by UUID, as backends/vsphere's
// inventory does from its index (backendtest's scans every VM it holds,
// which would measure the fake, not the pass).
type indexed struct {
	*backendtest.Backend
	byUUID map[string][]backends.Placement
}

func (b *indexed) Placement(uuid string, _ []string) ([]backends.Placement, bool) {
	return b.byUUID[uuid], true
}

// One pass of the nodes owner over 5,000 initialized Nodes, every label
// current (the steady state: no write), against two vCenters holding
// 50,000 VMs: the cost per Node of following the VMs. Variants: with
// tagLabels=2, two nodes.tagLabels categories too (each walked on its own:
// a lookup of the VM per category); hostGroups, zones from host groups
// (each VM's host in one of a stretched cluster's two site groups, the
// region from its tag, walked alone).
func BenchmarkFollowVMs(b *testing.B) {
	for _, v := range []followVariant{{}, {tagged: 2}, {hostGroups: true}} {
		b.Run(v.String(), func(b *testing.B) { benchmarkFollowVMs(b, v) })
	}
}

type followVariant struct {
	tagged     int
	hostGroups bool
}

func (v followVariant) String() string {
	if v.hostGroups {
		return "hostGroups"
	}
	return fmt.Sprintf("tagLabels=%d", v.tagged)
}

func benchmarkFollowVMs(b *testing.B, variant followVariant) {
	const vcenters, vmsPer, nodeCount = 2, 25_000, 5_000
	cfg := &config.Config{Labels: config.Labels{Zone: "zone", Region: "region"},
		PlacementLabels: []config.PlacementLabel{config.PlacementHost, config.PlacementCluster}}
	tags := map[string]string{"zone": "z", "region": "r"}
	var zones *config.HostGroupZones
	if variant.hostGroups {
		zones = &config.HostGroupZones{Groups: map[string]string{"site-a-hosts": "site-a", "site-b-hosts": "site-b"}, From: "labels"}
		cfg.Labels.Zone = ""
		delete(tags, "zone")
	}
	for i := range variant.tagged {
		cat := fmt.Sprintf("cat-%d", i)
		cfg.TagLabels = append(cfg.TagLabels, config.TagLabel{Category: cat, Key: "example.com/" + cat})
		tags[cat] = "v"
	}
	var targets []discovery.Target
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for v := range vcenters {
		be := &indexed{Backend: backendtest.New(), byUUID: map[string][]backends.Placement{}}
		name := fmt.Sprintf("vc%d", v)
		if zones != nil {
			cfg.VCenters = append(cfg.VCenters, config.VCenter{Name: name, ZoneHostGroups: zones})
		}
		targets = append(targets, discovery.Target{Name: name, Server: name + ":443", Backend: be,
			RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
		for i := range vmsPer {
			uuid := fmt.Sprintf("42%06x-0000-4000-8000-%012x", v, i)
			vm := backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: fmt.Sprintf("vm-%d", i)}, Name: fmt.Sprintf("vm-%d-%d", v, i),
				UUID: uuid, HostName: fmt.Sprintf("esx-%d", i%64), Cluster: fmt.Sprintf("c-%d", i%8), DiskEnableUUID: "TRUE"}
			zone := "z"
			if zones != nil {
				zone = []string{"site-a", "site-b"}[i%64/32]
				vm.Cluster, vm.HostGroups, vm.HostGroupsKnown = "stretched", []string{zone + "-hosts"}, true
			}
			be.byUUID[uuid] = []backends.Placement{{VM: vm, Tags: tags, TagsKnown: true}}
			if i%(vmsPer*vcenters/nodeCount) != 0 { // every 10th VM is a Node's
				continue
			}
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: vm.Name, Labels: map[string]string{
				LabelVCenter: name, LabelServer: name, LabelDatacenter: "dc0",
				metadata.LabelHost: vm.HostName, metadata.LabelCluster: vm.Cluster,
				v1.LabelTopologyZone: zone, v1.LabelTopologyRegion: "r",
			}}, Spec: v1.NodeSpec{ProviderID: discovery.ProviderID(uuid)}}
			for _, t := range cfg.TagLabels {
				node.Labels[t.Key] = "v"
			}
			if err := indexer.Add(node); err != nil {
				b.Fatal(err)
			}
		}
	}
	d := discovery.New(targets, discovery.Options{})
	n := New(&events.Log{}, Options{Discovery: d, Config: func() *config.Config { return cfg },
		Poll: time.Second, Resync: time.Hour, UninitializedAfter: time.Hour, EventObject: &v1.ObjectReference{},
		Metrics: NewMetrics()})
	lister := corelisters.NewNodeLister(indexer)
	client := fake.NewClientset()
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		n.lastFull = time.Time{} // every pass a full one
		all, _ := lister.List(labels.Everything())
		n.followVMs(ctx, client, lister, all, time.Now().Add(time.Duration(i)))
	}
	b.StopTimer()
	if w := len(client.Actions()); w != 0 {
		b.Fatalf("%d writes in the steady state; want none (%v)", w, client.Actions()[0])
	}
	if len(indexer.List()) != nodeCount {
		b.Fatalf("%d Nodes, want %d", len(indexer.List()), nodeCount)
	}
	for _, r := range n.reports {
		if len(r.drift) > 0 || r.groupErr != "" {
			b.Fatalf("a report %+v in the steady state", r)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/nodeCount, "ns/node")
}
