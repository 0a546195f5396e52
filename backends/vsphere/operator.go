package vsphere

// The read-only primitives of the operator tools (the validate command,
// the privileges check): data, never verdicts; the judgement and its wording are the tools'.
// The product's lookups do not use them.

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Login logs in when there is no session, with the session's own TLS
// verification (thumbprints, caFile, system roots) and credentials, as a
// lookup would; with one it sends nothing. Its failure is the session's
// own, sorted but not wrapped: it already says what failed ("login
// rejected: login as …", "TLS handshake: …"), which is what an operator
// reads, and TLSFailure tells a certificate refused from a login refused.
func (b *Backend) Login(ctx context.Context) (err error) {
	defer sortFailure("", &err)
	_, err = b.sessions.current(ctx)
	return err
}

// TLSFailure reports whether err, a Login's, is the TLS handshake or its
// configuration failing (a certificate not trusted, a thumbprint not
// matching, a caFile not read) rather than the login.
func TLSFailure(err error) bool {
	if err == nil {
		return false // govmomi's test of an untrusted certificate panics on nil
	}
	var ce *connError
	return isTLSFailure(err) || errors.As(err, &ce) && strings.HasPrefix(ce.what, "TLS")
}

// SessionUser names the current session's user as vCenter does (for a
// certificate login, the solution user's name: the PEM is no name) and
// whether it logged in with a certificate. One request, logging in first
// when there is no session.
func (b *Backend) SessionUser(ctx context.Context) (user string, certificate bool, err error) {
	defer sortFailure("vsphere.SessionUser", &err)
	vc, err := b.direct(ctx, 1)
	if err != nil {
		return "", false, err
	}
	us, err := session.NewManager(vc).UserSession(ctx)
	if err != nil {
		return "", false, err
	}
	if us == nil {
		return "", false, backends.ErrNoSession
	}
	b.sessions.mu.Lock()
	defer b.sessions.mu.Unlock()
	return us.UserName, b.sessions.cur != nil && b.sessions.cur.certificate, nil
}

// CountVMs counts the VMs of dcs the session's user sees: a login that
// sees none finds no Node's VM. One container view per datacenter.
func (b *Backend) CountVMs(ctx context.Context, dcs []config.Datacenter) (_ int, err error) {
	defer sortFailure("vsphere.CountVMs", &err)
	vc, err := b.direct(ctx, len(dcs))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, dc := range dcs {
		s, err := b.viewRead(ctx, vc, datacenterRef(dc.ID), "VirtualMachine", vmNamesSpec)
		if err != nil {
			return 0, fmt.Errorf("datacenter %s: %w", dc.Name, err)
		}
		n += len(s.vms)
	}
	return n, nil
}

// TagUse is what a tag category holds: its tags, and the objects that
// carry one of them (none: it gives no Node its label).
type TagUse struct{ Tags, Objects int }

// TagCategories names vCenter's tag categories and tells the use of each
// of want that exists, through the REST session (logging it in when there
// is none).
func (b *Backend) TagCategories(ctx context.Context, want []string) (names []string, use map[string]TagUse, err error) {
	defer sortFailure("vsphere.TagCategories", &err)
	if err := b.budget.take(ctx, 1+2*len(want)); err != nil { // the list, then each one's tags and their attachments
		return nil, nil, err
	}
	rc, err := b.sessions.restClient(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("REST login: %w", err)
	}
	m := tags.NewManager(rc)
	all, err := m.GetCategories(ctx)
	if err != nil {
		return nil, nil, err
	}
	use = map[string]TagUse{}
	for _, c := range all {
		names = append(names, c.Name)
		if !slices.Contains(want, c.Name) {
			continue
		}
		ids, err := m.ListTagsForCategory(ctx, c.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("category %q: listing its tags: %w", c.Name, err)
		}
		u := TagUse{Tags: len(ids)}
		if len(ids) > 0 {
			attached, err := m.GetAttachedObjectsOnTags(ctx, ids)
			if err != nil {
				return nil, nil, fmt.Errorf("category %q: listing attachments: %w", c.Name, err)
			}
			for _, o := range attached {
				u.Objects += len(o.ObjectIDs)
			}
		}
		use[c.Name] = u
	}
	return names, use, nil
}

// Thumbprints are cert's SHA-1 and SHA-256 thumbprints as vCenter shows
// them and a config's thumbprint key is matched against (transport.go).
func Thumbprints(cert *x509.Certificate) (sha1, sha256 string) {
	return soap.ThumbprintSHA1(cert), soap.ThumbprintSHA256(cert)
}

// RequiredPrivileges are what the CCM needs on the datacenters: vSphere's
// read-only role. It reads VMs, their hosts and folders, and tags; it
// never changes anything.
func RequiredPrivileges() []string {
	return []string{"System.Anonymous", "System.Read", "System.View"}
}

// missingPrivileges are the privileges of want that vCenter's answer res
// does not grant, per datacenter of names (sorted by name).
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

// MissingPrivileges implements backends.Backend: RequiredPrivileges on the
// configured datacenters (every one when none is), the set and the
// datacenters the validate command checks too, read with the current session's client below
// re-login and keep-alive. A session vCenter no longer knows answers
// NotAuthenticated, and that ends here as ErrNoSession: a login is for
// lookups to start, never for a periodic check (each refused one counts
// against vSphere SSO's lockout). Two requests (the session's user, its
// privileges), and two more for the datacenters when the inventory is not
// in service to list them.
func (b *Backend) MissingPrivileges(ctx context.Context) (_ backends.PrivilegeReport, err error) {
	defer sortFailure("vsphere.MissingPrivileges", &err)
	if err := b.sessions.open(); err != nil {
		return backends.PrivilegeReport{}, err
	}
	b.sessions.mu.Lock()
	c := b.sessions.cur
	b.sessions.mu.Unlock()
	if c == nil {
		return backends.PrivilegeReport{}, backends.ErrNoSession
	}
	vc := *c.vim
	vc.RoundTripper = c.raw
	lost := func(err error) error {
		if fault.Is(err, &types.NotAuthenticated{}) {
			return fmt.Errorf("session lost (%v): %w", err, backends.ErrNoSession) //nolint:errorlint // the fault is shown, not wrapped: this error is ErrNoSession, not an auth failure to sort
		}
		return err
	}
	specs := b.sessions.opts.Config.DatacenterSpecs()
	var all []config.Datacenter
	ok := false
	if b.inv != nil {
		b.inv.mu.RLock()
		specs = slices.Clone(b.inv.specs) // as the latest SetDatacenters made them
		b.inv.mu.RUnlock()
		all, ok = b.inv.datacenters()
	}
	if !ok {
		if err := b.budget.take(ctx, 2); err != nil {
			return backends.PrivilegeReport{}, err
		}
		if all, err = b.readDatacenters(ctx, &vc); err != nil {
			return backends.PrivilegeReport{}, lost(err)
		}
	}
	names := map[types.ManagedObjectReference]string{}
	for _, dc := range all {
		if backends.Searched(specs, dc) {
			names[datacenterRef(dc.ID)] = dc.Name
		}
	}
	if err := b.budget.take(ctx, 2); err != nil {
		return backends.PrivilegeReport{}, err
	}
	us, err := session.NewManager(&vc).UserSession(ctx)
	if err != nil {
		return backends.PrivilegeReport{}, lost(err)
	}
	if us == nil {
		return backends.PrivilegeReport{}, backends.ErrNoSession
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
