package vsphere_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/soap"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// A thumbprint or CA file set for a vCenter is always verified, also with
// insecureFlag (set on the vCenter or inherited from global): a server
// whose certificate does not match is refused before any request, so the
// password never reaches it.
func TestPinnedCertificateOverridesInsecureFlag(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Addresses: []string{"127.0.0.1"}}) // the simulator's certificate names 127.0.0.1
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	cert := vc.Server.Certificate()
	caFile, err := vc.Server.CertificateFile()
	if err != nil {
		t.Fatal(err)
	}
	otherCA := writeUnrelatedCA(t)
	creds := credentials.Static{User: vc.User, Password: config.Password(vc.Password)}
	q := backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}
	for _, tc := range []struct {
		name string
		cfg  config.VCenter
		ok   bool
	}{
		{"wrong thumbprint", config.VCenter{Thumbprints: []string{"AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD"}}, false},
		{"right thumbprint", config.VCenter{Thumbprints: []string{soap.ThumbprintSHA256(cert)}}, true},
		{"CA file that did not sign the certificate", config.VCenter{CAFile: otherCA}, false},
		{"CA file that signed it", config.VCenter{CAFile: caFile}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Name, cfg.Server, cfg.Port, cfg.InsecureFlag = vc.Name, vc.Host, vc.Port, true
			cfg.RequestTimeout = 10 * time.Second
			cfg = cfg.WithDefaults()
			b := vsphere.New(vsphere.Options{Config: cfg, Credentials: creds})
			b.Start()
			defer func() { _ = b.Close(context.Background()) }()
			before, total := vc.SOAPCalls()
			_, err := b.Find(t.Context(), q)
			if tc.ok {
				if err != nil {
					t.Fatalf("Find with insecureFlag and a matching pin: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Find succeeded: insecureFlag disabled the certificate check")
			}
			if strings.Contains(err.Error(), vc.Password) {
				t.Fatalf("error leaks the password: %v", err)
			}
			after, total2 := vc.SOAPCalls()
			if n := after["Login"] - before["Login"]; n != 0 || total2 != total {
				t.Fatalf("%d logins, %d SOAP calls reached a server whose certificate does not match: want none", n, total2-total)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// writeUnrelatedCA writes a self-signed CA certificate that signed nothing
// the simulator serves.
func writeUnrelatedCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "unrelated test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A caFile is read when connecting, as CPI reads it: while it is missing
// the vCenter's connection fails with an error naming the file; once it
// is mounted the next lookup connects, with no restart or config edit.
func TestCAFileMountedAfterTheConfig(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Addresses: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	simCA, err := vc.Server.CertificateFile()
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "vcenter-ca.pem")
	cfg := config.VCenter{Name: vc.Name, Server: vc.Host, Port: vc.Port, CAFile: caFile}.WithDefaults()
	b := vsphere.New(vsphere.Options{Config: cfg, Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)}})
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	q := backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}
	if _, err := b.Find(t.Context(), q); err == nil || !strings.Contains(err.Error(), caFile) {
		t.Fatalf("Find with the CA file missing: err = %v, want one naming %s", err, caFile)
	}
	pem, err := os.ReadFile(simCA)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if vms, err := b.Find(t.Context(), q); err != nil || len(vms) != 1 {
		t.Fatalf("Find after the CA file was mounted = %d VMs, %v; want the VM", len(vms), err)
	}
}

// A thumbprint is a pin, not a fallback: it is the only thing that vouches
// for the server. A certificate some trusted CA vouches for (here the CA
// file; the system's roots in TestPinIgnoresSystemRoots) is refused when
// its thumbprint does not match, before any login; one that matches passes
// whoever signed it and whatever name it bears.
func TestThumbprintIsAPin(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 2, Addresses: []string{"127.0.0.1", "127.0.0.2"}}) // the certificate names 127.0.0.1, not 127.0.0.2
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	named, unnamed := f.VCenters[0], f.VCenters[1]
	caFile, err := named.Server.CertificateFile()
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.Repeat("AB:", 31) + "AB"
	for _, tc := range []struct {
		name string
		vc   *vcsim.VCenter
		cfg  config.VCenter
		ok   bool
	}{
		{"CA file trusts it, thumbprint does not match", named, config.VCenter{CAFile: caFile, Thumbprints: []string{wrong}}, false},
		{"CA file trusts it, thumbprint matches", named, config.VCenter{CAFile: caFile, Thumbprints: []string{soap.ThumbprintSHA256(named.Server.Certificate())}}, true},
		{"CA file that did not sign it, thumbprint matches", named, config.VCenter{CAFile: writeUnrelatedCA(t), Thumbprints: []string{soap.ThumbprintSHA256(named.Server.Certificate())}}, true},
		{"name not in the certificate, thumbprint matches (lower case)", unnamed, config.VCenter{Thumbprints: []string{strings.ToLower(soap.ThumbprintSHA1(unnamed.Server.Certificate()))}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Name, cfg.Server, cfg.Port, cfg.RequestTimeout = tc.vc.Name, tc.vc.Host, tc.vc.Port, 10*time.Second
			findOrRefuse(t, tc.vc, cfg, tc.ok)
		})
	}
}

// trustedCertEnv, set, makes TestPinIgnoresSystemRoots run its cases: in a
// process of its own, started with SSL_CERT_FILE naming the simulator's
// certificate, so the system's roots trust it.
const trustedCertEnv = "VSPHERE_FEDERATED_CCM_TEST_SYSTEM_TRUSTS_VCSIM"

// With the system's roots trusting the simulator's certificate, a pin that
// does not match still refuses it before any login, and a caFile is the
// only root: one that did not sign the certificate refuses it too.
func TestPinIgnoresSystemRoots(t *testing.T) {
	if os.Getenv(trustedCertEnv) == "" {
		// The system's roots are read once per process, from
		// SSL_CERT_FILE when set: run this test again in a process
		// started with the simulator's certificate there (every
		// simulator presents the same one).
		f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 1, Addresses: []string{"127.0.0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		cert := f.VCenters[0].Server.Certificate()
		f.Close()
		roots := filepath.Join(t.TempDir(), "roots.pem")
		if err := os.WriteFile(roots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), trustedCertEnv+"=1", "SSL_CERT_FILE="+roots, "SSL_CERT_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the test in a process whose system roots trust the simulator: %v\n%s", err, out)
		}
		t.Logf("in a process whose system roots trust the simulator:\n%s", out)
		return
	}
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Addresses: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	for _, tc := range []struct {
		name string
		cfg  config.VCenter
		ok   bool
	}{
		// Without it the other cases would prove nothing.
		{"system roots trust it", config.VCenter{}, true},
		{"thumbprint does not match", config.VCenter{Thumbprints: []string{strings.Repeat("AB:", 31) + "AB"}}, false},
		{"thumbprint matches", config.VCenter{Thumbprints: []string{soap.ThumbprintSHA256(vc.Server.Certificate())}}, true},
		{"CA file that did not sign it", config.VCenter{CAFile: writeUnrelatedCA(t)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Name, cfg.Server, cfg.Port, cfg.RequestTimeout = vc.Name, vc.Host, vc.Port, 10*time.Second
			findOrRefuse(t, vc, cfg, tc.ok)
		})
	}
}

// findOrRefuse looks a VM of vc up through a backend configured with cfg:
// it must be found (ok), or refused before any SOAP call reached vc.
func findOrRefuse(t *testing.T, vc *vcsim.VCenter, cfg config.VCenter, ok bool) {
	t.Helper()
	cfg = cfg.WithDefaults()
	b := vsphere.New(vsphere.Options{Config: cfg, Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)}})
	b.Start()
	defer func() { _ = b.Close(context.Background()) }()
	before, total := vc.SOAPCalls()
	vms, err := b.Find(t.Context(), backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}})
	if ok {
		if err != nil || len(vms) != 1 {
			t.Fatalf("Find = %d VMs, %v; want the VM", len(vms), err)
		}
		return
	}
	if err == nil {
		t.Fatal("Find succeeded: the server was trusted")
	}
	if !errors.Is(err, backends.ErrUnreachable) {
		t.Errorf("err = %v; want it to wrap backends.ErrUnreachable (a TLS failure)", err)
	}
	if strings.Contains(err.Error(), vc.Password) {
		t.Fatalf("error leaks the password: %v", err)
	}
	after, total2 := vc.SOAPCalls()
	if n := after["Login"] - before["Login"]; n != 0 || total2 != total {
		t.Fatalf("%d logins, %d SOAP calls reached a server that is not trusted: want none", n, total2-total)
	}
	t.Logf("refused: %v", err)
}
