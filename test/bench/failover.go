package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// failoverResult is the leader change of one run: two replicas with
// leader election over the initialized Nodes, the leader killed, a batch of
// Nodes registering right after the kill.
type failoverResult struct {
	Nodes    int           // the batch registered after the kill
	Takeover time.Duration // kill → the new holder's acquireTime
	// First and All: the new holder's acquireTime (the Lease's
	// spec.acquireTime, microseconds) → the first / last Node of the batch
	// initialized as the bench's watch saw it.
	First, All time.Duration
	// Warm: every vCenter's inventory was in sync in the standby (its
	// /metrics) before the kill.
	Warm bool
	// Requests: vCenter requests on the wire from when the bench saw the
	// new holder (within ~50 ms of its acquisition) to the first Node of
	// the batch initialized.
	Requests int64
}

// leaseAcquired is client-go's leader-election line once a replica holds
// the lease.
var leaseAcquired = regexp.MustCompile(`(?i)successfully acquired lease`)

// failover measures a leader change into res.Failover: the batch of Nodes
// (the last -failover-nodes of the run's, spread over the datacenters) is
// deleted, two replicas start on a Lease of this run's own, the first one
// leads; once the leader's inventories are in sync and the standby had up
// to -failover-settle to sync its own, the leader is killed and the batch
// registered at once. Both replicas are stopped when it returns.
func (w *world) failover(ctx context.Context, dir string, flags map[string]string, res *runResult) error {
	batch := w.vms[len(w.vms)-min(w.cfg.FailoverNodes, len(w.vms)):]
	names := make([]string, len(batch))
	for i, vm := range batch {
		names[i] = harness.NodeName(vm)
	}
	nodes := w.admin.CoreV1().Nodes()
	for _, n := range names {
		if err := nodes.Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("failover: deleting Node %s: %w", n, err)
		}
	}
	if err := harness.WaitForNodesGone(ctx, w.admin, names, 2*time.Minute); err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	tr := newTracker(names)
	factory := informers.NewSharedInformerFactory(w.admin, 0)
	inf := factory.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tr.observe(obj) },
		UpdateFunc: func(_, obj any) { tr.observe(obj) },
	}); err != nil {
		return fmt.Errorf("failover: node watch: %w", err)
	}
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	factory.Start(stopWatch)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return errors.New("failover: node watch did not sync")
	}

	lease := "bench-failover-" + delayLabel(res.Delay)
	start := func(name string) (*harness.CCMProcess, error) {
		args, err := w.env.CCMArgs(harness.CCMOptions{LeaderElect: true, LeaseName: lease, ConcurrentNodeSyncs: 1, Flags: flags})
		if err != nil {
			return nil, err
		}
		p, err := harness.StartCCMProcess(name, w.cfg.Binary, dir, args, res.Env...)
		if err != nil {
			return nil, err
		}
		logf("failover: %s started (pid %d, log %s)", name, p.Pid(), p.LogPaths()[0])
		return p, nil
	}
	leader, err := start("ccm-a")
	if err != nil {
		return err
	}
	defer func() { _ = leader.Stop() }()
	holder, err := w.leaseHolder(ctx, lease, "", 2*time.Minute)
	if err != nil {
		return err
	}
	if !leaseAcquired.MatchString(leader.Log()) {
		return fmt.Errorf("failover: lease %s held by %q, but ccm-a logged no acquisition", lease, holder)
	}
	standby, err := start("ccm-b")
	if err != nil {
		return err
	}
	defer func() { _ = standby.Stop() }()
	// The leader serves the cluster as it would in steady state, its
	// inventories loaded; the standby has as long as that took and up to
	// -failover-settle more to load its own.
	if !w.synced(ctx, leader, 5*time.Minute) {
		return errors.New("failover: the leader's inventories not in sync within 5 minutes")
	}
	res.Failover.Warm = w.synced(ctx, standby, w.cfg.FailoverSettle)
	logf("failover: ccm-a leads with its inventories in sync; ccm-b's in sync: %v", res.Failover.Warm)

	if err := leader.Kill(); err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	killed := time.Now()
	created, err := w.createNodesOf(ctx, batch)
	if err != nil {
		return fmt.Errorf("failover: registering Nodes: %w", err)
	}
	tr.setCreated(created)
	newHolder, err := w.leaseHolder(ctx, lease, holder, time.Minute)
	if err != nil {
		return err
	}
	acquired, err := w.acquireTime(ctx, lease)
	if err != nil {
		return err
	}
	if acquired.Before(killed) {
		return fmt.Errorf("failover: lease %s: acquireTime %s is before the kill (%s)", lease, acquired.Format(time.RFC3339Nano), killed.Format(time.RFC3339Nano))
	}
	s0 := w.snapshot()
	res.Failover.Nodes, res.Failover.Takeover = len(batch), acquired.Sub(killed)
	logf("failover: ccm-a killed; %q took the lease %s later", newHolder, res.Failover.Takeover.Round(time.Millisecond))

	var firstSeen bool
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		if !standby.Running() {
			return false, fmt.Errorf("ccm-b exited: %w\n%s", standby.ExitErr(), standby.Tail(30))
		}
		if !firstSeen && tr.initializedCount() > 0 {
			firstSeen = true
			res.Failover.Requests = w.snapshot().sub(s0).Wire.Requests
		}
		select {
		case <-tr.done:
			return true, nil
		default:
			return false, nil
		}
	})
	if err != nil {
		return fmt.Errorf("failover: %d of %d Nodes initialized by ccm-b: %w", tr.initializedCount(), len(batch), err)
	}
	first, last := tr.span()
	res.Failover.First, res.Failover.All, res.FailoverMeasure = first.Sub(acquired), last.Sub(acquired), true
	logf("failover: lease taken → first of %d new Nodes initialized %s, all %s; %d vCenter requests until the first",
		len(batch), res.Failover.First.Round(time.Millisecond), res.Failover.All.Round(time.Millisecond), res.Failover.Requests)
	return nil
}

// synced waits up to timeout until every vCenter's inventory is in sync in
// p (its /metrics), and reports whether they were.
func (w *world) synced(ctx context.Context, p *harness.CCMProcess, timeout time.Duration) bool {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		code, body, err := harness.GetLocalHTTPS(ctx, p.SecurePort, "/metrics", w.profToken)
		if err != nil || code != 200 {
			return false, nil
		}
		ss, err := harness.ParseMetrics(body)
		if err != nil {
			return false, nil
		}
		for _, vc := range w.env.Fed.VCenters {
			if v, ok := ss.Sum("cloudprovider_vsphere_inventory_synced", "vcenter", vc.Name); !ok || v != 1 {
				return false, nil
			}
		}
		return true, nil
	})
	return err == nil
}

// leaseHolder waits until the Lease has a holder other than not.
func (w *world) leaseHolder(ctx context.Context, name, not string, timeout time.Duration) (string, error) {
	var holder string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := w.admin.CoordinationV1().Leases(harness.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		holder = *l.Spec.HolderIdentity
		return holder != "" && holder != not, nil
	})
	if err != nil {
		return "", fmt.Errorf("failover: lease %s: holder %q after %s (waiting for one other than %q): %w", name, holder, timeout, not, err)
	}
	return holder, nil
}

// acquireTime is when the Lease's holder took it (written by the holder).
func (w *world) acquireTime(ctx context.Context, name string) (time.Time, error) {
	l, err := w.admin.CoordinationV1().Leases(harness.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("failover: lease %s: %w", name, err)
	}
	if l.Spec.AcquireTime == nil {
		return time.Time{}, fmt.Errorf("failover: lease %s has no acquireTime", name)
	}
	return l.Spec.AcquireTime.Time, nil
}

// createNodesOf registers the Nodes of vms as their kubelets would, one
// after another (a small batch), and returns when each was created.
func (w *world) createNodesOf(ctx context.Context, vms []*vcsim.VM) (map[string]time.Time, error) {
	created := make(map[string]time.Time, len(vms))
	for _, vm := range vms {
		if _, err := harness.CreateKubeletNode(ctx, w.admin, harness.NodeName(vm), vm.SystemUUID()); err != nil {
			return created, err
		}
		created[harness.NodeName(vm)] = time.Now()
	}
	return created, nil
}
