package cloud

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// Event reasons this provider records on Nodes.
const (
	ReasonZoneTagMissing = "ZoneTagMissing"
	ReasonDuplicateUUID  = "DuplicateVMUUID"
	ReasonLookupFailed   = "VMLookupFailed"
)

// errNoIdentity refuses to judge existence by VM name alone: a Node name
// that differs from its VM's name must never get the Node deleted.
var errNoIdentity = errors.New("node has neither spec.providerID nor status.nodeInfo.systemUUID; existence is not judged by name")

// locate finds node's VM: by providerID when set, else by the kubelet's
// system UUID, else by VM name. byName tells the caller the weakest key was used.
func (c *Cloud) locate(ctx context.Context, node *v1.Node) (res *discovery.Result, byName bool, err error) {
	switch {
	case node.Spec.ProviderID != "":
		res, err = c.discovery.FindByProviderID(ctx, node.Spec.ProviderID)
	case node.Status.NodeInfo.SystemUUID != "":
		res, err = c.discovery.FindByUUID(ctx, node.Status.NodeInfo.SystemUUID)
	default:
		res, err = c.discovery.FindByName(ctx, node.Name)
		byName = true
	}
	if err != nil {
		c.recordLookupError(node, err)
	}
	return res, byName, err
}

func (c *Cloud) recordLookupError(node *v1.Node, err error) {
	if c.recorder == nil {
		return
	}
	var dup *discovery.DuplicateError
	if errors.As(err, &dup) {
		c.recorder.Event(node, v1.EventTypeWarning, ReasonDuplicateUUID, err.Error())
		return
	}
	// Vcenters that could not answer, a VM outside the configured
	// datacenters or last seen in a removed vCenter: the Node is kept and
	// the Event says why.
	c.recorder.Event(node, v1.EventTypeWarning, ReasonLookupFailed, err.Error())
}

// InstanceExists implements cloudprovider.InstancesV2. It answers false only
// when every vCenter that could hold the VM answered that it does not.
func (c *Cloud) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	const op = "cloud.InstanceExists"
	res, byName, err := c.locate(ctx, node)
	switch {
	case err != nil:
		return false, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
	case res == nil && byName:
		return false, fmt.Errorf("%s: node %s: %w", op, node.Name, errNoIdentity)
	case res == nil:
		if err := c.leftConfig(node); err != nil {
			return false, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
		}
		if err := c.unreadableNamesake(ctx, node); err != nil {
			return false, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
		}
		klog.FromContext(ctx).Info("VM confirmed absent in every vCenter", "node", node.Name)
		return false, nil
	}
	return true, nil
}

// unreadableNamesake guards absence by UUID against a VM that exists but
// whose UUID vCenter cannot read (inaccessible or orphaned: no config): if
// a VM named like the Node is in that state, absence is not confirmed.
func (c *Cloud) unreadableNamesake(ctx context.Context, node *v1.Node) error {
	// Asked of vCenter itself: an inventory a moment behind could still
	// show the VM readable.
	res, err := c.discovery.FindByNameUncached(ctx, node.Name)
	var dup *discovery.DuplicateError
	switch {
	case errors.As(err, &dup):
		for _, m := range dup.Matches {
			if m.VM.UUID == "" {
				return fmt.Errorf("not found by UUID, and %s cannot be read (state %q); not deleting", m, m.VM.ConnectionState)
			}
		}
		return nil
	case err != nil:
		return fmt.Errorf("not found by UUID; checking for an unreadable VM of the same name failed: %w", err)
	case res != nil && res.VM.UUID == "":
		return fmt.Errorf("not found by UUID, and %s cannot be read (state %q); not deleting", res, res.VM.ConnectionState)
	}
	return nil
}

// Labels this provider adds to a Node at initialization, so that where its
// VM lived outlasts a restart: a VM whose vCenter or datacenter has since
// left the config is not reported deleted.
const (
	LabelVCenter    = "vsphere-federated-ccm.io/vcenter"
	LabelDatacenter = "vsphere-federated-ccm.io/datacenter"
)

// leftConfig is an error when node's labels place its VM in a vCenter or
// datacenter no longer configured.
func (c *Cloud) leftConfig(node *v1.Node) error {
	vcName, ok := node.Labels[LabelVCenter]
	if !ok {
		return nil
	}
	dc := node.Labels[LabelDatacenter]
	for _, vc := range c.cfg.Load().VCenters {
		if vc.Name != vcName {
			continue
		}
		if len(vc.Datacenters) > 0 && dc != "" && !slices.Contains(vc.Datacenters, dc) {
			return fmt.Errorf("its VM was in datacenter %s of vcenter %s, which is no longer configured; not deleting", dc, vcName)
		}
		return nil
	}
	return fmt.Errorf("its VM was in vcenter %s, which is no longer configured; not deleting", vcName)
}

// locationLabels are LabelVCenter and LabelDatacenter for res, when their
// values are valid label values.
func locationLabels(res *discovery.Result) map[string]string {
	out := map[string]string{}
	for k, v := range map[string]string{LabelVCenter: res.VCenter, LabelDatacenter: res.VM.Ref.Datacenter} {
		if v != "" && len(validation.IsValidLabelValue(v)) == 0 {
			out[k] = v
		}
	}
	return out
}

// InstanceShutdown implements cloudprovider.InstancesV2: true only for a VM
// found powered off.
func (c *Cloud) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	const op = "cloud.InstanceShutdown"
	res, _, err := c.locate(ctx, node)
	if err != nil {
		return false, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
	}
	return res != nil && res.VM.PowerState == backends.PoweredOff, nil
}

// InstanceMetadata implements cloudprovider.InstancesV2.
func (c *Cloud) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	const op = "cloud.InstanceMetadata"
	cfg := c.cfg.Load() // one config for the whole answer, even if a reload lands meanwhile
	res, _, err := c.locate(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
	}
	if res == nil {
		return nil, fmt.Errorf("%s: node %s: %w", op, node.Name, cloudprovider.InstanceNotFound)
	}
	vm := &res.VM
	if vm.UUID == "" {
		return nil, fmt.Errorf("%s: node %s: %s has no BIOS UUID (connection state %q)", op, node.Name, res, vm.ConnectionState)
	}
	families := []string{"ipv4"}
	for _, vc := range cfg.VCenters {
		if vc.Name == res.VCenter {
			families = vc.IPFamily
		}
	}
	addrs, err := NodeAddresses(vm, families, cfg.Nodes)
	if err != nil {
		return nil, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
	}
	meta := &cloudprovider.InstanceMetadata{
		ProviderID:       discovery.ProviderID(vm.UUID),
		InstanceType:     InstanceType(vm),
		NodeAddresses:    addrs,
		AdditionalLabels: locationLabels(res),
	}
	meta.Zone, meta.Region, err = c.topology(ctx, node, res, cfg.Labels)
	if err != nil {
		return nil, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
	}
	return meta, nil
}

// topology reads zone and region from the tag categories named in labels.
// With no categories configured both are empty; a configured category
// without a tag on the VM's chain is an error, so the Node stays tainted
// rather than join without its zone.
func (c *Cloud) topology(ctx context.Context, node *v1.Node, res *discovery.Result, labels config.Labels) (zone, region string, err error) {
	var cats []string
	for _, cat := range []string{labels.Zone, labels.Region} {
		if cat != "" {
			cats = append(cats, cat)
		}
	}
	if len(cats) == 0 {
		return "", "", nil
	}
	tags, err := c.discovery.Tags(ctx, res, cats)
	if err != nil {
		return "", "", err
	}
	var missing []string
	if labels.Zone != "" {
		if zone = tags[labels.Zone]; zone == "" {
			missing = append(missing, fmt.Sprintf("zone (category %q)", labels.Zone))
		}
	}
	if labels.Region != "" {
		if region = tags[labels.Region]; region == "" {
			missing = append(missing, fmt.Sprintf("region (category %q)", labels.Region))
		}
	}
	if len(missing) > 0 {
		err := fmt.Errorf("%s: no tag for %v on its host, cluster, datacenter or folders", res, missing)
		if c.recorder != nil {
			c.recorder.Event(node, v1.EventTypeWarning, ReasonZoneTagMissing, err.Error())
		}
		return "", "", err
	}
	return zone, region, nil
}
