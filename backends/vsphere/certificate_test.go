package vsphere_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	_ "github.com/vmware/govmomi/lookup/simulator" // where STS is (as CPI's tests)
	"github.com/vmware/govmomi/simulator"
	_ "github.com/vmware/govmomi/sts/simulator" // vCenter's STS
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/solutionuser"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// tokenUser is the user the simulator's STS token names: a session of a
// certificate login shows as this user.
const tokenUser = "Administrator@VSPHERE.LOCAL"

// certTraffic watches a certificate login's requests below the backend:
// STS token requests, REST logins, and answers that say the session is
// gone (SOAP NotAuthenticated to a lookup, REST 401).
type certTraffic struct {
	issued, restLogins, notAuthenticated, unauthorized atomic.Int64
	// refuseSTS makes STS answer every token request with a refusal of
	// the certificate, as vCenter's does for an unknown solution user.
	refuseSTS atomic.Bool
}

const stsRefusal = `<?xml version="1.0" encoding="UTF-8"?><S:Envelope xmlns:S="http://schemas.xmlsoap.org/soap/envelope/"><S:Body><S:Fault xmlns:ns4="http://www.w3.org/2003/05/soap-envelope"><faultcode xmlns:ns0="http://docs.oasis-open.org/ws-sx/ws-trust/200512">ns0:FailedAuthentication</faultcode><faultstring>Invalid credentials</faultstring></S:Fault></S:Body></S:Envelope>`

func (ct *certTraffic) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		var body []byte
		if r.Body != nil {
			var err error
			if body, err = io.ReadAll(r.Body); err != nil {
				return nil, err
			}
			_ = r.Body.Close()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sts := strings.Contains(r.URL.Path, "/sts/")
		if sts && bytes.Contains(body, []byte("RequestSecurityToken")) {
			ct.issued.Add(1)
			if ct.refuseSTS.Load() {
				return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error", Request: r,
					Header: http.Header{"Content-Type": {"text/xml"}}, Body: io.NopCloser(strings.NewReader(stsRefusal))}, nil
			}
		}
		restLogin := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/session") && r.URL.RawQuery == ""
		if restLogin {
			ct.restLogins.Add(1)
		}
		res, err := next.RoundTrip(r)
		if err != nil || sts {
			return res, err
		}
		if res.StatusCode == http.StatusUnauthorized && !restLogin {
			ct.unauthorized.Add(1)
		}
		// Finding vCenter's STS reads its settings before any login,
		// which vCenter may refuse: not a lookup.
		if r.URL.Path == "/sdk" && !bytes.Contains(body, []byte("QueryOptions")) {
			answer, err := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if err != nil {
				return nil, err
			}
			res.Body = io.NopCloser(bytes.NewReader(answer))
			if bytes.Contains(answer, []byte("NotAuthenticated")) {
				ct.notAuthenticated.Add(1)
			}
		}
		return res, nil
	})
}

// certificateLogin is one simulated vCenter with STS, a backend logging
// in with a solution user's certificate, and what it logs.
type certificateLogin struct {
	vc       *vcsim.VCenter
	b        *vsphere.Backend
	traffic  *certTraffic
	cert     string
	key      string
	logs     *lockedBuffer
	lifetime time.Duration
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s + "\n")
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newCertificateLogin(t *testing.T, lifetime time.Duration, src func(cert, key string) credentials.Source) *certificateLogin {
	t.Helper()
	cert, key, err := solutionuser.New("k8s-ccm")
	if err != nil {
		t.Fatal(err)
	}
	f := startFederation(t, 1)
	fx := &certificateLogin{vc: f.VCenters[0], traffic: &certTraffic{}, cert: cert, key: key, logs: &lockedBuffer{}, lifetime: lifetime}
	// Everything the backend logs, at every verbosity, is kept to be
	// searched for the key and the token.
	klog.SetLogger(funcr.New(func(prefix, args string) { fx.logs.add(prefix + " " + args) }, funcr.Options{Verbosity: 10}))
	t.Cleanup(klog.ClearLogger)
	var creds credentials.Source = credentials.Static{User: cert, Password: config.Password(key)}
	if src != nil {
		creds = src(cert, key)
	}
	fx.b = vsphere.New(vsphere.Options{
		Config:        config.VCenter{Name: fx.vc.Name, Server: fx.vc.Host, Port: fx.vc.Port, InsecureFlag: true, RoundTripCount: 1, RequestTimeout: 10 * time.Second}.WithDefaults(),
		Credentials:   creds,
		WrapTransport: fx.traffic.wrap,
		TokenLifetime: lifetime,
	})
	fx.b.Start()
	t.Cleanup(func() { _ = fx.b.Close(context.Background()) })
	return fx
}

// lookup finds a VM (SOAP) and reads its zone (REST).
func (fx *certificateLogin) lookup(ctx context.Context, t *testing.T) {
	t.Helper()
	vm := fx.vc.VMs[0]
	vms, err := fx.b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{vm.UUID}})
	if err != nil || len(vms) != 1 {
		t.Fatalf("Find = %v, %v", vms, err)
	}
	tags, err := fx.b.Tags(ctx, &vms[0], []string{"k8s-zone"})
	if err != nil || tags["k8s-zone"] != vm.Zone {
		t.Fatalf("Tags = %v, %v; want zone %q", tags, err, vm.Zone)
	}
}

// tokenSessions lists the simulator's sessions of certificate logins.
func tokenSessions(ctx context.Context, t *testing.T, vc *vcsim.VCenter) []types.UserSession {
	t.Helper()
	all, err := vc.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []types.UserSession
	for _, s := range all {
		if s.UserName == tokenUser {
			out = append(out, s)
		}
	}
	return out
}

// A certificate in user and its key in password log the SOAP and the REST
// session in with tokens (LoginByToken), never with Login; the key and the
// token reach no log.
func TestCertificateLoginSOAPAndREST(t *testing.T) {
	fx := newCertificateLogin(t, 0, nil)
	ctx := t.Context()
	before, _ := fx.vc.SOAPCalls()
	fx.lookup(ctx, t)
	after, _ := fx.vc.SOAPCalls()
	if n := after["LoginByToken"] - before["LoginByToken"]; n != 1 {
		t.Errorf("%d LoginByToken calls, want 1", n)
	}
	if n := after["Login"] - before["Login"]; n != 0 {
		t.Errorf("%d Login calls (the certificate sent as a password), want 0", n)
	}
	if n := fx.traffic.issued.Load(); n != 2 {
		t.Errorf("%d tokens issued, want 2 (SOAP, REST)", n)
	}
	if n := fx.traffic.restLogins.Load(); n != 1 {
		t.Errorf("%d REST logins, want 1", n)
	}
	if s := tokenSessions(ctx, t, fx.vc); len(s) != 1 {
		t.Errorf("%d sessions of the token's user, want 1", len(s))
	}
	if got := credentialSource(fx.b); strings.Contains(got, "BEGIN") {
		t.Errorf("CredentialSource = %q quotes the certificate", got)
	}
	fx.assertNoSecret(t, fx.logs.String())
}

// assertNoSecret fails when s holds the private key or the token (any
// part of either), or the certificate.
func (fx *certificateLogin) assertNoSecret(t *testing.T, s string) {
	t.Helper()
	for _, secret := range []string{pemBody(fx.key), pemBody(fx.cert), "saml2:Assertion", "_1881a9ba-4a76-4baa-839b-36e2cba10743", "BEGIN"} {
		if strings.Contains(s, secret) {
			t.Errorf("a log or error quotes the key, the certificate or the token (%q): %s", secret, s)
		}
	}
}

// pemBody is a line from the middle of a PEM block's base64.
func pemBody(p string) string {
	lines := strings.Split(strings.TrimSpace(p), "\n")
	return lines[len(lines)/2]
}

// expireTokenSessions ends, as vCenter does, every session of a token
// once it is older than the token's lifetime (the simulator keeps them),
// until ctx ends; it returns how many it ended.
func expireTokenSessions(ctx context.Context, t *testing.T, vc *vcsim.VCenter, lifetime time.Duration) <-chan int {
	t.Helper()
	c, err := vc.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan int, 1)
	go func() {
		defer func() { _ = c.Logout(context.WithoutCancel(ctx)) }()
		ended := 0
		defer func() { out <- ended }()
		tick := time.NewTicker(lifetime / 30)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var sm mo.SessionManager
			if err := c.RetrieveOne(ctx, *c.ServiceContent.SessionManager, []string{"sessionList"}, &sm); err != nil {
				continue
			}
			for _, s := range sm.SessionList {
				if s.UserName != tokenUser || time.Since(s.LoginTime) < lifetime {
					continue
				}
				if _, err := methods.TerminateSession(ctx, c, &types.TerminateSession{This: *c.ServiceContent.SessionManager, SessionId: []string{s.Key}}); err == nil {
					ended++
				}
			}
		}
	}()
	return out
}

// A certificate login's session is renewed, with a fresh token, before
// the token expires: with vCenter ending each session when its token
// does, lookups running over several token lifetimes never meet an ended
// session (SOAP NotAuthenticated, REST 401), and the logins number about
// one per three quarters of a lifetime (counted against the lifetimes the
// test ran, not timed).
func TestCertificateLoginRenewsBeforeTokenExpires(t *testing.T) {
	const lifetime = 3 * time.Second
	fx := newCertificateLogin(t, lifetime, nil)
	ctx := t.Context()
	before, _ := fx.vc.SOAPCalls()
	ectx, stop := context.WithCancel(ctx)
	ended := expireTokenSessions(ectx, t, fx.vc, lifetime)
	start := time.Now()
	lookups := 0
	for time.Since(start) < 4*lifetime {
		fx.lookup(ctx, t)
		lookups++
		time.Sleep(lifetime / 50)
	}
	lifetimes := float64(time.Since(start)) / float64(lifetime)
	stop()
	t.Logf("%d lookups over %.2f token lifetimes; the test ended %d sessions at their token's expiry", lookups, lifetimes, <-ended)
	after, _ := fx.vc.SOAPCalls()
	logins := after["LoginByToken"] - before["LoginByToken"]
	if n, m := fx.traffic.notAuthenticated.Load(), fx.traffic.unauthorized.Load(); n != 0 || m != 0 {
		t.Errorf("lookups met a session that ended with its token: %d NotAuthenticated, %d REST 401", n, m)
	}
	// One login, then one renewal every three quarters of a lifetime.
	if low, high := int64(lifetimes), int64(lifetimes*4/3)+2; logins < low || logins > high {
		t.Errorf("%d logins over %.2f token lifetimes, want %d to %d", logins, lifetimes, low, high)
	}
	if n := fx.traffic.restLogins.Load(); n < logins-1 || n > logins {
		t.Errorf("%d REST logins for %d sessions: each renewed session's tags log in anew, once", n, logins)
	}
	fx.assertNoSecret(t, fx.logs.String())
}

// switchableSource gives the credentials last set.
type switchableSource struct {
	mu sync.Mutex
	cr credentials.Credentials
}

func (s *switchableSource) set(cert, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cr = credentials.Credentials{User: cert, Password: config.Password(key)}
}

func (s *switchableSource) Get(context.Context) (credentials.Credentials, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cr, nil
}

func (s *switchableSource) String() string { return "test source" }

// A certificate refused is refused credentials, as a password vCenter
// refuses: sent again unchanged only on the refused-credentials schedule
// (not at every probe, reload or lookup), a new certificate at once. It
// is refused either by STS (no token for it) or by vCenter (no login with
// its token).
func TestRefusedCertificateLikeRefusedPassword(t *testing.T) {
	for _, by := range []string{"STS", "vCenter"} {
		t.Run("refused by "+by, func(t *testing.T) {
			src := &switchableSource{}
			fx := newCertificateLogin(t, 0, func(cert, key string) credentials.Source {
				src.set(cert, key)
				return src
			})
			ctx := t.Context()
			var rule *simulator.FaultInjectionRule
			if by == "STS" {
				fx.traffic.refuseSTS.Store(true)
			} else {
				rule = &simulator.FaultInjectionRule{MethodName: "LoginByToken", ObjectType: "*", ObjectName: "*", Probability: 1,
					FaultType: simulator.FaultTypeCustom, Fault: &types.InvalidLogin{}, Enabled: true}
				fx.vc.Model.Service.AddFaultRule(rule)
			}
			attempts := func() int64 {
				calls, _ := fx.vc.SOAPCalls()
				return fx.traffic.issued.Load() + calls["LoginByToken"]
			}
			var errs []string
			for i := range 4 {
				err := fx.b.Probe(ctx)
				if !errors.Is(err, backends.ErrAuth) {
					t.Fatalf("probe %d = %v; want a refused login", i+1, err)
				}
				errs = append(errs, err.Error())
			}
			if !strings.Contains(errs[len(errs)-1], "refused by vCenter before") {
				t.Errorf("last probe = %s; want it to say the certificate was refused before", errs[len(errs)-1])
			}
			sent := int64(1) // the token request STS refused
			if by == "vCenter" {
				sent = 2 // a token, and the login vCenter refused
			}
			if n := attempts(); n != sent {
				t.Errorf("%d token requests and logins over 4 probes, want %d: a refused certificate is not sent again unchanged", n, sent)
			}
			if rc := fx.b.Status().RefusedCredentials; len(rc) != 1 {
				t.Errorf("RefusedCredentials = %v, want the test source", rc)
			}
			// A new certificate is sent at once, and logs in.
			fx.traffic.refuseSTS.Store(false)
			if rule != nil {
				rule.Enabled = false
			}
			cert, key, err := solutionuser.New("k8s-ccm-2")
			if err != nil {
				t.Fatal(err)
			}
			src.set(cert, key)
			if err := fx.b.Probe(ctx); err != nil {
				t.Fatalf("probe with a new certificate: %v", err)
			}
			fx.assertNoSecret(t, strings.Join(errs, "\n")+fx.logs.String())
			for _, secret := range []string{pemBody(key), pemBody(cert)} {
				if strings.Contains(fx.logs.String(), secret) {
					t.Error("a log quotes the new certificate or key")
				}
			}
		})
	}
}

// A certificate whose password is not its key fails the login with an
// error that says so, naming the fields, quoting neither (CPI fails it
// too; nothing is sent).
func TestCertificateWithoutItsKey(t *testing.T) {
	fx := newCertificateLogin(t, 0, func(cert, _ string) credentials.Source {
		return credentials.Static{User: cert, Password: "not-a-key-s3cret"}
	})
	err := fx.b.Probe(t.Context())
	if err == nil || !strings.Contains(err.Error(), "password must be its PEM private key") {
		t.Fatalf("probe = %v; want an error saying the password must be the certificate's key", err)
	}
	if strings.Contains(err.Error(), "not-a-key-s3cret") {
		t.Errorf("the error quotes the password: %v", err)
	}
	fx.assertNoSecret(t, err.Error()+fx.logs.String())
	if n := fx.traffic.issued.Load(); n != 0 {
		t.Errorf("%d token requests with a certificate and no key", n)
	}
}
