package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/harness"
)

// The README's "How it works" tree is how a newcomer finds their way: every
// Go package is in it, and every file it names exists.
func TestReadmeTreeMatchesTheCode(t *testing.T) {
	root, err := harness.RepoRoot()
	must(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	must(t, err)
	_, after, ok := strings.Cut(string(readme), "## How it works\n\n```\n")
	tree, _, closed := strings.Cut(after, "```")
	if !ok || !closed {
		t.Fatal(`README.md has no code block right after "## How it works"`)
	}

	packages := map[string]bool{} // directory → holds non-test Go files
	files := map[string]bool{}    // base names of all Go files
	must(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir // not this module's packages
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") {
			files[d.Name()] = true
			if !strings.HasSuffix(rel, "_test.go") {
				packages[filepath.Dir(rel)] = true
			}
		}
		return nil
	}))
	if len(packages) < 5 {
		t.Fatalf("found only packages %v under %s", packages, root)
	}

	// A package is named by its path (test/e2e) or, nested in the tree
	// under its parent, by its last element and a slash (vsphere/).
	for dir := range packages {
		nested := regexp.MustCompile(`[└├]\s*` + regexp.QuoteMeta(filepath.Base(dir)) + `/`)
		if !strings.Contains(tree, dir) && !nested.MatchString(tree) {
			t.Errorf("the README's tree does not name the package %s", dir)
		}
	}
	for _, name := range regexp.MustCompile(`\b[a-z_]+\.go\b`).FindAllString(tree, -1) {
		if !files[name] {
			t.Errorf("the README's tree names %s; no such file", name)
		}
	}
}
