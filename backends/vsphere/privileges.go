package vsphere

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

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
		specs = b.inv.datacenterSpecs()
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
			names[types.ManagedObjectReference{Type: "Datacenter", Value: dc.ID}] = dc.Name
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
