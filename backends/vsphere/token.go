package vsphere

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/sts"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// A solution user's login (credentials.Credentials.Certificate: the user
// value is a PEM certificate, the password its private key), as CPI does
// it (pkg/common/vclib connection.go login and Signer; connectionmanager
// zones.go withTagsClient): vCenter's STS issues a holder-of-key SAML
// token for the certificate (delegatable, as CPI asks), and the SOAP
// session logs in with it (SessionManager.LoginByToken, the request
// signed with the key); the tags REST session logs in with a token of its
// own (CPI issues one per tags client).
//
// Unlike CPI, which logs in again only when it finds its session gone,
// the session is renewed before its token expires: when three quarters of
// the token's lifetime have passed, a new session logs in with a fresh
// token beside the current one and replaces it (as a rotation does,
// refresh), so no lookup meets a session that ended with its token. The
// token and the key never reach a log or an error: errors name the
// certificate login and the credential source only.

// DefaultTokenLifetime is the lifetime a certificate login asks of STS
// for its token (STS may grant less: the renewal follows the grant).
const DefaultTokenLifetime = time.Hour

// minTokenRenewal bounds how often a certificate login renews, whatever
// lifetime STS grants: a token granted for next to nothing must not turn
// into a stream of logins.
const minTokenRenewal = time.Second

// token is what a certificate login's token says of its session: when to
// renew it and when it ends. Zero: a login without a token.
type token struct {
	renewAt, expires time.Time
	lifetime         time.Duration
}

// issueToken asks vCenter's STS for a token for cr's certificate.
func (s *sessions) issueToken(ctx context.Context, c *conn, cr credentials.Served) (*sts.Signer, token, error) {
	pair, err := cr.KeyPair()
	if err != nil {
		// Not sent: nothing for vCenter to refuse, and no other source
		// is tried (CPI fails the same way).
		return nil, token{}, &connError{what: "credentials", err: fmt.Errorf("credentials from %s: %w", cr.Source, err)}
	}
	// The STS client finds its endpoint by reading vCenter's settings
	// before any login: below re-login and keep-alive (an unauthenticated
	// answer must not start a re-login, least of all the one under way).
	base := *c.vim
	base.RoundTripper = c.raw
	tokens, err := sts.NewClient(ctx, &base)
	if err != nil {
		return nil, token{}, classify(fmt.Errorf("STS client: %w", err))
	}
	// Through the transport every other request takes (observed, and
	// wrapped like them); its TLS configuration is the vCenter's.
	tokens.Client.Client.Transport = c.vim.Client.Client.Transport
	lifetime := DefaultTokenLifetime
	if l := s.opts.TokenLifetime; l > 0 {
		lifetime = l
	}
	asked := time.Now()
	signer, err := tokens.Issue(ctx, sts.TokenRequest{Certificate: &pair, Delegatable: true, Lifetime: lifetime})
	if err != nil {
		return nil, token{}, stsFailure(err, fmt.Sprintf("STS token for the %s (credentials from %s)", credentials.CertificateLogin, cr.Source))
	}
	// The lifetime granted, on STS's own clock (ours may differ from
	// it), counted from before the request, and no longer than asked.
	if granted := signer.Lifetime.Expires.Sub(signer.Lifetime.Created); granted > 0 && granted < lifetime {
		lifetime = granted
	}
	return signer, token{renewAt: asked.Add(max(lifetime*3/4, minTokenRenewal)), expires: asked.Add(lifetime), lifetime: lifetime}, nil
}

// stsFailure names why STS issued no token: no answer, or a refusal of
// the certificate (WS-Trust's and WS-Security's authentication faults: an
// unknown, disabled or expired solution user, a signature that does not
// verify), which is a refusal of the credentials as an invalid login is:
// the chain tries its next source, and sends them again only on its
// schedule. Any other fault is a rejected login.
func stsFailure(err error, what string) error {
	refusal := false
	if soap.IsSoapFault(err) { // govmomi's fault, as it returns it
		code := soap.ToSoapFault(err).Code
		code = code[strings.LastIndexByte(code, ':')+1:]
		switch code {
		case "FailedAuthentication", "FailedCheck", "InvalidSecurity", "InvalidSecurityToken":
			refusal = true
		}
	}
	err = fmt.Errorf("%s: %w", what, err)
	switch {
	case noAnswer(err):
		return classify(err)
	case refusal:
		err = refused{err}
	}
	return &connError{what: "login rejected", err: err, kind: backends.ErrAuth}
}

// loginByCertificate logs c in as cr's solution user, and records when
// its token is to be renewed. Given rc, it logs that REST client in
// instead, with a fresh token of its own (as CPI's tags client: it
// expires after the SOAP session's, which is renewed first, REST with it).
func (s *sessions) loginByCertificate(ctx context.Context, c *conn, rc *rest.Client, cr credentials.Served) error {
	signer, tok, err := s.issueToken(ctx, c, cr)
	if err != nil {
		return err
	}
	what, login := "login", session.NewManager(c.vim).LoginByToken
	signed := c.vim.WithHeader(ctx, soap.Header{Security: signer})
	if rc != nil {
		what, login, signed = "REST login", rc.LoginByToken, rc.WithSigner(ctx, signer)
	}
	if err := login(signed); err != nil {
		return loginFailure(fmt.Errorf("%s with a token for the %s (credentials from %s): %w",
			what, credentials.CertificateLogin, cr.Source, err))
	}
	if rc == nil {
		s.setToken(c, tok)
	}
	return nil
}

// certificateLogin reports whether the current session is a certificate
// login.
func (b *Backend) certificateLogin() bool {
	b.sessions.mu.Lock()
	defer b.sessions.mu.Unlock()
	return b.sessions.cur != nil && b.sessions.cur.certificate
}

// setToken records c's token (zero: it logged in without one).
func (s *sessions) setToken(c *conn, tok token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.token = tok
}

// armRenewalLocked schedules the renewal of c in the time given when it
// is current and logged in with a token; any renewal scheduled before is
// dropped. The caller holds s.mu.
func (s *sessions) armRenewalLocked(c *conn, in time.Duration) {
	if c.renewal != nil {
		c.renewal.Stop()
		c.renewal = nil
	}
	if c.token.renewAt.IsZero() || s.closed || c.closed || s.cur != c {
		return
	}
	c.renewal = time.AfterFunc(in, func() { s.renewDue(c) })
}

// renewDue starts c's renewal, unless c was replaced or closed meanwhile.
func (s *sessions) renewDue(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || c.closed || s.cur != c || c.renewing {
		return
	}
	c.renewing = true
	s.tasks.spawn(func() { s.renewFlight(c) })
}

// renewFlight replaces c by a new session logged in with a fresh token.
// Lookups in flight finish on c, which is logged out once they had time
// to (the request timeout), or when its token ends if sooner. If the new
// login fails, c serves on and the renewal is tried again; should c's
// token end first, the next call logs c in again (relogin).
func (s *sessions) renewFlight(c *conn) {
	ctx, cancel := s.loginContext()
	defer cancel()
	next, err := s.connect(ctx)
	s.mu.Lock()
	c.renewing = false
	if err != nil {
		retry, expires := max(c.token.lifetime/8, minTokenRenewal), c.token.expires
		s.armRenewalLocked(c, retry)
		s.mu.Unlock()
		s.log.Info("Renewing the certificate login failed; the current session serves on", "err", err, "retryIn", retry, "tokenExpires", expires.UTC().Format(time.RFC3339))
		return
	}
	if s.closed || c.closed || s.cur != c {
		// Replaced (a rotation) or closed meanwhile: the new session is
		// not needed.
		s.mu.Unlock()
		_ = s.logout(next)
		return
	}
	s.swapLocked(next, max(0, min(s.requestTimeout(), time.Until(c.token.expires))))
	expires := next.token.expires
	s.mu.Unlock()
	s.log.V(2).Info("Renewed the certificate login: a new session with a fresh token", "tokenExpires", expires.UTC().Format(time.RFC3339))
}
