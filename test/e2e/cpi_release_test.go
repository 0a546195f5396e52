package e2e

// Drop-in for CPI: a cluster as kubernetes/cloud-provider-vsphere left it —
// its release ConfigMap, its Secret layout, its DaemonSet's flags, Nodes
// with its providerIDs and labels — runs on this CCM with only the image
// changed: nothing deleted, nothing CPI wrote changes, new Nodes come out
// as CPI would have made them.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/cpisamples"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// cpiReleaseArgs are the args of CPI's release DaemonSet (it sets no
// command: the image's entrypoint runs).
var cpiReleaseArgs = []string{"--cloud-provider=vsphere", "--v=2", "--cloud-config=/etc/cloud/vsphere.conf"}

// cpiLabels are the labels CPI's cloud-node controller sets: the ones a
// swap must leave as they are.
var cpiLabels = []string{
	corev1.LabelInstanceTypeStable, corev1.LabelInstanceType,
	corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
}

// CPI's release files (test/cpisamples; the repository does not hold
// them): release-v1.36/vsphere.conf is vsphere.conf of CPI's release
// manifest (releases/v1.36/vsphere-cloud-controller-manager.yaml, ConfigMap
// vsphere-cloud-config), release-v1.36/rbac.yaml its ServiceAccount, roles
// and bindings. The test replaces the config's placeholders the way a user
// does, and adds a port per vCenter (each simulated vCenter listens on its
// own) and the labels section of CPI's docs.
func TestTakeoverFromCPIRelease(t *testing.T) {
	t.Parallel()
	takeoverFromCPIRelease(t, kube{})
}

func takeoverFromCPIRelease(t *testing.T, k kube) {
	release := cpisamples.Path(t, "release-v1.36")
	releaseConfig, err := os.ReadFile(filepath.Join(release, "vsphere.conf"))
	if err != nil {
		t.Fatal(err)
	}
	env := k.env(t, harness.Options{VCenters: 2, Datacenters: 1, MachinesPerPool: 2})
	ctx := t.Context()
	vc1, vc2 := env.Fed.VCenters[0], env.Fed.VCenters[1]
	dc := func(vc *vcsim.VCenter) string { return vmsOf(env, vc.Name, "")[0].Datacenter }
	cfg := strings.NewReplacer(
		"server: 10.0.0.1", fmt.Sprintf("server: %s\n    port: %d", vc1.Host, env.Proxies[vc1.Name].Port()),
		"server: 1.2.3.4", fmt.Sprintf("server: %s\n    port: %d", vc2.Host, env.Proxies[vc2.Name].Port()),
		"      - hrwest\n      - hreast\n", "      - "+dc(vc1)+"\n",
		"      - mytenantdc\n", "      - "+dc(vc2)+"\n",
	).Replace(string(releaseConfig)) + "\n# labels for regions and zones\nlabels:\n  region: k8s-region\n  zone: k8s-zone\n"
	// The file is not ours: a placeholder left, or no inline password for
	// the log check below, means it is not the release file this test reads.
	for _, p := range []string{"10.0.0.1", "1.2.3.4", "hrwest", "hreast", "mytenantdc"} {
		if strings.Contains(cfg, p) {
			t.Fatalf("%s: placeholder %q is still in the config after the replacements:\n%s", release, p, cfg)
		}
	}
	if !strings.Contains(cfg, "password: use-your-vcenter-password-here") {
		t.Fatalf("%s: vsphere.conf has no inline placeholder password:\n%s", release, cfg)
	}
	writeConfig(t, env, cfg)

	// CPI's Secret layout: the global Secret (the harness fills
	// vsphere-cloud-secret with "<server>.username/password" for every
	// vCenter) and the tenant's own.
	secrets := env.Client.CoreV1().Secrets(harness.Namespace)
	if _, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cpi-engineering-secret", Namespace: harness.Namespace},
		StringData: map[string]string{vc2.Host + ".username": vc2.User, vc2.Host + ".password": vc2.Password},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// CPI's ServiceAccount and RBAC, and the one Role a migration adds
	// (manifests/cpi-migration): the CCM runs as CPI's ServiceAccount.
	kubeconfig := runAsCPI(t, env, filepath.Join(release, "rbac.yaml"))

	// The cluster as CPI left it.
	vms := env.Fed.AllVMs()
	exp := expectations(env, vms)
	later := []*vcsim.VM{vmsOf(env, vc1.Name, "")[0], vmsOf(env, vc2.Name, "")[0]} // Nodes that join after the swap
	before := createCPINodes(t, env, slices.DeleteFunc(slices.Clone(vms), func(vm *vcsim.VM) bool { return slices.Contains(later, vm) }), exp)
	deletions := watchDeletions(t, env)

	// The swap: CPI's flags, this image.
	// (A status pass every 20s instead of 5m, so the test sees a second.)
	ccm := startCCM(t, env, "ccm", harness.CCMOptions{Args: cpiReleaseArgs, Flags: map[string]string{
		"node-status-update-frequency": "20s",
		"kubeconfig":                   kubeconfig, "authentication-kubeconfig": kubeconfig, "authorization-kubeconfig": kubeconfig,
	}})
	waitLogMatch(t, ccm, regexp.MustCompile(`Update \d+ nodes status took`), 2*time.Minute)
	createNodes(t, env, later)
	waitInitialized(t, env, names(later), 2*time.Minute)
	waitLogMatch(t, ccm, regexp.MustCompile(`(?s)Update \d+ nodes status took.*Update \d+ nodes status took`), time.Minute)

	// Nothing CPI wrote changed, nothing was deleted; the only additions
	// are this CCM's location labels.
	var problems []string
	for name, old := range before {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		if n.UID != old.UID {
			problems = append(problems, name+": deleted and recreated")
		}
		problems = append(problems, nodeDiff(name, old, n)...)
		for k := range n.Labels {
			if _, ok := old.Labels[k]; !ok && k != labelVCenter && k != labelServer && k != labelDatacenter {
				problems = append(problems, fmt.Sprintf("%s: label %s added", name, k))
			}
		}
	}
	// A Node that joined after the swap is what CPI would have made of it.
	for _, vm := range later {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, harness.NodeName(vm), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		problems = append(problems, nodeDiff(n.Name, cpiNode(vm, exp[n.Name].instanceType), n)...)
	}
	if d := deletions.Deleted(nil); len(d) > 0 {
		problems = append(problems, fmt.Sprintf("Nodes deleted: %v", d))
	}
	if len(problems) > 0 {
		t.Fatalf("after the swap from CPI:\n%s", strings.Join(problems, "\n"))
	}
	// With the migration Role, the record of the vCenters served is kept
	// (without it, no Node would ever be reported deleted).
	if _, err := env.Client.CoreV1().ConfigMaps(harness.Namespace).Get(ctx, stateConfigMap, metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap %s: %v (manifests/cpi-migration must let CPI's ServiceAccount keep it)", stateConfigMap, err)
	}
	// The placeholder user in vc1's section is never what logs in: the
	// global Secret is (CPI's order ends there too), and the placeholder
	// is nowhere in the log.
	if log := ccm.Log(); strings.Contains(log, "use-your-vcenter-password-here") {
		t.Error("the inline password of the config appears in the CCM's log")
	}
	t.Logf("%d CPI Nodes kept unchanged, %d new Nodes initialized as CPI would, with CPI's flags %v", len(before), len(later), cpiReleaseArgs)
}

// nodeDiff lists how got differs from want in what CPI sets: providerID,
// its labels, the addresses (in any order) and the taints.
func nodeDiff(name string, want, got *corev1.Node) []string {
	var p []string
	if got.Spec.ProviderID != want.Spec.ProviderID {
		p = append(p, fmt.Sprintf("%s: providerID %q, want %q", name, got.Spec.ProviderID, want.Spec.ProviderID))
	}
	for _, k := range cpiLabels {
		if got.Labels[k] != want.Labels[k] {
			p = append(p, fmt.Sprintf("%s: label %s=%q, want %q", name, k, got.Labels[k], want.Labels[k]))
		}
	}
	addrs := func(n *corev1.Node) []string {
		var out []string
		for _, a := range n.Status.Addresses {
			out = append(out, string(a.Type)+"="+a.Address)
		}
		slices.Sort(out)
		return out
	}
	if a, b := addrs(got), addrs(want); !slices.Equal(a, b) {
		p = append(p, fmt.Sprintf("%s: addresses %v, want %v", name, a, b))
	}
	if harness.HasTaint(got, harness.UninitializedTaint) {
		p = append(p, name+": still tainted uninitialized")
	}
	return p
}

// runAsCPI applies CPI's release RBAC (rbac: its ServiceAccount
// kube-system/cloud-controller-manager, roles and bindings) and
// manifests/cpi-migration, and returns a kubeconfig with that
// ServiceAccount's token: what the CCM runs with after an image swap.
func runAsCPI(t *testing.T, env *harness.Env, rbac string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	objs, err := harness.ReadObjects(rbac)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := harness.ManifestsDir()
	if err != nil {
		t.Fatal(err)
	}
	migration, err := harness.LoadManifests(filepath.Join(dir, "cpi-migration"))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.ControlPlane.Apply(ctx, append(objs, migration.Objects...)); err != nil {
		t.Fatal(err)
	}
	token, err := env.ControlPlane.ServiceAccountToken(ctx, harness.Namespace, "cloud-controller-manager", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(env.Opts.Dir, "cpi.kubeconfig")
	if err := harness.WriteKubeconfig(path, env.ControlPlane.ServiceAccountConfig(token), "system:serviceaccount:kube-system:cloud-controller-manager"); err != nil {
		t.Fatal(err)
	}
	return path
}
