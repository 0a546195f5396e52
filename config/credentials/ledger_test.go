package credentials_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// A backend rebuilt by an edit (a thumbprint, a port) gets a new chain; the
// refused password must not be sent again at once by it, only when the
// schedule the first chain started says.
func TestLedgerRebuiltChainInheritsRefusals(t *testing.T) {
	ctx := context.Background()
	now := frozen()
	clock := func() time.Time { return now }
	stale := credentials.Static{User: "ccm", Password: "stale"}
	vc := &vcenter{ok: map[string]bool{}}
	ledger := credentials.NewLedger()
	first := credentials.NewChainIn(ledger, "vc.example.com", credentials.DefaultRetry, clock, stale)
	if _, err := first.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRejected) {
		t.Fatalf("first login: %v; want a refusal", err)
	}
	rebuilt := credentials.NewChainIn(ledger, "vc.example.com", credentials.DefaultRetry, clock, stale)
	now = now.Add(time.Second)
	if _, err := rebuilt.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRefusedBefore) || len(vc.tried) != 1 {
		t.Fatalf("rebuilt chain's login: %v, tried %v; want nothing sent (refused before)", err, vc.tried)
	}
	if r := rebuilt.Refused(); len(r) != 1 || r[0].Refusals != 1 || !r[0].Retry.Equal(frozen().Add(credentials.DefaultRetry.After)) {
		t.Fatalf("rebuilt chain reports %+v; want the refusal its predecessor was given, and its retry", r)
	}
	now = frozen().Add(credentials.DefaultRetry.After)
	if _, err := rebuilt.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRejected) || len(vc.tried) != 2 {
		t.Fatalf("at the retry: %v, tried %v; want sent once more", err, vc.tried)
	}
	// The schedule goes on from two refusals: the next is 4 minutes on.
	now = now.Add(3 * time.Minute)
	if _, err := first.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRefusedBefore) || len(vc.tried) != 2 {
		t.Fatalf("3 min after the second refusal: %v, tried %v; want nothing sent", err, vc.tried)
	}

	// Without a shared ledger (what a rebuilt backend had before), the
	// new chain sends the refused password at once.
	alone := credentials.NewChainIn(credentials.NewLedger(), "vc.example.com", credentials.DefaultRetry, clock, stale)
	if _, err := alone.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRejected) || len(vc.tried) != 3 {
		t.Fatalf("a chain of its own: %v, tried %v; want sent", err, vc.tried)
	}
}

// Entries of one server (CPI's tenants) log in as one account: a refusal
// through one holds the other; another server's account is its own.
func TestLedgerEntriesOfOneServerShareTheAccount(t *testing.T) {
	ctx := context.Background()
	clock := frozen
	ledger := credentials.NewLedger()
	vc := &vcenter{ok: map[string]bool{}}
	a := credentials.NewChainIn(ledger, "vc.example.com", credentials.DefaultRetry, clock, &fixedSource{name: "a", creds: userPass("ccm", "stale")})
	b := credentials.NewChainIn(ledger, "VC.example.com", credentials.DefaultRetry, clock, &fixedSource{name: "b", creds: userPass("ccm", "stale")})
	other := credentials.NewChainIn(ledger, "vc2.example.com", credentials.DefaultRetry, clock, &fixedSource{name: "other", creds: userPass("ccm", "stale")})
	otherUser := credentials.NewChainIn(ledger, "vc.example.com", credentials.DefaultRetry, clock, &fixedSource{name: "other-user", creds: userPass("ops", "stale")})
	for _, c := range []*credentials.Chain{a, b, other, otherUser} {
		_, _ = c.Login(ctx, vc.try)
	}
	if got, want := fmt.Sprint(vc.tried), "[a other other-user]"; got != want {
		t.Fatalf("sent %s; want %s (b is a's account, refused already)", got, want)
	}
}

// Two sources with different passwords for one user, both refused: neither
// is sent again before its retry (refusals are kept per credentials, so
// trying one does not reset the other's).
func TestLedgerKeepsEachCredentialsRefusal(t *testing.T) {
	ctx := context.Background()
	now := frozen()
	clock := func() time.Time { return now }
	vc := &vcenter{ok: map[string]bool{}}
	c := credentials.NewChainIn(credentials.NewLedger(), "vc", credentials.DefaultRetry, clock,
		&fixedSource{name: "inline", creds: userPass("ccm", "one")}, &fixedSource{name: "secret", creds: userPass("ccm", "two")})
	for i := range 5 {
		_, _ = c.Login(ctx, vc.try)
		now = now.Add(10 * time.Second * time.Duration(i+1))
	}
	if got, want := fmt.Sprint(vc.tried), "[inline secret]"; got != want {
		t.Fatalf("sent %s within %s; want each once", got, now.Sub(frozen()))
	}
}

// backing is a standby's view of the leader, set by the test.
type backing struct {
	backs     func(since time.Time) error
	refusedAt time.Time
	refusals  int
	asked     []time.Time
}

func (b *backing) Backs(_ context.Context, _ credentials.Account, since time.Time) error {
	b.asked = append(b.asked, since)
	return b.backs(since)
}

func (b *backing) Refusal(credentials.Account) (time.Time, int, bool) {
	return b.refusedAt, b.refusals, b.refusals > 0
}

// A standby sends only what the leader backs, and retries no refusal on a
// schedule of its own; once it leads, it does.
func TestStandbySendsOnlyWhatTheLeaderBacks(t *testing.T) {
	ctx := context.Background()
	start := frozen()
	now := start
	clock := func() time.Time { return now }
	vc := &vcenter{ok: map[string]bool{}}
	ledger := credentials.NewLedger()
	leaderAccepted := time.Time{} // when the standby saw the leader's login succeed
	b := &backing{backs: func(since time.Time) error {
		if leaderAccepted.IsZero() || leaderAccepted.Before(since) {
			return errors.New("not backed")
		}
		return nil
	}}
	ledger.Follow(b)
	c := credentials.NewChainIn(ledger, "vc", credentials.DefaultRetry, clock, &fixedSource{name: "secret", creds: userPass("ccm", "stale")})

	_, err := c.Login(ctx, vc.try)
	if !errors.Is(err, credentials.ErrDeferred) || len(vc.tried) != 0 {
		t.Fatalf("before the leader logs in: %v, tried %v; want nothing sent, ErrDeferred", err, vc.tried)
	}
	if cur, err := c.Current(ctx); !errors.Is(err, credentials.ErrDeferred) {
		t.Fatalf("Current = %v, %v; want ErrDeferred", cur.Source, err)
	}
	// The leader logged in (with the credentials the standby holds: it
	// read them less than the slack before).
	now = now.Add(10 * time.Second)
	leaderAccepted = now
	if _, err := c.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRejected) || len(vc.tried) != 1 {
		t.Fatalf("backed: %v, tried %v; want sent (and refused: the vCenter changed the password since)", err, vc.tried)
	}
	// Refused: a standby never retries on a schedule, however long.
	for range 10 {
		now = now.Add(30 * time.Minute)
		if _, err := c.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRefusedBefore) || len(vc.tried) != 1 {
			t.Fatalf("at %s: %v, tried %v; want nothing sent", now.Sub(start), err, vc.tried)
		}
	}
	if r := c.Refused(); len(r) != 1 || !r[0].Retry.IsZero() {
		t.Fatalf("Refused = %+v; want one refusal with no retry time (a standby's)", r)
	}
	// The leader logs in after the refusal: sent once more.
	leaderAccepted = now
	if _, err := c.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRejected) || len(vc.tried) != 2 {
		t.Fatalf("the leader logged in after the refusal: %v, tried %v; want sent", err, vc.tried)
	}
	// New credentials read long after the leader's last login: deferred.
	c2 := credentials.NewChainIn(ledger, "vc", credentials.DefaultRetry, clock, &fixedSource{name: "secret", creds: userPass("ccm", "new")})
	now = now.Add(5 * time.Minute)
	if _, err := c2.Login(ctx, vc.try); !errors.Is(err, credentials.ErrDeferred) || len(vc.tried) != 2 {
		t.Fatalf("new credentials, leader's login older: %v, tried %v; want deferred", err, vc.tried)
	}

	// Leading: the schedule applies, from the refusal the ledger holds.
	// Two refusals in a row, the last 5 minutes ago: due (4 minutes).
	ledger.Lead(nil)
	if _, err := c.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRejected) || len(vc.tried) != 3 {
		t.Fatalf("leading, the retry due: %v, tried %v; want the stale credentials sent", err, vc.tried)
	}
	if _, err := c2.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRejected) || len(vc.tried) != 4 {
		t.Fatalf("leading, new credentials: %v, tried %v; want sent at once", err, vc.tried)
	}
}

// A standby taking the lease continues the leader's schedule: the refusals
// the old leader published hold the credentials it read before them.
func TestLeadContinuesTheLeadersSchedule(t *testing.T) {
	ctx := context.Background()
	start := frozen()
	now := start
	clock := func() time.Time { return now }
	vc := &vcenter{ok: map[string]bool{}}
	ledger := credentials.NewLedger()
	b := &backing{backs: func(time.Time) error { return errors.New("refused") }}
	ledger.Follow(b)
	c := credentials.NewChainIn(ledger, "vc", credentials.DefaultRetry, clock, &fixedSource{name: "secret", creds: userPass("ccm", "stale")})
	if _, err := c.Login(ctx, vc.try); !errors.Is(err, credentials.ErrDeferred) {
		t.Fatalf("standby: %v; want deferred", err)
	}
	// The old leader was refused 3 times, the last 5 s after this replica
	// read the credentials; then it died.
	b.refusedAt, b.refusals = start.Add(5*time.Second), 3
	ledger.Lead(nil)
	now = start.Add(10 * time.Second)
	if _, err := c.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRefusedBefore) || len(vc.tried) != 0 {
		t.Fatalf("new leader, 5 s after the old one's third refusal: %v, tried %v; want nothing sent", err, vc.tried)
	}
	wait := 4 * credentials.DefaultRetry.After // after the third refusal in a row
	now = b.refusedAt.Add(wait - time.Second)
	if _, err := c.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRefusedBefore) || len(vc.tried) != 0 {
		t.Fatalf("1 s before the fourth retry: %v, tried %v; want nothing sent", err, vc.tried)
	}
	now = b.refusedAt.Add(wait)
	if _, err := c.Login(ctx, vc.try); !errors.Is(err, credentials.ErrRejected) || len(vc.tried) != 1 {
		t.Fatalf("at the retry: %v, tried %v; want sent", err, vc.tried)
	}
}

// Accounts is what the leader publishes: the last acceptance, and a
// refusal only when it came after.
func TestLedgerAccounts(t *testing.T) {
	ctx := context.Background()
	now := frozen()
	clock := func() time.Time { return now }
	vc := &vcenter{ok: map[string]bool{"good": true}}
	ledger := credentials.NewLedger()
	changes := 0
	ledger.Lead(func() { changes++ })
	src := &fixedSource{name: "secret", creds: userPass("ccm", "good")}
	c := credentials.NewChainIn(ledger, "vc", credentials.DefaultRetry, clock, src)
	if got := ledger.Accounts(); len(got) != 0 {
		t.Fatalf("Accounts = %v before any login", got)
	}
	if _, err := c.Login(ctx, vc.try); err != nil {
		t.Fatal(err)
	}
	acct := credentials.AccountOf("vc", userPass("ccm", ""))
	if got := ledger.Accounts()[acct]; !got.Accepted.Equal(now) || !got.Refused.IsZero() || changes != 1 {
		t.Fatalf("after a login: %+v, %d changes", got, changes)
	}
	accepted := now
	now = now.Add(time.Minute)
	src.creds = userPass("ccm", "bad")
	_, _ = c.Login(ctx, vc.try)
	got := ledger.Accounts()[acct]
	if !got.Accepted.Equal(accepted) || !got.Refused.Equal(now) || got.Refusals != 1 || changes != 2 {
		t.Fatalf("after a refusal: %+v, %d changes; want accepted %s, refused %s once", got, changes, accepted, now)
	}
	if s := acct.String(); s != "vc user#"+acct.User || len(acct.User) != 16 {
		t.Fatalf("account %q: want the server and a 16-digit digest of the user", s)
	}
}
