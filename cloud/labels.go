package cloud

import (
	"context"
	"encoding/json"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// backfillLabels adds the location labels to an initialized Node that
// lacks them or whose VM moved: the cloud-node controller applies a
// provider's labels only at initialization, so Nodes initialized by CPI,
// or before these labels existed, would never get them. Best effort: a
// failure is logged and retried at the next status pass.
func (c *Cloud) backfillLabels(ctx context.Context, node *v1.Node, want map[string]string) {
	if c.client == nil || c.opts.ReadOnly || uninitialized(node) {
		return
	}
	missing := map[string]string{}
	for k, v := range want {
		if node.Labels[k] != v {
			missing[k] = v
		}
	}
	if len(missing) == 0 {
		return
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": missing}})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	log := klog.FromContext(ctx).WithValues("node", node.Name)
	if _, err := c.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		log.Error(err, "Adding the location labels failed; retried at the next status pass", "labels", missing)
		return
	}
	log.V(2).Info("Location labels added", "labels", missing)
}
