// Command extract rebuilds the samples/ and SOURCES.md of a CPI samples
// folder (see test/cpisamples in the root module; the repository holds no
// copy) from CPI's repository (a bare git directory, read with
// `git show <rev>:<path>`): the cloud-config strings of CPI's Go tests (found
// with go/ast, never compiled), the release manifests, the docs and the Helm
// chart (current and packaged, rendered with `helm template` over the values
// files in the folder's helm-values/).
//
// What is extracted is listed in spec.go. Byte-identical configs from several
// origins are stored once, under the name of the first origin listed, and
// SOURCES.md names every origin.
//
// Run it through test/cpiconfig/regenerate.sh. Every path is a flag, and
// none has a default: nothing here knows where a machine keeps them.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

var (
	mirror    = flag.String("mirror", "", "CPI's (bare) git directory (required)")
	rev       = flag.String("rev", "HEAD", "revision of the mirror to read")
	helmBin   = flag.String("helm", "helm", "helm binary (v3)")
	outDir    = flag.String("out", "", "samples directory, rewritten (required)")
	valuesDir = flag.String("values", "", "directory of the helm values files (required)")
	sources   = flag.String("sources", "", "SOURCES.md to write (required)")
	cpiModule = flag.String("cpi-module", "", "CPI module version the golden files are produced with (for SOURCES.md)")
	helmPin   = flag.String("helm-version", "", "helm version (for SOURCES.md)")
)

var commit string

// origin is where a sample comes from: how it was extracted (group, shared
// by like origins) and from what (item).
type origin struct{ group, item string }

// sample is one output file and every origin that yields its bytes.
type sample struct {
	name    string
	data    []byte
	origins []origin
}

type collector struct {
	byName   map[string]*sample
	byHash   map[[32]byte]*sample
	order    []*sample
	noSample []origin
}

// render lists origins grouped by how they were extracted, groups in order
// of first appearance: "group: item, item | group: item".
func render(list []origin) string {
	var groups []string
	items := map[string][]string{}
	for _, o := range list {
		if _, ok := items[o.group]; !ok {
			groups = append(groups, o.group)
		}
		items[o.group] = append(items[o.group], o.item)
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = g + ": " + strings.Join(items[g], ", ")
	}
	return strings.Join(parts, " | ")
}

func (c *collector) add(name string, data []byte, o origin) error {
	if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".ini") {
		return fmt.Errorf("%s: a sample is named *.yaml or *.ini", name)
	}
	secret := strings.HasSuffix(name, ".secret.yaml")
	h := sha256.Sum256(append([]byte(fmt.Sprintf("%v\x00", secret)), data...))
	if s, ok := c.byHash[h]; ok {
		s.origins = append(s.origins, o)
		return nil
	}
	if _, ok := c.byName[name]; ok {
		return fmt.Errorf("%s: two different samples would share this name", name)
	}
	s := &sample{name: name, data: data, origins: []origin{o}}
	c.byHash[h] = s
	c.byName[name] = s
	c.order = append(c.order, s)
	return nil
}

func git(args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"--git-dir=" + *mirror}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

func show(path string) ([]byte, error) { return git("show", commit+":"+path) }

func at(path string) string { return path + "@" + commit[:12] }

// ---- Go test fixtures ----------------------------------------------------

// goString evaluates a string literal or a + concatenation of them.
func goString(e ast.Expr) (string, bool) {
	switch v := e.(type) {
	case *ast.BasicLit:
		if v.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(v.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if v.Op != token.ADD {
			return "", false
		}
		a, ok1 := goString(v.X)
		b, ok2 := goString(v.Y)
		return a + b, ok1 && ok2
	case *ast.ParenExpr:
		return goString(v.X)
	}
	return "", false
}

// goFixture extracts a string from a Go file. sel is either the name of a
// package-level const/var, or "Func.name#N": the N-th (1-based) string
// literal inside func Func that is the value of a composite-literal field
// `name:` or is assigned to a variable `name`. It returns the string and a
// description (the test case's testName/name field, if any).
func goFixture(path, sel string) (string, string, error) {
	src, err := show(path)
	if err != nil {
		return "", "", err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return "", "", err
	}
	if !strings.Contains(sel, ".") {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || (gd.Tok != token.CONST && gd.Tok != token.VAR) {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if n.Name == sel && i < len(vs.Values) {
						s, ok := goString(vs.Values[i])
						if !ok {
							return "", "", fmt.Errorf("%s: %s is not a string literal", path, sel)
						}
						return s, fmt.Sprintf("%s %s (line %d)", gd.Tok, sel, fset.Position(n.Pos()).Line), nil
					}
				}
			}
		}
		return "", "", fmt.Errorf("%s: no package-level %s", path, sel)
	}
	fn, rest, _ := strings.Cut(sel, ".")
	field, nth, ok := strings.Cut(rest, "#")
	n, err := strconv.Atoi(nth)
	if !ok || err != nil || n < 1 {
		return "", "", fmt.Errorf("bad selector %q", sel)
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != fn || fd.Body == nil {
			continue
		}
		count := 0
		var found, desc string
		var line int
		var stack []ast.Node
		ast.Inspect(fd.Body, func(node ast.Node) bool {
			if found != "" {
				return false
			}
			if node == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, node)
			var val ast.Expr
			switch v := node.(type) {
			case *ast.KeyValueExpr:
				if k, ok := v.Key.(*ast.Ident); ok && k.Name == field {
					val = v.Value
				}
			case *ast.AssignStmt:
				if len(v.Lhs) == 1 && len(v.Rhs) == 1 {
					if k, ok := v.Lhs[0].(*ast.Ident); ok && k.Name == field {
						val = v.Rhs[0]
					}
				}
			}
			if val == nil {
				return true
			}
			s, ok := goString(val)
			if !ok {
				return true
			}
			count++
			if count != n {
				return true
			}
			found, line = s, fset.Position(val.Pos()).Line
			// The enclosing composite literal's testName/name field.
			if len(stack) >= 2 {
				if cl, ok := stack[len(stack)-2].(*ast.CompositeLit); ok {
					for _, el := range cl.Elts {
						kv, ok := el.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						if k, ok := kv.Key.(*ast.Ident); ok && (k.Name == "testName" || k.Name == "name") {
							if t, ok := goString(kv.Value); ok {
								desc = fmt.Sprintf(" case %q", t)
							}
						}
					}
				}
			}
			return false
		})
		if found == "" && count < n {
			return "", "", fmt.Errorf("%s: %s has %d string values for %s, want #%d", path, fn, count, field, n)
		}
		return found, fmt.Sprintf("func %s, %s #%d%s (line %d)", fn, field, n, desc, line), nil
	}
	return "", "", fmt.Errorf("%s: no func %s", path, fn)
}

// ---- manifests -----------------------------------------------------------

// splitDocs splits a YAML stream the way kubectl's YAML reader does: at
// lines starting with "---" followed by nothing but blanks or a comment.
func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	var cur []byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("---")) {
			rest := strings.TrimSpace(string(line[3:]))
			if rest == "" || strings.HasPrefix(rest, "#") {
				docs = append(docs, cur)
				cur = nil
				continue
			}
		}
		cur = append(cur, line...)
	}
	return append(docs, cur)
}

type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Data       map[string]string `json:"data"`
	StringData map[string]string `json:"stringData"`
}

type manifestDoc struct {
	obj object
	raw []byte
}

func parseManifest(b []byte) ([]manifestDoc, error) {
	var out []manifestDoc
	for _, d := range splitDocs(b) {
		// Empty documents, and the "..." elision lines around the
		// excerpt in releases/README.md, are no objects.
		if t := bytes.TrimSpace(d); len(t) == 0 || string(t) == "..." {
			continue
		}
		var o object
		if err := yaml.Unmarshal(d, &o); err != nil {
			return nil, fmt.Errorf("manifest document %q...: %v", firstLine(d), err)
		}
		if o.Kind == "" {
			continue
		}
		out = append(out, manifestDoc{obj: o, raw: d})
	}
	return out, nil
}

func firstLine(b []byte) string {
	l, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte("\n"))
	return string(l)
}

// cloudConfigs returns the vsphere.conf held by ConfigMaps (data) or Secrets
// (stringData, or base64 data) and the raw text of Secrets holding
// credentials.
type found struct {
	kind, name, key string
	data            []byte
	secret          bool // a credentials Secret: data is the document's text
}

func cloudConfigs(docs []manifestDoc) ([]found, error) {
	var out []found
	for _, d := range docs {
		o := d.obj
		switch o.Kind {
		case "ConfigMap":
			for k, v := range o.Data {
				if k == "vsphere.conf" {
					out = append(out, found{kind: o.Kind, name: o.Metadata.Name, key: k, data: []byte(v)})
				}
			}
		case "Secret":
			if v, ok := o.StringData["vsphere.conf"]; ok {
				out = append(out, found{kind: o.Kind, name: o.Metadata.Name, key: "stringData.vsphere.conf", data: []byte(v)})
			} else if v, ok := o.Data["vsphere.conf"]; ok {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					return nil, fmt.Errorf("Secret %s data.vsphere.conf: %v", o.Metadata.Name, err)
				}
				out = append(out, found{kind: o.Kind, name: o.Metadata.Name, key: "data.vsphere.conf", data: b})
			} else {
				out = append(out, found{kind: o.Kind, name: o.Metadata.Name, data: d.raw, secret: true})
			}
		}
	}
	return out, nil
}

// addManifest stores the cloud config(s) and credential Secret(s) of a
// manifest stream under base(.secret).yaml/.ini.
func (c *collector) addManifest(base string, from origin, b []byte) (int, error) {
	docs, err := parseManifest(b)
	if err != nil {
		return 0, err
	}
	fs, err := cloudConfigs(docs)
	if err != nil {
		return 0, err
	}
	configs, secrets := 0, 0
	for _, f := range fs {
		if f.secret {
			secrets++
		} else {
			configs++
		}
	}
	n := 0
	ci, si := 0, 0
	for _, f := range fs {
		var name string
		o := from
		if f.secret {
			si++
			name = base + suffix(si, secrets) + ".secret.yaml"
			o.group = fmt.Sprintf("%s, Secret %s", from.group, f.name)
		} else {
			ci++
			name = base + suffix(ci, configs) + ext(f.data)
			o.group = fmt.Sprintf("%s, %s %s key %s", from.group, f.kind, f.name, f.key)
		}
		if err := c.add(name, f.data, o); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func suffix(i, n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf("-%d", i)
}

// ext guesses the extension from the content: CPI's INI has a [Section]
// header before any "key:" line.
func ext(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") || strings.HasPrefix(t, ";") {
			continue
		}
		if strings.HasPrefix(t, "[") {
			return ".ini"
		}
		return ".yaml"
	}
	return ".yaml"
}

// ---- markdown ------------------------------------------------------------

type block struct {
	heading string
	line    int
	text    string
}

var headingRE = regexp.MustCompile(`^#{1,6} +(.*)$`)

func mdBlocks(b []byte) []block {
	var out []block
	heading := ""
	in := false
	var cur []string
	start := 0
	for i, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			if in {
				out = append(out, block{heading: heading, line: start, text: strings.Join(cur, "")})
				cur = nil
			} else {
				start = i + 2
			}
			in = !in
			continue
		}
		if in {
			cur = append(cur, l+"\n")
		} else if m := headingRE.FindStringSubmatch(l); m != nil {
			heading = m[1]
		}
	}
	return out
}

// heredoc returns the body of the `<<EOF` here-document in a shell block.
func heredoc(s string) (string, error) {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "<<EOF") {
			continue
		}
		var body []string
		for _, b := range lines[i+1:] {
			if strings.TrimRight(b, "\n") == "EOF" {
				out := strings.Join(body, "")
				// An unquoted here-document expands $, ` and \; refuse
				// rather than guess what a shell would make of them.
				if strings.ContainsAny(out, "$`\\") {
					return "", errors.New("here-document body has $, ` or \\ (shell expansion)")
				}
				return out, nil
			}
			body = append(body, b)
		}
		return "", errors.New("here-document without EOF line")
	}
	return "", errors.New("no <<EOF here-document")
}

// ---- helm ----------------------------------------------------------------

func helmTemplate(chart string, values []string) ([]byte, error) {
	args := []string{"template", "vsphere-cpi", chart, "--namespace", "kube-system"}
	for _, v := range values {
		args = append(args, "-f", filepath.Join(*valuesDir, v))
	}
	cmd := exec.Command(*helmBin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// ---- main ----------------------------------------------------------------

func run() error {
	flag.Parse()
	for _, f := range []struct{ name, value string }{{"mirror", *mirror}, {"out", *outDir}, {"values", *valuesDir}, {"sources", *sources}} {
		if f.value == "" {
			return fmt.Errorf("-%s is required", f.name)
		}
	}
	out, err := git("rev-parse", *rev+"^{commit}")
	if err != nil {
		return err
	}
	commit = strings.TrimSpace(string(out))
	c := &collector{byName: map[string]*sample{}, byHash: map[[32]byte]*sample{}}

	for _, s := range goSpecs {
		str, desc, err := goFixture(s.path, s.sel)
		if err != nil {
			return err
		}
		item := fmt.Sprintf("%s %s", at(s.path), desc)
		if s.note != "" {
			item += " [" + s.note + "]"
		}
		if err := c.add(s.name, []byte(str), origin{"Go test fixture", item}); err != nil {
			return err
		}
	}

	for _, s := range fileSpecs {
		b, err := show(s.path)
		if err != nil {
			return err
		}
		if s.manifest {
			n, err := c.addManifest(s.name, origin{s.kind, at(s.path)}, b)
			if err != nil {
				return fmt.Errorf("%s: %w", s.path, err)
			}
			if n == 0 {
				return fmt.Errorf("%s: no ConfigMap/Secret found", s.path)
			}
			continue
		}
		item := at(s.path)
		if s.note != "" {
			item += " [" + s.note + "]"
		}
		if err := c.add(s.name, b, origin{s.kind + ", whole file", item}); err != nil {
			return err
		}
	}

	for _, s := range mdSpecs {
		b, err := show(s.path)
		if err != nil {
			return err
		}
		blocks := mdBlocks(b)
		if s.block < 1 || s.block > len(blocks) {
			return fmt.Errorf("%s: %d code blocks, want #%d", s.path, len(blocks), s.block)
		}
		bl := blocks[s.block-1]
		if !strings.Contains(bl.text, s.contains) {
			return fmt.Errorf("%s: code block #%d (line %d) does not contain %q; the doc changed, update spec.go", s.path, s.block, bl.line, s.contains)
		}
		item := fmt.Sprintf("%s section %q code block #%d (line %d)", at(s.path), bl.heading, s.block, bl.line)
		switch s.mode {
		case "block":
			err = c.add(s.name, []byte(bl.text), origin{"doc code block", item})
		case "heredoc":
			var body string
			body, err = heredoc(bl.text)
			if err == nil {
				err = c.add(s.name, []byte(body), origin{"doc code block, here-document body", item})
			}
		case "manifest":
			var n int
			n, err = c.addManifest(s.name, origin{"doc code block, manifest", item}, []byte(bl.text))
			if err == nil && n == 0 {
				err = errors.New("no ConfigMap/Secret in block")
			}
		default:
			err = fmt.Errorf("bad mode %q", s.mode)
		}
		if err != nil {
			return fmt.Errorf("%s block #%d: %w", s.path, s.block, err)
		}
	}

	tmp, err := os.MkdirTemp("", "cpi-charts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	charts, err := chartList(tmp)
	if err != nil {
		return err
	}
	for _, ch := range charts {
		for _, v := range helmVariants {
			from := origin{fmt.Sprintf("helm %s `helm template vsphere-cpi <chart> --namespace kube-system%s`", *helmPin, valuesArgs(v.values)), ch.origin}
			rendered, err := helmTemplate(ch.path, v.values)
			if err != nil {
				c.noSample = append(c.noSample, origin{from.group + ": helm failed: " + err.Error(), from.item})
				continue
			}
			n, err := c.addManifest(ch.prefix+v.name, from, rendered)
			if err != nil {
				return fmt.Errorf("%s %s: %w", ch.origin, v.name, err)
			}
			if n == 0 {
				c.noSample = append(c.noSample, origin{from.group + " renders no ConfigMap and no Secret (config.enabled is false)", from.item})
			}
		}
	}
	return write(c)
}

func valuesArgs(vs []string) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, " -f helm-values/%s", v)
	}
	return b.String()
}

type chart struct {
	path, origin, prefix string
}

// chartList materialises the chart directory and every packaged chart of
// the mirror under tmp: the directory first, then the packages newest first,
// so a config every version renders alike is named after the newest.
func chartList(tmp string) ([]chart, error) {
	dir := filepath.Join(tmp, "src")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	arch, err := git("archive", commit, "charts/vsphere-cpi")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("tar", "-x", "-C", dir)
	cmd.Stdin = bytes.NewReader(arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("tar: %v: %s", err, out)
	}
	list := []chart{{path: filepath.Join(dir, "charts/vsphere-cpi"), origin: at("charts/vsphere-cpi"), prefix: "chart-"}}

	names, err := git("ls-tree", "--name-only", commit, "charts/")
	if err != nil {
		return nil, err
	}
	type pkg struct {
		path, version string
		key           []int
	}
	var pkgs []pkg
	re := regexp.MustCompile(`^charts/vsphere-cpi-v?(\d+)\.(\d+)\.(\d+)\.tgz$`)
	for _, n := range strings.Fields(string(names)) {
		m := re.FindStringSubmatch(n)
		if m == nil {
			continue
		}
		var key []int
		for _, x := range m[1:] {
			i, _ := strconv.Atoi(x)
			key = append(key, i)
		}
		pkgs = append(pkgs, pkg{path: n, version: fmt.Sprintf("%s.%s.%s", m[1], m[2], m[3]), key: key})
	}
	sort.Slice(pkgs, func(i, j int) bool {
		a, b := pkgs[i].key, pkgs[j].key
		for k := range a {
			if a[k] != b[k] {
				return a[k] > b[k]
			}
		}
		return false
	})
	for _, p := range pkgs {
		b, err := show(p.path)
		if err != nil {
			return nil, err
		}
		f := filepath.Join(tmp, filepath.Base(p.path))
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return nil, err
		}
		list = append(list, chart{path: f, origin: at(p.path), prefix: "chart-" + p.version + "-"})
	}
	return list, nil
}

func write(c *collector) error {
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	old, err := os.ReadDir(*outDir)
	if err != nil {
		return err
	}
	for _, e := range old {
		if !e.IsDir() {
			if err := os.Remove(filepath.Join(*outDir, e.Name())); err != nil {
				return err
			}
		}
	}
	sort.Slice(c.order, func(i, j int) bool { return c.order[i].name < c.order[j].name })
	var b strings.Builder
	b.WriteString(sourcesHeader(commit, *cpiModule, *helmPin))
	configs, secrets := 0, 0
	for _, s := range c.order {
		if err := os.WriteFile(filepath.Join(*outDir, s.name), s.data, 0o644); err != nil {
			return err
		}
		if strings.HasSuffix(s.name, ".secret.yaml") {
			secrets++
		} else {
			configs++
		}
	}
	b.WriteString("\n## Cloud configs\n\n")
	for _, s := range c.order {
		if !strings.HasSuffix(s.name, ".secret.yaml") {
			fmt.Fprintf(&b, "- `%s`: %s\n", s.name, render(s.origins))
		}
	}
	b.WriteString("\n## Secret layouts (not cloud configs; no golden file)\n\n")
	for _, s := range c.order {
		if strings.HasSuffix(s.name, ".secret.yaml") {
			fmt.Fprintf(&b, "- `%s`: %s\n", s.name, render(s.origins))
		}
	}
	b.WriteString("\n## Origins that yield no sample\n\n")
	for _, n := range staticNoSample {
		fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(n, "@REV", "@"+commit[:12]))
	}
	if len(c.noSample) > 0 {
		fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(render(c.noSample), " | ", "\n- "))
	}
	if err := os.WriteFile(*sources, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "extract: %d cloud configs, %d secret layouts in %s\n", configs, secrets, *outDir)
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "extract:", err)
		os.Exit(1)
	}
}
