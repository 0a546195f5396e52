package e2e

// Takeover from CPI, then a vCenter removed (issue "Rule 1, proven again",
// D): Nodes initialized by kubernetes/cloud-provider-vsphere carry none of
// this CCM's labels. Once a vCenter leaves the config, its VMs cannot be
// asked for; a NotReady Node of such a VM must not be deleted, neither by
// the process that saw the edit nor by one started later with the edited
// config, which never saw that vCenter. The CCM remembers the vCenters it
// served in a ConfigMap for that (kube-system/vsphere-federated-ccm-state).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// The product's location labels and its memory of the config.
const (
	labelVCenter    = "vsphere-federated-ccm.io/vcenter"
	labelServer     = "vsphere-federated-ccm.io/vcenter-server"
	labelDatacenter = "vsphere-federated-ccm.io/datacenter"
	stateConfigMap  = "vsphere-federated-ccm-state"
)

// labelValueOf is the product's encoding of a vCenter or datacenter name
// as a label value, written out here rather than imported so that the test
// checks it: the name itself when it is a valid label value, else
// "sha256-" and the first 40 hex digits of its SHA-256.
func labelValueOf(name string) string {
	valid := regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
	if len(name) <= 63 && valid.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "sha256-" + hex.EncodeToString(sum[:])[:40]
}

// cpiNode is a Node as CPI leaves it once initialized: providerID
// vsphere://<BIOS UUID, lowercase>, instance type, zone and region labels
// (GA and beta), addresses, no uninitialized taint, no label of ours.
func cpiNode(vm *vcsim.VM, instanceType string) *corev1.Node {
	n := harness.KubeletNode(harness.NodeName(vm), vm.SystemUUID(), true)
	n.Spec.Taints = nil
	n.Spec.ProviderID = "vsphere://" + strings.ToLower(vm.UUID)
	for k, v := range map[string]string{
		corev1.LabelInstanceTypeStable:      instanceType,
		corev1.LabelInstanceType:            instanceType,
		corev1.LabelTopologyZone:            vm.Zone,
		corev1.LabelTopologyRegion:          vm.Region,
		corev1.LabelFailureDomainBetaZone:   vm.Zone,
		corev1.LabelFailureDomainBetaRegion: vm.Region,
	} {
		n.Labels[k] = v
	}
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: vm.IP},
		{Type: corev1.NodeExternalIP, Address: vm.IP},
		{Type: corev1.NodeHostName, Address: vm.HostName},
	}
	return n
}

func TestTakeoverFromCPIThenVCenterRemoved(t *testing.T) {
	t.Parallel()
	takeoverFromCPIThenVCenterRemoved(t, kube{})
}

func takeoverFromCPIThenVCenterRemoved(t *testing.T, k kube) {
	env := k.env(t, harness.Options{VCenters: 3, Datacenters: 1, MachinesPerPool: 2})
	ctx := t.Context()
	// vc2's section gets a name too long for a label value: its Nodes'
	// vcenter label must be the encoded form.
	longName := "vc2-" + strings.Repeat("federated", 7) // 67 characters
	cfg := strings.Replace(env.CloudConfigYAML, "\n  vc2:\n", "\n  "+longName+":\n", 1)
	if cfg == env.CloudConfigYAML {
		t.Fatal("no vc2 section in the harness's config")
	}
	writeConfig(t, env, cfg)
	sectionOf := map[string]string{"vc1": "vc1", "vc2": longName, "vc3": "vc3"}

	vms := env.Fed.AllVMs()
	exp := expectations(env, vms)
	removed := vmsOf(env, "vc3", "")
	relabeled := removed[0] // "the kubelet" names vc1 in its vcenter label
	uids := map[string]types.UID{}
	for name, n := range createCPINodes(t, env, vms, exp) {
		uids[name] = n.UID
	}
	deletions := watchDeletions(t, env)
	noDeletion := func() error {
		if d := deletions.Deleted(nil); len(d) > 0 {
			return fmt.Errorf("Nodes deleted: %v", d)
		}
		return nil
	}

	// Our CCM takes over from CPI and runs its first status pass.
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{})
	waitLogMatch(t, ccm, regexp.MustCompile(`Update \d+ nodes status took`), time.Minute)
	// Backfill: every Node of a configured vCenter gets its location
	// labels; nothing else CPI wrote changes.
	var unlabeled []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		unlabeled = unlabeled[:0]
		for _, vm := range vms {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, harness.NodeName(vm), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			want := map[string]string{labelVCenter: labelValueOf(sectionOf[vm.VCenter]), labelDatacenter: labelValueOf(vm.Datacenter)}
			for k, v := range want {
				if n.Labels[k] != v {
					unlabeled = append(unlabeled, fmt.Sprintf("%s: %s=%q, want %q", n.Name, k, n.Labels[k], v))
				}
			}
			if n.Labels[labelServer] == "" {
				unlabeled = append(unlabeled, fmt.Sprintf("%s: no %s", n.Name, labelServer))
			}
		}
		return len(unlabeled) == 0, nil
	})
	if err != nil {
		t.Errorf("the CCM did not backfill its location labels on the CPI-initialized Nodes within 45s of its first status pass:\n%s", strings.Join(unlabeled, "\n"))
	}
	checkNodes(t, env, exp) // CPI's providerID, labels and addresses kept
	must(t, noDeletion())

	// vc3 leaves the config (applied live); its Nodes go NotReady, their
	// VMs still exist; one of them claims vc1 in its label.
	relabel(t, env, relabeled, "vc1")
	edited := withoutVCenter(cfg, "vc3")
	writeConfig(t, env, edited)
	waitEvent(t, env, harness.Namespace, "Lease", "cloud-controller-manager", "ConfigApplied", 30*time.Second)
	setReady(t, env, removed, false)
	waitAsked(t, ccm, deletions, names(removed), time.Minute)
	observe(t, 5*time.Second, noDeletion)

	// A new process with the edited config: it never served vc3.
	relabel(t, env, relabeled, "vc1") // as the kubelet keeps it
	if err := ccm.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := ccm.WaitHealthy(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	waitAsked(t, ccm, deletions, names(removed), time.Minute)
	observe(t, 5*time.Second, noDeletion)
	for _, vm := range vms {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, harness.NodeName(vm), metav1.GetOptions{})
		if err != nil || n.UID != uids[n.Name] {
			t.Errorf("Node %s is gone or was replaced after the restart: %v", harness.NodeName(vm), err)
		}
	}
	if n, err := env.Client.CoreV1().Nodes().Get(ctx, harness.NodeName(relabeled), metav1.GetOptions{}); err == nil {
		t.Logf("%s's vcenter label after the restart: %q", n.Name, n.Labels[labelVCenter])
	}

	// The CCM's memory of its config names the retired vCenter.
	cm, err := env.Client.CoreV1().ConfigMaps(harness.Namespace).Get(ctx, stateConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		t.Errorf("no ConfigMap %s/%s remembering the vCenters served", harness.Namespace, stateConfigMap)
	case err != nil:
		t.Error(err)
	default:
		var all strings.Builder
		for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
			fmt.Fprintf(&all, "%s: %s\n", k, cm.Data[k])
		}
		if !strings.Contains(all.String(), "vc3") {
			t.Errorf("ConfigMap %s/%s does not name the removed vc3:\n%s", harness.Namespace, stateConfigMap, all.String())
		}
	}
}

// createCPINodes puts the Nodes of vms in the state CPI leaves them in
// (cpiNode) and returns them. With RealNodes, as in a CPI cluster: their
// kubelets register them (tainted uninitialized) and report Ready, then
// what CPI's initialization writes is written over (providerID, labels,
// addresses, the taint removed). Otherwise the Nodes are created so.
func createCPINodes(t *testing.T, env *harness.Env, vms []*vcsim.VM, exp map[string]expectation) map[string]*corev1.Node {
	t.Helper()
	ctx := t.Context()
	out := map[string]*corev1.Node{}
	if !env.Opts.RealNodes {
		for _, vm := range vms {
			n, err := env.Client.CoreV1().Nodes().Create(ctx, cpiNode(vm, exp[harness.NodeName(vm)].instanceType), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out[n.Name] = n
		}
		return out
	}
	createNodes(t, env, vms)
	setReady(t, env, vms, true)
	for _, vm := range vms {
		want := cpiNode(vm, exp[harness.NodeName(vm)].instanceType)
		var n *corev1.Node
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := env.Client.CoreV1().Nodes().Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.ProviderID = want.Spec.ProviderID
			cur.Spec.Taints = slices.DeleteFunc(cur.Spec.Taints, func(t corev1.Taint) bool { return t.Key == harness.UninitializedTaint })
			maps.Copy(cur.Labels, want.Labels)
			if cur, err = env.Client.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return err
			}
			cur.Status.Addresses = want.Status.Addresses
			n, err = env.Client.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("initializing %s as CPI does: %v", want.Name, err)
		}
		out[n.Name] = n
	}
	return out
}

// relabel sets vm's Node's vcenter label to value, as a kubelet with
// --node-labels does.
func relabel(t *testing.T, env *harness.Env, vm *vcsim.VM, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, labelVCenter, value)
	if _, err := env.Client.CoreV1().Nodes().Patch(t.Context(), harness.NodeName(vm), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitAsked waits until the current CCM process's lifecycle controller has
// asked about each of nodes and got an error (it logs "error checking if
// node <name> exists"), failing at once on any deletion: the Nodes are
// kept because the CCM decided so, not because it never looked.
func waitAsked(t *testing.T, ccm *harness.CCMProcess, deletions *deletionWatch, nodes []string, timeout time.Duration) {
	t.Helper()
	var pending []string
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if d := deletions.Deleted(nil); len(d) > 0 {
			return false, fmt.Errorf("Nodes deleted: %v", d)
		}
		log := ccm.Log()
		pending = pending[:0]
		for _, n := range nodes {
			if !strings.Contains(log, "error checking if node "+n+" exists") {
				pending = append(pending, n)
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		t.Fatalf("%s's lifecycle controller: %v (not asked about yet: %v)\n%s", ccm.Name, err, pending, ccm.Tail(30))
	}
	if m := regexp.MustCompile(`error checking if node ` + regexp.QuoteMeta(nodes[0]) + ` exists: .*`).FindString(ccm.Log()); m != "" {
		t.Logf("%s", m)
	}
}
