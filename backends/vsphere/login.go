package vsphere

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/sts"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// login logs c in with cr: a user and password, a solution user's
// certificate, or a session service's clone ticket (SOAP only), each
// below. Given rc, it logs that REST client in instead of c's SOAP session.
func (s *sessions) login(ctx context.Context, c *conn, rc *rest.Client, cr credentials.Served) error {
	if cr.Certificate() {
		return s.loginByCertificate(ctx, c, rc, cr)
	}
	what, login := "login", session.NewManager(c.vim).Login
	if rc != nil {
		what, login = "REST login", rc.Login
	} else {
		s.setToken(c, token{})
		if cr.ViaSessionService() {
			return s.cloneSession(ctx, c, cr)
		}
	}
	if err := login(ctx, url.UserPassword(cr.User, cr.Password.Reveal())); err != nil {
		// The fault says "incorrect user name or password"; it never echoes them.
		return loginFailure(fmt.Errorf("%s as %q (credentials from %s): %w", what, cr.User, cr.Source, err), false)
	}
	return nil
}

// loginFailure names why a login failed: vCenter's answer is a rejection,
// anything else a failure to reach it. An invalid login, or a refusal
// (STS's: stsFailure), is a refusal of the credentials themselves: the
// chain tries its next source.
func loginFailure(err error, refusal bool) error {
	switch {
	case noAnswer(err):
		return classify(err)
	case refusal, fault.Is(err, &types.InvalidLogin{}):
		err = refused{err}
	}
	return &connError{what: "login rejected", err: err, kind: backends.ErrAuth}
}

// refused marks an invalid login as credentials.ErrRejected.
type refused struct{ error }

func (r refused) Unwrap() error      { return r.error }
func (refused) Is(target error) bool { return target == credentials.ErrRejected }

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
	lifetime := orDefault(s.opts.TokenLifetime, DefaultTokenLifetime)
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
	return loginFailure(fmt.Errorf("%s: %w", what, err), refusal)
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
			what, credentials.CertificateLogin, cr.Source, err), false)
	}
	if rc == nil {
		s.setToken(c, tok)
	}
	return nil
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

// renewDue starts c's renewal, unless c was replaced or closed meanwhile,
// or its renewal is under way.
func (s *sessions) renewDue(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed && !c.closed && s.cur == c {
		s.joinLocked(&c.renewing, func(ctx context.Context) settle { return s.renewFlight(ctx, c) })
	}
}

// renewFlight replaces c by a new session logged in with a fresh token.
// Lookups in flight finish on c, which is logged out once they had time
// to (the request timeout), or when its token ends if sooner. If the new
// login fails, c serves on and the renewal is tried again; should c's
// token end first, the next call logs c in again (relogin).
func (s *sessions) renewFlight(ctx context.Context, c *conn) settle {
	next, err := s.connect(ctx)
	return func() (*conn, error) {
		switch {
		case err != nil:
			retry := max(c.token.lifetime/8, minTokenRenewal)
			s.armRenewalLocked(c, retry)
			s.log.Info("Renewing the certificate login failed; the current session serves on", "err", err,
				"retryIn", retry, "tokenExpires", c.token.expires.UTC().Format(time.RFC3339))
		case s.closed || c.closed || s.cur != c:
			// Replaced (a rotation) or closed meanwhile: the new session is
			// not needed.
			return next, nil
		default:
			s.swapLocked(next, max(0, min(s.requestTimeout(), time.Until(c.token.expires))))
			s.log.V(2).Info("Renewed the certificate login: a new session with a fresh token",
				"tokenExpires", next.token.expires.UTC().Format(time.RFC3339))
		}
		return nil, nil
	}
}

// The session service: what CPI calls its shared session manager
// (kubernetes/cloud-provider-vsphere, pkg/common/vclib:
// vc_session_manager.go GetSharedToken, connection.go login;
// docs/book/vc_shared_sessions.md), named apart here from govmomi's
// session.Manager (vCenter's SessionManager). Credentials of that form name a
// service that holds a vCenter session and hands out clones of it, so that
// many clusters cost vCenter one login. The protocol, as CPI speaks it:
//
//   - GET <vc-session-manager-url> with "Authorization: Bearer <token>",
//     the token being <server>.vc-session-manager-token, or the Pod's
//     service account token when that key is absent (read at every login:
//     a projected token rotates);
//   - the certificate is verified against the system roots (CPI passes no
//     CA and never skips verification), no proxy;
//   - the answer must be 200 with a JSON body {"token": "<clone ticket>"},
//     the ticket not empty;
//   - the ticket logs a new SOAP client in: SessionManager.CloneSession
//     (a ticket serves once; each login asks for a new one);
//   - the vAPI (tags) client uses that SOAP session's id as its session id
//     (vCenter takes one for the other): no REST login, and no REST
//     logout, which would end the SOAP session too.
//
// CPI gives the request 5 s; here it runs under the login's deadline (the
// request timeout). Nothing of the token or the ticket reaches an error:
// the service is named by its scheme and host only (errors read
// "session manager: https://host (credentials from …): …", CPI's name,
// which its users know from the keys).

// DefaultServiceAccountTokenFile is where a Pod's service account token is
// mounted: what a session service is asked with when the credentials carry
// no token.
const DefaultServiceAccountTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// maxTicketAnswer bounds a session service's answer: one small JSON object.
const maxTicketAnswer = 64 << 10

// cloneTicket asks the session service of cr for a clone ticket.
func (s *sessions) cloneTicket(ctx context.Context, cr credentials.Served) (string, error) {
	where := fmt.Sprintf("%s (credentials from %s)", credentials.RedactURL(cr.SessionServiceURL), cr.Source)
	u, err := url.Parse(cr.SessionServiceURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		// The URL is not quoted: it may hold a secret.
		return "", fmt.Errorf("%s (credentials from %s) is not an http(s) URL", credentials.SessionServiceURLKey(s.opts.Config.Server), cr.Source)
	}
	token := cr.SessionServiceToken
	if token == "" {
		path := cmp.Or(s.opts.ServiceAccountTokenFile, DefaultServiceAccountTokenFile)
		if token, err = credentials.ServiceAccountToken(path); err != nil {
			return "", fmt.Errorf("%s: no %s, and the service account token: %w", where,
				credentials.SessionServiceTokenKey(s.opts.Config.Server), err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("%s: cannot make the request", where)
	}
	req.Header.Set("Authorization", "Bearer "+token.Reveal())
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: s.opts.SessionServiceRootCAs, MinVersion: tls.VersionTLS12},
		DialContext:         (&net.Dialer{Timeout: maxHandshake}).DialContext,
		TLSHandshakeTimeout: maxHandshake,
		DisableKeepAlives:   true, // one request per login
	}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		// url.Error quotes the URL: keep what is under it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("%s: %w", where, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxTicketAnswer+1))
	switch {
	case ctx.Err() != nil:
		// An answer that raced the deadline (a service that gave up as
		// the connection closed answers an empty 200) is the deadline's.
		return "", fmt.Errorf("%s: %w", where, ctx.Err())
	case err != nil:
		return "", fmt.Errorf("%s: reading its answer: %w", where, err)
	case res.StatusCode != http.StatusOK:
		return "", fmt.Errorf("%s answered %s", where, res.Status)
	case len(body) > maxTicketAnswer:
		return "", fmt.Errorf("%s: an answer over %d bytes is not a ticket", where, maxTicketAnswer)
	}
	var answer struct {
		Token string `json:"token"`
	}
	// The decoder's error may quote the body, which may hold the ticket.
	if json.Unmarshal(body, &answer) != nil {
		return "", fmt.Errorf(`%s: its answer is not the JSON object {"token": "<ticket>"}`, where)
	}
	if answer.Token == "" {
		return "", fmt.Errorf("%s answered an empty token", where)
	}
	return answer.Token, nil
}

// cloneSession logs c in with a ticket of cr's session service. A ticket
// vCenter refuses is an invalid login (the chain's next source is tried,
// as CPI falls back to its Secret on one); a session service that cannot
// be asked fails the login as a connection does.
func (s *sessions) cloneSession(ctx context.Context, c *conn, cr credentials.Served) error {
	ticket, err := s.cloneTicket(ctx, cr)
	if err != nil {
		return &connError{what: "session manager", err: err}
	}
	if err := session.NewManager(c.vim).CloneSession(ctx, ticket); err != nil {
		return loginFailure(fmt.Errorf("clone session from the session manager at %s (credentials from %s): %w",
			credentials.RedactURL(cr.SessionServiceURL), cr.Source, err), false)
	}
	return nil
}

// shareSOAPSession makes rc use c's SOAP session, as CPI's tags client does
// for a session service's clone: the SOAP session is checked first, and
// logged in again when lost (a REST 401 may have brought us here).
func (s *sessions) shareSOAPSession(ctx context.Context, c *conn, rc *rest.Client) error {
	seen := s.currentGeneration()
	us, err := session.NewManager(c.vim).UserSession(ctx)
	if err != nil {
		return fmt.Errorf("checking the SOAP session to share with REST: %w", err)
	}
	if us == nil {
		if err := s.relogin(ctx, c, seen); err != nil {
			return err
		}
	}
	cookie := c.vim.SessionCookie()
	if cookie == nil || cookie.Value == "" {
		return errors.New("no SOAP session to share with REST")
	}
	rc.SessionID(cookie.Value)
	return nil
}
