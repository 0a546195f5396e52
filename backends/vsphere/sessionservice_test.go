package vsphere_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// fakeSessionService is a session service (CPI's shared session manager), an
// external service (docs/book/vc_shared_sessions.md) that no simulator
// provides: this httptest server implements exactly the protocol CPI's
// vclib speaks (GetSharedToken): GET, "Authorization: Bearer <token>"
// (anything else: 403, as CPI's own test server answers), 200 with
// {"token": "<clone ticket>"}. Like CPI's example service, it holds one
// login to the simulated vCenter and answers each request with a fresh
// AcquireCloneTicket of it. mode makes it misbehave.
type fakeSessionService struct {
	*httptest.Server
	vc    *vcsim.VCenter
	token atomic.Value // string: the bearer token it accepts

	mu       sync.Mutex
	client   *govmomi.Client
	mode     string   // "", "403", "not-json", "empty", "bogus-ticket", "hang"
	bearers  []string // the tokens it was asked with
	requests int
}

const bogusTicket = "tok-not-a-ticket-7f3a"

func startSessionService(t *testing.T, vc *vcsim.VCenter, token string) *fakeSessionService {
	t.Helper()
	svc := &fakeSessionService{vc: vc}
	svc.token.Store(token)
	svc.Server = httptest.NewTLSServer(http.HandlerFunc(svc.serve))
	t.Cleanup(func() {
		svc.Close()
		svc.mu.Lock()
		defer svc.mu.Unlock()
		if svc.client != nil {
			_ = svc.client.Logout(context.Background())
		}
	})
	return svc
}

func (svc *fakeSessionService) setMode(m string) { svc.mu.Lock(); svc.mode = m; svc.mu.Unlock() }

func (svc *fakeSessionService) asked() (n int, bearers []string) {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	return svc.requests, slices.Clone(svc.bearers)
}

// roots trusts the service's certificate.
func (svc *fakeSessionService) roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(svc.Certificate())
	return p
}

func (svc *fakeSessionService) serve(w http.ResponseWriter, r *http.Request) {
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	svc.mu.Lock()
	svc.requests++
	svc.bearers = append(svc.bearers, bearer)
	mode := svc.mode
	svc.mu.Unlock()
	if r.Method != http.MethodGet || r.URL.Path != "/session" || bearer != svc.token.Load().(string) || mode == "403" {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	var ticket string
	switch mode {
	case "hang":
		<-r.Context().Done()
		return
	case "not-json":
		_, _ = w.Write([]byte("ticket=" + bogusTicket))
		return
	case "empty":
	case "bogus-ticket":
		ticket = bogusTicket
	default:
		var err error
		if ticket, err = svc.cloneTicket(r.Context()); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
	}
	_ = json.NewEncoder(w).Encode(struct {
		Token string `json:"token"`
	}{ticket})
}

// cloneTicket acquires a ticket of the service's own session, logging in
// (again) when it has none: TerminateSessions ends it too.
func (svc *fakeSessionService) cloneTicket(ctx context.Context) (string, error) {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if svc.client == nil {
			c, err := svc.vc.Client(ctx)
			if err != nil {
				return "", err
			}
			svc.client = c
		}
		ticket, err := session.NewManager(svc.client.Client).AcquireCloneTicket(ctx)
		if err == nil || attempt > 0 {
			return ticket, err
		}
		svc.client = nil
	}
}

// restSessionFront is a behaviour of vCenter that the simulator lacks:
// vAPI takes a SOAP session's id as its own session id (CPI's tags client
// relies on it for a session service's clone). It is a TLS reverse proxy
// to the simulator that, for a vAPI request whose session id is a live
// SOAP session, substitutes a vAPI session of the simulator (one per SOAP
// session); every other request passes unchanged.
type restSessionFront struct {
	*httptest.Server
	vc *vcsim.VCenter

	mu         sync.Mutex
	restOf     map[string]string // SOAP session key → vAPI session id
	shared     int               // vAPI requests served on a SOAP session
	restLogins int               // vAPI logins by the client itself
}

func startRESTFront(t *testing.T, vc *vcsim.VCenter) *restSessionFront {
	t.Helper()
	f := &restSessionFront{vc: vc, restOf: map[string]string{}}
	target := &url.URL{Scheme: "https", Host: vc.Server.URL.Host}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // the simulator's own certificate
	f.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/rest/") || strings.HasPrefix(r.URL.Path, "/api/") {
			if strings.HasSuffix(r.URL.Path, "/session") && r.Method == http.MethodPost {
				f.mu.Lock()
				f.restLogins++
				f.mu.Unlock()
			}
			if id := r.Header.Get("vmware-api-session-id"); id != "" {
				if restID, ok := f.restSession(r.Context(), id); ok {
					r.Header.Set("vmware-api-session-id", restID)
				}
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// restSession is the vAPI session standing for SOAP session key, when key
// is a live SOAP session of the simulator.
func (f *restSessionFront) restSession(ctx context.Context, key string) (string, bool) {
	sessions, err := f.vc.Sessions(ctx)
	if err != nil || !slices.ContainsFunc(sessions, func(s types.UserSession) bool { return s.Key == key }) {
		return "", false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shared++
	if id, ok := f.restOf[key]; ok {
		return id, true
	}
	c, err := f.vc.Client(ctx)
	if err != nil {
		return "", false
	}
	// The vAPI session outlives the SOAP one it was made with.
	defer func() { _ = c.Logout(context.WithoutCancel(ctx)) }()
	rc := rest.NewClient(c.Client)
	if err := rc.Login(ctx, url.UserPassword(f.vc.User, f.vc.AcceptedPassword())); err != nil {
		return "", false
	}
	f.restOf[key] = rc.SessionID()
	return f.restOf[key], true
}

func (f *restSessionFront) counts() (shared, restLogins int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shared, f.restLogins
}

func (f *restSessionFront) hostPort(t *testing.T) (string, int) {
	u, err := url.Parse(f.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	return u.Hostname(), port
}

// serviceFixture is a simulated vCenter behind the vAPI front, a session
// service for it, and a secrets directory naming the service.
type serviceFixture struct {
	vc      *vcsim.VCenter
	front   *restSessionFront
	service *fakeSessionService
	dir     string
	opts    vsphere.Options
}

const serviceToken = "tok-bearer-5b1e"

func newServiceFixture(t *testing.T) *serviceFixture {
	t.Helper()
	vc := startFederation(t, 1).VCenters[0]
	fx := &serviceFixture{vc: vc, front: startRESTFront(t, vc), service: startSessionService(t, vc, serviceToken), dir: t.TempDir()}
	host, port := fx.front.hostPort(t)
	fx.writeKeys(t, map[string]string{
		credentials.SessionServiceURLKey(host):   fx.service.URL + "/session",
		credentials.SessionServiceTokenKey(host): serviceToken,
	})
	fx.opts = vsphere.Options{
		Config:                config.VCenter{Name: vc.Name, Server: host, Port: port, InsecureFlag: true, RoundTripCount: 1, RequestTimeout: 5 * time.Second}.WithDefaults(),
		Credentials:           credentials.Directory{Dir: fx.dir, Server: host},
		SessionServiceRootCAs: fx.service.roots(),
	}
	return fx
}

func (fx *serviceFixture) writeKeys(t *testing.T, keys map[string]string) {
	t.Helper()
	for k, v := range keys {
		path := filepath.Join(fx.dir, k)
		if v == "" {
			_ = os.Remove(path)
			continue
		}
		if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func (fx *serviceFixture) backend(t *testing.T) *vsphere.Backend {
	b := vsphere.New(fx.opts)
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// Credentials in the session service's form log in as CPI does: a clone
// ticket from the service, asked with the bearer token, then
// CloneSession; tags are read on the same session (no REST login); a lost
// session is cloned again; Close logs the clone out.
func TestSessionServiceLogin(t *testing.T) {
	fx := newServiceFixture(t)
	b := fx.backend(t)
	ctx := t.Context()
	want := fx.vc.VMs[0]
	vms, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{want.UUID}})
	if err != nil || len(vms) != 1 {
		t.Fatalf("Find = %v, %v", vms, err)
	}
	if n, bearers := fx.service.asked(); n != 1 || bearers[0] != serviceToken {
		t.Fatalf("session service asked %d times with %d tokens; want once, with the Secret's token", n, len(bearers))
	}
	if got := credentialSource(b); got != "secrets directory "+fx.dir {
		t.Fatalf("CredentialSource = %q", got)
	}
	sessions, err := fx.vc.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The service's own session and the CCM's clone, of the same user.
	if len(sessions) != 2 || sessions[0].UserName != sessions[1].UserName {
		t.Fatalf("sessions = %+v; want the service's and its clone", sessions)
	}

	tags, err := b.Tags(ctx, &backends.VM{Ref: backends.VMRef{Datacenter: want.Datacenter, ID: want.Ref}, Host: hostOf(t, b, want)}, []string{"k8s-zone", "k8s-region"})
	if err != nil || tags["k8s-zone"] != want.Zone || tags["k8s-region"] != want.Region {
		t.Fatalf("Tags = %v, %v; want zone %s region %s", tags, err, want.Zone, want.Region)
	}
	if shared, logins := fx.front.counts(); shared == 0 || logins != 0 {
		t.Fatalf("vAPI: %d requests on the SOAP session, %d REST logins; want the SOAP session's, no REST login", shared, logins)
	}

	// vCenter ends every session (the service's too): the next lookup
	// clones a new one.
	if err := fx.vc.TerminateSessions(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Find(ctx, backends.Query{By: backends.ByUUID, Values: []string{want.UUID}}); err != nil {
		t.Fatalf("Find after the session was lost: %v", err)
	}
	if n, _ := fx.service.asked(); n != 2 {
		t.Fatalf("session service asked %d times; want 2 (a ticket serves once)", n)
	}
	// The vAPI session follows the SOAP one.
	if _, err := b.Tags(ctx, &backends.VM{Ref: backends.VMRef{Datacenter: want.Datacenter, ID: want.Ref}, Host: hostOf(t, b, want)}, []string{"k8s-zone"}); err != nil {
		t.Fatalf("Tags after the session was lost: %v", err)
	}

	if err := b.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if sessions, err := fx.vc.Sessions(ctx); err != nil || len(sessions) != 1 {
		t.Fatalf("after Close: %d sessions, %v; want the service's alone", len(sessions), err)
	}
}

// Rotating the token in the Secret (here the directory) is a rotation:
// a new clone beside the current session, swapped in; the old one logged
// out. Rotating to a user and password works the same way.
func TestSessionServiceRotation(t *testing.T) {
	fx := newServiceFixture(t)
	b := fx.backend(t)
	ctx := t.Context()
	q := backends.Query{By: backends.ByUUID, Values: []string{fx.vc.VMs[0].UUID}}
	if _, err := b.Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	host := fx.opts.Config.Server
	const next = "tok-bearer-rotated"
	fx.service.token.Store(next)
	fx.writeKeys(t, map[string]string{credentials.SessionServiceTokenKey(host): next})
	if rotated, err := b.RefreshCredentials(ctx, time.Millisecond); !rotated || err != nil {
		t.Fatalf("token rotation: rotated=%v err=%v", rotated, err)
	}
	if _, bearers := fx.service.asked(); bearers[len(bearers)-1] != next {
		t.Fatal("the new token was not used")
	}
	if _, err := b.Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	// To the user-and-password form: the URL goes, the keys come.
	fx.writeKeys(t, map[string]string{
		credentials.SessionServiceURLKey(host): "", credentials.SessionServiceTokenKey(host): "",
		credentials.UsernameKey(host): fx.vc.User, credentials.PasswordKey(host): fx.vc.Password,
	})
	if rotated, err := b.RefreshCredentials(ctx, time.Millisecond); !rotated || err != nil {
		t.Fatalf("to user and password: rotated=%v err=%v", rotated, err)
	}
	if _, err := b.Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the old session's grace
	sessions, err := fx.vc.Sessions(ctx)
	if err != nil || len(sessions) != 2 { // the service's, ours
		t.Fatalf("%d sessions, %v; want 2: the clones were logged out", len(sessions), err)
	}
}

// Without a token key, the session service is asked with the service
// account token, read at every login (a projected token rotates).
func TestSessionServiceServiceAccountToken(t *testing.T) {
	fx := newServiceFixture(t)
	host := fx.opts.Config.Server
	fx.writeKeys(t, map[string]string{credentials.SessionServiceTokenKey(host): ""})
	saFile := filepath.Join(t.TempDir(), "token")
	fx.opts.ServiceAccountTokenFile = saFile
	b := fx.backend(t)
	ctx := t.Context()
	q := backends.Query{By: backends.ByUUID, Values: []string{fx.vc.VMs[0].UUID}}

	_, err := b.Find(ctx, q)
	if err == nil || !strings.Contains(err.Error(), "no "+credentials.SessionServiceTokenKey(host)) || !strings.Contains(err.Error(), saFile) {
		t.Fatalf("no token anywhere: err = %v; want one naming the key and the file", err)
	}
	for i, tok := range []string{"tok-sa-1", "tok-sa-2"} {
		fx.service.token.Store(tok)
		if err := os.WriteFile(saFile, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if err := fx.vc.TerminateSessions(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.Find(ctx, q); err != nil {
			t.Fatalf("with service account token %d: %v", i+1, err)
		}
	}
}

// Every way the session service can fail is an error that names it by
// scheme and host, never the token, the ticket or the rest of its URL, and
// comes within the request timeout.
func TestSessionServiceFailures(t *testing.T) {
	fx := newServiceFixture(t)
	host := fx.opts.Config.Server
	secretURL := fx.service.URL + "/session?key=tok-in-query"
	for _, tc := range []struct {
		name   string
		mode   string
		url    string
		token  string
		roots  bool
		errHas string
	}{
		{"wrong token", "", "", "tok-wrong-token", true, "answered 403 Forbidden"},
		{"forbidden", "403", "", "", true, "answered 403 Forbidden"},
		{"not JSON", "not-json", "", "", true, `its answer is not the JSON object {"token": "<ticket>"}`},
		{"empty ticket", "empty", "", "", true, "answered an empty token"},
		{"ticket refused by vCenter", "bogus-ticket", "", "", true, "clone session from the session manager at " + credentials.RedactURL(fx.service.URL)},
		{"slower than the request timeout", "hang", "", "", true, "context deadline exceeded"},
		{"untrusted certificate", "", "", "", false, "certificate"},
		{"URL with secrets in it", "403", strings.Replace(secretURL, "https://", "https://user:tok-in-userinfo@", 1), "", true, "session manager: " + credentials.RedactURL(fx.service.URL) + " (credentials from secrets directory " + fx.dir + ") answered 403"},
		{"not an http URL", "", "ftp://tok-in-ftp@x/", "", true, "is not an http(s) URL"},
		{"unreachable", "", "https://127.0.0.1:1/session?tok-unreachable", "", true, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx.service.setMode(tc.mode)
			keys := map[string]string{credentials.SessionServiceURLKey(host): fx.service.URL + "/session", credentials.SessionServiceTokenKey(host): serviceToken}
			if tc.url != "" {
				keys[credentials.SessionServiceURLKey(host)] = tc.url
			}
			if tc.token != "" {
				keys[credentials.SessionServiceTokenKey(host)] = tc.token
			}
			fx.writeKeys(t, keys)
			o := fx.opts
			o.Config.RequestTimeout = time.Second
			if !tc.roots {
				o.SessionServiceRootCAs = nil
			}
			b := vsphere.New(o)
			b.Start()
			defer func() { _ = b.Close(context.Background()) }()
			start := time.Now()
			_, err := b.Find(t.Context(), backends.Query{By: backends.ByUUID, Values: []string{fx.vc.VMs[0].UUID}})
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("Find took %s; want the request timeout", took)
			}
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("err = %v; want one containing %q", err, tc.errHas)
			}
			for _, secret := range []string{"tok-", "/session"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error quotes a secret (%q): %v", secret, err)
				}
			}
		})
	}
}
