// Command demo shows vsphere-federated-ccm at work: three simulated vCenters
// with two datacenters each, a real local kube-apiserver, etcd and
// kube-controller-manager, real kubelets (the kubelet's own code without
// containers, one per VM, --cloud-provider=external; one with --node-ip on
// its VM's second NIC) and the CCM binary. The kubelets register their
// Nodes; the CCM fills them in, printed live. Then one vCenter goes down and
// its kubelets stop: its Nodes stay, while a Node whose VM was really
// destroyed is deleted and new Nodes in the healthy vCenters keep
// initializing. It ends by itself and stops every process it started. The
// kubelets run in network namespaces of their own, so it runs as root.
//
//	go run ./test/demo
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

func main() {
	// envtest logs through controller-runtime's logger; unset, that library
	// prints a stack trace ("log.SetLogger(...) was never called") after
	// 30 s. The control plane's own output is in its log files.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Printf("\n\033[1m==> "+format+"\033[0m\n", args...)
}

func run(ctx context.Context) error {
	start := time.Now()
	say("Provisioning kube-apiserver, kube-controller-manager and the kubelet v1.37.1 and etcd 3.7.3 (built from the Go module proxy the first time: ~9 min on 2 cores; cached in .cache/bin after)")
	assets, err := provision()
	if err != nil {
		return err
	}
	say("Building the CCM")
	if _, err := harness.BuildCCM(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "vsphere-federated-ccm-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The simulators log through the standard logger (a client hanging up
	// mid-request, as the CCM does when a vCenter's proxy stops): into a
	// file, not among the demo's lines.
	simLog, err := os.Create(filepath.Join(dir, "vcsim.log"))
	if err != nil {
		return err
	}
	defer simLog.Close()
	log.SetOutput(simLog)

	say("Starting a local kube-apiserver + etcd, a kube-controller-manager (node lifecycle) and 3 simulated vCenters × 2 datacenters (zone and region tags)")
	env, err := harness.Start(ctx, harness.Options{
		Dir: dir, AssetsDir: assets, VCenters: 3, Datacenters: 2, MachinesPerPool: 1, RealNodes: true,
		Logf: func(f string, a ...any) { fmt.Printf("    "+f+"\n", a...) },
	})
	if err != nil {
		return err
	}
	defer func() {
		say("Stopping the CCM, the kubelets, the simulated vCenters, the controller-manager and the API server")
		env.Close()
		fmt.Printf("    done; the demo took %s\n", time.Since(start).Round(time.Second))
	}()
	fmt.Printf("    cloud config (%s):\n%s", env.CloudConfig, indent(env.CloudConfigYAML, "      "))

	say("Starting the CCM as the manifests' ServiceAccount")
	ccm, err := env.StartCCM("ccm", harness.CCMOptions{})
	if err != nil {
		return err
	}
	if err := ccm.WaitHealthy(ctx, time.Minute); err != nil {
		return err
	}
	fmt.Printf("    healthy (pid %d); its log: %s\n", ccm.Pid(), strings.Join(ccm.LogPaths(), ", "))

	fed := env.Fed
	var first []*vcsim.VM // one VM per datacenter is kept back for later
	var later []*vcsim.VM
	seen := map[string]bool{}
	for _, vm := range fed.AllVMs() {
		key := vm.VCenter + "/" + vm.Datacenter
		if seen[key] {
			later = append(later, vm)
			continue
		}
		seen[key] = true
		first = append(first, vm)
	}

	// One VM has a second NIC, and its kubelet names that NIC's IP: CPI
	// never initializes such a Node (kubernetes/cloud-provider-vsphere#614).
	twoNICs := first[1]
	const storageIP = "192.0.2.20" // a documentation range: routed nowhere
	fed.VCenter(twoNICs.VCenter).AddGuestNIC(twoNICs, "storage", storageIP)
	say("Starting %d kubelets, one per datacenter, with --cloud-provider=external: they register their Nodes tainted uninitialized", len(first))
	fmt.Printf("    %s's VM has a second NIC (%s) and its kubelet runs with --node-ip=%s\n", twoNICs.Name, storageIP, storageIP)
	fmt.Printf("    a Node is printed once the CCM has filled it in (providerID, labels, addresses)\n")
	table := newTable()
	if _, err := env.StartNode(ctx, twoNICs, harness.KubeletOptions{NodeIPs: []string{storageIP}}); err != nil {
		return err
	}
	if err := env.CreateNodes(ctx, slices.DeleteFunc(slices.Clone(first), func(vm *vcsim.VM) bool { return vm == twoNICs })); err != nil {
		return err
	}
	if err := table.watch(ctx, env, first, 2*time.Minute); err != nil {
		return err
	}

	down := fed.VCenter("vc2")
	var downVMs []*vcsim.VM
	for _, vm := range first {
		if vm.VCenter == down.Name {
			downVMs = append(downVMs, vm)
		}
	}
	gone := first[0] // in vc1
	say("vCenter %s stops answering (connections refused), and VM %s in vCenter %s is destroyed", down.Name, gone.Name, gone.VCenter)
	if err := env.Proxies[down.Name].SetMode(vcsim.Refuse); err != nil {
		return err
	}
	if err := fed.VCenter(gone.VCenter).Destroy(ctx, gone); err != nil {
		return err
	}
	fmt.Printf("    their %d kubelets stop (killed); the kube-controller-manager marks their Nodes Unknown\n", len(downVMs)+1)
	fmt.Printf("    once they miss their heartbeats (grace period 12 s here, 50 s in a default cluster)\n")
	stopped := time.Now()
	if err := env.SetNodesReady(ctx, append(slices.Clone(downVMs), gone), false); err != nil {
		return err
	}
	fmt.Printf("    Unknown %s after the kill\n", time.Since(stopped).Round(time.Second))
	var fresh []*vcsim.VM
	for _, vm := range later {
		if vm.VCenter != down.Name && len(fresh) < 2 {
			fresh = append(fresh, vm)
		}
	}
	say("And %d new kubelets register their Nodes in the healthy vCenters", len(fresh))
	if err := env.CreateNodes(ctx, fresh); err != nil {
		return err
	}
	if err := table.watch(ctx, env, fresh, time.Minute); err != nil {
		return err
	}

	say("Watching for 20 s while %s is down (the CCM checks NotReady Nodes every second)", down.Name)
	fmt.Printf("    Nothing may be deleted: a VM is gone only when every vCenter that could hold it answered that\n")
	fmt.Printf("    it is not there, and %s, which could hold %s (a VM can move between vCenters), cannot answer.\n", down.Name, gone.Name)
	if _, err := observe(ctx, env, downVMs, gone, 20*time.Second, false); err != nil {
		return err
	}

	say("vCenter %s answers again", down.Name)
	if err := env.Proxies[down.Name].SetMode(vcsim.Pass); err != nil {
		return err
	}
	fmt.Printf("    Now every vCenter can answer: the destroyed VM's Node goes, %s's Nodes stay (their VMs exist).\n", down.Name)
	deleted, err := observe(ctx, env, downVMs, gone, 30*time.Second, true)
	if err != nil {
		return err
	}
	if !deleted {
		return fmt.Errorf("the Node of destroyed VM %s was not deleted", gone.Name)
	}
	fmt.Printf("\n    While %s was down the CCM logged %d errors naming it: retried, never a deletion.\n", down.Name, strings.Count(ccm.Log(), "vcenter "+down.Name))
	return nil
}

// observe reports every 5 s how many of kept's Nodes exist and whether
// gone's Node does; it fails as soon as a Node of kept disappears. With
// untilGone it returns once gone's Node is deleted.
func observe(ctx context.Context, env *harness.Env, kept []*vcsim.VM, gone *vcsim.VM, d time.Duration, untilGone bool) (bool, error) {
	t0 := time.Now()
	for tick := 0; ; tick++ {
		present := 0
		for _, vm := range kept {
			if _, err := env.Client.CoreV1().Nodes().Get(ctx, vm.Name, metav1.GetOptions{}); err == nil {
				present++
			}
		}
		_, err := env.Client.CoreV1().Nodes().Get(ctx, gone.Name, metav1.GetOptions{})
		deleted := apierrors.IsNotFound(err)
		state := "kept"
		if deleted {
			state = "deleted"
		}
		if tick%10 == 0 || (deleted && untilGone) {
			fmt.Printf("    t+%-5s Nodes of %s: %d/%d kept;  Node %s of the destroyed VM: %s\n",
				time.Since(t0).Round(time.Second), kept[0].VCenter, present, len(kept), gone.Name, state)
		}
		switch {
		case present != len(kept):
			return deleted, fmt.Errorf("a Node of %s was deleted", kept[0].VCenter)
		case deleted && !untilGone:
			return deleted, fmt.Errorf("node %s was deleted while a vCenter could not answer", gone.Name)
		case deleted && untilGone, time.Since(t0) > d:
			return deleted, nil
		}
		select {
		case <-ctx.Done():
			return deleted, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// provision runs test/provision.sh with its progress on the terminal.
func provision() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return harness.Provision()
	}
	root, err := harness.RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "test", "provision.sh"))
	cmd.Dir, cmd.Stderr = root, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("test/provision.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// table prints one row per Node as the CCM initializes it.
type table struct {
	w       *tabwriter.Writer
	printed map[string]bool
	header  bool
}

func newTable() *table {
	return &table{w: tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0), printed: map[string]bool{}}
}

func (t *table) watch(ctx context.Context, env *harness.Env, vms []*vcsim.VM, timeout time.Duration) error {
	if !t.header {
		fmt.Fprintln(t.w, "    AFTER\tNODE\tVCENTER/DATACENTER\tPROVIDER-ID\tINSTANCE-TYPE\tZONE\tREGION\tINTERNAL-IP")
		t.w.Flush()
		t.header = true
	}
	start := time.Now()
	for {
		done := 0
		for _, vm := range vms {
			if t.printed[vm.Name] {
				done++
				continue
			}
			n, err := env.Client.CoreV1().Nodes().Get(ctx, vm.Name, metav1.GetOptions{})
			if err != nil || !whole(n) {
				continue
			}
			t.printed[vm.Name] = true
			done++
			fmt.Fprintf(t.w, "    %s\t%s\t%s/%s\t%s\t%s\t%s\t%s\t%s\n", time.Since(start).Round(10*time.Millisecond), n.Name,
				vm.VCenter, vm.Datacenter, n.Spec.ProviderID, n.Labels[corev1.LabelInstanceTypeStable],
				n.Labels[corev1.LabelTopologyZone], n.Labels[corev1.LabelTopologyRegion], address(n, corev1.NodeInternalIP))
			t.w.Flush()
		}
		if done == len(vms) {
			return nil
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("%d of %d Nodes initialized within %s", done, len(vms), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// whole reports whether the CCM is done with n: the cloud-node controller
// removes the uninitialized taint and sets the providerID first, and
// writes the addresses in a second update.
func whole(n *corev1.Node) bool {
	return harness.Initialized(n) && address(n, corev1.NodeInternalIP) != "" && n.Labels[corev1.LabelTopologyZone] != ""
}

func address(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return ""
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}
