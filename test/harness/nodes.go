package harness

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

// Taints the CCM manages.
const (
	// UninitializedTaint is set by a kubelet with --cloud-provider=external
	// and removed by the cloud-node controller once the Node is initialized.
	UninitializedTaint = cloudproviderapi.TaintExternalCloudProvider
	// ShutdownTaint is set by the cloud-node-lifecycle controller on a
	// NotReady Node whose VM is powered off.
	ShutdownTaint = cloudproviderapi.TaintNodeShutdown
)

// KubeletNode is a Node as a kubelet started with --cloud-provider=external
// registers it: the uninitialized taint, no providerID, no addresses, the
// machine's system UUID as the kubelet reads it (for a vSphere VM, the BIOS
// UUID with its first three groups byte-swapped: vcsim.VM.SystemUUID), and a
// Ready condition with a fresh heartbeat.
func KubeletNode(name, systemUUID string, ready bool) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: "amd64",
			},
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: UninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			NodeInfo: corev1.NodeSystemInfo{
				SystemUUID: systemUUID, OperatingSystem: "linux", Architecture: "amd64",
				KubeletVersion: "v1.37.1", ContainerRuntimeVersion: "containerd://2.1.0",
			},
			Conditions: []corev1.NodeCondition{readyCondition(ready)},
		},
	}
}

func readyCondition(ready bool) corev1.NodeCondition {
	now := metav1.Now()
	c := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now,
		Reason: "KubeletReady", Message: "kubelet is posting ready status",
	}
	if !ready {
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready"
	}
	return c
}

// CreateKubeletNode creates KubeletNode(name, systemUUID, true). A Node's
// status is accepted on create, as the kubelet's registration relies on.
func CreateKubeletNode(ctx context.Context, c kubernetes.Interface, name, systemUUID string) (*corev1.Node, error) {
	n, err := c.CoreV1().Nodes().Create(ctx, KubeletNode(name, systemUUID, true), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("harness: creating node %s: %w", name, err)
	}
	if _, cond := readyOf(n); cond == nil {
		return nil, fmt.Errorf("harness: node %s was created without its Ready condition", name)
	}
	return n, nil
}

// SetNodeReady posts a Ready condition of the given status with a fresh
// heartbeat, as the kubelet does (NotReady: a kubelet that runs but whose
// node is unhealthy; the lifecycle controller only looks at the status).
func SetNodeReady(ctx context.Context, c kubernetes.Interface, name string, ready bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cond := readyCondition(ready)
		if i, old := readyOf(n); old != nil {
			if old.Status == cond.Status {
				cond.LastTransitionTime = old.LastTransitionTime
			}
			n.Status.Conditions[i] = cond
		} else {
			n.Status.Conditions = append(n.Status.Conditions, cond)
		}
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func readyOf(n *corev1.Node) (int, *corev1.NodeCondition) {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return i, &n.Status.Conditions[i]
		}
	}
	return -1, nil
}

// HasTaint reports whether n carries a taint with key.
func HasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// Initialized reports whether the cloud-node controller is done with n: the
// uninitialized taint is gone and the providerID is set.
func Initialized(n *corev1.Node) bool {
	return n.Spec.ProviderID != "" && !HasTaint(n, UninitializedTaint)
}

// WaitForNodes polls every interval until cond holds for every Node named
// (a missing Node does not hold). The error lists the Nodes still failing.
func WaitForNodes(ctx context.Context, c kubernetes.Interface, names []string, timeout time.Duration, what string, cond func(*corev1.Node) bool) error {
	pending := names
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil // the apiserver may be busy; retry until the deadline
		}
		byName := map[string]*corev1.Node{}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		var still []string
		for _, name := range names {
			if n, ok := byName[name]; !ok || !cond(n) {
				still = append(still, name)
			}
		}
		pending = still
		return len(pending) == 0, nil
	})
	if err != nil {
		sort.Strings(pending)
		return fmt.Errorf("harness: %d of %d nodes not %s within %s: %s: %w", len(pending), len(names), what, timeout, strings.Join(pending, ", "), err)
	}
	return nil
}

// WaitForNodesGone polls until none of the Nodes named exists.
func WaitForNodesGone(ctx context.Context, c kubernetes.Interface, names []string, timeout time.Duration) error {
	left := names
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var still []string
		for _, name := range names {
			_, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return false, nil // keep the last complete answer
			default:
				still = append(still, name)
			}
		}
		left = still
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("harness: nodes still present after %s: %s: %w", timeout, strings.Join(left, ", "), err)
	}
	return nil
}
