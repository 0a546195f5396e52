package config

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"gopkg.in/gcfg.v1/scanner"
	"gopkg.in/gcfg.v1/token"
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
	switch strings.ToLower(name) {
	case "global":
		return "global", false
	case "virtualcenter":
		return "vcenter", true
	case "labels", "nodes", "nsxt", "route", "workspace", "disk", "network":
		return strings.ToLower(name), false
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
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var scanErrs scanner.ErrorList
	var s scanner.Scanner
	s.Init(file, src, func(p token.Position, msg string) { scanErrs.Add(p, msg) }, 0)

	root := &yaml.Node{Kind: yaml.MappingNode}
	var notices []Notice
	var section *yaml.Node
	get := func(parent *yaml.Node, key string, line int) *yaml.Node {
		if n := find(parent, key); n != nil {
			return n
		}
		k, n := scalar(key), &yaml.Node{Kind: yaml.MappingNode, Line: line}
		k.Line = line
		parent.Content = append(parent.Content, k, n)
		return n
	}
	pos, tok, lit := s.Scan()
	line := func() int { return fset.Position(pos).Line }
	fail := func(msg string) (*yaml.Node, []Notice, error) {
		if len(scanErrs) > 0 {
			// The scanner's own message; it never quotes the text.
			return nil, nil, fmt.Errorf("line %d: %s", scanErrs[0].Pos.Line, scanErrs[0].Msg)
		}
		return nil, nil, fmt.Errorf("line %d: %s", line(), msg)
	}
	next := func() { pos, tok, lit = s.Scan() }
	endOfLine := func() bool { return tok == token.EOL || tok == token.EOF || tok == token.COMMENT }
	for tok != token.EOF {
		if len(scanErrs) > 0 {
			return fail("")
		}
		switch tok {
		case token.EOL, token.COMMENT:
			next()
		case token.LBRACK:
			headerLine := line()
			next()
			if tok != token.IDENT {
				return fail("expected a section name after [")
			}
			name := lit
			next()
			sub, hasSub := "", false
			if tok == token.STRING {
				sub, hasSub = gcfgUnquote(lit), true
				if sub == "" {
					return fail("empty subsection name")
				}
				next()
			}
			if tok != token.RBRACK {
				return fail("section header: missing ]")
			}
			next()
			if !endOfLine() {
				return fail("text after a section header (only a comment may follow it)")
			}
			key, named := iniSection(name)
			switch {
			case named && !hasSub:
				if key == "vcenter" {
					return nil, nil, fmt.Errorf("line %d: [VirtualCenter] needs a name: [VirtualCenter \"<server>\"]", headerLine)
				}
				section = get(root, key, headerLine)
			case named:
				section = get(get(root, key, headerLine), sub, headerLine)
			case hasSub:
				// gcfg skips a subsection of a section that takes none.
				notices = append(notices, Notice{Kind: NoticeIgnored, Path: fmt.Sprintf("[%s %q]", name, sub), Line: headerLine,
					Reason: "this section takes no name in quotes; CPI skips it and its keys too"})
				section = &yaml.Node{Kind: yaml.MappingNode}
			default:
				section = get(root, key, headerLine)
			}
		case token.IDENT:
			if section == nil {
				return fail("a key before any [section]")
			}
			keyLine := line()
			k := camel(lit)
			next()
			var val *yaml.Node
			if endOfLine() {
				val = scalar("true") // gcfg: a key without a value is true (a bool)
			} else {
				if tok != token.ASSIGN {
					return fail("expected = after the key name")
				}
				next()
				if tok != token.STRING {
					return fail("expected a value after =")
				}
				v := gcfgUnquote(lit)
				next()
				if len(scanErrs) > 0 {
					return fail("")
				}
				if !endOfLine() {
					return fail("text after the value (quote the whole value)")
				}
				val = iniValue(k, v)
			}
			kn := scalar(k)
			kn.Line, val.Line = keyLine, keyLine // so errors point into the INI file
			if i := indexOf(section, k); i >= 0 {
				section.Content[i+1] = val // gcfg: the last one wins
			} else {
				section.Content = append(section.Content, kn, val)
			}
		default:
			return fail("expected a [section] or key = value")
		}
	}
	// In INI the section name is the server unless a server key says
	// otherwise (CPI's rule); YAML requires the key.
	if vcs := find(root, "vcenter"); vcs != nil {
		for i := 0; i+1 < len(vcs.Content); i += 2 {
			if find(vcs.Content[i+1], "server") == nil {
				v := scalar(vcs.Content[i].Value)
				v.Tag = "!!str"
				vcs.Content[i+1].Content = append(vcs.Content[i+1].Content, scalar("server"), v)
			}
		}
	}
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}, notices, nil
}

// iniValue types a gcfg value for the YAML schema: gcfg's booleans for
// boolean keys, whole numbers for numeric keys, a string for the rest ("0123"
// stays a string).
func iniValue(key, v string) *yaml.Node {
	n := scalar(v)
	switch key {
	case "insecureFlag", "apiDisable", "inventory":
		n.Value = gcfgBool(v)
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

// gcfgBool maps gcfg's boolean spellings (case-insensitive) to YAML's;
// anything else is left for the type check to refuse.
func gcfgBool(v string) string {
	switch strings.ToLower(v) {
	case "1", "yes", "on", "true":
		return "true"
	case "0", "no", "off", "false":
		return "false"
	}
	return v
}
