package vsphere

import (
	"strings"
	"testing"
	"time"

	_ "github.com/vmware/govmomi/lookup/simulator" // where STS is
	_ "github.com/vmware/govmomi/sts/simulator"    // vCenter's STS

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/solutionuser"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// validate logs in with a solution user's certificate as the CCM does,
// and names that login "certificate (solution user)", never the PEM.
func TestValidateCertificateLogin(t *testing.T) {
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
	o := optionsVia(vc, vc.Host, vc.Port, 5*time.Second)
	o.Credentials = credentials.Static{User: cert, Password: config.Password(key)}
	checks, _ := validateVia(t, o, withLabels, 30*time.Second)
	expectVerdicts(t, checks, "tcp=pass", "tls=pass", "login=pass", "datacenters=pass", "tag categories=pass", "privileges=pass", "vms=pass", "latency=pass")
	if d := detailOf(checks, CheckLogin); !strings.Contains(d, "certificate (solution user)") || !strings.Contains(d, "config file") {
		t.Errorf("login: %q; want it to name the certificate login and its source", d)
	}
	for _, c := range checks {
		for _, secret := range []string{pemLine(cert), pemLine(key), "BEGIN"} {
			if strings.Contains(c.Detail, secret) {
				t.Errorf("%s: %q quotes the certificate or the key", c.Name, c.Detail)
			}
		}
	}
}

// pemLine is a line from the middle of a PEM block's base64.
func pemLine(p string) string {
	lines := strings.Split(strings.TrimSpace(p), "\n")
	return lines[len(lines)/2]
}
