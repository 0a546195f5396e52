package e2e

// Cold start with one vCenter dead (issue "Rule 1, proven again", A): the
// CCM starts over Nodes that registered while it was not running, one of
// the three vCenters dead from the start. The healthy vCenters' Nodes must
// initialize about as fast as when every vCenter is up; the dead one's stay
// tainted and nothing is deleted.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// Allowed ratios of the healthy vCenters' initialization time with a dead
// vCenter to the same without one, each the least of its tries. The
// product's targets: at 1 worker no later than 5 s after the baseline, at
// 8 workers 1.2× the baseline.
//
// The 1-worker target is additive, so as a ratio it depends on the
// baseline: here (30 Nodes, the manifests' API rate limits) the baseline
// measured 0.75–1.8 s on a 2-core machine, alone or beside the rest of the
// suite, where +5 s is 3.8–7.7×. 8× lets a CCM that meets the target pass
// at the smallest baseline measured; the CCM before found-fast lookups
// measured 22–26× (blackhole and TLS hang), so the test still tells them
// apart. At 8 workers the baseline is 0.55–0.85 s and two tries of it
// differ by up to 1.4× beside the rest of the suite: the target of 1.2× is
// below that noise, so the test allows 2× (a dead vCenter holding the
// workers, as before found-fast lookups, measured 2.5–2.8× here and 17×
// in the run) and logs the ratio for the record.
const (
	coldStartRatio1 = 8.0 // --concurrent-node-syncs=1
	coldStartRatio8 = 2.0 // --concurrent-node-syncs=8, the manifests' value
)

// deadMode is one way a vCenter can be dead when the CCM starts.
type deadMode struct {
	name string
	mode vcsim.Mode
	// tried checks, after the run, that the CCM did meet the fault.
	tried func(vcsim.Traffic) error
}

var deadModes = []deadMode{
	{"blackhole", vcsim.Blackhole, func(tr vcsim.Traffic) error {
		if tr.Connections == 0 {
			return fmt.Errorf("the CCM never connected to the black-holed vCenter")
		}
		return nil
	}},
	{"refuse", vcsim.Refuse, nil}, // a closed port: nothing to count
	{"tlshang", vcsim.HangTLS, func(tr vcsim.Traffic) error {
		if tr.HeldHandshakes == 0 {
			return fmt.Errorf("no ClientHello reached the vCenter hanging in the TLS handshake")
		}
		return nil
	}},
}

// coldStart is the world: 3 vCenters × 2 datacenters, 10 Nodes in each
// vCenter (5 per datacenter), vc2 the one that is dead in the fault runs.
type coldStart struct {
	t       *testing.T
	env     *harness.Env
	dead    *vcsim.VCenter
	all     []*vcsim.VM
	healthy []string // Node names of vc1 and vc3
	down    []string // Node names of vc2
	// notReady are two of vc2's Nodes whose kubelet reports NotReady, so
	// the lifecycle controller asks about them every second: "nothing is
	// deleted" is then something the CCM had to decide.
	notReady []*vcsim.VM
}

func TestColdStartWithDeadVCenter(t *testing.T) {
	t.Parallel()
	// The production timings: requestTimeout 10s (the default) and the
	// manifests' breaker.
	env := newEnv(t, harness.Options{VCenters: 3, Datacenters: 2, MachinesPerPool: 3,
		RequestTimeout: "10s", ConsecutiveFailures: 5, OpenTimeout: "30s"})
	w := &coldStart{t: t, env: env, dead: env.Fed.VCenter("vc2")}
	for _, vc := range env.Fed.VCenters {
		for _, dc := range []string{"DC0", "DC1"} {
			vms := vmsOf(env, vc.Name, dc)
			if len(vms) < 5 {
				t.Fatalf("%s/%s has %d VMs, want 5 or more", vc.Name, dc, len(vms))
			}
			w.all = append(w.all, vms[:5]...)
			if vc == w.dead {
				w.down = append(w.down, names(vms[:5])...)
			} else {
				w.healthy = append(w.healthy, names(vms[:5])...)
			}
		}
	}
	w.notReady = []*vcsim.VM{vmsOf(env, "vc2", "DC0")[0], vmsOf(env, "vc2", "DC1")[0]}
	if len(w.all) != 30 || len(w.healthy) != 20 {
		t.Fatalf("%d Nodes, %d healthy; want 30 and 20", len(w.all), len(w.healthy))
	}

	type result struct {
		mode              string
		workers           int
		healthy, baseline time.Duration
	}
	var results []result
	for _, workers := range []int{1, 8} {
		limit := coldStartRatio8
		if workers == 1 {
			limit = coldStartRatio1
		}
		// Each time is the least of its tries: noise (other tests share
		// the 2 cores) only ever adds. The baseline is tried twice; a
		// fault run once more only when it is over the limit by less
		// than 3× (beyond, no noise explains it).
		var base time.Duration
		for try := 1; try <= 2; try++ {
			b, all, err := w.run("baseline", nil, workers, try)
			if err != nil {
				t.Fatalf("baseline, %d workers: %v", workers, err)
			}
			t.Logf("COLDSTART mode=baseline workers=%d try=%d healthy=%.2fs all=%.2fs", workers, try, b.Seconds(), all.Seconds())
			if base == 0 || b < base {
				base = b
			}
		}
		for _, m := range deadModes {
			var best time.Duration
			for try := 1; try <= 2; try++ {
				d, _, err := w.run(m.name, &m, workers, try)
				if err != nil {
					t.Errorf("mode %s, %d workers: %v", m.name, workers, err)
					best = 0
					break
				}
				ratio := d.Seconds() / base.Seconds()
				t.Logf("COLDSTART mode=%s workers=%d try=%d healthy=%.2fs baseline=%.2fs ratio=%.2f delta=%+.2fs",
					m.name, workers, try, d.Seconds(), base.Seconds(), ratio, (d - base).Seconds())
				if best == 0 || d < best {
					best = d
				}
				if ratio <= limit || ratio > 3*limit {
					break
				}
			}
			if best > 0 {
				results = append(results, result{mode: m.name, workers: workers, healthy: best, baseline: base})
			}
		}
	}
	// Judged at the end, so every number is logged whatever fails.
	for _, r := range results {
		limit := coldStartRatio8
		if r.workers == 1 {
			limit = coldStartRatio1
		}
		ratio := r.healthy.Seconds() / r.baseline.Seconds()
		t.Logf("COLDSTART summary mode=%s workers=%d healthy=%.2fs baseline=%.2fs ratio=%.2f limit=%.1f",
			r.mode, r.workers, r.healthy.Seconds(), r.baseline.Seconds(), ratio, limit)
		if ratio > limit {
			t.Errorf("mode %s, %d workers: the healthy vCenters' Nodes took %.2fs, %.2f× the baseline's %.2fs (allowed %.1f×)",
				r.mode, r.workers, r.healthy.Seconds(), ratio, r.baseline.Seconds(), limit)
		}
	}
}

// run registers the 30 Nodes afresh (the CCM not running), makes vc2 dead
// as dead says (nil: every vCenter healthy), starts the CCM with workers
// node-sync workers, and returns how long after its start the healthy
// vCenters' Nodes were all initialized, and every Node (baseline only),
// as a watch saw them. With a dead vCenter it then checks that vc2's Nodes
// stay tainted after the CCM's lookups for them failed; in every run, that
// no Node was deleted. The CCM is killed before it returns.
func (w *coldStart) run(label string, dead *deadMode, workers, try int) (healthy, all time.Duration, err error) {
	t, env := w.t, w.env
	ctx := t.Context()
	uids, err := w.registerNodes(ctx)
	if err != nil {
		return 0, 0, err
	}
	proxy := env.Proxies[w.dead.Name]
	mode := vcsim.Pass
	if dead != nil {
		mode = dead.mode
	}
	if err := proxy.SetMode(mode); err != nil {
		return 0, 0, err
	}
	defer func() {
		if err := proxy.SetMode(vcsim.Pass); err != nil {
			t.Errorf("healing vc2: %v", err)
		}
	}()
	before := proxy.Traffic()
	watch, err := watchInitialization(ctx, env)
	if err != nil {
		return 0, 0, err
	}
	defer watch.stop()

	start := time.Now()
	ccm, err := env.StartCCM(fmt.Sprintf("ccm-%s-%dw-%d", label, workers, try), harness.CCMOptions{ConcurrentNodeSyncs: workers})
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = ccm.Kill() }()

	want := w.healthy
	if dead == nil {
		want = slices.Concat(w.healthy, w.down)
	}
	// 90s is far beyond any allowed ratio (and 3× what the CCM took
	// before found-fast lookups): enough to report a number.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		if !ccm.Running() {
			return false, fmt.Errorf("the CCM exited: %w", ccm.ExitErr())
		}
		if err := w.check(watch, dead != nil); err != nil {
			return false, err
		}
		_, done := watch.last(want)
		return done, nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("%s after the CCM started, Nodes not initialized: %v: %w", time.Since(start).Round(time.Second), watch.pending(want), err)
	}
	healthyAt, _ := watch.last(w.healthy)
	if dead == nil {
		allAt, _ := watch.last(want)
		return healthyAt.Sub(start), allAt.Sub(start), nil
	}

	// The CCM did look vc2's Nodes up and failed (an Event for this
	// run's Nodes), and still they are tainted and nothing is deleted.
	if err := w.waitLookupFailed(ctx, uids, time.Minute); err != nil {
		return 0, 0, err
	}
	if err := holds(ctx, 3*time.Second, func() error { return w.check(watch, true) }); err != nil {
		return 0, 0, err
	}
	if dead.tried != nil {
		if err := dead.tried(proxy.Traffic().Sub(before)); err != nil {
			return 0, 0, err
		}
	}
	return healthyAt.Sub(start), 0, nil
}

// initWatch records, from a Node informer, when each Node was first seen
// initialized, the Nodes seen with the uninitialized taint gone or a
// providerID (touched), and every Node deleted.
type initWatch struct {
	mu      sync.Mutex
	initAt  map[string]time.Time
	seenAt  map[string]time.Time // first seen at all: registered
	touched map[string]string    // name → what was seen
	deleted []string
	stop    func()
}

func watchInitialization(ctx context.Context, env *harness.Env) (*initWatch, error) {
	w := &initWatch{initAt: map[string]time.Time{}, seenAt: map[string]time.Time{}, touched: map[string]string{}}
	wctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(env.Client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	seen := func(obj any) {
		now := time.Now()
		n, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.seenAt[n.Name]; !ok {
			w.seenAt[n.Name] = now
		}
		if _, ok := w.initAt[n.Name]; !ok && harness.Initialized(n) {
			w.initAt[n.Name] = now
		}
		if _, ok := w.touched[n.Name]; !ok && (n.Spec.ProviderID != "" || !harness.HasTaint(n, harness.UninitializedTaint)) {
			w.touched[n.Name] = fmt.Sprintf("providerID %q, uninitialized taint %v", n.Spec.ProviderID, harness.HasTaint(n, harness.UninitializedTaint))
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
		DeleteFunc: func(obj any) {
			w.mu.Lock()
			w.deleted = append(w.deleted, deletedNodeName(obj))
			w.mu.Unlock()
		},
	}); err != nil {
		cancel()
		return nil, err
	}
	w.stop = func() { cancel(); factory.Shutdown() }
	factory.Start(wctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		w.stop()
		return nil, fmt.Errorf("node informer did not sync")
	}
	return w, nil
}

// last is when the last of names was seen initialized; done is false while
// one is not.
func (w *initWatch) last(names []string) (at time.Time, done bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range names {
		t, ok := w.initAt[n]
		if !ok {
			return time.Time{}, false
		}
		if t.After(at) {
			at = t
		}
	}
	return at, true
}

// joinTime is how long after the watch first saw Node name (registered)
// it saw it initialized; 0 when it has not yet.
func (w *initWatch) joinTime(name string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.initAt[name]
	if !ok {
		return 0
	}
	return at.Sub(w.seenAt[name])
}

// pending lists the Nodes of names not seen initialized.
func (w *initWatch) pending(names []string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, n := range names {
		if _, ok := w.initAt[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

// check is an error when a Node was deleted (nothing but the CCM deletes
// Nodes while it runs), or, with vc2 dead, when one of vc2's Nodes was
// seen with a providerID or without the uninitialized taint.
func (w *coldStart) check(watch *initWatch, dead bool) error {
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if len(watch.deleted) > 0 {
		return fmt.Errorf("Nodes deleted: %v", watch.deleted)
	}
	if dead {
		var initialized []string
		for _, n := range w.down {
			if what, ok := watch.touched[n]; ok {
				initialized = append(initialized, n+" ("+what+")")
			}
		}
		if len(initialized) > 0 {
			return fmt.Errorf("Nodes of the dead vCenter vc2 (partly) initialized: %v", initialized)
		}
	}
	return nil
}

// nodeStates indexes Nodes by name.
func nodeStates(items []corev1.Node) map[string]*corev1.Node {
	out := make(map[string]*corev1.Node, len(items))
	for i := range items {
		out[items[i].Name] = &items[i]
	}
	return out
}

func allInitialized(state map[string]*corev1.Node, names []string) bool {
	for _, n := range names {
		if node, ok := state[n]; !ok || !harness.Initialized(node) {
			return false
		}
	}
	return true
}

// waitLookupFailed waits for a VMLookupFailed Event about one of this
// run's vc2 Nodes naming vc2.
func (w *coldStart) waitLookupFailed(ctx context.Context, uids map[string]types.UID, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := w.env.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if e.Reason == "VMLookupFailed" && e.InvolvedObject.Kind == "Node" && slices.Contains(w.down, e.InvolvedObject.Name) &&
				e.InvolvedObject.UID == uids[e.InvolvedObject.Name] && strings.Contains(e.Message, "vcenter vc2") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("no VMLookupFailed Event naming vc2 on any of its Nodes within %s: %w", timeout, err)
	}
	return nil
}

// registerNodes deletes every Node (the CCM is not running) and registers
// the 30 Nodes again as their kubelets do, two of vc2's NotReady; it
// returns their UIDs.
func (w *coldStart) registerNodes(ctx context.Context) (map[string]types.UID, error) {
	nodes := w.env.Client.CoreV1().Nodes()
	list, err := nodes.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var old []string
	for _, n := range list.Items {
		if err := nodes.Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		old = append(old, n.Name)
	}
	if err := harness.WaitForNodesGone(ctx, w.env.Client, old, 30*time.Second); err != nil {
		return nil, err
	}
	uids := map[string]types.UID{}
	for _, vm := range w.all {
		n, err := w.env.CreateNode(ctx, vm)
		if err != nil {
			return nil, err
		}
		uids[n.Name] = n.UID
	}
	for _, vm := range w.notReady {
		if err := w.env.SetReady(ctx, vm, false); err != nil {
			return nil, err
		}
	}
	return uids, nil
}
