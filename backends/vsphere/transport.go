package vsphere

import (
	"io"
	"net/http"
)

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
