package credentials_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// fixedSource gives creds, or err.
type fixedSource struct {
	name  string
	creds credentials.Credentials
	err   error
	calls int
}

func (f *fixedSource) Get(context.Context) (credentials.Credentials, error) {
	f.calls++
	return f.creds, f.err
}
func (f *fixedSource) String() string { return f.name }

// frozen is a clock that stands still: no retry ever comes due.
func frozen() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// refusedSources names the chain's refused sources, in order.
func refusedSources(c *credentials.Chain) string {
	var names []string
	for _, r := range c.Refused() {
		names = append(names, r.Source)
	}
	return fmt.Sprint(names)
}

// vcenter accepts only the passwords in ok; another is an invalid login.
type vcenter struct {
	ok     map[string]bool
	tried  []string // sources, in order
	broken error    // every login fails so, when set
}

func (v *vcenter) try(s credentials.Served) error {
	v.tried = append(v.tried, s.Source)
	if v.broken != nil {
		return v.broken
	}
	if v.ok[s.Password.Reveal()] {
		return nil
	}
	return fmt.Errorf("login as %q: %w", s.User, credentials.ErrRejected)
}

func TestChainOrder(t *testing.T) {
	ctx := context.Background()
	inline := credentials.Static{User: "ccm", Password: "pw-inline"}
	secret := &fixedSource{name: "secret kube-system/s", creds: userPass("ccm", "pw-secret")}
	for _, tc := range []struct {
		name      string
		links     []credentials.Source
		accept    []string
		served    string
		tried     []string
		errHas    string
		noneFound bool
	}{
		// CPI's connection manager: the config's login first.
		{"both valid: the config's", []credentials.Source{inline, secret}, []string{"pw-inline", "pw-secret"},
			"config file", []string{"config file"}, "", false},
		// Then the Secret, once vCenter refused the config's.
		{"config refused: the Secret's", []credentials.Source{inline, secret}, []string{"pw-secret"},
			"secret kube-system/s", []string{"config file", "secret kube-system/s"}, "", false},
		// No login in the config: straight to the Secret, no failed attempt.
		{"no config login", []credentials.Source{credentials.Static{}, secret}, []string{"pw-secret"},
			"secret kube-system/s", []string{"secret kube-system/s"}, "", false},
		{"half a config login", []credentials.Source{credentials.Static{User: "ccm"}, secret}, []string{"pw-secret"},
			"secret kube-system/s", []string{"secret kube-system/s"}, "", false},
		// The Secret lacks the vCenter's keys: the config's login, if good.
		{"Secret lacks the keys", []credentials.Source{inline, &fixedSource{name: "secret kube-system/s", err: fmt.Errorf("secret: %w for server vc", credentials.ErrNoCredentials)}},
			[]string{"pw-inline"}, "config file", []string{"config file"}, "", false},
		{"everything refused", []credentials.Source{inline, secret}, nil,
			"", []string{"config file", "secret kube-system/s"}, `login as "ccm": credentials rejected; login as "ccm": credentials rejected`, false},
		{"nothing anywhere", []credentials.Source{credentials.Static{}, &fixedSource{name: "secret kube-system/s", err: fmt.Errorf("secret kube-system/s not found: %w", credentials.ErrNoCredentials)}},
			nil, "", nil, "config file: no credentials: no user or password; secret kube-system/s not found", true},
		{"no sources", nil, nil, "", nil, "no credential source: no credentials", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vc := &vcenter{ok: map[string]bool{}}
			for _, p := range tc.accept {
				vc.ok[p] = true
			}
			chain := credentials.NewChain(tc.links...)
			served, err := chain.Login(ctx, vc.try)
			if fmt.Sprint(vc.tried) != fmt.Sprint(tc.tried) {
				t.Errorf("tried %v, want %v", vc.tried, tc.tried)
			}
			if tc.served != "" {
				if err != nil || served.Source != tc.served {
					t.Fatalf("Login = %q, %v; want %q", served.Source, err, tc.served)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("Login = %q, %v; want an error containing %q", served.Source, err, tc.errHas)
			}
			if errors.Is(err, credentials.ErrNoCredentials) != tc.noneFound {
				t.Fatalf("Login err = %v: absence %v, want %v", err, !tc.noneFound, tc.noneFound)
			}
			for _, pw := range []string{"pw-inline", "pw-secret"} {
				if strings.Contains(err.Error(), pw) {
					t.Fatalf("the error quotes a password: %v", err)
				}
			}
		})
	}
}

// Credentials vCenter refused are passed over while they stay the same
// (CPI keeps the Secret's once they replaced the config's): no failed
// login at every re-login; tried again at once when they change, and,
// while their retry is not due (the clock stands still here), not even
// when nothing else is left.
func TestChainRemembersRefusals(t *testing.T) {
	ctx := context.Background()
	inline := credentials.Static{User: "ccm", Password: "pw-stale"}
	secret := &fixedSource{name: "secret", creds: userPass("ccm", "pw-1")}
	chain := credentials.NewChainAt(credentials.DefaultRetry, frozen, inline, secret)
	vc := &vcenter{ok: map[string]bool{"pw-1": true}}

	if s, err := chain.Login(ctx, vc.try); err != nil || s.Source != "secret" || fmt.Sprint(s.Rejected) != "[config file]" {
		t.Fatalf("first login = %+v, %v", s.Rejected, err)
	}
	vc.tried = nil
	if s, err := chain.Login(ctx, vc.try); err != nil || s.Source != "secret" || fmt.Sprint(vc.tried) != "[secret]" {
		t.Fatalf("re-login = %s, %v, tried %v; want the Secret alone", s.Source, err, vc.tried)
	}
	if cur, err := chain.Current(ctx); err != nil || cur.Source != "secret" {
		t.Fatalf("Current = %s, %v; want the Secret (the config's refused)", cur.Source, err)
	}
	if got := refusedSources(chain); got != "[config file]" {
		t.Fatalf("Refused = %s", got)
	}

	// The Secret rotates, vCenter takes only the new password.
	secret.creds = userPass("ccm", "pw-2")
	vc.ok = map[string]bool{"pw-2": true}
	vc.tried = nil
	if s, err := chain.Login(ctx, vc.try); err != nil || s.Source != "secret" || fmt.Sprint(vc.tried) != "[secret]" {
		t.Fatalf("after rotation = %s, %v, tried %v", s.Source, err, vc.tried)
	}

	// vCenter changes the password: the Secret's is refused once, then
	// nothing is left, and nothing is tried, however often asked.
	vc.ok = map[string]bool{"pw-3": true}
	vc.tried = nil
	if _, err := chain.Login(ctx, vc.try); err == nil || fmt.Sprint(vc.tried) != "[secret]" {
		t.Fatalf("Secret's refused: err %v, tried %v; want the Secret alone", err, vc.tried)
	}
	vc.tried = nil
	for range 5 {
		_, err := chain.Login(ctx, vc.try)
		if !errors.Is(err, credentials.ErrRefusedBefore) || errors.Is(err, credentials.ErrNoCredentials) {
			t.Fatalf("all refused before: err = %v; want ErrRefusedBefore", err)
		}
		if _, err := chain.Current(ctx); !errors.Is(err, credentials.ErrRefusedBefore) {
			t.Fatalf("Current = %v; want ErrRefusedBefore", err)
		}
	}
	if len(vc.tried) != 0 {
		t.Fatalf("credentials refused before were tried again: %v", vc.tried)
	}
	if got := refusedSources(chain); got != "[config file secret]" {
		t.Fatalf("Refused = %s", got)
	}
	// The Secret gets the new password: tried, once, and it logs in.
	secret.creds = userPass("ccm", "pw-3")
	if s, err := chain.Login(ctx, vc.try); err != nil || s.Source != "secret" || fmt.Sprint(vc.tried) != "[secret]" {
		t.Fatalf("Secret changed = %s, %v, tried %v", s.Source, err, vc.tried)
	}
	if got := refusedSources(chain); got != "[config file]" {
		t.Fatalf("Refused = %s; the Secret's accepted", got)
	}
}

// Issue 20 (account lockout): vCenter refused the config's login and the
// Secret is deleted. Every reload (Current, then Login) and every probe
// (Login) used to offer the refused login again: about 12 failed logins a
// minute, and SSO locks an account after 5 in 180 s. It is offered once
// (until its retry is due: the clock stands still here); the Secret back
// with the password vCenter refused is not tried either; a different one
// is tried once.
func TestChainNeverRetriesARefusalWhileTheSecretIsMissing(t *testing.T) {
	ctx := context.Background()
	secret := &fixedSource{name: "secret kube-system/s", creds: userPass("ccm", "pw-old")}
	chain := credentials.NewChainAt(credentials.DefaultRetry, frozen, credentials.Static{User: "ccm", Password: "pw-inline"}, secret)
	vc := &vcenter{ok: map[string]bool{"pw-new": true}}
	if _, err := chain.Login(ctx, vc.try); err == nil || fmt.Sprint(vc.tried) != "[config file secret kube-system/s]" {
		t.Fatalf("first login: err %v, tried %v", err, vc.tried)
	}
	// The Secret is deleted.
	secret.creds, secret.err = credentials.Credentials{}, fmt.Errorf("secret kube-system/s not found: %w", credentials.ErrNoCredentials)
	vc.tried = nil
	for range 12 {
		if _, err := chain.Current(ctx); !errors.Is(err, credentials.ErrRefusedBefore) {
			t.Fatalf("Current = %v; want ErrRefusedBefore", err)
		}
		_, err := chain.Login(ctx, vc.try)
		if !errors.Is(err, credentials.ErrRefusedBefore) || !errors.Is(err, credentials.ErrNoCredentials) {
			t.Fatalf("Login = %v; want ErrRefusedBefore and the Secret's absence", err)
		}
		if !strings.Contains(err.Error(), "config file: refused by vCenter before") || strings.Contains(err.Error(), "pw-") {
			t.Fatalf("Login = %v; want the refused source named, no password", err)
		}
	}
	if len(vc.tried) != 0 {
		t.Fatalf("a refused login was offered again %d times: %v", len(vc.tried), vc.tried)
	}
	// Restored as it was: still the password vCenter refused.
	secret.creds, secret.err = userPass("ccm", "pw-old"), nil
	if _, err := chain.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRefusedBefore) || len(vc.tried) != 0 {
		t.Fatalf("Secret restored unchanged: err %v, tried %v; want nothing tried", err, vc.tried)
	}
	// Restored with another password: tried once, and it serves.
	secret.creds = userPass("ccm", "pw-new")
	for range 3 {
		if s, err := chain.Login(ctx, vc.try); err != nil || s.Source != "secret kube-system/s" {
			t.Fatalf("Secret changed: %s, %v", s.Source, err)
		}
	}
	if fmt.Sprint(vc.tried) != "[secret kube-system/s secret kube-system/s secret kube-system/s]" {
		t.Fatalf("tried %v; want the Secret at each login, the config's never", vc.tried)
	}
	if refusedSources(chain) != "[config file]" {
		t.Fatalf("Refused = %v", refusedSources(chain))
	}
}

// Logins of one chain take turns: two at once (a re-login and a rotation)
// do not both offer credentials that vCenter refuses.
func TestChainLoginsTakeTurns(t *testing.T) {
	chain := credentials.NewChain(credentials.Static{User: "ccm", Password: "pw-wrong"})
	var tried atomic.Int64
	first := make(chan struct{})
	release := make(chan struct{})
	try := func(credentials.Served) error {
		if tried.Add(1) == 1 {
			close(first)
		}
		<-release
		return credentials.ErrRejected
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { _, _ = chain.Login(context.Background(), try) })
	}
	// One is being refused; the others have time to reach vCenter too,
	// were they not waiting for their turn.
	<-first
	time.Sleep(100 * time.Millisecond)
	close(release)
	wg.Wait()
	if n := tried.Load(); n != 1 {
		t.Fatalf("the refused login was offered %d times, want 1", n)
	}
	// A login waiting for its turn gives up with its context.
	hold := make(chan struct{})
	started := make(chan struct{})
	chain2 := credentials.NewChain(credentials.Static{User: "ccm", Password: "pw"})
	go func() {
		_, _ = chain2.Login(context.Background(), func(credentials.Served) error { close(started); <-hold; return nil })
	}()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := chain2.Login(ctx, func(credentials.Served) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Login waiting for its turn, ctx cancelled: %v", err)
	}
	close(hold)
}

// A failure that is not a refusal (vCenter unreachable, the session
// manager down) ends the attempt: the next source is not tried, as CPI
// falls back to the Secret only on an invalid login.
func TestChainStopsOnOtherFailures(t *testing.T) {
	secret := &fixedSource{name: "secret", creds: userPass("ccm", "pw-1")}
	chain := credentials.NewChain(credentials.Static{User: "ccm", Password: "pw-0"}, secret)
	vc := &vcenter{broken: errors.New("dial tcp: connection refused")}
	_, err := chain.Login(context.Background(), vc.try)
	if err == nil || fmt.Sprint(vc.tried) != "[config file]" || secret.calls != 0 {
		t.Fatalf("err = %v, tried %v, Secret read %d times; want the config's alone", err, vc.tried, secret.calls)
	}
	// A source that cannot be read (not absence) ends it too.
	broken := &fixedSource{name: "secret", err: errors.New("secret kube-system/s: not synced")}
	chain = credentials.NewChain(credentials.Static{}, broken, secret)
	vc = &vcenter{ok: map[string]bool{"pw-1": true}}
	if _, err := chain.Login(context.Background(), vc.try); err == nil || !strings.Contains(err.Error(), "not synced") || len(vc.tried) != 0 {
		t.Fatalf("err = %v, tried %v", err, vc.tried)
	}
}

func TestChainString(t *testing.T) {
	chain := credentials.NewChain(credentials.Static{User: "u", Password: config.Password("pw-x")}, credentials.Directory{Dir: "/etc/cloud/secrets", Server: "vc"})
	if got := chain.String(); got != "config file, then secrets directory /etc/cloud/secrets" {
		t.Fatalf("String = %q", got)
	}
	if credentials.AsChain(chain) != chain {
		t.Fatal("AsChain wraps a chain again")
	}
}

// Refused, unchanged credentials are offered again on a schedule, so that
// a vCenter that refused valid ones for a while (its identity source down
// for 40 minutes here) is served again, without ever nearing vSphere SSO's
// lockout (5 failed logins in 180 s): a login is asked for every 5 s, as
// the CCM's probes and reloads do.
func TestChainRetriesARefusalOnASchedule(t *testing.T) {
	ctx := context.Background()
	start := frozen()
	now := start
	clock := func() time.Time { return now }
	chain := credentials.NewChainAt(credentials.DefaultRetry, clock, credentials.Static{User: "ccm", Password: "pw"})
	vc := &vcenter{ok: map[string]bool{}}
	healAt := start.Add(40 * time.Minute)
	var failed []time.Time
	var servedAt time.Time
	for ; now.Before(start.Add(time.Hour)); now = now.Add(5 * time.Second) {
		if !now.Before(healAt) {
			vc.ok["pw"] = true
		}
		before := len(vc.tried)
		_, err := chain.Login(ctx, vc.try)
		if len(vc.tried) > before && err != nil {
			failed = append(failed, now)
		}
		if err == nil {
			servedAt = now
			break
		}
		if len(vc.tried) == before && !errors.Is(err, credentials.ErrRefusedBefore) {
			t.Fatalf("at %s: nothing tried, err %v; want ErrRefusedBefore", now.Sub(start), err)
		}
	}
	var offsets []time.Duration
	for i, f := range failed {
		offsets = append(offsets, f.Sub(start))
		n := 0
		for _, g := range failed[i:] {
			if g.Sub(f) < 180*time.Second {
				n++
			}
		}
		if n > 2 {
			t.Fatalf("%d failed logins within 180 s from %s (all: %v); SSO locks at 5, the schedule promises 2", n, f.Sub(start), offsets)
		}
	}
	if want := "[0s 2m0s 6m0s 14m0s 30m0s]"; fmt.Sprint(offsets) != want {
		t.Fatalf("failed logins at %v; want %s (2 min, doubling, up to 16)", offsets, want)
	}
	if servedAt.IsZero() || servedAt.Sub(healAt) > credentials.DefaultRetry.Max {
		t.Fatalf("healed at %s, served at %s; want within %s", healAt.Sub(start), servedAt.Sub(start), credentials.DefaultRetry.Max)
	}
	if len(chain.Refused()) != 0 {
		t.Fatalf("Refused = %v after a login", chain.Refused())
	}

	// Accepted once: the next refusal waits the first step again.
	vc.ok = map[string]bool{}
	if _, err := chain.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRejected) {
		t.Fatalf("refused again: %v", err)
	}
	r := chain.Refused()
	if len(r) != 1 || r[0].Refusals != 1 || !r[0].Last.Equal(now) || !r[0].Retry.Equal(now.Add(credentials.DefaultRetry.After)) {
		t.Fatalf("Refused = %+v; want one refusal at %s, retry %s later", r, now, credentials.DefaultRetry.After)
	}
}

// Retry.After zero: refused credentials are never offered again until they
// change (the strictest setting an operator can choose).
func TestChainRetryNever(t *testing.T) {
	ctx := context.Background()
	now := frozen()
	secret := &fixedSource{name: "secret", creds: userPass("ccm", "pw-1")}
	chain := credentials.NewChainAt(credentials.Retry{}, func() time.Time { return now }, secret)
	vc := &vcenter{ok: map[string]bool{}}
	for range 1000 {
		_, _ = chain.Login(ctx, vc.try)
		now = now.Add(10 * time.Second)
	}
	if len(vc.tried) != 1 {
		t.Fatalf("tried %d times in ~3 h; want once", len(vc.tried))
	}
	if r := chain.Refused(); len(r) != 1 || !r[0].Retry.IsZero() {
		t.Fatalf("Refused = %+v; want no retry time", r)
	}
	secret.creds = userPass("ccm", "pw-2")
	vc.ok["pw-2"] = true
	if s, err := chain.Login(ctx, vc.try); err != nil || s.Source != "secret" {
		t.Fatalf("changed credentials: %v", err)
	}
}

// A refused source whose retry is due comes after the sources that still
// log in: the Secret that replaced the config's refused login keeps
// serving, and the config's is not offered again beside it.
func TestChainDueRetryComesLast(t *testing.T) {
	ctx := context.Background()
	now := frozen()
	secret := &fixedSource{name: "secret", creds: userPass("ccm", "pw-1")}
	chain := credentials.NewChainAt(credentials.DefaultRetry, func() time.Time { return now },
		credentials.Static{User: "ccm", Password: "pw-stale"}, secret)
	vc := &vcenter{ok: map[string]bool{"pw-1": true}}
	if s, err := chain.Login(ctx, vc.try); err != nil || s.Source != "secret" {
		t.Fatalf("first login: %s, %v", s.Source, err)
	}
	vc.tried = nil
	now = now.Add(time.Hour)
	for range 3 {
		if s, err := chain.Login(ctx, vc.try); err != nil || s.Source != "secret" {
			t.Fatalf("re-login: %s, %v", s.Source, err)
		}
	}
	if fmt.Sprint(vc.tried) != "[secret secret secret]" {
		t.Fatalf("tried %v; want the Secret alone", vc.tried)
	}
	// The Secret's password is refused too: the config's, due, is offered
	// after it, in the same login.
	vc.ok, vc.tried = map[string]bool{"pw-stale": true}, nil
	if s, err := chain.Login(ctx, vc.try); err != nil || s.Source != "config file" || fmt.Sprint(s.Rejected) != "[secret]" {
		t.Fatalf("login = %s (rejected %v), %v; tried %v", s.Source, s.Rejected, err, vc.tried)
	}
}
