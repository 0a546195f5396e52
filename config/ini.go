package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// isINI reports whether data is CPI's legacy INI (gcfg) form: its first
// meaningful line opens a section.
func isINI(data []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		return line[0] == '['
	}
	return false
}

// iniToYAML turns CPI's INI config into the YAML tree Parse validates, so
// both forms share one schema, one set of defaults and one validation:
//
//	[Global]                    -> global
//	[VirtualCenter "10.0.0.1"]  -> vcenter."10.0.0.1"
//	[Labels], [Nodes]           -> labels, nodes
//	insecure-flag = "1"         -> insecureFlag: true
//
// Keys are kebab-case in INI and camelCase in YAML; values are left for
// YAML to type, except gcfg's booleans (1/0, yes/no, on/off).
func iniToYAML(data []byte) (*yaml.Node, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	var section *yaml.Node
	get := func(parent *yaml.Node, key string) *yaml.Node {
		if n := find(parent, key); n != nil {
			return n
		}
		n := &yaml.Node{Kind: yaml.MappingNode}
		parent.Content = append(parent.Content, scalar(key), n)
		return n
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			name, sub, err := parseSectionHeader(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", lineNo, err)
			}
			switch strings.ToLower(name) {
			case "global":
				section = get(root, "global")
			case "virtualcenter":
				if sub == "" {
					return nil, fmt.Errorf("line %d: [VirtualCenter] needs a name: [VirtualCenter \"<server>\"]", lineNo)
				}
				section = get(get(root, "vcenter"), sub)
			case "labels", "nodes":
				section = get(root, strings.ToLower(name))
			default:
				// Sections CPI's INI has for other components (Workspace,
				// Disk, Network) are ignored, as CPI does.
				section = &yaml.Node{Kind: yaml.MappingNode}
			}
			continue
		}
		if section == nil {
			return nil, fmt.Errorf("line %d: key outside a section", lineNo)
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: want key = value", lineNo)
		}
		v, err := unquote(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		k := camel(strings.TrimSpace(key))
		val := scalar(v)
		if k == "insecureFlag" || k == "apiDisable" {
			val = scalar(gcfgBool(v))
		}
		if k == "user" || k == "password" || k == "server" || k == "port" || k == "thumbprint" {
			val.Tag = "!!str" // "0123" stays a string
		}
		kn := scalar(k)
		kn.Line, val.Line = lineNo, lineNo // so errors point into the INI file
		section.Content = append(section.Content, kn, val)
	}
	if err := sc.Err(); err != nil {
		return nil, err
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
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}, nil
}

func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

// find returns the value under key in mapping m.
func find(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// parseSectionHeader splits `[Name "sub"]`.
func parseSectionHeader(line string) (name, sub string, err error) {
	if !strings.HasSuffix(line, "]") {
		return "", "", fmt.Errorf("section header %q: missing ]", line)
	}
	inner := strings.TrimSpace(line[1 : len(line)-1])
	name, rest, _ := strings.Cut(inner, " ")
	if rest = strings.TrimSpace(rest); rest != "" {
		if sub, err = unquote(rest); err != nil {
			return "", "", err
		}
	}
	return name, sub, nil
}

// unquote removes gcfg's double quotes and escapes.
func unquote(v string) (string, error) {
	if !strings.HasPrefix(v, `"`) {
		// Unquoted: a trailing comment ends the value.
		if i := strings.IndexAny(v, "#;"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		return v, nil
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; c {
		case '"':
			return b.String(), nil
		case '\\':
			if i+1 >= len(v) {
				// The value may be a password: never quoted.
				return "", errors.New("unfinished escape at the end of a quoted value")
			}
			i++
			switch v[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(v[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("missing closing quote")
}

// camel turns gcfg's kebab-case keys into the YAML names.
func camel(key string) string {
	parts := strings.Split(strings.ToLower(key), "-")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// gcfgBool maps gcfg's boolean spellings to YAML's.
func gcfgBool(v string) string {
	switch strings.ToLower(v) {
	case "1", "yes", "on", "true":
		return "true"
	case "0", "no", "off", "false", "":
		return "false"
	}
	return v
}
