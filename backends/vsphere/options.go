package vsphere

import (
	"crypto/x509"
	"net/http"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// Options configure one vCenter backend.
type Options struct {
	// Config is resolved (config.Parse, or WithDefaults): New panics on a
	// zero Port or RequestTimeout.
	Config config.VCenter
	// Credentials are the vCenter's logins; a *credentials.Chain is tried
	// in order (see there), any other Source alone.
	Credentials credentials.Source
	// RefusedRetry is when credentials this vCenter refused are sent
	// again unchanged; nil: credentials.DefaultRetry.
	RefusedRetry *credentials.Retry
	// SessionServiceRootCAs are the roots a session service's
	// certificate is verified against (credentials of that form); nil: the
	// system's, as CPI.
	SessionServiceRootCAs *x509.CertPool
	// ServiceAccountTokenFile is sent to a session service when the
	// credentials carry no token; default DefaultServiceAccountTokenFile.
	ServiceAccountTokenFile string
	// WrapTransport, when set, wraps the HTTP transport of both sessions
	// (tests count or delay requests with it).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// KeepAlive is the idle time after which the SOAP session is pinged;
	// default 5 minutes.
	KeepAlive time.Duration
	// TokenLifetime is the lifetime a certificate login asks of vCenter's
	// STS for its token (STS may grant less); the session is renewed with
	// a fresh token when three quarters of it have passed. Default
	// DefaultTokenLifetime.
	TokenLifetime time.Duration
	// UserAgent names the product and version in every request (vCenter's
	// session list shows it); empty: govmomi's.
	UserAgent string
	// Inventory keeps the vCenter's VMs and the entities above them in
	// memory, fed by a PropertyCollector watch, and the tags on those
	// entities, read in bulk; lookups are answered from memory while the
	// inventory is in service. Off, every lookup asks vCenter.
	Inventory bool
	// Heartbeat is the longest the watch waits on vCenter for a change
	// before it must answer anyway; a vCenter silent for Heartbeat plus
	// the request timeout takes the inventory out of service. Default
	// DefaultHeartbeat.
	Heartbeat time.Duration
	// TagRefresh is the age after which the bulk tag cache is re-read in
	// the background; default DefaultTagRefresh.
	TagRefresh time.Duration
}

// Defaults of Options.Heartbeat (the inventory watch's longest silence)
// and Options.TagRefresh (the tag cache's age before a background refresh).
const (
	DefaultHeartbeat  = 5 * time.Second
	DefaultTagRefresh = 5 * time.Minute
)
