package check

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
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
	tg := targetVia(vc, vc.Host, vc.Port)
	tg.creds = credentials.Static{User: cert, Password: config.Password(key)}
	checks, _ := validateVia(t, tg, withLabels, 30*time.Second)
	expectVerdicts(t, checks, "tcp=pass", "tls=pass", "login=pass", "datacenters=pass", "tag categories=pass", "privileges=pass", "vms=pass", "latency=pass")
	if d := detailOf(checks, Login); !strings.Contains(d, "certificate (solution user)") || !strings.Contains(d, "config file") {
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

// serveCertificate starts a TLS front of vc presenting a self-signed
// certificate valid until notAfter.
func serveCertificate(t *testing.T, vc *vcsim.VCenter, notAfter time.Time) *httptest.Server {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vcenter.test"},
		NotBefore: notAfter.Add(-365 * 24 * time.Hour), NotAfter: notAfter, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "https", Host: vc.Server.URL.Host})
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the simulator's own certificate
	s := httptest.NewUnstartedServer(proxy)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// validate's TLS check shows when the certificate expires, and warns
// (does not fail) within CertificateWarning of it or past it.
func TestValidateCertificateExpiry(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	for _, tc := range []struct {
		name    string
		left    time.Duration
		verdict Verdict
		detail  string
	}{
		{"a year left", 365 * 24 * time.Hour, Passed, "the certificate expires on"},
		{"ten days left", 10 * 24 * time.Hour, Warned, "plan its replacement"},
		{"expired", -2 * 24 * time.Hour, Warned, "EXPIRED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notAfter := time.Now().Add(tc.left).Truncate(time.Second)
			s := serveCertificate(t, vc, notAfter)
			host, port, _ := net.SplitHostPort(s.Listener.Addr().String())
			p, err := strconv.Atoi(port)
			if err != nil {
				t.Fatal(err)
			}
			checks, _ := validateVia(t, targetVia(vc, host, p), nil, 10*time.Second)
			var tlsCheck Result
			for _, c := range checks {
				if c.Name == TLS {
					tlsCheck = c
				}
			}
			if tlsCheck.Verdict != tc.verdict || !strings.Contains(tlsCheck.Detail, tc.detail) || !strings.Contains(tlsCheck.Detail, notAfter.UTC().Format(time.RFC3339)) {
				t.Fatalf("tls check %s: %s; want %s with %q and %s", tlsCheck.Verdict, tlsCheck.Detail, tc.verdict, tc.detail, notAfter.UTC().Format(time.RFC3339))
			}
		})
	}
}
