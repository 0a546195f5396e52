package nodes

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/events"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// BenchmarkNodesHeld measures the heap the Nodes' informers hold, per
// Node, for 5,000 Nodes shaped as a kubelet, the node controllers and
// this CCM leave them (labels, images, conditions, managedFields of four
// managers): "own+shared" is a Node owner with a factory of its own beside
// the controllers' (each Node held twice, whole), "shared" the owner
// reading the controllers' informer, which drops managedFields.
//
//	go test ./cloud -run '^$' -bench NodesHeld -benchtime 1x
func BenchmarkNodesHeld(b *testing.B) {
	const count = 5000
	objs := make([]*v1.Node, count)
	for i := range objs {
		objs[i] = heavyNode(i)
	}
	for _, tc := range []struct {
		name  string
		watch func(client *fake.Clientset, stop chan struct{}) []cache.SharedIndexInformer
	}{
		{"own+shared", func(client *fake.Clientset, stop chan struct{}) []cache.SharedIndexInformer {
			own, shared := informers.NewSharedInformerFactory(client, 0), informers.NewSharedInformerFactory(client, 0)
			out := []cache.SharedIndexInformer{own.Core().V1().Nodes().Informer(), shared.Core().V1().Nodes().Informer()}
			own.Start(stop)
			shared.Start(stop)
			return out
		}},
		{"shared", func(client *fake.Clientset, stop chan struct{}) []cache.SharedIndexInformer {
			shared := informers.NewSharedInformerFactory(client, 0)
			w := New(&events.Log{}, Options{}).Watch(shared)
			shared.Start(stop)
			return []cache.SharedIndexInformer{w.Informer}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer() // the fake API server's copies are not what is measured
				client := fake.NewClientset()
				for _, n := range objs {
					if err := client.Tracker().Create(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, n.DeepCopy(), ""); err != nil {
						b.Fatal(err)
					}
				}
				before := heapInUse()
				b.StartTimer()
				stop := make(chan struct{})
				held := tc.watch(client, stop)
				for _, inf := range held {
					cache.WaitForCacheSync(stop, inf.HasSynced)
				}
				after := heapInUse()
				for _, inf := range held {
					if got := len(inf.GetStore().ListKeys()); got != count {
						b.Fatalf("informer holds %d Nodes, want %d", got, count)
					}
				}
				close(stop)
				b.ReportMetric(float64(after-before)/count, "B/Node")
				b.ReportMetric(float64(after-before)/(1<<20), "MiB")
			}
		})
	}
}

func heapInUse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// heavyNode is Node i as a cluster's control plane leaves it.
func heavyNode(i int) *v1.Node {
	name := fmt.Sprintf("node-%05d", i)
	labels := map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
		v1.LabelTopologyZone: "zone-a", v1.LabelTopologyRegion: "region-1", v1.LabelFailureDomainBetaZone: "zone-a",
		v1.LabelInstanceTypeStable: "vsphere-vm.cpu-4.mem-16gb.os-ubuntu", LabelVCenter: "vc-east", LabelDatacenter: "dc-1",
	}
	var images []v1.ContainerImage
	for j := range 20 {
		images = append(images, v1.ContainerImage{
			Names:     []string{fmt.Sprintf("registry.example.com/team/image-%02d@sha256:%064d", j, j), fmt.Sprintf("registry.example.com/team/image-%02d:v1.%d", j, j)},
			SizeBytes: int64(10_000_000 + j),
		})
	}
	var conds []v1.NodeCondition
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure, v1.NodeReady} {
		conds = append(conds, v1.NodeCondition{Type: c, Status: v1.ConditionFalse, Reason: "Kubelet" + string(c), Message: "kubelet has sufficient resources for " + string(c)})
	}
	capacity := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110"), v1.ResourceEphemeralStorage: resource.MustParse("100Gi")}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: labels, ResourceVersion: "1",
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"kubeadm.alpha.kubernetes.io/cri-socket": "unix:///var/run/containerd/containerd.sock",
			},
			ManagedFields: heavyManagedFields(labels),
		},
		Spec: v1.NodeSpec{ProviderID: fmt.Sprintf("vsphere://4237%04d-0000-0000-0000-%012d", i%10000, i), PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}},
		Status: v1.NodeStatus{
			Capacity: capacity, Allocatable: capacity, Conditions: conds, Images: images,
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeHostName, Address: name}},
			NodeInfo: v1.NodeSystemInfo{
				MachineID: fmt.Sprintf("%032d", i), SystemUUID: fmt.Sprintf("4237%04d-0000-0000-0000-%012d", i%10000, i), BootID: fmt.Sprintf("%032d", i),
				KernelVersion: "6.8.0-45-generic", OSImage: "Ubuntu 24.04.1 LTS", ContainerRuntimeVersion: "containerd://1.7.22",
				KubeletVersion: "v1.31.1", OperatingSystem: "linux", Architecture: "amd64",
			},
		},
	}
}

// heavyManagedFields are the field sets a kubelet, the kube-controller-
// manager, the cloud-node controller and kubeadm own on a Node, in the
// fieldsV1 JSON the API server keeps.
func heavyManagedFields(labels map[string]string) []metav1.ManagedFieldsEntry {
	keys := func(prefix string, names []string) string {
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf(`"%s%s":{}`, prefix, n)
		}
		return strings.Join(parts, ",")
	}
	var labelNames []string
	for k := range labels {
		labelNames = append(labelNames, k)
	}
	conds := `"k:{\"type\":\"DiskPressure\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}},` +
		`"k:{\"type\":\"MemoryPressure\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}},` +
		`"k:{\"type\":\"PIDPressure\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}},` +
		`"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}`
	kubelet := `{"f:metadata":{"f:annotations":{".":{},"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},"f:labels":{".":{},` + keys("f:", labelNames[:5]) + `}},` +
		`"f:status":{"f:addresses":{".":{},"k:{\"type\":\"Hostname\"}":{".":{},"f:address":{},"f:type":{}},"k:{\"type\":\"InternalIP\"}":{".":{},"f:address":{},"f:type":{}}},` +
		`"f:allocatable":{".":{},"f:cpu":{},"f:ephemeral-storage":{},"f:hugepages-1Gi":{},"f:hugepages-2Mi":{},"f:memory":{},"f:pods":{}},` +
		`"f:capacity":{".":{},"f:cpu":{},"f:ephemeral-storage":{},"f:hugepages-1Gi":{},"f:hugepages-2Mi":{},"f:memory":{},"f:pods":{}},` +
		`"f:conditions":{".":{},` + conds + `},"f:daemonEndpoints":{"f:kubeletEndpoint":{"f:Port":{}}},"f:images":{},` +
		`"f:nodeInfo":{"f:architecture":{},"f:bootID":{},"f:containerRuntimeVersion":{},"f:kernelVersion":{},"f:kubeProxyVersion":{},"f:kubeletVersion":{},"f:machineID":{},"f:operatingSystem":{},"f:osImage":{},"f:systemUUID":{}}}}`
	kcm := `{"f:metadata":{"f:annotations":{"f:node.alpha.kubernetes.io/ttl":{}}},"f:spec":{"f:podCIDR":{},"f:podCIDRs":{".":{},"v:\"10.244.0.0/24\"":{}}}}`
	ccm := `{"f:metadata":{"f:labels":{` + keys("f:", labelNames[5:]) + `}},"f:spec":{"f:providerID":{}}}`
	kubeadm := `{"f:metadata":{"f:annotations":{"f:kubeadm.alpha.kubernetes.io/cri-socket":{}}}}`
	entry := func(manager, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &metav1.Time{}, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields), Subresource: sub}
	}
	return []metav1.ManagedFieldsEntry{
		entry("kubelet", "status", kubelet), entry("kube-controller-manager", "", kcm),
		entry("vsphere-federated-ccm", "", ccm), entry("kubeadm", "", kubeadm),
	}
}
