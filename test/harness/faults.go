package harness

// Helpers for fault and chaos scenarios: restarting the kube-apiserver in
// place, scraping the CCM's /metrics, and rotating a password in the Secret.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// RestartAPIServer restarts kube-apiserver as a control-plane node's
// kubelet restarts its static Pod: SIGTERM, up to grace for a graceful exit,
// then SIGKILL; then it starts it again with the same arguments, on the
// same address and port, against the same etcd (which keeps running). The
// certificate directory is the control plane's own (not a temporary one),
// so envtest reuses the serving certificate, the client CA and the service
// account signing key: every client and every token keeps working. It
// returns once /readyz answers, with how long the API was unavailable.
//
// envtest's own APIServer.Stop waits its stop timeout (10s here) before it
// kills, and with clients watching, kube-apiserver's graceful shutdown
// waits up to 60s for their watches to end: too long for a restart that a
// leader-elected CCM (renew deadline 10s) is expected to ride out.
func (cp *ControlPlane) RestartAPIServer(grace time.Duration) (time.Duration, error) {
	api := cp.Env.ControlPlane.GetAPIServer()
	pid, err := apiserverPID(api.SecureServing.Port)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if !waitExit(pid, grace) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if !waitExit(pid, 30*time.Second) {
			return time.Since(start), fmt.Errorf("harness: kube-apiserver (pid %d) survived SIGKILL for 30s", pid)
		}
	}
	// envtest reaps its child and records the exit just after; until it
	// has, its Stop would signal a finished process and fail.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := api.Stop()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return time.Since(start), fmt.Errorf("harness: envtest did not see kube-apiserver exit: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := api.Start(); err != nil {
		return time.Since(start), fmt.Errorf("harness: starting kube-apiserver again on %s (log in %s): %w", cp.Config.Host, cp.dir, err)
	}
	// envtest waits for /healthz; /readyz also waits for the informers
	// (RBAC among them) to sync. Until then a request may be refused.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var last error
	for {
		if _, last = cp.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); last == nil {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("harness: kube-apiserver not ready a minute after its restart: %w", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// apiserverPID finds the kube-apiserver process serving on port (envtest
// keeps its process to itself). The death-signal wrapper execs, so the
// process is kube-apiserver itself.
func apiserverPID(port string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("harness: finding kube-apiserver: %w", err)
	}
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == "kube-apiserver" && slices.Contains(args, "--secure-port="+port) {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("harness: %d kube-apiserver processes serve port %s: %v", len(found), port, found)
	}
	return found[0], nil
}

// waitExit polls until pid is gone (or a zombie awaiting its parent's
// wait), up to timeout.
func waitExit(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			// The state follows the command name in parentheses.
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && bytes.HasPrefix(stat[i+1:], []byte(" Z")) {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Sample is one sample of the Prometheus text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples are the samples of one scrape.
type Samples []Sample

// ParseMetrics reads the Prometheus text exposition format (comments
// skipped). Lines it cannot read are returned as an error.
func ParseMetrics(text string) (Samples, error) {
	var out Samples
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSample(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("harness: metrics line %q: no value", line)
	}
	s.Name = line[:i]
	rest := line[i:]
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return s, fmt.Errorf("harness: metrics line %q: bad labels", line)
			}
			name := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			for {
				if rest == "" {
					return s, fmt.Errorf("harness: metrics line %q: unterminated label value", line)
				}
				c := rest[0]
				rest = rest[1:]
				if c == '\\' && rest != "" {
					switch rest[0] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[0])
					}
					rest = rest[1:]
					continue
				}
				if c == '"' {
					break
				}
				val.WriteByte(c)
			}
			s.Labels[name] = val.String()
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, fmt.Errorf("harness: metrics line %q: no value", line)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("harness: metrics line %q: %w", line, err)
	}
	s.Value = v
	return s, nil
}

// Find returns the samples named name whose labels include every pair of
// labels (given as name, value, name, value, …).
func (ss Samples) Find(name string, labels ...string) Samples {
	var out Samples
next:
	for _, s := range ss {
		if s.Name != name {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if s.Labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// Sum adds the values of Find(name, labels...); ok is false when none matched.
func (ss Samples) Sum(name string, labels ...string) (sum float64, ok bool) {
	for _, s := range ss.Find(name, labels...) {
		sum += s.Value
		ok = true
	}
	return sum, ok
}

// Scrape GETs the CCM's /metrics with a bearer token allowed to read it
// and parses the answer.
func (p *CCMProcess) Scrape(ctx context.Context, token string) (Samples, string, error) {
	code, body, err := p.Healthz(ctx, "/metrics", token)
	if err != nil {
		return nil, "", err
	}
	if code != http.StatusOK {
		return nil, body, fmt.Errorf("harness: GET /metrics of %s: %d %.200s", p.Name, code, body)
	}
	ss, err := ParseMetrics(body)
	return ss, body, err
}

// SetSecretPassword writes password under the vCenter server's password key
// of the manifests' Secret, as an operator rotating it does.
func (e *Env) SetSecretPassword(ctx context.Context, server, password string) error {
	secrets := e.Client.CoreV1().Secrets(Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := secrets.Get(ctx, SecretName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[credentials.PasswordKey(server)] = []byte(password)
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
}
