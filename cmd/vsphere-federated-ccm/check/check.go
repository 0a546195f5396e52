// Package check is the judgement of the validate command: which checks a
// vCenter gets, in what order, which an earlier failure skips, and the
// verdict and words of each. What it reads of vCenter, it reads through
// the small read-only methods of the vSphere backend (its operator.go):
// nothing here speaks SOAP or REST, and nothing of the product's lookups
// exists for it.
package check

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/vsphere"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// The names of a vCenter's checks, in the order they run.
const (
	TCP         = "tcp"
	TLS         = "tls"
	Login       = "login"
	Datacenters = "datacenters"
	Tags        = "tag categories"
	Privileges  = "privileges"
	VMs         = "vms"
	Latency     = "latency"
)

// Verdict is the outcome of one check.
type Verdict string

// The verdicts: passed, failed, not run (an earlier check failed, or
// nothing to check), passed with a warning (something to act on soon,
// nothing that stops the CCM now).
const (
	Passed  Verdict = "pass"
	Failed  Verdict = "fail"
	Skipped Verdict = "skip"
	Warned  Verdict = "warn"
)

// Result is one check's verdict, with its reason in words; it never holds
// a credential. Its JSON is validate's -o json.
type Result struct {
	Name    string        `json:"name"`
	Verdict Verdict       `json:"verdict"`
	Detail  string        `json:"detail"`
	Took    time.Duration `json:"tookNanoseconds"`
}

// VCenter checks, read-only, what the CCM needs of the vCenter vc through
// b, a backend built from vc (its own TLS verification and credentials),
// each check under ctx; categories are the zone and region tag categories
// of the config's labels (none: not checked). A failed check skips those
// that need it. Nothing is written to vCenter but the session itself (and
// a container view, destroyed after counting).
func VCenter(ctx context.Context, vc config.VCenter, b *vsphere.Backend, categories []string) []Result {
	addr := net.JoinHostPort(vc.Server, strconv.Itoa(vc.Port))
	var r record
	if r.run(TCP, func() (Verdict, string) { return tcp(ctx, addr) }) != Passed {
		return r.skip(TLS, Login, Datacenters, Tags, Privileges, VMs, Latency)
	}
	user, ok := r.tlsAndLogin(ctx, vc, b, addr)
	if !ok {
		return r.skip(Datacenters, Tags, Privileges, VMs, Latency)
	}
	var dcs []config.Datacenter
	r.run(Datacenters, func() (v Verdict, detail string) {
		dcs, v, detail = datacenters(ctx, b, vc.DatacenterSpecs())
		return v, detail
	})
	r.run(Tags, func() (Verdict, string) {
		if len(categories) == 0 {
			return Skipped, "labels.zone and labels.region not configured: no zones or regions"
		}
		return tagCategories(ctx, b, categories)
	})
	r.run(Privileges, func() (Verdict, string) {
		if len(dcs) == 0 {
			return Skipped, "no datacenter to check them on"
		}
		return privileges(ctx, b, user, len(dcs))
	})
	r.run(VMs, func() (Verdict, string) { return vms(ctx, b, dcs) })
	r.run(Latency, func() (Verdict, string) { return latency(ctx, b, vc.RequestTimeout) })
	return r.results
}

// record collects a vCenter's results in order.
type record struct{ results []Result }

func (r *record) run(name string, fn func() (Verdict, string)) Verdict {
	start := time.Now()
	v, detail := fn()
	r.results = append(r.results, Result{Name: name, Verdict: v, Detail: detail, Took: time.Since(start)})
	return v
}

func (r *record) skip(names ...string) []Result {
	for _, n := range names {
		r.results = append(r.results, Result{Name: n, Verdict: Skipped, Detail: "not run: an earlier check failed"})
	}
	return r.results
}

// CertificateWarning is how long before its certificate expires the TLS
// check warns: time to plan the rollover (a thumbprint pin lists the new
// certificate's beside the old one's).
const CertificateWarning = 30 * 24 * time.Hour

func tcp(ctx context.Context, addr string) (Verdict, string) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return Failed, fmt.Sprintf("%s: %v", addr, err)
	}
	_ = conn.Close()
	return Passed, addr + " accepts connections"
}

// tlsAndLogin records the TLS and login checks. Both happen together, in
// the backend's own login: its verification (thumbprint, caFile, system
// roots) and its credentials are what is tested. ok is false when either
// failed; user is vCenter's name for the login.
func (r *record) tlsAndLogin(ctx context.Context, vc config.VCenter, b *vsphere.Backend, addr string) (user string, ok bool) {
	start := time.Now()
	loginErr := b.Login(ctx)
	took := time.Since(start)
	var failed string // the TLS check's failure
	switch {
	case vsphere.TLSFailure(loginErr):
		failed = fmt.Sprintf("%v; %s", loginErr, presented(ctx, addr, vc.Server))
	case errors.Is(loginErr, backends.ErrUnreachable):
		failed = fmt.Sprintf("%s accepts connections but its TLS handshake or login got no answer: %v", addr, loginErr)
	}
	if failed != "" {
		r.results = append(r.results, Result{Name: TLS, Verdict: Failed, Detail: failed, Took: took})
		r.skip(Login)
		return "", false
	}
	tlsVerdict, expiry := certificateExpiry(b.Status().Certificate)
	r.results = append(r.results, Result{Name: TLS, Verdict: tlsVerdict, Detail: verification(vc.Thumbprints, vc.CAFile, vc.InsecureFlag) + expiry})
	if loginErr != nil {
		r.results = append(r.results, Result{Name: Login, Verdict: Failed, Detail: loginErr.Error(), Took: took})
		return "", false
	}
	r.run(Login, func() (Verdict, string) {
		var certificate bool
		var err error
		user, certificate, err = b.SessionUser(ctx)
		if err != nil {
			return Failed, fmt.Sprintf("logged in, but the session cannot be read: %v", err)
		}
		var from string // the credentials' source
		if s := b.Status().Session; s != nil {
			from = s.Credentials
		}
		if certificate {
			// The PEM is no name to print; vCenter's name for the
			// solution user is what its privileges are read for.
			return Passed, fmt.Sprintf("with a %s (credentials from %s), vCenter's user %s", credentials.CertificateLogin, from, user)
		}
		return Passed, fmt.Sprintf("as %s (credentials from %s)", user, from)
	})
	r.results[len(r.results)-1].Took += took // the login itself
	return user, user != ""
}

// certificateExpiry is the TLS check's verdict by the expiry of the
// certificate the login's handshake accepted (Warned within
// CertificateWarning of it, or past it: a pin accepts an expired one),
// and "; expires …" for its detail.
func certificateExpiry(c *backends.Certificate) (Verdict, string) {
	if c == nil {
		return Passed, ""
	}
	left := time.Until(c.NotAfter)
	when := c.NotAfter.UTC().Format(time.RFC3339)
	days := int(left.Hours() / 24)
	switch {
	case left <= 0:
		return Warned, fmt.Sprintf("; the certificate EXPIRED on %s (%d days ago; subject %s, issuer %s)", when, -days, c.Subject, c.Issuer)
	case left < CertificateWarning:
		return Warned, fmt.Sprintf("; the certificate expires on %s, in %d days: plan its replacement (subject %s, issuer %s)", when, days, c.Subject, c.Issuer)
	}
	return Passed, fmt.Sprintf("; the certificate expires on %s, in %d days", when, days)
}

// verification says how the server's certificate was verified.
func verification(thumbprints []string, caFile string, insecure bool) string {
	switch {
	case len(thumbprints) > 1:
		return fmt.Sprintf("certificate matches one of the %d configured thumbprints", len(thumbprints))
	case len(thumbprints) == 1:
		return "certificate matches the configured thumbprint"
	case caFile != "":
		return "certificate verified against caFile " + caFile
	case insecure:
		return "certificate NOT verified (insecureFlag: true)"
	}
	return "certificate verified against the system's roots"
}

// presented describes the certificate the server at addr presents, read
// without verifying it, so the user can pin its thumbprint (in the form
// the backend compares pins in: soap's) or fix the CA.
func presented(ctx context.Context, addr, serverName string) string {
	d := tls.Dialer{Config: &tls.Config{ServerName: serverName, InsecureSkipVerify: true}} // only to show what it presents
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Sprintf("the server's certificate could not be read: %v", err)
	}
	defer conn.Close()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return "the server presented no certificate"
	}
	var chain []string
	for _, c := range certs {
		chain = append(chain, c.Subject.String())
	}
	sha1, sha256 := vsphere.Thumbprints(certs[0])
	return fmt.Sprintf("the server presents SHA-1 thumbprint %s, SHA-256 %s; chain: %s (issuer %s)",
		sha1, sha256, strings.Join(chain, " <- "), certs[len(certs)-1].Issuer)
}

// latency fails when the median of three round trips exceeds half the
// request timeout: lookups would then time out under any load.
func latency(ctx context.Context, b *vsphere.Backend, limit time.Duration) (Verdict, string) {
	var rtts []time.Duration
	for range 3 {
		t0 := time.Now()
		if err := b.Probe(ctx); err != nil {
			return Failed, fmt.Sprintf("round trip: %v", err)
		}
		rtts = append(rtts, time.Since(t0))
	}
	slices.Sort(rtts)
	detail := fmt.Sprintf("round trip %s (median of 3)", rtts[1].Round(100*time.Microsecond))
	if rtts[1] > limit/2 {
		return Failed, fmt.Sprintf("%s: over half the request timeout %s", detail, limit)
	}
	return Passed, detail
}
