package config

import (
	"strings"
	"testing"
)

// CPI's tenants (TenantRef): several vcenter entries may name one server,
// each with its own credentials and datacenters. CPI keys its instances by
// the entry's name (the tenant), and looks credentials up in a Secret by
// the server. Before this was accepted, such a config was refused at load
// ("the server of vcenter.X too"): a CPI config that crash-looped us.

// Two tenants of one server, each with its own Secret and datacenters
// (the form of CPI's multiVCDCsUsingSecretConfigYAML, with one server).
const tenantsOneServerYAML = `
global:
  port: 443
  insecureFlag: true
vcenter:
  tenant1:
    server: 10.0.0.1
    datacenters: [vic0dc]
    secretName: tenant1-secret
    secretNamespace: kube-system
  tenant2:
    server: 10.0.0.1
    datacenters: [vic1dc]
    secretName: tenant2-secret
    secretNamespace: kube-system
`

// The INI form: a tenant-named section with server = (CPI's
// config_ini_legacy validateConfig: an explicit server makes the section
// name the TenantRef), beside a section named by the server itself.
const tenantsOneServerINI = `
[Global]
port = 443
insecure-flag = true

[VirtualCenter "tenant1"]
server = "10.0.0.1"
datacenters = "vic0dc"
secret-name = "tenant1-secret"
secret-namespace = "kube-system"

[VirtualCenter "tenant2"]
server = "10.0.0.1"
datacenters = "vic1dc"
secret-name = "tenant2-secret"
secret-namespace = "kube-system"

[VirtualCenter "10.0.0.1"]
datacenters = "vicdc"
secret-name = "eu-secret"
secret-namespace = "kube-system"
`

func tenant(name, server, dc, secret string) VCenter {
	return with(defaults(name, server), func(v *VCenter) {
		v.Datacenters = []string{dc}
		v.InsecureFlag = true
		v.CredentialsFrom, v.SecretName, v.SecretNamespace = FromSecret, secret, "kube-system"
	})
}

func TestTenantsOfOneServerYAML(t *testing.T) {
	cfg := mustParse(t, tenantsOneServerYAML)
	checkVCenters(t, cfg.VCenters, []VCenter{
		tenant("tenant1", "10.0.0.1", "vic0dc", "tenant1-secret"),
		tenant("tenant2", "10.0.0.1", "vic1dc", "tenant2-secret"),
	})
	if n := sharedLoginNotices(cfg); len(n) != 0 {
		t.Errorf("tenants with their own Secrets got %v", n)
	}
}

func TestTenantsOfOneServerINI(t *testing.T) {
	cfg := mustParse(t, tenantsOneServerINI)
	checkVCenters(t, cfg.VCenters, []VCenter{
		tenant("10.0.0.1", "10.0.0.1", "vicdc", "eu-secret"),
		tenant("tenant1", "10.0.0.1", "vic0dc", "tenant1-secret"),
		tenant("tenant2", "10.0.0.1", "vic1dc", "tenant2-secret"),
	})
}

// sharedLoginNotices are cfg's notices that entries log in as one user.
func sharedLoginNotices(cfg *Config) []Notice {
	var out []Notice
	for _, n := range cfg.Notices {
		if strings.Contains(n.Reason, "logs in as vcenter.") {
			out = append(out, n)
		}
	}
	return out
}

// Secret keys are per server (<server>.username, CPI's credential
// manager): two entries of one server reading the same Secret, or the
// secrets directory, get one login. That loads (CPI's config), with a
// Notice saying so; entries with their own Secret, or their own user and
// password (tried first), differ.
func TestTenantsSharingCredentials(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		want         []string // paths of the notices
	}{
		{"one global Secret", `
global: {secretName: vc-creds, secretNamespace: kube-system}
vcenter:
  a: {server: vc1, datacenters: [dc1]}
  b: {server: VC1, datacenters: [dc2]}
`, []string{"vcenter.b"}},
		{"one Secret named by both", `
vcenter:
  a: {server: vc1, secretName: s, secretNamespace: ns}
  b: {server: vc1, secretName: s, secretNamespace: ns}
  c: {server: vc1, secretName: s, secretNamespace: ns}
`, []string{"vcenter.b", "vcenter.c"}},
		{"the secrets directory", `
global: {secretsDirectory: /etc/creds}
vcenter:
  a: {server: vc1}
  b: {server: vc1}
`, []string{"vcenter.b"}},
		{"different Secrets", `
vcenter:
  a: {server: vc1, secretName: s1, secretNamespace: ns}
  b: {server: vc1, secretName: s2, secretNamespace: ns}
`, nil},
		{"own user beside the global Secret", `
global: {secretName: vc-creds, secretNamespace: kube-system}
vcenter:
  a: {server: vc1}
  b: {server: vc1, user: tenant-b, password: p}
`, nil},
		{"other port, other vCenter", `
global: {secretName: vc-creds, secretNamespace: kube-system}
vcenter:
  a: {server: vc1}
  b: {server: vc1, port: 8443}
`, nil},
		{"inline credentials", `
global: {user: u, password: p}
vcenter:
  a: {server: vc1, datacenters: [dc1]}
  b: {server: vc1, datacenters: [dc2]}
`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, tc.config)
			var got []string
			for _, n := range sharedLoginNotices(cfg) {
				got = append(got, n.Path)
				if n.Kind != NoticeDiffers || !strings.Contains(n.String(), "<server>.username") {
					t.Errorf("notice %v: want a NoticeDiffers naming the key <server>.username", n)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("shared-login notices on %v, want %v (all: %v)", got, tc.want, cfg.Notices)
			}
		})
	}
}

// The server as the password (a misplaced anchor) on two entries loads
// now; no notice may quote it.
func TestTwoEntriesOfAPasswordServerQuoteNothing(t *testing.T) {
	const pw = "Hunter2-pw"
	for _, c := range []string{
		"global: {secretName: s, secretNamespace: ns, password: &pw " + pw + "}\nvcenter: {a: {server: *pw}, b: {server: *pw}}\n",
		"[Global]\nsecret-name = s\nsecret-namespace = ns\n[VirtualCenter \"a\"]\nserver = " + pw + "\n[VirtualCenter \"b\"]\nserver = " + pw + "\n",
	} {
		cfg := mustParse(t, c)
		if len(cfg.VCenters) != 2 || len(sharedLoginNotices(cfg)) != 1 {
			t.Errorf("got %d vCenters and notices %v, want 2 and one shared-login notice", len(cfg.VCenters), cfg.Notices)
		}
		for _, n := range cfg.Notices {
			if strings.Contains(n.String(), pw) {
				t.Errorf("notice quotes the password: %v", n)
			}
		}
	}
}
