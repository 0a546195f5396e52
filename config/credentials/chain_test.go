package credentials_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

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
// login at every re-login; tried again once they change, or when nothing
// else logs in.
func TestChainRemembersRefusals(t *testing.T) {
	ctx := context.Background()
	inline := credentials.Static{User: "ccm", Password: "pw-stale"}
	secret := &fixedSource{name: "secret", creds: userPass("ccm", "pw-1")}
	chain := credentials.NewChain(inline, secret)
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

	// The Secret rotates, vCenter takes only the new password.
	secret.creds = userPass("ccm", "pw-2")
	vc.ok = map[string]bool{"pw-2": true}
	vc.tried = nil
	if s, err := chain.Login(ctx, vc.try); err != nil || s.Source != "secret" || fmt.Sprint(vc.tried) != "[secret]" {
		t.Fatalf("after rotation = %s, %v, tried %v", s.Source, err, vc.tried)
	}

	// Everything refused before: tried again (an account unlocked).
	vc.ok = map[string]bool{}
	if _, err := chain.Login(ctx, vc.try); err == nil {
		t.Fatal("all refused: want an error")
	}
	vc.ok = map[string]bool{"pw-stale": true}
	vc.tried = nil
	if s, err := chain.Login(ctx, vc.try); err != nil || s.Source != "config file" {
		t.Fatalf("once vCenter takes the config's again = %s, %v (tried %v)", s.Source, err, vc.tried)
	}
	if cur, err := chain.Current(ctx); err != nil || cur.Source != "config file" {
		t.Fatalf("Current = %s, %v; want the config's, accepted again", cur.Source, err)
	}
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
