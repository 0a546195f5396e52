package config

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// writeCA creates an (empty) CA file under t.TempDir(); Parse only checks
// that it exists.
func writeCA(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// CPI's pkg/common/config basicConfigYAML; caFile is substituted.
const cpiBasicYAML = `
global:
  server: 0.0.0.0
  port: 443
  user: user
  password: password
  insecureFlag: true
  datacenters:
    - us-west
  caFile: CAFILE
`

// CPI's pkg/common/config multiVCDCsUsingSecretConfigYAML.
const cpiMultiVCSecretsYAML = `
global:
  port: 443
  insecureFlag: true

vcenter:
  tenant1:
    server: 10.0.0.1
    datacenters:
      - vic0dc
    secretName: tenant1-secret
    secretNamespace: kube-system
  tenant2:
    server: 10.0.0.2
    datacenters:
      - vic1dc
    secretName: tenant2-secret
    secretNamespace: kube-system
  10.0.0.3:
    server: 10.0.0.3
    datacenters:
      - vicdc
    secretName: eu-secret
    secretNamespace: kube-system
`

// CPI's documented YAML cloud config (docs/book/cloud_config.md) with labels
// and nodes rules.
const cpiFullYAML = `
global:
  user: viadmin-global@vmware.local
  password: my-secure-global-password
  server: 10.0.0.1
  port: 443
  insecureFlag: true
  datacenters:
    - SDDC-Datacenter
  thumbprint: "AA:BB:CC"
  soapRoundtripCount: 1
  secretsDirectory: /etc/cloud/credentials
  ipFamily:
    - ipv4
    - ipv6

vcenter:
  10.0.0.1:
    server: 10.0.0.1
    user: viadmin@vmware.local
    password: my-secure-password
    datacenters:
      - SDDC-Datacenter

labels:
  region: k8s-region
  zone: k8s-zone

nodes:
  internalNetworkSubnetCidr: "192.0.2.0/24"
  externalNetworkSubnetCidr: "198.51.100.0/24"
  internalVmNetworkName: "Internal K8s Traffic"
  externalVmNetworkName: "External/Outbound Traffic"
  excludeInternalNetworkSubnetCidr: "192.0.2.0/24,fe80::1/128"
  excludeExternalNetworkSubnetCidr: "192.1.2.0/24,fe80::2/128"
`

const commaDatacentersYAML = `
global:
  server: vc.example.com
  user: u
  password: p
  datacenters: "dc1, dc2"
`

// defaults returns a VCenterConfig carrying every default.
func defaults(name, server string) VCenter {
	return VCenter{
		Name:           name,
		Server:         server,
		Port:           DefaultPort,
		IPFamily:       []string{IPv4},
		RoundTripCount: DefaultRoundTripCount,
		RequestTimeout: DefaultRequestTimeout,
		Breaker:        Breaker{ConsecutiveFailures: DefaultConsecutiveFailures, OpenTimeout: DefaultOpenTimeout},
		Inventory:      true,

		RequestsPerSecond: DefaultRequestsPerSecond,
		RequestBurst:      DefaultRequestBurst,
		NodeDeletion:      NodeDeletion{MinAbsence: DefaultMinAbsence},
	}
}

func with(vc VCenter, f func(*VCenter)) VCenter {
	f(&vc)
	return vc
}

func mustParse(t *testing.T, yaml string) *Config {
	t.Helper()
	cfg, err := Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

func checkVCenters(t *testing.T, got, want []VCenter) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d vCenters %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("vCenter %d:\n got  %+v\n want %+v", i, got[i], want[i])
		}
		if got[i].Password.Reveal() != want[i].Password.Reveal() {
			t.Errorf("vCenter %d: wrong password", i)
		}
	}
}

func TestParseCPIExamples(t *testing.T) {
	ca := writeCA(t, "ca.pem")
	tests := []struct {
		name  string
		yaml  string
		want  []VCenter
		check func(t *testing.T, cfg *Config)
	}{
		{
			name: "basic global-only",
			yaml: strings.Replace(cpiBasicYAML, "CAFILE", ca, 1),
			want: []VCenter{with(defaults("0.0.0.0", "0.0.0.0"), func(v *VCenter) {
				v.Datacenters = []string{"us-west"}
				v.InsecureFlag = true
				v.CAFile = ca
				v.User = "user"
				v.Password = "password"
			})},
		},
		{
			name: "multi vCenter with secrets",
			yaml: cpiMultiVCSecretsYAML,
			want: []VCenter{
				with(defaults("10.0.0.3", "10.0.0.3"), func(v *VCenter) {
					v.Datacenters = []string{"vicdc"}
					v.InsecureFlag = true
					v.CredentialsFrom, v.SecretName, v.SecretNamespace = FromSecret, "eu-secret", "kube-system"
				}),
				with(defaults("tenant1", "10.0.0.1"), func(v *VCenter) {
					v.Datacenters = []string{"vic0dc"}
					v.InsecureFlag = true
					v.CredentialsFrom, v.SecretName, v.SecretNamespace = FromSecret, "tenant1-secret", "kube-system"
				}),
				with(defaults("tenant2", "10.0.0.2"), func(v *VCenter) {
					v.Datacenters = []string{"vic1dc"}
					v.InsecureFlag = true
					v.CredentialsFrom, v.SecretName, v.SecretNamespace = FromSecret, "tenant2-secret", "kube-system"
				}),
			},
		},
		{
			name: "documented full config",
			yaml: cpiFullYAML,
			want: []VCenter{with(defaults("10.0.0.1", "10.0.0.1"), func(v *VCenter) {
				v.Datacenters = []string{"SDDC-Datacenter"}
				v.InsecureFlag = true
				v.Thumbprints = []string{"AA:BB:CC"}
				v.CredentialsFrom = FromDirectory
				v.User = "viadmin@vmware.local"
				v.Password = "my-secure-password"
				v.IPFamily = []string{IPv4, IPv6}
				v.RoundTripCount = 1
			})},
			check: func(t *testing.T, cfg *Config) {
				if cfg.SecretsDirectory != "/etc/cloud/credentials" {
					t.Errorf("SecretsDirectory = %q", cfg.SecretsDirectory)
				}
				if want := (Labels{Region: "k8s-region", Zone: "k8s-zone"}); cfg.Labels != want {
					t.Errorf("Labels = %+v, want %+v", cfg.Labels, want)
				}
				want := AddressRules{
					InternalSubnets:        []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
					ExternalSubnets:        []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
					ExcludeInternalSubnets: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("fe80::1/128")},
					ExcludeExternalSubnets: []netip.Prefix{netip.MustParsePrefix("192.1.2.0/24"), netip.MustParsePrefix("fe80::2/128")},
					InternalNetworkName:    "Internal K8s Traffic",
					ExternalNetworkName:    "External/Outbound Traffic",
				}
				if !reflect.DeepEqual(cfg.Nodes, want) {
					t.Errorf("Nodes =\n %+v, want\n %+v", cfg.Nodes, want)
				}
			},
		},
		{
			name: "datacenters as a comma-separated string",
			yaml: commaDatacentersYAML,
			want: []VCenter{with(defaults("vc.example.com", "vc.example.com"), func(v *VCenter) {
				v.Datacenters = []string{"dc1", "dc2"}
				v.User, v.Password = "u", "p"
			})},
		},
		{
			name: "datacenters list items may hold comma lists",
			yaml: "global: {server: vc, user: u, password: p, datacenters: [\"a,b\", c]}",
			want: []VCenter{with(defaults("vc", "vc"), func(v *VCenter) {
				v.Datacenters = []string{"a", "b", "c"}
				v.User, v.Password = "u", "p"
			})},
		},
		{
			// CPI adds global.server as a vCenter of its own next to the
			// vcenter sections unless a section is keyed by it.
			name: "global server next to vcenter sections",
			yaml: `
global:
  server: 10.0.0.9
  user: gu
  password: gp
vcenter:
  tenant1:
    server: 10.0.0.1
`,
			want: []VCenter{
				with(defaults("10.0.0.9", "10.0.0.9"), func(v *VCenter) { v.User, v.Password = "gu", "gp" }),
				with(defaults("tenant1", "10.0.0.1"), func(v *VCenter) { v.User, v.Password = "gu", "gp" }),
			},
		},
		{
			name: "global server also named by a section is not doubled",
			yaml: `
global: {server: 10.0.0.1, user: gu, password: gp}
vcenter:
  tenant1: {server: 10.0.0.1, port: 8443}
`,
			want: []VCenter{
				with(defaults("tenant1", "10.0.0.1"), func(v *VCenter) { v.User, v.Password, v.Port = "gu", "gp", 8443 }),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tt.yaml)
			checkVCenters(t, cfg.VCenters, tt.want)
			if tt.check != nil {
				tt.check(t, cfg)
			}
		})
	}
}

func TestParseInheritance(t *testing.T) {
	gca := writeCA(t, "global-ca.pem")
	vca := writeCA(t, "vc-ca.pem")
	yaml := strings.NewReplacer("GCA", gca, "VCA", vca).Replace(`
global:
  port: 8443
  user: guser
  password: gpass
  datacenters: [gdc]
  insecureFlag: true
  caFile: GCA
  thumbprint: "GG:GG"
  secretName: gsecret
  secretNamespace: gns
  ipFamily: [ipv6]
  soapRoundtripCount: 7
  requestTimeout: 20s
  breaker:
    consecutiveFailures: 9
    openTimeout: 1m
  inventory: false
  requestsPerSecond: 2.5
  requestBurst: 7
  nodeDeletion: {minAbsence: 45s}
vcenter:
  inherit:
    server: inherit.example.com
  override:
    server: override.example.com
    port: 9443
    user: vuser
    password: vpass
    datacenters: [vdc1, vdc2]
    insecureFlag: false
    caFile: VCA
    secretName: vsecret
    secretNamespace: vns
    ipFamily: [IPv4, ipv6]
    soapRoundtripCount: 1
    requestTimeout: 3s
    breaker:
      consecutiveFailures: 2
      openTimeout: 5s
    inventory: true
    thumbprint: ["VV:VV", "WW:WW"]
    requestsPerSecond: 40
    requestBurst: 3
    nodeDeletion: frozen
  zfailures:
    server: failures.example.com
    breaker:
      consecutiveFailures: 3
  zopen:
    server: open.example.com
    breaker:
      openTimeout: 2s
`)
	// Global names a Secret, so every vCenter without its own uses it
	// and keeps only its own user and password (CPI's rule).
	inherited := VCenter{
		Port:            8443,
		CredentialsFrom: FromSecret,
		Datacenters:     []string{"gdc"},
		InsecureFlag:    true,
		CAFile:          gca,
		Thumbprints:     []string{"GG:GG"},
		SecretName:      "gsecret",
		SecretNamespace: "gns",
		IPFamily:        []string{IPv6},
		RoundTripCount:  7,
		RequestTimeout:  20 * time.Second,
		Breaker:         Breaker{ConsecutiveFailures: 9, OpenTimeout: time.Minute},

		RequestsPerSecond: 2.5,
		RequestBurst:      7,
		NodeDeletion:      NodeDeletion{MinAbsence: 45 * time.Second},
	}
	named := func(name, server string, f func(*VCenter)) VCenter {
		v := inherited
		v.Name, v.Server = name, server
		v.Datacenters = append([]string(nil), inherited.Datacenters...)
		v.IPFamily = append([]string(nil), inherited.IPFamily...)
		if f != nil {
			f(&v)
		}
		return v
	}
	cfg := mustParse(t, yaml)
	checkVCenters(t, cfg.VCenters, []VCenter{
		named("inherit", "inherit.example.com", nil),
		{
			Name:            "override",
			Server:          "override.example.com",
			Port:            9443,
			User:            "vuser",
			Password:        "vpass",
			Datacenters:     []string{"vdc1", "vdc2"},
			InsecureFlag:    true, // CPI's rule: vCenter's or global's
			CredentialsFrom: FromSecret,
			CAFile:          vca,
			Thumbprints:     []string{"VV:VV", "WW:WW"},
			SecretName:      "vsecret",
			SecretNamespace: "vns",
			IPFamily:        []string{IPv4, IPv6},
			RoundTripCount:  1,
			RequestTimeout:  3 * time.Second,
			Breaker:         Breaker{ConsecutiveFailures: 2, OpenTimeout: 5 * time.Second},
			Inventory:       true,

			RequestsPerSecond: 40,
			RequestBurst:      3,
			NodeDeletion:      NodeDeletion{MinAbsence: 45 * time.Second, Frozen: true, FrozenBy: "vcenter.override.nodeDeletion"},
		},
		named("zfailures", "failures.example.com", func(v *VCenter) { v.Breaker.ConsecutiveFailures = 3 }),
		named("zopen", "open.example.com", func(v *VCenter) { v.Breaker.OpenTimeout = 2 * time.Second }),
	})

	// Resolved slices must not alias each other or the global ones.
	cfg.VCenters[0].Datacenters[0] = "changed"
	cfg.VCenters[0].IPFamily[0] = "changed"
	if cfg.VCenters[2].Datacenters[0] != "gdc" || cfg.VCenters[2].IPFamily[0] != IPv6 {
		t.Errorf("vCenters share inherited slices: %v %v", cfg.VCenters[2].Datacenters, cfg.VCenters[2].IPFamily)
	}
}

// A VCenter built by hand gets through WithDefaults what Parse gives a
// vCenter that sets nothing, and keeps what it sets.
func TestWithDefaultsIsParses(t *testing.T) {
	cfg := mustParse(t, "vcenter:\n  only:\n    server: vc\n    user: u\n    password: p\n")
	hand := VCenter{Name: "only", Server: "vc", User: "u", Password: "p", RoundTripCount: DefaultRoundTripCount, Inventory: true,
		NodeDeletion: NodeDeletion{MinAbsence: DefaultMinAbsence}}
	checkVCenters(t, []VCenter{hand.WithDefaults()}, cfg.VCenters)

	set := VCenter{Port: 8443, RequestTimeout: time.Second, Breaker: Breaker{ConsecutiveFailures: 2, OpenTimeout: time.Minute}, IPFamily: []string{IPv6},
		RequestsPerSecond: 0.5, RequestBurst: 1}
	if got := set.WithDefaults(); !reflect.DeepEqual(got, set) {
		t.Errorf("WithDefaults changed set values: %+v, want %+v", got, set)
	}
}

func TestParseDefaults(t *testing.T) {
	cfg := mustParse(t, "vcenter:\n  only:\n    server: vc\n    user: u\n    password: p\n")
	checkVCenters(t, cfg.VCenters, []VCenter{with(defaults("only", "vc"), func(v *VCenter) { v.User, v.Password = "u", "p" })})
	vc := cfg.VCenters[0]
	if vc.Port != 443 || vc.RequestTimeout != 10*time.Second || vc.Breaker.ConsecutiveFailures != 5 ||
		vc.Breaker.OpenTimeout != 30*time.Second || !reflect.DeepEqual(vc.IPFamily, []string{"ipv4"}) || !vc.Inventory {
		t.Errorf("defaults: %+v", vc)
	}
	if vc.Datacenters != nil {
		t.Errorf("Datacenters = %v, want none (every datacenter)", vc.Datacenters)
	}
	if !reflect.DeepEqual(cfg.Nodes, AddressRules{}) {
		t.Errorf("Nodes = %+v, want no rules", cfg.Nodes)
	}
}

func TestParseCredentialsSources(t *testing.T) {
	for _, yaml := range []string{
		"vcenter: {a: {server: vc, secretName: s, secretNamespace: ns}}",
		"global: {secretsDirectory: /etc/creds}\nvcenter: {a: {server: vc}}",
		"global: {user: u, password: p}\nvcenter: {a: {server: vc}}",
	} {
		if _, err := Parse([]byte(yaml)); err != nil {
			t.Errorf("Parse(%q): %v", yaml, err)
		}
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	yaml := `
global:
  user: u
  password: p
  requestTimeout: 0s
  bogus: 1
vcenter:
  east:
    datacenters: [dc]
  west:
    server: west.example.com
    serverr: typo.example.com
    ipFamily: ipv5
    breaker:
      consecutiveFailures: 0
nodes:
  internalNetworkSubnetCidr: "10.0.0.0/33"
`
	_, err := Parse([]byte(yaml))
	if err == nil {
		t.Fatal("Parse succeeded, want an error")
	}
	msg := err.Error()
	for _, want := range []string{
		"vcenter.east.server: required",
		"global.requestTimeout: must be > 0",
		"vcenter.west.breaker.consecutiveFailures: must be > 0",
		"nodes.internalNetworkSubnetCidr: not a CIDR (line 17)",
		"global.bogus: unknown key",
		"vcenter.west.serverr: unknown key",
		"vcenter.west.ipFamily: neither ipv4 nor ipv6 (line 13)",
		"7 problems", // the two unknown keys named beside the five errors
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error
	}{
		{"empty", "", []string{"empty"}},
		{"blank", " \n\t\n", []string{"empty"}},
		{"invalid YAML", "global: [unclosed", nil},
		{"tab indentation", "global:\n\tserver: vc\n", nil},
		{"not a mapping", "- a\n- b\n", []string{"the config: want a section of keys, got a list (line 1)"}},
		{"wrong type", "global: {server: vc, user: u, password: p, insecureFlag: [1]}", []string{"global.insecureFlag: want true or false, got a list (line 1)"}},
		{"section given a value", "global: {server: vc, user: u, password: p, breaker: 5}", []string{"global.breaker: want a section of keys, got a number (line 1)"}},
		{"list given a mapping", "global: {server: vc, user: u, password: p}\nvcenter: {a: {server: vc2, datacenters: {x: y}}}", []string{"vcenter.a.datacenters: want a list or a comma-separated string, got a mapping (line 2)"}},
		{"no vCenter", "global: {user: u, password: p}", []string{"vcenter: at least one vCenter"}},
		{"null document", "~", []string{"vcenter: at least one vCenter"}},
		{"no credentials", "vcenter: {a: {server: vc}}", []string{"vcenter.a: no credentials"}},
		// CPI: a Secret needs both keys; with one, inline credentials are
		// needed (and a typo'd key is named beside the error).
		{"secretName without namespace", "vcenter: {a: {server: vc, secretName: s}}", []string{"vcenter.a: no credentials"}},
		{"global secretName without namespace", "global: {secretName: s}\nvcenter: {a: {server: vc}}", []string{"vcenter.a: no credentials"}},
		{"typo beside an error", "global: {user: u, password: p}\nvcenter: {a: {sever: vc}}", []string{"vcenter.a.server: required", "vcenter.a.sever: unknown key (line 2)"}},
		{"password alone is no credentials", "vcenter: {a: {server: vc, password: p}}", []string{"vcenter.a: no credentials"}},
		{"bad vCenter port", "global: {user: u, password: p}\nvcenter: {a: {server: vc, port: 70000}}", []string{"vcenter.a.port: must be a number from 1 to 65535"}},
		{"bad global port", "global: {server: vc, user: u, password: p, port: https}", []string{"global.port: must be a number"}},
		{"zero port", "global: {server: vc, user: u, password: p, port: 0}", []string{"global.port"}},
		{"bad duration", "global: {server: vc, user: u, password: p}\nvcenter: {a: {server: vc2, requestTimeout: soon}}", []string{"vcenter.a.requestTimeout: not a duration (like 10s or 1m) (line 2)"}},
		{"negative open timeout", "global: {server: vc, user: u, password: p, breaker: {openTimeout: -1s}}", []string{"global.breaker.openTimeout: must be > 0"}},
		{"negative failures", "global: {server: vc, user: u, password: p, breaker: {consecutiveFailures: -1}}", []string{"global.breaker.consecutiveFailures: want a whole number, 0 or more, got a negative number (line 1)"}},
		{"several wrong types at once", "vcenter: {a: {server: vc, user: u, password: p, inventory: nope, port: [443]}}",
			[]string{"vcenter.a.inventory: want true or false, got a string (line 1)", "vcenter.a.port: want a single value, got a list"}},
		{"global ipFamily", "global: {server: vc, user: u, password: p, ipFamily: [ipv4, ipv5]}", []string{"vcenter.vc.ipFamily: entry 2 is neither ipv4 nor ipv6"}},
		{"bad external CIDR", "global: {server: vc, user: u, password: p}\nnodes: {externalNetworkSubnetCidr: '10.0.0.0/8,nope'}", []string{"nodes.externalNetworkSubnetCidr: entry 2 is not a CIDR (line 2)"}},
		{"bad exclude CIDR", "global: {server: vc, user: u, password: p}\nnodes: {excludeInternalNetworkSubnetCidr: '1.2.3.4'}", []string{"nodes.excludeInternalNetworkSubnetCidr"}},
		{"inventory not a boolean", "global: {server: vc, user: u, password: p, inventory: sometimes}", []string{"global.inventory: want true or false, got a string (line 1)"}},
		// yaml.v3 v3.0.1 panics on this; Parse must return an error.
		{"merge key next to a non-scalar key", "global: {user: u, password: p}\nvcenter:\n  a: {<<: {}, []: 1, server: vc}", []string{"yaml:"}},
		{"empty vcenter section", "global: {user: u, password: p}\nvcenter: {a: }", []string{"vcenter.a.server: required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded with %+v, want an error", cfg)
			}
			if cfg != nil {
				t.Errorf("Parse returned a config with its error: %+v", cfg)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

const secret = "Sup3rSecret!"

func TestPasswordNeverInErrors(t *testing.T) {
	for _, yaml := range []string{
		// Many problems next to the password.
		`
global:
  user: admin
  password: "Sup3rSecret!"
  port: nope
  requestTimeout: 0s
  passwd: x
vcenter:
  a:
    password: Sup3rSecret!
    secretName: s
  b:
    server: vc
    passwords: [Sup3rSecret!]
nodes:
  internalNetworkSubnetCidr: bad
`,
		// A password that is not a string.
		"global: {server: vc, user: u, password: [Sup3rSecret!]}",
		"global: {server: vc, user: u, password: {Sup3rSecret!: 1}}",
		// Broken YAML around it.
		"global:\n  password: \"Sup3rSecret!\n  server: [",
		"global:\n  password: Sup3rSecret!\n   server: vc\n",
	} {
		_, err := Parse([]byte(yaml))
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", yaml)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v", err), secret) {
			t.Errorf("error reveals the password: %v", err)
		}
	}
}

func TestPasswordRedactedWhenPrinted(t *testing.T) {
	cfg := mustParse(t, "global:\n  server: vc\n  user: admin\n  password: "+secret+"\n")
	if got := cfg.VCenters[0].Password.Reveal(); got != secret {
		t.Fatalf("Reveal() = %q, want the password", got)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, v := range []any{cfg, *cfg, cfg.VCenters, cfg.VCenters[0], cfg.VCenters[0].Password} {
			out := fmt.Sprintf(format, v)
			if strings.Contains(out, secret) {
				t.Errorf("Sprintf(%q, %T) reveals the password: %s", format, v, out)
			}
			if !strings.Contains(out, "redacted") {
				t.Errorf("Sprintf(%q, %T) = %s, want the redaction marker", format, v, out)
			}
		}
	}
}

// A config file is read as the CCM reads its --cloud-config: its bytes,
// parsed in the process's environment (cloud.NewFromFile, validate).
func TestParseFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "multi-vcenter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseIn(data, Env{})
	if err != nil {
		t.Fatalf("ParseIn: %v", err)
	}
	var names []string
	for _, vc := range cfg.VCenters {
		names = append(names, vc.Name+"="+vc.Server)
	}
	if want := []string{"east=vc-east.example.com", "west=vc-west.example.com"}; !reflect.DeepEqual(names, want) {
		t.Errorf("vCenters = %v, want %v", names, want)
	}
	if _, err := ParseIn([]byte("global: {bogus: 1}"), Env{}); err == nil || !strings.Contains(err.Error(), "global.bogus: unknown key") {
		t.Errorf("ParseIn(bad) = %v, want an error naming the key", err)
	}
}

// fuzzSeeds are the configs above plus malformed ones.
var fuzzSeeds = []string{
	cpiBasicYAML,
	cpiMultiVCSecretsYAML,
	cpiFullYAML,
	commaDatacentersYAML,
	"global: {server: vc, user: u, password: p, port: 443, requestTimeout: 1s, breaker: {consecutiveFailures: 1, openTimeout: 1s}}",
	"global: {server: 10.0.0.9, user: u, password: p}\nvcenter: {a: {server: 10.0.0.1}, 10.0.0.9: }",
	"",
	"~",
	"- a\n- b",
	"global: [unclosed",
	"global:\n\tserver: vc\n",
	"global: {server: vc, user: u, password: p, port: -1}",
	"global: {server: vc, user: u, password: p, port: 99999999999999999999}",
	"global: {server: '  ', user: u, password: p}",
	"global: &g {server: vc, user: u, password: p}\nvcenter: {a: *g, b: *g}",
	"vcenter: {a: {server: vc, breaker: {consecutiveFailures: 0, openTimeout: 0s}}}",
	"global: {server: vc, user: u, password: p, requestTimeout: 9223372036854775807ns}",
	"global: {server: vc, user: u, password: p, soapRoundtripCount: -3}",
	"global: {server: vc, user: u, password: p, ipFamily: IPV6}",
	"nodes: {internalNetworkSubnetCidr: ',,, ,'}",
	"global: {server: vc, user: u, password: p}\nvcenter: {? [a, b] : {server: x}}",
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(aliasBomb(5)))
	f.Add([]byte(cpiINI))
	f.Add([]byte("[Global]\nuser = u\npassword = \"p\\\"\"\n[VirtualCenter \"10.0.0.1\"]\ndatacenters = a,b\n[Labels]\nzone = z\n"))
	f.Add([]byte("vcenter:\n  a: &a {server: vc1, user: u, password: p}\n  b: {<<: *a, server: vc2}\n  c: {<<: [*a, {port: 1}], server: vc3}\n"))
	// A password aliased or pasted where another value belongs.
	f.Add([]byte("global: {user: u, password: &pw Hunter2-pw}\nvcenter:\n  a:\n    server: vc\n    <<: *pw\n"))
	f.Add([]byte("global: {user: u, password: &pw 83920175}\nvcenter: {a: {server: vc, port: *pw, breaker: *pw, requestTimeout: *pw, ipFamily: *pw}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("Parse returned a config with error %v", err)
			}
			checkNoPasswordIn(t, data, err)
			return
		}
		if cfg == nil || len(cfg.VCenters) == 0 {
			t.Fatalf("Parse succeeded without a vCenter: %+v", cfg)
		}
		for _, vc := range cfg.VCenters {
			switch {
			case strings.TrimSpace(vc.Server) == "":
				t.Fatalf("vCenter %q without server", vc.Name)
			case vc.Port < 1 || vc.Port > 65535:
				t.Fatalf("vCenter %q port %d", vc.Name, vc.Port)
			case vc.RequestTimeout <= 0:
				t.Fatalf("vCenter %q request timeout %v", vc.Name, vc.RequestTimeout)
			case vc.Breaker.ConsecutiveFailures == 0:
				t.Fatalf("vCenter %q breaker consecutiveFailures 0", vc.Name)
			case vc.Breaker.OpenTimeout <= 0:
				t.Fatalf("vCenter %q breaker openTimeout %v", vc.Name, vc.Breaker.OpenTimeout)
			case len(vc.IPFamily) == 0:
				t.Fatalf("vCenter %q without ipFamily", vc.Name)
			}
			for _, fam := range vc.IPFamily {
				if fam != IPv4 && fam != IPv6 {
					t.Fatalf("vCenter %q ipFamily %q", vc.Name, fam)
				}
			}
		}
	})
}

// checkNoPasswordIn fails t if err, Parse's error for data, quotes the
// value of one of data's password keys. A password that the error holds
// only because it is also a word or number of the message itself is
// told apart by parsing data again with the password disguised: the
// message still holds it then.
func checkNoPasswordIn(t *testing.T, data []byte, err error) {
	t.Helper()
	for pw, lines := range passwordsIn(data) {
		// Short ones are words of any message; a password written
		// elsewhere too (as a key, or escaped) is not told apart.
		if len(pw) < 6 || strings.Contains(pw, "\n") || !strings.Contains(err.Error(), pw) || !onlyOn(string(data), pw, lines) {
			continue
		}
		// Every letter or digit another of its kind.
		disguised := strings.Map(func(r rune) rune {
			for _, c := range []struct{ lo, hi, to, else_ rune }{{'a', 'z', 'x', 'y'}, {'A', 'Z', 'X', 'Y'}, {'0', '9', '7', '8'}} {
				if r >= c.lo && r <= c.hi {
					if r == c.to {
						return c.else_
					}
					return c.to
				}
			}
			return r
		}, pw)
		_, again := Parse([]byte(strings.ReplaceAll(string(data), pw, disguised)))
		if again == nil || !strings.Contains(again.Error(), pw) {
			t.Fatalf("the error quotes a password:\n%v\nconfig:\n%s", err, data)
		}
	}
}

// passwordsIn maps the values of data's password keys (the anchored
// value, for an alias) to the lines each is written on.
func passwordsIn(data []byte) map[string][]int {
	root := &yaml.Node{}
	if isINI(data) {
		n, _, err := iniToYAML(data)
		if err != nil {
			return nil
		}
		root = n
	} else if yaml.Unmarshal(data, root) != nil {
		return nil
	}
	out := map[string][]int{}
	seen := map[*yaml.Node]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			v := n.Content[i+1]
			if v.Kind == yaml.AliasNode && v.Alias != nil {
				v = v.Alias
			}
			if n.Content[i].Value == "password" && v.Kind == yaml.ScalarNode && !seen[v] {
				seen[v] = true
				out[v.Value] = append(out[v.Value], v.Line)
			}
		}
		for _, c := range n.Content {
			walk(c) // not into aliases: the anchored node is walked where it is
		}
	}
	walk(root)
	return out
}

// onlyOn reports whether s holds pw once per line of lines, on those
// lines only.
func onlyOn(s, pw string, lines []int) bool {
	n := 0
	for i, line := range strings.Split(s, "\n") {
		if c := strings.Count(line, pw); c > 0 {
			if !slices.Contains(lines, i+1) {
				return false
			}
			n += c
		}
	}
	return n == len(lines)
}

func TestParseAnchorsAndMerges(t *testing.T) {
	// yaml.v2 (CPI) and yaml.v3 both honour anchors and merge keys.
	cfg := mustParse(t, `
vcenter:
  a: &a
    user: u
    password: p
    datacenters: [dc]
    server: vc1
  b:
    <<: *a
    server: vc2
    port: 8443
  c:
    <<: [*a]
    server: vc3
`)
	checkVCenters(t, cfg.VCenters, []VCenter{
		with(defaults("a", "vc1"), func(v *VCenter) { v.User, v.Password, v.Datacenters = "u", "p", []string{"dc"} }),
		with(defaults("b", "vc2"), func(v *VCenter) { v.User, v.Password, v.Datacenters, v.Port = "u", "p", []string{"dc"}, 8443 }),
		with(defaults("c", "vc3"), func(v *VCenter) { v.User, v.Password, v.Datacenters = "u", "p", []string{"dc"} }),
	})

	// Unknown keys are still found behind aliases and merges (c is a
	// second entry of vc1, as CPI's tenants may be).
	cfg, err := Parse([]byte(`
vcenter:
  a: &a {server: vc1, user: u, password: p, serverr: x}
  b: {<<: *a, server: vc2}
  c: *a
`))
	if err != nil || !hasNotice(cfg, NoticeUnknown, "vcenter.a.serverr") {
		t.Errorf("Parse = %v, want a notice of vcenter.a.serverr", err)
	}
	cfg, err = Parse([]byte("base: &b {bogus: 1}\nglobal: {<<: *b, server: vc, user: u, password: p}"))
	if err != nil || !hasNotice(cfg, NoticeUnknown, "global.bogus") {
		t.Errorf("Parse = %v, want a notice of global.bogus", err)
	}
}

// aliasBomb nests aliases n wide and four deep: walking it alias by alias
// takes n^4 steps.
func aliasBomb(n int) string {
	var b strings.Builder
	b.WriteString("c: &C {")
	for range n {
		b.WriteString("openTimeout: 1s, ")
	}
	b.WriteString("}\nb: &B {")
	for range n {
		b.WriteString("breaker: *C, ")
	}
	b.WriteString("}\na: &A {")
	for i := range n {
		fmt.Fprintf(&b, "k%d: *B, ", i)
	}
	b.WriteString("}\n")
	for range n {
		b.WriteString("vcenter: *A\n")
	}
	return b.String()
}

func TestParseAliasBombIsFast(t *testing.T) {
	// Before aliases were checked once, this 7.6 kB input took ~30s.
	data := []byte(aliasBomb(150))
	start := time.Now()
	_, err := Parse(data)
	if err == nil {
		t.Fatal("Parse succeeded, want an error")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Parse of a %d-byte alias bomb took %v", len(data), d)
	}
}

// hasNotice reports whether cfg has a notice of kind whose path is path.
func hasNotice(cfg *Config, kind NoticeKind, path string) bool {
	for _, n := range cfg.Notices {
		if n.Kind == kind && n.Path == path {
			return true
		}
	}
	return false
}

// Problems found after decoding name their line too: the key's own, or
// its section's when the key is missing.
func TestValidationProblemsNameTheirLine(t *testing.T) {
	_, err := Parse([]byte("global:\n  port: 70000\nvcenter:\n  a:\n    user: u\n    password: p\n    requestTimeout: -1s\n"))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"global.port: must be a number from 1 to 65535 (line 2)",
		"vcenter.a.requestTimeout: must be > 0 (line 7)",
		"vcenter.a.server: required (line 4)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestNodesFollowTheirVMsKeys(t *testing.T) {
	base := "vcenter:\n  a:\n    server: vc.example.com\n    user: u\n    password: p\n"
	cfg, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ReconcileTopology || len(cfg.PlacementLabels) != 0 {
		t.Fatalf("defaults: reconcileTopology %v, placementLabels %v; want off, none", cfg.ReconcileTopology, cfg.PlacementLabels)
	}
	cfg, err = Parse([]byte(base + "nodes:\n  reconcileTopology: true\n  placementLabels: [host, resourcePool, host]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.ReconcileTopology || fmt.Sprint(cfg.PlacementLabels) != "[host resourcePool]" {
		t.Fatalf("reconcileTopology %v, placementLabels %v; want true, [host resourcePool]", cfg.ReconcileTopology, cfg.PlacementLabels)
	}
	_, err = Parse([]byte(base + "nodes:\n  placementLabels: host, rack\n"))
	if err == nil || !strings.Contains(err.Error(), "nodes.placementLabels: entry 2 is not a placement label: want any of host, cluster, resourcePool") {
		t.Fatalf("unknown placement label: err %v; want it named with the allowed values", err)
	}
}
