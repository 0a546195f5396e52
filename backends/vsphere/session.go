// Package vsphere is the govmomi implementation of backends.Backend: SOAP for
// VM lookups and properties, the vAPI REST tagging service for zones and
// regions, one long-lived session of each per vCenter.
package vsphere

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/session/keepalive"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Options configure one vCenter backend.
type Options struct {
	Config      config.VCenterConfig
	Credentials credentials.Source
	// WrapTransport, when set, wraps the HTTP transport of both sessions
	// (tests count or delay requests with it).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// KeepAlive is the idle time after which the SOAP session is pinged;
	// default 5 minutes.
	KeepAlive time.Duration
}

// sessions holds the SOAP and REST sessions of one vCenter. Logins are
// serialised by mu; the generation counter lets a request that saw
// NotAuthenticated tell whether someone else already logged in again.
type sessions struct {
	opts Options

	mu         sync.Mutex
	vim        *vim25.Client
	keepalive  *keepalive.HandlerSOAP
	generation uint64
	rest       *rest.Client
	restValid  bool
}

func (s *sessions) url() *url.URL {
	host := net.JoinHostPort(s.opts.Config.Server, strconv.Itoa(s.opts.Config.Port))
	return &url.URL{Scheme: "https", Host: host, Path: vim25.Path}
}

// client returns a logged-in SOAP client, connecting on first use.
func (s *sessions) client(ctx context.Context) (*vim25.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vim != nil {
		return s.vim, nil
	}
	u := s.url()
	sc := soap.NewClient(u, s.opts.Config.InsecureFlag)
	if tp := s.opts.Config.Thumbprint; tp != "" {
		sc.SetThumbprint(u.Host, tp)
	}
	if ca := s.opts.Config.CAFile; ca != "" {
		if err := sc.SetRootCAs(ca); err != nil {
			return nil, fmt.Errorf("caFile %s: %w", ca, err)
		}
	}
	if s.opts.WrapTransport != nil {
		sc.Client.Transport = s.opts.WrapTransport(sc.Client.Transport)
	}
	var rt soap.RoundTripper = sc
	if n := s.opts.Config.RoundTripCount; n > 1 {
		rt = vim25.Retry(rt, vim25.TemporaryNetworkError(int(n)), int(n))
	}
	vc, err := vim25.NewClient(ctx, rt)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	vc.Client = sc // the REST client derives from it; NewClient only sets it for a bare soap.Client
	idle := s.opts.KeepAlive
	if idle == 0 {
		idle = 5 * time.Minute
	}
	s.keepalive = keepalive.NewHandlerSOAP(&reloginRoundTripper{next: rt, sessions: s}, idle, nil)
	vc.RoundTripper = s.keepalive
	if err := s.loginLocked(ctx, vc); err != nil {
		s.keepalive.Stop()
		return nil, err
	}
	s.vim = vc
	return vc, nil
}

// loginLocked logs vc in with the current credentials; s.mu is held.
func (s *sessions) loginLocked(ctx context.Context, vc *vim25.Client) error {
	creds, err := s.opts.Credentials.Get(ctx)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if err := session.NewManager(vc).Login(ctx, url.UserPassword(creds.User, creds.Password.Reveal())); err != nil {
		// The fault says "incorrect user name or password"; it never echoes them.
		return fmt.Errorf("login as %q (credentials from %s): %w", creds.User, s.opts.Credentials, err)
	}
	s.generation++
	s.restValid = false
	return nil
}

// relogin logs in again unless a login happened since generation seen.
func (s *sessions) relogin(ctx context.Context, seen uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.generation != seen || s.vim == nil {
		return nil
	}
	return s.loginLocked(ctx, s.vim)
}

func (s *sessions) currentGeneration() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.generation
}

// restClient returns a logged-in vAPI REST client.
func (s *sessions) restClient(ctx context.Context) (*rest.Client, error) {
	vc, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rest == nil {
		s.rest = rest.NewClient(vc)
		if s.opts.WrapTransport != nil {
			s.rest.Client.Transport = s.opts.WrapTransport(s.rest.Client.Transport)
		}
	}
	if !s.restValid {
		creds, err := s.opts.Credentials.Get(ctx)
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		if err := s.rest.Login(ctx, url.UserPassword(creds.User, creds.Password.Reveal())); err != nil {
			return nil, fmt.Errorf("REST login as %q (credentials from %s): %w", creds.User, s.opts.Credentials, err)
		}
		s.restValid = true
	}
	return s.rest, nil
}

// restUnauthorized marks the REST session as lost.
func (s *sessions) restUnauthorized() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restValid = false
}

// close logs both sessions out.
func (s *sessions) close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.rest != nil && s.restValid {
		err = s.rest.Logout(ctx)
		s.restValid = false
	}
	if s.vim != nil {
		if lerr := session.NewManager(s.vim).Logout(ctx); lerr != nil && err == nil {
			err = lerr
		}
		s.keepalive.Stop()
		s.vim = nil
	}
	return err
}

// reloginRoundTripper re-establishes the SOAP session when vCenter answers
// NotAuthenticated (session expired or terminated) and retries the request
// once.
type reloginRoundTripper struct {
	next     soap.RoundTripper
	sessions *sessions
}

func (r *reloginRoundTripper) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	switch req.(type) {
	case *methods.LoginBody, *methods.LogoutBody:
		return r.next.RoundTrip(ctx, req, res)
	}
	seen := r.sessions.currentGeneration()
	err := r.next.RoundTrip(ctx, req, res)
	if err == nil || !fault.Is(err, &types.NotAuthenticated{}) {
		return err
	}
	if lerr := r.sessions.relogin(ctx, seen); lerr != nil {
		return fmt.Errorf("session lost (%w), and %w", err, lerr)
	}
	// The decoder leaves fields the new response lacks untouched: clear
	// the old fault before decoding again.
	if v := reflect.ValueOf(res); v.Kind() == reflect.Pointer && !v.IsNil() {
		v.Elem().SetZero()
	}
	return r.next.RoundTrip(ctx, req, res)
}
