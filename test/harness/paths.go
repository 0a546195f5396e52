package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// RepoRoot is the directory of this module's go.mod. It is found from this
// source file's location, so it works from any working directory; `go env
// GOMOD` is the fallback for binaries built with -trimpath.
func RepoRoot() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return root, nil
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("harness: finding the repository: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("harness: finding the repository: not inside a Go module")
	}
	return filepath.Dir(gomod), nil
}

// Provision returns the directory holding kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS when set, else the output of test/provision.sh (which
// builds them into .cache/bin the first time and is fast afterwards).
func Provision() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		for _, bin := range []string{"kube-apiserver", "etcd"} {
			if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
				return "", fmt.Errorf("harness: KUBEBUILDER_ASSETS=%s: %w", dir, err)
			}
		}
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "test", "provision.sh"))
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("harness: test/provision.sh: %w\n%s", err, stderr.String())
	}
	dir := strings.TrimSpace(stdout.String())
	if dir == "" {
		return "", fmt.Errorf("harness: test/provision.sh printed no directory\n%s", stderr.String())
	}
	return dir, nil
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// BuildCCM builds the CCM binary into <repo>/.cache/bin once per process and
// returns its path.
func BuildCCM() (string, error) {
	buildOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		out := filepath.Join(root, ".cache", "bin", "vsphere-federated-ccm")
		cmd := exec.Command("go", "build", "-o", out, "./cmd/vsphere-federated-ccm")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("harness: go build ./cmd/vsphere-federated-ccm: %w\n%s", err, b)
			return
		}
		buildPath = out
	})
	return buildPath, buildErr
}
