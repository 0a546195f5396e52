package config

import (
	"fmt"
	"strings"
	"testing"
)

// A password that ends up under another key (an alias of its anchor, a
// merge key, a line pasted in the wrong place) is reported by the key's
// path and line, and never quoted: the error reaches the log, the
// ConfigInvalid Event and validate's output.
func TestErrorsNeverQuoteAMisplacedPassword(t *testing.T) {
	const pw = "Hunter2-pw"
	const num = "83920175" // a password YAML reads as a number
	head := "global: {user: u, password: &pw " + pw + "}\n"
	for _, tc := range []struct {
		name, config, password string
		want                   []string
	}{
		{"merge key aliasing the password", head + "vcenter:\n  a:\n    server: vc\n    <<: *pw\n", pw, []string{"vcenter.a: want a section of keys, got a string (line 1)"}},
		{"merge key in vcenter", head + "vcenter:\n  a: {server: vc}\n  <<: *pw\n", pw, []string{"vcenter: want a section of keys"}},
		{"the password as a vcenter section", head + "vcenter:\n  a: *pw\n", pw, []string{"vcenter.a: want a section of keys"}},
		{"the password as vcenter", head + "vcenter: *pw\n", pw, []string{"vcenter: want a section of keys"}},
		{"the password as labels", head + "vcenter: {a: {server: vc}}\nlabels: *pw\n", pw, []string{"labels: want a section of keys"}},
		{"the password as a breaker", head + "vcenter: {a: {server: vc, breaker: *pw}}\n", pw, []string{"vcenter.a.breaker: want a section of keys"}},
		{"the password as a port", head + "vcenter: {a: {server: vc, port: *pw}}\n", pw, []string{"vcenter.a.port: must be a number from 1 to 65535 (line 2)"}},
		{"the password as insecureFlag", head + "vcenter: {a: {server: vc, insecureFlag: *pw}}\n", pw, []string{"vcenter.a.insecureFlag: want true or false, got a string"}},
		{"the password as soapRoundtripCount", head + "vcenter: {a: {server: vc, soapRoundtripCount: *pw}}\n", pw, []string{"vcenter.a.soapRoundtripCount: want a whole number"}},
		{"the password as consecutiveFailures", head + "vcenter: {a: {server: vc, breaker: {consecutiveFailures: *pw}}}\n", pw, []string{"vcenter.a.breaker.consecutiveFailures: want a whole number"}},
		{"the password as requestTimeout", head + "vcenter: {a: {server: vc, requestTimeout: *pw}}\n", pw, []string{"vcenter.a.requestTimeout: not a duration", "(line 2)"}},
		{"the password as ipFamily", head + "vcenter: {a: {server: vc, ipFamily: [ipv4, *pw]}}\n", pw, []string{"vcenter.a.ipFamily: entry 2 is neither ipv4 nor ipv6"}},
		{"the password as a CIDR", head + "vcenter: {a: {server: vc}}\nnodes: {internalNetworkSubnetCidr: *pw}\n", pw, []string{"nodes.internalNetworkSubnetCidr: not a CIDR (line 3)"}},
		{"the password as a vCenter's name", head + "vcenter:\n  *pw : {server: vc}\n", pw, []string{"vcenter: a key may not be an alias", "(line 3)"}},
		{"the password as a vCenter's name, explicit key", head + "vcenter:\n  ? *pw\n  : {server: vc}\n", pw, []string{"vcenter: a key may not be an alias", "(line 3)"}},
		{"the password as a key of a section", head + "vcenter:\n  a: {server: vc, *pw : 1}\n", pw, []string{"vcenter.a: a key may not be an alias"}},
		{"a numeric password as a breaker", "global: {user: u, password: &pw " + num + "}\nvcenter: {a: {server: vc, breaker: *pw}}\n", num, []string{"vcenter.a.breaker: want a section of keys, got a number"}},
		{"a numeric password as a port", "global: {user: u, password: &pw " + num + "}\nvcenter: {a: {server: vc, port: *pw}}\n", num, []string{"vcenter.a.port: must be a number from 1 to 65535"}},
		{"a password pasted under port", "global: {user: u, password: " + pw + "}\nvcenter: {a: {server: vc, port: " + pw + "}}\n", pw, []string{"vcenter.a.port"}},
		{"a password pasted under inventory", "global: {user: u, password: " + pw + ", inventory: " + pw + "}\nvcenter: {a: {server: vc}}\n", pw, []string{"global.inventory: want true or false, got a string (line 1)"}},
		{"the document is the password", pw + "\n", pw, []string{"the config: want a section of keys, got a string (line 1)"}},
		{"ini password as a port", "[Global]\nuser = u\npassword = " + pw + "\nport = " + pw + "\n[VirtualCenter \"vc\"]\n", pw, []string{"global.port: must be a number from 1 to 65535 (line 4)"}},
		{"ini numeric password as a port", "[Global]\nuser = u\npassword = " + num + "\nport = " + num + "\n[VirtualCenter \"vc\"]\n", num, []string{"global.port: must be a number from 1 to 65535 (line 4)"}},
		{"ini password as insecure-flag", "[Global]\nuser = u\npassword = " + pw + "\ninsecure-flag = " + pw + "\n[VirtualCenter \"vc\"]\n", pw, []string{"global.insecureFlag: want true or false, got a string (line 4)"}},
		{"ini password as soap-roundtrip-count", "[Global]\nuser = u\npassword = " + pw + "\nsoap-roundtrip-count = " + pw + "\n[VirtualCenter \"vc\"]\n", pw, []string{"global.soapRoundtripCount: want a whole number"}},
		{"ini password as request-timeout", "[Global]\nuser = u\npassword = " + pw + "\nrequest-timeout = " + pw + "\n[VirtualCenter \"vc\"]\n", pw, []string{"global.requestTimeout: not a duration"}},
		{"ini password as ip-family", "[Global]\nuser = u\npassword = " + pw + "\n[VirtualCenter \"vc\"]\nip-family = " + pw + "\n", pw, []string{"vcenter.vc.ipFamily: neither ipv4 nor ipv6 (line 5)"}},
		{"ini password as breaker", "[Global]\nuser = u\npassword = " + pw + "\n[VirtualCenter \"vc\"]\nbreaker = " + pw + "\n", pw, []string{"vcenter.vc.breaker: want a section of keys, got a string (line 5)"}},
		{"ini password as a CIDR", "[Global]\nuser = u\npassword = " + pw + "\n[VirtualCenter \"vc\"]\n[Nodes]\ninternal-network-subnet-cidr = " + pw + "\n", pw, []string{"nodes.internalNetworkSubnetCidr: not a CIDR (line 6)"}},
		{"ini illegal character in a pasted password", "[Global]\nuser = u\npassword = p\n" + pw + "!\n[VirtualCenter \"vc\"]\n", "!", []string{"line 4", "illegal character"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.config))
			if err == nil {
				t.Fatalf("Parse(%q) succeeded, want an error", tc.config)
			}
			msg := fmt.Sprintf("%v %+v", err, err)
			if strings.Contains(msg, tc.password) {
				t.Errorf("the error quotes the password: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
