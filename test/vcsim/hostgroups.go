package vcsim

// Stretched clusters: one compute cluster whose hosts are split into a
// DRS host group per site (vSAN stretched, metro storage), for the tests
// of zones from host groups.

import (
	"context"
	"fmt"
	"slices"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

func (vc *VCenter) cluster(name string) (*simulator.ClusterComputeResource, bool) {
	for _, e := range vc.Model.Map().All("ClusterComputeResource") {
		if c, ok := e.(*simulator.ClusterComputeResource); ok && c.Name == name {
			return c, true
		}
	}
	return nil, false
}

// AddClusterHost adds an ESXi host named host to the cluster named
// cluster ("DC0_C0") through the API (AddHost_Task), made like the
// cluster's first host (its datastores and networks), so that VMs can be
// vMotioned to it (Relocate).
func (vc *VCenter) AddClusterHost(ctx context.Context, cluster, host string) error {
	c, ok := vc.cluster(cluster)
	if !ok {
		return fmt.Errorf("vcsim: no cluster %q in %s", cluster, vc.Name)
	}
	var like string
	vc.Model.Map().WithLock(vc.Model.Service.Context, c, func() {
		if len(c.Host) > 0 {
			like = vc.Model.Map().Get(c.Host[0]).(*simulator.HostSystem).Name
		}
	})
	client, err := vc.Client(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = client.Logout(context.WithoutCancel(ctx)) }()
	// The simulator makes a host added with the user name of one of the
	// cluster's hosts like that one.
	task, err := object.NewClusterComputeResource(client.Client, c.Self).AddHost(ctx,
		types.HostConnectSpec{HostName: host, UserName: like, Force: true}, true, nil, nil)
	if err != nil {
		return fmt.Errorf("vcsim: add host %s to %s: %w", host, cluster, err)
	}
	if err := task.Wait(ctx); err != nil {
		return fmt.Errorf("vcsim: add host %s to %s: %w", host, cluster, err)
	}
	return nil
}

// SetHostGroup makes the DRS host group named group of the cluster named
// cluster hold exactly the hosts named hosts (created when absent), as an
// administrator edits it, through the API: ReconfigureComputeResource_Task
// with a ClusterConfigSpecEx's groupSpec (add or edit). A host moved
// from one site's group to another's takes two calls, as in vSphere.
//
// The simulator (govmomi v0.56.0) applies the spec to the cluster but
// tells no property collector; vCenter does. The change is then published
// as vCenter publishes it, the cluster's whole configurationEx, through the
// simulator's registry: a copy, so that a later reconfiguration does not
// write into the value a watch may still be encoding.
func (vc *VCenter) SetHostGroup(ctx context.Context, cluster, group string, hosts ...string) error {
	c, ok := vc.cluster(cluster)
	if !ok {
		return fmt.Errorf("vcsim: no cluster %q in %s", cluster, vc.Name)
	}
	refs := make([]types.ManagedObjectReference, 0, len(hosts))
	for _, h := range hosts {
		ref, ok := vc.host(h)
		if !ok {
			return fmt.Errorf("vcsim: no host %q in %s", h, vc.Name)
		}
		refs = append(refs, ref)
	}
	op := types.ArrayUpdateOperationAdd
	if slices.Contains(vc.HostGroups(cluster), group) {
		op = types.ArrayUpdateOperationEdit
	}
	client, err := vc.Client(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = client.Logout(context.WithoutCancel(ctx)) }()
	spec := &types.ClusterConfigSpecEx{GroupSpec: []types.ClusterGroupSpec{{
		ArrayUpdateSpec: types.ArrayUpdateSpec{Operation: op},
		Info:            &types.ClusterHostGroup{ClusterGroupInfo: types.ClusterGroupInfo{Name: group}, Host: refs},
	}}}
	task, err := object.NewClusterComputeResource(client.Client, c.Self).Reconfigure(ctx, spec, true)
	if err != nil {
		return fmt.Errorf("vcsim: host group %s of %s: %w", group, cluster, err)
	}
	if err := task.Wait(ctx); err != nil {
		return fmt.Errorf("vcsim: host group %s of %s: %w", group, cluster, err)
	}
	sim := vc.Model.Service.Context
	vc.Model.Map().WithLock(sim, c, func() {
		cfg := c.ConfigurationEx.(*types.ClusterConfigInfoEx)
		sent, kept := copyConfig(cfg), copyConfig(cfg)
		sim.Update(c, []types.PropertyChange{{Name: "configurationEx", Val: sent}})
		c.ConfigurationEx = kept
	})
	return nil
}

// copyConfig is cfg with its own groups: what the simulator's next
// reconfiguration writes into is not what a watch was sent.
func copyConfig(cfg *types.ClusterConfigInfoEx) *types.ClusterConfigInfoEx {
	cp := *cfg
	cp.Group = make([]types.BaseClusterGroupInfo, len(cfg.Group))
	for i, g := range cfg.Group {
		switch g := g.(type) {
		case *types.ClusterHostGroup:
			h := *g
			h.Host = slices.Clone(g.Host)
			cp.Group[i] = &h
		case *types.ClusterVmGroup:
			v := *g
			v.Vm = slices.Clone(g.Vm)
			cp.Group[i] = &v
		default:
			cp.Group[i] = g
		}
	}
	return &cp
}

// HostGroups lists the names of the host groups of the cluster named
// cluster.
func (vc *VCenter) HostGroups(cluster string) []string {
	c, ok := vc.cluster(cluster)
	if !ok {
		return nil
	}
	var out []string
	vc.Model.Map().WithLock(vc.Model.Service.Context, c, func() {
		for _, g := range c.ConfigurationEx.(*types.ClusterConfigInfoEx).Group {
			if hg, ok := g.(*types.ClusterHostGroup); ok {
				out = append(out, hg.Name)
			}
		}
	})
	slices.Sort(out)
	return out
}
