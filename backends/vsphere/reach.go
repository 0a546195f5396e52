package vsphere

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// connError is a connection-level failure; what names the stage that
// failed: dial, TLS handshake, timeout, connection, login rejected,
// credentials. It wraps errors that never hold a password (govmomi strips
// the user info from its URLs; login faults do not echo credentials).
type connError struct {
	what string
	err  error
	// kind is backends.ErrUnreachable or ErrAuth when the failure is one.
	kind error
}

func (e *connError) Error() string { return e.what + ": " + e.err.Error() }

func (e *connError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.err}
	}
	return []error{e.err, e.kind}
}

// classify names a failure to get an answer from vCenter.
func classify(err error) *connError {
	var ce *connError
	if errors.As(err, &ce) {
		return ce
	}
	var op *net.OpError
	var ne net.Error
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		return &connError{what: "dial", err: err, kind: backends.ErrUnreachable}
	case isTLSFailure(err):
		return &connError{what: "TLS handshake", err: err, kind: backends.ErrUnreachable}
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return &connError{what: "timeout", err: err, kind: backends.ErrUnreachable}
	}
	return &connError{what: "connection", err: err, kind: backends.ErrUnreachable}
}

func isTLSFailure(err error) bool {
	var (
		verify  *tls.CertificateVerificationError
		record  tls.RecordHeaderError
		alert   tls.AlertError
		invalid x509.CertificateInvalidError
		pin     *thumbprintMismatch
	)
	return soap.IsCertificateUntrusted(err) || errors.As(err, &verify) || errors.As(err, &record) ||
		errors.As(err, &alert) || errors.As(err, &invalid) || errors.As(err, &pin)
}

// noAnswer reports whether err is a failure to get an answer (transport,
// deadline), as opposed to vCenter's answer: a SOAP fault, an HTTP error
// status, a body it could not decode.
func noAnswer(err error) bool {
	var f interface{ Fault() types.BaseMethodFault }
	if errors.As(err, &f) {
		return false
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// setReachability records the outcome of a connection-level event.
func (s *sessions) setReachability(err error) {
	state := backends.ConnUp
	if err != nil {
		state = backends.ConnDown
	}
	s.reachMu.Lock()
	defer s.reachMu.Unlock()
	if s.reach.State != state {
		s.reach.Since = time.Now()
	}
	s.reach.State, s.reach.Err = state, err
}

// reachState is the last connection-level event's outcome, and the first
// connection attempt's progress.
func (s *sessions) reachState() (backends.Reachability, backends.ConnectProgress) {
	s.reachMu.Lock()
	defer s.reachMu.Unlock()
	return s.reach, s.progress
}

// recordLogin records a login flight's outcome, unless close ended it or
// a standby deferred the login (nothing was sent: it says nothing of
// vCenter, and a replica that takes the lease must not find its vCenters
// known down for a login it chose not to make).
func (s *sessions) recordLogin(err error) {
	if err != nil && (s.lifetime().Err() != nil || errors.Is(err, credentials.ErrDeferred)) {
		return
	}
	s.setReachability(err)
}

// observed is next as every request of the sessions goes: its outcome
// recorded, then Options.WrapTransport's. For each request that is not
// part of a login flight, it records whether vCenter answered: any HTTP
// response is Up; a failure to get one (dial, TLS, reset) is Down, unless
// the request's context had ended first: a caller that gave up says
// nothing of vCenter (the watch, the keep-alive and Probe record their
// own deadlines: recordReachability).
func (s *sessions) observed(next http.RoundTripper) http.RoundTripper {
	var rt http.RoundTripper = roundTripFunc(func(req *http.Request) (*http.Response, error) {
		res, err := next.RoundTrip(req)
		ctx := req.Context()
		if err == nil {
			s.noteProgress(phaseAnswer)
		}
		switch {
		case ctx.Value(loginKey{}) != nil:
		case err == nil:
			s.setReachability(nil)
		case ctx.Err() == nil && s.lifetime().Err() == nil:
			s.setReachability(classify(err))
		}
		return res, err
	})
	if s.opts.WrapTransport != nil {
		rt = s.opts.WrapTransport(rt)
	}
	return rt
}

// recordReachability records the outcome of a call made under ctx to learn about the
// connection (a keep-alive ping, a probe, the inventory watch): an
// answer, even a fault, is Up; none, by a transport failure or by ctx's
// deadline, is Down. A cancelled ctx or closed sessions say nothing, and a
// login's failure was recorded by the login.
func (s *sessions) recordReachability(ctx context.Context, what string, err error) {
	var ce *connError
	switch {
	case s.lifetime().Err() != nil, errors.Is(ctx.Err(), context.Canceled):
	case errors.As(err, &ce):
	case err == nil, !noAnswer(err):
		s.setReachability(nil)
	default:
		s.setReachability(classify(fmt.Errorf("%s: %w", what, err)))
	}
}

// The phases of ConnectProgress, in the order an attempt reaches them.
const (
	phaseDialing = "dialing"
	phaseTCP     = "tcp connected"
	phaseTLS     = "tls done"
	phaseAnswer  = "answering"
)

// phaseRank orders the phases; "" (no attempt yet) is before them all.
func phaseRank(phase string) int {
	return slices.Index([]string{phaseDialing, phaseTCP, phaseTLS, phaseAnswer}, phase) + 1
}

// noteProgress records a step of the first connection attempt while
// reach is ConnUnknown: its start (phaseDialing), or the vCenter
// answering. Afterwards Reachability says it all.
//
// Only a step further than any the attempt reached is progress (each
// HTTP answer is: a new one). A step repeated is not: a new dial, or a
// TCP connect or TLS handshake on a new connection, is what a retry does
// after the previous handshake timed out (maxHandshake; the SOAP client
// retries a timeout as a temporary error). Counted, a vCenter that
// accepts TCP and never answers TLS would look alive again at every
// retry, and the time since the last attempt's step would count as a
// round trip (seconds, so a stall window of many seconds): every lookup
// would wait for it again (issue 33).
func (s *sessions) noteProgress(phase string) {
	now := time.Now()
	s.reachMu.Lock()
	defer s.reachMu.Unlock()
	if s.reach.State != backends.ConnUnknown {
		return
	}
	p := &s.progress
	if p.Phase != "" && phase != phaseAnswer && phaseRank(phase) <= phaseRank(p.Phase) {
		return
	}
	if phase != phaseDialing && !p.Last.IsZero() {
		p.RoundTrip = max(p.RoundTrip, now.Sub(p.Last))
	}
	p.Phase, p.Last = phase, now
}

// kindedError is a failure with the kind it was sorted into; its text is
// the failure's own.
type kindedError struct {
	err, kind error
}

func (e *kindedError) Error() string   { return e.err.Error() }
func (e *kindedError) Unwrap() []error { return []error{e.err, e.kind} }

// sortFailure names *err, a Backend method's failure, after the method
// op (unless op is "") and gives it its kind (backends.ErrAuth,
// ErrUnreachable) when it has one and lacks it, so no caller needs
// govmomi or the text to tell. Deferred by every method that talks to
// vCenter.
func sortFailure(op string, err *error) {
	if *err == nil {
		return
	}
	if op != "" {
		*err = fmt.Errorf("%s: %w", op, *err)
	}
	if errors.Is(*err, backends.ErrAuth) || errors.Is(*err, backends.ErrUnreachable) {
		return
	}
	switch {
	case fault.Is(*err, &types.NotAuthenticated{}), fault.Is(*err, &types.InvalidLogin{}):
		*err = &kindedError{err: *err, kind: backends.ErrAuth}
	case noAnswer(*err):
		*err = &kindedError{err: *err, kind: backends.ErrUnreachable}
	}
}
