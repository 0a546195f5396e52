package e2e

// A leader change at 200 ms per vCenter request (issue 24 §3): the new
// leader serves its first lookup about as soon after taking the lease as it
// does at 0 ms. Two replicas run with leader election; the leader
// initializes a first batch of Nodes while the standby settles; the leader
// is killed and new Nodes register at once; the time from the new holder's
// acquisition of the Lease (spec.acquireTime, written by the new holder
// with microsecond precision) to the first new Node initialized is compared
// with the same at 0 ms, measured in this test.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// The bound on the first lookup after a leader change at failoverDelay:
// failoverRatio × the same at 0 ms, plus failoverRoundTrips round trips of
// the added delay.
//
// A standby that keeps its sessions and inventories loaded answers the
// lookup from memory (the VM and its tags): no round trip, so at 200 ms it
// takes what it takes at 0 ms. One round trip is allowed for an incidental
// request on the way (e.g. a session check); it is less than any lookup
// that reaches vCenter needs (a UUID search, then a property read). A
// standby that connects only once it leads pays a TLS handshake, the login,
// the watch's setup, the inventory's load and the tag session before its
// first answer: a dozen round trips and more, 2.4 s and more at 200 ms,
// far above the bound. The ratio absorbs the noise between two runs on a
// shared machine; each time is the least of its tries (noise only adds).
const (
	failoverDelay      = 200 * time.Millisecond
	failoverRatio      = 1.5
	failoverRoundTrips = 1
	// failoverSettle bounds the wait for the standby's inventories after
	// the leader initialized the first batch (a wait, not an assertion: a
	// standby that loads nothing before it leads is measured as it is).
	failoverSettle = 15 * time.Second
)

// failoverWorld is the federation and the Nodes of each run: a first batch
// the first leader initializes and a second one registering right after it
// is killed, each one VM of every vCenter × datacenter.
type failoverWorld struct {
	t             *testing.T
	env           *harness.Env
	token         string // reads the replicas' /metrics
	first, second []*vcsim.VM
}

// failoverResult is one run: from the new holder's acquisition of the
// Lease to the first and to the last new Node initialized.
type failoverResult struct {
	first, all time.Duration
	takeover   time.Duration // kill → acquisition
	warm       bool          // the standby's inventories were all in sync before the kill
	requests   int64         // vCenter requests on the wire, acquisition → first new Node initialized
}

func TestLeaderChangeServesFirstLookupAtOnce(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{})
	w := &failoverWorld{t: t, env: env, token: metricsReaderToken(t, env)}
	for _, vc := range env.Fed.VCenters {
		for _, dc := range []string{"DC0", "DC1"} {
			vms := vmsOf(env, vc.Name, dc)
			if len(vms) < 2 {
				t.Fatalf("%s/%s has %d VMs, want 2 or more", vc.Name, dc, len(vms))
			}
			w.first = append(w.first, vms[0])
			w.second = append(w.second, vms[1])
		}
	}

	// The baseline is tried twice; the run at 200 ms once more only when
	// it is over the bound by less than 3× (beyond, no noise explains it).
	var base failoverResult
	for try := 1; try <= 2; try++ {
		r, err := w.run(0, try)
		if err != nil {
			t.Fatalf("baseline (0 ms): %v", err)
		}
		w.log("0ms", try, r)
		if base.first == 0 || r.first < base.first {
			base = r
		}
	}
	allowed := time.Duration(failoverRatio*float64(base.first)) + failoverRoundTrips*failoverDelay
	var slow failoverResult
	for try := 1; try <= 2; try++ {
		r, err := w.run(failoverDelay, try)
		if err != nil {
			t.Fatalf("%s: %v", failoverDelay, err)
		}
		w.log(failoverDelay.String(), try, r)
		if slow.first == 0 || r.first < slow.first {
			slow = r
		}
		if slow.first <= allowed || slow.first > 3*allowed {
			break
		}
	}
	t.Logf("FAILOVER summary: first new Node initialized %.3fs after the new leader took the lease at %s (all %.3fs; standby warm %v), %.3fs at 0 ms (all %.3fs; warm %v): %.2f× the baseline; allowed %.1f× + %d × %s = %.3fs",
		slow.first.Seconds(), failoverDelay, slow.all.Seconds(), slow.warm, base.first.Seconds(), base.all.Seconds(), base.warm,
		slow.first.Seconds()/base.first.Seconds(), failoverRatio, failoverRoundTrips, failoverDelay, allowed.Seconds())
	if slow.first > allowed {
		t.Errorf("a leader change at %s per vCenter request: the first new Node was initialized %.3fs after the new leader took the lease, %.2f× the %.3fs at 0 ms (allowed %.1f× + %d round trip = %.3fs); the standby's inventories in sync before the kill: %v",
			failoverDelay, slow.first.Seconds(), slow.first.Seconds()/base.first.Seconds(), base.first.Seconds(), failoverRatio, failoverRoundTrips, allowed.Seconds(), slow.warm)
	}
}

func (w *failoverWorld) log(delay string, try int, r failoverResult) {
	w.t.Logf("FAILOVER delay=%s try=%d takeover=%.3fs first=%.3fs all=%.3fs standby_warm=%v requests_to_first=%d",
		delay, try, r.takeover.Seconds(), r.first.Seconds(), r.all.Seconds(), r.warm, r.requests)
}

// run is one leader change with delay added to every vCenter request:
// fresh Nodes of the first batch, two replicas on a Lease of their own, the
// first batch initialized by the leader, the standby given time to settle,
// the leader killed and the second batch registered at once. Both replicas
// are gone when it returns.
func (w *failoverWorld) run(delay time.Duration, try int) (failoverResult, error) {
	t, env := w.t, w.env
	ctx := t.Context()
	var res failoverResult
	if err := w.resetNodes(ctx); err != nil {
		return res, err
	}
	for _, p := range env.Proxies {
		p.SetDelay(delay)
	}
	defer func() {
		for _, p := range env.Proxies {
			p.SetDelay(0)
		}
	}()
	watch, err := watchInitialization(ctx, env)
	if err != nil {
		return res, err
	}
	defer watch.stop()
	for _, vm := range w.first {
		if _, err := env.CreateNode(ctx, vm); err != nil {
			return res, err
		}
	}

	label := fmt.Sprintf("%dms-%d", delay.Milliseconds(), try)
	lease := "failover-" + label
	opts := harness.CCMOptions{LeaderElect: true, LeaseName: lease}
	a, err := env.StartCCM("ccm-a-"+label, opts)
	if err != nil {
		return res, err
	}
	defer func() { _ = a.Kill() }()
	if err := a.WaitHealthy(ctx, time.Minute); err != nil {
		return res, err
	}
	holder, err := leaseHolder(ctx, env, lease, "", time.Minute)
	if err != nil {
		return res, err
	}
	b, err := env.StartCCM("ccm-b-"+label, opts)
	if err != nil {
		return res, err
	}
	defer func() { _ = b.Kill() }()
	if err := b.WaitHealthy(ctx, time.Minute); err != nil {
		return res, err
	}
	if err := harness.WaitForNodes(ctx, env.Client, names(w.first), 2*time.Minute, "initialized", harness.Initialized); err != nil {
		return res, err
	}
	leader, standby := identify(t, []*harness.CCMProcess{a, b}, holder)
	res.warm = w.settle(ctx, standby)

	if err := leader.Kill(); err != nil {
		return res, err
	}
	killed := time.Now()
	for _, vm := range w.second {
		if _, err := env.CreateNode(ctx, vm); err != nil {
			return res, err
		}
	}
	newHolder, err := leaseHolder(ctx, env, lease, holder, 30*time.Second)
	if err != nil {
		return res, err
	}
	l, err := env.Client.CoordinationV1().Leases(harness.Namespace).Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		return res, err
	}
	if l.Spec.AcquireTime == nil {
		return res, fmt.Errorf("lease %s taken by %s has no acquireTime", lease, newHolder)
	}
	acquired := l.Spec.AcquireTime.Time
	// The holders write acquireTime from this machine's clock, after the
	// kill: one earlier is not this acquisition.
	if acquired.Before(killed) {
		return res, fmt.Errorf("lease %s: acquireTime %s is before the leader was killed (%s)", lease, acquired.Format(time.RFC3339Nano), killed.Format(time.RFC3339Nano))
	}
	if p, _ := identify(t, []*harness.CCMProcess{standby}, newHolder); p != standby {
		return res, fmt.Errorf("new holder %q is not %s", newHolder, standby.Name)
	}
	res.takeover = acquired.Sub(killed)
	traffic := w.traffic()

	want := names(w.second)
	var firstAt time.Time
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		if !standby.Running() {
			return false, fmt.Errorf("%s exited: %w", standby.Name, standby.ExitErr())
		}
		if firstAt.IsZero() {
			if at, ok := watch.first(want); ok {
				firstAt = at
				res.requests = w.traffic() - traffic
			}
		}
		_, done := watch.last(want)
		return done, nil
	})
	if err != nil {
		return res, fmt.Errorf("new Nodes not initialized by %s: %v: %w", standby.Name, watch.pending(want), err)
	}
	allAt, _ := watch.last(want)
	res.first, res.all = firstAt.Sub(acquired), allAt.Sub(acquired)
	if d := watch.deletedNodes(); len(d) > 0 {
		return res, fmt.Errorf("Nodes deleted: %v", d)
	}
	return res, nil
}

// settle waits, up to failoverSettle, until every vCenter's inventory is in
// sync in the standby (its /metrics), and reports whether they were.
func (w *failoverWorld) settle(ctx context.Context, standby *harness.CCMProcess) bool {
	const synced = "cloudprovider_vsphere_inventory_synced"
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, failoverSettle, true, func(ctx context.Context) (bool, error) {
		ss, _, err := standby.Scrape(ctx, w.token)
		if err != nil {
			return false, nil
		}
		for _, vc := range w.env.Fed.VCenters {
			if v, ok := ss.Sum(synced, "vcenter", vc.Name); !ok || v != 1 {
				return false, nil
			}
		}
		return true, nil
	})
	return err == nil
}

// traffic is the vCenter requests on the wire so far, every proxy summed.
func (w *failoverWorld) traffic() int64 {
	var n int64
	for _, p := range w.env.Proxies {
		n += p.Traffic().Requests
	}
	return n
}

// resetNodes deletes every Node (no CCM runs), so each run starts from the
// same cluster.
func (w *failoverWorld) resetNodes(ctx context.Context) error {
	nodes := w.env.Client.CoreV1().Nodes()
	all := slices.Concat(names(w.first), names(w.second))
	for _, n := range all {
		if err := nodes.Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return harness.WaitForNodesGone(ctx, w.env.Client, all, 30*time.Second)
}

// leaseHolder waits until the Lease has a holder other than not.
func leaseHolder(ctx context.Context, env *harness.Env, name, not string, timeout time.Duration) (string, error) {
	var holder string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := env.Client.CoordinationV1().Leases(harness.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		holder = ptrVal(l.Spec.HolderIdentity)
		return holder != "" && holder != not, nil
	})
	if err != nil {
		return "", fmt.Errorf("lease %s/%s: holder %q after %s (waiting for one other than %q): %w", harness.Namespace, name, holder, timeout, not, err)
	}
	return holder, nil
}

// first is when the first of names was seen initialized.
func (w *initWatch) first(names []string) (at time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range names {
		if t, seen := w.initAt[n]; seen && (!ok || t.Before(at)) {
			at, ok = t, true
		}
	}
	return at, ok
}

// deletedNodes lists the Nodes deleted since the watch started.
func (w *initWatch) deletedNodes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.deleted)
}
