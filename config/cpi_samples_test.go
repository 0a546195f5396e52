package config

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/cpisamples"
)

// cpiView is what CPI's own parser (ReadCPIConfig, run by test/cpiconfig)
// read from a sample: golden/<sample>.json in the CPI samples folder
// (test/cpisamples).
type cpiView struct {
	Error  string `json:"error"`
	Global struct {
		SecretName, SecretNamespace, SecretsDirectory string
	} `json:"global"`
	VCenters map[string]struct {
		Server, Port, User, Password           string
		InsecureFlag                           bool
		Datacenters                            []string
		CAFile, Thumbprint                     string
		SecretRef, SecretName, SecretNamespace string
		RoundTripperCount                      uint
		IPFamily                               []string
	} `json:"vcenters"`
	Labels Labels `json:"labels"`
	Nodes  struct {
		InternalNetworkSubnetCidr, ExternalNetworkSubnetCidr               string
		InternalVmNetworkName, ExternalVmNetworkName                       string
		ExcludeInternalNetworkSubnetCidr, ExcludeExternalNetworkSubnetCidr string
	} `json:"nodes"`
}

// cpiRejectsWeAccept are samples CPI refuses that load here, and why
// accepting them is right.
var cpiRejectsWeAccept = map[string]string{
	"doc-cloud-config-spec.ini": "an empty soap-roundtrip-count: CPI fails to parse \"\" as a number, we take the default (3)",
}

// Every sample config CPI ships (its tests, docs, release manifests and
// rendered Helm chart) loads here, and what we read from it equals what
// CPI's own parser reads: vCenters, servers, ports, TLS settings,
// datacenters, where credentials come from, labels, every nodes.* rule and
// ipFamily. Samples CPI rejects are rejected here too, unless listed in
// cpiRejectsWeAccept. The samples and golden files are CPI's: the
// repository does not hold them (test/cpisamples finds them, or skips).
func TestEveryCPISampleReadsAsCPIReadsIt(t *testing.T) {
	samplesDir, goldenDir := cpisamples.Path(t, "samples"), cpisamples.Path(t, "golden")
	samples, err := filepath.Glob(filepath.Join(samplesDir, "*"))
	if err != nil || len(samples) == 0 {
		t.Fatalf("no samples in %s: %v", samplesDir, err)
	}
	checked := 0
	for _, path := range samples {
		name := filepath.Base(path)
		if strings.HasSuffix(name, ".secret.yaml") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var want cpiView
			golden, err := os.ReadFile(filepath.Join(goldenDir, name+".json"))
			if err != nil {
				t.Fatalf("no golden for %s: %v", name, err)
			}
			if err := json.Unmarshal(golden, &want); err != nil {
				t.Fatal(err)
			}
			checked++
			cfg, err := Parse(data)
			if want.Error != "" {
				if why, ok := cpiRejectsWeAccept[name]; ok {
					if err != nil {
						t.Fatalf("CPI rejects it (%s), and we accept it by design (%s), but Parse: %v", want.Error, why, err)
					}
					return
				}
				if err == nil {
					t.Fatalf("CPI rejects it (%s); Parse accepted it", want.Error)
				}
				return
			}
			if err != nil {
				t.Fatalf("CPI reads it; Parse: %v", err)
			}
			compareWithCPI(t, cfg, &want)
		})
	}
	if checked < 60 {
		t.Errorf("%d samples checked, want every one (60+)", checked)
	}
}

func compareWithCPI(t *testing.T, cfg *Config, want *cpiView) {
	t.Helper()
	got := map[string]VCenter{}
	for _, vc := range cfg.VCenters {
		got[vc.Name] = vc
	}
	var names []string
	for name := range want.VCenters {
		names = append(names, name)
	}
	slices.Sort(names)
	if len(got) != len(names) {
		t.Errorf("vCenters %v, CPI's %v", cfg.VCenters, names)
	}
	for _, name := range names {
		w := want.VCenters[name]
		vc, ok := got[name]
		if !ok {
			t.Errorf("vCenter %q: CPI has it, we do not", name)
			continue
		}
		if vc.Server != w.Server || strconv.Itoa(vc.Port) != w.Port || vc.InsecureFlag != w.InsecureFlag ||
			vc.CAFile != w.CAFile || strings.Join(vc.Thumbprints, ",") != w.Thumbprint || vc.RoundTripCount != w.RoundTripperCount {
			t.Errorf("vCenter %q: server %s port %d insecure %v caFile %q thumbprint %q roundtrips %d; CPI: %s %s %v %q %q %d",
				name, vc.Server, vc.Port, vc.InsecureFlag, vc.CAFile, vc.Thumbprints, vc.RoundTripCount,
				w.Server, w.Port, w.InsecureFlag, w.CAFile, w.Thumbprint, w.RoundTripperCount)
		}
		if !slices.Equal(vc.Datacenters, w.Datacenters) && (len(vc.Datacenters) != 0 || len(w.Datacenters) != 0) {
			t.Errorf("vCenter %q: datacenters %q, CPI's %q", name, vc.Datacenters, w.Datacenters)
		}
		var fams []string
		for _, f := range w.IPFamily {
			fams = append(fams, strings.ToLower(strings.TrimSpace(f))) // CPI keeps " ipv4" of "ipv6, ipv4", then matches no address with it
		}
		if !slices.Equal(vc.IPFamily, fams) {
			t.Errorf("vCenter %q: ipFamily %q, CPI's %q", name, vc.IPFamily, w.IPFamily)
		}
		compareCredentials(t, name, vc, cfg, want, w.SecretRef, w.User, w.Password)
	}
	if cfg.Labels != want.Labels {
		t.Errorf("labels %+v, CPI's %+v", cfg.Labels, want.Labels)
	}
	n := want.Nodes
	for _, c := range []struct {
		path string
		got  []netip.Prefix
		cpi  string
	}{
		{"internalNetworkSubnetCidr", cfg.Nodes.InternalSubnets, n.InternalNetworkSubnetCidr},
		{"externalNetworkSubnetCidr", cfg.Nodes.ExternalSubnets, n.ExternalNetworkSubnetCidr},
		{"excludeInternalNetworkSubnetCidr", cfg.Nodes.ExcludeInternalSubnets, n.ExcludeInternalNetworkSubnetCidr},
		{"excludeExternalNetworkSubnetCidr", cfg.Nodes.ExcludeExternalSubnets, n.ExcludeExternalNetworkSubnetCidr},
	} {
		var cpi []netip.Prefix
		for _, s := range splitList(c.cpi) {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				t.Errorf("nodes.%s: CPI's %q does not parse: %v", c.path, c.cpi, err)
				continue
			}
			cpi = append(cpi, p.Masked())
		}
		if !slices.Equal(c.got, cpi) {
			t.Errorf("nodes.%s: %v, CPI's %q", c.path, c.got, c.cpi)
		}
	}
	if cfg.Nodes.InternalNetworkName != strings.TrimSpace(n.InternalVmNetworkName) || cfg.Nodes.ExternalNetworkName != strings.TrimSpace(n.ExternalVmNetworkName) {
		t.Errorf("nodes network names %q %q, CPI's %q %q", cfg.Nodes.InternalNetworkName, cfg.Nodes.ExternalNetworkName, n.InternalVmNetworkName, n.ExternalVmNetworkName)
	}
}

// compareCredentials checks that a vCenter's login comes from where CPI's
// comes from: secretRef "" is the file's user and password, "ns/name" that
// Secret, "Global" the secrets directory when one is in effect, else
// global's Secret. In every case the user and password CPI tries first are
// ours too.
func compareCredentials(t *testing.T, name string, vc VCenter, cfg *Config, want *cpiView, ref, user, password string) {
	t.Helper()
	var from CredentialsFrom
	var secret string
	switch ref {
	case "":
		from = FromConfig
	case "Global":
		from, secret = FromSecret, want.Global.SecretNamespace+"/"+want.Global.SecretName
		switch {
		case want.Global.SecretsDirectory != "" || cfg.SecretsDirectory != "":
			// CPI drops a secrets directory that does not exist when it
			// starts (none does where the golden files were made); we read
			// it at each login, so one mounted later works.
			from, secret = FromDirectory, ""
		case want.Global.SecretName == "" || want.Global.SecretNamespace == "":
			// CPI's global vCenter (global.server) keeps secretRef "Global"
			// even with inline credentials only: it logs in with those, and
			// its global credential manager names no usable Secret.
			from, secret = FromConfig, ""
		}
	default:
		from, secret = FromSecret, ref
	}
	if vc.CredentialsFrom != from || (from == FromSecret && vc.SecretNamespace+"/"+vc.SecretName != secret) {
		t.Errorf("vCenter %q: credentials from %v %s/%s, CPI's %v %s (secretRef %q)", name, vc.CredentialsFrom, vc.SecretNamespace, vc.SecretName, from, secret, ref)
	}
	if vc.User != user || vc.Password.Reveal() != password {
		t.Errorf("vCenter %q: user %q (and its password) differ from CPI's user %q", name, vc.User, user)
	}
}
