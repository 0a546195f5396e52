// Package cpisamples finds the files of kubernetes/cloud-provider-vsphere
// ("CPI") that tests compare this CCM with. They are CPI's, not this
// project's, so the repository does not hold them: they are in the folder
// ../shared/cpi beside the repository (its root's parent's shared/cpi), or
// in $CPI_SAMPLES_DIR. Its layout:
//
//	samples/       every cloud config CPI ships, and its Secret layouts
//	golden/        what CPI's own parser reads from each sample (test/cpiconfig)
//	helm-values/   the values CPI's Helm chart samples were rendered with
//	SOURCES.md     where each sample comes from
//	release-v1.36/ rbac.yaml and vsphere.conf of CPI's v1.36 release manifest
//
// A test that needs them calls Path, which skips it, in one line naming
// the folder, when they are absent: a clone on its own runs everything else.
package cpisamples

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// EnvVar names the folder when set: an absolute path, or one relative to the
// repository's root.
const EnvVar = "CPI_SAMPLES_DIR"

// defaultDir is the folder, relative to the repository's root, when EnvVar
// is unset.
const defaultDir = "../shared/cpi"

// module is the main module's path: its go.mod marks the repository's root.
const module = "github.com/vsphere-federated-ccm/vsphere-federated-ccm"

// Dir returns the folder's path ($CPI_SAMPLES_DIR, else ../shared/cpi from
// the repository's root, found from the working directory), whether or not
// it exists.
func Dir() (string, error) {
	const op = "cpisamples.Dir"
	dir := os.Getenv(EnvVar)
	if dir != "" && filepath.IsAbs(dir) {
		return filepath.Clean(dir), nil
	}
	if dir == "" {
		dir = defaultDir
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	return filepath.Join(root, dir), nil
}

// Path returns the path of elem (e.g. "samples", or "release-v1.36",
// "rbac.yaml") in the folder, and skips t when it does not exist.
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(append([]string{dir}, elem...)...)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("CPI samples not found at %s (set %s; default %s beside the repository): skipping", path, EnvVar, defaultDir)
	}
	return path
}

// repoRoot is the nearest directory, from the working directory up, whose
// go.mod declares the main module (go test runs a test in its package's
// directory).
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if isMainModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", errors.New("no go.mod of module " + module + " in " + wd + " or above")
		}
	}
}

func isMainModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == module
		}
	}
	return false
}
