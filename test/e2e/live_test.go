package e2e

// Live operations (issue 4): config edits and credential rotation applied
// by the running CCM, which is never restarted.

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

func TestAddVCenterByConfigEdit(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 4, Datacenters: 1, MachinesPerPool: 1})
	full := env.CloudConfigYAML
	writeConfig(t, env, withoutVCenter(full, "vc4"))
	known := vmsOf(env, "vc1", "")
	added := vmsOf(env, "vc4", "")
	createNodes(t, env, known)
	createNodes(t, env, added)
	p := startCCM(t, env, "ccm", harness.CCMOptions{})
	pid := p.Pid()
	waitInitialized(t, env, names(known), time.Minute)
	// Not configured yet: its Nodes stay tainted.
	observe(t, 3*time.Second, func() error {
		for _, vm := range added {
			if n, err := env.Client.CoreV1().Nodes().Get(t.Context(), vm.Name, metav1.GetOptions{}); err == nil && harness.Initialized(n) {
				return fmt.Errorf("node %s of unconfigured vc4 was initialized", vm.Name)
			}
		}
		return nil
	})
	edited := writeConfig(t, env, full)
	first := firstInitialized(t, env, names(added), time.Minute)
	t.Logf("MEASURE config edit -> first Node of the new vCenter initialized: %s", first.Sub(edited).Round(time.Millisecond))
	waitInitialized(t, env, names(added), time.Minute)
	checkNodes(t, env, expectations(env, added))
	sameProcess(t, p, pid)
}

func TestAddDatacenterByConfigEdit(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 1, Datacenters: 2, MachinesPerPool: 1})
	full := env.CloudConfigYAML
	writeConfig(t, env, withDatacenters(full, "vc1", "[DC0]"))
	dc0, dc1 := vmsOf(env, "vc1", "DC0"), vmsOf(env, "vc1", "DC1")
	createNodes(t, env, dc0)
	createNodes(t, env, dc1)
	p := startCCM(t, env, "ccm", harness.CCMOptions{})
	pid := p.Pid()
	waitInitialized(t, env, names(dc0), time.Minute)
	edited := writeConfig(t, env, withDatacenters(full, "vc1", "[DC0, DC1]"))
	first := firstInitialized(t, env, names(dc1), time.Minute)
	t.Logf("MEASURE config edit -> first Node of the new datacenter initialized: %s", first.Sub(edited).Round(time.Millisecond))
	waitInitialized(t, env, names(dc1), time.Minute)
	checkNodes(t, env, expectations(env, dc1))
	sameProcess(t, p, pid)
}

// Leaving the config is not the VM being deleted.
func TestRemoveVCenterDeletesNoNode(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 2, Datacenters: 1, MachinesPerPool: 1})
	removed, kept := vmsOf(env, "vc2", ""), vmsOf(env, "vc1", "")
	all := append(append([]*vcsim.VM(nil), removed...), kept...)
	createNodes(t, env, all)
	p := startCCM(t, env, "ccm", harness.CCMOptions{})
	pid := p.Pid()
	waitInitialized(t, env, names(all), time.Minute)
	for _, vm := range removed {
		n, err := env.Client.CoreV1().Nodes().Get(t.Context(), vm.Name, metav1.GetOptions{})
		if err != nil || n.Labels["vsphere-federated-ccm.io/vcenter"] != "vc2" {
			t.Fatalf("node %s lacks its vcenter label: %v %v", vm.Name, n.Labels, err)
		}
	}
	deletions := watchDeletions(t, env)
	setReady(t, env, removed, false)
	writeConfig(t, env, withoutVCenter(env.CloudConfigYAML, "vc2"))
	waitEvent(t, env, "kube-system", "Lease", "cloud-controller-manager", "ConfigApplied", 30*time.Second)
	observe(t, 30*time.Second, func() error {
		if d := deletions.Deleted(nil); len(d) > 0 {
			return fmt.Errorf("nodes deleted after their vCenter left the config: %v", d)
		}
		return nil
	})
	if !logHas(p.Log(), regexp.MustCompile(`vcenter vc2 \(by its label\), which is no longer configured|at server \S+ \(by its label\), which is no longer configured|last seen in vcenter vc2|vcenter vc2 at \S+ \(left the config`)) {
		t.Fatalf("the CCM never said why it kept vc2's Nodes")
	}
	sameProcess(t, p, pid)
}

// Rotation as operators do it: the vCenter accepts the new password, the
// Secret is updated, the old sessions are terminated. Lookups never fail.
func TestRotatePassword(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 2, Datacenters: 1, MachinesPerPool: 2})
	vc := env.Fed.VCenter("vc2")
	vms := vmsOf(env, "vc2", "")
	before, after := vms[:2], vms[2:]
	createNodes(t, env, before)
	p := startCCM(t, env, "ccm", harness.CCMOptions{})
	pid := p.Pid()
	waitInitialized(t, env, names(before), time.Minute)
	deletions := watchDeletions(t, env)
	setReady(t, env, before, false) // the lifecycle controller now asks about them every second

	const next = "rotated-Passw0rd-42"
	vc.SetPassword(next)
	secrets := env.Client.CoreV1().Secrets(harness.Namespace)
	s, err := secrets.Get(t.Context(), harness.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data[credentials.PasswordKey(vc.Host)] = []byte(next)
	updated := time.Now()
	if _, err := secrets.Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, env, harness.Namespace, "Secret", harness.SecretName, "CredentialsRotated", 10*time.Second)
	t.Logf("MEASURE Secret update -> new session in use: %s", time.Since(updated).Round(time.Millisecond))
	if err := vc.TerminateSessions(t.Context()); err != nil {
		t.Fatal(err)
	}
	createNodes(t, env, after)
	waitInitialized(t, env, names(after), 30*time.Second)
	observe(t, 5*time.Second, func() error {
		if d := deletions.Deleted(nil); len(d) > 0 {
			return fmt.Errorf("nodes deleted during rotation: %v", d)
		}
		return nil
	})
	if re := regexp.MustCompile(`vcenter vc2: .*(login as|NotAuthenticated|session lost)`); logHas(p.Log(), re) {
		t.Fatalf("a lookup failed during rotation:\n%s", p.Tail(40))
	}
	if strings.Contains(p.Log(), next) || strings.Contains(p.Log(), vc.Password) {
		t.Fatal("a password reached the CCM's log")
	}
	sameProcess(t, p, pid)
}

func TestInvalidConfigKeepsLastGood(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 2})
	vms := vmsOf(env, "vc1", "")
	createNodes(t, env, vms[:1])
	p := startCCM(t, env, "ccm", harness.CCMOptions{})
	pid := p.Pid()
	waitInitialized(t, env, names(vms[:1]), time.Minute)
	writeConfig(t, env, env.CloudConfigYAML+"  broken:\n    port: seventy\n")
	e := waitEvent(t, env, "kube-system", "Lease", "cloud-controller-manager", "ConfigInvalid", 30*time.Second)
	for _, want := range []string{"vcenter.broken.server: required", "vcenter.broken.port"} {
		if !strings.Contains(e.Message, want) {
			t.Fatalf("ConfigInvalid event %q does not say %q", e.Message, want)
		}
	}
	createNodes(t, env, vms[1:])
	waitInitialized(t, env, names(vms[1:]), 30*time.Second)
	sameProcess(t, p, pid)
}

func TestDeletedSecretKeepsSession(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 2})
	vms := vmsOf(env, "vc1", "")
	createNodes(t, env, vms[:1])
	p := startCCM(t, env, "ccm", harness.CCMOptions{})
	pid := p.Pid()
	waitInitialized(t, env, names(vms[:1]), time.Minute)
	if err := env.Client.CoreV1().Secrets(harness.Namespace).Delete(t.Context(), harness.SecretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e := waitEvent(t, env, harness.Namespace, "Secret", harness.SecretName, "CredentialsFailed", 10*time.Second)
	vc := env.Fed.VCenters[0]
	for _, want := range []string{"vcenter vc1", harness.SecretName} {
		if !strings.Contains(e.Message, want) {
			t.Fatalf("CredentialsFailed event %q does not name %q", e.Message, want)
		}
	}
	if strings.Contains(e.Message, vc.Password) {
		t.Fatal("the event carries the password")
	}
	createNodes(t, env, vms[1:])
	waitInitialized(t, env, names(vms[1:]), 30*time.Second)
	sameProcess(t, p, pid)
}
