package cloud

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// AnnotationLookupRetry is set on a Node that is still uninitialized when a
// vCenter comes back: any update of a Node re-queues it in the cloud-node
// controller, which otherwise retries a Node that failed with exponential
// backoff (up to 1000 s) or at its kubelet's next status report.
const AnnotationLookupRetry = "vsphere-federated-ccm.io/lookup-retry"

// requeueOnRecovery touches every Node still carrying the uninitialized
// taint when a vCenter comes back (known down or behind an open breaker,
// then healthy: changes), or first connects after refusing lookups as
// still connecting (a first connect is no recovery: a vCenter not yet
// known is healthy), so it is looked up again at once.
func (n *nodes) requeueOnRecovery(ctx context.Context, client kubernetes.Interface, lister corelisters.NodeLister, changes []vcenterChange) {
	var back []string
	for _, ch := range changes {
		if ch.recovered {
			back = append(back, ch.health.Name)
		}
	}
	for _, name := range n.discovery.Connected() {
		if !slices.Contains(back, name) {
			back = append(back, name)
		}
	}
	if len(back) == 0 {
		return
	}
	all, err := lister.List(labels.Everything())
	if err != nil {
		return
	}
	log := klog.FromContext(ctx).WithValues("vcenters", back)
	touched := 0
	for _, node := range all {
		if !uninitialized(node) || n.unmanaged(node) {
			continue
		}
		if err := touch(ctx, client, node.Name); err != nil {
			log.Error(err, "Re-queueing an uninitialized Node failed; the controller retries it with backoff", "node", node.Name)
			continue
		}
		touched++
	}
	log.Info("vCenters back: uninitialized Nodes re-queued", "nodes", touched)
}

func uninitialized(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return true
		}
	}
	return false
}

// touch sets AnnotationLookupRetry on a Node.
func touch(ctx context.Context, client kubernetes.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, AnnotationLookupRetry, time.Now().UTC().Format(time.RFC3339Nano))
	_, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// noteDuplicate is discovery's OnDuplicate: reported at the next poll.
func (n *nodes) noteDuplicate(uuid string, vcenters []string) {
	klog.Background().Info("A BIOS UUID is held by VMs in several vCenters; lookups of its Nodes fail until one is changed", "uuid", uuid, "vcenters", vcenters)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pendingDuplicates == nil {
		n.pendingDuplicates = map[string][]string{}
	}
	n.pendingDuplicates[uuid] = vcenters
}

// reportDuplicates records an Event on every Node of each UUID noted.
func (n *nodes) reportDuplicates(lister corelisters.NodeLister) {
	n.mu.Lock()
	pending := n.pendingDuplicates
	n.pendingDuplicates = nil
	n.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	all, err := lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, node := range all {
		if n.unmanaged(node) {
			continue
		}
		for _, u := range nodeUUIDs(node) {
			if vcs, ok := pending[u]; ok {
				n.events.record(node, v1.EventTypeWarning, ReasonDuplicateUUID,
					fmt.Sprintf("BIOS UUID %s is held by VMs in vcenters %v; the Node is not served until one is changed", u, vcs))
				break
			}
		}
	}
}

// nodeUUIDs are the BIOS UUIDs a Node may stand for: its providerID's, and
// its system UUID in both byte orders.
func nodeUUIDs(n *v1.Node) []string {
	var out []string
	if u, err := discovery.ParseProviderID(n.Spec.ProviderID); err == nil {
		out = append(out, u)
	}
	if u, err := discovery.NormalizeUUID(n.Status.NodeInfo.SystemUUID); err == nil {
		out = append(out, u, discovery.SwapByteOrder(u))
	}
	return out
}
