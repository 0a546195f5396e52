package e2e

// The Kubernetes versions the README claims: the short scenarios of this
// suite, unchanged, on a real kube-apiserver + etcd of each older minor
// test/provision.sh has builder modules for (test/tools/v<minor>: the
// oldest claimed and one in between; the newest is the rest of the suite's).

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
)

// kube is the control plane a scenario runs on: the suite's (the zero
// value: test/provision.sh's default) or an older minor's.
type kube struct {
	// minor is e.g. "1.33"; "" for the suite's.
	minor string
	// assets holds that minor's kube-apiserver and etcd.
	assets string
}

// env is newEnv on k's control plane. For an older minor it first checks
// that the apiserver is that minor, so a subtest cannot pass on the wrong
// binary.
func (k kube) env(t *testing.T, opts harness.Options) *harness.Env {
	t.Helper()
	opts.AssetsDir = k.assets
	// The suite's own Kubernetes runs real kubelets and a real
	// kube-controller-manager (1.37, as its apiserver); an older minor's
	// apiserver may not serve a newer kubelet, so there the harness plays
	// them.
	opts.RealNodes = k.minor == ""
	env := newEnv(t, opts)
	if k.minor != "" {
		v, err := env.Client.Discovery().ServerVersion()
		if err != nil {
			t.Fatalf("the apiserver's version: %v", err)
		}
		if !strings.HasPrefix(v.GitVersion, "v"+k.minor+".") {
			t.Fatalf("kube-apiserver from %s is %s, want %s.x", k.assets, v.GitVersion, k.minor)
		}
		t.Logf("kube-apiserver %s", v.GitVersion)
	}
	return env
}

// versionScenarios are the short scenarios run on every older minor.
var versionScenarios = []struct {
	name string
	run  func(*testing.T, kube)
}{
	{"NodeInitialization", nodesAcrossFederationAreInitialized},
	{"DestroyedVMNodeIsDeleted", destroyedVMNodeIsDeleted},
	{"ShutdownTaint", poweredOffVMGetsShutdownTaint},
	{"LeaderElection", leaderElectionFailover},
	{"TakeoverFromCPI", takeoverFromCPIThenVCenterRemoved},
	{"TakeoverFromCPIRelease", takeoverFromCPIRelease},
}

// TestKubernetesVersions runs the short scenarios on each older Kubernetes
// minor. E2E_KUBE_VERSIONS (comma-separated minors, or "none") picks some;
// a minor not built yet is built here (minutes: test/all.sh builds them in
// its provisioning step).
func TestKubernetesVersions(t *testing.T) {
	t.Parallel()
	minors, err := harness.KubernetesVersions()
	if err != nil {
		t.Fatal(err)
	}
	if len(minors) == 0 {
		t.Fatal("test/provision.sh --versions lists no older Kubernetes minor (test/tools/v<minor>)")
	}
	if only := os.Getenv("E2E_KUBE_VERSIONS"); only != "" {
		if only == "none" {
			t.Skip("E2E_KUBE_VERSIONS=none")
		}
		want := strings.Split(only, ",")
		for _, m := range want {
			if !slices.Contains(minors, m) {
				t.Fatalf("E2E_KUBE_VERSIONS names %s; test/tools has builders for %v", m, minors)
			}
		}
		minors = slices.DeleteFunc(minors, func(m string) bool { return !slices.Contains(want, m) })
	}
	for _, minor := range minors {
		t.Run(minor, func(t *testing.T) {
			t.Parallel()
			dir, err := harness.ProvisionVersion(minor)
			if err != nil {
				t.Fatal(err)
			}
			k := kube{minor: minor, assets: dir}
			for _, s := range versionScenarios {
				t.Run(s.name, func(t *testing.T) {
					t.Parallel()
					s.run(t, k)
				})
			}
		})
	}
}
