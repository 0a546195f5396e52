package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
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
	return provisionScript()
}

// ProvisionVersion returns the directory holding kube-apiserver and etcd of
// an older Kubernetes minor (e.g. "1.33"): the output of
// `test/provision.sh <minor>`, which builds them into .cache/kube/v<minor>
// the first time (minutes) and is fast afterwards.
func ProvisionVersion(minor string) (string, error) {
	return provisionScript(minor)
}

// KubernetesVersions lists the older Kubernetes minors test/provision.sh
// has builder modules for (test/tools/v<minor>), oldest first.
func KubernetesVersions() ([]string, error) {
	out, err := provisionScript("--versions")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// provisionScript runs test/provision.sh with args and returns its stdout,
// trimmed; an empty answer is an error except for --versions.
func provisionScript(args ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "test", "provision.sh"), args...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	name := strings.Join(append([]string{"test/provision.sh"}, args...), " ")
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("harness: %s: %w\n%s", name, err, stderr.String())
	}
	out := strings.TrimSpace(stdout.String())
	if out == "" && !slices.Contains(args, "--versions") {
		return "", fmt.Errorf("harness: %s printed no directory\n%s", name, stderr.String())
	}
	return out, nil
}

// ccmBuild is one build of the CCM binary, made once per process (the Go
// build cache makes later processes' builds quick).
type ccmBuild struct {
	once sync.Once
	path string
	err  error
}

var plainBuild, raceBuild ccmBuild

// BuildCCM builds the CCM binary into <repo>/.cache/bin (or $E2E_BIN_DIR
// when set: a worktree that must not hold a .cache) once per process and
// returns its path.
func BuildCCM() (string, error) { return plainBuild.build("vsphere-federated-ccm") }

// BuildCCMRace builds the CCM binary with the race detector
// (<repo>/.cache/bin/vsphere-federated-ccm-race) once per process and
// returns its path. Such a process prints "WARNING: DATA RACE" and a report
// for each race it sees, and goes on (GORACE's default halt_on_error=0):
// see CCMProcess.RaceReports.
func BuildCCMRace() (string, error) {
	return raceBuild.build("vsphere-federated-ccm-race", "-race")
}

func (b *ccmBuild) build(name string, flags ...string) (string, error) {
	b.once.Do(func() {
		dir := os.Getenv("E2E_BIN_DIR")
		if dir == "" {
			root, err := RepoRoot()
			if err != nil {
				b.err = err
				return
			}
			dir = filepath.Join(root, ".cache", "bin")
		}
		b.path, b.err = buildCCM(filepath.Join(dir, name), flags...)
	})
	return b.path, b.err
}

// BuildCCMInto builds the CCM binary into dir (each call builds; the Go
// build cache makes it quick) and returns its path: for a tool that must
// not replace the binary the e2e tests share.
func BuildCCMInto(dir string) (string, error) {
	return buildCCM(filepath.Join(dir, "vsphere-federated-ccm"))
}

func buildCCM(out string, flags ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	args := append(append([]string{"build"}, flags...), "-o", out, "./cmd/vsphere-federated-ccm")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if o, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("harness: go %s: %w\n%s", strings.Join(args, " "), err, o)
	}
	return out, nil
}
