package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// world is what every run shares: the control plane, the federation and
// its proxies, and the VMs chosen for Nodes.
type world struct {
	cfg   config
	env   *harness.Env
	admin kubernetes.Interface // administrator with a high client-side rate limit
	vms   []*vcsim.VM          // one per Node, spread evenly over the datacenters
	// profToken may GET /debug/pprof/* and /metrics on the CCM's secure port.
	profToken string
	info      worldInfo
}

// worldInfo describes the world in the report.
type worldInfo struct {
	VMs            int
	NodesPerDC     map[string]int
	EnvStart       time.Duration // control plane + manifests + federation + config
	FederationNote string        // the harness's line on building the federation
	CPUs           int
	LoadAvg        string
	GoVersion      string
}

// profilerSA is the ServiceAccount the bench reads the CCM's profiles and
// metrics as (the CCM's own ServiceAccount is not allowed to).
const profilerSA = "bench-profiler"

func newWorld(ctx context.Context, cfg config) (*world, error) {
	w := &world{cfg: cfg}
	w.info.CPUs = runtime.NumCPU()
	w.info.LoadAvg = loadAvg()
	w.info.GoVersion = runtime.Version()
	start := time.Now()
	logf("starting kube-apiserver + etcd and %d vCenters × %d datacenters × %d VMs (the simulators' VMs are built in parallel, a few ms each)",
		cfg.VCenters, cfg.Datacenters, cfg.VMsPerDatacenter)
	env, err := harness.Start(ctx, harness.Options{
		Dir:             filepath.Join(cfg.Out, "env"),
		VCenters:        cfg.VCenters,
		Datacenters:     cfg.Datacenters,
		MachinesPerPool: cfg.VMsPerDatacenter / 2,
		// The e2e default (2s) is tight for a simulator serving thousands
		// of VMs on a busy machine; a timeout would be a failed lookup.
		RequestTimeout: cfg.RequestTimeout,
		Logf: func(f string, a ...any) {
			msg := fmt.Sprintf(f, a...)
			// The harness's line on the federation: how long the
			// simulators took to build, for the report.
			if strings.Contains(msg, "simulated vCenters") {
				w.info.FederationNote = msg
			}
			logf("harness: %s", msg)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("starting the environment: %w", err)
	}
	w.env = env
	w.info.EnvStart = time.Since(start)
	w.info.VMs = len(env.Fed.AllVMs())

	// The harness's admin client is limited to 200 QPS; creating and
	// deleting thousands of Nodes quickly needs more.
	acfg := rest.CopyConfig(env.ControlPlane.Config)
	acfg.QPS, acfg.Burst = 2000, 4000
	if w.admin, err = kubernetes.NewForConfig(acfg); err != nil {
		w.close()
		return nil, fmt.Errorf("admin client: %w", err)
	}
	if w.vms, w.info.NodesPerDC, err = pickVMs(env.Fed, cfg.Nodes); err != nil {
		w.close()
		return nil, err
	}
	if w.profToken, err = w.profilerToken(ctx); err != nil {
		w.close()
		return nil, err
	}
	logf("world ready in %s: %d VMs, %d Nodes to register", w.info.EnvStart.Round(time.Second), w.info.VMs, len(w.vms))
	return w, nil
}

func (w *world) close() {
	if w.env != nil {
		w.env.Close()
	}
}

// pickVMs takes n VMs round-robin over every datacenter of the federation,
// the first VMs of each.
func pickVMs(fed *vcsim.Federation, n int) ([]*vcsim.VM, map[string]int, error) {
	byDC := map[string][]*vcsim.VM{}
	var dcs []string
	for _, vm := range fed.AllVMs() {
		key := vm.VCenter + "/" + vm.Datacenter
		if _, ok := byDC[key]; !ok {
			dcs = append(dcs, key)
		}
		byDC[key] = append(byDC[key], vm)
	}
	sort.Strings(dcs)
	out := make([]*vcsim.VM, 0, n)
	count := map[string]int{}
	for i := range n {
		key := dcs[i%len(dcs)]
		j := i / len(dcs)
		if j >= len(byDC[key]) {
			return nil, nil, fmt.Errorf("%d Nodes: datacenter %s has only %d VMs", n, key, len(byDC[key]))
		}
		out = append(out, byDC[key][j])
		count[key]++
	}
	return out, count, nil
}

// profilerToken makes a ServiceAccount allowed to read the CCM's
// /debug/pprof and /metrics (non-resource URLs, authorized by the
// apiserver through the CCM's delegated authorization) and returns a token.
func (w *world) profilerToken(ctx context.Context) (string, error) {
	c := w.admin
	if _, err := c.CoreV1().ServiceAccounts(harness.Namespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: profilerSA},
	}, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("profiler ServiceAccount: %w", err)
	}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: profilerSA},
		Rules: []rbacv1.PolicyRule{{
			NonResourceURLs: []string{"/debug/pprof", "/debug/pprof/*", "/metrics"},
			Verbs:           []string{"get"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("profiler ClusterRole: %w", err)
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: profilerSA},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: profilerSA},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: profilerSA, Namespace: harness.Namespace}},
	}, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("profiler ClusterRoleBinding: %w", err)
	}
	return w.env.ControlPlane.ServiceAccountToken(ctx, harness.Namespace, profilerSA, 24*time.Hour)
}

// createNodes registers every Node as its kubelet would (Ready, tainted
// uninitialized, the VM's system UUID), in parallel, and returns when each
// was created.
func (w *world) createNodes(ctx context.Context) (map[string]time.Time, error) {
	created := make(map[string]time.Time, len(w.vms))
	var mu sync.Mutex
	var firstErr error
	work := make(chan *vcsim.VM)
	var wg sync.WaitGroup
	for range w.cfg.CreateWorkers {
		wg.Go(func() {
			for vm := range work {
				_, err := harness.CreateKubeletNode(ctx, w.admin, harness.NodeName(vm), vm.SystemUUID())
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				created[harness.NodeName(vm)] = time.Now()
				mu.Unlock()
			}
		})
	}
	for _, vm := range w.vms {
		select {
		case work <- vm:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return created, firstErr
}

// deleteNodes deletes every Node and waits until none is left (Nodes have
// no finalizers; the watch cache may lag a little).
func (w *world) deleteNodes(ctx context.Context) error {
	nodes := w.admin.CoreV1().Nodes()
	if err := nodes.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("deleting Nodes: %w", err)
	}
	var left int
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := nodes.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil // busy apiserver: retry until the deadline
		}
		left = len(list.Items)
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d Nodes still there 2 minutes after deleting them: %w", left, err)
	}
	return nil
}

// setDelay makes every proxy delay client data by d.
func (w *world) setDelay(d time.Duration) {
	for _, p := range w.env.Proxies {
		p.SetDelay(d)
	}
}

// counters are the vCenter request counters at one moment.
type counters struct {
	At        time.Time
	Wire      vcsim.Traffic    // summed over every proxy
	SOAP      map[string]int64 // summed over every simulator, by method
	SOAPTotal int64
}

func (w *world) snapshot() counters {
	c := counters{At: time.Now(), SOAP: map[string]int64{}}
	for _, p := range w.env.Proxies {
		t := p.Traffic()
		c.Wire.Connections += t.Connections
		c.Wire.Turns += t.Turns
		c.Wire.Exchanges += t.Exchanges
		c.Wire.Requests += t.Requests
		c.Wire.Chunks += t.Chunks
	}
	for _, vc := range w.env.Fed.VCenters {
		byMethod, total := vc.SOAPCalls()
		for m, n := range byMethod {
			c.SOAP[m] += n
		}
		c.SOAPTotal += total
	}
	return c
}

// sub is the difference c − d: what happened between two snapshots.
func (c counters) sub(d counters) counters {
	out := counters{At: c.At, Wire: c.Wire.Sub(d.Wire), SOAP: map[string]int64{}, SOAPTotal: c.SOAPTotal - d.SOAPTotal}
	for m, n := range c.SOAP {
		if n -= d.SOAP[m]; n != 0 {
			out.SOAP[m] = n
		}
	}
	return out
}

var errInitTimeout = errors.New("not every Node was initialized within -init-timeout")
