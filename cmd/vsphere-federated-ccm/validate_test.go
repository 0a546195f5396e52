package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	_ "github.com/vmware/govmomi/lookup/simulator" // where STS is
	_ "github.com/vmware/govmomi/sts/simulator"    // vCenter's STS

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/solutionuser"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// indent puts each line of s under a YAML block scalar.
func indent(s, by string) string {
	return by + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+by)
}

// validate takes a solution user's certificate (user) and key (password),
// logs in with them, and names the login "certificate (solution user)",
// never the PEM.
func TestValidateCertificateCredentials(t *testing.T) {
	cert, key, err := solutionuser.New("k8s-ccm")
	if err != nil {
		t.Fatal(err)
	}
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	cfg := fmt.Sprintf("global:\n  insecureFlag: true\nvcenter:\n  %s:\n    server: %s\n    port: %d\n    datacenters: [%s]\n    user: |\n%s\n    password: |\n%s\nlabels:\n  zone: k8s-zone\n  region: k8s-region\n",
		vc.Name, vc.Host, vc.Port, vc.VMs[0].Datacenter, indent(cert, "      "), indent(key, "      "))
	var out, errOut bytes.Buffer
	code := runValidate([]string{"--cloud-config", "-"}, strings.NewReader(cfg), &out, &errOut, cloud.BuildInfo{Version: "test"})
	if code != exitOK {
		t.Fatalf("validate = %d, want %d\n%s%s", code, exitOK, out.String(), errOut.String())
	}
	var login string
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == "login" {
			login = line
		}
	}
	if !strings.Contains(login, "certificate (solution user)") {
		t.Errorf("login row %q; want it to name the certificate login\n%s", login, out.String())
	}
	all := out.String() + errOut.String()
	for _, secret := range []string{"BEGIN", strings.Split(cert, "\n")[3], strings.Split(key, "\n")[3]} {
		if strings.Contains(all, secret) {
			t.Errorf("validate prints the certificate or the key:\n%s", all)
		}
	}
}
