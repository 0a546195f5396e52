package main

import "fmt"

// goSpec: a cloud-config string in one of CPI's Go tests. sel is a
// package-level const/var name, or "Func.field#N" (see goFixture).
type goSpec struct {
	name, path, sel, note string
}

const (
	commonYAML = "pkg/common/config/config_yaml_test.go"
	commonINI  = "pkg/common/config/config_ini_legacy_test.go"
	commonTest = "pkg/common/config/config_test.go"
	cpiYAML    = "pkg/cloudprovider/vsphere/config/config_yaml_test.go"
	cpiINI     = "pkg/cloudprovider/vsphere/config/config_ini_legacy_test.go"
	lbYAML     = "pkg/cloudprovider/vsphere/loadbalancer/config/config_yaml_test.go"
	lbINI      = "pkg/cloudprovider/vsphere/loadbalancer/config/config_ini_legacy_test.go"
	routeYAML  = "pkg/cloudprovider/vsphere/route/config/config_yaml_test.go"
	routeINI   = "pkg/cloudprovider/vsphere/route/config/config_ini_legacy_test.go"
	nsxtYAML   = "pkg/nsxt/config/config_yaml_test.go"
	nsxtINI    = "pkg/nsxt/config/config_ini_legacy_test.go"
	vsTest     = "pkg/cloudprovider/vsphere/vsphere_test.go"
)

var goSpecs = []goSpec{
	{"common-basic.yaml", commonYAML, "basicConfigYAML", "TestReadConfigYAMLGlobal, TestReadConfig \"Valid YAML\" expect success"},
	{"common-multi-vc-secrets.yaml", commonYAML, "multiVCDCsUsingSecretConfigYAML", "TestTenantRefsYAML expects success"},
	{"common-missing-server.yaml", commonYAML, "missingServerConfigYAML", "TestReadConfig \"Missing vCenter IP YAML\" expects common ReadConfig to fail with \"No Virtual Center hosts defined\""},
	{"common-bad.yaml", commonYAML, "badConfigYAML", "TestReadConfig \"Invalid YAML\" expects common ReadConfig to fail (YAML and INI syntax errors)"},
	{"common-basic.ini", commonINI, "basicConfigINI", "TestReadConfigINIGlobal, TestReadConfig \"Valid INI\" expect success"},
	{"common-multi-vc-secrets.ini", commonINI, "multiVCDCsUsingSecretConfigINI", "TestTenantRefsINI expects success"},
	{"common-missing-server.ini", commonINI, "missingServerConfigINI", "TestReadConfig \"Missing vCenter IP INI\" expects \"No Virtual Center hosts defined\""},
	{"common-bad.ini", commonINI, "badConfigINI", "TestReadConfig \"Invalid INI\" expects common ReadConfig to fail (YAML and INI syntax errors)"},
	{"common-invalid-format.yaml", commonTest, "invalidFormat", "TestReadConfig \"Invalid format\" expects common ReadConfig to fail; neither YAML nor INI"},

	{"cpi-nodes-subnet-cidr.yaml", cpiYAML, "subnetCidrYAMLConfig", "TestReadYAMLConfigSubnetCidr expects success"},
	{"cpi-nodes-network-name.yaml", cpiYAML, "networkNameYAMLConfig", "TestReadYAMLConfigNetworkName expects success"},
	{"cpi-nodes-exclude-subnet-cidr.yaml", cpiYAML, "excludeSubnetCidrYAMLConfig", "TestReadYAMLConfigExcludeSubnetCidr expects success"},
	{"cpi-nodes-subnet-cidr.ini", cpiINI, "subnetCidrINIConfig", "TestReadINIConfigSubnetCidr expects success"},
	{"cpi-nodes-network-name.ini", cpiINI, "networkNameINIConfig", "TestReadINIConfigNetworkName expects success"},
	{"cpi-nodes-exclude-subnet-cidr.ini", cpiINI, "excludeSubnetINIConfig", "TestReadINIConfigExcludeSubnetCidr expects success"},

	{"lb-basic.yaml", lbYAML, "TestReadYAMLConfig.contents#1", "a loadBalancer-only fragment, read by the LB parser"},
	{"lb-vmc.yaml", lbYAML, "TestReadYAMLConfigOnVMC.contents#1", "a loadBalancer-only fragment, read by the LB parser"},
	{"lb-basic.ini", lbINI, "TestReadINIConfig.contents#1", "a [LoadBalancer]-only fragment, read by the LB parser"},
	{"lb-vmc.ini", lbINI, "TestReadINIConfigOnVMC.contents#1", "a [LoadBalancer]-only fragment, read by the LB parser"},
	{"route-basic.yaml", routeYAML, "TestReadYAMLConfig.contents#1", "a route-only fragment, read by the route parser"},
	{"route-basic.ini", routeINI, "TestReadINIConfig.contents#1", "a [Route]-only fragment, read by the route parser"},
	{"nsxt-raw.yaml", nsxtYAML, "TestReadRawConfigYAML.contents#1", "an nsxt-only fragment, read by the NSX-T parser"},
	{"nsxt-config.yaml", nsxtYAML, "TestReadConfigYAML.contents#1", "an nsxt-only fragment, read by the NSX-T parser"},
	{"nsxt-raw.ini", nsxtINI, "TestReadRawConfigINI.contents#1", "an [NSXT]-only fragment, read by the NSX-T parser"},
	{"nsxt-config.ini", nsxtINI, "TestReadConfigINI.contents#1", "an [NSXT]-only fragment, read by the NSX-T parser; ends in a tab"},

	{"vsphere-dualstack-two-families.ini", vsTest, "TestAlphaDualStackConfig.conf#1", "ReadCPIConfig must succeed; buildVSphereFromConfig then fails unless ENABLE_ALPHA_DUAL_STACK is set"},
	{"vsphere-dualstack-two-families.ini", vsTest, "TestAlphaDualStackConfig.conf#2", "ReadCPIConfig must succeed; with ENABLE_ALPHA_DUAL_STACK set buildVSphereFromConfig succeeds"},
	{"vsphere-dualstack-ipv6.ini", vsTest, "TestAlphaDualStackConfig.conf#3", "expects success"},
	{"vsphere-secret-old-user-password.ini", vsTest, "TestSecretVSphereConfig.conf#1", "expects success"},
	{"vsphere-secret-old-secret.ini", vsTest, "TestSecretVSphereConfig.conf#2", "expects success"},
	{"vsphere-secret-old-secret-and-user-password.ini", vsTest, "TestSecretVSphereConfig.conf#3", "expects success"},
	{"vsphere-secret-old-secret-no-user.ini", vsTest, "TestSecretVSphereConfig.conf#4", "expects success"},
	{"vsphere-secret-old-no-namespace.ini", vsTest, "TestSecretVSphereConfig.conf#5", "expects success (user/password used)"},
	{"vsphere-secret-old-no-namespace-no-user.ini", vsTest, "TestSecretVSphereConfig.conf#6", "expects ErrUsernameMissing"},
	{"vsphere-secret-old-no-namespace-no-password.ini", vsTest, "TestSecretVSphereConfig.conf#7", "expects ErrPasswordMissing"},
	{"vsphere-secret-old-name-only.ini", vsTest, "TestSecretVSphereConfig.conf#8", "expects ErrUsernameMissing"},
	{"vsphere-secret-new-global-user-password.ini", vsTest, "TestSecretVSphereConfig.conf#9", "expects success"},
	{"vsphere-secret-new-vc-user-password.ini", vsTest, "TestSecretVSphereConfig.conf#10", "expects success"},
	{"vsphere-secret-new-secret.ini", vsTest, "TestSecretVSphereConfig.conf#11", "expects success"},
	{"vsphere-secret-new-secret-vc-password-only.ini", vsTest, "TestSecretVSphereConfig.conf#12", "expects success"},
	{"vsphere-thumbprint-global.ini", vsTest, "TestSecretVSphereConfig.conf#13", "expects success"},
	{"vsphere-thumbprint-multi-vc.ini", vsTest, "TestSecretVSphereConfig.conf#14", "expects success"},
	{"vsphere-cafile-global-multi-vc.ini", vsTest, "TestSecretVSphereConfig.conf#15", "expects success"},
}

// fileSpec: a file of the repository. With manifest set, name is a base:
// the ConfigMap/Secret cloud config becomes name.yaml/.ini and each
// credentials Secret name.secret.yaml.
type fileSpec struct {
	name, kind, path, note string
	manifest               bool
}

var fileSpecs = func() []fileSpec {
	s := []fileSpec{
		{name: "manifests-vsphere-conf.ini", kind: "INI template", path: "manifests/controller-manager/vsphere.conf", note: "deprecated manifests (manifests/controller-manager/README.md); mounted by vsphere-cloud-controller-manager-ds.yaml/-pod.yaml as ConfigMap cloud-config"},
		{name: "manifests-vccm", kind: "manifest", path: "manifests/controller-manager/vccm-secret.yaml", manifest: true},
		{name: "integration-vsphere-conf.ini", kind: "INI template", path: "test/integration/vsphere.conf", note: "test/integration/Makefile: kubectl create configmap cloud-config --from-file=vsphere.conf"},
		{name: "integration", kind: "test manifest", path: "test/integration/secrets.yaml", manifest: true},
	}
	// Newest first, so a config shared by every release is named after the
	// newest one.
	for v := 36; v >= 18; v-- {
		s = append(s, fileSpec{name: fmt.Sprintf("release-v1.%d", v), kind: "release manifest", path: fmt.Sprintf("releases/v1.%d/vsphere-cloud-controller-manager.yaml", v), manifest: true})
	}
	s = append(s, fileSpec{name: "release-v1.2", kind: "release manifest", path: "releases/v1.2/vsphere-cloud-controller-manager.yaml", manifest: true})
	s = append(s, fileSpec{name: "doc-disable-node-deletion", kind: "doc manifest", path: "docs/book/tutorials/disable-node-deletion.yaml", manifest: true})
	return s
}()

// mdSpec: the block-th fenced code block (1-based) of a markdown file, which
// must contain `contains`. mode "block": the block's text; "heredoc": the
// body of its <<EOF here-document; "manifest": the block parsed as a
// Kubernetes manifest (name is then a base, as for fileSpec).
type mdSpec struct {
	name, path string
	block      int
	contains   string
	mode       string
}

const (
	cloudConfigMD = "docs/book/cloud_config.md"
	zonesMD       = "docs/book/tutorials/deploying_cpi_with_multi_dc_vc_aka_zones.md"
	vcpMD         = "docs/book/tutorials/k8s-vcp-on-vsphere-with-kubeadm.md"
	helmMD        = "docs/book/tutorials/kubernetes-on-vsphere-with-helm.md"
	kubeadmMD     = "docs/book/tutorials/kubernetes-on-vsphere-with-kubeadm.md"
)

var mdSpecs = []mdSpec{
	{"doc-cloud-config-spec.ini", cloudConfigMD, 1, "[Nodes]", "block"},
	{"doc-cloud-config-global.ini", cloudConfigMD, 2, "IPFamily string", "block"},
	{"doc-cloud-config-virtualcenter.ini", cloudConfigMD, 3, "[VirtualCenter \"10.0.0.1\"]", "block"},
	{"doc-cloud-config-labels.ini", cloudConfigMD, 4, "[Labels]", "block"},
	{"doc-cloud-config-nodes.ini", cloudConfigMD, 5, "[Nodes]", "block"},
	{"doc-zones.yaml", zonesMD, 1, "vcenter:", "block"},
	{"doc-zones-labels.ini", zonesMD, 2, "[Labels]", "block"},
	{"doc-vcp-kubeadm.ini", vcpMD, 5, "[Workspace]", "heredoc"},
	{"doc-helm-advanced.ini", helmMD, 7, "[VirtualCenter \"1.1.1.1\"]", "heredoc"},
	{"doc-helm-engineering", helmMD, 11, "cpi-engineering-secret", "manifest"},
	{"doc-helm-global", helmMD, 14, "cpi-global-secret", "manifest"},
	{"doc-kubeadm.yaml", kubeadmMD, 35, "tenant-finance:", "heredoc"},
	{"doc-kubeadm.ini", kubeadmMD, 36, "[VirtualCenter \"1.1.1.1\"]", "heredoc"},
	{"doc-kubeadm-engineering", kubeadmMD, 40, "10.0.0.1.username", "manifest"},
	{"doc-kubeadm-engineering-ipv6", kubeadmMD, 41, "server_prod", "manifest"},
	{"doc-kubeadm-global", kubeadmMD, 44, "cpi-global-secret", "manifest"},
	{"doc-vc-shared-sessions", "docs/book/vc_shared_sessions.md", 1, "vc-session-manager-token", "manifest"},
	{"doc-releases-readme", "releases/README.md", 2, "kind: ConfigMap", "manifest"},
}

// helmVariant: values files (in the folder's helm-values/, applied in
// order) rendered over the current chart and every packaged chart.
type helmVariant struct {
	name   string
	values []string
}

var helmVariants = []helmVariant{
	{"default", []string{"default.values.yaml"}},
	{"enabled", []string{"enabled.values.yaml"}},
	{"thumbprint", []string{"enabled.values.yaml", "thumbprint.values.yaml"}},
	{"tlsthumbprint", []string{"enabled.values.yaml", "tlsthumbprint.values.yaml"}},
	{"cafile", []string{"enabled.values.yaml", "cafile.values.yaml"}},
	{"thumbprint-cafile", []string{"enabled.values.yaml", "thumbprint.values.yaml", "cafile.values.yaml"}},
	{"nodes", []string{"enabled.values.yaml", "nodes.values.yaml"}},
	{"no-secret", []string{"enabled.values.yaml", "no-secret.values.yaml"}},
	{"global-config", []string{"global-config.values.yaml"}},
	{"docs-quickstart", []string{"docs-quickstart.values.yaml"}},
	{"e2e-install", []string{"e2e-install.values.yaml"}},
	{"e2e-upgrade", []string{"e2e-install.values.yaml", "e2e-upgrade-nodes.values.yaml"}},
}

// staticNoSample: places searched that hold no cloud config of their own.
var staticNoSample = []string{
	"test/e2e/config/vsphere-ci.yaml@REV: a clusterctl e2e config, not a cloud config; its VSPHERE_DATACENTER (\"Datacenter\") and VSPHERE_NETWORK (\"k8s-ci\") feed helm-values/e2e-install.values.yaml and e2e-upgrade-nodes.values.yaml",
	"manifests/controller-manager/vsphere-cloud-controller-manager-ds.yaml@REV, -pod.yaml: mount ConfigMap cloud-config (made from manifests/controller-manager/vsphere.conf), hold none",
	"pkg/cloudprovider/vsphere/*_test.go other than vsphere_test.go, pkg/common/connectionmanager, vclib, credentialmanager tests, cmd/vsphere-cloud-controller-manager/main_test.go@REV: build config structs in Go or read credentials/guestinfo, no cloud-config text",
	"pkg/cloudprovider/vsphereparavirtual/config@REV: the paravirtual provider reads owner-reference and supervisor files, not ReadCPIConfig",
	"pkg/common/config/config_test.go@REV TestReadConfig cases other than \"Invalid format\" reuse the consts already listed",
	"charts/vsphere-cpi@REV and every charts/*.tgz: the templates write YAML only, and one vCenter (config.vcenter); there is no INI or multi-vCenter variant to render",
}
