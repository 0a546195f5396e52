package config

import (
	"fmt"
	"strings"
	"testing"
)

// cpiINI is an INI cloud config in the shape CPI documents (every section
// and key of its spec; CPI's own file is read from ../shared/cpi by
// TestEveryCPISampleReadsAsCPIReadsIt): global values the one vCenter's
// section overrides, quotes, a comment after a value, unquoted labels.
const cpiINI = `[Global]
  datacenters = "dc-global"
  insecure-flag = "1" # the vCenter's certificate is self-signed
  user = "global-user@vsphere.local"
  password = "global-password"
  server = "192.0.2.10"
  port = "443"
  thumbprint = "AA:BB:CC"
  soap-roundtrip-count = "1"
  secret-name = ""
  secret-namespace = ""
  ip-family = "ipv4"

[VirtualCenter "192.0.2.10"]
  user = "ccm@vsphere.local"
  password = "section-password"
  port = "443"
  datacenters = "dc-east"
  soap-roundtrip-count = "1"
  thumbprint = ""
  secret-name = ""
  secret-namespace = ""

[Labels]
  region = region-category
  zone = zone-category

[Nodes]
  internal-network-subnet-cidr = "192.0.2.0/24"
  external-network-subnet-cidr = "198.51.100.0/24"
  internal-vm-network-name = "Internal Network"
  external-vm-network-name = "Public/Network"
  exclude-internal-network-subnet-cidr = "192.0.2.0/24,fe80::1/128"
  exclude-external-network-subnet-cidr = "192.1.2.0/24,fe80::2/128"
`

func TestCPIINILoads(t *testing.T) {
	cfg, err := Parse([]byte(cpiINI))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.VCenters) != 1 {
		t.Fatalf("vCenters = %+v, want one (the global server is the same vCenter)", cfg.VCenters)
	}
	vc := cfg.VCenters[0]
	// An empty thumbprint in the section does not clear global's (CPI).
	if vc.Name != "192.0.2.10" || vc.Server != "192.0.2.10" || vc.Port != 443 || !vc.InsecureFlag ||
		vc.User != "ccm@vsphere.local" || vc.Password.Reveal() != "section-password" ||
		strings.Join(vc.Datacenters, ",") != "dc-east" || vc.RoundTripCount != 1 || strings.Join(vc.Thumbprints, ",") != "AA:BB:CC" {
		t.Fatalf("vCenter = %+v", vc)
	}
	if cfg.Labels.Zone != "zone-category" || cfg.Labels.Region != "region-category" {
		t.Fatalf("labels = %+v", cfg.Labels)
	}
	n := cfg.Nodes
	if len(n.InternalSubnets) != 1 || n.InternalSubnets[0].String() != "192.0.2.0/24" || len(n.ExcludeExternalSubnets) != 2 ||
		n.InternalNetworkName != "Internal Network" || n.ExternalNetworkName != "Public/Network" {
		t.Fatalf("nodes = %+v", n)
	}
}

func TestINIForms(t *testing.T) {
	for _, tc := range []struct {
		name, ini string
		check     func(*testing.T, *Config)
		wantErr   []string
	}{
		{
			name: "several vCenters by section name, a server key overrides the name, escapes",
			ini: "; comment\n[Global]\nsecret-name = creds\nsecret-namespace = kube-system\ninsecure-flag = yes\n" +
				"[VirtualCenter \"10.0.0.1\"]\ndatacenters = \"a, b\"\n" +
				"[VirtualCenter \"west\"]\nserver = \"10.0.0.2\"\nport = 8443\n" +
				"[VirtualCenter \"east\"]\nserver = 10.0.0.3\nuser = admin\npassword = \"p\\\"w;#\"\n" +
				"[Workspace]\nfolder = kubernetes\n",
			check: func(t *testing.T, c *Config) {
				if len(c.VCenters) != 3 {
					t.Fatalf("vCenters = %+v", c.VCenters)
				}
				byName := map[string]VCenter{}
				for _, vc := range c.VCenters {
					byName[vc.Name] = vc
				}
				if vc := byName["10.0.0.1"]; vc.Server != "10.0.0.1" || strings.Join(vc.Datacenters, "|") != "a|b" || !vc.InsecureFlag || vc.SecretName != "creds" {
					t.Errorf("10.0.0.1 = %+v", vc)
				}
				if vc := byName["west"]; vc.Server != "10.0.0.2" || vc.Port != 8443 {
					t.Errorf("west = %+v", vc)
				}
				if vc := byName["east"]; vc.Password.Reveal() != `p"w;#` || vc.User != "admin" {
					t.Errorf("east credentials not unquoted: user %q", vc.User)
				}
			},
		},
		{
			name: "unknown key, by path: a notice",
			ini:  "[Global]\nuser = u\npassword = p\nbogus-key = 1\n[VirtualCenter \"vc\"]\n",
			check: func(t *testing.T, c *Config) {
				if !hasNotice(c, NoticeUnknown, "global.bogusKey") || !strings.Contains(fmt.Sprint(c.Notices), "(line 4)") {
					t.Errorf("notices = %v, want global.bogusKey at line 4", c.Notices)
				}
			},
		},
		{
			name:    "values of the wrong type, by path and INI line",
			ini:     "[Global]\nuser = u\ninsecure-flag = maybe\n[VirtualCenter \"vc\"]\nsoap-roundtrip-count = many\n",
			wantErr: []string{"global.insecureFlag: want true or false, got a string (line 3)", "vcenter.vc.soapRoundtripCount: want a whole number, 0 or more, got a string (line 5)"},
		},
		{
			name:    "malformed lines",
			ini:     "[Global\nuser = u\n",
			wantErr: []string{"missing ]"},
		},
		{
			name:    "unclosed section header",
			ini:     "[Global]\n[VirtualCenter\n",
			wantErr: []string{"line 2: section header: missing ]"},
		},
		{
			name:    "unnamed VirtualCenter",
			ini:     "[VirtualCenter]\nuser = u\n",
			wantErr: []string{"needs a name"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.ini))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Parse accepted %q", tc.ini)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Fatalf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg)
		})
	}
}
