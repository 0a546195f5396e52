package e2e

// `vsphere-federated-ccm validate` against the simulated federation and a
// real API server holding the logins' Secret: a passing config, then each
// failure an operator meets, with its exit code and its reason.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

type validateRun struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// runValidate runs the built binary's validate command with the
// ServiceAccount's kubeconfig (the Secret is read as the CCM reads it).
func runValidate(t *testing.T, env *harness.Env, stdin string, args ...string) validateRun {
	t.Helper()
	bin, err := harness.BuildCCM()
	must(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"validate", "--kubeconfig", env.CCMKubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	r := validateRun{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("validate: %v\n%s", err, stderr.String())
	}
	for _, vc := range env.Fed.VCenters {
		if strings.Contains(r.stdout+r.stderr, vc.Password) {
			t.Fatalf("validate printed %s's password:\n%s%s", vc.Name, r.stdout, r.stderr)
		}
	}
	return r
}

// row finds the table row of vCenter vc's check; "" when absent.
func (r validateRun) row(vc, check string) string {
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == vc && strings.HasPrefix(strings.Join(f[1:], " "), check+" ") {
			return line
		}
	}
	return ""
}

func (r validateRun) expect(t *testing.T, code int, rows map[[2]string]string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\n%s%s", r.code, code, r.stdout, r.stderr)
	}
	for key, want := range rows {
		if row := r.row(key[0], key[1]); !strings.Contains(row, want) {
			t.Fatalf("row %s %s = %q, want it to contain %q\n%s", key[0], key[1], row, want, r.stdout)
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	must(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestValidate(t *testing.T) {
	t.Parallel()
	env := newEnv(t, harness.Options{VCenters: 2, Datacenters: 2, MachinesPerPool: 1})
	good := env.CloudConfigYAML
	vc1, vc2 := env.Fed.VCenters[0], env.Fed.VCenters[1]

	t.Run("passing", func(t *testing.T) {
		r := runValidate(t, env, "", "--cloud-config", env.CloudConfig)
		rows := map[[2]string]string{}
		for _, vc := range env.Fed.VCenters {
			for _, c := range []string{"tcp", "tls", "login", "datacenters", "tag categories", "privileges", "vms", "latency"} {
				rows[[2]string{vc.Name, c}] = "✓"
			}
			rows[[2]string{vc.Name, "login"}] = "credentials from secret kube-system/" + harness.SecretName
		}
		r.expect(t, 0, rows)
		t.Logf("passing config (%s):\n%s", r.took.Round(time.Millisecond), r.stdout)
	})

	t.Run("edit piped from a ConfigMap", func(t *testing.T) {
		// The operator's edit, stored as a ConfigMap and read back as
		// `kubectl get cm -o jsonpath='{.data.vsphere\.conf}'` would.
		edit := withDatacenters(good, vc1.Name, "[DC1]")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vsphere-cloud-config-edit", Namespace: harness.Namespace},
			Data: map[string]string{"vsphere.conf": edit}}
		_, err := env.Client.CoreV1().ConfigMaps(harness.Namespace).Create(t.Context(), cm, metav1.CreateOptions{})
		must(t, err)
		got, err := env.Client.CoreV1().ConfigMaps(harness.Namespace).Get(t.Context(), cm.Name, metav1.GetOptions{})
		must(t, err)
		r := runValidate(t, env, got.Data["vsphere.conf"], "--cloud-config", "-")
		r.expect(t, 0, map[[2]string]string{{vc1.Name, "datacenters"}: "DC1 found"})
	})

	t.Run("unknown key, offline and strict", func(t *testing.T) {
		path := writeFile(t, env.Opts.Dir, "typo.yaml", strings.Replace(good, "labels:\n", "labels:\n  zones: k8s-zone\n", 1))
		r := runValidate(t, env, "", "--cloud-config", path, "--offline")
		r.expect(t, 0, map[[2]string]string{{"-", "config"}: "✓"})
		if !strings.Contains(r.stdout, "labels.zones: unknown key") {
			t.Fatalf("the unknown key is not listed:\n%s", r.stdout)
		}
		if r.row(vc1.Name, "tcp") != "" {
			t.Fatalf("--offline contacted a vCenter:\n%s", r.stdout)
		}
		r = runValidate(t, env, "", "--cloud-config", path, "--offline", "--strict")
		r.expect(t, 1, map[[2]string]string{{"-", "config"}: "--strict: labels.zones: unknown key (line"})
	})

	t.Run("invalid config", func(t *testing.T) {
		path := writeFile(t, env.Opts.Dir, "invalid.yaml", strings.Replace(good, "    insecureFlag: true\n", "    insecureFlag: maybe\n", 1))
		r := runValidate(t, env, "", "--cloud-config", path)
		r.expect(t, 1, map[[2]string]string{{"-", "config"}: "✗"})
		if !strings.Contains(r.stdout, "insecureFlag") || !strings.Contains(r.stdout, "line") {
			t.Fatalf("the problem is not named by path and line:\n%s", r.stdout)
		}
	})

	t.Run("wrong password", func(t *testing.T) {
		must(t, env.SetSecretPassword(t.Context(), vc2.Host, "not-the-password"))
		defer func() { must(t, env.SetSecretPassword(context.Background(), vc2.Host, vc2.Password)) }()
		r := runValidate(t, env, "", "--cloud-config", env.CloudConfig)
		r.expect(t, 1, map[[2]string]string{
			{vc2.Name, "login"}:       "✗",
			{vc2.Name, "datacenters"}: "not run",
			{vc1.Name, "login"}:       "✓",
		})
		if strings.Contains(r.stdout, "not-the-password") {
			t.Fatalf("the wrong password is printed:\n%s", r.stdout)
		}
	})

	t.Run("missing datacenter", func(t *testing.T) {
		path := writeFile(t, env.Opts.Dir, "dc.yaml", withDatacenters(good, vc1.Name, "[DC0, dc-1]"))
		r := runValidate(t, env, "", "--cloud-config", path)
		r.expect(t, 1, map[[2]string]string{{vc1.Name, "datacenters"}: `"dc-1" not found; nearest: "DC1"`})
	})

	t.Run("missing tag category", func(t *testing.T) {
		path := writeFile(t, env.Opts.Dir, "cat.yaml", strings.Replace(good, "zone: k8s-zone", "zone: k8s-zones", 1))
		r := runValidate(t, env, "", "--cloud-config", path)
		r.expect(t, 1, map[[2]string]string{{vc1.Name, "tag categories"}: `category "k8s-zones" not found; nearest: "k8s-zone"`})
		t.Logf("missing tag category:\n%s", r.stdout)
	})

	t.Run("wrong thumbprint", func(t *testing.T) {
		wrong := strings.Repeat("AB:", 19) + "AB"
		section := "  " + vc1.Name + ":\n"
		edit := strings.Replace(good, section, section+"    thumbprint: \""+wrong+"\"\n", 1)
		path := writeFile(t, env.Opts.Dir, "thumb.yaml", edit)
		r := runValidate(t, env, "", "--cloud-config", path)
		r.expect(t, 1, map[[2]string]string{{vc1.Name, "tls"}: "SHA-1 thumbprint "})
		t.Logf("wrong thumbprint:\n%s", r.stdout)
	})

	t.Run("unreachable", func(t *testing.T) {
		p := env.Proxies[vc2.Name]
		must(t, p.SetMode(vcsim.Refuse))
		defer func() { must(t, p.SetMode(vcsim.Pass)) }()
		r := runValidate(t, env, "", "--cloud-config", env.CloudConfig)
		r.expect(t, 1, map[[2]string]string{{vc2.Name, "tcp"}: "connection refused", {vc1.Name, "latency"}: "✓"})

		must(t, p.SetMode(vcsim.Blackhole))
		const deadline = 3 * time.Second
		r = runValidate(t, env, "", "--cloud-config", env.CloudConfig, "--timeout", deadline.String())
		r.expect(t, 1, map[[2]string]string{{vc2.Name, "tls"}: "got no answer", {vc1.Name, "latency"}: "✓"})
		// The whole run, process start included, within a small multiple
		// of the deadline: nothing waits on the black hole beyond it.
		if r.took > 4*deadline {
			t.Fatalf("black-holed vCenter: validate took %s with --timeout %s", r.took, deadline)
		}
		t.Logf("black-holed vCenter: validate returned in %s (--timeout %s)", r.took.Round(time.Millisecond), deadline)
	})
}
