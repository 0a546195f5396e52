package credentials_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/solutionuser"
)

// CPI's rule (vclib VSphereConnection.Signer and its TestVSphereLoginByToken:
// user = a PEM certificate, password = its PEM key): the user value alone
// decides; a PEM password with a plain user is a password.
func TestCertificateLogin(t *testing.T) {
	cert, key, err := solutionuser.New("k8s-ccm")
	if err != nil {
		t.Fatal(err)
	}
	otherCert, _, err := solutionuser.New("another")
	if err != nil {
		t.Fatal(err)
	}
	ecCert, ecKey, err := solutionuser.NewECDSA("k8s-ccm")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		c           credentials.Credentials
		certificate bool
		pairErr     string // "" : KeyPair succeeds (certificate logins only)
	}{
		{name: "certificate and key (CPI's test)", c: credentials.Credentials{User: cert, Password: config.Password(key)}, certificate: true},
		{name: "certificate with text around it", c: credentials.Credentials{User: "solution user\n" + cert + "\n", Password: config.Password(key)}, certificate: true},
		{name: "certificate, password not a key", c: credentials.Credentials{User: cert, Password: "s3cret-pw"}, certificate: true,
			pairErr: "password must be its PEM private key"},
		{name: "certificate, another's key", c: credentials.Credentials{User: otherCert, Password: config.Password(key)}, certificate: true,
			pairErr: "private key does not match public key"},
		{name: "key and certificate switched", c: credentials.Credentials{User: key, Password: config.Password(cert)}, certificate: true,
			pairErr: "password must be its PEM private key"},
		{name: "ECDSA key", c: credentials.Credentials{User: ecCert, Password: config.Password(ecKey)}, certificate: true,
			pairErr: "an RSA key"},
		{name: "plain user, PEM password: a password login", c: credentials.Credentials{User: "ccm@vsphere.local", Password: config.Password(key)}},
		{name: "plain user and password", c: credentials.Credentials{User: "ccm@vsphere.local", Password: "pw"}},
		{name: "a PEM header alone is no PEM", c: credentials.Credentials{User: "-----BEGIN CERTIFICATE-----", Password: config.Password(key)}},
		{name: "session service first", c: credentials.Credentials{User: cert, Password: config.Password(key), SessionServiceURL: "https://sm.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.Certificate(); got != tc.certificate {
				t.Fatalf("Certificate() = %v, want %v", got, tc.certificate)
			}
			s := tc.c.String() + fmt.Sprintf(" %v %#v", tc.c, tc.c)
			if tc.certificate && !strings.Contains(s, "certificate (solution user)") {
				t.Errorf("String() = %q, want it to name the certificate login", tc.c.String())
			}
			if !tc.certificate {
				return
			}
			for _, secret := range []string{cert, key, ecKey, pemBody(key), pemBody(cert)} {
				if strings.Contains(s, secret) {
					t.Errorf("String() prints a PEM value: %q", s)
				}
			}
			_, err := tc.c.KeyPair()
			switch {
			case tc.pairErr == "" && err != nil:
				t.Fatalf("KeyPair: %v", err)
			case tc.pairErr != "" && (err == nil || !strings.Contains(err.Error(), tc.pairErr)):
				t.Fatalf("KeyPair = %v, want an error saying %q", err, tc.pairErr)
			case err != nil:
				for _, secret := range []string{"s3cret-pw", pemBody(key), pemBody(ecKey), pemBody(cert)} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("KeyPair's error quotes a value: %v", err)
					}
				}
			}
		})
	}
}

// A new certificate or key is new credentials: the refused-credentials
// schedule compares fingerprints, which cover both.
func TestCertificateFingerprint(t *testing.T) {
	cert, key, err := solutionuser.New("k8s-ccm")
	if err != nil {
		t.Fatal(err)
	}
	cert2, key2, err := solutionuser.New("k8s-ccm")
	if err != nil {
		t.Fatal(err)
	}
	a := credentials.Credentials{User: cert, Password: config.Password(key)}
	if a.Fingerprint() != (credentials.Credentials{User: cert, Password: config.Password(key)}).Fingerprint() {
		t.Error("the same certificate and key fingerprint differently")
	}
	for _, b := range []credentials.Credentials{{User: cert2, Password: config.Password(key2)}, {User: cert, Password: config.Password(key2)}, {User: cert2, Password: config.Password(key)}} {
		if a.Fingerprint() == b.Fingerprint() {
			t.Error("another certificate or key has the same fingerprint")
		}
	}
}

// pemBody is a line from the middle of a PEM block's base64.
func pemBody(p string) string {
	lines := strings.Split(strings.TrimSpace(p), "\n")
	return lines[len(lines)/2]
}
