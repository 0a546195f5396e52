// Command bench measures vsphere-federated-ccm at scale: how long the CCM
// takes to initialize many Nodes, how many vCenter requests that and the
// steady state cost, and how much memory the process needs. It stands up
// the e2e world (test/harness: a real kube-apiserver and etcd, the
// manifests applied, a federation of simulated vCenters from test/vcsim
// each behind a loopback proxy, the cloud config and Secret), registers
// the Nodes as kubelets do (Ready, tainted uninitialized) BEFORE the CCM
// starts, runs the CCM binary as a process with the DaemonSet's arguments,
// and prints a markdown table (also written to <out>/results.md, with raw
// numbers in results.json, per-Node times, a timeline and the CCM log in
// <out>/run-<delay>/).
//
//	go run ./test/bench                                        # 3 vCenters × 2 DCs × 1,000 VMs, 1,000 Nodes, delays 0 and 10ms
//	go run ./test/bench -binary .cache/bin/ccm-before          # the same for another binary
//	go run ./test/bench -vms-per-datacenter 2000 -delay 0      # 12,000 VMs
//	go run ./test/bench -nodes 100 -steady 1m -profile         # CPU and heap profiles too
//
// Every run starts a fresh CCM with --kube-api-qps=1000 --kube-api-burst=1000
// --concurrent-node-syncs=1 --node-status-update-frequency=30s
// --node-monitor-period=5s --v=2 (override or add with -ccm-flags). The
// control plane and the federation are built once and reused: between runs
// the CCM is stopped and every Node deleted and registered again.
//
// Rows of the table (one column per -delay, the latency the proxies add to
// every chunk of client data, i.e. to every vCenter request):
//
//   - Nodes registered: how long creating the N Nodes took (before the CCM).
//   - CCM start → first / all Nodes initialized: from starting the process
//     until the bench's watch saw the first / last Node with its providerID
//     set and the uninitialized taint gone.
//   - gap between initializations p50 / p99, and (last − first)/(N − 1):
//     one worker (--concurrent-node-syncs=1) initializes Nodes one after
//     another, so these are the cost of one Node, in ms.
//   - registered → initialized p50 / p99: per Node, in s (mostly queueing).
//   - vCenter requests at init: HTTP requests (SOAP and REST) that reached
//     the vCenters from CCM start until all Nodes were initialized, counted
//     on the wire by the proxies (vcsim.Traffic.Requests); per Node: / N.
//     Periodic status-update passes that ran during init are included
//     (their count is a row of its own): each asks about every Node
//     initialized by then.
//   - SOAP calls per Node at init: the simulators' own count of SOAP
//     methods (vcsim.VCenter.SOAPCalls) over the same interval, / N. The
//     difference to the wire count is REST (tagging, its session). SOAP
//     calls count when dispatched, wire requests when answered: a long
//     poll (WaitForUpdatesEx) open across the end of an interval falls in
//     different intervals for the two.
//   - init end → steady window: requests between the two (the rest of the
//     pass running when init ended and the first pass that started after
//     it: the first status update of the Nodes initialized last), per Node.
//   - steady window: from the end of the first periodic status-update pass
//     that started after init (the cloud-node controller's "Update N nodes
//     status took" log line) to the end of the first pass at least -steady
//     later, so it spans whole cycles; passes × average cycle, and the
//     average pass duration / N.
//     Without those log lines (-v below 2) it is a fixed -steady window.
//   - vCenter requests / SOAP calls per Node per minute in the steady
//     window, and wire requests per Node per status pass.
//   - peak RSS: VmHWM of the CCM process from /proc (the kernel's high-water
//     mark since it started) after init and at the end; RSS: VmRSS then.
//   - CCM CPU: user+system time of the process during init, and in the
//     steady window as a share of one core.
//   - restart: after the steady window the CCM is started again over the
//     initialized Nodes (a rollout or a leader change); its status-update
//     passes ask about every Node at once while the new process loads its
//     inventories. The restart ends with the first pass over every Node in
//     which no lookup failed: no "Error getting instance metadata for node
//     addresses" line (the cloud-node controller's, one per Node whose
//     lookup returned an error) between the end of the previous pass and
//     that pass's "Update N nodes status took" line. A pass whose lookups
//     failed (timeouts while the inventories load, an open breaker) ends
//     early and refreshes nothing, so it is not the end of the restart.
//     Rows: from the start to the end of that pass, the pass's own
//     duration, the passes before it with failed lookups and how many
//     failed, vCenter requests per Node until then, new connections. No
//     such pass within 5 status cycles is the run's error.
//   - failover: after the restart, two replicas with leader election
//     (--leader-elect, lease 4s, renew 3s, retry 500ms, a Lease of the
//     run's own) over the initialized Nodes but a batch of -failover-nodes
//     (deleted first). Once the leader's inventories are in sync and the
//     standby had up to -failover-settle to sync its own (whether it did
//     is a row), the leader is killed (SIGKILL: the Lease is not released)
//     and the batch registered at once. Rows: kill → the standby's
//     acquisition of the Lease (its spec.acquireTime, microseconds), and
//     from that acquisition to the first and the last Node of the batch
//     initialized as the watch saw them ("failover → serving": the new
//     leader's first lookup answered), and the vCenter requests from when
//     the bench saw the new holder until the first.
//   - NotReady Nodes seen / shutdown taints: Nodes the watch ever saw
//     without Ready=True or with the shutdown taint; both 0 means the
//     cloud-node-lifecycle controller (which only asks the cloud about
//     Nodes that are not Ready) made no vCenter calls.
//   - connections / chunks per request: new TCP connections to the vCenters
//     in each phase; client chunks per request, i.e. how many times the
//     delay was paid per request.
//
// A second table has one row per run in the columns of the README's
// Benchmarks table (world, delay, init, requests per Node at init, peak
// RSS, CPU during init, restart → clean pass, failover → serving); a third
// breaks the SOAP calls down by method. The machine is
// shared (the simulators run inside this process, beside kube-apiserver,
// etcd and the CCM): timings are noisy, counts are not.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// config is the parsed command line.
type config struct {
	VCenters, Datacenters, VMsPerDatacenter, Nodes int
	Delays                                         []time.Duration
	Steady                                         time.Duration
	Binary                                         string
	CCMFlags                                       map[string]string
	Profile                                        bool
	Out                                            string
	InitTimeout                                    time.Duration
	RequestTimeout                                 string
	CreateWorkers                                  int
	FailoverNodes                                  int
	FailoverSettle                                 time.Duration
}

// fixedCCMFlags are the measurement conditions of every run; -ccm-flags
// overrides them. harness.CCMArgs sets node-monitor-period=1s for the e2e
// tests: back to the default 5s here.
func fixedCCMFlags() map[string]string {
	return map[string]string{
		"kube-api-qps":                 "1000",
		"kube-api-burst":               "1000",
		"node-status-update-frequency": "30s",
		"node-monitor-period":          "5s",
		"v":                            "2",
	}
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	c := config{}
	fs.IntVar(&c.VCenters, "vcenters", 3, "simulated vCenters")
	fs.IntVar(&c.Datacenters, "datacenters", 2, "datacenters per vCenter")
	fs.IntVar(&c.VMsPerDatacenter, "vms-per-datacenter", 1000, "VMs per datacenter (even: half in a cluster, half on a standalone host)")
	fs.IntVar(&c.Nodes, "nodes", 1000, "Nodes, spread evenly over every datacenter, one per VM")
	delays := fs.String("delay", "0,10ms", "comma-separated latencies added to every vCenter request; one run (fresh CCM) each")
	fs.DurationVar(&c.Steady, "steady", 2*time.Minute, "minimum steady-state window after init")
	fs.StringVar(&c.Binary, "binary", "", "CCM binary (default: build ./cmd/vsphere-federated-ccm)")
	ccmFlags := fs.String("ccm-flags", "", `extra CCM flags overriding the bench's, space-separated --name=value (e.g. "--v=1 --concurrent-node-syncs=4")`)
	fs.BoolVar(&c.Profile, "profile", false, "save CPU profiles during init and heap profiles after init and at the end (the CCM's /debug/pprof)")
	fs.StringVar(&c.Out, "out", "", "directory for results, logs and profiles (default <repo>/.cache/bench/<time>)")
	fs.DurationVar(&c.InitTimeout, "init-timeout", 30*time.Minute, "give up waiting for all Nodes to initialize after this long (the partial figures are reported)")
	fs.StringVar(&c.RequestTimeout, "request-timeout", "10s", "the cloud config's requestTimeout for every vCenter")
	fs.IntVar(&c.CreateWorkers, "create-workers", 32, "parallel Node creations")
	fs.IntVar(&c.FailoverNodes, "failover-nodes", 10, "Nodes registered right after the leader is killed in the failover phase (0: no failover phase)")
	fs.DurationVar(&c.FailoverSettle, "failover-settle", 30*time.Second, "in the failover phase, how long the standby may take to sync its inventories before the leader is killed")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if c.VMsPerDatacenter < 2 || c.VMsPerDatacenter%2 != 0 {
		return c, fmt.Errorf("-vms-per-datacenter %d: want an even number ≥ 2 (a datacenter holds 2 × MachinesPerPool VMs)", c.VMsPerDatacenter)
	}
	if c.VMsPerDatacenter > vcsim.MaxVMsPerDatacenter {
		return c, fmt.Errorf("-vms-per-datacenter %d: the simulators number at most %d VMs per datacenter (guest IPs and MACs)", c.VMsPerDatacenter, vcsim.MaxVMsPerDatacenter)
	}
	if c.VCenters < 1 || c.Datacenters < 1 || c.Nodes < 2 || c.CreateWorkers < 1 {
		return c, errors.New("-vcenters, -datacenters and -create-workers must be ≥ 1, -nodes ≥ 2")
	}
	if c.FailoverNodes < 0 || c.FailoverNodes > c.Nodes {
		return c, fmt.Errorf("-failover-nodes %d: want 0 to -nodes (%d)", c.FailoverNodes, c.Nodes)
	}
	if perDC := (c.Nodes + c.VCenters*c.Datacenters - 1) / (c.VCenters * c.Datacenters); perDC > c.VMsPerDatacenter {
		return c, fmt.Errorf("-nodes %d needs %d VMs per datacenter, -vms-per-datacenter is %d", c.Nodes, perDC, c.VMsPerDatacenter)
	}
	for d := range strings.SplitSeq(*delays, ",") {
		d = strings.TrimSpace(d)
		if d == "0" {
			c.Delays = append(c.Delays, 0)
			continue
		}
		v, err := time.ParseDuration(d)
		if err != nil || v < 0 {
			return c, fmt.Errorf("-delay %q: %q is not a duration ≥ 0", *delays, d)
		}
		c.Delays = append(c.Delays, v)
	}
	var err error
	if c.CCMFlags, err = parseCCMFlags(*ccmFlags); err != nil {
		return c, err
	}
	if _, err := time.ParseDuration(c.RequestTimeout); err != nil {
		return c, fmt.Errorf("-request-timeout: %w", err)
	}
	return c, nil
}

// parseCCMFlags reads "--name=value --other=value" into a map.
func parseCCMFlags(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range strings.Fields(s) {
		name, value, ok := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if !ok || name == "" || !strings.HasPrefix(f, "-") {
			return nil, fmt.Errorf("-ccm-flags: %q: want --name=value", f)
		}
		out[name] = value
	}
	return out, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// envtest logs through controller-runtime's logger; its output is not
	// needed (the control plane's is in its log files).
	ctrllog.SetLogger(logr.Discard())
	err = run(ctx, cfg)
	stop()
	harness.Shutdown() // whatever a failure left running
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: FAIL:", err)
		os.Exit(1)
	}
}

// logf narrates progress on stderr; stdout gets only the results.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, cfg config) error {
	start := time.Now()
	if cfg.Out == "" {
		root, err := harness.RepoRoot()
		if err != nil {
			return err
		}
		cfg.Out = filepath.Join(root, ".cache", "bench", start.Format("20060102-150405"))
	}
	// Absolute: the paths end up in the CCM's arguments and the report.
	out, err := filepath.Abs(cfg.Out)
	if err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	cfg.Out = out
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if cfg.Binary == "" {
		// Into $E2E_BIN_DIR when set, else the results' directory: never
		// over the binary the e2e tests share (.cache/bin), which another
		// checkout may be using.
		dir := os.Getenv("E2E_BIN_DIR")
		if dir == "" {
			dir = filepath.Join(cfg.Out, "bin")
		}
		logf("building ./cmd/vsphere-federated-ccm into %s", dir)
		bin, err := harness.BuildCCMInto(dir)
		if err != nil {
			return err
		}
		cfg.Binary = bin
	}
	if abs, err := filepath.Abs(cfg.Binary); err == nil {
		cfg.Binary = abs
	}
	if _, err := os.Stat(cfg.Binary); err != nil {
		return fmt.Errorf("-binary: %w", err)
	}
	logf("results in %s", cfg.Out)

	w, err := newWorld(ctx, cfg)
	if err != nil {
		return err
	}
	defer w.close()

	rep := &report{Config: cfg, Started: start, World: w.info}
	rep.Binary, rep.BinarySHA256 = cfg.Binary, fileSHA256(cfg.Binary)
	for i, delay := range cfg.Delays {
		label := "delay-" + delayLabel(delay)
		logf("run %d/%d: %s", i+1, len(cfg.Delays), label)
		res, err := w.runOnce(ctx, delay, filepath.Join(cfg.Out, "run-"+label))
		if res != nil {
			rep.Runs = append(rep.Runs, res)
		}
		if err != nil {
			if res == nil || ctx.Err() != nil {
				return fmt.Errorf("run %s: %w", label, err)
			}
			logf("run %s: %v (partial figures kept)", label, err)
		}
	}
	rep.Took = time.Since(start)
	rep.BenchHWMKiB = selfHWM()
	text := rep.markdown()
	fmt.Print(text)
	if err := os.WriteFile(filepath.Join(cfg.Out, "results.md"), []byte(text), 0o644); err != nil {
		return fmt.Errorf("writing results.md: %w", err)
	}
	if err := writeJSON(filepath.Join(cfg.Out, "results.json"), rep); err != nil {
		return err
	}
	logf("done in %s; results in %s", rep.Took.Round(time.Second), cfg.Out)
	return nil
}

// delayLabel is a short name for a delay: "0", "10ms".
func delayLabel(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}
