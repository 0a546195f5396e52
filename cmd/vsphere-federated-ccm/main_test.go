package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestVersionRequested(t *testing.T) {
	for args, want := range map[string]bool{
		"--version":                         true,
		"--version=raw":                     true,
		"--cloud-config=x --version":        true,
		"--version=false":                   false,
		"--cloud-config=x":                  false,
		"-- --version":                      false,
		"--node-labels=version=--version":   false,
		"--v=2 --cloud-provider=vsphere":    false,
		"--cloud-provider=vsphere -version": true,
	} {
		if got := versionRequested(strings.Fields(args)); got != want {
			t.Errorf("versionRequested(%q) = %v, want %v", args, got, want)
		}
	}
}

// The binary built with the release ldflags prints them, nothing else,
// and exits 0 (the image build and the build-info metric use the same
// variables).
func TestVersionFromLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "ccm")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7 -X main.commit=feedface", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	want := "vsphere-federated-ccm v9.8.7 (commit feedface, " + runtime.Version() + ")\n"
	if string(out) != want {
		t.Fatalf("--version printed %q, want %q", out, want)
	}
}

// The container's memory limit (MEMORY_LIMIT, from the downward API) sets
// the Go soft limit at 90% of it, unless GOMEMLIMIT is set; a value that
// is not a byte count is an error naming the variable.
func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want int64
		err  bool
	}{
		{env: nil, want: 0},
		{env: map[string]string{"MEMORY_LIMIT": "536870912"}, want: 483183820},
		{env: map[string]string{"MEMORY_LIMIT": "536870912", "GOMEMLIMIT": "300MiB"}, want: 0},
		{env: map[string]string{"MEMORY_LIMIT": "512Mi"}, err: true},
		{env: map[string]string{"MEMORY_LIMIT": "0"}, err: true},
	} {
		got, err := memoryLimit(func(k string) string { return tc.env[k] })
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%v: memoryLimit = %d, %v; want %d, error %v", tc.env, got, err, tc.want, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), "MEMORY_LIMIT") {
			t.Errorf("%v: error %q does not name MEMORY_LIMIT", tc.env, err)
		}
	}
}
