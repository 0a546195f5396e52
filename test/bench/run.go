package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
)

// runResult is everything one run measured.
type runResult struct {
	Delay time.Duration
	Dir   string
	Nodes int
	Args  []string
	Env   []string // the DaemonSet's literal env, added to the bench's

	Register    time.Duration // creating every Node
	Initialized int           // Nodes initialized by the end of init
	FirstInit   time.Duration // CCM start → first Node initialized
	AllInit     time.Duration // CCM start → last Node initialized (0: not all were)
	GapP50      time.Duration // between consecutive initializations
	GapP99      time.Duration
	PerNode     time.Duration // (last − first)/(initialized − 1)
	CreatedP50  time.Duration // Node created → initialized
	CreatedP99  time.Duration

	Init counters // from CCM start until every Node was initialized

	Warmup        counters // from the end of init to the start of the steady window
	Steady        counters // the steady window
	SteadyWindow  time.Duration
	SteadyPasses  int           // whole status-update cycles in the window (0: fixed window)
	PassAvg       time.Duration // average status-update pass duration in the window
	SteadyMeasure bool          // a steady window was measured
	InitPasses    int           // status-update passes that started during init (their requests count as init's)

	AfterInit, End procSample // the CCM process
	CPUInit        time.Duration
	CPUSteady      time.Duration

	// Restart: the CCM started again over the initialized Nodes, until
	// the end of its first status-update pass over every Node in which no
	// lookup failed (one lookup per Node).
	Restart        counters
	RestartTook    time.Duration // start → end of that pass
	RestartPass    time.Duration // the pass's own duration, from its log line
	RestartMeasure bool
	RestartBefore  passesBefore // the passes that ended before it

	// Failover: two replicas with leader election, the leader killed
	// (failover.go).
	Failover        failoverResult
	FailoverMeasure bool

	NotReadySeen    int // Nodes ever seen without Ready=True
	ShutdownTainted int // Nodes ever seen with the shutdown taint
	Profiles        []string
	Err             string
}

// runOnce measures one CCM from start to the end of its steady window,
// with delay added to every vCenter request. Nodes left from a previous run
// are deleted first and registered again before the CCM starts.
func (w *world) runOnce(ctx context.Context, delay time.Duration, dir string) (*runResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	res := &runResult{Delay: delay, Dir: dir, Nodes: len(w.vms)}
	if err := w.deleteNodes(ctx); err != nil {
		return nil, err
	}
	w.setDelay(delay)

	names := make([]string, len(w.vms))
	for i, vm := range w.vms {
		names[i] = harness.NodeName(vm)
	}
	tr := newTracker(names)
	// The watch runs from before the Nodes exist, so no initialization is
	// missed; its handlers only record times.
	factory := informers.NewSharedInformerFactory(w.admin, 0)
	inf := factory.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tr.observe(obj) },
		UpdateFunc: func(_, obj any) { tr.observe(obj) },
	}); err != nil {
		return nil, fmt.Errorf("node watch: %w", err)
	}
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	factory.Start(stopWatch)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, errors.New("node watch did not sync")
	}

	logf("registering %d Nodes", len(names))
	t := time.Now()
	created, err := w.createNodes(ctx)
	res.Register = time.Since(t)
	if err != nil {
		return nil, fmt.Errorf("registering Nodes: %w", err)
	}
	tr.setCreated(created)
	logf("registered %d Nodes in %s", len(created), res.Register.Round(time.Millisecond))

	flags := fixedCCMFlags()
	for k, v := range w.cfg.CCMFlags {
		flags[k] = v
	}
	args, err := w.env.CCMArgs(harness.CCMOptions{ConcurrentNodeSyncs: 1, Flags: flags})
	if err != nil {
		return nil, err
	}
	res.Args = args
	if res.Env, err = harness.DaemonSetEnv(w.env.Manifests); err != nil {
		return nil, err
	}
	statusEvery := 5 * time.Minute // the library's default
	if d, err := time.ParseDuration(flags["node-status-update-frequency"]); err == nil {
		statusEvery = d
	}

	start := w.snapshot()
	t0 := start.At
	p, err := harness.StartCCMProcess("ccm", w.cfg.Binary, dir, args, res.Env...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = p.Close() }()
	logf("CCM started (pid %d, log %s)", p.Pid(), p.LogPaths()[0])

	samplerDone := w.sample(p, tr, t0, filepath.Join(dir, "timeline.csv"))
	defer samplerDone()
	passes := watchPasses(ctx, p.LogPaths()[0])

	// CPU profiles cover init, in chunks, until the chunk running when
	// init ends is done; the files are added to res once that is.
	var profiles sync.WaitGroup
	var cpuFiles []string
	defer func() {
		profiles.Wait()
		res.Profiles = append(cpuFiles, res.Profiles...)
	}()
	initCtx, initOver := context.WithCancel(ctx)
	defer initOver() // before the wait above: deferred calls run last first
	if w.cfg.Profile {
		profiles.Go(func() { cpuFiles = w.cpuProfiles(ctx, initCtx, p, dir) })
	}

	// Init: until the watch has seen every Node initialized.
	initErr := w.waitInit(ctx, p, tr)
	afterInit := w.snapshot()
	initOver()
	res.Init = afterInit.sub(start)
	res.AfterInit = readProc(p.Pid())
	res.CPUInit = res.AfterInit.CPU
	tr.summarize(res, t0)
	if initErr != nil {
		res.Err = initErr.Error()
		w.finish(ctx, p, tr, res, dir)
		return res, initErr
	}
	logf("all %d Nodes initialized %s after the CCM started (%.1f ms/Node); %d vCenter requests",
		res.Nodes, res.AllInit.Round(time.Millisecond), ms(res.PerNode), res.Init.Wire.Requests)
	if w.cfg.Profile {
		res.addProfiles(w.heapProfile(ctx, p, filepath.Join(dir, "heap-after-init.pb.gz")))
	}

	// Steady state: whole status-update cycles, from the end of one pass
	// to the end of the first pass at least -steady later.
	if err := w.steady(ctx, p, passes, afterInit, statusEvery, res); err != nil {
		res.Err = err.Error()
		w.finish(ctx, p, tr, res, dir)
		return res, err
	}
	w.finish(ctx, p, tr, res, dir)
	if err := w.restart(ctx, p, statusEvery, res); err != nil {
		res.Err = err.Error()
		return res, err
	}
	if w.cfg.FailoverNodes > 0 {
		if err := w.failover(ctx, dir, flags, res); err != nil {
			res.Err = err.Error()
			return res, err
		}
	}
	return res, nil
}

// restart starts the stopped CCM again, as a rollout or a new leader does
// in a running cluster: every Node is initialized, and the cloud-node
// controller's status-update passes ask about each of them while the new
// process is still loading its inventories. It measures from the start to
// the end of the first pass over every Node in which no lookup failed
// (read from the log, up to 200 ms late): a pass whose lookups failed ends
// early and serves nothing, so it is no end of the restart.
func (w *world) restart(ctx context.Context, p *harness.CCMProcess, statusEvery time.Duration, res *runResult) error {
	s0 := w.snapshot()
	if err := p.Restart(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	defer func() { _ = p.Stop() }()
	logs := p.LogPaths()
	logf("restart: CCM started again over %d initialized Nodes (log %s)", res.Nodes, logs[len(logs)-1])
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	passes := watchPasses(pctx, logs[len(logs)-1])
	// restartPasses cycles, each with a pass at a generous 200 ms per Node.
	timeout := restartPasses * (statusEvery + time.Duration(res.Nodes)*200*time.Millisecond)
	ps, before, err := firstCleanPass(ctx, passes, res.Nodes, timeout)
	res.RestartBefore = before
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	s1 := w.snapshot()
	res.Restart, res.RestartTook, res.RestartPass, res.RestartMeasure = s1.sub(s0), s1.At.Sub(s0.At), ps.Took, true
	logf("restart: first status-update pass over %d Nodes without a failed lookup took %s, after %d passes with %d failed lookups; %d vCenter requests since the start",
		ps.Nodes, ps.Took.Round(time.Millisecond), before.Failing, before.Failed, res.Restart.Wire.Requests)
	return nil
}

// restartPasses bounds the status-update cycles a restart may take.
const restartPasses = 5

// passesBefore are the passes that ended before the one a restart waited
// for.
type passesBefore struct {
	Partial int // over fewer Nodes than there are (the Node list still filling)
	Failing int // over every Node, with failed lookups
	Failed  int // failed lookups in all of them
}

// firstCleanPass reads passes until one over at least nodes Nodes in which
// no lookup failed, and returns it with the passes before it; an error if
// none comes within timeout.
func firstCleanPass(ctx context.Context, passes <-chan pass, nodes int, timeout time.Duration) (pass, passesBefore, error) {
	var before passesBefore
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case ps, ok := <-passes:
			if !ok {
				return pass{}, before, errors.New("log watch ended")
			}
			before.Failed += ps.Failed
			switch {
			case ps.Nodes < nodes:
				before.Partial++
			case ps.Failed > 0:
				before.Failing++
			default:
				return ps, before, nil
			}
		case <-t.C:
			return pass{}, before, fmt.Errorf("no status-update pass over every Node without a failed lookup in %s (%d passes over fewer Nodes, %d with %d failed lookups)",
				timeout, before.Partial, before.Failing, before.Failed)
		case <-ctx.Done():
			return pass{}, before, ctx.Err()
		}
	}
}

// waitInit waits until every Node is initialized, the CCM exits, or
// -init-timeout passes.
func (w *world) waitInit(ctx context.Context, p *harness.CCMProcess, tr *tracker) error {
	timeout := time.NewTimer(w.cfg.InitTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastLog := time.Now()
	for {
		select {
		case <-tr.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("%w (%s): %d of %d", errInitTimeout, w.cfg.InitTimeout, tr.initializedCount(), len(tr.want))
		case <-tick.C:
			if !p.Running() {
				return fmt.Errorf("the CCM exited during init: %w\n%s", p.ExitErr(), p.Tail(30))
			}
			if time.Since(lastLog) >= 30*time.Second {
				lastLog = time.Now()
				logf("init: %d of %d Nodes initialized", tr.initializedCount(), len(tr.want))
			}
		}
	}
}

// steady measures the steady window into res.
func (w *world) steady(ctx context.Context, p *harness.CCMProcess, passes <-chan pass, afterInit counters, statusEvery time.Duration, res *runResult) error {
	initEnd := afterInit.At
	// A pass may be running when init ends; at worst the next one ends a
	// whole period plus a pass later. A pass of N Nodes at a generous
	// 200 ms per Node bounds it.
	firstWait := 2*statusEvery + time.Duration(res.Nodes)*200*time.Millisecond
	next := func(timeout time.Duration) (pass, error) {
		t := time.NewTimer(timeout)
		defer t.Stop()
		for {
			select {
			case ps, ok := <-passes:
				if !ok {
					return pass{}, errors.New("log watch ended")
				}
				if ps.At.Before(initEnd) {
					res.InitPasses++ // a pass that ended during init
					continue
				}
				return ps, nil
			case <-t.C:
				return pass{}, errNoPass
			case <-ctx.Done():
				return pass{}, ctx.Err()
			}
		}
	}
	logf("steady state: waiting for the end of a status-update pass that started after init (every %s)", statusEvery)
	// The window opens at the end of the first pass that started after
	// init ended (the line is read up to ~200ms late, hence the margin): a
	// pass lists the Nodes when it starts and skips those still tainted, so
	// an earlier one leaves the Nodes initialized last to the next pass,
	// whose first lookup by providerID would otherwise fall in the window.
	var first pass
	var err error
	for {
		if first, err = next(firstWait); err != nil || first.At.Add(-first.Took-time.Second).After(initEnd) {
			break
		}
		res.InitPasses++ // started during init
	}
	if errors.Is(err, errNoPass) {
		// No "Update N nodes status took" lines (-v below 2): a fixed window.
		logf("steady state: no status-update pass seen in %s (log verbosity < 2?): fixed %s window", firstWait.Round(time.Second), w.cfg.Steady)
		s0, c0 := w.snapshot(), readProc(p.Pid())
		res.Warmup = s0.sub(afterInit)
		select {
		case <-time.After(w.cfg.Steady):
		case <-ctx.Done():
			return ctx.Err()
		}
		s1, c1 := w.snapshot(), readProc(p.Pid())
		res.Steady, res.SteadyWindow, res.SteadyMeasure = s1.sub(s0), s1.At.Sub(s0.At), true
		res.CPUSteady = c1.CPU - c0.CPU
		return nil
	}
	if err != nil {
		return fmt.Errorf("steady state: %w", err)
	}
	s0, c0 := w.snapshot(), readProc(p.Pid())
	res.Warmup = s0.sub(afterInit)
	logf("steady state: window opens at the end of a pass (%d Nodes in %s); at least %s", first.Nodes, first.Took, w.cfg.Steady)
	var took time.Duration
	n := 0
	for {
		ps, err := next(w.cfg.Steady + firstWait)
		if err != nil {
			return fmt.Errorf("steady state after %d passes: %w", n, err)
		}
		n++
		took += ps.Took
		if !p.Running() {
			return fmt.Errorf("the CCM exited in the steady state: %w", p.ExitErr())
		}
		if ps.At.Sub(s0.At) >= w.cfg.Steady {
			break
		}
	}
	s1, c1 := w.snapshot(), readProc(p.Pid())
	res.Steady, res.SteadyWindow, res.SteadyPasses, res.SteadyMeasure = s1.sub(s0), s1.At.Sub(s0.At), n, true
	res.PassAvg = took / time.Duration(n)
	res.CPUSteady = c1.CPU - c0.CPU
	logf("steady state: %d passes in %s, %d vCenter requests", n, res.SteadyWindow.Round(time.Millisecond), res.Steady.Wire.Requests)
	return nil
}

var errNoPass = errors.New("no status-update pass")

// finish records the end state of a run: memory, the lifecycle check,
// metrics, a last heap profile, per-Node times; then stops the CCM.
func (w *world) finish(ctx context.Context, p *harness.CCMProcess, tr *tracker, res *runResult, dir string) {
	res.End = readProc(p.Pid())
	res.NotReadySeen, res.ShutdownTainted = tr.lifecycleCounts()
	if body, err := fetch(ctx, p.SecurePort, "/metrics", w.profToken, 30*time.Second); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "metrics-end.txt"), body, 0o644)
	} else {
		logf("metrics: %v", err)
	}
	if w.cfg.Profile && p.Running() {
		res.addProfiles(w.heapProfile(ctx, p, filepath.Join(dir, "heap-end.pb.gz")))
	}
	if err := tr.writeCSV(filepath.Join(dir, "nodes.csv")); err != nil {
		logf("%v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ccm.args"), []byte(strings.Join(res.Args, "\n")+"\n"), 0o644); err != nil {
		logf("writing ccm.args: %v", err)
	}
	if err := p.Stop(); err != nil {
		logf("stopping the CCM: %v", err)
	}
}

func (r *runResult) addProfiles(paths []string) {
	r.Profiles = append(r.Profiles, paths...)
}

// tracker records, from the watch, when each Node was created and first
// seen initialized, and whether the lifecycle controller could have had a
// reason to ask the cloud about it.
type tracker struct {
	want map[string]bool
	done chan struct{} // closed once every wanted Node is initialized

	mu       sync.Mutex
	created  map[string]time.Time
	inited   map[string]time.Time
	notReady map[string]bool
	shutdown map[string]bool
}

func newTracker(names []string) *tracker {
	t := &tracker{
		want: map[string]bool{}, done: make(chan struct{}),
		created: map[string]time.Time{}, inited: map[string]time.Time{},
		notReady: map[string]bool{}, shutdown: map[string]bool{},
	}
	for _, n := range names {
		t.want[n] = true
	}
	return t
}

func (t *tracker) observe(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok || !t.want[n.Name] {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.inited[n.Name]; !seen && harness.Initialized(n) {
		t.inited[n.Name] = now
		if len(t.inited) == len(t.want) {
			close(t.done)
		}
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		t.notReady[n.Name] = true
	}
	if harness.HasTaint(n, harness.ShutdownTaint) {
		t.shutdown[n.Name] = true
	}
}

func (t *tracker) setCreated(created map[string]time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for n, at := range created {
		t.created[n] = at
	}
}

func (t *tracker) initializedCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.inited)
}

func (t *tracker) lifecycleCounts() (notReady, shutdown int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.notReady), len(t.shutdown)
}

// summarize fills the init figures of res from the times recorded.
func (t *tracker) summarize(res *runResult, start time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var times []time.Time
	var sinceCreated []time.Duration
	for n, at := range t.inited {
		times = append(times, at)
		if c, ok := t.created[n]; ok {
			sinceCreated = append(sinceCreated, at.Sub(c))
		}
	}
	res.Initialized = len(times)
	if len(times) == 0 {
		return
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	res.FirstInit = times[0].Sub(start)
	if len(times) == len(t.want) {
		res.AllInit = times[len(times)-1].Sub(start)
	}
	if len(times) > 1 {
		gaps := make([]time.Duration, len(times)-1)
		for i := range gaps {
			gaps[i] = times[i+1].Sub(times[i])
		}
		res.GapP50, res.GapP99 = percentile(gaps, 50), percentile(gaps, 99)
		res.PerNode = times[len(times)-1].Sub(times[0]) / time.Duration(len(times)-1)
	}
	res.CreatedP50, res.CreatedP99 = percentile(sinceCreated, 50), percentile(sinceCreated, 99)
}

// span is when the first and the last Node were seen initialized (zero
// times when none was).
func (t *tracker) span() (first, last time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, at := range t.inited {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return first, last
}

// writeCSV writes each Node's creation and initialization time (Unix ms).
func (t *tracker) writeCSV(path string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	b.WriteString("node,created_unix_ms,initialized_unix_ms\n")
	names := make([]string, 0, len(t.want))
	for n := range t.want {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		init := ""
		if at, ok := t.inited[n]; ok {
			init = fmt.Sprint(at.UnixMilli())
		}
		fmt.Fprintf(&b, "%s,%d,%s\n", n, t.created[n].UnixMilli(), init)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// percentile is the nearest-rank percentile of ds (which it sorts).
func percentile(ds []time.Duration, pct int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := (len(ds)*pct + 99) / 100 // ceil(n·p/100), 1-based
	return ds[max(i, 1)-1]
}
