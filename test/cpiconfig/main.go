// Command cpiconfig records what CPI's own parser reads from each sample cloud
// config in a samples folder (-samples; the CPI samples folder's samples/,
// see test/cpisamples in the root module): for every *.yaml and *.ini there
// (except *.secret.yaml, which are Secret layouts, not cloud configs) it calls
// k8s.io/cloud-provider-vsphere/pkg/cloudprovider/vsphere/config.ReadCPIConfig,
// the function CPI's cloud provider factory calls on the --cloud-config bytes,
// and writes <sample file name>.json into -golden (for example
// golden/common-basic.ini.json; the extension is kept because a YAML and an
// INI sample may share a stem).
//
// ReadCPIConfig ends with FromEnv, which overrides the file from VSPHERE_* and
// VCENTER_* environment variables and keeps Global.SecretsDirectory (default
// /etc/cloud/secrets) only if that directory exists. The command therefore
// unsets every VSPHERE_* and VCENTER_* variable before parsing and refuses to
// run when /etc/cloud/secrets exists.
//
// Each sample is parsed several times: CPI validates vCenters by ranging over
// a map, so a config with more than one invalid vCenter could yield a
// different error per run; the command fails if any run differs.
//
// This module is separate from the product module on purpose (CPI is a
// dependency here only); it is not built, vetted or tested by the root
// module's ./... patterns. Run it through test/cpiconfig/regenerate.sh.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	ccfg "k8s.io/cloud-provider-vsphere/pkg/cloudprovider/vsphere/config"
	vcfg "k8s.io/cloud-provider-vsphere/pkg/common/config"
	"k8s.io/klog/v2"
)

// Golden is the recorded result of ReadCPIConfig for one sample. Field order
// is the key order of the JSON files.
type Golden struct {
	Error    string             `json:"error"`
	Global   Global             `json:"global"`
	VCenters map[string]VCenter `json:"vcenters"`
	Labels   Labels             `json:"labels"`
	Nodes    Nodes              `json:"nodes"`
}

// Global mirrors vcfg.Global after ReadCPIConfig.
type Global struct {
	SecretName        string `json:"secretName"`
	SecretNamespace   string `json:"secretNamespace"`
	SecretsDirectory  string `json:"secretsDirectory"`
	InsecureFlag      bool   `json:"insecureFlag"`
	CAFile            string `json:"caFile"`
	Thumbprint        string `json:"thumbprint"`
	Datacenters       string `json:"datacenters"`
	Port              string `json:"port"`
	Server            string `json:"server"`
	User              string `json:"user"`
	Password          string `json:"password"`
	RoundTripperCount uint   `json:"roundTripperCount"`
}

// VCenter mirrors one vcfg.VirtualCenterConfig, keyed in Golden.VCenters by
// its map key (which is also its TenantRef; the command checks that).
type VCenter struct {
	Server       string `json:"server"`
	Port         string `json:"port"`
	User         string `json:"user"`
	Password     string `json:"password"`
	InsecureFlag bool   `json:"insecureFlag"`
	// Datacenters is the comma-separated string split the way CPI's
	// connection manager splits it before looking datacenters up
	// (pkg/common/connectionmanager list.go ListAllVCandDCPairs, search.go
	// WhichVCandDCByNodeID, zones.go getDIFromMultiVCorDC): strings.Split on
	// ",", strings.TrimSpace each part, skip empty parts. Empty means "all
	// datacenters of the vCenter" (vclib.GetAllDatacenter).
	Datacenters       []string `json:"datacenters"`
	CAFile            string   `json:"caFile"`
	Thumbprint        string   `json:"thumbprint"`
	SecretRef         string   `json:"secretRef"`
	SecretName        string   `json:"secretName"`
	SecretNamespace   string   `json:"secretNamespace"`
	RoundTripperCount uint     `json:"roundTripperCount"`
	IPFamily          []string `json:"ipFamily"`
}

// Labels mirrors vcfg.Labels.
type Labels struct {
	Zone   string `json:"zone"`
	Region string `json:"region"`
}

// Nodes mirrors ccfg.Nodes.
type Nodes struct {
	InternalNetworkSubnetCIDR        string `json:"internalNetworkSubnetCidr"`
	ExternalNetworkSubnetCIDR        string `json:"externalNetworkSubnetCidr"`
	InternalVMNetworkName            string `json:"internalVmNetworkName"`
	ExternalVMNetworkName            string `json:"externalVmNetworkName"`
	ExcludeInternalNetworkSubnetCIDR string `json:"excludeInternalNetworkSubnetCidr"`
	ExcludeExternalNetworkSubnetCIDR string `json:"excludeExternalNetworkSubnetCidr"`
}

// splitDatacenters applies the connection manager's split (see
// VCenter.Datacenters).
func splitDatacenters(s string) []string {
	out := []string{}
	if s == "" {
		return out
	}
	for _, dc := range strings.Split(s, ",") {
		dc = strings.TrimSpace(dc)
		if dc == "" {
			continue
		}
		out = append(out, dc)
	}
	return out
}

func record(cfg *ccfg.CPIConfig, err error) (Golden, error) {
	g := Golden{VCenters: map[string]VCenter{}}
	if err != nil {
		g.Error = err.Error()
		return g, nil
	}
	gl := cfg.Global
	g.Global = Global{
		SecretName:        gl.SecretName,
		SecretNamespace:   gl.SecretNamespace,
		SecretsDirectory:  gl.SecretsDirectory,
		InsecureFlag:      gl.InsecureFlag,
		CAFile:            gl.CAFile,
		Thumbprint:        gl.Thumbprint,
		Datacenters:       gl.Datacenters,
		Port:              gl.VCenterPort,
		Server:            gl.VCenterIP,
		User:              gl.User,
		Password:          gl.Password,
		RoundTripperCount: gl.RoundTripperCount,
	}
	for key, vc := range cfg.VirtualCenter {
		if vc.TenantRef != key {
			return g, fmt.Errorf("vCenter map key %q has TenantRef %q; the schema keys vCenters by tenantRef", key, vc.TenantRef)
		}
		ipf := vc.IPFamilyPriority
		if ipf == nil {
			ipf = []string{}
		}
		g.VCenters[key] = VCenter{
			Server:            vc.VCenterIP,
			Port:              vc.VCenterPort,
			User:              vc.User,
			Password:          vc.Password,
			InsecureFlag:      vc.InsecureFlag,
			Datacenters:       splitDatacenters(vc.Datacenters),
			CAFile:            vc.CAFile,
			Thumbprint:        vc.Thumbprint,
			SecretRef:         vc.SecretRef,
			SecretName:        vc.SecretName,
			SecretNamespace:   vc.SecretNamespace,
			RoundTripperCount: vc.RoundTripperCount,
			IPFamily:          ipf,
		}
	}
	g.Labels = Labels{Zone: cfg.Labels.Zone, Region: cfg.Labels.Region}
	n := cfg.Nodes
	g.Nodes = Nodes{
		InternalNetworkSubnetCIDR:        n.InternalNetworkSubnetCIDR,
		ExternalNetworkSubnetCIDR:        n.ExternalNetworkSubnetCIDR,
		InternalVMNetworkName:            n.InternalVMNetworkName,
		ExternalVMNetworkName:            n.ExternalVMNetworkName,
		ExcludeInternalNetworkSubnetCIDR: n.ExcludeInternalNetworkSubnetCIDR,
		ExcludeExternalNetworkSubnetCIDR: n.ExcludeExternalNetworkSubnetCIDR,
	}
	return g, nil
}

// readCPIConfig calls CPI's parser. A panic (CPI's INI ip-family handling
// panics on "ipv4,,ipv6", for one) is returned as an error "panic: ..."; no
// sample shipped by CPI triggers one.
func readCPIConfig(data []byte) (cfg *ccfg.CPIConfig, err error) {
	defer func() {
		if r := recover(); r != nil {
			cfg, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	return ccfg.ReadCPIConfig(data)
}

// encode renders g with 2-space indent, keys in struct order (map keys
// sorted by encoding/json), no HTML escaping, and a final newline.
func encode(g Golden) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(g); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// cleanEnv unsets every variable FromEnv/FromCPIEnv could read.
func cleanEnv() []string {
	var unset []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "VSPHERE_") || strings.HasPrefix(k, "VCENTER_") {
			os.Unsetenv(k)
			unset = append(unset, k)
		}
	}
	return unset
}

// isSample reports whether name in the samples directory is a cloud config.
func isSample(name string) bool {
	if strings.HasSuffix(name, ".secret.yaml") {
		return false
	}
	return strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".ini")
}

func run() error {
	samples := flag.String("samples", "", "directory of sample cloud configs (required)")
	golden := flag.String("golden", "", "directory the golden JSON files are written to, or checked against with -check (required)")
	runs := flag.Int("runs", 25, "parse each sample this many times and require identical results")
	check := flag.Bool("check", false, "do not write; fail if a golden file is missing, stale or extra")
	verbose := flag.Bool("v", false, "let CPI's klog output through to stderr")
	flag.Parse()
	if *samples == "" || *golden == "" {
		return errors.New("-samples and -golden are required")
	}

	if !*verbose {
		klog.SetLogger(logr.Discard())
	}
	if unset := cleanEnv(); len(unset) > 0 {
		fmt.Fprintf(os.Stderr, "cpiconfig: unset %s\n", strings.Join(unset, " "))
	}
	if _, err := os.Stat(vcfg.DefaultSecretDirectory); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s exists (or cannot be checked: %v): CPI's FromEnv would keep it as Global.SecretsDirectory; run where it is absent", vcfg.DefaultSecretDirectory, err)
	}

	entries, err := os.ReadDir(*samples)
	if err != nil {
		return err
	}
	want := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() || !isSample(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(*samples, e.Name()))
		if err != nil {
			return err
		}
		var first []byte
		for i := 0; i < *runs; i++ {
			g, err := record(readCPIConfig(data))
			if err != nil {
				return fmt.Errorf("%s: %w", e.Name(), err)
			}
			out, err := encode(g)
			if err != nil {
				return fmt.Errorf("%s: %w", e.Name(), err)
			}
			if i == 0 {
				first = out
			} else if !bytes.Equal(first, out) {
				return fmt.Errorf("%s: ReadCPIConfig is not deterministic for this sample:\n%s\n---\n%s", e.Name(), first, out)
			}
		}
		want[e.Name()+".json"] = first
	}

	if *check {
		return checkDir(*golden, want)
	}
	if err := os.MkdirAll(*golden, 0o755); err != nil {
		return err
	}
	old, err := os.ReadDir(*golden)
	if err != nil {
		return err
	}
	for _, e := range old {
		if _, ok := want[e.Name()]; !ok && strings.HasSuffix(e.Name(), ".json") {
			if err := os.Remove(filepath.Join(*golden, e.Name())); err != nil {
				return err
			}
		}
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(*golden, n), want[n], 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "cpiconfig: wrote %d golden files to %s\n", len(names), *golden)
	return nil
}

func checkDir(dir string, want map[string][]byte) error {
	var problems []string
	for n, b := range want {
		have, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", n, err))
		} else if !bytes.Equal(have, b) {
			problems = append(problems, n+": stale")
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, ok := want[e.Name()]; !ok && strings.HasSuffix(e.Name(), ".json") {
			problems = append(problems, e.Name()+": no sample")
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return errors.New("golden files out of date:\n  " + strings.Join(problems, "\n  "))
	}
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cpiconfig:", err)
		os.Exit(1)
	}
}
