package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/server"
	ccmconfig "k8s.io/cloud-provider/app/config"
)

// listenLoopback holds a port on 127.0.0.1 for the test's duration.
func listenLoopback(t *testing.T) (net.Listener, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln, ln.Addr().(*net.TCPAddr).Port
}

// A --vcenters-port that cannot be served is an error naming the flag and
// the port (main makes it fatal), never nothing served in silence.
func TestServeVCentersRefusesAPortItCannotServe(t *testing.T) {
	secure, _ := listenLoopback(t)
	_, taken := listenLoopback(t) // held by "another process of the host"
	withSecure := (&ccmconfig.Config{SecureServing: &server.SecureServingInfo{Listener: secure}}).Complete()
	noSecure := (&ccmconfig.Config{}).Complete()

	if err := serveVCenters(withSecure, nil, 0, nil); err != nil {
		t.Fatalf("port 0: %v, want nothing served and no error", err)
	}
	for _, tc := range []struct {
		name string
		c    *ccmconfig.CompletedConfig
		port int
		want []string
	}{
		{"port held by another listener", withSecure, taken,
			[]string{fmt.Sprintf("--vcenters-port=%d", taken), fmt.Sprintf("127.0.0.1:%d", taken), "address already in use"}},
		{"no secure port", noSecure, 10268, []string{"--vcenters-port=10268", "--secure-port is 0"}},
		{"negative", withSecure, -1, []string{"--vcenters-port=-1", "from 1 to 65535"}},
		{"too large", withSecure, 70000, []string{"--vcenters-port=70000", "from 1 to 65535"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := serveVCenters(tc.c, nil, tc.port, nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// The binary started with --vcenters-port on a port another process holds
// exits at start with the flag and port in its last words, before it gets
// as far as the API server (here unreachable: waiting for it would end the
// process too, later and with another message).
func TestVCentersPortTakenStopsTheProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ccm")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The API server: a port that refuses (held, then released).
	refusing, apiPort := listenLoopback(t)
	_ = refusing.Close()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	write(t, kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, apiPort))
	cloudConfig := filepath.Join(dir, "vsphere.yaml")
	write(t, cloudConfig, "global:\n  insecureFlag: true\n  user: u\n  password: p\nvcenter:\n  a:\n    server: 127.0.0.1\n    port: 1\n    datacenters: [dc]\n")
	free, securePort := listenLoopback(t)
	_ = free.Close()
	_, taken := listenLoopback(t)

	cmd := exec.Command(bin, "--cloud-config="+cloudConfig, "--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig, "--authentication-skip-lookup",
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(securePort),
		"--vcenters-port="+strconv.Itoa(taken))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute): // a bound on a hang, not a measure
		_ = cmd.Process.Kill()
		t.Fatalf("still running with --vcenters-port=%d taken\n%s", taken, out.String())
	}
	if err == nil {
		t.Fatalf("exit 0 with --vcenters-port=%d taken\n%s", taken, out.String())
	}
	log := out.String()
	for _, w := range []string{fmt.Sprintf("--vcenters-port=%d", taken), "address already in use"} {
		if !strings.Contains(log, w) {
			t.Errorf("output does not contain %q\n%s", w, log)
		}
	}
	if strings.Contains(log, "apiserver") {
		t.Errorf("got as far as the API server instead of stopping at the taken port\n%s", log)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
