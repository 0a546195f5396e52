// Package docs checks the repository's READMEs as a reader follows them:
// every relative link leads to a file or folder of the repository, and every
// #anchor into a markdown file to one of its headings, named as GitHub names
// them. It reads files only, so it runs with the unit tests.
package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// folderREADMEs are the READMEs the top README hands the reader on to.
var folderREADMEs = []string{
	"config/README.md",
	"cmd/vsphere-federated-ccm/README.md",
	"manifests/README.md",
	"test/README.md",
}

func TestReadmeLinksLeadSomewhere(t *testing.T) {
	root := repoRoot(t)
	readmes := readmesIn(t, root)
	for _, want := range append([]string{"README.md"}, folderREADMEs...) {
		if !slices.Contains(readmes, want) {
			t.Errorf("%s is missing (found %v)", want, readmes)
		}
	}
	for _, readme := range readmes {
		for _, problem := range brokenLinks(root, readme) {
			t.Error(problem)
		}
	}

	// A folder's README is found from the top one.
	top, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range links(string(top)) {
		p, _, _ := strings.Cut(l.dest, "#")
		linked[path.Clean(p)] = true
	}
	for _, want := range folderREADMEs {
		if !linked[want] {
			t.Errorf("README.md does not link to %s", want)
		}
	}
}

// The checker itself: each kind of broken link is reported, and nothing else.
func TestBrokenLinksFindsEachKind(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a/README.md", "# A\n\n## Live operations: no restart\n\n## Twice\n\n## Twice\n")
	write("a/code.go", "package a\n")
	write("README.md", strings.Join([]string{
		"# Top",
		"## The running CCM's view: `/vcenters`",
		"[ok](a/README.md#live-operations-no-restart) [ok](a/README.md#twice-1) [ok](#the-running-ccms-view-vcenters)",
		"[ok](a/) [ok](a/code.go#L1) [ok](a/code.go#L1-L2) [ok](https://example.com/x#y) [ok](</a/README.md#a>)",
		"`[not a link](nowhere.md)`",
		"```",
		"[not a link](nowhere.md)",
		"```",
		"[bad file](a/nowhere.md)",
		"[bad anchor](a/README.md#live-operations)",
		"[bad local anchor](#top-1)",
		"[bad third](a/README.md#twice-2)",
		"[bad code anchor](a/code.go#func)",
		"[outside](../README.md)",
		"[bad reference]",
		"",
		"[bad reference]: b/README.md",
	}, "\n"))
	got := brokenLinks(root, "README.md")
	for _, want := range []string{
		"a/nowhere.md", "a/README.md#live-operations", "#top-1", "a/README.md#twice-2",
		"a/code.go#func", "../README.md", "b/README.md",
	} {
		found := false
		for _, p := range got {
			found = found || strings.Contains(p, "("+want+")")
		}
		if !found {
			t.Errorf("the link to %s is not reported; reported: %q", want, got)
		}
	}
	if len(got) != 7 {
		t.Errorf("want 7 problems, got %d: %q", len(got), got)
	}
}

func TestSlugIsGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		"The running CCM's view: `/vcenters`":  "the-running-ccms-view-vcenters",
		"Live operations: no restart":          "live-operations-no-restart",
		"At scale: 1,000 Nodes, 6,000 VMs":     "at-scale-1000-nodes-6000-vms",
		"What `test/all.sh` covers":            "what-testallsh-covers",
		"Observability: `/metrics` and Events": "observability-metrics-and-events",
		"**Steps** and _why_ — [here](x.md)":   "steps-and-why--here",
		"snake_case `a_b` stays":               "snake_case-a_b-stays",
		"Ünïcode letters stay":                 "ünïcode-letters-stay",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// repoRoot is the module root above this package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// readmesIn lists every README.md of the repository (slash paths from root),
// outside hidden folders and testdata.
func readmesIn(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "README.md" {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type link struct {
	line int
	dest string
}

var (
	fence       = regexp.MustCompile("^\\s*(```|~~~)")
	inlineLink  = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)`)
	refDef      = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	atxHeading  = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$`)
	hasScheme   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	lineAnchor  = regexp.MustCompile(`^L\d+(-L\d+)?$`)
	nonSlug     = regexp.MustCompile(`[^\p{L}\p{M}\p{N}\p{Pc}\- ]`)
	inlineLinkT = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	emphasis    = regexp.MustCompile(`(^|[^\p{L}\p{N}])_+([^_]+?)_+($|[^\p{L}\p{N}])`)
)

// textLines yields the markdown's lines outside fenced code blocks, with
// inline code spans blanked (for links) and their 1-based numbers.
func textLines(md string, keepCode bool) (lines []string, numbers []int) {
	in := false
	for i, l := range strings.Split(md, "\n") {
		if fence.MatchString(l) {
			in = !in
			continue
		}
		if in {
			continue
		}
		if !keepCode {
			l = stripCodeSpans(l)
		}
		lines = append(lines, l)
		numbers = append(numbers, i+1)
	}
	return lines, numbers
}

// stripCodeSpans removes `code` (of any number of backticks) from a line.
func stripCodeSpans(l string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(l, '`')
		if i < 0 {
			b.WriteString(l)
			return b.String()
		}
		b.WriteString(l[:i])
		n := len(l[i:]) - len(strings.TrimLeft(l[i:], "`"))
		ticks := l[i : i+n]
		end := strings.Index(l[i+n:], ticks)
		if end < 0 { // unclosed: literal backticks
			b.WriteString(ticks)
			l = l[i+n:]
			continue
		}
		l = l[i+n+end+n:]
	}
}

// links are the markdown's inline links and reference definitions.
func links(md string) []link {
	var out []link
	lines, numbers := textLines(md, false)
	for i, l := range lines {
		for _, m := range inlineLink.FindAllStringSubmatch(l, -1) {
			out = append(out, link{numbers[i], strings.Trim(m[1], "<>")})
		}
		if m := refDef.FindStringSubmatch(l); m != nil {
			out = append(out, link{numbers[i], strings.Trim(m[1], "<>")})
		}
	}
	return out
}

// anchors are the ids GitHub gives the markdown's headings.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines, _ := textLines(md, true)
	for _, l := range lines {
		m := atxHeading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// slug is GitHub's anchor for a heading: its text as rendered (code spans'
// content, links' text, no emphasis marks), lower case, every character
// that is not a letter, mark, digit, connector, hyphen or space dropped,
// each space a hyphen. Repeats get -1, -2… (anchors).
func slug(heading string) string {
	var b strings.Builder
	// Code spans keep their text verbatim; only the rest is markup.
	rest := heading
	for {
		i := strings.IndexByte(rest, '`')
		if i < 0 {
			b.WriteString(unmark(rest))
			break
		}
		b.WriteString(unmark(rest[:i]))
		n := len(rest[i:]) - len(strings.TrimLeft(rest[i:], "`"))
		end := strings.Index(rest[i+n:], rest[i:i+n])
		if end < 0 {
			b.WriteString(unmark(rest[i:]))
			break
		}
		b.WriteString(rest[i+n : i+n+end])
		rest = rest[i+n+end+n:]
	}
	s := strings.ToLower(b.String())
	return strings.ReplaceAll(nonSlug.ReplaceAllString(s, ""), " ", "-")
}

// unmark drops markdown outside code spans: a link becomes its text, an
// emphasis its content.
func unmark(s string) string {
	s = inlineLinkT.ReplaceAllString(s, "$1")
	s = strings.ReplaceAll(s, "*", "")
	return emphasis.ReplaceAllString(s, "$1$2$3")
}

// brokenLinks reports every relative link of the README (a slash path from
// root) that leads nowhere: no such file or folder in the repository, or an
// anchor its target does not have.
func brokenLinks(root, readme string) []string {
	md, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(readme)))
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, l := range links(string(md)) {
		report := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("%s:%d: (%s) %s", readme, l.line, l.dest, fmt.Sprintf(format, args...)))
		}
		if hasScheme.MatchString(l.dest) || strings.HasPrefix(l.dest, "//") {
			continue // another site's
		}
		p, anchor, _ := strings.Cut(l.dest, "#")
		if p, err = url.PathUnescape(p); err != nil {
			report("%v", err)
			continue
		}
		target := readme // a bare #anchor is into the README itself
		switch {
		case strings.HasPrefix(p, "/"): // GitHub: from the repository's root
			target = path.Clean(strings.TrimPrefix(p, "/"))
		case p != "":
			target = path.Join(path.Dir(readme), p)
		}
		if target == ".." || strings.HasPrefix(target, "../") {
			report("leads out of the repository")
			continue
		}
		info, err := os.Stat(filepath.Join(root, filepath.FromSlash(target)))
		if err != nil {
			report("no such file or folder: %s", target)
			continue
		}
		switch {
		case anchor == "":
		case info.IsDir():
			report("an anchor into a folder")
		case strings.HasSuffix(target, ".md"):
			text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(target)))
			if err != nil {
				report("%v", err)
			} else if !anchors(string(text))[anchor] {
				report("%s has no heading with the anchor #%s", target, anchor)
			}
		case !lineAnchor.MatchString(anchor):
			report("only a line (#L12 or #L12-L20) can be linked in %s", target)
		}
	}
	return problems
}
