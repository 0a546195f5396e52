package vsphere

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/session/keepalive"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// sessions holds the SOAP and REST sessions of one vCenter.
//
// Logins are single-flight and never hold mu across the network: the
// first caller that needs one starts a flight, a goroutine of the
// sessions' own under the request timeout and the sessions' lifetime, and
// every caller, the first included, waits for its outcome or its own
// context, whichever ends first. A caller that gives up does not cancel a
// login others wait for; close does. The generation counter lets a
// request that saw NotAuthenticated tell whether someone else already
// logged in again.
type sessions struct {
	opts  Options
	chain *credentials.Chain
	log   klog.Logger

	// tasks owns the goroutines the sessions start (logins, logouts,
	// renewals): shut ends its context, which logins, pings and probes
	// under way end with (see lifetime), and close waits for them.
	tasks *owner
	// loginDue is signalled when a reload finds credentials to send and
	// no session (a standby the leader's login now backs, a Secret
	// fixed): the inventory's watch, waiting out its backoff, connects at
	// once.
	loginDue chan struct{}

	mu         sync.Mutex
	closed     bool
	cur        *conn
	generation uint64
	connecting *flight // the first login, under way

	reachMu sync.Mutex
	reach   backends.Reachability
	// progress is the first connection attempt's, while reach is
	// ConnUnknown (ConnectProgress).
	progress backends.ConnectProgress

	// peerCert is the leaf certificate of the last TLS handshake, so that
	// its expiry is shown (status, metric, validate) before a rollover
	// locks anyone out.
	peerCert atomic.Pointer[backends.Certificate]

	// servedBy is the credential source of the last login, under mu: a
	// change is logged.
	servedBy string
}

func newSessions(opts Options) *sessions {
	// The config resolves its defaults (config.Parse, or WithDefaults for
	// a VCenter built by hand): a zero here is a bug, not a default.
	missing := ""
	switch {
	case opts.Config.Port <= 0:
		missing = "Port"
	case opts.Config.RequestTimeout <= 0:
		missing = "RequestTimeout"
	case opts.Config.RequestsPerSecond <= 0:
		missing = "RequestsPerSecond"
	case opts.Config.RequestBurst <= 0:
		missing = "RequestBurst"
	}
	if missing != "" {
		panic("vsphere: vCenter " + opts.Config.Name + " has no " + missing + ": resolve its config.VCenter with config.Parse or WithDefaults")
	}
	chain := credentials.AsChain(opts.Credentials)
	if opts.RefusedRetry != nil {
		chain = chain.WithRetry(*opts.RefusedRetry)
	}
	// Unknown since now: how long a vCenter has been connecting is what
	// lookups judge whether to wait for it by.
	return &sessions{opts: opts, chain: chain,
		log:   klog.Background().WithValues("vcenter", opts.Config.Name),
		tasks: newOwner(), loginDue: make(chan struct{}, 1),
		reach: backends.Reachability{Since: time.Now()}}
}

// flight is a login under way; err is set before done is closed.
type flight struct {
	done chan struct{}
	err  error
}

// joinLocked returns the flight under way in *slot, starting one that
// runs fly when there is none: fly logs in under the flight's context
// (the request timeout within the sessions' lifetime: not its first
// caller's ctx, whose giving up must not fail the login for the others)
// and returns how to settle, under s.mu, the flight's outcome, and a conn
// given up, logged out once the waiters have the outcome. The caller
// holds s.mu and has seen s open.
func (s *sessions) joinLocked(slot **flight, fly func(context.Context) settle) *flight {
	if *slot == nil {
		f := &flight{done: make(chan struct{})}
		*slot = f
		s.tasks.spawn(func() {
			ctx, cancel := context.WithTimeout(s.lifetime(), s.requestTimeout())
			defer cancel()
			end := fly(context.WithValue(ctx, loginKey{}, true))
			s.mu.Lock()
			*slot = nil
			var giveUp *conn
			giveUp, f.err = end()
			s.mu.Unlock()
			close(f.done)
			if giveUp != nil {
				s.logout(giveUp)
			}
		})
	}
	return *slot
}

// settle decides a flight's outcome under sessions.mu, and names a conn
// given up.
type settle func() (giveUp *conn, err error)

// wait returns the flight's outcome, or ctx's error if ctx ends first.
func (f *flight) wait(ctx context.Context, what string) error {
	select {
	case <-f.done:
		return f.err
	default:
	}
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for the %s under way: %w", what, ctx.Err())
	}
}

// loginKey marks the requests of a login flight: the flight records their
// outcome, not the transport (a rejected login is an HTTP answer, yet Down).
type loginKey struct{}

// open reports ErrClosed once the sessions are closed.
func (s *sessions) open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return backends.ErrClosed
	}
	return nil
}

// conn is one logged-in client pair. Rotating credentials builds a new conn
// beside the old one and swaps it in, so no lookup sees a gap.
type conn struct {
	vim       *vim25.Client
	raw       soap.RoundTripper // below re-login and keep-alive
	keepalive *keepalive.HandlerSOAP

	// Under sessions.mu.
	fingerprint [32]byte // of the credentials it logged in with; never logged
	// served says which source logged it in (its credentials cleared: a
	// conn keeps no secret), and viaSessionService whether they were a
	// session service's.
	served            credentials.Served
	viaSessionService bool
	certificate       bool      // a solution user's certificate login
	loggedIn          time.Time // when its current session was logged in
	rest              *rest.Client
	restValid         bool
	restShared        bool    // the REST client uses the SOAP session: no REST logout
	relogging         *flight // a re-login under way
	restLogin         *flight // a REST login under way
	closed            bool    // no login starts on it any more
	// token is the certificate login's (zero for other logins); renewal
	// fires when it is due, and renewing is set while it runs.
	token    token
	renewal  *time.Timer
	renewing *flight
}

// setServed records what logged c in; the caller holds s.mu, or c is not
// shared yet.
func (c *conn) setServed(sv credentials.Served) {
	c.fingerprint = sv.Fingerprint()
	c.viaSessionService = sv.ViaSessionService()
	c.certificate = sv.Certificate()
	c.loggedIn = time.Now()
	c.served = sv
	c.served.Credentials = credentials.Credentials{}
}

func (s *sessions) requestTimeout() time.Duration { return s.opts.Config.RequestTimeout }

// insecure is whether to skip certificate verification: only when asked
// and nothing to verify against is configured. A thumbprint or a CA file
// always verifies: govmomi checks neither when told to skip, and the
// password would go to whoever answers.
func (s *sessions) insecure() bool {
	c := s.opts.Config
	return c.InsecureFlag && len(c.Thumbprints) == 0 && c.CAFile == ""
}

// current returns the logged-in conn, connecting on first use.
func (s *sessions) current(ctx context.Context) (*conn, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, backends.ErrClosed
		}
		if c := s.cur; c != nil {
			s.mu.Unlock()
			return c, nil
		}
		f := s.joinLocked(&s.connecting, s.firstLogin)
		s.mu.Unlock()
		if err := f.wait(ctx, "login"); err != nil {
			return nil, err
		}
		// Logged in: the new conn is current, unless closed meanwhile.
	}
}

// firstLogin is the flight of the first conn: credentials, connect and
// login, then the conn made current.
func (s *sessions) firstLogin(ctx context.Context) settle {
	s.noteProgress(phaseDialing)
	c, err := s.connect(ctx)
	s.recordLogin(err)
	return func() (*conn, error) {
		switch {
		case err != nil:
			return nil, err
		case s.closed:
			return c, backends.ErrClosed
		}
		s.swapLocked(c, 0) // no session before it: none to log out
		return nil, nil
	}
}

// maxHandshake bounds a TCP connect and TLS handshake: they take
// milliseconds, even across a WAN; one that has not completed in this time
// is a vCenter that cannot answer (a black hole), known down sooner than
// its request timeout, and seen back sooner after it heals.
const maxHandshake = 5 * time.Second

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

// connect opens a new client and logs it in with the chain's credentials.
// Each client has a transport of its own: whenever one is given up (here
// on a failure, in closeConn otherwise) its idle connections are closed,
// or each would hold a TLS socket and two goroutines for the transport's
// idle timeout (90 s): a vCenter refusing logins, probed every second,
// would hold about ninety.
func (s *sessions) connect(ctx context.Context) (*conn, error) {
	host := net.JoinHostPort(s.opts.Config.Server, strconv.Itoa(s.opts.Config.Port))
	u := &url.URL{Scheme: "https", Host: host, Path: vim25.Path}
	sc := soap.NewClient(u, s.insecure())
	if ua := s.opts.UserAgent; ua != "" {
		sc.UserAgent = ua // the tags client derives from sc and keeps it
	}
	// A thumbprint (any one listed) is the only thing that vouches for a
	// pinned vCenter; otherwise a caFile is its only root (system roots
	// not consulted), else the system's roots are. Unlike govmomi (and
	// CPI), a certificate a CA vouches for does not pass with a thumbprint
	// that does not match.
	switch tp, ca := s.opts.Config.Thumbprints, s.opts.Config.CAFile; {
	case len(tp) > 0:
		sc.DefaultTransport().TLSClientConfig = pinned(u.Host, tp)
	case ca != "":
		if err := sc.SetRootCAs(ca); err != nil {
			return nil, &connError{what: "TLS configuration", err: fmt.Errorf("caFile %s: %w", ca, err)}
		}
	}
	boundTLSDial(sc.DefaultTransport(), min(s.requestTimeout(), maxHandshake), s.recordCertificate, s.noteProgress)
	// Lookups sent to vCenter directly run concurrently (the controllers'
	// workers, the drift pass, probes): net/http keeps 2 idle connections
	// per host, so every burst beyond 2 closed its extra connections and
	// dialled them again, a TLS handshake each.
	sc.DefaultTransport().MaxIdleConnsPerHost = maxIdleConnsPerVCenter
	sc.Client.Transport = s.observed(drainOnClose(sc.Client.Transport))
	rt := withRetries(sc, s.opts.Config.RoundTripCount)
	vc, err := vim25.NewClient(ctx, rt)
	if err != nil {
		sc.CloseIdleConnections()
		return nil, classify(fmt.Errorf("connect: %w", err))
	}
	vc.Client = sc // the REST client derives from it; NewClient only sets it for a bare soap.Client
	idle := cmp.Or(s.opts.KeepAlive, 5*time.Minute)
	c := &conn{vim: vc, raw: rt}
	relogin := &reloginRoundTripper{next: rt, sessions: s, conn: c}
	// The keep-alive ping carries a deadline like every other call: the
	// library's default would wait for ever on a vCenter that never
	// answers. Its outcome is a connection-level event.
	ping := func() error { //nolint:contextcheck // keep-alive pings run for the session's life, not the login's ctx
		pctx, cancel := context.WithTimeout(s.lifetime(), s.requestTimeout())
		defer cancel()
		// Below re-login: a lost session stops the pings (the next lookup
		// logs in again), and a ping never waits on a login.
		_, err := methods.GetCurrentTime(pctx, rt)
		s.recordReachability(pctx, "keep-alive", err)
		return err
	}
	c.keepalive = keepalive.NewHandlerSOAP(relogin, idle, ping)
	vc.RoundTripper = c.keepalive
	attempt := time.Now()
	served, err := s.chain.Login(ctx, func(cr credentials.Served) error { return s.login(ctx, c, nil, cr) })
	if err != nil {
		s.logRefusals(attempt)
		c.keepalive.Stop()
		sc.CloseIdleConnections()
		return nil, credentialsFailure(err)
	}
	c.setServed(served) // c is not shared yet
	return c, nil
}

// recordCertificate keeps c, the certificate a handshake just accepted.
func (s *sessions) recordCertificate(c *x509.Certificate) {
	s.peerCert.Store(&backends.Certificate{NotAfter: c.NotAfter.UTC(), Subject: c.Subject.String(),
		Issuer: c.Issuer.String(), SHA256Thumbprint: soap.ThumbprintSHA256(c)})
}

// logRefusals says which credentials vCenter refused since attempt began,
// and when they are sent again (see credentials.Chain): once per refusal,
// the source named, never a value.
func (s *sessions) logRefusals(attempt time.Time) {
	for _, r := range s.chain.Refused() {
		if r.Last.Before(attempt) {
			continue
		}
		if r.Retry.IsZero() {
			// No retry time: never again by the schedule (0), or a
			// standby's, which only the leader's login lets send them.
			s.log.Info("vCenter refused the credentials: not sent again until they change, or the leader logs in with them", "credentials", r.Source, "refusals", r.Refusals)
			continue
		}
		s.log.Info("vCenter refused the credentials: sent again unchanged no sooner than the retry time, or at once when they change",
			"credentials", r.Source, "refusals", r.Refusals, "retry", r.Retry.UTC().Format(time.RFC3339))
	}
}

// credentialsFailure is a failed walk of the chain: a login's own failure
// as it is, else the credentials could not be had (only ones vCenter
// refused before, and not tried again, are its refusal still).
func credentialsFailure(err error) error {
	var ce *connError
	if errors.As(err, &ce) {
		return err
	}
	if errors.Is(err, credentials.ErrRefusedBefore) {
		return &connError{what: "credentials", err: err, kind: backends.ErrAuth}
	}
	return &connError{what: "credentials", err: err}
}

// noteServedLocked logs which source logged in, when it changed or a
// source was refused first (never a value). The caller holds s.mu.
func (s *sessions) noteServedLocked(sv credentials.Served) {
	if sv.Source == s.servedBy && len(sv.Rejected) == 0 {
		return
	}
	s.servedBy = sv.Source
	if len(sv.Rejected) > 0 {
		s.log.Info("Logged in with the next credential source: vCenter refused the ones before", "credentials", sv.Source, "refused", sv.Rejected)
		return
	}
	s.log.Info("Logged in", "credentials", sv.Source)
}

// relogin logs c in again with the current credentials, unless a login
// happened since generation seen or c was swapped out. Concurrent callers
// share one re-login, each waiting at most until its own ctx ends.
func (s *sessions) relogin(ctx context.Context, c *conn, seen uint64) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return backends.ErrClosed
	}
	if s.generation != seen || s.cur != c || c.closed {
		s.mu.Unlock()
		return nil
	}
	f := s.joinLocked(&c.relogging, func(ctx context.Context) settle { return s.reloginFlight(ctx, c) })
	s.mu.Unlock()
	return f.wait(ctx, "re-login")
}

// reloginFlight is the flight of c's re-login. A session lost because
// another appliance now answers at the address (a re-image, a DNS
// cut-over) is not logged in again on c: c says which vCenter it is by
// the service content it connected with, and discovery tells vCenters
// apart by that. c is retired instead, and the next call connects anew.
func (s *sessions) reloginFlight(ctx context.Context, c *conn) settle {
	var served credentials.Served
	err := s.sameAppliance(ctx, c)
	var changed *applianceChangedError
	switch {
	case errors.As(err, &changed):
		s.recordLogin(nil) // it answered
	case err != nil:
		s.recordLogin(err)
	default:
		loggedOut := false
		served, err = s.chain.Login(ctx, func(cr credentials.Served) error {
			if !loggedOut {
				// NotAuthenticated can come while the server still holds
				// our session (a vCenter then refuses Login on it): end it
				// first; an error only means it was already gone.
				loggedOut = true
				if sm := c.vim.ServiceContent.SessionManager; sm != nil {
					_, _ = methods.Logout(ctx, c.raw, &types.Logout{This: *sm})
				}
			}
			return s.login(ctx, c, nil, cr)
		})
		if err != nil {
			err = credentialsFailure(err)
		}
		s.recordLogin(err)
	}
	return func() (*conn, error) {
		switch {
		case changed != nil:
			if s.cur == c && !s.closed {
				s.log.Info("Another vCenter answers at the address: its session is not carried over; connecting anew",
					"was", changed.was, "now", changed.now)
				s.cur = nil
				s.generation++
				return c, err
			}
		case err == nil:
			c.setServed(served)
			c.restValid = false
			s.generation++
			if s.cur == c {
				s.noteServedLocked(served)
				s.armRenewalLocked(c, time.Until(c.token.renewAt))
			}
		}
		return nil, err
	}
}

// sameAppliance is an applianceChangedError when the address now answers
// as another vCenter than the one c connected to: its service content,
// which needs no session, names another instance UUID.
func (s *sessions) sameAppliance(ctx context.Context, c *conn) error {
	res, err := methods.RetrieveServiceContent(ctx, c.raw, &types.RetrieveServiceContent{This: vim25.ServiceInstance})
	if err != nil {
		return classify(fmt.Errorf("read the service content: %w", err))
	}
	was, now := c.vim.ServiceContent.About.InstanceUuid, res.Returnval.About.InstanceUuid
	if !strings.EqualFold(was, now) {
		return &applianceChangedError{was: strings.ToLower(was), now: strings.ToLower(now)}
	}
	return nil
}

// applianceChangedError is a session lost to another appliance at the
// address.
type applianceChangedError struct{ was, now string }

func (e *applianceChangedError) Error() string {
	return fmt.Sprintf("the address now answers as vCenter instance %s, not instance %s: connecting anew", e.now, e.was)
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
	cur, err := s.chain.Current(ctx)
	if (errors.Is(err, credentials.ErrRefusedBefore) || errors.Is(err, credentials.ErrDeferred)) && !errors.Is(err, credentials.ErrNoCredentials) {
		// Every source's credentials refused before, or (a standby) not
		// yet logged in with by the leader: no login to try, and nothing
		// new to say (said when refused). A source gone (a deleted
		// Secret) is still reported, below.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("credentials: %w", err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false, backends.ErrClosed
	}
	none := s.cur == nil
	unchanged := none || s.cur.fingerprint == cur.Fingerprint()
	s.mu.Unlock()
	if none {
		// Nothing to rotate; whoever waits to log in may now.
		select {
		case s.loginDue <- struct{}{}:
		default:
		}
	}
	if unchanged {
		return false, nil
	}
	// Not a flight: the caller rotates on its own schedule and waits for
	// the outcome. A rejection here is not Down (the current session
	// serves); the transport still records whether vCenter answered.
	next, err := s.connect(ctx)
	if err != nil {
		return false, fmt.Errorf("new credentials rejected, keeping the current session: %w", err)
	}
	s.mu.Lock()
	switch old := s.cur; {
	case s.closed:
		err = backends.ErrClosed
	case old != nil && old.fingerprint == next.fingerprint:
		// vCenter refused the new credentials and the walk came back to
		// the current ones: nothing rotated.
		err = fmt.Errorf("new credentials from %s rejected, keeping the current session (credentials from %s)",
			cur.Source, next.served.Source)
	default:
		s.swapLocked(next, grace)
	}
	s.mu.Unlock()
	if err != nil {
		s.logout(next) //nolint:contextcheck // logging a session out outlives the caller's ctx (the sessions' lifetime, its own deadline)
		return false, err
	}
	return true, nil
}

// swapLocked makes next the current session; the one it replaces is
// logged out after grace, so lookups in flight finish on it. The caller
// holds s.mu and has seen s open.
func (s *sessions) swapLocked(next *conn, grace time.Duration) {
	old := s.cur
	s.cur = next
	s.generation++
	s.noteServedLocked(next.served)
	s.armRenewalLocked(next, time.Until(next.token.renewAt))
	if old != nil {
		s.tasks.spawn(func() {
			t := time.NewTimer(grace)
			defer t.Stop()
			select {
			case <-t.C:
			case <-s.lifetime().Done(): // closing: at once
			}
			s.logout(old)
		})
	}
}

// restClient returns a logged-in vAPI REST client. Concurrent callers
// share one REST login, each waiting at most until its own ctx ends.
func (s *sessions) restClient(ctx context.Context) (*rest.Client, error) {
	for {
		c, err := s.current(ctx)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, backends.ErrClosed
		}
		if s.cur != c {
			s.mu.Unlock()
			continue // swapped by a rotation meanwhile
		}
		if c.rest == nil {
			c.rest = rest.NewClient(c.vim)
			c.rest.Client.Transport = s.observed(c.rest.Client.Transport)
		}
		rc := c.rest
		if c.restValid {
			s.mu.Unlock()
			return rc, nil
		}
		f := s.joinLocked(&c.restLogin, func(ctx context.Context) settle { return s.restLoginFlight(ctx, c, rc) })
		s.mu.Unlock()
		if err := f.wait(ctx, "REST login"); err != nil {
			return nil, err
		}
		return rc, nil
	}
}

// restLoginFlight is the flight of c's REST login.
func (s *sessions) restLoginFlight(ctx context.Context, c *conn, rc *rest.Client) settle {
	s.mu.Lock()
	served, shared := c.served, c.viaSessionService
	s.mu.Unlock()
	var err error
	if !shared {
		// The source that logged the SOAP session in, read again (a
		// rotated password logs REST in too).
		var cr credentials.Credentials
		if cr, err = s.chain.Reread(ctx, served); err != nil {
			err = credentialsFailure(err) // no REST login with credentials vCenter refused
		} else if cr.ViaSessionService() {
			shared = true // it names a session service now: share its session as the next login will
		} else {
			sv := served
			sv.Credentials = cr
			err = s.login(ctx, c, rc, sv)
		}
	}
	if shared && err == nil {
		err = s.shareSOAPSession(ctx, c, rc)
	}
	// Only a failure to reach vCenter is Down: a REST login it refuses
	// (the SOAP one, with the same credentials, succeeded), or refused
	// before, leaves the lookups that need no tags working.
	var ce *connError
	if err == nil || (errors.As(err, &ce) && !errors.Is(err, backends.ErrAuth)) {
		s.recordLogin(err)
	}
	return func() (*conn, error) {
		if err == nil {
			c.restValid = true
			c.restShared = shared
		}
		return nil, err
	}
}

// restUnauthorized marks the REST session as lost.
func (s *sessions) restUnauthorized() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		s.cur.restValid = false
	}
}

// shut makes every later call fail with ErrClosed and ends the logins,
// pings and probes under way; close then logs out.
func (s *sessions) shut() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.tasks.stop()
}

// lifetime is the context of the sessions' own work: done once shut.
func (s *sessions) lifetime() context.Context { return s.tasks.ctx }

// close shuts the sessions, logs the current ones out and waits for the
// goroutines the sessions started (old sessions are logged out at once).
func (s *sessions) close(ctx context.Context) error {
	s.shut()
	s.mu.Lock()
	c := s.cur
	s.cur = nil
	s.mu.Unlock()
	var err error
	if c != nil {
		err = s.closeConn(ctx, c)
	}
	if werr := s.tasks.wait(ctx); werr != nil {
		return errors.Join(err, fmt.Errorf("waiting for logins and logouts under way: %w", werr))
	}
	return err
}

// logout closes c under a deadline of its own (close's lifetime has ended
// by the time some of these run), as destroy does.
func (s *sessions) logout(c *conn) {
	destroy(s.lifetime(), s.requestTimeout(), func(ctx context.Context) error { return s.closeConn(ctx, c) })
}

// closeConn logs c's sessions out, once its logins under way have ended
// (a login finishing after the logout would leave a session behind).
func (s *sessions) closeConn(ctx context.Context, c *conn) error {
	s.mu.Lock()
	c.closed = true
	if c.renewal != nil {
		c.renewal.Stop()
	}
	flights := []*flight{c.relogging, c.restLogin}
	s.mu.Unlock()
	for _, f := range flights {
		if f != nil {
			_ = f.wait(ctx, "login")
		}
	}
	s.mu.Lock()
	rc, restValid, restShared := c.rest, c.restValid, c.restShared
	s.mu.Unlock()
	var err error
	if rc != nil && restValid && !restShared {
		err = rc.Logout(ctx)
	}
	if lerr := session.NewManager(c.vim).Logout(ctx); lerr != nil && err == nil {
		err = lerr
	}
	c.keepalive.Stop()
	// The SOAP and REST clients share c's transport, and nothing will use
	// it again.
	c.vim.Client.CloseIdleConnections()
	return err
}
