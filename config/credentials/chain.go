package credentials

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Chain is the sources of one vCenter's credentials, tried in order, as
// CPI's connection manager tries them: the user and password written in
// the config file first, then the Secret (or the secrets directory) the
// vCenter's SecretRef names, but only once vCenter has refused the former
// as an invalid login (CPI: Connect, then on vclib.IsInvalidCredentialsError
// GetCredential and Connect again). A source holding nothing for the
// vCenter (ErrNoCredentials) is passed over, so an empty config login
// costs no failed attempt.
//
// Once vCenter has refused a source's credentials, the chain passes over
// that source while its credentials stay the same (compared by
// fingerprint): other sources are tried first (CPI keeps the Secret's
// credentials once they replaced the config's, until it restarts), and
// when none logs in the refused credentials are offered again only on a
// schedule: after Retry, then twice as long each time they are refused
// again, up to MaxRetry. New credentials are tried at once. vSphere SSO
// locks an account after a few failed logins (5 in 180 s by default), and
// every reload, re-login and probe would add one; a vCenter that refused
// valid credentials for a while (its identity source was down, the
// account was locked and then unlocked) is still served again once it
// accepts them. A restart forgets. The refusals are kept in a Ledger,
// per account: chains sharing one (every vCenter of a process) count an
// account's refusals together, and on a standby the ledger sends only what
// the leader logged in with.
type Chain struct {
	links  []Source
	server string        // the vCenter's address: with a user, the account
	turn   chan struct{} // holds a token while a Login runs
	retry  Retry
	now    func() time.Time
	ledger *Ledger

	mu       sync.Mutex
	rejected map[int]ledgerKey // link → what vCenter refused of it last
}

// Retry is when credentials vCenter refused are offered again, unchanged.
type Retry struct {
	// After is the wait after a first refusal; it doubles with each
	// refusal that follows, up to Max. Zero or less: never again until
	// they change.
	After time.Duration
	// Max caps the wait (at least After).
	Max time.Duration
}

// DefaultRetry keeps one vCenter's failed logins with unchanged
// credentials to two in any 180 s (at most one after the first two
// minutes), well under vSphere SSO's default lockout of 5 in 180 s, even
// with two vCenters of one SSO domain sharing the account.
var DefaultRetry = Retry{After: 2 * time.Minute, Max: 16 * time.Minute}

// wait is how long after its n-th refusal in a row (n ≥ 1) unchanged
// credentials are offered again; ok is false when never.
func (r Retry) wait(n int) (d time.Duration, ok bool) {
	if r.After <= 0 {
		return 0, false
	}
	d = r.After
	for i := 1; i < n && d < r.Max; i++ {
		d *= 2
	}
	return max(min(d, r.Max), r.After), true
}

// ForVCenter is the chain CPI's connection manager tries for vc (see
// Chain): the user and password written in the config (config.Parse keeps
// only the vCenter section's own when a Secret or directory applies, as
// CPI), then the source CPI's rules pick (vc.CredentialsFrom): the Secret
// (read through secrets; nil: no Kubernetes, no Secret) or the secrets
// directory. The CCM and its validate command build their logins with it;
// refusals are kept in ledger (nil: one of the chain's own).
func ForVCenter(cfg *config.Config, vc config.VCenter, secrets *Secrets, ledger *Ledger) *Chain {
	var links []Source
	if vc.User != "" || vc.Password != "" {
		links = append(links, Static{User: vc.User, Password: vc.Password})
	}
	switch {
	case vc.CredentialsFrom == config.FromSecret && secrets != nil:
		links = append(links, secrets.Source(vc.SecretNamespace, vc.SecretName, vc.Server))
	case vc.CredentialsFrom == config.FromDirectory:
		links = append(links, Directory{Dir: cfg.SecretsDirectory, Server: vc.Server})
	}
	return newChain(links, vc.Server, ledger, DefaultRetry, time.Now)
}

// NewChain returns the chain of links, first tried first.
// Refused credentials are offered again as DefaultRetry says.
func NewChain(links ...Source) *Chain {
	return newChain(links, "", nil, DefaultRetry, time.Now)
}

// newChain is the chain of server's links; ledger nil: one of its own.
func newChain(links []Source, server string, ledger *Ledger, r Retry, now func() time.Time) *Chain {
	if ledger == nil {
		ledger = NewLedger()
	}
	return &Chain{links: links, server: server, turn: make(chan struct{}, 1), retry: r, now: now, ledger: ledger,
		rejected: map[int]ledgerKey{}}
}

// WithRetry is a chain of the same sources, server and ledger that offers
// refused credentials again as r says.
func (c *Chain) WithRetry(r Retry) *Chain {
	return newChain(c.links, c.server, c.ledger, r, c.now)
}

// AsChain is src itself when it is a chain, else the chain of src alone.
func AsChain(src Source) *Chain {
	if c, ok := src.(*Chain); ok {
		return c
	}
	return NewChain(src)
}

// Links are the chain's sources, in order.
func (c *Chain) Links() []Source { return c.links }

// String names the sources in order.
func (c *Chain) String() string {
	names := make([]string, len(c.links))
	for i, l := range c.links {
		names[i] = l.String()
	}
	if len(names) == 0 {
		return "no credential source"
	}
	return strings.Join(names, ", then ")
}

// ErrRejected is wrapped by a login's error when vCenter refused the
// credentials themselves (an invalid login): the chain moves on to its
// next source. Any other failure ends the attempt.
var ErrRejected = errors.New("credentials rejected")

// ErrRefusedBefore is wrapped by the chain's error when its only
// credentials are ones vCenter refused before and their retry is not due:
// they are not offered again until then, or until they change.
var ErrRefusedBefore = errors.New("refused by vCenter before, not sent again until they change or their retry is due")

// Served is credentials and the source that gave them (its String, never a
// value).
type Served struct {
	Credentials
	Source string
	// Rejected names the sources whose credentials vCenter refused in this
	// attempt before these.
	Rejected []string
	link     int
}

// Get implements Source: the credentials Login would try first.
func (c *Chain) Get(ctx context.Context) (Credentials, error) {
	s, err := c.Current(ctx)
	return s.Credentials, err
}

// Current is the credentials Login would try first, and their source;
// an error wrapping ErrRefusedBefore when vCenter refused every source's
// current credentials and no retry is due (Login would try none).
func (c *Chain) Current(ctx context.Context) (Served, error) {
	const op = "credentials.Chain.Current"
	var found *Served
	readErrs, skipped, err := c.candidates(ctx, func(s Served) bool {
		found = &s
		return false
	})
	switch {
	case err != nil:
		return Served{}, fmt.Errorf("%s: %w", op, err)
	case found != nil:
		return *found, nil
	}
	return Served{}, fmt.Errorf("%s: %w", op, c.none(append(readErrs, skipped...)))
}

// candidates reads the links in order and hands yield, until it returns
// false, each one's fresh credentials as read, then those whose retry is
// due. A link that has none for this vCenter (ErrNoCredentials) is
// skipped, its error kept in readErrs; any other ends the walk (err).
// skipped says why credentials were passed over (see passOver).
func (c *Chain) candidates(ctx context.Context, yield func(Served) bool) (readErrs, skipped []error, err error) {
	var due []Served
	now := c.now()
	for i, l := range c.links {
		cr, err := l.Get(ctx)
		if err != nil {
			readErrs = append(readErrs, err)
			if errors.Is(err, ErrNoCredentials) {
				continue
			}
			return readErrs, skipped, joinErrors(readErrs)
		}
		s := Served{Credentials: cr, Source: l.String(), link: i}
		switch c.passOver(ctx, s, now, &skipped) {
		case fresh:
			if !yield(s) {
				return readErrs, skipped, nil
			}
		case retryDue:
			due = append(due, s)
		}
	}
	for _, s := range due {
		if !yield(s) {
			break
		}
	}
	return readErrs, skipped, nil
}

// passOver is s's standing at now; when s is passed over it adds why to
// skipped: vCenter refused its credentials, which have not changed since
// (waiting), or, on a standby, the leader does not back them (deferred).
func (c *Chain) passOver(ctx context.Context, s Served, now time.Time, skipped *[]error) standing {
	k := c.key(s)
	st, why := c.ledger.standing(ctx, k, c.retry, now)
	switch st {
	case waiting:
		*skipped = append(*skipped, fmt.Errorf("%s: %w", s.Source, ErrRefusedBefore))
	case deferred:
		*skipped = append(*skipped, fmt.Errorf("%s: %w (%w)", s.Source, ErrDeferred, why))
	}
	if st == waiting || st == retryDue {
		// Refused through another chain of the ledger (a backend this
		// one replaced, another entry of the server): reported as this
		// chain's own.
		c.mu.Lock()
		c.rejected[s.link] = k
		c.mu.Unlock()
	}
	return st
}

// Login offers the chain's credentials to try, in order, until try
// accepts one (returns nil) or fails otherwise than by ErrRejected, and
// says which source served. Credentials vCenter refused before come last,
// and only once their retry is due (see Chain); when nothing else is left
// the error wraps ErrRefusedBefore. try is called with the credentials
// and their source; it must not keep the credentials. Logins of one chain
// take turns.
func (c *Chain) Login(ctx context.Context, try func(Served) error) (Served, error) {
	const op = "credentials.Chain.Login"
	select {
	case c.turn <- struct{}{}:
		defer func() { <-c.turn }()
	case <-ctx.Done():
		return Served{}, fmt.Errorf("%s: waiting for another login of %s: %w", op, c, ctx.Err())
	}
	var errs []error
	var rejected []string
	var result *Served
	var failed error
	readErrs, skipped, _ := c.candidates(ctx, func(s Served) bool {
		s.Rejected = append([]string(nil), rejected...)
		err := try(s)
		if err == nil {
			c.outcome(s, true)
			result = &s
			return false
		}
		errs = append(errs, err)
		if !errors.Is(err, ErrRejected) {
			failed = fmt.Errorf("%s: %w", op, joinErrors(errs))
			return false
		}
		c.outcome(s, false)
		rejected = append(rejected, s.Source)
		return true
	})
	switch {
	case failed != nil:
		return Served{}, failed
	case result != nil:
		return *result, nil
	}
	// A source that failed to read, refused or skipped credentials: each
	// is named; none at all: the chain says it holds nothing.
	return Served{}, fmt.Errorf("%s: %w", op, c.none(append(append(readErrs, errs...), skipped...)))
}

// Reread is the current credentials of the source that served s; an
// error wrapping ErrRefusedBefore when vCenter refused them since and
// their retry is not due.
func (c *Chain) Reread(ctx context.Context, s Served) (Credentials, error) {
	const op = "credentials.Chain.Reread"
	if s.link < 0 || s.link >= len(c.links) {
		return Credentials{}, fmt.Errorf("%s: no source %d", op, s.link)
	}
	cr, err := c.links[s.link].Get(ctx)
	if err != nil {
		return Credentials{}, fmt.Errorf("%s: %w", op, err)
	}
	s.Credentials = cr
	var passedOver []error
	if st := c.passOver(ctx, s, c.now(), &passedOver); st == waiting || st == deferred {
		return Credentials{}, fmt.Errorf("%s: %w", op, passedOver[0])
	}
	return cr, nil
}

// Refusal is a source whose current credentials vCenter refused (never
// a value).
type Refusal struct {
	Source string
	// Refusals in a row of these credentials.
	Refusals int
	// Last is when vCenter refused them last.
	Last time.Time
	// Retry is when they are offered again, unchanged; zero: never.
	Retry time.Time
}

// Refused lists, in order, the sources whose credentials vCenter refused
// and that are passed over until they change or their retry is due.
func (c *Chain) Refused() []Refusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Refusal
	leading := c.ledger.Leading()
	for i, l := range c.links {
		k, ok := c.rejected[i]
		if !ok {
			continue
		}
		count, at := c.ledger.refusal(k)
		if count == 0 {
			continue
		}
		f := Refusal{Source: l.String(), Refusals: count, Last: at}
		if d, ok := c.retry.wait(count); ok && leading {
			f.Retry = at.Add(d)
		}
		out = append(out, f)
	}
	return out
}

// standing is what may be done with a link's credentials now.
type standing int

const (
	fresh    standing = iota // never refused, or changed since
	waiting                  // refused, unchanged, retry not due
	retryDue                 // refused, unchanged, retry due
	deferred                 // a standby's, not backed by the leader
)

// key is the ledger's key of s's credentials.
func (c *Chain) key(s Served) ledgerKey {
	return ledgerKey{AccountOf(c.server, s.Credentials), s.Fingerprint()}
}

// outcome records that vCenter accepted or refused s's credentials now.
func (c *Chain) outcome(s Served, accepted bool) {
	k := c.key(s)
	c.mu.Lock()
	if accepted {
		delete(c.rejected, s.link)
	} else {
		c.rejected[s.link] = k
	}
	c.mu.Unlock()
	c.ledger.outcome(k, c.now(), accepted)
}

// none is the error of a chain whose sources hold nothing.
func (c *Chain) none(errs []error) error {
	if len(errs) == 0 {
		return fmt.Errorf("%s: %w", c, ErrNoCredentials)
	}
	return joinErrors(errs)
}

// joinErrors is errors.Join on one line ("; "): messages go to Events and
// single-line logs.
func joinErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	args := make([]any, len(errs))
	for i, e := range errs {
		args[i] = e
	}
	return fmt.Errorf(strings.TrimPrefix(strings.Repeat("; %w", len(errs)), "; "), args...)
}
