package e2e

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// expectation is what the CCM must write on a VM's Node, taken from the
// simulator before the CCM runs.
type expectation struct {
	vm           *vcsim.VM
	instanceType string
}

func expectations(env *harness.Env, vms []*vcsim.VM) map[string]expectation {
	out := map[string]expectation{}
	for _, vm := range vms {
		obj := env.Fed.VCenter(vm.VCenter).Object(vm)
		out[harness.NodeName(vm)] = expectation{
			vm:           vm,
			instanceType: fmt.Sprintf("vsphere-vm.cpu-%d.mem-%dgb.os-ubuntu", obj.Config.Hardware.NumCPU, obj.Config.Hardware.MemoryMB/1024),
		}
	}
	return out
}

// problems lists how n differs from a Node initialized for e.
func (e expectation) problems(n *corev1.Node) []string {
	var p []string
	vm := e.vm
	if want := "vsphere://" + vm.UUID; n.Spec.ProviderID != want {
		p = append(p, fmt.Sprintf("providerID %q, want %q", n.Spec.ProviderID, want))
	}
	if harness.HasTaint(n, harness.UninitializedTaint) {
		p = append(p, "still has the uninitialized taint")
	}
	for label, want := range map[string]string{
		corev1.LabelInstanceTypeStable: e.instanceType,
		corev1.LabelTopologyZone:       vm.Zone,
		corev1.LabelTopologyRegion:     vm.Region,
	} {
		if got := n.Labels[label]; got != want {
			p = append(p, fmt.Sprintf("label %s=%q, want %q", label, got, want))
		}
	}
	var got []string
	for _, a := range n.Status.Addresses {
		got = append(got, string(a.Type)+"="+a.Address)
	}
	want := []string{"Hostname=" + vm.HostName, "InternalIP=" + vm.IP, "ExternalIP=" + vm.IP}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		p = append(p, fmt.Sprintf("addresses %v, want %v", got, want))
	}
	return p
}

// checkNodes waits until every Node of exp is initialized as expected (the
// cloud-node controller removes the taint first and patches the addresses
// right after) and reports what still differs at the deadline.
func checkNodes(t *testing.T, env *harness.Env, exp map[string]expectation) {
	t.Helper()
	var problems []string
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		problems = problems[:0]
		for _, name := range slices.Sorted(maps.Keys(exp)) {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			if p := exp[name].problems(n); len(p) > 0 {
				problems = append(problems, fmt.Sprintf("node %s (vcenter %s datacenter %s): %s", name, exp[name].vm.VCenter, exp[name].vm.Datacenter, strings.Join(p, "; ")))
			}
		}
		return len(problems) == 0, nil
	})
	if err != nil {
		t.Fatalf("%d of %d Nodes not as expected: %v\n%s", len(problems), len(exp), err, strings.Join(problems, "\n"))
	}
}

// Scenario 1: Nodes of every vCenter and datacenter, registered before and
// after the CCM starts, get providerID, addresses, instance type, zone and
// region, and lose the uninitialized taint. The CCM runs from the image.
func TestNodesAcrossFederationAreInitialized(t *testing.T) {
	t.Parallel()
	nodesAcrossFederationAreInitialized(t, kube{})
}

func nodesAcrossFederationAreInitialized(t *testing.T, k kube) {
	env := k.env(t, harness.Options{})
	vms := env.Fed.AllVMs()
	exp := expectations(env, vms)
	seen := map[string]bool{}
	for _, vm := range vms {
		seen[vm.VCenter+"/"+vm.Datacenter] = true
	}
	if len(seen) != 6 {
		t.Fatalf("federation spans %d vCenter/datacenter pairs, want 6", len(seen))
	}
	// Half register before the CCM runs (found by its initial list), half after (by its watch).
	before, after := vms[:len(vms)/2], vms[len(vms)/2:]
	createNodes(t, env, before)
	// As it ships: from the image, when test/all.sh built one.
	startCCM(t, env, "ccm", harness.CCMOptions{Image: imageUnderTest(t)})
	createNodes(t, env, after)
	waitInitialized(t, env, names(vms), 90*time.Second)
	checkNodes(t, env, exp)
}

// Scenario 2: a VM destroyed while its Node is NotReady gets its Node
// deleted; a NotReady Node whose VM exists is kept.
func TestDestroyedVMNodeIsDeleted(t *testing.T) {
	t.Parallel()
	destroyedVMNodeIsDeleted(t, kube{})
}

func destroyedVMNodeIsDeleted(t *testing.T, k kube) {
	env := k.env(t, harness.Options{})
	victim := env.Fed.VCenter("vc2").VMs[5]
	control := env.Fed.VCenter("vc3").VMs[2]
	vms := []*vcsim.VM{victim, control}
	createNodes(t, env, vms)
	startCCM(t, env, "ccm", harness.CCMOptions{})
	waitInitialized(t, env, names(vms), time.Minute)
	deletions := watchDeletions(t, env)

	if err := env.Fed.VCenter(victim.VCenter).Destroy(t.Context(), victim); err != nil {
		t.Fatal(err)
	}
	setReady(t, env, vms, false)
	if err := harness.WaitForNodesGone(t.Context(), env.Client, []string{victim.Name}, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The lifecycle controller looks at every NotReady Node each second:
	// a few more passes must leave the control Node alone.
	observe(t, 4*time.Second, func() error {
		if d := deletions.Deleted([]string{control.Name}); len(d) > 0 {
			return fmt.Errorf("node %s of an existing (powered-on) VM was deleted", control.Name)
		}
		return nil
	})
	n, err := env.Client.CoreV1().Nodes().Get(t.Context(), control.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if harness.HasTaint(n, harness.ShutdownTaint) {
		t.Fatalf("node %s of a powered-on VM got the shutdown taint", control.Name)
	}
}

// Scenario 3: a powered-off VM's NotReady Node gets the shutdown taint (and
// is not deleted); once the VM is back on and the Node Ready, the taint goes.
func TestPoweredOffVMGetsShutdownTaint(t *testing.T) {
	t.Parallel()
	poweredOffVMGetsShutdownTaint(t, kube{})
}

func poweredOffVMGetsShutdownTaint(t *testing.T, k kube) {
	env := k.env(t, harness.Options{})
	victim := env.Fed.VCenter("vc1").VMs[6]
	control := env.Fed.VCenter("vc3").VMs[1]
	vms := []*vcsim.VM{victim, control}
	createNodes(t, env, vms)
	startCCM(t, env, "ccm", harness.CCMOptions{})
	waitInitialized(t, env, names(vms), time.Minute)
	deletions := watchDeletions(t, env)

	vc := env.Fed.VCenter(victim.VCenter)
	if err := vc.PowerOff(t.Context(), victim); err != nil {
		t.Fatal(err)
	}
	setReady(t, env, vms, false)
	hasShutdown := func(n *corev1.Node) bool { return harness.HasTaint(n, harness.ShutdownTaint) }
	if err := harness.WaitForNodes(t.Context(), env.Client, []string{victim.Name}, time.Minute, "tainted shutdown", hasShutdown); err != nil {
		t.Fatal(err)
	}
	observe(t, 4*time.Second, func() error {
		n, err := env.Client.CoreV1().Nodes().Get(t.Context(), control.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if hasShutdown(n) {
			return fmt.Errorf("node %s of a powered-on VM got the shutdown taint", control.Name)
		}
		if d := deletions.Deleted(nil); len(d) > 0 {
			return fmt.Errorf("nodes deleted: %v (a powered-off VM still exists)", d)
		}
		return nil
	})

	if err := vc.PowerOn(t.Context(), victim); err != nil {
		t.Fatal(err)
	}
	setReady(t, env, []*vcsim.VM{victim}, true)
	if err := harness.WaitForNodes(t.Context(), env.Client, []string{victim.Name}, time.Minute, "free of the shutdown taint",
		func(n *corev1.Node) bool { return !hasShutdown(n) }); err != nil {
		t.Fatal(err)
	}
	if d := deletions.Deleted(nil); len(d) > 0 {
		t.Fatalf("nodes deleted: %v", d)
	}
}

// Scenario 4: while a vCenter refuses connections, none of its NotReady
// Nodes is deleted for two minutes, not even one whose VM really is gone
// (its vCenter cannot confirm it), and no Node's labels change, while new
// Nodes of the healthy vCenters keep initializing. When the vCenter is
// back, the Node of the VM that is really gone is deleted and the rest
// stay. Real kubelets register every Node; vc2's are killed for the
// outage (the kube-controller-manager marks them Unknown), the rest run.
func TestVCenterOutageDeletesNoNode(t *testing.T) {
	t.Parallel()
	const window = 2 * time.Minute
	env := newEnv(t, harness.Options{RealNodes: true})
	down := env.Fed.VCenter("vc2")
	vc1, vc3 := env.Fed.VCenter("vc1"), env.Fed.VCenter("vc3")
	// Initial Nodes: every VM of vc2, half of vc1 and vc3. The rest of
	// vc1 and vc3 register during the outage.
	initial := slices.Concat(down.VMs, vc1.VMs[:4], vc3.VMs[:4])
	late := slices.Concat(vc1.VMs[4:], vc3.VMs[4:])
	downLate := down.VMs[7] // registers during the outage: cannot be initialized
	initial = slices.DeleteFunc(initial, func(vm *vcsim.VM) bool { return vm == downLate })
	ghost := down.VMs[3] // destroyed just before the outage
	exp := expectations(env, env.Fed.AllVMs())

	createNodes(t, env, initial)
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{})
	waitInitialized(t, env, names(initial), 90*time.Second)
	checkNodes(t, env, expectations(env, initial))
	deletions := watchDeletions(t, env)
	var outage time.Time
	labelsBefore := map[string]map[string]string{}
	for _, name := range names(initial) {
		n, err := env.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		must(t, err)
		labelsBefore[name] = n.Labels
	}
	relabelled := func() error {
		for name, want := range labelsBefore {
			n, err := env.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				continue // the ghost, once vc2 is back
			}
			if !maps.Equal(n.Labels, want) {
				return fmt.Errorf("node %s relabelled %s into the vc2 outage: %v, was %v", name, time.Since(outage).Round(time.Second), n.Labels, want)
			}
		}
		return nil
	}

	// Destroy the ghost while its Node is Ready (the lifecycle controller
	// ignores Ready Nodes), then take vc2 down and make its Nodes NotReady.
	if err := down.Destroy(t.Context(), ghost); err != nil {
		t.Fatal(err)
	}
	if err := env.Proxies[down.Name].SetMode(vcsim.Refuse); err != nil {
		t.Fatal(err)
	}
	outage = time.Now()
	downNodes := names(slices.DeleteFunc(slices.Clone(down.VMs), func(vm *vcsim.VM) bool { return vm == downLate }))
	setReady(t, env, slices.DeleteFunc(slices.Clone(down.VMs), func(vm *vcsim.VM) bool { return vm == downLate }), false)
	t.Logf("vc2 refuses connections; %d of its Nodes NotReady, among them %s whose VM is destroyed", len(downNodes), ghost.Name)

	// Register the healthy vCenters' new Nodes at three moments of the
	// window, and vc2's late one; watch for deletions all along.
	if len(late) != 8 {
		t.Fatalf("late nodes: %d, want 8", len(late))
	}
	batches := [][]*vcsim.VM{late[:2], late[2:5], late[5:]}
	createNodes(t, env, []*vcsim.VM{downLate})
	sawLookupError := false
	lookupErr := regexp.MustCompile(`error checking if node ` + regexp.QuoteMeta(ghost.Name) + ` exists`)
	for i, batch := range batches {
		createNodes(t, env, batch)
		created := time.Now()
		// Each batch must initialize within 30s, deletions or not.
		if err := harness.WaitForNodes(t.Context(), env.Client, names(batch), 30*time.Second, "initialized", harness.Initialized); err != nil {
			t.Fatalf("batch %d during the vc2 outage: %v", i, err)
		}
		t.Logf("batch %d (%s) initialized %s after registering, %s into the outage", i, strings.Join(names(batch), ", "),
			time.Since(created).Round(time.Millisecond), time.Since(outage).Round(time.Second))
		// Observe until the next third of the window.
		until := outage.Add(window * time.Duration(i+1) / time.Duration(len(batches)))
		observe(t, time.Until(until), func() error {
			if d := deletions.Deleted(nil); len(d) > 0 {
				return fmt.Errorf("nodes deleted %s into the vc2 outage: %v", time.Since(outage).Round(time.Second), d)
			}
			if err := relabelled(); err != nil {
				return err
			}
			if !sawLookupError && logHas(ccm.Log(), lookupErr) {
				sawLookupError = true
			}
			return nil
		})
	}
	// The lifecycle controller did look at vc2's Nodes and got errors: the
	// absence of deletions is not just a controller that never looked.
	if !sawLookupError {
		t.Fatalf("no %q in the CCM log during the outage", lookupErr)
	}
	n, err := env.Client.CoreV1().Nodes().Get(t.Context(), downLate.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !harness.HasTaint(n, harness.UninitializedTaint) {
		t.Fatalf("node %s of the unreachable vc2 lost its uninitialized taint", downLate.Name)
	}
	t.Logf("%s: no Node deleted; healthy vCenters' Nodes initialized; vc2's new Node stays tainted", time.Since(outage).Round(time.Second))

	// Recovery: vc2 answers again, so the ghost is confirmed gone; nothing
	// else is deleted and vc2's late Node initializes.
	if err := env.Proxies[down.Name].SetMode(vcsim.Pass); err != nil {
		t.Fatal(err)
	}
	if err := harness.WaitForNodesGone(t.Context(), env.Client, []string{ghost.Name}, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The cloud-node controller retries a failed Node with exponential
	// backoff (k8s.io/cloud-provider's default rate limiter, up to 1000s)
	// and a live kubelet heartbeats through its Lease, not the Node: what
	// brings vc2's late Node back is the CCM requeueing the Nodes a
	// vCenter refused once it answers again.
	waitInitialized(t, env, []string{downLate.Name}, time.Minute)
	if d := deletions.Deleted(nil); !slices.Equal(d, []string{ghost.Name}) {
		t.Fatalf("deleted %v; want only %s", d, ghost.Name)
	}
	delete(exp, ghost.Name)
	checkNodes(t, env, exp)
}

// Scenario 5: the CCM killed (SIGKILL) while it initializes many Nodes
// resumes after a restart and finishes, every Node complete.
func TestCCMKilledMidwayResumes(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{MachinesPerPool: 3}) // 36 VMs
	vms := env.Fed.AllVMs()
	exp := expectations(env, vms)
	// Slow every vCenter down so that initialization takes a while.
	for _, p := range env.Proxies {
		p.SetDelay(40 * time.Millisecond)
	}
	all := createNodes(t, env, vms)
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{ConcurrentNodeSyncs: 2})
	count := func() (int, error) {
		list, err := env.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		done := 0
		for i := range list.Items {
			if harness.Initialized(&list.Items[i]) {
				done++
			}
		}
		return done, nil
	}
	// Kill it once a few Nodes are done.
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := count()
		return err == nil && n >= 3, nil
	}); err != nil {
		t.Fatalf("no Node initialized: %v", err)
	}
	if err := ccm.Kill(); err != nil {
		t.Fatal(err)
	}
	done, err := count()
	if err != nil {
		t.Fatal(err)
	}
	if done >= len(all) {
		t.Fatalf("all %d Nodes were initialized before the kill: the scenario needs a slower CCM", done)
	}
	t.Logf("killed the CCM with %d of %d Nodes initialized", done, len(all))
	// Nothing moves while it is down.
	observe(t, 2*time.Second, func() error {
		if n, err := count(); err == nil && n != done {
			return fmt.Errorf("%d Nodes initialized while no CCM runs (was %d)", n, done)
		}
		return nil
	})
	if err := ccm.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := ccm.WaitHealthy(t.Context(), time.Minute); err != nil {
		t.Fatal(err)
	}
	waitInitialized(t, env, all, 3*time.Minute)
	checkNodes(t, env, exp)
	// The restarted process did the rest of the work.
	if n := strings.Count(ccm.Log(), "Successfully initialized node"); n < len(all)-done {
		t.Fatalf("the restarted CCM logged %d initializations; %d Nodes were left", n, len(all)-done)
	}
}

// Scenario 6: two replicas with leader election: exactly one holds the Lease
// and runs the controllers; when it is killed the other takes over, and
// Nodes registered after the kill are initialized.
func TestLeaderElectionFailover(t *testing.T) {
	t.Parallel()
	leaderElectionFailover(t, kube{})
}

func leaderElectionFailover(t *testing.T, k kube) {
	env := k.env(t, harness.Options{})
	const lease = "cloud-controller-manager" // the DaemonSet's
	vms := env.Fed.AllVMs()
	first, second := vms[:6], vms[6:12]

	a := startCCM(t, env, "ccm-a", harness.CCMOptions{LeaderElect: true})
	holderA := waitLeaseHolder(t, env, lease, "", time.Minute)
	b := startCCM(t, env, "ccm-b", harness.CCMOptions{LeaderElect: true})
	createNodes(t, env, first)
	waitInitialized(t, env, names(first), time.Minute)

	leader, follower := identify(t, []*harness.CCMProcess{a, b}, holderA)
	if leader != a {
		t.Fatalf("the first replica started is not the one leading")
	}
	// The follower is waiting for the Lease and has started no controller.
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return attempting.MatchString(follower.Log()), nil
	}); err != nil {
		t.Fatalf("%s never tried to acquire the lease:\n%s", follower.Name, follower.Tail(30))
	}
	if acquired.MatchString(follower.Log()) || acting(follower.Log()) {
		t.Fatalf("%s, not the leader, acquired the lease or runs controllers:\n%s", follower.Name, follower.Tail(30))
	}
	if !acquired.MatchString(leader.Log()) || !acting(leader.Log()) {
		t.Fatalf("%s, the leader, logged no lease acquisition or no controller start:\n%s", leader.Name, leader.Tail(30))
	}
	before := getLease(t, env, lease)

	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	holderB := waitLeaseHolder(t, env, lease, holderA, 30*time.Second)
	t.Logf("%s killed; %s took the lease %s later", leader.Name, follower.Name, time.Since(killed).Round(time.Millisecond))
	if l, _ := identify(t, []*harness.CCMProcess{follower}, holderB); l != follower {
		t.Fatalf("new holder %q is not %s", holderB, follower.Name)
	}
	after := getLease(t, env, lease)
	if ptrVal(after.Spec.LeaseTransitions) <= ptrVal(before.Spec.LeaseTransitions) {
		t.Fatalf("leaseTransitions %d → %d", ptrVal(before.Spec.LeaseTransitions), ptrVal(after.Spec.LeaseTransitions))
	}
	createNodes(t, env, second)
	waitInitialized(t, env, names(second), time.Minute)
	if !acquired.MatchString(follower.Log()) || !acting(follower.Log()) {
		t.Fatalf("%s initialized Nodes but logged no lease acquisition or no controller start", follower.Name)
	}
	checkNodes(t, env, expectations(env, slices.Concat(first, second)))
}

var (
	startedController = regexp.MustCompile(`Started "cloud-node(-lifecycle)?(-controller)?"`)
	attempting        = regexp.MustCompile(`(?i)attempting to acquire leader lease`)
	acquired          = regexp.MustCompile(`(?i)successfully acquired lease`)
)

// acting reports whether a CCM log shows controllers started.
func acting(log string) bool { return startedController.MatchString(log) }

func getLease(t *testing.T, env *harness.Env, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := env.Client.CoordinationV1().Leases(harness.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func ptrVal[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// waitLeaseHolder waits until the Lease has a holder other than not.
func waitLeaseHolder(t *testing.T, env *harness.Env, name, not string, timeout time.Duration) string {
	t.Helper()
	var holder string
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := env.Client.CoordinationV1().Leases(harness.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		holder = ptrVal(l.Spec.HolderIdentity)
		return holder != "" && holder != not, nil
	}); err != nil {
		t.Fatalf("lease %s/%s: holder %q after %s (waiting for one other than %q): %v", harness.Namespace, name, holder, timeout, not, err)
	}
	return holder
}

// identify finds, among ps, the process whose identity is holder: the leader
// records a "<identity> became leader" Event, which the CCM also logs.
func identify(t *testing.T, ps []*harness.CCMProcess, holder string) (leader, other *harness.CCMProcess) {
	t.Helper()
	var leaders []*harness.CCMProcess
	re := regexp.MustCompile(regexp.QuoteMeta(holder) + ` became leader`)
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		leaders = leaders[:0]
		for _, p := range ps {
			if re.MatchString(p.Log()) {
				leaders = append(leaders, p)
			}
		}
		return len(leaders) > 0, nil
	}); err != nil || len(leaders) != 1 {
		t.Fatalf("%d processes logged %q becoming leader (want 1): %v", len(leaders), holder, err)
	}
	for _, p := range ps {
		if p != leaders[0] {
			other = p
		}
	}
	return leaders[0], other
}
