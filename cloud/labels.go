package cloud

import (
	"context"
	"encoding/json"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
)

// labelNodes adds the location labels to each initialized Node that lacks
// them or whose VM moved: the cloud-node controller applies a provider's
// labels only at initialization, so Nodes initialized by CPI, or before
// these labels existed, would never get them. Best effort: a failure is
// logged and retried at the Node's next lookup.
func (n *nodes) labelNodes(ctx context.Context, client kubernetes.Interface, lister corelisters.NodeLister) {
	for name, want := range n.relabelling() {
		node, err := lister.Get(name)
		if apierrors.IsNotFound(err) {
			n.waitForCache(name, want)
			continue
		}
		if err != nil || uninitialized(node) {
			continue
		}
		missing := map[string]string{}
		for k, v := range want {
			if node.Labels[k] != v {
				missing[k] = v
			}
		}
		if len(missing) == 0 {
			continue // labelled since
		}
		if err := patchLabels(ctx, client, name, missing); err != nil {
			klog.FromContext(ctx).Error(err, "Adding the location labels failed; retried at the next status pass", "node", name, "labels", missing)
			continue
		}
		klog.FromContext(ctx).V(2).Info("Location labels added", "node", name, "labels", missing)
	}
}

func patchLabels(ctx context.Context, client kubernetes.Interface, name string, labels map[string]string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// hasLabels reports whether node carries every label of want.
func hasLabels(node *v1.Node, want map[string]string) bool {
	for k, v := range want {
		if node.Labels[k] != v {
			return false
		}
	}
	return true
}
