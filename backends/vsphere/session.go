// Package vsphere is the govmomi implementation of backends.Backend: SOAP for
// VM lookups and properties, the vAPI REST tagging service for zones and
// regions, one long-lived session of each per vCenter.
package vsphere

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/session/keepalive"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Options configure one vCenter backend.
type Options struct {
	Config      config.VCenterConfig
	Credentials credentials.Source
	// WrapTransport, when set, wraps the HTTP transport of both sessions
	// (tests count or delay requests with it).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// KeepAlive is the idle time after which the SOAP session is pinged;
	// default 5 minutes.
	KeepAlive time.Duration
	// Inventory keeps the vCenter's VMs and the entities above them in
	// memory, fed by a PropertyCollector watch, and the tags on those
	// entities, read in bulk; lookups are answered from memory while the
	// watch is current. Off, every lookup asks vCenter.
	Inventory bool
	// Heartbeat is the longest the watch waits on vCenter for a change
	// before it must answer anyway; a vCenter silent for Heartbeat plus
	// the request timeout takes the inventory out of service. Default
	// DefaultHeartbeat.
	Heartbeat time.Duration
	// TagRefresh is the age after which the bulk tag cache is re-read in
	// the background; default DefaultTagRefresh.
	TagRefresh time.Duration
}

const (
	DefaultHeartbeat  = 5 * time.Second
	DefaultTagRefresh = 5 * time.Minute
)

// sessions holds the SOAP and REST sessions of one vCenter. Logins are
// serialised by mu; the generation counter lets a request that saw
// NotAuthenticated tell whether someone else already logged in again.
type sessions struct {
	opts Options

	mu         sync.Mutex
	cur        *conn
	generation uint64
	reach      backends.Reachability // under mu
}

// setReachability records the outcome of a connection-level event.
func (s *sessions) setReachability(err error) {
	state := backends.ConnUp
	if err != nil {
		state = backends.ConnDown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reach.State != state {
		s.reach.Since = time.Now()
	}
	s.reach.State, s.reach.Err = state, err
}

func (s *sessions) reachability() backends.Reachability {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reach
}

// conn is one logged-in client pair. Rotating credentials builds a new conn
// beside the old one and swaps it in, so no lookup sees a gap.
type conn struct {
	vim         *vim25.Client
	raw         soap.RoundTripper // below re-login and keep-alive
	keepalive   *keepalive.HandlerSOAP
	rest        *rest.Client
	restValid   bool
	fingerprint [32]byte // of the credentials it logged in with; never logged
}

func fingerprint(c credentials.Credentials) [32]byte {
	return sha256.Sum256([]byte(c.User + "\x00" + c.Password.Reveal()))
}

func (s *sessions) requestTimeout() time.Duration {
	if t := s.opts.Config.RequestTimeout; t > 0 {
		return t
	}
	return config.DefaultRequestTimeout
}

func (s *sessions) url() *url.URL {
	host := net.JoinHostPort(s.opts.Config.Server, strconv.Itoa(s.opts.Config.Port))
	return &url.URL{Scheme: "https", Host: host, Path: vim25.Path}
}

// insecure is whether to skip certificate verification: only when asked
// and nothing to verify against is configured. A thumbprint or a CA file
// always verifies: govmomi checks neither when told to skip, and the
// password would go to whoever answers.
func (s *sessions) insecure() bool {
	c := s.opts.Config
	return c.InsecureFlag && c.Thumbprint == "" && c.CAFile == ""
}

// client returns a logged-in SOAP client, connecting on first use.
func (s *sessions) client(ctx context.Context) (*vim25.Client, error) {
	c, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	return c.vim, nil
}

func (s *sessions) current(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return s.cur, nil
	}
	creds, err := s.opts.Credentials.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	c, err := s.connect(ctx, creds)
	s.reach = reachAfter(s.reach, err)
	if err != nil {
		return nil, err
	}
	s.cur = c
	s.generation++
	return c, nil
}

// reachAfter is r after a connection attempt that ended with err.
func reachAfter(r backends.Reachability, err error) backends.Reachability {
	state := backends.ConnUp
	if err != nil {
		state = backends.ConnDown
	}
	if r.State != state {
		r.Since = time.Now()
	}
	r.State, r.Err = state, err
	return r
}

// withRetries makes each request try up to attempts times while it fails
// with a temporary network error (soapRoundtripCount).
func withRetries(rt soap.RoundTripper, attempts uint) soap.RoundTripper {
	if attempts <= 1 {
		return rt
	}
	// RetryTemporaryNetworkError, not the deprecated TemporaryNetworkError(n):
	// that one counts down one counter shared by every request,
	// unsynchronised, for the client's whole life.
	return vim25.Retry(rt, vim25.RetryTemporaryNetworkError, int(attempts))
}

// connect opens a new client and logs it in with creds.
func (s *sessions) connect(ctx context.Context, creds credentials.Credentials) (*conn, error) {
	u := s.url()
	sc := soap.NewClient(u, s.insecure())
	if tp := s.opts.Config.Thumbprint; tp != "" {
		sc.SetThumbprint(u.Host, tp)
	}
	if ca := s.opts.Config.CAFile; ca != "" {
		if err := sc.SetRootCAs(ca); err != nil {
			return nil, fmt.Errorf("caFile %s: %w", ca, err)
		}
	}
	sc.Client.Transport = drainOnClose(sc.Client.Transport)
	if s.opts.WrapTransport != nil {
		sc.Client.Transport = s.opts.WrapTransport(sc.Client.Transport)
	}
	rt := withRetries(sc, s.opts.Config.RoundTripCount)
	vc, err := vim25.NewClient(ctx, rt)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	vc.Client = sc // the REST client derives from it; NewClient only sets it for a bare soap.Client
	idle := s.opts.KeepAlive
	if idle == 0 {
		idle = 5 * time.Minute
	}
	c := &conn{vim: vc, raw: rt}
	relogin := &reloginRoundTripper{next: rt, sessions: s, conn: c}
	// The keep-alive ping carries a deadline like every other call: the
	// library's default would wait for ever on a vCenter that never answers.
	ping := func() error {
		pctx, cancel := context.WithTimeout(context.Background(), s.requestTimeout())
		defer cancel()
		// Below re-login: a lost session stops the pings (the next lookup
		// logs in again), and a ping never waits on a login.
		_, err := methods.GetCurrentTime(pctx, rt)
		return err
	}
	c.keepalive = keepalive.NewHandlerSOAP(relogin, idle, ping)
	vc.RoundTripper = c.keepalive
	if err := s.login(ctx, c, creds); err != nil {
		c.keepalive.Stop()
		return nil, err
	}
	return c, nil
}

func (s *sessions) login(ctx context.Context, c *conn, creds credentials.Credentials) error {
	if err := session.NewManager(c.vim).Login(ctx, url.UserPassword(creds.User, creds.Password.Reveal())); err != nil {
		// The fault says "incorrect user name or password"; it never echoes them.
		return fmt.Errorf("login as %q (credentials from %s): %w", creds.User, s.opts.Credentials, err)
	}
	c.fingerprint = fingerprint(creds)
	c.restValid = false
	return nil
}

// relogin logs c in again with the current credentials, unless a login
// happened since generation seen or c was swapped out.
func (s *sessions) relogin(ctx context.Context, c *conn, seen uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.generation != seen || s.cur != c {
		return nil
	}
	creds, err := s.opts.Credentials.Get(ctx)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	// NotAuthenticated can come while the server still holds our session
	// (a vCenter then refuses Login on it): end it first; an error only
	// means it was already gone.
	if sm := c.vim.ServiceContent.SessionManager; sm != nil {
		_, _ = methods.Logout(ctx, c.raw, &types.Logout{This: *sm})
	}
	if err := s.login(ctx, c, creds); err != nil {
		return err
	}
	s.generation++
	return nil
}

func (s *sessions) currentGeneration() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.generation
}

// refresh logs in with the source's credentials when they differ from the
// current session's: a new session is opened beside the old one, swapped
// in, and the old one logged out after grace, so lookups in flight finish
// on it. If the new credentials fail, the current session stays.
func (s *sessions) refresh(ctx context.Context, grace time.Duration) (bool, error) {
	creds, err := s.opts.Credentials.Get(ctx)
	if err != nil {
		return false, fmt.Errorf("credentials: %w", err)
	}
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur == nil || cur.fingerprint == fingerprint(creds) {
		return false, nil
	}
	next, err := s.connect(ctx, creds)
	if err != nil {
		return false, fmt.Errorf("new credentials rejected, keeping the current session: %w", err)
	}
	s.mu.Lock()
	old := s.cur
	s.cur = next
	s.generation++
	s.mu.Unlock()
	if old != nil {
		time.AfterFunc(grace, func() {
			lctx, cancel := context.WithTimeout(context.Background(), s.requestTimeout())
			defer cancel()
			old.close(lctx)
		})
	}
	return true, nil
}

// restClient returns a logged-in vAPI REST client.
func (s *sessions) restClient(ctx context.Context) (*rest.Client, error) {
	c, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.rest == nil {
		c.rest = rest.NewClient(c.vim)
		if s.opts.WrapTransport != nil {
			c.rest.Client.Transport = s.opts.WrapTransport(c.rest.Client.Transport)
		}
	}
	if !c.restValid {
		creds, err := s.opts.Credentials.Get(ctx)
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		if err := c.rest.Login(ctx, url.UserPassword(creds.User, creds.Password.Reveal())); err != nil {
			return nil, fmt.Errorf("REST login as %q (credentials from %s): %w", creds.User, s.opts.Credentials, err)
		}
		c.restValid = true
	}
	return c.rest, nil
}

// restUnauthorized marks the REST session as lost.
func (s *sessions) restUnauthorized() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		s.cur.restValid = false
	}
}

// close logs the current sessions out.
func (s *sessions) close(ctx context.Context) error {
	s.mu.Lock()
	c := s.cur
	s.cur = nil
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.close(ctx)
}

func (c *conn) close(ctx context.Context) error {
	var err error
	if c.rest != nil && c.restValid {
		err = c.rest.Logout(ctx)
	}
	if lerr := session.NewManager(c.vim).Logout(ctx); lerr != nil && err == nil {
		err = lerr
	}
	c.keepalive.Stop()
	return err
}

// reloginRoundTripper re-establishes the SOAP session when vCenter answers
// NotAuthenticated (session expired or terminated) and retries the request
// once.
type reloginRoundTripper struct {
	next     soap.RoundTripper
	sessions *sessions
	conn     *conn
}

func (r *reloginRoundTripper) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	switch req.(type) {
	case *methods.LoginBody, *methods.LogoutBody:
		return r.next.RoundTrip(ctx, req, res)
	}
	seen := r.sessions.currentGeneration()
	err := r.next.RoundTrip(ctx, req, res)
	if err == nil {
		err = missingNotAuthenticated(res)
	}
	if err == nil || !fault.Is(err, &types.NotAuthenticated{}) {
		return err
	}
	if lerr := r.sessions.relogin(ctx, r.conn, seen); lerr != nil {
		return fmt.Errorf("session lost (%w), and %w", err, lerr)
	}
	// The decoder leaves fields the new response lacks untouched: clear
	// the old fault before decoding again.
	if v := reflect.ValueOf(res); v.Kind() == reflect.Pointer && !v.IsNil() {
		v.Elem().SetZero()
	}
	return r.next.RoundTrip(ctx, req, res)
}

// missingNotAuthenticated finds a lost session reported the way property
// reads report it: not as a fault of the call but in an object's
// missingSet.
func missingNotAuthenticated(res soap.HasFault) error {
	var objects []types.ObjectContent
	switch b := res.(type) {
	case *methods.RetrievePropertiesExBody:
		if b.Res != nil && b.Res.Returnval != nil {
			objects = b.Res.Returnval.Objects
		}
	case *methods.RetrievePropertiesBody:
		if b.Res != nil {
			objects = b.Res.Returnval
		}
	}
	for _, oc := range objects {
		for _, m := range oc.MissingSet {
			if _, ok := m.Fault.Fault.(*types.NotAuthenticated); ok {
				return soap.WrapVimFault(m.Fault.Fault)
			}
		}
	}
	return nil
}
