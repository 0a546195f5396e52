package nodes

import (
	"context"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
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
func (n *Owner) requeueOnRecovery(ctx context.Context, client kubernetes.Interface, all []*v1.Node,
	changes []vcenterChange) {
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
	log := klog.FromContext(ctx).WithValues("vcenters", back)
	touched := 0
	for _, node := range all {
		if !Uninitialized(node) || n.Unmanaged(node) {
			continue
		}
		retry := map[string]string{AnnotationLookupRetry: time.Now().UTC().Format(time.RFC3339Nano)}
		if err := patchNode(ctx, client, node.Name, "annotations", retry); err != nil {
			log.Error(err, "Re-queueing an uninitialized Node failed; the controller retries it with backoff", "node", node.Name)
			continue
		}
		touched++
	}
	log.Info("vCenters back: uninitialized Nodes re-queued", "nodes", touched)
}
