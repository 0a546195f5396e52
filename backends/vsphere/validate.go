package vsphere

import (
	"cmp"
	"context"
	"crypto/sha1" // vSphere's thumbprint format, shown to be compared
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
)

// The names of Validate's checks, in the order they run.
const (
	CheckTCP         = "tcp"
	CheckTLS         = "tls"
	CheckLogin       = "login"
	CheckDatacenters = "datacenters"
	CheckTags        = "tag categories"
	CheckPrivileges  = "privileges"
	CheckVMs         = "vms"
	CheckLatency     = "latency"
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

// CertificateWarning is how long before its certificate expires the TLS
// check warns: time to plan the rollover (a thumbprint pin lists the new
// certificate's beside the old one's).
const CertificateWarning = 30 * 24 * time.Hour

// Check is one verdict of Validate, with its reason in words; it never
// holds a credential.
type Check struct {
	Name    string        `json:"name"`
	Verdict Verdict       `json:"verdict"`
	Detail  string        `json:"detail"`
	Took    time.Duration `json:"tookNanoseconds"`
}

// ValidateRequest says what Validate checks beyond the connection.
type ValidateRequest struct {
	// Categories are the zone and region tag categories of the config's
	// labels; none: not checked.
	Categories []string
	// Privileges the login needs on every configured datacenter (all of
	// them when none is configured); default RequiredPrivileges().
	Privileges []string
}

// RequiredPrivileges are what the CCM needs on the datacenters: vSphere's
// read-only role. It reads VMs, their hosts and folders, and tags; it
// never changes anything.
func RequiredPrivileges() []string {
	return []string{"System.Anonymous", "System.Read", "System.View"}
}

// Validate checks, read-only, what the CCM needs of this vCenter, each step
// under ctx: the TCP connection, the TLS verification the config asks for,
// the login with the backend's own credentials, the datacenters, the tag
// categories, the privileges, the VMs visible and the round-trip latency. A
// failed step skips those that need it. Nothing is written to vCenter but
// the session itself (and a container view, destroyed after counting).
func (b *Backend) Validate(ctx context.Context, req ValidateRequest) []Check {
	if len(req.Privileges) == 0 {
		req.Privileges = RequiredPrivileges()
	}
	cfg := b.sessions.opts.Config
	addr := net.JoinHostPort(cfg.Server, strconv.Itoa(cfg.Port))
	var r checkRecord
	if r.run(CheckTCP, func() (Verdict, string) { return checkTCP(ctx, addr) }) != Passed {
		return r.skip(CheckTLS, CheckLogin, CheckDatacenters, CheckTags, CheckPrivileges, CheckVMs, CheckLatency)
	}
	vc, ok := b.checkTLSAndLogin(ctx, &r, addr)
	if !ok {
		return r.skip(CheckDatacenters, CheckTags, CheckPrivileges, CheckVMs, CheckLatency)
	}
	var dcs []mo.Datacenter
	r.run(CheckDatacenters, func() (v Verdict, detail string) {
		dcs, v, detail = checkDatacenters(ctx, vc.Client, cfg.DatacenterSpecs())
		return v, detail
	})
	r.run(CheckTags, func() (Verdict, string) {
		if len(req.Categories) == 0 {
			return Skipped, "labels.zone and labels.region not configured: no zones or regions"
		}
		return b.checkCategories(ctx, req.Categories)
	})
	r.run(CheckPrivileges, func() (Verdict, string) {
		if len(dcs) == 0 {
			return Skipped, "no datacenter to check them on"
		}
		return checkPrivileges(ctx, vc.Client, vc.user, dcs, req.Privileges)
	})
	r.run(CheckVMs, func() (Verdict, string) { return checkVMs(ctx, vc.Client, dcs) })
	r.run(CheckLatency, func() (Verdict, string) { return checkLatency(ctx, vc.Client, b.sessions.requestTimeout()) })
	return r.checks
}

// checkRecord collects Validate's checks in order.
type checkRecord struct{ checks []Check }

// run times fn and records its verdict under name.
func (r *checkRecord) run(name string, fn func() (Verdict, string)) Verdict {
	start := time.Now()
	v, detail := fn()
	r.checks = append(r.checks, Check{Name: name, Verdict: v, Detail: detail, Took: time.Since(start)})
	return v
}

// skip records names as not run and returns every check.
func (r *checkRecord) skip(names ...string) []Check {
	for _, n := range names {
		r.checks = append(r.checks, Check{Name: n, Verdict: Skipped, Detail: "not run: an earlier check failed"})
	}
	return r.checks
}

func checkTCP(ctx context.Context, addr string) (Verdict, string) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return Failed, fmt.Sprintf("%s: %v", addr, err)
	}
	_ = conn.Close()
	return Passed, addr + " accepts connections"
}

// loggedIn is a client of the backend's session and the user it is.
type loggedIn struct {
	*vim25.Client
	user string
}

// checkTLSAndLogin records the TLS and login checks. Both happen together,
// in the session's own code: its verification (thumbprint, caFile, system
// roots) and its credentials are what is tested. ok is false when either
// failed.
func (b *Backend) checkTLSAndLogin(ctx context.Context, r *checkRecord, addr string) (vc loggedIn, ok bool) {
	cfg := b.sessions.opts.Config
	start := time.Now()
	client, loginErr := b.sessions.client(ctx)
	took := time.Since(start)
	var ce *connError
	if loginErr != nil && (isTLSFailure(loginErr) || errors.As(loginErr, &ce) && strings.HasPrefix(ce.what, "TLS")) {
		r.checks = append(r.checks, Check{Name: CheckTLS, Verdict: Failed, Detail: fmt.Sprintf("%v; %s", loginErr, presented(ctx, addr, cfg.Server)), Took: took})
		r.skip(CheckLogin)
		return loggedIn{}, false
	}
	sortFailure(&loginErr)
	if loginErr != nil && errors.Is(loginErr, backends.ErrUnreachable) {
		detail := fmt.Sprintf("%s accepts connections but its TLS handshake or login got no answer: %v", addr, loginErr)
		r.checks = append(r.checks, Check{Name: CheckTLS, Verdict: Failed, Detail: detail, Took: took})
		r.skip(CheckLogin)
		return loggedIn{}, false
	}
	tlsVerdict, expiry := certificateExpiry(b.sessions.peerCert.get())
	r.checks = append(r.checks, Check{Name: CheckTLS, Verdict: tlsVerdict, Detail: verification(cfg.Thumbprints, cfg.CAFile, cfg.InsecureFlag) + expiry})
	if loginErr != nil {
		r.checks = append(r.checks, Check{Name: CheckLogin, Verdict: Failed, Detail: loginErr.Error(), Took: took})
		return loggedIn{}, false
	}
	vc = loggedIn{Client: client}
	r.run(CheckLogin, func() (Verdict, string) {
		us, err := session.NewManager(client).UserSession(ctx)
		if err != nil || us == nil {
			return Failed, fmt.Sprintf("logged in, but the session cannot be read: %v", err)
		}
		vc.user = us.UserName
		var from string // the credentials' source
		if s := b.sessions.session(time.Now()); s != nil {
			from = s.Credentials
		}
		if b.certificateLogin() {
			// The PEM is no name to print; vCenter's name for the
			// solution user is what its privileges are read for.
			return Passed, fmt.Sprintf("with a %s (credentials from %s), vCenter's user %s", credentials.CertificateLogin, from, vc.user)
		}
		return Passed, fmt.Sprintf("as %s (credentials from %s)", vc.user, from)
	})
	r.checks[len(r.checks)-1].Took += took // the login itself
	return vc, vc.user != ""
}

// checkDatacenters finds the configured datacenters (all, when none is
// configured), by name, managed object ID or inventory path, suggesting
// for each one missing what it may have meant. A name that several
// datacenters carry fails too: CPI's finder refuses it, and its Nodes'
// labels could not tell those datacenters apart.
func checkDatacenters(ctx context.Context, vc *vim25.Client, want []config.DatacenterSpec) ([]mo.Datacenter, Verdict, string) {
	all, err := readDatacenters(ctx, vc)
	if err != nil {
		return nil, Failed, fmt.Sprintf("listing datacenters: %v", err)
	}
	asMO := func(dc config.Datacenter) mo.Datacenter {
		var m mo.Datacenter
		m.Self = types.ManagedObjectReference{Type: "Datacenter", Value: dc.ID}
		m.Name = dc.Name
		return m
	}
	if len(want) == 0 {
		var found []mo.Datacenter
		var shown []string
		for _, dc := range all {
			found = append(found, asMO(dc))
			shown = append(shown, describeDC(dc))
		}
		return found, Passed, fmt.Sprintf("none configured: all %d searched (%s)", len(all), strings.Join(shown, ", "))
	}
	var found []mo.Datacenter
	var problems, ok []string
	for _, spec := range want {
		var matched []config.Datacenter
		for _, dc := range all {
			if spec.Matches(dc) {
				matched = append(matched, dc)
			}
		}
		switch len(matched) {
		case 0:
			problems = append(problems, fmt.Sprintf("%q not found%s", spec.Raw, suggestDatacenter(spec, all)))
			continue
		case 1:
			ok = append(ok, fmt.Sprintf("%s found (%s)", spec.Raw, describeDC(matched[0])))
		default:
			var paths []string
			for _, dc := range matched {
				paths = append(paths, strconv.Quote(dc.Path))
			}
			problems = append(problems, fmt.Sprintf("%q names %d datacenters (%s): CPI refuses such a name and Node labels cannot tell them apart; write the path of the one meant",
				spec.Raw, len(matched), strings.Join(paths, ", ")))
		}
		for _, dc := range matched {
			if m := asMO(dc); !slices.ContainsFunc(found, func(f mo.Datacenter) bool { return f.Self == m.Self }) {
				found = append(found, m)
			}
		}
	}
	if len(problems) > 0 {
		return found, Failed, strings.Join(problems, "; ")
	}
	return found, Passed, strings.Join(ok, "; ")
}

// describeDC shows a datacenter as each form names it.
func describeDC(dc config.Datacenter) string {
	if dc.Path == "/"+dc.Name {
		return fmt.Sprintf("%s, %s", dc.Name, dc.ID)
	}
	return fmt.Sprintf("%s, %s, %s", dc.Name, dc.ID, dc.Path)
}

// suggestDatacenter says what a spec that matched nothing may have meant:
// an ID that is some datacenter's name means that datacenter (by path);
// a path whose last element is a datacenter's name, that one's path;
// otherwise the nearest names, IDs or paths, in the spec's own form.
func suggestDatacenter(spec config.DatacenterSpec, all []config.Datacenter) string {
	var candidates []string
	for _, dc := range all {
		switch spec.Kind {
		case config.DatacenterByID:
			if dc.Name == spec.Value {
				return fmt.Sprintf(" as an ID, but a datacenter is named so: write %q", dc.Path)
			}
			candidates = append(candidates, dc.ID)
		case config.DatacenterByPath:
			if name, _ := spec.Name(); dc.Name == name {
				return fmt.Sprintf("; datacenter %s is at %q", dc.Name, dc.Path)
			}
			candidates = append(candidates, dc.Path)
		default:
			candidates = append(candidates, dc.Name)
		}
	}
	slices.Sort(candidates)
	return suggest(spec.Value, slices.Compact(candidates))
}

func checkVMs(ctx context.Context, vc *vim25.Client, dcs []mo.Datacenter) (Verdict, string) {
	n, err := countVMs(ctx, vc, dcs)
	if err != nil {
		return Failed, fmt.Sprintf("listing VMs: %v", err)
	}
	if n == 0 {
		return Failed, "no VM visible to this login in the datacenters searched"
	}
	return Passed, fmt.Sprintf("%d visible in the datacenters searched", n)
}

// checkLatency fails when the median of three round trips exceeds half the
// request timeout: lookups would then time out under any load.
func checkLatency(ctx context.Context, vc *vim25.Client, limit time.Duration) (Verdict, string) {
	var rtts []time.Duration
	for range 3 {
		t0 := time.Now()
		if _, err := methods.GetCurrentTime(ctx, vc); err != nil {
			return Failed, fmt.Sprintf("GetCurrentTime: %v", err)
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

// certificateExpiry is the TLS check's verdict by the expiry of the
// certificate the session's handshake accepted (Warned within
// CertificateWarning of it, or past it: a pin accepts an expired one),
// and "; expires …" for its detail.
func certificateExpiry(c backends.Certificate, ok bool) (Verdict, string) {
	if !ok {
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
// without verifying it, so the user can pin its thumbprint or fix the CA.
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
	leaf := certs[0]
	s1, s256 := sha1.Sum(leaf.Raw), sha256.Sum256(leaf.Raw)
	var chain []string
	for _, c := range certs {
		chain = append(chain, c.Subject.String())
	}
	return fmt.Sprintf("the server presents SHA-1 thumbprint %s, SHA-256 %s; chain: %s (issuer %s)",
		colonHex(s1[:]), colonHex(s256[:]), strings.Join(chain, " <- "), certs[len(certs)-1].Issuer)
}

func colonHex(b []byte) string {
	parts := make([]string, len(b))
	for i, x := range b {
		parts[i] = fmt.Sprintf("%02X", x)
	}
	return strings.Join(parts, ":")
}

// countVMs counts the VMs in dcs.
func countVMs(ctx context.Context, vc *vim25.Client, dcs []mo.Datacenter) (int, error) {
	n := 0
	for _, dc := range dcs {
		var vms []mo.VirtualMachine
		if err := viewRetrieve(ctx, vc, dc.Reference(), "VirtualMachine", []string{"name"}, &vms); err != nil {
			return n, err
		}
		n += len(vms)
	}
	return n, nil
}

// checkPrivileges names the privileges of want that user lacks on a
// datacenter of dcs, as vCenter's AuthorizationManager reports them.
func checkPrivileges(ctx context.Context, vc *vim25.Client, user string, dcs []mo.Datacenter, want []string) (Verdict, string) {
	refs := make([]types.ManagedObjectReference, len(dcs))
	names := map[types.ManagedObjectReference]string{}
	for i, dc := range dcs {
		refs[i] = dc.Reference()
		names[refs[i]] = dc.Name
	}
	res, err := object.NewAuthorizationManager(vc).FetchUserPrivilegeOnEntities(ctx, refs, user)
	if err != nil {
		return Failed, fmt.Sprintf("reading %s's privileges: %v", user, err)
	}
	return privilegeVerdict(user, want, res, names)
}

// privilegeVerdict turns vCenter's answer into the missing privileges per
// datacenter.
func privilegeVerdict(user string, want []string, res []types.UserPrivilegeResult, names map[types.ManagedObjectReference]string) (Verdict, string) {
	var problems []string
	for _, m := range missingPrivileges(want, res, names) {
		problems = append(problems, fmt.Sprintf("%s lacks %s on %s", user, strings.Join(m.Privileges, ", "), m.Entity))
	}
	if len(problems) > 0 {
		return Failed, strings.Join(problems, "; ")
	}
	return Passed, fmt.Sprintf("%s holds %s on %d datacenter(s)", user, strings.Join(want, ", "), len(names))
}

// missingPrivileges are the privileges of want that vCenter's answer res
// does not grant, per datacenter of names (sorted by name): one reading
// for Validate and for the periodic check (MissingPrivileges).
func missingPrivileges(want []string, res []types.UserPrivilegeResult, names map[types.ManagedObjectReference]string) []backends.MissingOn {
	held := map[types.ManagedObjectReference][]string{}
	for _, r := range res {
		held[r.Entity] = r.Privileges
	}
	var out []backends.MissingOn
	for _, ref := range slices.SortedFunc(maps.Keys(names), func(a, b types.ManagedObjectReference) int { return cmp.Compare(names[a], names[b]) }) {
		var missing []string
		for _, p := range want {
			if !slices.Contains(held[ref], p) {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			out = append(out, backends.MissingOn{Entity: "datacenter " + names[ref], Privileges: missing})
		}
	}
	return out
}

// MissingPrivileges implements backends.Backend: Validate's privileges
// (RequiredPrivileges) on Validate's datacenters (the configured ones,
// every one when none is), read with the current session's client below
// re-login and keep-alive. A session vCenter no longer knows answers
// NotAuthenticated, and that ends here as ErrNoSession: a login is for
// lookups to start, never for a periodic check (each refused one counts
// against vSphere SSO's lockout). Two requests (the session's user, its
// privileges), and two more for the datacenters when the inventory is not
// in service to list them.
func (b *Backend) MissingPrivileges(ctx context.Context) (_ backends.PrivilegeReport, err error) {
	const op = "vsphere.MissingPrivileges"
	defer sortFailure(&err)
	if err := b.sessions.open(); err != nil {
		return backends.PrivilegeReport{}, fmt.Errorf("%s: %w", op, err)
	}
	b.sessions.mu.Lock()
	c := b.sessions.cur
	b.sessions.mu.Unlock()
	if c == nil {
		return backends.PrivilegeReport{}, fmt.Errorf("%s: %w", op, backends.ErrNoSession)
	}
	vc := *c.vim
	vc.RoundTripper = c.raw
	lost := func(err error) error {
		if fault.Is(err, &types.NotAuthenticated{}) {
			return fmt.Errorf("%s: session lost (%v): %w", op, err, backends.ErrNoSession) //nolint:errorlint // the fault is shown, not wrapped: this error is ErrNoSession, not an auth failure to sort
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	specs := b.sessions.opts.Config.DatacenterSpecs()
	var all []config.Datacenter
	ok := false
	if b.inv != nil {
		specs = b.inv.datacenterSpecs()
		all, ok = b.inv.datacenters()
	}
	if !ok {
		if err := b.budget.take(ctx, 2); err != nil {
			return backends.PrivilegeReport{}, fmt.Errorf("%s: %w", op, err)
		}
		if all, err = readDatacenters(ctx, &vc); err != nil {
			return backends.PrivilegeReport{}, lost(err)
		}
	}
	names := map[types.ManagedObjectReference]string{}
	for _, dc := range all {
		if len(specs) == 0 || slices.ContainsFunc(specs, func(s config.DatacenterSpec) bool { return s.Matches(dc) }) {
			names[types.ManagedObjectReference{Type: "Datacenter", Value: dc.ID}] = dc.Name
		}
	}
	if err := b.budget.take(ctx, 2); err != nil {
		return backends.PrivilegeReport{}, fmt.Errorf("%s: %w", op, err)
	}
	us, err := session.NewManager(&vc).UserSession(ctx)
	if err != nil {
		return backends.PrivilegeReport{}, lost(err)
	}
	if us == nil {
		return backends.PrivilegeReport{}, fmt.Errorf("%s: %w", op, backends.ErrNoSession)
	}
	report := backends.PrivilegeReport{User: us.UserName}
	if len(names) == 0 {
		return report, nil // no datacenter to hold them on: the datacenter check's finding
	}
	refs := slices.Collect(maps.Keys(names))
	res, err := object.NewAuthorizationManager(&vc).FetchUserPrivilegeOnEntities(ctx, refs, us.UserName)
	if err != nil {
		return backends.PrivilegeReport{}, lost(err)
	}
	report.Missing = missingPrivileges(RequiredPrivileges(), res, names)
	return report, nil
}

// checkCategories reports, per category, whether it exists, its tags and
// how many objects carry one.
func (b *Backend) checkCategories(ctx context.Context, categories []string) (Verdict, string) {
	rc, err := b.sessions.restClient(ctx)
	if err != nil {
		return Failed, fmt.Sprintf("REST login: %v", err)
	}
	m := tags.NewManager(rc)
	all, err := m.GetCategories(ctx)
	if err != nil {
		return Failed, fmt.Sprintf("listing tag categories: %v", err)
	}
	var names []string
	byName := map[string]tags.Category{}
	for _, c := range all {
		names = append(names, c.Name)
		byName[c.Name] = c
	}
	slices.Sort(names)
	verdict := Passed
	var details []string
	for _, want := range categories {
		c, ok := byName[want]
		if !ok {
			verdict = Failed
			details = append(details, fmt.Sprintf("category %q not found%s", want, suggest(want, names)))
			continue
		}
		ts, err := m.GetTagsForCategory(ctx, c.ID)
		if err != nil {
			verdict = Failed
			details = append(details, fmt.Sprintf("category %q: listing its tags: %v", want, err))
			continue
		}
		ids := make([]string, len(ts))
		for i, t := range ts {
			ids[i] = t.ID
		}
		attached := 0
		if len(ids) > 0 {
			objs, err := m.GetAttachedObjectsOnTags(ctx, ids)
			if err != nil {
				verdict = Failed
				details = append(details, fmt.Sprintf("category %q: listing attachments: %v", want, err))
				continue
			}
			for _, o := range objs {
				attached += len(o.ObjectIDs)
			}
		}
		if attached == 0 {
			verdict = Failed
			details = append(details, fmt.Sprintf("category %q: %d tag(s), attached to nothing: no Node would get this label", want, len(ts)))
			continue
		}
		details = append(details, fmt.Sprintf("%q: %d tag(s) on %d object(s)", want, len(ts), attached))
	}
	return verdict, strings.Join(details, "; ")
}

// suggest names up to three of names nearest to want (by edit distance,
// case-insensitively), as ", nearest: a, b".
func suggest(want string, names []string) string {
	type scored struct {
		name string
		d    int
	}
	var s []scored
	for _, n := range names {
		d := editDistance(strings.ToLower(want), strings.ToLower(n))
		if d <= max(3, len(want)/2) {
			s = append(s, scored{n, d})
		}
	}
	if len(s) == 0 {
		if len(names) == 0 {
			return " (there are none)"
		}
		return fmt.Sprintf(" (there are: %s)", strings.Join(names[:min(len(names), 5)], ", "))
	}
	slices.SortStableFunc(s, func(a, b scored) int { return cmp.Compare(a.d, b.d) })
	var out []string
	for _, x := range s[:min(len(s), 3)] {
		out = append(out, strconv.Quote(x.name))
	}
	return "; nearest: " + strings.Join(out, ", ")
}

// editDistance is Levenshtein's, over bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
