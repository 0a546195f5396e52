package credentials

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"time"
)

// Account is who vCenter locks out after failed logins: a user at a
// vCenter's address. Several entries of one server (CPI's tenants) and
// every backend rebuilt for one entry share it. The user is kept as a
// digest: an account names no value.
type Account struct {
	Server string
	User   string // hex of the user's SHA-256, first 16 digits
}

// AccountOf is the account cr logs in as at server.
func AccountOf(server string, cr Credentials) Account {
	sum := sha256.Sum256([]byte(cr.User))
	return Account{Server: strings.ToLower(server), User: hex.EncodeToString(sum[:8])}
}

// String is the account as the login record keys it.
func (a Account) String() string { return a.Server + " user#" + a.User }

// ErrDeferred is wrapped by the chain's error on a standby when the only
// credentials left are ones the leader has not logged in with: a standby
// sends nothing vCenter might refuse, so every replica together stays
// within one process's refusals.
var ErrDeferred = errors.New("standby: not sent until the leader has logged in with the account")

// Backing is the leader's word on an account, as a standby reads it.
// Only a standby asks.
type Backing interface {
	// Backs is nil when the leader's last login as a succeeded (no
	// refusal since) and this replica saw that success at or after since;
	// else why not.
	Backs(ctx context.Context, a Account, since time.Time) error
	// Refusal is the leader's last unresolved refusal of a, as seen by
	// this replica (at: when it saw it), for a replica that takes the
	// lease to continue the schedule; ok false when none.
	Refusal(a Account) (at time.Time, count int, ok bool)
}

// Ledger is what vCenters refused, per account and credentials, for
// every chain of one process: a backend rebuilt by an edit (a thumbprint,
// a port) inherits its predecessor's refusals instead of sending the
// refused password again at once, and entries of one server count
// together. On a standby (Follow) it also sends nothing the leader has
// not logged in with, and never retries refused credentials on a
// schedule: only the leader does. One per process (cloud owns it).
type Ledger struct {
	mu      sync.Mutex
	records map[ledgerKey]*ledgerRecord
	leading bool
	backing Backing // nil: no leader to follow (a lone process leads)
	// onChange is called after every login's outcome while leading
	// (cloud publishes Accounts for the standbys).
	onChange func()
}

type ledgerKey struct {
	Account
	fp [32]byte
}

// ledgerRecord is one account's credentials as this process knows them:
// first held, refusals in a row (0: none since accepted or first held),
// last refused, last accepted.
type ledgerRecord struct {
	held     time.Time
	count    int
	refused  time.Time
	accepted time.Time
}

// maxHeld bounds the credentials remembered per account (rotations).
const maxHeld = 4

// NewLedger is a ledger that leads: what a single process (no leader
// election, a test, `validate`) does.
func NewLedger() *Ledger {
	return &Ledger{records: map[ledgerKey]*ledgerRecord{}, leading: true}
}

// Follow makes l a standby's: it sends only what b backs and retries no
// refusal on a schedule, until Lead.
func (l *Ledger) Follow(b Backing) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leading, l.backing = false, b
}

// Lead makes l the leader's: refused credentials are retried on their
// schedule, counted from the last refusal this process made or saw the
// leader before it make (Backing.Refusal), and each login's outcome is
// followed by a call of onChange (nil: none).
func (l *Ledger) Lead(onChange func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.backing; b != nil {
		// Credentials this replica held when the leader was refused are
		// the ones it was refused (every replica reads the same Secret).
		for k, r := range l.records {
			at, n, ok := b.Refusal(k.Account)
			if ok && !r.held.After(at.Add(heldSlack)) && n > r.count {
				r.count, r.refused = n, at
			}
		}
	}
	l.leading, l.onChange = true, onChange
}

// heldSlack is how much later than the leader's login or refusal a
// standby may have first read the same credentials: the Secret reaches
// every replica's informer within it.
const heldSlack = 30 * time.Second

// Leading reports whether l leads.
func (l *Ledger) Leading() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

// recordLocked is k's record, made (first held now) when missing; the
// oldest of the account's others is dropped beyond maxHeld.
func (l *Ledger) recordLocked(k ledgerKey, now time.Time) *ledgerRecord {
	if r, ok := l.records[k]; ok {
		return r
	}
	r := &ledgerRecord{held: now}
	l.records[k] = r
	var oldest *ledgerKey
	n := 0
	for o, or := range l.records {
		if o.Account != k.Account {
			continue
		}
		n++
		if o != k && (oldest == nil || or.held.Before(l.records[*oldest].held)) {
			oldest = &o
		}
	}
	if n > maxHeld && oldest != nil {
		delete(l.records, *oldest)
	}
	return r
}

// standing is what may be done with credentials k at now under retry r.
func (l *Ledger) standing(ctx context.Context, k ledgerKey, r Retry, now time.Time) (standing, error) {
	l.mu.Lock()
	rec := *l.recordLocked(k, now) // a copy, read after the lock
	leading, backing := l.leading, l.backing
	l.mu.Unlock()
	if leading || backing == nil {
		if rec.count == 0 {
			return fresh, nil
		}
		if d, ok := r.wait(rec.count); ok && !now.Before(rec.refused.Add(d)) {
			return retryDue, nil
		}
		return waiting, nil
	}
	// A standby: credentials it was refused wait for a login of the
	// leader's after the refusal (never a schedule of its own); others
	// for one no earlier than it read them, give or take the time the
	// Secret takes to reach every replica.
	if rec.count > 0 {
		if backing.Backs(ctx, k.Account, rec.refused.Add(time.Nanosecond)) != nil { // strictly after
			return waiting, nil
		}
		return retryDue, nil
	}
	if err := backing.Backs(ctx, k.Account, rec.held.Add(-heldSlack)); err != nil {
		return deferred, err
	}
	return fresh, nil
}

// outcome records that vCenter accepted k at now, or refused it (one
// more in a row), then, while leading, calls onChange (outside the lock:
// it reads Accounts).
func (l *Ledger) outcome(k ledgerKey, now time.Time, accepted bool) {
	l.mu.Lock()
	rec := l.recordLocked(k, now)
	if accepted {
		rec.count, rec.refused, rec.accepted = 0, time.Time{}, now
	} else {
		rec.count++
		rec.refused = now
	}
	notify := l.onChange
	if !l.leading {
		notify = nil
	}
	l.mu.Unlock()
	if notify != nil {
		notify()
	}
}

// refusal is k's refusals in a row and the last one's time.
func (l *Ledger) refusal(k ledgerKey) (count int, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.records[k]; ok {
		return r.count, r.refused
	}
	return 0, time.Time{}
}

// AccountState is an account's last logins as a process saw them.
type AccountState struct {
	// Accepted is the last login vCenter accepted.
	Accepted time.Time
	// Refused is the last it refused, when after Accepted (else zero),
	// and Refusals how many in a row.
	Refused  time.Time
	Refusals int
}

// Accounts is what l knows of every account it logged in as: the last
// acceptance, and a refusal when it came after it.
func (l *Ledger) Accounts() map[Account]AccountState {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[Account]AccountState{}
	for k, r := range l.records {
		st := out[k.Account]
		if r.accepted.After(st.Accepted) {
			st.Accepted = r.accepted
		}
		if r.count > 0 && r.refused.After(st.Refused) {
			st.Refused, st.Refusals = r.refused, r.count
		}
		out[k.Account] = st
	}
	for a, st := range out {
		if st.Accepted.IsZero() && st.Refused.IsZero() {
			delete(out, a) // held, never sent
			continue
		}
		if !st.Refused.After(st.Accepted) {
			st.Refused, st.Refusals = time.Time{}, 0
			out[a] = st
		}
	}
	return out
}
