package vsphere_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// loginsWith counts the SOAP Login requests that carry password, below
// the backend (its SOAP and REST transports).
type loginsWith struct {
	password string
	n        atomic.Int64
}

func (l *loginsWith) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			body, err := io.ReadAll(r.Body)
			_ = r.Body.Close()
			if err != nil {
				return nil, err
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte("<Login ")) && bytes.Contains(body, []byte(">"+l.password+"<")) {
				l.n.Add(1)
			}
		}
		return next.RoundTrip(r)
	})
}

// lockoutFixture is one simulated vCenter that refuses the config's
// password, and the Secret the chain reads after it (in a fake API
// server: its informer is the real one).
type lockoutFixture struct {
	vc      *vcsim.VCenter
	client  *fake.Clientset
	secret  credentials.Source
	refused *loginsWith
	b       *vsphere.Backend
}

const inlineRefused = "pw-inline-refused"

func newLockoutFixture(t *testing.T) *lockoutFixture {
	t.Helper()
	f := startFederation(t, 1)
	fx := &lockoutFixture{vc: f.VCenters[0], client: fake.NewClientset(), refused: &loginsWith{password: inlineRefused}}
	secrets := credentials.NewSecrets(fx.client, nil)
	t.Cleanup(secrets.Close)
	fx.secret = secrets.Source("kube-system", "vsphere-creds", fx.vc.Host)
	chain := credentials.NewChain(credentials.Static{User: fx.vc.User, Password: inlineRefused}, fx.secret)
	fx.b = vsphere.New(vsphere.Options{
		Config:        config.VCenter{Name: fx.vc.Name, Server: fx.vc.Host, Port: fx.vc.Port, InsecureFlag: true, RoundTripCount: 1, RequestTimeout: 10 * time.Second}.WithDefaults(),
		Credentials:   chain,
		WrapTransport: fx.refused.wrap,
	})
	fx.b.Start()
	t.Cleanup(func() { _ = fx.b.Close(t.Context()) })
	return fx
}

// putSecret creates or replaces the Secret with password, and waits
// until the chain reads it.
func (fx *lockoutFixture) putSecret(t *testing.T, password string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "vsphere-creds"}, Data: map[string][]byte{
		credentials.UsernameKey(fx.vc.Host): []byte(fx.vc.User), credentials.PasswordKey(fx.vc.Host): []byte(password),
	}}
	secrets := fx.client.CoreV1().Secrets("kube-system")
	if _, err := secrets.Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		if _, err := secrets.Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the Secret read", func() bool {
		cr, err := fx.secret.Get(t.Context())
		return err == nil && cr.Password.Reveal() == password
	})
}

func (fx *lockoutFixture) deleteSecret(t *testing.T) {
	t.Helper()
	if err := fx.client.CoreV1().Secrets("kube-system").Delete(t.Context(), "vsphere-creds", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Secret gone", func() bool {
		_, err := fx.secret.Get(t.Context())
		return errors.Is(err, credentials.ErrNoCredentials)
	})
}

// reloads does what n reloads and the probes between them do: each
// reload refreshes the credentials (cloud/reload.go retries every 5 s),
// each probe logs in when there is no session. It returns the last
// probe's error: nothing vCenter accepts is left.
func (fx *lockoutFixture) reloads(t *testing.T, n int) error {
	t.Helper()
	var err error
	for i := range n {
		if rotated, err := fx.b.RefreshCredentials(t.Context(), time.Millisecond); rotated {
			t.Fatalf("reload %d: rotated (err %v) with nothing vCenter accepts", i, err)
		}
		err = fx.b.Probe(t.Context())
	}
	return err
}

// assertRefusedBefore checks a login's failure: an auth failure naming
// the source refused before, quoting no password.
func (fx *lockoutFixture) assertRefusedBefore(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, backends.ErrAuth) || !strings.Contains(err.Error(), "config file: refused by vCenter before") {
		t.Fatalf("probe = %v; want an auth failure naming the source refused before", err)
	}
	if strings.Contains(err.Error(), inlineRefused) || strings.Contains(err.Error(), fx.vc.Password) {
		t.Fatalf("the error quotes a password: %v", err)
	}
}

// assertRefusedOnce checks that the refused password was sent once.
func (fx *lockoutFixture) assertRefusedOnce(t *testing.T, after string) {
	t.Helper()
	if n := fx.refused.n.Load(); n != 1 {
		t.Fatalf("%s: %d logins with the refused password, want 1 (the first refusal)", after, n)
	}
}

// Issue 20 (account lockout): vCenter refused the config's login and the
// Secret is missing. Every reload and every probe used to log in with the
// refused password again: about 12 failed logins a minute, and vSphere
// SSO locks an account after 5 in 180 s. The refused password is sent
// once, however many reloads follow (before its retry is due: two minutes
// by default); the Secret, back with a password vCenter takes, is tried
// (once) and serves.
func TestRefusedCredentialsNotRetried(t *testing.T) {
	const reloads = 12
	t.Run("Secret missing from the start", func(t *testing.T) {
		fx := newLockoutFixture(t)
		if err := fx.b.Probe(t.Context()); !errors.Is(err, backends.ErrAuth) {
			t.Fatalf("first probe = %v; want the config's login refused", err)
		}
		fx.assertRefusedOnce(t, "first probe")
		err := fx.reloads(t, reloads)
		fx.assertRefusedOnce(t, fmt.Sprintf("after %d reloads and probes", reloads))
		fx.assertRefusedBefore(t, err)
		if got := fx.b.Status().RefusedCredentials; len(got) != 1 || got[0].Source != "config file" || got[0].Refusals != 1 || got[0].Retry.IsZero() {
			t.Fatalf("RefusedCredentials = %+v", got)
		}

		fx.putSecret(t, fx.vc.Password)
		if n := logins(fx.vc, func() {
			if err := fx.b.Probe(t.Context()); err != nil {
				t.Fatalf("probe with the Secret back: %v", err)
			}
		}); n != 1 {
			t.Fatalf("the Secret back: %d Login calls, want 1 (the Secret's alone)", n)
		}
		if got := credentialSource(fx.b); got != "secret kube-system/vsphere-creds" {
			t.Fatalf("served by %q", got)
		}
		fx.assertRefusedOnce(t, "the Secret back")
	})

	t.Run("Secret deleted while its session serves", func(t *testing.T) {
		fx := newLockoutFixture(t)
		fx.putSecret(t, fx.vc.Password)
		if err := fx.b.Probe(t.Context()); err != nil {
			t.Fatalf("first probe: %v", err)
		}
		fx.assertRefusedOnce(t, "first login (then the Secret's)")
		fx.deleteSecret(t)
		rotated, err := fx.b.RefreshCredentials(t.Context(), time.Millisecond)
		fx.assertRefusedOnce(t, "a reload with the Secret deleted")
		if rotated || !errors.Is(err, credentials.ErrNoCredentials) || !strings.Contains(err.Error(), "secret kube-system/vsphere-creds not found") {
			t.Fatalf("Secret deleted, its session serving: rotated=%v err=%v; want its absence reported, nothing done", rotated, err)
		}
		// The session is lost: a re-login has nothing vCenter takes.
		if err := fx.vc.TerminateSessions(t.Context()); err != nil {
			t.Fatal(err)
		}
		err = fx.reloads(t, reloads)
		fx.assertRefusedOnce(t, fmt.Sprintf("after %d reloads and probes", reloads))
		fx.assertRefusedBefore(t, err)

		// The Secret restored with another password (vCenter's rotated).
		const next = "pw-rotated"
		fx.vc.SetPassword(next)
		fx.putSecret(t, next)
		if n := logins(fx.vc, func() {
			if _, err := fx.b.RefreshCredentials(t.Context(), time.Millisecond); err != nil {
				t.Fatalf("refresh with the Secret back: %v", err)
			}
			if err := fx.b.Probe(t.Context()); err != nil {
				t.Fatalf("probe with the Secret back: %v", err)
			}
		}); n != 1 {
			t.Fatalf("the Secret back: %d Login calls, want 1 (the Secret's alone)", n)
		}
		fx.assertRefusedOnce(t, "the Secret back")
		if got := fx.b.Status().RefusedCredentials; len(got) != 1 || got[0].Source != "config file" || got[0].Refusals != 1 || got[0].Retry.IsZero() {
			t.Fatalf("RefusedCredentials = %+v", got)
		}
	})
}

// A vCenter that refuses the one password it has (its identity source
// down, say) is sent it again on the retry schedule — not at every probe,
// and not never: once it accepts the password again, it serves. The
// schedule is shortened here (After 250 ms, doubling to 500 ms); the
// default's numbers are credentials' unit tests'.
func TestRefusedCredentialsRetriedOnSchedule(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	retry := credentials.Retry{After: 250 * time.Millisecond, Max: 500 * time.Millisecond}
	b := vsphere.New(vsphere.Options{
		Config:       config.VCenter{Name: vc.Name, Server: vc.Host, Port: vc.Port, InsecureFlag: true, RoundTripCount: 1, RequestTimeout: 10 * time.Second}.WithDefaults(),
		Credentials:  credentials.Static{User: vc.User, Password: config.Password(vc.Password)},
		RefusedRetry: &retry,
	})
	b.Start()
	t.Cleanup(func() { _ = b.Close(t.Context()) })

	vc.SetPassword("not-the-" + vc.Password)
	probes := 0
	start := time.Now()
	n := logins(vc, func() {
		for time.Since(start) < 2*time.Second {
			if err := b.Probe(t.Context()); !errors.Is(err, backends.ErrAuth) {
				t.Fatalf("probe = %v; want an auth failure", err)
			}
			probes++
			time.Sleep(10 * time.Millisecond)
		}
	})
	elapsed := time.Since(start)
	// Refused at 0, then due after 250, 500, 500… ms.
	if most := 1 + int64(elapsed/(250*time.Millisecond)); n < 2 || n > most {
		t.Fatalf("%d probes in %s sent the refused password %d times; want at least 2 (retried) and at most %d (the schedule)", probes, elapsed.Round(time.Millisecond), n, most)
	}
	r := b.Status().RefusedCredentials
	if len(r) != 1 || r[0].Source != "config file" || int64(r[0].Refusals) != n || !r[0].Retry.After(r[0].Last) {
		t.Fatalf("RefusedCredentials = %+v after %d refusals", r, n)
	}

	// vCenter takes the password again: served at the next due retry.
	vc.SetPassword(vc.Password)
	waitFor(t, "a login once vCenter takes the password again", func() bool { return b.Probe(t.Context()) == nil })
	if r := b.Status().RefusedCredentials; len(r) != 0 {
		t.Fatalf("RefusedCredentials = %+v after a login", r)
	}
	t.Logf("MEASURE refused-login retry: %d probes in %s, %d Login calls with the refused password", probes, elapsed.Round(time.Millisecond), n)
}
