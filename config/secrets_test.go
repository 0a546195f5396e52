package config_test

import (
	"strings"
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// A config error reaches the log and a ConfigInvalid Event: it names the
// place of a problem and never quotes a password, in INI or YAML, however
// the line around it is broken.
func TestErrorsNeverQuoteAPassword(t *testing.T) {
	const pw = "S3cr3t-pw"
	for _, tc := range []struct{ name, cfg, where string }{
		{"INI unfinished escape", "[Global]\nuser = u\npassword = \"" + pw + "\\\n", "line 3"},
		{"INI missing closing quote", "[Global]\nuser = u\npassword = \"" + pw + "\n", "line 3"},
		{"INI escape before the quote", "[VirtualCenter \"vc\"]\nuser = u\npassword = \"a\\\"" + pw + "\n", "line 3"},
		{"INI no equals sign", "[Global]\nuser = u\npassword " + pw + "\n", "line 3"},
		{"YAML no space after the colon", "global:\n  password:" + pw + "\n", "line 2"},
		{"YAML no space, in a vcenter", "vcenter:\n  a:\n    password:" + pw + "\n", "line 3"},
		{"YAML equals sign", "vcenter:\n  a: password=" + pw + "\n", "line 2"},
		{"YAML space for the colon", "global:\n  server: vc\n  user: u\n  password " + pw + ": x\n", "line 4"},
		{"YAML typed password", "global: {server: vc, user: u, password: !!int " + pw + "}\n", "yaml"},
		{"YAML password in a typed list", "global: {server: vc, user: u, password: p, datacenters: [!!int " + pw + "]}\n", "global.datacenters"},
		{"YAML password as a list", "global: {server: vc, user: u, password: [" + pw + "]}\n", "global.password"},
		{"YAML broken flow mapping", "global: {server: vc, user: u, password: \"" + pw + "}\n", "line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.cfg))
			if err == nil {
				t.Fatalf("Parse accepted %q", tc.cfg)
			}
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("the error quotes the password: %v", err)
			}
			if !strings.Contains(err.Error(), tc.where) {
				t.Fatalf("the error %q does not name %q", err, tc.where)
			}
		})
	}
}
