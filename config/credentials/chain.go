package credentials

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

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
// that source while its credentials stay the same (CPI keeps the Secret's
// credentials once they replaced the config's, until it restarts); it is
// tried again when its credentials change, or when every source with
// credentials has been refused (an account unlocked, a password set back).
//
// A Chain is one vCenter backend's: it remembers what that vCenter refused.
type Chain struct {
	links []Source

	mu       sync.Mutex
	rejected map[int][32]byte // link → fingerprint of what vCenter refused
}

// ForVCenter is the chain CPI's connection manager tries for vc: the user
// and password written in the config first (config.Parse keeps only the
// vCenter section's own when a Secret or directory applies, as CPI); then,
// once vCenter refuses them as an invalid login (or when the config has
// none), the source CPI's rules pick (vc.CredentialsFrom): the Secret (read
// through secrets; nil: no Kubernetes, no Secret) or the secrets directory.
// The CCM and its validate command build their logins with it.
func ForVCenter(cfg *config.Config, vc config.VCenter, secrets *Secrets) *Chain {
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
	return NewChain(links...)
}

// NewChain returns the chain of links, first tried first.
func NewChain(links ...Source) *Chain {
	return &Chain{links: links, rejected: map[int][32]byte{}}
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

// Current is the credentials Login would try first, and their source.
func (c *Chain) Current(ctx context.Context) (Served, error) {
	const op = "credentials.Chain.Current"
	var found, refused *Served
	errs, err := c.walk(ctx, func(s Served) bool {
		if !c.wasRejected(s.link, s.Credentials) {
			found = &s
			return false
		}
		if refused == nil {
			refused = &s
		}
		return true
	})
	switch {
	case err != nil:
		return Served{}, fmt.Errorf("%s: %w", op, err)
	case found != nil:
		return *found, nil
	case refused != nil:
		return *refused, nil
	}
	return Served{}, fmt.Errorf("%s: %w", op, c.none(errs))
}

// walk reads the links in order and hands each one's credentials to
// yield until it returns false. A link that has none for this vCenter
// (ErrNoCredentials) is skipped, its error kept in errs for the final
// message; any other error ends the walk (err, with those before it).
func (c *Chain) walk(ctx context.Context, yield func(Served) bool) (errs []error, err error) {
	for i, l := range c.links {
		cr, err := l.Get(ctx)
		if err != nil {
			errs = append(errs, err)
			if errors.Is(err, ErrNoCredentials) {
				continue
			}
			return errs, joinErrors(errs)
		}
		if !yield(Served{Credentials: cr, Source: l.String(), link: i}) {
			break
		}
	}
	return errs, nil
}

// Login offers the chain's credentials to try, in order, until try
// accepts one (returns nil) or fails otherwise than by ErrRejected, and
// says which source served. try is called with the credentials and their
// source; it must not keep the credentials.
func (c *Chain) Login(ctx context.Context, try func(Served) error) (Served, error) {
	const op = "credentials.Chain.Login"
	var errs []error
	var rejected []string
	var later []Served // refused before: tried once nothing else logs in
	attempt := func(s Served) (done bool, err error) {
		s.Rejected = append([]string(nil), rejected...)
		err = try(s)
		if err == nil {
			c.setRejected(s.link, nil)
			return true, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, ErrRejected) {
			return true, fmt.Errorf("%s: %w", op, joinErrors(errs))
		}
		fp := s.Fingerprint()
		c.setRejected(s.link, &fp)
		rejected = append(rejected, s.Source)
		return false, nil
	}
	var result *Served
	var failed error
	settle := func(s Served) bool {
		done, err := attempt(s)
		if done {
			s.Rejected, result, failed = rejected, &s, err
		}
		return !done
	}
	readErrs, err := c.walk(ctx, func(s Served) bool {
		if c.wasRejected(s.link, s.Credentials) {
			later = append(later, s)
			return true
		}
		return settle(s)
	})
	errs = append(readErrs, errs...)
	if err != nil {
		return Served{}, fmt.Errorf("%s: %w", op, joinErrors(errs))
	}
	for _, s := range later {
		if result != nil {
			break
		}
		settle(s)
	}
	switch {
	case failed != nil:
		return Served{}, failed
	case result != nil:
		return *result, nil
	case len(rejected) > 0:
		return Served{}, fmt.Errorf("%s: %w", op, joinErrors(errs))
	}
	return Served{}, fmt.Errorf("%s: %w", op, c.none(errs))
}

// Reread is the current credentials of the source that served s.
func (c *Chain) Reread(ctx context.Context, s Served) (Credentials, error) {
	const op = "credentials.Chain.Reread"
	if s.link < 0 || s.link >= len(c.links) {
		return Credentials{}, fmt.Errorf("%s: no source %d", op, s.link)
	}
	cr, err := c.links[s.link].Get(ctx)
	if err != nil {
		return Credentials{}, fmt.Errorf("%s: %w", op, err)
	}
	return cr, nil
}

func (c *Chain) wasRejected(link int, cr Credentials) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	fp, ok := c.rejected[link]
	return ok && fp == cr.Fingerprint()
}

// setRejected records (fp non-nil) or forgets what vCenter refused of link.
func (c *Chain) setRejected(link int, fp *[32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fp == nil {
		delete(c.rejected, link)
		return
	}
	c.rejected[link] = *fp
}

// none is the error of a chain whose sources hold nothing.
func (c *Chain) none(errs []error) error {
	if len(errs) == 0 {
		return errorsWith{msg: c.String() + ": " + ErrNoCredentials.Error(), errs: []error{ErrNoCredentials}}
	}
	return joinErrors(errs)
}

// joinErrors is errors.Join on one line ("; "): messages go to Events and
// single-line logs.
func joinErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errorsWith{msg: strings.Join(msgs, "; "), errs: errs}
}

type errorsWith struct {
	msg  string
	errs []error
}

func (e errorsWith) Error() string   { return e.msg }
func (e errorsWith) Unwrap() []error { return e.errs }
