package vsphere

// The session's transport: re-login on NotAuthenticated, connections
// drained for reuse, the TLS dial bounded in time and pinned to the
// configured thumbprints.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// reloginRoundTripper re-establishes the SOAP session when vCenter answers
// NotAuthenticated (session expired or terminated) and retries the request
// once.
type reloginRoundTripper struct {
	next     soap.RoundTripper
	sessions *sessions
	conn     *conn
}

func (r *reloginRoundTripper) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	switch req.(type) {
	case *methods.LoginBody, *methods.LoginByTokenBody, *methods.LogoutBody:
		return r.next.RoundTrip(ctx, req, res)
	}
	seen := r.sessions.currentGeneration()
	err := r.next.RoundTrip(ctx, req, res)
	if err == nil {
		err = missingNotAuthenticated(res)
	}
	if err == nil || !fault.Is(err, &types.NotAuthenticated{}) {
		return err
	}
	if lerr := r.sessions.relogin(ctx, r.conn, seen); lerr != nil {
		return fmt.Errorf("session lost (%w), and %w", err, lerr)
	}
	// The decoder leaves fields the new response lacks untouched: clear
	// the old fault before decoding again.
	if v := reflect.ValueOf(res); v.Kind() == reflect.Pointer && !v.IsNil() {
		v.Elem().SetZero()
	}
	return r.next.RoundTrip(ctx, req, res)
}

// missingNotAuthenticated finds a lost session reported the way property
// reads report it: not as a fault of the call but in an object's
// missingSet. govmomi reads properties with RetrievePropertiesEx only
// (property.Collector.RetrieveProperties sends it too).
func missingNotAuthenticated(res soap.HasFault) error {
	b, ok := res.(*methods.RetrievePropertiesExBody)
	if !ok || b.Res == nil || b.Res.Returnval == nil {
		return nil
	}
	for _, oc := range b.Res.Returnval.Objects {
		for _, m := range oc.MissingSet {
			if _, ok := m.Fault.Fault.(*types.NotAuthenticated); ok {
				return soap.WrapVimFault(m.Fault.Fault)
			}
		}
	}
	return nil
}

// maxDrain bounds what closing a body reads: enough for a decoder's
// leftovers, little for a body abandoned midway (that connection closes).
const maxDrain = 4 << 10

// drainOnClose makes closing a response body read what is left of it (up
// to maxDrain) first. govmomi's SOAP client stops decoding at the end of
// the envelope and closes the body without reading its end (the final
// chunk of a large answer); net/http does not reuse a connection whose
// body was closed unread, so without this every large response costs
// vCenter a new TLS handshake (the bench counted 73 connections to
// initialize 1000 Nodes).
func drainOnClose(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		res, err := next.RoundTrip(req)
		if err != nil || res.Body == nil || res.Body == http.NoBody {
			return res, err
		}
		res.Body = &drainingBody{ReadCloser: res.Body}
		return res, nil
	})
}

type drainingBody struct{ io.ReadCloser }

func (b *drainingBody) Close() error {
	_, _ = io.CopyN(io.Discard, b.ReadCloser, maxDrain)
	return b.ReadCloser.Close()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// maxIdleConnsPerVCenter is how many idle connections a session keeps to
// its vCenter for the next requests: enough for the lookups that run at
// once (each idle one holds a socket, its buffers and two goroutines
// until the transport's idle timeout, 90 s).
const maxIdleConnsPerVCenter = 16

// boundTLSDial replaces govmomi's TLS dialer, which calls tls.Dial: no
// context and no timeout, so a server that accepts TCP and never completes
// the handshake holds a goroutine and a socket for ever — one more at every
// retry and probe of a dead vCenter. This one dials and handshakes under the
// request context, bounded by timeout (net/http detaches dials from their
// request). What it verifies is the transport's TLS config alone (see
// pinned): govmomi's fallback from a failed verification to a thumbprint is
// not kept, and neither is its trust in any CA beside a pin. Each
// handshake that succeeds hands the server's leaf certificate to seen
// (its expiry is shown), whatever verified it (pin, CA, or nothing with
// insecureFlag). The TCP connect and the handshake are told to progress
// as each completes: what a lookup waiting for a vCenter still
// connecting judges it by (ConnectProgress).
func boundTLSDial(t *http.Transport, timeout time.Duration, seen func(*x509.Certificate), progress func(phase string)) {
	t.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		// As tls.Dialer, in two steps.
		raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		progress(phaseTCP)
		cfg := t.TLSClientConfig // soap.NewClient's, or pinned's: never nil
		if cfg.ServerName == "" {
			host := addr
			if i := strings.LastIndex(addr, ":"); i >= 0 {
				host = addr[:i]
			}
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, err
		}
		progress(phaseTLS)
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
			seen(certs[0])
		}
		return tc, nil
	}
}

// pinned is the TLS config of a vCenter pinned by thumbprints: the leaf
// certificate it presents must have one of them as its SHA-256 or SHA-1
// thumbprint (several while a certificate is replaced: the old one and
// the new), and nothing else vouches for it — no CA, however trusted, and
// no name (the pin is the identity). The check is part of the handshake,
// so a server that does not match never sees a request, let alone a
// password.
func pinned(host string, thumbprints []string) *tls.Config {
	return &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // replaced by VerifyConnection's thumbprint check
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) > 0 && slices.ContainsFunc(thumbprints, func(tp string) bool { return thumbprintMatches(tp, cs.PeerCertificates[0]) }) {
				return nil
			}
			return &thumbprintMismatch{host: host, thumbprints: thumbprints}
		},
	}
}

// thumbprintMatches compares thumbprints as vSphere writes them (colon-
// separated hex), in either case.
func thumbprintMatches(thumbprint string, cert *x509.Certificate) bool {
	return strings.EqualFold(thumbprint, soap.ThumbprintSHA256(cert)) ||
		strings.EqualFold(thumbprint, soap.ThumbprintSHA1(cert))
}

// thumbprintMismatch is a server whose certificate is none of the pinned
// ones. The message is govmomi's (for one).
type thumbprintMismatch struct {
	host        string
	thumbprints []string
}

func (e *thumbprintMismatch) Error() string {
	if len(e.thumbprints) == 1 {
		return fmt.Sprintf("host %q thumbprint does not match %q", e.host, e.thumbprints[0])
	}
	return fmt.Sprintf("host %q thumbprint does not match any of %q", e.host, e.thumbprints)
}
