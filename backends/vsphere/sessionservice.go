package vsphere

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vapi/rest"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

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
		path := s.opts.ServiceAccountTokenFile
		if path == "" {
			path = DefaultServiceAccountTokenFile
		}
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
			credentials.RedactURL(cr.SessionServiceURL), cr.Source, err))
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
