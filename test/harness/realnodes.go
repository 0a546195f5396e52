package harness

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// registerTimeout bounds how long a started kubelet may take to register
// its Node: seconds on an idle machine, more on two busy cores.
const registerTimeout = 90 * time.Second

// StartNode starts vm's kubelet (Env.StartKubelet with o) and returns its
// Node once the kubelet has registered it. The kubelet is the Env's: SetReady
// kills and restarts it, Close stops it.
func (e *Env) StartNode(ctx context.Context, vm *vcsim.VM, o KubeletOptions) (*corev1.Node, error) {
	k, err := e.startNodeKubelet(vm, o)
	if err != nil {
		return nil, err
	}
	name := NodeName(vm)
	var node *corev1.Node
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, registerTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = n
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("harness: the kubelet of %s registered no Node (log %s): %w", name, k.LogPath(), err)
	}
	return node, nil
}

// CreateNodes registers the Nodes of vms as CreateNode does; with RealNodes
// their kubelets start all at once and it returns when every Node exists.
func (e *Env) CreateNodes(ctx context.Context, vms []*vcsim.VM) error {
	if !e.Opts.RealNodes {
		for _, vm := range vms {
			if _, err := e.CreateNode(ctx, vm); err != nil {
				return err
			}
		}
		return nil
	}
	var names []string
	for _, vm := range vms {
		if _, err := e.startNodeKubelet(vm, KubeletOptions{}); err != nil {
			return err
		}
		names = append(names, NodeName(vm))
	}
	return WaitForNodes(ctx, e.Client, names, registerTimeout, "registered", func(*corev1.Node) bool { return true })
}

func (e *Env) startNodeKubelet(vm *vcsim.VM, o KubeletOptions) (*Kubelet, error) {
	name := NodeName(vm)
	e.mu.Lock()
	_, dup := e.kubelets[name]
	e.mu.Unlock()
	if dup {
		return nil, fmt.Errorf("harness: node %s already has a kubelet", name)
	}
	k, err := e.StartKubelet(vm, o)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.kubelets == nil {
		e.kubelets = map[string]*Kubelet{}
	}
	e.kubelets[name] = k
	e.mu.Unlock()
	return k, nil
}

// Kubelet is the kubelet of vm's Node (RealNodes), nil when none was started.
func (e *Env) Kubelet(vm *vcsim.VM) *Kubelet {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kubelets[NodeName(vm)]
}

// Ready reports whether n's Ready condition is True.
func Ready(n *corev1.Node) bool {
	_, c := readyOf(n)
	return c != nil && c.Status == corev1.ConditionTrue
}

// SetNodesReady makes the Nodes of vms Ready or not. With RealNodes, not
// Ready is each kubelet killed (its VM runs on), and it returns once the
// kube-controller-manager has marked every one of them not Ready
// (Unknown: no heartbeat within its grace period); Ready is each killed
// kubelet started again, and it returns once every Node is Ready. The
// kubelets are killed (or started) all at once, so n Nodes cost one grace
// period, not n. Without RealNodes it posts the Ready condition itself.
func (e *Env) SetNodesReady(ctx context.Context, vms []*vcsim.VM, ready bool) error {
	if !e.Opts.RealNodes {
		for _, vm := range vms {
			if err := SetNodeReady(ctx, e.Client, NodeName(vm), ready); err != nil {
				return err
			}
		}
		return nil
	}
	var names []string
	for _, vm := range vms {
		k := e.Kubelet(vm)
		if k == nil {
			return fmt.Errorf("harness: node %s has no kubelet (Env.CreateNode or StartNode starts one)", NodeName(vm))
		}
		e.mu.Lock()
		stopped := e.stopped[NodeName(vm)]
		e.mu.Unlock()
		switch {
		case !ready && !stopped:
			if err := k.Kill(); err != nil {
				return err
			}
		case ready && stopped:
			if err := k.Restart(); err != nil {
				return err
			}
		}
		e.mu.Lock()
		if e.stopped == nil {
			e.stopped = map[string]bool{}
		}
		e.stopped[NodeName(vm)] = !ready
		e.mu.Unlock()
		names = append(names, NodeName(vm))
	}
	grace := e.Opts.ControllerManager.NodeMonitorGracePeriod
	if grace == 0 {
		grace = defaultNodeMonitorGracePeriod
	}
	what, cond := "Ready", Ready
	if !ready {
		what, cond = "not Ready", func(n *corev1.Node) bool { return !Ready(n) }
	}
	return WaitForNodes(ctx, e.Client, names, grace+time.Minute, what, cond)
}
