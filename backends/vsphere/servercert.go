package vsphere

import (
	"crypto/x509"
	"sync"

	"github.com/vmware/govmomi/vim25/soap"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// serverCertificate is the leaf certificate the vCenter presented at the
// last TLS handshake the sessions made, so that its expiry is shown
// (status, metric, validate) before a rollover locks anyone out.
type serverCertificate struct {
	mu   sync.Mutex
	cert backends.Certificate
	ok   bool
}

// record keeps c, the certificate a handshake just accepted.
func (s *serverCertificate) record(c *x509.Certificate) {
	cert := backends.Certificate{NotAfter: c.NotAfter.UTC(), Subject: c.Subject.String(), Issuer: c.Issuer.String(),
		SHA256Thumbprint: soap.ThumbprintSHA256(c)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cert, s.ok = cert, true
}

func (s *serverCertificate) get() (backends.Certificate, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cert, s.ok
}
