package e2e

// The fault matrix (issue 5, part 3): one vCenter of two misbehaves in one
// way per row, while the lifecycle controller asks about its NotReady Nodes
// every second. No row may delete a Node whose VM exists; each row asserts
// what the CCM does during the fault, then heals it and asserts recovery.
// The rows run the CCM built with the race detector (E2E_RACE_CCM=0 runs
// the plain binary): a "WARNING: DATA RACE" in its output fails the row.

import (
	"context"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/vmware/govmomi/simulator"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// faultWindow is how long each fault lasts, at least, while deletions are
// watched (the lifecycle controller asks about every NotReady Node each
// second, so about a dozen times per Node).
const faultWindow = 12 * time.Second

// faultRow is the running state of one row: vc2 is the affected vCenter,
// vc1 the healthy one.
type faultRow struct {
	t         *testing.T
	env       *harness.Env
	ccm       *harness.CCMProcess
	vc        *vcsim.VCenter
	proxy     *vcsim.Proxy
	healthy   *vcsim.VCenter
	notReady  []*vcsim.VM // vc2's initialized Nodes, NotReady before the fault
	spare     []*vcsim.VM // vc2's VMs without a Node yet
	deletions *deletionWatch
	// gone are the Nodes the row expects deleted (it destroyed their VMs).
	gone []string
	// token reads the CCM's /metrics; made on first use.
	token string
}

// waitInventory waits until the CCM's inventory metrics for r.vc satisfy
// cond: the CCM answers from its inventory while it is in sync (for up to
// heartbeat + requestTimeout after vc2 goes silent), so a row that needs
// its lookups to reach vc2 waits for the inventory to leave service.
func (r *faultRow) waitInventory(what string, timeout time.Duration, cond func(synced, updates float64) bool) (synced, updates float64) {
	r.t.Helper()
	if r.token == "" {
		r.token = metricsReaderToken(r.t, r.env)
	}
	if err := wait.PollUntilContextTimeout(r.t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ss, _, err := r.ccm.Scrape(ctx, r.token)
		if err != nil {
			return false, err
		}
		synced, _ = ss.Sum("cloudprovider_vsphere_inventory_synced", "vcenter", r.vc.Name)
		updates, _ = ss.Sum("cloudprovider_vsphere_inventory_updates_total", "vcenter", r.vc.Name)
		return cond(synced, updates), nil
	}); err != nil {
		r.t.Fatalf("%s's inventory: not %s within %s (synced %v, updates %v): %v", r.vc.Name, what, timeout, synced, updates, err)
	}
	return synced, updates
}

type faultCase struct {
	name string
	ccm  harness.CCMOptions
	// setup, when set, runs before the CCM starts and may change its options.
	setup func(r *faultRow, o *harness.CCMOptions)
	// inject starts the fault and returns what heals it.
	inject func(r *faultRow) (heal func())
	// during runs right after inject, the fault on; the window's remainder
	// is then observed.
	during func(r *faultRow)
	// expect runs at the end of the window, the fault still on.
	expect func(r *faultRow)
	// recover runs after heal.
	recover func(r *faultRow)
}

func TestFaultMatrix(t *testing.T) {
	t.Parallel()
	refused, silent := `connection refused`, `no answer within requestTimeout`
	rows := []faultCase{
		outageRow("refuses connections", refused, true, func(r *faultRow) func() {
			must(r.t, r.proxy.SetMode(vcsim.Refuse))
			return func() { must(r.t, r.proxy.SetMode(vcsim.Pass)) }
		}),
		outageRow("accepts and never answers", silent, true, func(r *faultRow) func() {
			must(r.t, r.proxy.SetMode(vcsim.Blackhole))
			return func() { must(r.t, r.proxy.SetMode(vcsim.Pass)) }
		}),
		outageRow("answers slower than requestTimeout", silent, true, func(r *faultRow) func() {
			r.proxy.SetDelay(3 * time.Second) // requestTimeout is 2s
			return func() { r.proxy.SetDelay(0) }
		}),
		outageRow("flaps up and down", refused, false, func(r *faultRow) func() {
			stop := r.loop(700*time.Millisecond, func(i int) {
				mode := vcsim.Refuse
				if i%2 == 1 {
					mode = vcsim.Pass
				}
				if err := r.proxy.SetMode(mode); err != nil {
					r.t.Errorf("flapping vc2: %v", err)
				}
			})
			return func() { stop(); must(r.t, r.proxy.SetMode(vcsim.Pass)) }
		}),
		rejectedCredentialsRow(),
		terminatedSessionsRow(),
		notAuthenticatedRow(),
		inaccessibleRow(),
		duplicateUUIDRow(),
		apiServerRestartRow(),
	}
	for _, tc := range rows {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			runFaultRow(t, tc)
		})
	}
}

func runFaultRow(t *testing.T, tc faultCase) {
	start := time.Now()
	// Registered before newEnv's cleanup, so it runs after the CCMs are
	// killed: every report is complete.
	var env *harness.Env
	t.Cleanup(func() { failOnRaces(t, env) })
	env = newEnv(t, harness.Options{VCenters: 2, Datacenters: 1, MachinesPerPool: 3})
	r := &faultRow{
		t: t, env: env,
		vc: env.Fed.VCenter("vc2"), proxy: env.Proxies["vc2"], healthy: env.Fed.VCenter("vc1"),
	}
	r.notReady, r.spare = r.vc.VMs[:2], r.vc.VMs[2:]
	initial := slices.Concat(r.healthy.VMs[:2], r.notReady)
	createNodes(t, env, initial)
	o := tc.ccm
	// The rows drive the CCM through its error paths: with the race
	// detector, a race there fails the row (failOnRaces).
	o.Race = raceCCM()
	o.Flags = maps.Clone(o.Flags)
	if o.Flags == nil {
		o.Flags = map[string]string{}
	}
	if tc.setup != nil {
		tc.setup(r, &o)
	}
	r.ccm = startCCM(t, env, "ccm", o)
	waitInitialized(t, env, names(initial), time.Minute)
	r.deletions = watchDeletions(t, env)
	// The lifecycle controller now asks about them every second.
	setReady(t, env, r.notReady, false)

	injected := time.Now()
	heal := tc.inject(r)
	healed := false
	defer func() {
		if !healed && heal != nil {
			heal()
		}
	}()
	if tc.during != nil {
		tc.during(r)
	}
	observe(t, time.Until(injected.Add(faultWindow)), r.checkDeletions)
	if tc.expect != nil {
		tc.expect(r)
	}
	faultFor := time.Since(injected)
	if heal != nil {
		heal()
	}
	healed = true
	if tc.recover != nil {
		tc.recover(r)
	}
	if err := r.checkDeletions(); err != nil {
		t.Fatal(err)
	}
	if d := r.deletions.Deleted(nil); !sameSet(d, r.gone) {
		t.Fatalf("deleted Nodes %v, want exactly %v", d, r.gone)
	}
	t.Logf("MEASURE fault %q: fault %s, row %s, Nodes deleted %v", tc.name, faultFor.Round(100*time.Millisecond),
		time.Since(start).Round(100*time.Millisecond), r.deletions.Deleted(nil))
}

// outageRow is a row in which vc2 cannot answer: its NotReady Nodes get
// lookup errors naming vc2 (cause, or its breaker open once cause has
// opened it: cause must be seen) and are kept, a Node registered during
// the fault stays uninitialized (when stuck is set: a flapping vCenter may
// answer it), and after the heal that Node initializes.
func outageRow(name, cause string, stuck bool, inject func(*faultRow) func()) faultCase {
	return faultCase{
		name:   name,
		inject: inject,
		during: func(r *faultRow) {
			if stuck {
				r.waitInventory("out of service", 20*time.Second, func(synced, _ float64) bool { return synced == 0 })
			}
			createNodes(r.t, r.env, r.spare[:1])
		},
		expect: func(r *faultRow) {
			// The controller did ask, and got errors naming vc2 and the
			// cause: no deletion is not a controller that never looked.
			re := regexp.MustCompile(`error checking if node (` + strings.Join(quoteAll(names(r.notReady)), "|") + `) exists: .*vcenter vc2: .*(` + cause + `|circuit breaker open)`)
			r.waitLog(re, 10*time.Second)
			r.waitLog(regexp.MustCompile(`vcenter vc2: .*`+cause), time.Second)
			if stuck {
				e := waitEvent(r.t, r.env, metav1.NamespaceDefault, "Node", r.notReady[0].Name, "VMLookupFailed", 10*time.Second)
				if !strings.Contains(e.Message, "vcenter vc2") {
					r.t.Fatalf("VMLookupFailed Event %q does not name vc2", e.Message)
				}
				r.assertTainted(r.spare[0])
			}
		},
		recover: func(r *faultRow) {
			nudgeInitialized(r.t, r.env, r.spare[:1], 45*time.Second)
		},
	}
}

// refusedRetry is the rejected-credentials row's --refused-credentials-retry
// (the default, two minutes, outlasts the row).
const refusedRetry = 2 * time.Second

// vCenter refuses the CCM's password (its identity source down, say): an
// outage, during which the refused password is sent again only on the
// retry schedule (once per refusedRetry at most, vSphere SSO locks an
// account after 5 failed logins in 180 s), and after which it logs in.
func rejectedCredentialsRow() faultCase {
	var injected time.Time
	var before int64
	row := outageRow("rejects the credentials", `login as .*Login failure`, true, func(r *faultRow) func() {
		calls, _ := r.vc.SOAPCalls()
		before, injected = calls["Login"], time.Now()
		r.vc.SetPassword("not-the-" + r.vc.Password)
		if _, err := r.vc.TerminateOtherSessions(r.t.Context()); err != nil {
			r.t.Fatal(err)
		}
		return func() {
			calls, _ := r.vc.SOAPCalls()
			n, elapsed := calls["Login"]-before, time.Since(injected)
			if most := 1 + int64(elapsed/refusedRetry); n > most {
				r.t.Errorf("%d refused logins in %s; the retry schedule allows %d at most", n, elapsed.Round(time.Second), most)
			}
			r.t.Logf("MEASURE refused logins: %d in %s (--refused-credentials-retry=%s)", n, elapsed.Round(time.Second), refusedRetry)
			r.vc.SetPassword(r.vc.Password)
		}
	})
	row.ccm.Flags = map[string]string{"refused-credentials-retry": refusedRetry.String()}
	return row
}

// Sessions terminated every second: each lookup after a termination logs
// in again and is retried, so lookups keep working: a new Node initializes
// during the fault and vc2's breaker never opens.
func terminatedSessionsRow() faultCase {
	var mu sync.Mutex
	terminated := 0
	return faultCase{
		name: "terminates sessions every second",
		inject: func(r *faultRow) func() {
			stop := r.loop(time.Second, func(int) {
				n, err := r.vc.TerminateOtherSessions(r.t.Context())
				if err != nil && r.t.Context().Err() == nil {
					r.t.Errorf("terminating sessions: %v", err)
				}
				mu.Lock()
				terminated += n
				mu.Unlock()
			})
			return func() { stop() }
		},
		during: func(r *faultRow) {
			createNodes(r.t, r.env, r.spare[:1])
			nudgeInitialized(r.t, r.env, r.spare[:1], faultWindow)
		},
		expect: func(r *faultRow) {
			mu.Lock()
			terminated := terminated
			mu.Unlock()
			if re := regexp.MustCompile(`circuit breaker changed state.*vcenter="vc2".*to="open"`); logHas(r.log(), re) {
				lost := regexp.MustCompile(`error checking if node .* exists: .*vcenter vc2: .*NotAuthenticated.*`)
				r.t.Fatalf("vc2's breaker opened while only its sessions were being terminated: lookups failed instead of logging in again, e.g.\n%s",
					lost.FindString(r.log()))
			}
			if terminated < 3 {
				r.t.Fatalf("%d sessions terminated in %s: the CCM did not keep logging in again", terminated, faultWindow)
			}
			r.t.Logf("%d CCM sessions terminated during the fault", terminated)
		},
		recover: func(r *faultRow) {
			createNodes(r.t, r.env, r.spare[1:2])
			nudgeInitialized(r.t, r.env, r.spare[1:2], 30*time.Second)
		},
	}
}

// The simulator answers half of the searches and property reads with
// NotAuthenticated (the session itself stays valid): the CCM logs in again
// and retries, every such re-login succeeds, new Nodes still initialize,
// and nothing is deleted.
//
// The CCM answers lookups from its inventory while it is in sync, and then
// reaches vc2 only with the watch's poll (one per heartbeat): faults at
// random could miss it for the whole window. So every poll meets the
// fault: the watch stops, the inventory leaves service, and the lookups
// for the new Nodes go to vc2, where half of them meet it.
func notAuthenticatedRow() faultCase {
	var watch, lookups *vcsim.FaultRules
	return faultCase{
		name: "answers NotAuthenticated at random",
		inject: func(r *faultRow) func() {
			watch = r.vc.InjectFault(simulator.FaultTypeNotAuthenticated, 1, "WaitForUpdatesEx")
			lookups = r.vc.InjectFault(simulator.FaultTypeNotAuthenticated, 0.5, "RetrieveProperties", "RetrievePropertiesEx", "FindAllByUuid")
			return func() { watch.Remove(); lookups.Remove() }
		},
		during: func(r *faultRow) {
			r.waitInventory("out of service", 20*time.Second, func(synced, _ float64) bool { return synced == 0 })
			createNodes(r.t, r.env, r.spare[:2])
		},
		expect: func(r *faultRow) {
			// A retried request may meet another injected fault (and fail:
			// one retry), but logging in again must never fail.
			if m := regexp.MustCompile(`session lost \(.*\), and .*`).FindString(r.log()); m != "" {
				r.t.Fatalf("re-login after an injected NotAuthenticated failed:\n%s", m)
			}
			nudgeInitialized(r.t, r.env, r.spare[:2], 40*time.Second)
			n := lookups.Injected()
			if n["RetrieveProperties"]+n["RetrievePropertiesEx"]+n["FindAllByUuid"] == 0 {
				r.t.Fatalf("no lookup met an injected NotAuthenticated (%v; the watch's polls: %v)", n, watch.Injected())
			}
			r.t.Logf("NotAuthenticated faults injected: lookups %v, the watch's polls %v", n, watch.Injected())
		},
		recover: func(r *faultRow) {
			r.waitInventory("back in service", time.Minute, func(synced, _ float64) bool { return synced == 1 })
			createNodes(r.t, r.env, r.spare[2:3])
			nudgeInitialized(r.t, r.env, r.spare[2:3], 30*time.Second)
		},
	}
}

// A VM whose files are unreachable (no readable configuration, no UUID) is
// not gone: its NotReady Node is kept, by a CCM that knew where the VM was
// and by one restarted meanwhile that must search for it. Once the VM is
// readable again and then destroyed, its Node is deleted.
func inaccessibleRow() faultCase {
	return faultCase{
		name: "VM inaccessible",
		inject: func(r *faultRow) func() {
			r.vc.MakeInaccessible(r.notReady[0])
			return func() { r.vc.MakeAccessible(r.notReady[0]) }
		},
		during: func(r *faultRow) {
			observe(r.t, faultWindow/2, r.checkDeletions)
			// A fresh process has no remembered location.
			if err := r.ccm.Restart(); err != nil {
				r.t.Fatal(err)
			}
			if err := r.ccm.WaitHealthy(r.t.Context(), time.Minute); err != nil {
				r.t.Fatal(err)
			}
		},
		expect: func(r *faultRow) {
			victim := r.notReady[0]
			re := regexp.MustCompile(`error checking if node ` + regexp.QuoteMeta(victim.Name) + ` exists: .*cannot be read`)
			if err := wait.PollUntilContextTimeout(r.t.Context(), 250*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
				return re.MatchString(r.ccm.Log()), nil
			}); err != nil {
				r.t.Fatalf("the restarted CCM never reported %s's VM unreadable (%s):\n%s", victim.Name, re, r.ccm.Tail(30))
			}
			observe(r.t, 3*time.Second, r.checkDeletions)
		},
		recover: func(r *faultRow) {
			victim := r.notReady[0]
			if err := r.vc.Destroy(r.t.Context(), victim); err != nil {
				r.t.Fatal(err)
			}
			r.gone = append(r.gone, victim.Name)
			if err := harness.WaitForNodesGone(r.t.Context(), r.env.Client, []string{victim.Name}, 30*time.Second); err != nil {
				r.t.Fatal(err)
			}
			createNodes(r.t, r.env, r.spare[:1])
			nudgeInitialized(r.t, r.env, r.spare[:1], 30*time.Second)
		},
	}
}

// A VM of vc2 takes the BIOS UUID of a VM of vc1 before the latter's Node
// registers: that Node stays uninitialized, with a DuplicateVMUUID Event
// naming both vCenters; once the UUID is unique again it initializes.
func duplicateUUIDRow() faultCase {
	var target, twin *vcsim.VM
	return faultCase{
		name: "same BIOS UUID in two vCenters",
		inject: func(r *faultRow) func() {
			target, twin = r.healthy.VMs[2], r.spare[len(r.spare)-1]
			_, before := r.waitInventory("in sync", 20*time.Second, func(synced, _ float64) bool { return synced == 1 })
			r.vc.SetUUID(twin, target.UUID)
			// A clone exists long before its kubelet registers: let the
			// CCM's inventory see the change first, as it would.
			r.waitInventory("showing the change", 20*time.Second, func(_, updates float64) bool { return updates > before })
			return func() { r.vc.MakeAccessible(twin) }
		},
		during: func(r *faultRow) {
			createNodes(r.t, r.env, []*vcsim.VM{target})
			e := waitEvent(r.t, r.env, metav1.NamespaceDefault, "Node", target.Name, "DuplicateVMUUID", 30*time.Second)
			for _, want := range []string{"vcenter vc1", "vcenter vc2", target.Name, twin.Name} {
				if !strings.Contains(e.Message, want) {
					r.t.Fatalf("DuplicateVMUUID Event %q does not name %q", e.Message, want)
				}
			}
			r.t.Logf("Event: %s", e.Message)
		},
		expect: func(r *faultRow) { r.assertTainted(target) },
		recover: func(r *faultRow) {
			nudgeInitialized(r.t, r.env, []*vcsim.VM{target}, 45*time.Second)
			n, err := r.env.Client.CoreV1().Nodes().Get(r.t.Context(), target.Name, metav1.GetOptions{})
			if err != nil {
				r.t.Fatal(err)
			}
			if want := "vsphere://" + target.UUID; n.Spec.ProviderID != want || n.Labels["vsphere-federated-ccm.io/vcenter"] != "vc1" {
				r.t.Fatalf("node %s: providerID %q, vcenter label %q; want %q in vc1", target.Name, n.Spec.ProviderID, n.Labels["vsphere-federated-ccm.io/vcenter"], want)
			}
		},
	}
}

// The kube-apiserver restarts (same address, same etcd): the CCM, with
// leader election and production timings (lease 15s, renew deadline 10s,
// as the DaemonSet's defaults), survives in the same process and
// initializes a Node created after the restart.
//
// The CCM reaches the API through a TCP proxy, which refuses connections
// from just before the stop until the restarted apiserver is ready
// (/readyz), as a load balancer in front of the API does: a fresh
// kube-apiserver serves requests before its RBAC caches are loaded and
// briefly answers 403, which the suite counts as the manifests' RBAC
// refusing the CCM something.
func apiServerRestartRow() faultCase {
	var pid int
	var front *vcsim.Proxy
	return faultCase{
		name: "API server restarts",
		ccm: harness.CCMOptions{LeaderElect: true, Flags: map[string]string{
			"leader-elect-lease-duration": "15s",
			"leader-elect-renew-deadline": "10s",
			"leader-elect-retry-period":   "2s",
		}},
		setup: func(r *faultRow, o *harness.CCMOptions) {
			u, err := url.Parse(r.env.ControlPlane.Config.Host)
			must(r.t, err)
			front, err = vcsim.NewProxy("127.0.0.1", u.Host)
			must(r.t, err)
			r.t.Cleanup(front.Close)
			cfg := rest.CopyConfig(r.env.CCMConfig)
			cfg.Host = "https://" + net.JoinHostPort(front.Host(), strconv.Itoa(front.Port()))
			path := filepath.Join(r.env.Opts.Dir, "ccm-via-front.kubeconfig")
			must(r.t, harness.WriteKubeconfig(path, cfg, "system:serviceaccount:"+harness.Namespace+":"+harness.ServiceAccount))
			for _, f := range []string{"kubeconfig", "authentication-kubeconfig", "authorization-kubeconfig"} {
				o.Flags[f] = path
			}
		},
		inject: func(r *faultRow) func() {
			pid = r.ccm.Pid()
			must(r.t, front.SetMode(vcsim.Refuse))
			down, err := r.env.ControlPlane.RestartAPIServer(2 * time.Second)
			must(r.t, err)
			must(r.t, front.SetMode(vcsim.Pass))
			r.t.Logf("MEASURE kube-apiserver restart: API unavailable to the CCM for %s", down.Round(time.Millisecond))
			return nil
		},
		during: func(r *faultRow) {
			createNodes(r.t, r.env, r.spare[:1])
			nudgeInitialized(r.t, r.env, r.spare[:1], time.Minute)
		},
		expect: func(r *faultRow) {
			sameProcess(r.t, r.ccm, pid)
			if strings.Contains(r.ccm.Log(), "leaderelection lost") {
				r.t.Fatal("the CCM lost its lease over the restart")
			}
		},
		recover: func(r *faultRow) {
			createNodes(r.t, r.env, r.spare[1:2])
			nudgeInitialized(r.t, r.env, r.spare[1:2], 30*time.Second)
			sameProcess(r.t, r.ccm, pid)
		},
	}
}

// checkDeletions is an error naming every deleted Node whose VM exists.
func (r *faultRow) checkDeletions() error {
	return wrongfulDeletions(r.env, r.deletions.Deleted(nil))
}

// loop runs fn(0), fn(1), … every period until the returned stop is
// called (stop waits for the current call).
func (r *faultRow) loop(period time.Duration, fn func(i int)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			fn(i)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// log is every log of every CCM process of the row, oldest first.
func (r *faultRow) log() string { return allLogs(r.env) }

func (r *faultRow) waitLog(re *regexp.Regexp, timeout time.Duration) {
	r.t.Helper()
	if err := wait.PollUntilContextTimeout(r.t.Context(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return re.MatchString(r.log()), nil
	}); err != nil {
		r.t.Fatalf("no match of %s in the CCM log:\n%s", re, r.ccm.Tail(30))
	}
}

func (r *faultRow) assertTainted(vm *vcsim.VM) {
	r.t.Helper()
	n, err := r.env.Client.CoreV1().Nodes().Get(r.t.Context(), vm.Name, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	if !harness.HasTaint(n, harness.UninitializedTaint) || n.Spec.ProviderID != "" {
		r.t.Fatalf("node %s was initialized during the fault (providerID %q)", vm.Name, n.Spec.ProviderID)
	}
}
