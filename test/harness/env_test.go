package harness

import (
	"slices"
	"strings"
	"testing"
)

// The CCM runs with the DaemonSet's literal env (the heap's GOGC), as in a
// cluster; what the downward API fills is not invented.
func TestDaemonSetEnvIsItsLiteralEnv(t *testing.T) {
	dir, err := ManifestsDir()
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadManifests(dir)
	if err != nil {
		t.Fatal(err)
	}
	env, err := DaemonSetEnv(m)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(env, "GOGC=50") {
		t.Errorf("env %q: want GOGC=50, as the DaemonSet sets it", env)
	}
	for _, e := range env {
		for _, downward := range []string{"POD_NAME=", "POD_NAMESPACE=", "MEMORY_LIMIT="} {
			if strings.HasPrefix(e, downward) {
				t.Errorf("env %q holds %s, which the downward API fills", env, downward)
			}
		}
	}
}
