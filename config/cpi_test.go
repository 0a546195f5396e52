package config

import (
	"fmt"
	"strings"
	"testing"
)

// Keys CPI reads but this CCM does not implement, keys of CPI's templates
// that nothing reads, and keys neither knows all load: each is a Notice,
// by path and line, never an error (a CPI config must not crash-loop us).
func TestKeysWithoutEffectLoadAsNotices(t *testing.T) {
	cfg, err := Parse([]byte(`
global:
  serviceAccount: cloud-controller-manager
  ca-file: /etc/ssl/vc.pem
  tlsThumbprint: "AA:BB"
  apiDisable: true
  apiBinding: ":43001"
  user: u
  password: p
vcenter:
  vc1:
    server: vc1.example.com
    InsecureFlag: true
nsxt:
  user: admin
  host: nsx.example.com
loadBalancer:
  ipPoolName: pool
loadBalancerClass:
  public: {ipPoolName: public}
route:
  routerPath: /infra/tier-1s/t1
labels:
  zone: k8s-zone
  regoin: k8s-region
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]NoticeKind{
		"global.serviceAccount":    NoticeIgnored,
		"global.apiDisable":        NoticeIgnored,
		"global.apiBinding":        NoticeIgnored,
		"nsxt":                     NoticeIgnored,
		"loadBalancer":             NoticeIgnored,
		"loadBalancerClass":        NoticeIgnored,
		"route":                    NoticeIgnored,
		"global.ca-file":           NoticeUnknown,
		"global.tlsThumbprint":     NoticeUnknown,
		"vcenter.vc1.InsecureFlag": NoticeUnknown,
		"labels.regoin":            NoticeUnknown,
		"labels":                   NoticeDiffers, // zone without region: CPI sets neither
	}
	got := map[string]Notice{}
	for _, n := range cfg.Notices {
		got[n.Path] = n
	}
	for path, kind := range want {
		n, ok := got[path]
		if !ok || n.Kind != kind || (n.Line == 0 && kind != NoticeDiffers) {
			t.Errorf("notice of %s = %+v, want kind %v with a line", path, n, kind)
		}
	}
	if len(got) != len(want) {
		t.Errorf("notices = %v, want exactly %d", cfg.Notices, len(want))
	}
	// As CPI's YAML reader, a kebab-case or differently cased key does
	// nothing (CPI would not read the CA file either), with a hint.
	if vc := cfg.VCenters[0]; vc.CAFile != "" || vc.InsecureFlag || len(vc.Thumbprints) > 0 {
		t.Errorf("vCenter = %+v, want no CA file, no thumbprint, not insecure", vc)
	}
	if r := got["global.ca-file"].Reason; !strings.Contains(r, "did you mean caFile") {
		t.Errorf("ca-file notice %q gives no hint", r)
	}
	if r := got["vcenter.vc1.InsecureFlag"].Reason; !strings.Contains(r, "did you mean insecureFlag") {
		t.Errorf("InsecureFlag notice %q gives no hint", r)
	}
	if cfg.Labels.Region != "" || cfg.Labels.Zone != "k8s-zone" {
		t.Errorf("labels = %+v", cfg.Labels)
	}
}

// INI is read as gcfg (CPI's parser) reads it.
func TestINIAsGcfgReadsIt(t *testing.T) {
	ini := "\ufeff; CPI's INI\n" +
		"[Global] ; a comment after a header\n" +
		"secret-name = creds # comment\n" +
		"secret-namespace = kube-system\n" +
		"service-account = cloud-controller-manager\n" +
		"Insecure-Flag\n" + // a bool without a value is true
		"datacenters = dc1,\\\n   dc2\n" + // a continuation
		"port = 443\n" +
		"port = 8443\n" + // the last one wins
		"[VirtualCenter \"vc1\"]\n" +
		"user = \"adm\"in\n" + // text after a closing quote joins the value
		"password = \"p;#\\\"w\"\n" +
		"soap-roundtrip-count = 2\n" +
		"[VirtualCenter \"vc1\"]\n" + // a repeated section adds to the first
		"ip-family = ipv6\n" +
		"[Global \"extra\"]\n" + // gcfg skips a subsection of Global
		"server = ignored.example.com\n" +
		"[NSXT]\nhost = nsx\n[LoadBalancer]\nip-pool-name = p\n[LoadBalancerClass \"public\"]\nip-pool-name = q\n[Route]\nrouter-path = r\n" +
		"[Workspace]\nfolder = kubernetes\n" +
		"[Labels]\nzone = k8s-zone\nregion = k8s-region\n"
	cfg, err := Parse([]byte(ini))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.VCenters) != 1 {
		t.Fatalf("vCenters = %+v, want vc1 only", cfg.VCenters)
	}
	vc := cfg.VCenters[0]
	if !vc.InsecureFlag || vc.Port != 8443 || strings.Join(vc.Datacenters, "|") != "dc1|dc2" || vc.RoundTripCount != 2 ||
		strings.Join(vc.IPFamily, "|") != "ipv6" || vc.User != "admin" || vc.Password.Reveal() != `p;#"w` ||
		vc.CredentialsFrom != FromSecret || vc.SecretName != "creds" {
		t.Errorf("vc1 = %+v (user %q)", vc, vc.User)
	}
	if cfg.Labels != (Labels{Zone: "k8s-zone", Region: "k8s-region"}) {
		t.Errorf("labels = %+v", cfg.Labels)
	}
	for path, kind := range map[string]NoticeKind{
		"global.serviceAccount": NoticeIgnored, `[Global "extra"]`: NoticeIgnored, "nsxt": NoticeIgnored,
		"loadBalancer": NoticeIgnored, "loadBalancerClass": NoticeIgnored, "route": NoticeIgnored, "workspace": NoticeIgnored,
	} {
		if !hasNotice(cfg, kind, path) {
			t.Errorf("no %v notice of %s in %v", kind, path, cfg.Notices)
		}
	}
}

// CPI's credential rules: a vCenter's Secret needs both keys; global
// names a Secret or a directory, not both; else the file's user and
// password.
func TestCredentialsFromByCPIRules(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env        Env
		from       CredentialsFrom
		secret     string // namespace/name when from a Secret
		user       string
		notice     string // a path with a NoticeDiffers
	}{
		{name: "own Secret", yaml: "global: {secretName: g, secretNamespace: gns}\nvcenter: {a: {server: vc, secretName: s, secretNamespace: ns}}",
			from: FromSecret, secret: "ns/s"},
		{name: "global Secret", yaml: "global: {secretName: g, secretNamespace: gns, user: gu, password: gp}\nvcenter: {a: {server: vc}}",
			from: FromSecret, secret: "gns/g"},
		{name: "secretName without namespace: not used", yaml: "global: {user: u, password: p}\nvcenter: {a: {server: vc, secretName: s}}",
			from: FromConfig, user: "u", notice: "vcenter.a"},
		{name: "vCenter secretName with global namespace: global's Secret", yaml: "global: {secretName: g, secretNamespace: gns}\nvcenter: {a: {server: vc, secretName: s}}",
			from: FromSecret, secret: "gns/g", notice: "vcenter.a"},
		{name: "global directory", yaml: "global: {secretsDirectory: /creds}\nvcenter: {a: {server: vc, user: own}}",
			from: FromDirectory, user: "own"},
		{name: "global Secret and directory: neither", yaml: "global: {secretName: g, secretNamespace: gns, secretsDirectory: /creds, user: u, password: p}\nvcenter: {a: {server: vc}}",
			from: FromConfig, user: "u", notice: "global"},
		{name: "the global vCenter takes global's Secret as its own", yaml: "global: {server: vc, secretName: g, secretNamespace: gns, secretsDirectory: /creds}",
			from: FromSecret, secret: "gns/g", notice: "global"},
		{name: "CPI's default directory, when it exists, serves global's Secret vCenters",
			yaml: "global: {secretName: g, secretNamespace: gns}\nvcenter: {a: {server: vc}}",
			env:  Env{DirExists: func(p string) bool { return p == DefaultSecretsDirectory }}, from: FromDirectory},
		{name: "CPI's default directory does not replace inline credentials",
			yaml: "global: {user: u, password: p}\nvcenter: {a: {server: vc}}",
			env:  Env{DirExists: func(p string) bool { return p == DefaultSecretsDirectory }}, from: FromConfig, user: "u"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseIn([]byte(tc.yaml), tc.env)
			if err != nil {
				t.Fatal(err)
			}
			vc := cfg.VCenters[0]
			if vc.CredentialsFrom != tc.from || vc.User != tc.user {
				t.Errorf("credentials from %v (user %q), want %v (user %q)", vc.CredentialsFrom, vc.User, tc.from, tc.user)
			}
			if tc.from == FromSecret && vc.SecretNamespace+"/"+vc.SecretName != tc.secret {
				t.Errorf("Secret %s/%s, want %s", vc.SecretNamespace, vc.SecretName, tc.secret)
			}
			if tc.from == FromDirectory && cfg.SecretsDirectory == "" {
				t.Error("no secrets directory")
			}
			if tc.notice != "" && !hasNotice(cfg, NoticeDiffers, tc.notice) {
				t.Errorf("no notice of %s in %v", tc.notice, cfg.Notices)
			}
		})
	}
}

// insecureFlag is CPI's "vCenter OR global"; where a vCenter's false
// loses, a Notice says so.
func TestInsecureFlagIsVCenterOrGlobal(t *testing.T) {
	cfg := mustParse(t, "global: {insecureFlag: true, user: u, password: p}\nvcenter:\n  a: {server: a, insecureFlag: false}\n  b: {server: b}\n  c: {server: c, insecureFlag: true}\n")
	for _, vc := range cfg.VCenters {
		if !vc.InsecureFlag {
			t.Errorf("%s: insecureFlag false, want true (global's)", vc.Name)
		}
	}
	if !hasNotice(cfg, NoticeDiffers, "vcenter.a.insecureFlag") || hasNotice(cfg, NoticeDiffers, "vcenter.b.insecureFlag") {
		t.Errorf("notices = %v, want one for vcenter.a.insecureFlag only", cfg.Notices)
	}
	cfg = mustParse(t, "global: {user: u, password: p}\nvcenter:\n  a: {server: a, insecureFlag: true}\n  b: {server: b}\n")
	if !cfg.VCenters[0].InsecureFlag || cfg.VCenters[1].InsecureFlag {
		t.Errorf("vCenters = %+v", cfg.VCenters)
	}
}

// A caFile is read when connecting, as CPI reads it: one that does not
// exist yet does not stop the config.
func TestMissingCAFileLoads(t *testing.T) {
	cfg := mustParse(t, "global: {server: vc, user: u, password: p, caFile: /nonexistent/ca.pem}")
	if cfg.VCenters[0].CAFile != "/nonexistent/ca.pem" {
		t.Errorf("CAFile = %q", cfg.VCenters[0].CAFile)
	}
}

// CPI's environment variables override the file, as its documentation
// says; a Notice names each, never its value.
func TestEnvironmentOverrides(t *testing.T) {
	env := Env{Vars: []string{
		"VSPHERE_USER=envuser", "VSPHERE_PASSWORD=Env-S3cret", "VSPHERE_INSECURE=true",
		"VSPHERE_DATACENTER=dc-a, dc-b", "VSPHERE_LABEL_ZONE=envzone", "VSPHERE_LABEL_REGION=envregion",
		"VSPHERE_NODES_INTERNAL_NETWORK_SUBNET_CIDR=10.1.0.0/16",
		"VSPHERE_VCENTER_PORT=8443", // global's port, not a vCenter named 8443 (as CPI's loop takes it)
		"VSPHERE_VCENTER_EAST=east", "VCENTER_EAST_SERVER=east.example.com", "VCENTER_EAST_USERNAME=eastuser",
		"VCENTER_EAST_PASSWORD=East-S3cret", "VCENTER_EAST_INSECURE=false", "VCENTER_EAST_ROUNDTRIP=5", "VCENTER_EAST_IP_FAMILY=ipv6",
		"VSPHERE_ROUNDTRIP_COUNT=many",
		"UNRELATED=1",
	}}
	cfg, err := ParseIn([]byte("global: {user: fileuser, password: filepass}\nvcenter: {west: {server: west.example.com}}\nlabels: {zone: filezone}"), env)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.VCenters) != 2 {
		t.Fatalf("vCenters = %+v, want east and west", cfg.VCenters)
	}
	east, west := cfg.VCenters[0], cfg.VCenters[1]
	if west.User != "envuser" || west.Password.Reveal() != "Env-S3cret" || !west.InsecureFlag || west.Port != 8443 ||
		strings.Join(west.Datacenters, "|") != "dc-a|dc-b" || west.RoundTripCount != DefaultRoundTripCount {
		t.Errorf("west = %+v", west)
	}
	// CPI reads VCENTER_<id>_INSECURE, _ROUNDTRIP and _IP_FAMILY only when
	// unset (an inverted check); they apply here, as documented. (The
	// global insecureFlag still wins: vCenter OR global.)
	if east.Server != "east.example.com" || east.User != "eastuser" || east.Password.Reveal() != "East-S3cret" ||
		east.RoundTripCount != 5 || strings.Join(east.IPFamily, "|") != "ipv6" || east.Port != 8443 {
		t.Errorf("east = %+v", east)
	}
	if cfg.Labels != (Labels{Zone: "envzone", Region: "envregion"}) || len(cfg.Nodes.InternalSubnets) != 1 {
		t.Errorf("labels %+v, nodes %+v", cfg.Labels, cfg.Nodes)
	}
	notices := fmt.Sprint(cfg.Notices)
	for _, name := range []string{"VSPHERE_USER", "VSPHERE_PASSWORD", "VSPHERE_VCENTER_EAST", "VCENTER_EAST_PASSWORD", "VSPHERE_ROUNDTRIP_COUNT"} {
		if !hasNotice(cfg, NoticeEnv, name) {
			t.Errorf("no notice of %s in %s", name, notices)
		}
	}
	if !strings.Contains(notices, "skipped") {
		t.Errorf("VSPHERE_ROUNDTRIP_COUNT=many not reported as skipped: %s", notices)
	}
	for _, secret := range []string{"Env-S3cret", "East-S3cret", "envuser", "eastuser"} {
		if strings.Contains(notices, secret) {
			t.Errorf("a notice quotes %q: %s", secret, notices)
		}
	}
}
