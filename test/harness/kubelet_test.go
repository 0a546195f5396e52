package harness

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

// Two vm-kubelets register their Nodes as kubelets on vSphere VMs do with
// --cloud-provider=external, and a killed one stops renewing its Lease
// until it is restarted.
func TestKubeletsRegisterAndHeartbeat(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("vm-kubelet runs each kubelet in a network namespace of its own, which needs root")
	}
	dir := t.TempDir()
	cp, err := StartControlPlane(ControlPlaneOptions{Dir: filepath.Join(dir, "cp")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })

	kubelets := []KubeletOptions{{
		Name:       "vm-single",
		SystemUUID: "4215b8e2-1bd6-d1f3-3a8f-7e9b35a2c001",
		NodeIPs:    []string{"10.0.0.5"},
		Labels:     map[string]string{"example.com/pool": "a"},
		Dir:        filepath.Join(dir, "single"),
	}, {
		Name:       "vm-dual",
		SystemUUID: "4215b8e2-1bd6-d1f3-3a8f-7e9b35a2c002",
		NodeIPs:    []string{"10.1.0.10", "fd00::10"},
		// Longer than a unix socket path allows under it: reached through a
		// short link.
		Dir: filepath.Join(dir, strings.Repeat("d", 90)),
	}}
	started := map[string]*Kubelet{}
	for _, o := range kubelets {
		k, err := StartKubelet(cp, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(k.Close)
		started[o.Name] = k
	}
	logs := func() string {
		var b strings.Builder
		for _, k := range started {
			b.WriteString(k.Tail(30))
		}
		return b.String()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	names := []string{"vm-single", "vm-dual"}
	if err := WaitForNodes(ctx, cp.Client, names, 2*time.Minute, "registered with addresses", func(n *corev1.Node) bool {
		return len(n.Status.Addresses) > 0
	}); err != nil {
		t.Fatalf("%v\n%s", err, logs())
	}
	for _, o := range kubelets {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !HasTaint(n, UninitializedTaint) {
			t.Errorf("%s: taints %v, want %s", o.Name, n.Spec.Taints, UninitializedTaint)
		}
		if n.Status.NodeInfo.SystemUUID != o.SystemUUID {
			t.Errorf("%s: systemUUID %q, want %q", o.Name, n.Status.NodeInfo.SystemUUID, o.SystemUUID)
		}
		if n.Spec.ProviderID != "" {
			t.Errorf("%s: providerID %q, want none", o.Name, n.Spec.ProviderID)
		}
		if got, want := n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr], strings.Join(o.NodeIPs, ","); got != want {
			t.Errorf("%s: %s=%q, want %q", o.Name, cloudproviderapi.AnnotationAlphaProvidedIPAddr, got, want)
		}
		// Each node IP as an InternalIP, then the hostname (the kubelet's
		// own addresses until a CCM sets them).
		var want []corev1.NodeAddress
		for _, ip := range o.NodeIPs {
			want = append(want, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
		want = append(want, corev1.NodeAddress{Type: corev1.NodeHostName, Address: o.Name})
		if !slices.Equal(n.Status.Addresses, want) {
			t.Errorf("%s: addresses %v, want %v", o.Name, n.Status.Addresses, want)
		}
		for k, v := range o.Labels {
			if n.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", o.Name, k, n.Labels[k], v)
			}
		}
		if v := n.Status.NodeInfo.KubeletVersion; v != "v1.37.1" {
			t.Errorf("%s: kubeletVersion %q, want v1.37.1", o.Name, v)
		}
	}
	if t.Failed() {
		t.Fatal(logs())
	}

	leases := cp.Client.CoordinationV1().Leases("kube-node-lease")
	renewTime := func(name string) time.Time {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return time.Time{}
		}
		return l.Spec.RenewTime.Time
	}
	// waitRenewed waits for the Lease to be renewed after since.
	waitRenewed := func(name string, since time.Time) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return renewTime(name).After(since), nil
		})
		if err != nil {
			t.Fatalf("lease %s not renewed after %s: %v\n%s", name, since.Format(time.RFC3339Nano), err, logs())
		}
	}
	waitRenewed("vm-single", time.Time{}) // the Lease exists
	var l *coordinationv1.Lease
	if l, err = leases.Get(ctx, "vm-single", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := l.Spec.LeaseDurationSeconds; d == nil || *d != 10 {
		t.Errorf("lease duration %v, want 10s (vm-kubelet's default)", d)
	}
	waitRenewed("vm-single", renewTime("vm-single"))

	k := started["vm-single"]
	node, err := cp.Client.CoreV1().Nodes().Get(ctx, "vm-single", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Kill(); err != nil {
		t.Fatal(err)
	}
	if k.Running() {
		t.Fatal("running after Kill")
	}
	killed := renewTime("vm-single")
	// Four renew intervals (2.5s) with no renewal.
	time.Sleep(10 * time.Second)
	if got := renewTime("vm-single"); !got.Equal(killed) {
		t.Fatalf("lease renewed at %s after the kill (last before: %s)", got.Format(time.RFC3339Nano), killed.Format(time.RFC3339Nano))
	}
	// The other kubelet goes on.
	waitRenewed("vm-dual", time.Now().Add(-time.Second))

	if err := k.Restart(); err != nil {
		t.Fatal(err)
	}
	waitRenewed("vm-single", killed)
	again, err := cp.Client.CoreV1().Nodes().Get(ctx, "vm-single", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.UID != node.UID {
		t.Errorf("node UID %s after the restart, want the same Node %s", again.UID, node.UID)
	}
	if n := strings.Count(readFile(t, k.LogPath()), "==> harness: start "); n != 2 {
		t.Errorf("%d starts in %s, want 2", n, k.LogPath())
	}
	k.Close()
	k.Close()
	if k.Running() {
		t.Error("running after Close")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
