package config

import (
	"fmt"
	"strings"
	"testing"
)

// marker is in every password below: no error may hold it, even in part
// (yaml.v3 quotes the first 7 characters of a long value).
const marker = "S3cr3t"

func TestErrorsNeverQuoteACredentialMoreForms(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"ini unfinished escape", "[Global]\nserver = vc\nuser = u\npassword = \"S3cr3t-\\\n", []string{"line 4", "unknown escape sequence"}},
		{"ini missing closing quote", "[Global]\nserver = vc\nuser = u\npassword = \"S3cr3t-\n", []string{"line 4", "string not terminated"}},
		{"ini password with spaces in the key", "[Global]\nserver = vc\nuser = u\npassword S3cr3t- = x\n", []string{"line 4"}},
		{"ini section header escape", "[Global]\nuser = u\n[VirtualCenter \"S3cr3t-\\]\n", []string{"line 3"}},
		{"yaml password tagged !!int", "global: {server: vc, user: u, password: !!int S3cr3t-x}", []string{"global.password"}},
		{"yaml password tagged !!bool", "global:\n  server: vc\n  user: u\n  password: !!bool S3cr3t-x\n", []string{"global.password", "(line 4)"}},
		{"yaml password tagged !!float", "global: {server: vc, user: u, password: !!float S3cr3t-x}", []string{"global.password"}},
		{"yaml password tagged !!timestamp", "global: {server: vc, user: u, password: !!timestamp S3cr3t-x}", []string{"global.password"}},
		{"yaml password tagged !!null", "global: {server: vc, user: u, password: !!null S3cr3t-x}", []string{"global.password"}},
		{"yaml password bad !!binary", "global: {server: vc, user: u, password: !!binary S3cr3t-x}", []string{"global.password"}},
		{"yaml password with a backtick, tagged", "global: {server: vc, user: u, password: !!int a`S3cr3t-x}", []string{"global.password"}},
		{"yaml user tagged !!int", "vcenter: {a: {server: vc, user: !!int S3cr3t-x}}", []string{"vcenter.a.user"}},
		{"yaml password a list", "global: {server: vc, user: u, password: [S3cr3t-]}", []string{"global.password"}},
		{"yaml password a mapping", "global: {server: vc, user: u, password: {S3cr3t-: 1}}", []string{"global.password"}},
		{"yaml no space after colon", "global:\n  password:S3cr3t-\n", []string{"(line 2)"}},
		{"yaml key = value", "vcenter:\n  a: password=S3cr3t-\n", []string{"(line 2)"}},
		{"yaml key with a space", "global:\n  server: vc\n  password S3cr3t-: x\n", []string{"(line 3"}},
		{"yaml unquoted password starting with *", "global:\n  server: vc\n  user: u\n  password: *S3cr3t-x\n", []string{"line 4", "quote it"}},
		{"yaml flow password starting with *", "global: {server: vc, user: u, password: *S3cr3t-x}", []string{"line 1", "quote it"}},
		{"yaml tagged list item", "global: {server: vc, user: u, password: p, datacenters: [!!int S3cr3t-x]}", []string{"global.datacenters"}},
		{"yaml unbalanced double quote", "global:\n  server: vc\n  password: \"S3cr3t-\\\n", []string{"line 3"}},
		{"yaml bad escape", "global:\n  server: vc\n  password: \"S3cr3t-\\q\"\n", []string{"line 3"}},
		{"yaml password line without colon", "global:\n  server: vc\n  password S3cr3t-\n", []string{"line 3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.config))
			if err == nil {
				t.Fatalf("Parse(%q) succeeded, want an error", tc.config)
			}
			for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err)} {
				if strings.Contains(s, marker) {
					t.Fatalf("error reveals the credential: %s", s)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestErrorsNeverQuoteAPasswordSweep(t *testing.T) {
	passwords := []string{
		`S3cr3t-\`, `S3cr3t-\\\`, `"S3cr3t-\`, `"S3cr3t-`, `S3cr3t-"`, `'S3cr3t-`, `S3cr3t-'`,
		"S3cr3t-\t\\", "\tS3cr3t-", `*S3cr3t-`, `&S3cr3t-`, `!S3cr3t-`, `!!int S3cr3t-`, `!!binary S3cr3t-`,
		`[S3cr3t-`, `{S3cr3t-`, `S3cr3t-]`, `S3cr3t-: x`, `S3cr3t- #x`, `%S3cr3t-`, `@S3cr3t-`, "`S3cr3t-",
		`|S3cr3t-`, `>S3cr3t-`, `"S3cr3t-\q"`, `"S3cr3t-\u12"`, `S3cr3t-, x`, `? S3cr3t-`, `- S3cr3t-`, "!!int a`S3cr3t",
	}
	templates := []string{
		"[Global]\nserver = vc\nuser = u\npassword = %s\n",
		"[VirtualCenter \"vc\"]\nuser = u\npassword = %s\nport = nope\n",
		"global:\n  server: vc\n  user: u\n  password: %s\n",
		"global:\n  password:%s\n",
		"global: {server: vc, user: u, password: %s}\n",
		"global:\n  server: vc\n  user: u\n  password: %s\n  datacenters: [a\n",
	}
	for _, tmpl := range templates {
		for _, pw := range passwords {
			config := fmt.Sprintf(tmpl, pw)
			_, err := Parse([]byte(config))
			if err != nil && strings.Contains(fmt.Sprintf("%v %+v", err, err), marker) {
				t.Errorf("Parse(%q) error reveals the password: %v", config, err)
			}
		}
	}
}
