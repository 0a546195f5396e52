package e2e

// Scenarios about a Node's life with the parts a cluster has: real kubelets
// (the kubelet's own code, test/tools/vm-kubelet) and a real
// kube-controller-manager whose node-lifecycle controller decides when a
// Node is Unknown. Nothing here edits a Node's conditions or addresses: a
// kubelet stops by being killed.

import (
	"context"
	"fmt"
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

// addressSet is a Node's addresses as sorted "Type=Address" strings.
func addressSet(n *corev1.Node) []string {
	var out []string
	for _, a := range n.Status.Addresses {
		out = append(out, string(a.Type)+"="+a.Address)
	}
	slices.Sort(out)
	return out
}

func sorted(ss ...string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return out
}

// TestKubeletNodeIP: kubelets started with --node-ip on a VM's first NIC,
// on its second NIC (CPI #614: CPI never initializes that Node), with a
// dual-stack pair, and with an IP the VM does not have, next to one
// without --node-ip. The cloud-node controller initializes a Node only
// when every IP its kubelet provided is among the addresses the CCM
// returned; the one whose IP is not on its VM stays tainted and an Event
// on it names the IP.
func TestKubeletNodeIP(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{RealNodes: true, VCenters: 2, Datacenters: 1, MachinesPerPool: 2})
	vms := env.Fed.AllVMs()
	plain, first, second, dual, missing := vms[0], vms[1], vms[2], vms[5], vms[6]
	// Documentation ranges: addresses no network here routes.
	const secondIP, dualV6, absentIP = "192.0.2.20", "2001:db8::30", "192.0.2.99"
	env.Fed.VCenter(second.VCenter).AddGuestNIC(second, "storage", secondIP)
	env.Fed.VCenter(dual.VCenter).AddGuestNIC(dual, "pods-v6", dualV6)

	ccm := startCCM(t, env, "ccm", harness.CCMOptions{})
	for vm, ips := range map[*vcsim.VM][]string{
		plain: nil, first: {first.IP}, second: {secondIP}, dual: {dual.IP, dualV6}, missing: {absentIP},
	} {
		if _, err := env.StartNode(t.Context(), vm, harness.KubeletOptions{NodeIPs: ips}); err != nil {
			t.Fatal(err)
		}
	}
	joined := []*vcsim.VM{plain, first, second, dual}
	waitInitialized(t, env, names(joined), 90*time.Second)

	exp := expectations(env, joined)
	want := map[string][]string{
		plain.Name:  sorted("Hostname="+plain.HostName, "InternalIP="+plain.IP, "ExternalIP="+plain.IP),
		first.Name:  sorted("Hostname="+first.HostName, "InternalIP="+first.IP, "ExternalIP="+first.IP),
		second.Name: sorted("Hostname="+second.HostName, "InternalIP="+secondIP, "ExternalIP="+second.IP),
		dual.Name:   sorted("Hostname="+dual.HostName, "InternalIP="+dual.IP, "ExternalIP="+dual.IP, "InternalIP="+dualV6),
	}
	// The cloud-node controller removes the taint, then patches the
	// addresses: poll for both.
	var problems []string
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		problems = problems[:0]
		for _, vm := range joined {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, vm.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if got := addressSet(n); !slices.Equal(got, want[vm.Name]) {
				problems = append(problems, fmt.Sprintf("%s: addresses %v, want %v", vm.Name, got, want[vm.Name]))
			}
			// Everything but the addresses is what CPI writes.
			for _, p := range exp[vm.Name].problems(n) {
				if !strings.HasPrefix(p, "addresses ") {
					problems = append(problems, vm.Name+": "+p)
				}
			}
		}
		return len(problems) == 0, nil
	})
	if err != nil {
		t.Fatalf("Nodes with --node-ip not as expected:\n%s", strings.Join(problems, "\n"))
	}
	// The provided IP is the InternalIP the library lists first.
	n, err := env.Client.CoreV1().Nodes().Get(t.Context(), second.Name, metav1.GetOptions{})
	must(t, err)
	if a := n.Status.Addresses[0]; a.Type != corev1.NodeInternalIP || a.Address != secondIP {
		t.Errorf("%s: first address %s=%s, want InternalIP=%s (its kubelet's --node-ip)", second.Name, a.Type, a.Address, secondIP)
	}

	// The kubelet whose IP is not on its VM: an Event names the IP and the
	// VM's; the Node keeps its taint and gets no providerID.
	ev := waitEventMentioning(t, env, missing.Name, absentIP, time.Minute)
	if !strings.Contains(ev.Message, missing.IP) {
		t.Errorf("Event %s on %s names %s but not the VM's IP %s: %s", ev.Reason, missing.Name, absentIP, missing.IP, ev.Message)
	}
	observe(t, 5*time.Second, func() error {
		n, err := env.Client.CoreV1().Nodes().Get(t.Context(), missing.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if harness.Initialized(n) || n.Spec.ProviderID != "" {
			return fmt.Errorf("%s was initialized though its kubelet's --node-ip %s is not on its VM", missing.Name, absentIP)
		}
		return nil
	})
	// One Event object, counted, not one per retry.
	var about []corev1.Event
	for _, e := range events(t, env, "", "Node", missing.Name) {
		if e.Source.Component != "node-controller" && strings.Contains(e.Message, absentIP) {
			about = append(about, e)
		}
	}
	if len(about) != 1 {
		t.Errorf("%d Events about %s's IP %s, want one (counted): %v", len(about), missing.Name, absentIP, about)
	}
	t.Logf("Node %s held back: %s %q (count %d)", missing.Name, ev.Reason, ev.Message, ev.Count)
	_ = ccm
}

// waitEventMentioning waits for an Event on Node name whose message
// contains sub.
func waitEventMentioning(t *testing.T, env *harness.Env, name, sub string, timeout time.Duration) corev1.Event {
	t.Helper()
	var found corev1.Event
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, e := range events(t, env, "", "Node", name) {
			if strings.Contains(e.Message, sub) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Event on Node %s mentioning %s within %s: %v", name, sub, timeout, events(t, env, "", "Node", name))
	}
	return found
}

// TestKubeletLifecycle: 20 kubelets join a running CCM (the time from each
// registration to its Node initialized is reported); then a kubelet
// killed while its VM runs leaves its Node Unknown and tainted
// unreachable but never deleted; a kubelet killed whose VM is then
// destroyed gets its Node deleted (the time from the kill is reported); a
// kubelet restarted changes nothing.
func TestKubeletLifecycle(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{RealNodes: true, VCenters: 2, Datacenters: 1, MachinesPerPool: 5})
	vms := env.Fed.AllVMs()
	if len(vms) != 20 {
		t.Fatalf("%d VMs, want 20", len(vms))
	}
	startCCM(t, env, "ccm", harness.CCMOptions{})
	watch, err := watchInitialization(t.Context(), env)
	must(t, err)
	defer watch.stop()
	createNodes(t, env, vms)
	waitInitialized(t, env, names(vms), 2*time.Minute)
	checkNodes(t, env, expectations(env, vms))
	var joins []time.Duration
	for _, name := range names(vms) {
		joins = append(joins, watch.joinTime(name))
	}
	slices.Sort(joins)
	t.Logf("registration → initialized over %d real kubelets: median %s, max %s", len(joins),
		joins[len(joins)/2].Round(time.Millisecond), joins[len(joins)-1].Round(time.Millisecond))
	deletions := watchDeletions(t, env)

	live, gone, restarted := vms[3], vms[12], vms[17]
	before, err := env.Client.CoreV1().Nodes().Get(t.Context(), restarted.Name, metav1.GetOptions{})
	must(t, err)

	// Killed while the VM runs, and killed with the VM destroyed.
	must(t, env.Kubelet(live).Kill())
	must(t, env.Kubelet(gone).Kill())
	killed := time.Now()
	must(t, env.Fed.VCenter(gone.VCenter).Destroy(t.Context(), gone))
	if err := harness.WaitForNodesGone(t.Context(), env.Client, []string{gone.Name}, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubelet killed and VM destroyed → Node deleted in %s (node-monitor-grace-period %s)",
		time.Since(killed).Round(time.Millisecond), "12s")
	unreachable := func(n *corev1.Node) bool {
		return !harness.Ready(n) && harness.HasTaint(n, corev1.TaintNodeUnreachable)
	}
	must(t, harness.WaitForNodes(t.Context(), env.Client, []string{live.Name}, time.Minute, "Unknown and tainted unreachable", unreachable))

	// Restarted: same Node, nothing of the CCM's changes.
	must(t, env.Kubelet(restarted).Restart())
	leaseAfterRestart(t, env, restarted.Name, time.Now())

	// Well past the lifecycle controller's period (1s) and the CCM's
	// answers to it: the live VM's Node stays.
	observe(t, 30*time.Second, func() error {
		if d := deletions.Deleted(nil); !slices.Equal(d, []string{gone.Name}) {
			return fmt.Errorf("deleted %v, want only %s (the Node of a running VM whose kubelet is dead must stay)", d, gone.Name)
		}
		return nil
	})
	n, err := env.Client.CoreV1().Nodes().Get(t.Context(), live.Name, metav1.GetOptions{})
	must(t, err)
	if harness.HasTaint(n, harness.ShutdownTaint) {
		t.Errorf("%s: the Node of a powered-on VM got the shutdown taint", live.Name)
	}
	after, err := env.Client.CoreV1().Nodes().Get(t.Context(), restarted.Name, metav1.GetOptions{})
	must(t, err)
	if after.UID != before.UID || after.Spec.ProviderID != before.Spec.ProviderID || !harness.Ready(after) ||
		harness.HasTaint(after, harness.UninitializedTaint) || !slices.Equal(addressSet(after), addressSet(before)) {
		t.Errorf("%s after its kubelet restarted: uid %s providerID %q ready %v taints %v addresses %v; before: uid %s providerID %q addresses %v",
			restarted.Name, after.UID, after.Spec.ProviderID, harness.Ready(after), after.Spec.Taints, addressSet(after),
			before.UID, before.Spec.ProviderID, addressSet(before))
	}
	for k, v := range before.Labels {
		if after.Labels[k] != v {
			t.Errorf("%s: label %s %q → %q after its kubelet restarted", restarted.Name, k, v, after.Labels[k])
		}
	}
}

// leaseAfterRestart waits until the Node's Lease is renewed after since:
// the restarted kubelet is heartbeating.
func leaseAfterRestart(t *testing.T, env *harness.Env, name string, since time.Time) {
	t.Helper()
	var l *coordinationv1.Lease
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		l, err = env.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(since), nil
	})
	if err != nil {
		t.Fatalf("the Lease of %s was not renewed after its kubelet restarted: %v", name, l)
	}
}
