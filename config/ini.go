package config

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/gcfg.v1/scanner"
	"gopkg.in/gcfg.v1/token"
	"gopkg.in/gcfg.v1/types"
	"gopkg.in/yaml.v3"
)

// isINI reports whether data is CPI's legacy INI (gcfg) form: its first
// meaningful line opens a section.
func isINI(data []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(bytes.TrimPrefix(data, utf8BOM)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		return line[0] == '['
	}
	return false
}

var utf8BOM = []byte("\ufeff")

// iniSection is the YAML key of a gcfg section (names are
// case-insensitive) and whether it takes a subsection name.
func iniSection(name string) (key string, named bool) {
	switch lower := strings.ToLower(name); lower {
	case "global", "labels", "nodes", "nsxt", "route", "workspace", "disk", "network":
		return lower, false
	case "virtualcenter":
		return "vcenter", true
	case "loadbalancer":
		return "loadBalancer", false
	case "loadbalancerclass":
		return "loadBalancerClass", true
	}
	// Unknown to CPI too (gcfg skips it): named under its own key, so it
	// is reported as unknown with its line.
	return name, false
}

// iniToYAML turns CPI's INI config into the YAML tree Parse validates, so
// both forms share one schema, one set of defaults and one validation:
//
//	[globalSection]                    -> global
//	[VirtualCenter "10.0.0.1"]  -> vcenter."10.0.0.1"
//	[Labels], [Nodes]           -> labels, nodes
//	insecure-flag = "1"         -> insecureFlag: true
//
// It reads the file with gcfg's own scanner, the parser CPI uses, so
// comments, quoting, escapes and line continuations mean what they mean
// to CPI. As in gcfg, a repeated section adds to the first and a repeated
// key overrides the earlier one; a key without "=" is true. Keys are
// kebab-case in INI and camelCase in YAML; a gcfg boolean (1/0, yes/no,
// on/off) becomes YAML's; every other value stays a string. Notices
// collects what gcfg would skip (a subsection of a section that takes
// none).
func iniToYAML(data []byte) (*yaml.Node, []Notice, error) {
	src := bytes.TrimPrefix(data, utf8BOM)
	r := &iniReader{fset: token.NewFileSet(), root: &yaml.Node{Kind: yaml.MappingNode}}
	file := r.fset.AddFile("", r.fset.Base(), len(src))
	r.s.Init(file, src, func(p token.Position, msg string) { r.scanErrs.Add(p, msg) }, 0)
	r.next()
	for r.tok != token.EOF {
		if len(r.scanErrs) > 0 {
			return nil, nil, r.fail("")
		}
		var err error
		switch r.tok {
		case token.EOL, token.COMMENT:
			r.next()
		case token.LBRACK:
			err = r.header()
		case token.IDENT:
			err = r.keyValue()
		default:
			err = r.fail("expected a [section] or key = value")
		}
		if err != nil {
			return nil, nil, err
		}
	}
	// In INI the section name is the server unless a server key says
	// otherwise (CPI's rule); YAML requires the key.
	if vcs := find(r.root, "vcenter"); vcs != nil {
		for i := 0; i+1 < len(vcs.Content); i += 2 {
			if find(vcs.Content[i+1], "server") == nil {
				v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: vcs.Content[i].Value}
				vcs.Content[i+1].Content = append(vcs.Content[i+1].Content, scalar("server"), v)
			}
		}
	}
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{r.root}}, r.notices, nil
}

// iniReader is iniToYAML's state: gcfg's scanner at the current token,
// the mapping built so far and the section keys go to.
type iniReader struct {
	fset     *token.FileSet
	s        scanner.Scanner
	scanErrs scanner.ErrorList
	pos      token.Pos
	tok      token.Token
	lit      string

	root    *yaml.Node
	section *yaml.Node
	notices []Notice
}

func (r *iniReader) next()     { r.pos, r.tok, r.lit = r.s.Scan() }
func (r *iniReader) line() int { return r.fset.Position(r.pos).Line }
func (r *iniReader) endOfLine() bool {
	return r.tok == token.EOL || r.tok == token.EOF || r.tok == token.COMMENT
}

// fail is the scanner's first error, else msg at the current line.
func (r *iniReader) fail(msg string) error {
	if len(r.scanErrs) > 0 {
		// The scanner's own message, which quotes no text but the
		// character it calls illegal: that one may be a password's.
		msg := r.scanErrs[0].Msg
		if strings.HasPrefix(msg, "illegal character U+") {
			msg = "illegal character"
		}
		return fmt.Errorf("line %d: %s", r.scanErrs[0].Pos.Line, msg)
	}
	return fmt.Errorf("line %d: %s", r.line(), msg)
}

// child is parent's mapping under key, added (at line) when missing.
func child(parent *yaml.Node, key string, line int) *yaml.Node {
	if n := find(parent, key); n != nil {
		return n
	}
	n := &yaml.Node{Kind: yaml.MappingNode, Line: line}
	parent.Content = append(parent.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key, Line: line}, n)
	return n
}

// header reads "[name]" or "[name "sub"]" and makes its section current.
func (r *iniReader) header() error {
	headerLine := r.line()
	r.next()
	if r.tok != token.IDENT {
		return r.fail("expected a section name after [")
	}
	name := r.lit
	r.next()
	sub, hasSub := "", false
	if r.tok == token.STRING {
		sub, hasSub = gcfgUnquote(r.lit), true
		if sub == "" {
			return r.fail("empty subsection name")
		}
		r.next()
	}
	if r.tok != token.RBRACK {
		return r.fail("section header: missing ]")
	}
	r.next()
	if !r.endOfLine() {
		return r.fail("text after a section header (only a comment may follow it)")
	}
	key, named := iniSection(name)
	switch {
	case named && !hasSub && key == "vcenter":
		return fmt.Errorf("line %d: [VirtualCenter] needs a name: [VirtualCenter \"<server>\"]", headerLine)
	case named && hasSub:
		r.section = child(child(r.root, key, headerLine), sub, headerLine)
	case hasSub:
		// gcfg skips a subsection of a section that takes none.
		r.notices = append(r.notices, Notice{Kind: NoticeIgnored, Path: fmt.Sprintf("[%s %q]", name, sub), Line: headerLine,
			Reason: "this section takes no name in quotes; CPI skips it and its keys too"})
		r.section = &yaml.Node{Kind: yaml.MappingNode}
	default:
		r.section = child(r.root, key, headerLine)
	}
	return nil
}

// keyValue reads "key = value" or a bare "key" (true) into the section.
func (r *iniReader) keyValue() error {
	if r.section == nil {
		return r.fail("a key before any [section]")
	}
	keyLine := r.line()
	k := camel(r.lit)
	r.next()
	var val *yaml.Node
	if r.endOfLine() {
		val = scalar("true") // gcfg: a key without a value is true (a bool)
	} else {
		if r.tok != token.ASSIGN {
			return r.fail("expected = after the key name")
		}
		r.next()
		if r.tok != token.STRING {
			return r.fail("expected a value after =")
		}
		v := gcfgUnquote(r.lit)
		r.next()
		if len(r.scanErrs) > 0 || !r.endOfLine() {
			return r.fail("text after the value (quote the whole value)") // or the scanner's error
		}
		val = iniValue(k, v)
	}
	kn := scalar(k)
	kn.Line, val.Line = keyLine, keyLine // so errors point into the INI file
	if i := indexOf(r.section, k); i >= 0 {
		r.section.Content[i+1] = val // gcfg: the last one wins
	} else {
		r.section.Content = append(r.section.Content, kn, val)
	}
	return nil
}

// iniValue types a gcfg value for the YAML schema: gcfg's booleans for
// boolean keys, whole numbers for numeric keys, a string for the rest ("0123"
// stays a string).
func iniValue(key, v string) *yaml.Node {
	n := scalar(v)
	switch key {
	case "insecureFlag", "apiDisable", "inventory":
		// gcfg's boolean spellings (1/0, yes/no, on/off, any case) as
		// YAML's, read by gcfg's own parser; anything else is left for
		// the type check to refuse.
		if b, err := types.ParseBool(v); err == nil {
			n.Value = strconv.FormatBool(b)
		}
	case "soapRoundtripCount":
	default:
		n.Tag = "!!str"
	}
	return n
}

func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

// find returns the value under key in mapping m.
func find(m *yaml.Node, key string) *yaml.Node {
	if i := indexOf(m, key); i >= 0 {
		return m.Content[i+1]
	}
	return nil
}

// indexOf is the index of key in mapping m's content, or -1.
func indexOf(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// gcfgUnquote reads a gcfg value as gcfg does: double quotes toggle
// quoting (`a"b c"d` is "ab cd"), \\ \" \n \t are escapes, and a
// backslash before a line break outside quotes continues the line. The
// scanner has already refused anything else.
func gcfgUnquote(lit string) string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(lit); i++ {
		switch c := lit[i]; c {
		case '"':
			quoted = !quoted
		case '\\':
			if i+1 >= len(lit) {
				return b.String()
			}
			i++
			switch lit[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '\n':
				// A continuation: the line break is dropped.
			default:
				b.WriteByte(lit[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// camel turns gcfg's kebab-case keys into the YAML names. gcfg matches
// names case-insensitively; camel lowercases first.
func camel(key string) string {
	parts := strings.Split(strings.ToLower(key), "-")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}
