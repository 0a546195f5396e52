package vsphere_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
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
		{"wrong thumbprint", config.VCenter{Thumbprint: "AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD"}, false},
		{"right thumbprint", config.VCenter{Thumbprint: soap.ThumbprintSHA256(cert)}, true},
		{"CA file that did not sign the certificate", config.VCenter{CAFile: otherCA}, false},
		{"CA file that signed it", config.VCenter{CAFile: caFile}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Name, cfg.Server, cfg.Port, cfg.InsecureFlag = vc.Name, vc.Host, vc.Port, true
			cfg.RequestTimeout = 10 * time.Second
			b := vsphere.New(vsphere.Options{Config: cfg, Credentials: creds})
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
	cfg := config.VCenter{Name: vc.Name, Server: vc.Host, Port: vc.Port, CAFile: caFile}
	b := vsphere.New(vsphere.Options{Config: cfg, Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)}})
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
