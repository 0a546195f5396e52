package vsphere

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

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

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
			o := Options{Config: config.VCenter{Name: "vc", Server: host, Port: p, InsecureFlag: true, RoundTripCount: 1, RequestTimeout: 5 * time.Second}.WithDefaults(),
				Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)}}
			checks, _ := validateVia(t, o, ValidateRequest{}, 10*time.Second)
			var tlsCheck Check
			for _, c := range checks {
				if c.Name == CheckTLS {
					tlsCheck = c
				}
			}
			if tlsCheck.Verdict != tc.verdict || !strings.Contains(tlsCheck.Detail, tc.detail) || !strings.Contains(tlsCheck.Detail, notAfter.UTC().Format(time.RFC3339)) {
				t.Fatalf("tls check %s: %s; want %s with %q and %s", tlsCheck.Verdict, tlsCheck.Detail, tc.verdict, tc.detail, notAfter.UTC().Format(time.RFC3339))
			}
		})
	}
}
