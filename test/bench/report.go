package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// report is the whole bench: its conditions and every run.
type report struct {
	Config       config
	Started      time.Time
	Took         time.Duration
	Binary       string
	BinarySHA256 string
	World        worldInfo
	BenchHWMKiB  int64 // this process (simulators included)
	Runs         []*runResult
}

// topMethods is how many SOAP methods the breakdown lists by name.
const topMethods = 10

func (r *report) markdown() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "## vsphere-federated-ccm bench, %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- binary: `%s` (sha256 %s)\n", r.Binary, r.BinarySHA256)
	fmt.Fprintf(&b, "- world: %d vCenters × %d datacenters × %d VMs = %d VMs; %d Nodes, one per VM, %s per datacenter\n",
		c.VCenters, c.Datacenters, c.VMsPerDatacenter, r.World.VMs, c.Nodes, nodesPerDC(r.World.NodesPerDC))
	fmt.Fprintf(&b, "- environment (kube-apiserver + etcd, manifests, federation, config) up in %s; reused by every run: Nodes deleted and registered again, a fresh CCM each run\n",
		r.World.EnvStart.Round(time.Second))
	if r.World.FederationNote != "" {
		fmt.Fprintf(&b, "- federation: %s\n", r.World.FederationNote)
	}
	if len(r.Runs) > 0 {
		fmt.Fprintf(&b, "- CCM args: `%s`\n", strings.Join(r.Runs[0].Args, " "))
		fmt.Fprintf(&b, "- CCM env (the DaemonSet's): `%s`\n", strings.Join(r.Runs[0].Env, " "))
	}
	fmt.Fprintf(&b, "- requestTimeout %s; delays added per chunk of client data by the vCenters' proxies\n", c.RequestTimeout)
	fmt.Fprintf(&b, "- machine: %d CPUs, load average %s at the start, %s; shared with other work, so timings are noisy (counts are not)\n",
		r.World.CPUs, r.World.LoadAvg, r.World.GoVersion)
	fmt.Fprintf(&b, "- bench took %s; its own peak RSS (simulators included) %.0f MiB\n\n", r.Took.Round(time.Second), mib(r.BenchHWMKiB))

	head := []string{""}
	for _, run := range r.Runs {
		head = append(head, "delay "+delayLabel(run.Delay))
	}
	t := newTable(head...)
	row := func(name string, f func(*runResult) string) {
		cells := []string{name}
		for _, run := range r.Runs {
			cells = append(cells, f(run))
		}
		t.add(cells...)
	}
	initDone := func(f func(*runResult) string) func(*runResult) string {
		return func(run *runResult) string {
			if run.Initialized == 0 {
				return "—"
			}
			return f(run)
		}
	}
	steady := func(f func(*runResult) string) func(*runResult) string {
		return func(run *runResult) string {
			if !run.SteadyMeasure || run.SteadyWindow <= 0 {
				return "—"
			}
			return f(run)
		}
	}
	n := func(run *runResult) float64 { return float64(max(run.Initialized, 1)) }
	row("Nodes registered (s, before the CCM starts)", func(run *runResult) string { return seconds(run.Register) })
	row("CCM start → first Node initialized (s)", initDone(func(run *runResult) string { return seconds(run.FirstInit) }))
	row("**CCM start → all Nodes initialized (s)**", func(run *runResult) string {
		if run.AllInit == 0 {
			return fmt.Sprintf("not all: %d of %d", run.Initialized, run.Nodes)
		}
		return "**" + seconds(run.AllInit) + "**"
	})
	row("gap between initializations p50 / p99 (ms)", initDone(func(run *runResult) string {
		return fmt.Sprintf("%.1f / %.1f", ms(run.GapP50), ms(run.GapP99))
	}))
	row("**(last − first)/(N − 1) (ms/Node)**", initDone(func(run *runResult) string { return fmt.Sprintf("**%.1f**", ms(run.PerNode)) }))
	row("registered → initialized p50 / p99 (s)", initDone(func(run *runResult) string {
		return seconds(run.CreatedP50) + " / " + seconds(run.CreatedP99)
	}))
	row("vCenter requests at init (wire)", func(run *runResult) string { return fmt.Sprint(run.Init.Wire.Requests) })
	row("**vCenter requests per Node at init (wire)**", initDone(func(run *runResult) string {
		return fmt.Sprintf("**%.2f**", float64(run.Init.Wire.Requests)/n(run))
	}))
	row("SOAP calls per Node at init", initDone(func(run *runResult) string { return fmt.Sprintf("%.2f", float64(run.Init.SOAPTotal)/n(run)) }))
	row("new vCenter connections at init", func(run *runResult) string { return fmt.Sprint(run.Init.Wire.Connections) })
	row("client chunks per request at init (delays paid)", func(run *runResult) string { return chunksPerRequest(run.Init) })
	row("status-update passes started during init (incl. the one at start)", steady(func(run *runResult) string { return fmt.Sprint(run.InitPasses) }))
	row("vCenter requests per Node, init end → steady window (wire / SOAP)", steady(func(run *runResult) string {
		if run.SteadyPasses == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f / %.2f", float64(run.Warmup.Wire.Requests)/float64(run.Nodes), float64(run.Warmup.SOAPTotal)/float64(run.Nodes))
	}))
	row("steady window (s): passes × average cycle", steady(func(run *runResult) string {
		if run.SteadyPasses == 0 {
			return seconds(run.SteadyWindow) + " (fixed)"
		}
		return fmt.Sprintf("%s: %d × %s", seconds(run.SteadyWindow), run.SteadyPasses, seconds(run.SteadyWindow/time.Duration(run.SteadyPasses)))
	}))
	row("status-update pass (ms/Node)", steady(func(run *runResult) string {
		if run.SteadyPasses == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", ms(run.PassAvg)/float64(run.Nodes))
	}))
	perMin := func(run *runResult, v int64) float64 {
		return float64(v) / float64(run.Nodes) / run.SteadyWindow.Minutes()
	}
	row("**vCenter requests per Node per minute, steady (wire)**", steady(func(run *runResult) string {
		return fmt.Sprintf("**%.2f**", perMin(run, run.Steady.Wire.Requests))
	}))
	row("SOAP calls per Node per minute, steady", steady(func(run *runResult) string {
		return fmt.Sprintf("%.2f", perMin(run, run.Steady.SOAPTotal))
	}))
	row("vCenter requests per Node per status pass (wire)", steady(func(run *runResult) string {
		if run.SteadyPasses == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", float64(run.Steady.Wire.Requests)/float64(run.Nodes)/float64(run.SteadyPasses))
	}))
	row("new vCenter connections, steady", steady(func(run *runResult) string { return fmt.Sprint(run.Steady.Wire.Connections) }))
	row("**peak RSS, VmHWM (MiB): after init / end**", func(run *runResult) string {
		return fmt.Sprintf("**%.0f** / **%.0f**", mib(run.AfterInit.HWMKiB), mib(run.End.HWMKiB))
	})
	row("RSS, VmRSS (MiB): after init / end", func(run *runResult) string {
		return fmt.Sprintf("%.0f / %.0f", mib(run.AfterInit.RSSKiB), mib(run.End.RSSKiB))
	})
	row("CCM CPU during init (s)", func(run *runResult) string { return seconds(run.CPUInit) })
	row("CCM CPU, steady (% of a core)", steady(func(run *runResult) string {
		return fmt.Sprintf("%.1f", 100*run.CPUSteady.Seconds()/run.SteadyWindow.Seconds())
	}))
	restarted := func(f func(run *runResult) string) func(run *runResult) string {
		return func(run *runResult) string {
			if !run.RestartMeasure {
				return "–"
			}
			return f(run)
		}
	}
	row("**restart over initialized Nodes: start → first status pass without a failed lookup done (s)** / the pass (s)", restarted(func(run *runResult) string {
		return "**" + seconds(run.RestartTook) + "** / " + seconds(run.RestartPass)
	}))
	row("restart: passes before it with failed lookups / failed lookups in them", func(run *runResult) string {
		if !run.RestartMeasure && run.RestartBefore == (passesBefore{}) {
			return "–"
		}
		return fmt.Sprintf("%d / %d", run.RestartBefore.Failing, run.RestartBefore.Failed)
	})
	row("**restart: vCenter requests per Node until then (wire)**", restarted(func(run *runResult) string {
		return fmt.Sprintf("**%.2f**", float64(run.Restart.Wire.Requests)/n(run))
	}))
	row("restart: new vCenter connections", restarted(func(run *runResult) string { return fmt.Sprint(run.Restart.Wire.Connections) }))
	failedOver := func(f func(run *runResult) string) func(run *runResult) string {
		return func(run *runResult) string {
			if !run.FailoverMeasure {
				return "–"
			}
			return f(run)
		}
	}
	row("failover: leader killed → the standby takes the lease (s)", failedOver(func(run *runResult) string { return fmt.Sprintf("%.2f", run.Failover.Takeover.Seconds()) }))
	row("**failover: lease taken → first new Node initialized (s)** / all of them", failedOver(func(run *runResult) string {
		return fmt.Sprintf("**%.2f** / %.2f (%d Nodes)", run.Failover.First.Seconds(), run.Failover.All.Seconds(), run.Failover.Nodes)
	}))
	row("failover: standby's inventories in sync before the kill", failedOver(func(run *runResult) string { return yesNo(run.Failover.Warm) }))
	row("failover: vCenter requests, new holder seen → first new Node initialized", failedOver(func(run *runResult) string { return fmt.Sprint(run.Failover.Requests) }))
	row("NotReady Nodes seen / shutdown taints", func(run *runResult) string {
		return fmt.Sprintf("%d / %d", run.NotReadySeen, run.ShutdownTainted)
	})
	b.WriteString(t.String())
	b.WriteString("\n")
	b.WriteString(r.readmeRows())

	// SOAP breakdown: per Node at init and from init's end to the steady
	// window, per Node per minute in the steady window; the methods with
	// the most calls over every run first.
	totals := map[string]int64{}
	for _, run := range r.Runs {
		for m, v := range run.Init.SOAP {
			totals[m] += v
		}
		for m, v := range run.Steady.SOAP {
			totals[m] += v
		}
		for m, v := range run.Warmup.SOAP {
			totals[m] += v
		}
	}
	methods := make([]string, 0, len(totals))
	for m := range totals {
		methods = append(methods, m)
	}
	slices.SortFunc(methods, func(a, b string) int { return cmp.Or(cmp.Compare(totals[b], totals[a]), cmp.Compare(a, b)) })
	shown, rest := methods, []string(nil)
	if len(methods) > topMethods {
		shown, rest = methods[:topMethods], methods[topMethods:]
	}
	head = []string{"SOAP method"}
	for _, run := range r.Runs {
		l := delayLabel(run.Delay)
		head = append(head, "init /Node, delay "+l, "init end → window /Node, delay "+l, "steady /Node/min, delay "+l)
	}
	bt := newTable(head...)
	line := func(name string, val func(c counters) int64) {
		cells := []string{name}
		for _, run := range r.Runs {
			cells = append(cells, fmt.Sprintf("%.3f", float64(val(run.Init))/n(run)))
			if run.SteadyMeasure && run.SteadyWindow > 0 {
				cells = append(cells, fmt.Sprintf("%.3f", float64(val(run.Warmup))/float64(run.Nodes)),
					fmt.Sprintf("%.3f", perMin(run, val(run.Steady))))
			} else {
				cells = append(cells, "—", "—")
			}
		}
		bt.add(cells...)
	}
	for _, m := range shown {
		line(m, func(c counters) int64 { return c.SOAP[m] })
	}
	if len(rest) > 0 {
		line(fmt.Sprintf("%d other methods", len(rest)), func(c counters) int64 {
			var s int64
			for _, m := range rest {
				s += c.SOAP[m]
			}
			return s
		})
	}
	line("all SOAP", func(c counters) int64 { return c.SOAPTotal })
	line("wire − SOAP (REST: tags, its session)", func(c counters) int64 { return c.Wire.Requests - c.SOAPTotal })
	line("all requests (wire)", func(c counters) int64 { return c.Wire.Requests })
	b.WriteString("\n")
	b.WriteString(bt.String())

	for _, run := range r.Runs {
		if run.Err != "" {
			fmt.Fprintf(&b, "\n- delay %s: %s\n", delayLabel(run.Delay), firstLine(run.Err))
		}
	}
	b.WriteString("\nFiles per run (run-delay-*/): ccm.1.log, ccm.args, nodes.csv (per-Node times), timeline.csv (per second), metrics-end.txt")
	if c.Profile {
		b.WriteString(", cpu-init-*.pb.gz (consecutive 5 s CPU profiles during init), heap-after-init.pb.gz, heap-end.pb.gz")
	}
	b.WriteString(".\n")
	return b.String()
}

// readmeRows is one Markdown row per run in the columns of the README's
// Benchmarks table: world, delay, init (s: CCM start → all Nodes
// initialized), vCenter requests per Node at init, peak RSS (MiB, at the
// end), CCM CPU during init (s), restart → first clean status pass (s),
// failover → serving (s: lease taken → first new Node initialized).
func (r *report) readmeRows() string {
	c := r.Config
	world := fmt.Sprintf("%d vCenters × %d DC × %s VMs, %s Nodes", c.VCenters, c.Datacenters, thousands(c.VMsPerDatacenter), thousands(c.Nodes))
	t := newTable("world", "delay", "init (s)", "requests/Node at init", "peak RSS (MiB)", "CPU at init (s)", "restart → clean pass (s)", "failover → serving (s)")
	for _, run := range r.Runs {
		init := "—"
		if run.AllInit > 0 {
			init = fmt.Sprintf("%.1f", run.AllInit.Seconds())
		}
		perNode := "—"
		if run.Initialized > 0 {
			perNode = fmt.Sprintf("%.2f", float64(run.Init.Wire.Requests)/float64(run.Initialized))
		}
		restart := "—"
		if run.RestartMeasure {
			restart = fmt.Sprintf("%.1f", run.RestartTook.Seconds())
		}
		failover := "—"
		if run.FailoverMeasure {
			failover = fmt.Sprintf("%.2f", run.Failover.First.Seconds())
			if !run.Failover.Warm {
				failover += " (cold standby)"
			}
		}
		t.add(world, delayLabel(run.Delay), init, perNode, fmt.Sprintf("%.0f", mib(max(run.End.HWMKiB, run.AfterInit.HWMKiB))),
			fmt.Sprintf("%.1f", run.CPUInit.Seconds()), restart, failover)
	}
	return t.String()
}

// thousands writes n with commas: 12,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func chunksPerRequest(c counters) string {
	if c.Wire.Requests == 0 {
		return "—"
	}
	// Handshake turns carry chunks too; per request is what a reader
	// multiplies the delay by.
	return fmt.Sprintf("%.2f", float64(c.Wire.Chunks)/float64(c.Wire.Requests))
}

func nodesPerDC(m map[string]int) string {
	lo, hi := -1, 0
	for _, v := range m {
		if lo < 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// table is a markdown table, first column left-aligned, the rest right.
type table struct {
	rows [][]string
}

func newTable(head ...string) *table { return &table{rows: [][]string{head}} }

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) String() string {
	if len(t.rows) == 0 {
		return ""
	}
	cols := len(t.rows[0])
	width := make([]int, cols)
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	write := func(r []string) {
		b.WriteString("|")
		for i := range cols {
			c := ""
			if i < len(r) {
				c = r[i]
			}
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i == 0 {
				b.WriteString(" " + c + pad + " |")
			} else {
				b.WriteString(" " + pad + c + " |")
			}
		}
		b.WriteString("\n")
	}
	write(t.rows[0])
	b.WriteString("|")
	for i := range cols {
		if i == 0 {
			b.WriteString(" " + strings.Repeat("-", max(width[i], 3)) + " |")
		} else {
			b.WriteString(" " + strings.Repeat("-", max(width[i], 3)-1) + ": |")
		}
	}
	b.WriteString("\n")
	for _, r := range t.rows[1:] {
		write(r)
	}
	return b.String()
}
