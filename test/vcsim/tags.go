package vcsim

// Tags beyond zone and region, for the tests of labels from any tag
// category (nodes.tagLabels).

import (
	"context"
	"fmt"
	"net/url"

	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/types"
)

// TagHost attaches the tag name of category (both made when absent; the
// category of single cardinality) to the ESXi host named host.
func (vc *VCenter) TagHost(ctx context.Context, host, category, name string) error {
	ref, ok := vc.host(host)
	if !ok {
		return fmt.Errorf("vcsim %s: no host %q", vc.Name, host)
	}
	return vc.attach(ctx, ref, category, name)
}

// TagVM attaches the tag name of category to vm itself.
func (vc *VCenter) TagVM(ctx context.Context, vm *VM, category, name string) error {
	return vc.attach(ctx, vc.Object(vm).Reference(), category, name)
}

func (vc *VCenter) attach(ctx context.Context, obj types.ManagedObjectReference, category, name string) error {
	c, err := vc.Client(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = c.Logout(context.WithoutCancel(ctx)) }()
	rc := rest.NewClient(c.Client)
	if err := rc.Login(ctx, url.UserPassword(vc.User, vc.currentPassword())); err != nil {
		return fmt.Errorf("vcsim %s: rest login: %w", vc.Name, err)
	}
	defer func() { _ = rc.Logout(context.WithoutCancel(ctx)) }()
	tm := tags.NewManager(rc)
	cat, err := tm.GetCategory(ctx, category)
	if err != nil {
		id, err := tm.CreateCategory(ctx, &tags.Category{Name: category, Cardinality: "SINGLE"})
		if err != nil {
			return fmt.Errorf("vcsim %s: category %q: %w", vc.Name, category, err)
		}
		cat = &tags.Category{ID: id, Name: category}
	}
	tag, err := tm.GetTagForCategory(ctx, name, cat.ID)
	if err != nil {
		id, err := tm.CreateTag(ctx, &tags.Tag{Name: name, CategoryID: cat.ID})
		if err != nil {
			return fmt.Errorf("vcsim %s: tag %q: %w", vc.Name, name, err)
		}
		tag = &tags.Tag{ID: id}
	}
	return tm.AttachTag(ctx, tag.ID, obj)
}
