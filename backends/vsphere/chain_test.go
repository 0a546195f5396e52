package vsphere_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// logins counts the simulator's Login calls during fn (fixtures included:
// call it around the backend's work only).
// credentialSource names the source that logged b's current session in.
func credentialSource(b backends.Backend) string {
	if s := b.Status().Session; s != nil {
		return s.Credentials
	}
	return ""
}

func logins(vc *vcsim.VCenter, fn func()) int64 {
	before, _ := vc.SOAPCalls()
	fn()
	after, _ := vc.SOAPCalls()
	return after["Login"] - before["Login"]
}

// The config's user and password and the secrets directory (or Secret),
// tried as CPI's connection manager tries them: the config's first, the
// directory's once vCenter refuses those (an invalid login); none in the
// config costs no failed login; a refused source is not tried again at
// the next login while it is unchanged.
func TestInlineCredentialsFallback(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	const wrong = "pw-not-the-one"
	for _, tc := range []struct {
		name          string
		inline        credentials.Static
		dirPassword   string // "" : no files
		served        string // "config file" or "secrets directory"
		firstLogins   int64
		reloginLogins int64
	}{
		{"config right, directory wrong: the config's", credentials.Static{User: vc.User, Password: config.Password(vc.Password)}, wrong, "config file", 1, 1},
		{"config wrong, directory right: the directory's after one refusal", credentials.Static{User: vc.User, Password: wrong}, vc.Password, "secrets directory", 2, 1},
		{"no config login: the directory's at once", credentials.Static{}, vc.Password, "secrets directory", 1, 1},
		{"directory lacks the keys: the config's", credentials.Static{User: vc.User, Password: config.Password(vc.Password)}, "", "config file", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.dirPassword != "" {
				writeCreds(t, dir, vc.Host, vc.User, tc.dirPassword)
			}
			chain := credentials.NewChain(tc.inline, credentials.Directory{Dir: dir, Server: vc.Host})
			b := newBackend(t, vc, chain, nil)
			ctx := t.Context()
			q := backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}
			find := func() {
				t.Helper()
				if vms, err := b.Find(ctx, q); err != nil || len(vms) != 1 {
					t.Fatalf("Find = %v, %v", vms, err)
				}
			}
			if n := logins(vc, find); n != tc.firstLogins {
				t.Errorf("first login: %d Login calls, want %d", n, tc.firstLogins)
			}
			if got := credentialSource(b); !strings.HasPrefix(got, tc.served) {
				t.Fatalf("served by %q, want %q", got, tc.served)
			}
			// Tags log REST in with the same source.
			vm := vc.VMs[0]
			if _, err := b.Tags(ctx, &backends.VM{Ref: backends.VMRef{Datacenter: vm.Datacenter, ID: vm.Ref}, Host: hostOf(t, b, vm)}, []string{"k8s-zone"}); err != nil {
				t.Fatalf("Tags: %v", err)
			}
			if err := vc.TerminateSessions(ctx); err != nil {
				t.Fatal(err)
			}
			if n := logins(vc, find); n != tc.reloginLogins {
				t.Errorf("re-login: %d Login calls, want %d (a refused source is not tried again)", n, tc.reloginLogins)
			}
			if got := credentialSource(b); !strings.HasPrefix(got, tc.served) {
				t.Fatalf("after re-login served by %q, want %q", got, tc.served)
			}
		})
	}
}

// Both refused: an error naming each attempt, quoting no password.
func TestInlineAndDirectoryBothRefused(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	dir := t.TempDir()
	writeCreds(t, dir, vc.Host, vc.User, "pw-dir-wrong")
	chain := credentials.NewChain(credentials.Static{User: vc.User, Password: "pw-inline-wrong"}, credentials.Directory{Dir: dir, Server: vc.Host})
	b := newBackend(t, vc, chain, nil)
	_, err := b.Find(t.Context(), backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}})
	if err == nil || !strings.Contains(err.Error(), "(credentials from config file)") || !strings.Contains(err.Error(), "(credentials from secrets directory") {
		t.Fatalf("err = %v; want both attempts named", err)
	}
	for _, pw := range []string{"pw-dir-wrong", "pw-inline-wrong", vc.Password} {
		if strings.Contains(err.Error(), pw) {
			t.Fatalf("the error quotes a password: %v", err)
		}
	}
}

// Rotation with a chain follows CPI: while the config's login serves, a
// changed Secret is not used (CPI reads it only after a refusal); once
// the Secret's serves, its rotation logs in beside the current session.
func TestRefreshWithChain(t *testing.T) {
	f := startFederation(t, 1)
	vc := f.VCenters[0]
	ctx := t.Context()
	q := backends.Query{By: backends.ByUUID, Values: []string{vc.VMs[0].UUID}}

	dir := t.TempDir()
	writeCreds(t, dir, vc.Host, vc.User, vc.Password)
	inlineServes := newBackend(t, vc, credentials.NewChain(credentials.Static{User: vc.User, Password: config.Password(vc.Password)}, credentials.Directory{Dir: dir, Server: vc.Host}), nil)
	if _, err := inlineServes.Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	writeCreds(t, dir, vc.Host, vc.User, "pw-changed")
	if rotated, err := inlineServes.RefreshCredentials(ctx, time.Millisecond); rotated || err != nil {
		t.Fatalf("config's login serving, Secret changed: rotated=%v err=%v; want nothing", rotated, err)
	}

	dir2 := t.TempDir()
	writeCreds(t, dir2, vc.Host, vc.User, vc.Password)
	secretServes := newBackend(t, vc, credentials.NewChain(credentials.Static{User: vc.User, Password: "pw-stale"}, credentials.Directory{Dir: dir2, Server: vc.Host}), nil)
	if _, err := secretServes.Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	const next = "pw-N3w"
	writeCreds(t, dir2, vc.Host, vc.User, next)
	vc.SetPassword(next)
	var rotated bool
	var err error
	if n := logins(vc, func() { rotated, err = secretServes.RefreshCredentials(ctx, time.Millisecond) }); n != 1 {
		t.Errorf("rotation: %d Login calls, want 1 (the refused config login not tried again)", n)
	}
	if !rotated || err != nil {
		t.Fatalf("Secret serving, rotated: rotated=%v err=%v", rotated, err)
	}
	if _, err := secretServes.Find(ctx, q); err != nil {
		t.Fatal(err)
	}
	if got := credentialSource(secretServes); !strings.HasPrefix(got, "secrets directory") {
		t.Fatalf("served by %q", got)
	}
}
