package cpisamples

import (
	"os"
	"path/filepath"
	"testing"
)

// The folder is ../shared/cpi from the repository's root (found from the
// working directory, a package's directory under go test), whatever that
// directory is; CPI_SAMPLES_DIR overrides it, absolute or from the root.
func TestDir(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(filepath.Dir(wd)) // test/cpisamples
	abs := t.TempDir()
	for _, tc := range []struct{ env, want string }{
		{"", filepath.Join(filepath.Dir(root), "shared", "cpi")},
		{abs, abs},
		{"elsewhere/cpi", filepath.Join(root, "elsewhere", "cpi")},
	} {
		t.Setenv(EnvVar, tc.env)
		got, err := Dir()
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s=%q: Dir() = %s, want %s", EnvVar, tc.env, got, tc.want)
		}
	}
}

// Only the main module's go.mod marks the root: test/cpiconfig's own
// go.mod, on the way up from there, does not.
func TestRepoRootSkipsOtherModules(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(filepath.Dir(wd))
	t.Chdir(filepath.Join(root, "test", "cpiconfig"))
	got, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if got != root {
		t.Errorf("repoRoot() = %s, want %s", got, root)
	}
}

// A folder without the file asked for skips the test that asked.
func TestPathSkipsWhenAbsent(t *testing.T) {
	t.Setenv(EnvVar, t.TempDir())
	ok := t.Run("needs samples", func(t *testing.T) {
		Path(t, "samples")
		t.Error("Path returned for a folder without samples/")
	})
	if !ok {
		t.Fatal("the subtest failed instead of skipping")
	}
}
