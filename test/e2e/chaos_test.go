package e2e

// The chaos soak (issue 5, part 6b): random faults in random vCenters at a
// steady rate while a workload registers Nodes, destroys VMs, powers VMs
// off and on and flips Nodes NotReady. At the end, with every fault
// healed: no Node of an existing VM was ever deleted, every destroyed VM's
// Node is deleted, every other Node is initialized, and the CCM leaks
// neither goroutines nor vCenter sessions.

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

var chaosDurationFlag = flag.Duration("chaos.duration", 0, "duration of TestChaosSoak (default 5m, 1m with -short; env CHAOS_DURATION)")

// chaosDuration is -chaos.duration, else $CHAOS_DURATION, else 1 minute
// with -short and 5 minutes without.
func chaosDuration(t *testing.T) time.Duration {
	if *chaosDurationFlag > 0 {
		return *chaosDurationFlag
	}
	if s := os.Getenv("CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("CHAOS_DURATION=%q: want a positive duration such as 10m", s)
		}
		return d
	}
	if testing.Short() {
		return time.Minute
	}
	return 5 * time.Minute
}

// chaosSeed is $CHAOS_SEED (to replay a run's random choices), else the clock.
func chaosSeed(t *testing.T) uint64 {
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

const (
	chaosFaultPeriod    = 400 * time.Millisecond // ≥ 500 fault events in 5 minutes
	chaosWorkloadPeriod = 700 * time.Millisecond
	chaosMaxDestroyed   = 10
)

// chaosWorld is what the workload did, shared with the deletion recorder.
type chaosWorld struct {
	env *harness.Env

	// fixtures serialises, per vCenter, the test's own simulator sessions
	// (power, destroy) with the faults that would break them (terminated
	// sessions, a password changed between reading it and logging in):
	// the chaos is for the CCM, not for the fixtures.
	fixtures map[string]*sync.Mutex

	mu         sync.Mutex
	nodes      map[string]*vcsim.VM // Nodes registered, by name
	destroying map[string]bool      // VMs the workload destroys or destroyed, by Node name
	poweredOff map[string]bool
	notReady   map[string]bool
	deleted    []string // Nodes deleted, in order
	wrongful   []string // deleted while (or although) their VM existed
	counts     map[string]int
}

func (w *chaosWorld) count(what string) {
	w.mu.Lock()
	w.counts[what]++
	w.mu.Unlock()
}

// recordDeletions watches Nodes and judges each deletion the moment it is
// seen: the VM must be gone from its simulator, and be one the workload
// destroyed.
func (w *chaosWorld) recordDeletions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(w.env.Client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	vmOf := map[string]*vcsim.VM{}
	for _, vm := range w.env.Fed.AllVMs() {
		vmOf[harness.NodeName(vm)] = vm
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		name := deletedNodeName(obj)
		vm := vmOf[name]
		exists := vm != nil && w.env.Fed.VCenter(vm.VCenter).Exists(vm)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.deleted = append(w.deleted, name)
		if exists || !w.destroying[name] {
			w.wrongful = append(w.wrongful, name)
			t.Errorf("Node %s deleted although its VM exists (%v) or was never destroyed (%v)", name, exists, !w.destroying[name])
		}
	}}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("node informer did not sync")
	}
	t.Cleanup(func() { cancel(); factory.Shutdown() })
}

func TestChaosSoak(t *testing.T) {
	t.Parallel()
	duration := chaosDuration(t)
	seed := chaosSeed(t)
	t.Logf("chaos for %s, CHAOS_SEED=%d", duration, seed)
	env := newEnv(t, harness.Options{VCenters: 3, Datacenters: 2, MachinesPerPool: 4})
	all := env.Fed.AllVMs()
	w := &chaosWorld{
		env: env, nodes: map[string]*vcsim.VM{}, destroying: map[string]bool{},
		poweredOff: map[string]bool{}, notReady: map[string]bool{}, counts: map[string]int{},
		fixtures: map[string]*sync.Mutex{},
	}
	for _, vc := range env.Fed.VCenters {
		w.fixtures[vc.Name] = &sync.Mutex{}
	}
	// Half the VMs have Nodes from the start; the workload registers the rest.
	var initial []*vcsim.VM
	for i, vm := range all {
		if i%2 == 0 {
			initial = append(initial, vm)
			w.nodes[vm.Name] = vm
		}
	}
	createNodes(t, env, initial)
	// Wrong passwords last one to three seconds here: a refused password
	// is sent again after 1 s (doubling to 8 s), not the default's 2 min.
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{Flags: map[string]string{"refused-credentials-retry": "1s"}})
	waitInitialized(t, env, names(initial), 2*time.Minute)
	w.recordDeletions(t)
	token := metricsReaderToken(t, env)
	baseline := goroutines(t, ccm, token)
	t.Logf("warm-up done: %d Nodes initialized, CCM at %d goroutines", len(initial), baseline)

	ctx, stop := context.WithTimeout(t.Context(), duration)
	defer stop()
	start := time.Now()
	var wg sync.WaitGroup
	faults := &chaosFaults{t: t, env: env, w: w, rng: rand.New(rand.NewPCG(seed, 1))}
	wg.Go(func() { faults.run(ctx) })
	wg.Go(func() { (&chaosWorkload{t: t, env: env, w: w, rng: rand.New(rand.NewPCG(seed, 2))}).run(ctx) })
	wg.Wait()
	soaked := time.Since(start)

	// Heal everything, then let the CCM converge.
	faults.healAll()
	healed := time.Now()
	w.mu.Lock()
	var destroyed, existing []*vcsim.VM
	for name, vm := range w.nodes {
		if w.destroying[name] {
			destroyed = append(destroyed, vm)
		} else {
			existing = append(existing, vm)
		}
	}
	counts := maps.Clone(w.counts)
	w.mu.Unlock()
	// A VM destroyed before its Node was initialized leaves a Node that
	// was never known as a VM (no providerID): kept, as CPI keeps it.
	destroyed, neverVMs := splitByProviderID(t, env, destroyed)
	// Destroyed VMs' Nodes are NotReady (set right after each destroy).
	if err := harness.WaitForNodesGone(t.Context(), env.Client, names(destroyed), 2*time.Minute); err != nil {
		t.Errorf("after the heal, destroyed VMs' Nodes were not all deleted: %v", err)
	}
	gone := time.Since(healed)
	if gone > 30*time.Second {
		t.Logf("slow: destroyed VMs' Nodes took %s to go; the CCM's last words on them:\n%s", gone, logAbout(ccm, names(destroyed), 20))
	}
	if err := nudgeInitializedErr(t.Context(), env, existing, 2*time.Minute); err != nil {
		t.Errorf("after the heal: %v", err)
	}
	if d := time.Since(healed) - gone; d > 30*time.Second {
		t.Logf("slow: the other Nodes took %s to be initialized; the CCM's last words:\n%s", d, logAbout(ccm, nil, 40))
	}
	converged := time.Since(healed)
	t.Logf("after the heal: destroyed VMs' Nodes gone in %s, every other Node initialized in %s",
		gone.Round(100*time.Millisecond), converged.Round(100*time.Millisecond))

	w.mu.Lock()
	wrongful, deleted := slices.Clone(w.wrongful), slices.Clone(w.deleted)
	w.mu.Unlock()
	if len(wrongful) > 0 {
		t.Errorf("%d Nodes deleted wrongly: %v", len(wrongful), wrongful)
	}
	if !sameSet(deleted, names(destroyed)) {
		t.Errorf("deleted Nodes %v; want exactly the destroyed VMs' %v", deleted, names(destroyed))
	}
	for _, vm := range neverVMs {
		if _, err := env.Client.CoreV1().Nodes().Get(t.Context(), vm.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("Node %s of a destroyed VM, never initialized: %v; want it kept", vm.Name, err)
		}
	}
	t.Logf("destroyed VMs: %d Nodes deleted, %d never initialized and kept", len(destroyed), len(neverVMs))

	// A last fault everywhere at once. First the lifecycle controller asks
	// about every Node each second until all lookups succeed (so the CCM
	// remembers where each VM is); then every vCenter ends every session
	// (restarted, or an administrator's clean-up). Within seconds each
	// vCenter must answer again, at the locations the CCM remembers: every
	// breaker closed and no failed call for 5s.
	setReady(t, env, existing, false)
	if _, err := waitServing(t, ccm, token, 5*time.Second, 45*time.Second); err != nil {
		t.Errorf("after the heal: %v", err)
	}
	for _, vc := range env.Fed.VCenters {
		if _, err := vc.TerminateOtherSessions(t.Context()); err != nil {
			t.Fatal(err)
		}
		counts["fault:terminate-sessions (final)"]++
	}
	resumed, err := waitServing(t, ccm, token, 5*time.Second, 45*time.Second)
	if err != nil {
		t.Errorf("after every vCenter ended its sessions: %v\nthe CCM's last errors:\n%s", err,
			logAbout(ccm, []string{"error checking if node"}, 10))
	}

	// No goroutine leak: back near the warm-up count once things settle.
	var after int
	if err := wait.PollUntilContextTimeout(t.Context(), time.Second, time.Minute, true, func(context.Context) (bool, error) {
		after = goroutines(t, ccm, token)
		return after <= baseline+50, nil
	}); err != nil {
		t.Errorf("CCM goroutines %d after the soak, %d after warm-up: leak; the most common stacks:\n%s", after, baseline, goroutineProfile(t, env, ccm, 6))
	}
	// No session leak: the CCM's SOAP session, and at most one retired
	// session within its logout grace, per vCenter.
	sessions := map[string]int{}
	for _, vc := range env.Fed.VCenters {
		if err := wait.PollUntilContextTimeout(t.Context(), time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			s, err := vc.Sessions(ctx)
			if err != nil {
				return false, nil
			}
			sessions[vc.Name] = len(s)
			return len(s) <= 2, nil
		}); err != nil {
			t.Errorf("vcenter %s: %d sessions open after the soak (want ≤ 2)", vc.Name, sessions[vc.Name])
		}
	}

	faultEvents := 0
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		if f, ok := strings.CutPrefix(k, "fault:"); ok {
			faultEvents += counts[k]
			kinds = append(kinds, fmt.Sprintf("%s=%d", f, counts[k]))
		}
	}
	t.Logf("MEASURE chaos: duration %s, fault events %d (%s), over %d vCenters × %d datacenters, %d VMs",
		soaked.Round(time.Second), faultEvents, strings.Join(kinds, " "), len(env.Fed.VCenters), 2, len(all))
	t.Logf("MEASURE chaos: Nodes created %d (%d at start), VMs destroyed %d, power changes %d, Ready flips %d",
		len(initial)+counts["nodes created"], len(initial), counts["vms destroyed"], counts["power changes"], counts["ready flips"])
	t.Logf("MEASURE chaos: wrongful deletions %d, Nodes deleted %d (all destroyed VMs'), converged %s after the heal",
		len(wrongful), len(deleted), converged.Round(100*time.Millisecond))
	t.Logf("MEASURE chaos: CCM goroutines %d after warm-up, %d at the end; vCenter sessions at the end %v",
		baseline, after, sessions)
	t.Logf("MEASURE chaos: every vCenter serving again %s after all of them ended their sessions", resumed.Round(100*time.Millisecond))
	if want := int(100 * duration.Minutes()); faultEvents < want {
		t.Errorf("%d fault events in %s, want at least %d", faultEvents, soaked.Round(time.Second), want)
	}
}

// waitServing waits until every vCenter's breaker is closed and no vCenter
// call has failed for quiet, and returns how long that took (counting the
// quiet period).
func waitServing(t *testing.T, ccm *harness.CCMProcess, token string, quiet, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	const errs, breaker = "cloudprovider_vsphere_api_request_errors_total", "cloudprovider_vsphere_breaker_state"
	start := time.Now()
	var since time.Time
	last := -1.0
	var ss harness.Samples
	var scrapeErr error
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, _, err := ccm.Scrape(ctx, token)
		if scrapeErr = err; err != nil {
			return false, nil
		}
		ss = got
		failed, _ := ss.Sum(errs)
		open := false
		for _, b := range ss.Find(breaker) {
			open = open || b.Value != 0
		}
		if failed != last || open {
			last, since = failed, time.Now()
			return false, nil
		}
		return time.Since(since) >= quiet, nil
	})
	if err != nil {
		var state, failed []string
		for _, b := range ss.Find(breaker) {
			state = append(state, fmt.Sprintf("%s=%v", b.Labels["vcenter"], b.Value))
		}
		for _, e := range ss.Find(errs) {
			failed = append(failed, fmt.Sprintf("%s/%s/%s=%v", e.Labels["vcenter"], e.Labels["operation"], e.Labels["reason"], e.Value))
		}
		return time.Since(start), fmt.Errorf("not every vCenter serving within %s: breakers %v (2 = open), failed calls so far %v, still counting (last scrape error: %w)",
			timeout, state, failed, scrapeErr)
	}
	return time.Since(start), nil
}

// goroutineProfile returns the n most common goroutine stacks of the CCM
// (its /debug/pprof, read with a token allowed to), for a leak report.
func goroutineProfile(t *testing.T, env *harness.Env, ccm *harness.CCMProcess, n int) string {
	t.Helper()
	ctx, c := t.Context(), env.Client
	const name = "chaos-debug"
	if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return err.Error()
	}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/debug/pprof", "/debug/pprof/*"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		return err.Error()
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "default"}},
	}, metav1.CreateOptions{}); err != nil {
		return err.Error()
	}
	token, err := env.ControlPlane.ServiceAccountToken(ctx, "default", name, time.Hour)
	if err != nil {
		return err.Error()
	}
	var body string
	// RBAC takes a moment to see the new binding.
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		code, b, err := ccm.Healthz(ctx, "/debug/pprof/goroutine?debug=1", token)
		body = fmt.Sprintf("%d %v %s", code, err, b)
		return err == nil && code == 200, nil
	})
	// debug=1: "N @ addresses" then the frames, one block per stack.
	blocks := strings.Split(body, "\n\n")
	if len(blocks) > n+1 {
		blocks = blocks[:n+1]
	}
	return strings.Join(blocks, "\n\n")
}

// logAbout is the last n lines of the CCM's log naming any of nodes (any
// line when nodes is nil).
func logAbout(p *harness.CCMProcess, nodes []string, n int) string {
	var out []string
	for line := range strings.Lines(p.Log()) {
		if nodes == nil || slices.ContainsFunc(nodes, func(name string) bool { return strings.Contains(line, name) }) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}

// goroutines reads go_goroutines from the CCM's /metrics.
func goroutines(t *testing.T, ccm *harness.CCMProcess, token string) int {
	t.Helper()
	ss, _, err := ccm.Scrape(t.Context(), token)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := ss.Sum("go_goroutines")
	if !ok {
		t.Fatal("no go_goroutines on the CCM's /metrics")
	}
	return int(v)
}

// chaosFaults injects one random fault into one random vCenter every
// chaosFaultPeriod, from a single goroutine.
type chaosFaults struct {
	t   *testing.T
	env *harness.Env
	w   *chaosWorld
	rng *rand.Rand
	// wrongUntil: vCenters whose accepted password is wrong, until when.
	wrongUntil map[string]time.Time
}

var chaosFaultKinds = []struct {
	name   string
	weight int
}{
	{"heal", 30}, {"refuse", 12}, {"blackhole", 12}, {"delay", 12}, {"terminate-sessions", 20}, {"wrong-password", 14},
}

func (f *chaosFaults) run(ctx context.Context) {
	f.wrongUntil = map[string]time.Time{}
	total := 0
	for _, k := range chaosFaultKinds {
		total += k.weight
	}
	tick := time.NewTicker(chaosFaultPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// A wrong password lasts one to three seconds.
		for name, until := range f.wrongUntil {
			if time.Now().After(until) {
				vc := f.env.Fed.VCenter(name)
				f.w.fixtures[name].Lock()
				vc.SetPassword(vc.Password)
				f.w.fixtures[name].Unlock()
				delete(f.wrongUntil, name)
				f.w.count("fault:password-back")
			}
		}
		vc := f.env.Fed.VCenters[f.rng.IntN(len(f.env.Fed.VCenters))]
		p := f.env.Proxies[vc.Name]
		n := f.rng.IntN(total)
		kind := ""
		for _, k := range chaosFaultKinds {
			if n < k.weight {
				kind = k.name
				break
			}
			n -= k.weight
		}
		var err error
		switch kind {
		case "heal":
			p.SetDelay(0)
			err = p.SetMode(vcsim.Pass)
		case "refuse":
			err = p.SetMode(vcsim.Refuse)
		case "blackhole":
			err = p.SetMode(vcsim.Blackhole)
		case "delay":
			// Beyond requestTimeout (2s); applies while the proxy passes.
			p.SetDelay(time.Duration(2500+f.rng.IntN(1500)) * time.Millisecond)
		case "terminate-sessions":
			f.w.fixtures[vc.Name].Lock()
			_, err = vc.TerminateOtherSessions(ctx)
			f.w.fixtures[vc.Name].Unlock()
		case "wrong-password":
			f.w.fixtures[vc.Name].Lock()
			vc.SetPassword("chaos-wrong-" + vc.Password)
			f.wrongUntil[vc.Name] = time.Now().Add(time.Second + time.Duration(f.rng.IntN(2000))*time.Millisecond)
			_, err = vc.TerminateOtherSessions(ctx)
			f.w.fixtures[vc.Name].Unlock()
		}
		if err != nil && ctx.Err() == nil {
			f.t.Errorf("chaos %s on %s: %v", kind, vc.Name, err)
		}
		f.w.count("fault:" + kind)
	}
}

// healAll undoes every fault: proxies pass without delay, every vCenter
// accepts its password.
func (f *chaosFaults) healAll() {
	for _, vc := range f.env.Fed.VCenters {
		p := f.env.Proxies[vc.Name]
		p.SetDelay(0)
		if err := p.SetMode(vcsim.Pass); err != nil {
			f.t.Errorf("healing %s: %v", vc.Name, err)
		}
		vc.SetPassword(vc.Password)
	}
}

// chaosWorkload changes the cluster and the inventory every
// chaosWorkloadPeriod, from a single goroutine.
type chaosWorkload struct {
	t   *testing.T
	env *harness.Env
	w   *chaosWorld
	rng *rand.Rand
}

func (l *chaosWorkload) run(ctx context.Context) {
	tick := time.NewTicker(chaosWorkloadPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var err error
		switch n := l.rng.IntN(100); {
		case n < 30:
			err = l.addNode(ctx)
		case n < 40:
			err = l.destroy(ctx)
		case n < 60:
			err = l.power(ctx)
		default:
			err = l.flipReady(ctx)
		}
		if err != nil && ctx.Err() == nil {
			l.t.Errorf("chaos workload: %v", err)
		}
	}
}

// pick returns a random VM among those for which ok holds (nil if none).
func (l *chaosWorkload) pick(ok func(name string, vm *vcsim.VM) bool) *vcsim.VM {
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	var c []*vcsim.VM
	for _, vm := range l.env.Fed.AllVMs() {
		if ok(vm.Name, vm) {
			c = append(c, vm)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[l.rng.IntN(len(c))]
}

func (l *chaosWorkload) live(name string, _ *vcsim.VM) bool {
	return l.w.nodes[name] != nil && !l.w.destroying[name] && !slices.Contains(l.w.deleted, name)
}

func (l *chaosWorkload) addNode(ctx context.Context) error {
	vm := l.pick(func(name string, _ *vcsim.VM) bool { return l.w.nodes[name] == nil })
	if vm == nil {
		return nil
	}
	if _, err := l.env.CreateNode(ctx, vm); err != nil {
		return err
	}
	l.w.mu.Lock()
	l.w.nodes[vm.Name] = vm
	l.w.counts["nodes created"]++
	l.w.mu.Unlock()
	return nil
}

func (l *chaosWorkload) destroy(ctx context.Context) error {
	l.w.mu.Lock()
	n := l.w.counts["vms destroyed"]
	l.w.mu.Unlock()
	if n >= chaosMaxDestroyed {
		return l.flipReady(ctx)
	}
	vm := l.pick(l.live)
	if vm == nil {
		return nil
	}
	// Marked before the VM goes, so the deletion recorder never sees the
	// Node of a VM being destroyed deleted before the mark.
	l.w.mu.Lock()
	l.w.destroying[vm.Name] = true
	l.w.counts["vms destroyed"]++
	l.w.mu.Unlock()
	l.w.fixtures[vm.VCenter].Lock()
	err := l.env.Fed.VCenter(vm.VCenter).Destroy(ctx, vm)
	l.w.fixtures[vm.VCenter].Unlock()
	if err != nil {
		return fmt.Errorf("destroying %s: %w", vm.Name, err)
	}
	// The Node may already be gone: it may have been NotReady before.
	if err := l.env.SetReady(ctx, vm, false); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s NotReady after its VM was destroyed: %w", vm.Name, err)
	}
	return nil
}

func (l *chaosWorkload) power(ctx context.Context) error {
	vm := l.pick(l.live)
	if vm == nil {
		return nil
	}
	vc := l.env.Fed.VCenter(vm.VCenter)
	l.w.mu.Lock()
	off := l.w.poweredOff[vm.Name]
	l.w.mu.Unlock()
	var err error
	l.w.fixtures[vm.VCenter].Lock()
	if off {
		err = vc.PowerOn(ctx, vm)
	} else {
		err = vc.PowerOff(ctx, vm)
	}
	l.w.fixtures[vm.VCenter].Unlock()
	if err != nil {
		return fmt.Errorf("power %s (off %v): %w", vm.Name, off, err)
	}
	l.w.mu.Lock()
	l.w.poweredOff[vm.Name] = !off
	l.w.counts["power changes"]++
	l.w.mu.Unlock()
	return nil
}

func (l *chaosWorkload) flipReady(ctx context.Context) error {
	vm := l.pick(l.live)
	if vm == nil {
		return nil
	}
	l.w.mu.Lock()
	ready := l.w.notReady[vm.Name] // NotReady now: make it Ready
	l.w.mu.Unlock()
	if err := l.env.SetReady(ctx, vm, ready); err != nil {
		return fmt.Errorf("%s Ready=%v: %w", vm.Name, ready, err)
	}
	l.w.mu.Lock()
	l.w.notReady[vm.Name] = !ready
	l.w.counts["ready flips"]++
	l.w.mu.Unlock()
	return nil
}

// splitByProviderID sorts the VMs whose Nodes have a providerID, or are
// gone already, from those whose Nodes have none.
func splitByProviderID(t *testing.T, env *harness.Env, vms []*vcsim.VM) (initialized, not []*vcsim.VM) {
	t.Helper()
	for _, vm := range vms {
		n, err := env.Client.CoreV1().Nodes().Get(t.Context(), vm.Name, metav1.GetOptions{})
		if err == nil && n.Spec.ProviderID == "" {
			not = append(not, vm)
			continue
		}
		initialized = append(initialized, vm)
	}
	return initialized, not
}
