// Package instances is cloudprovider.InstancesV2, read-only: what the
// cloud-node and cloud-node-lifecycle controllers ask of a Node's VM
// (InstanceExists, InstanceShutdown, InstanceMetadata), answered through
// the fleet's Discoverer under the config served now, and mapped by
// package metadata. A VM claimed by another Node is no Node's (claims.go).
//
// It is a room of its own because it writes nothing: where a lookup found
// a Node's VM, and why InstanceMetadata failed, go to the Node owner
// (package nodes), which writes; which Nodes are not ours is the owner's
// verdict, asked here. Package cloud builds it (New) and hands it to the
// controllers.
package instances

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/events"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// Event reasons of lookups.
const (
	// ReasonNodeDeletionHeld: its VM is confirmed absent, but the deletion
	// policy (nodeDeletion: a freeze, or minAbsence not yet spanned) keeps
	// the Node for now.
	ReasonNodeDeletionHeld = "NodeDeletionHeld"
)

// errSkipNodeDeletion keeps a Node whose VM is gone while CPI's switch is set.
var errSkipNodeDeletion = errors.New("its VM was not found in any vCenter, and SKIP_NODE_DELETION is set: not deleting")

var _ cloudprovider.InstancesV2 = (*Instances)(nil)

// Instances is cloudprovider.InstancesV2: it asks the fleet's Discoverer,
// under the fleet's current config, and maps the answer. It writes no
// Node: where a lookup found a Node's VM goes to the owner's Located, and
// the nodes owner writes the labels that follow.
type Instances struct {
	// discovery is the fleet's Discoverer; config the config served now.
	discovery *discovery.Discoverer
	config    func() *config.Config
	events    *events.Log
	// nodeLabels are CPI's --node-labels; skipNodeDeletion its
	// SKIP_NODE_DELETION switch (Options).
	nodeLabels       map[string]string
	skipNodeDeletion bool
	// nodes is the Node owner: told where a lookup found a Node's VM
	// (Located); it knows the unmanaged Nodes, keeps why InstanceMetadata
	// failed (nodes' unmanaged.go, reports.go) and counts identity
	// conflicts.
	nodes *nodes.Owner

	// The claims on VMs (claims.go). view is the Node informer, once the
	// nodes owner watches Nodes (Watch); nil without one (diagnose, or no
	// cluster): then no Node is known to hold anything, and no claim is
	// refused. counted are the conflicts the metric counted, once each
	// however often the controller retries; a Node deleted is forgotten.
	view    atomic.Pointer[nodes.Watch]
	mu      sync.Mutex
	counted map[conflictKey]bool
}

// Options are what Instances is built with: what package cloud gives it.
type Options struct {
	// Discovery is the fleet's Discoverer; Config the config it serves
	// now, read once per answer.
	Discovery *discovery.Discoverer
	Config    func() *config.Config
	// Nodes is the Node owner.
	Nodes *nodes.Owner
	// NodeLabels are CPI's --node-labels; SkipNodeDeletion its
	// SKIP_NODE_DELETION switch (cloud.Options).
	NodeLabels       map[string]string
	SkipNodeDeletion bool
}

// New builds the read-only InstancesV2; it starts nothing (Watch gives
// the claims the Node owner's informer).
func New(events *events.Log, o Options) *Instances {
	return &Instances{discovery: o.Discovery, config: o.Config, events: events, nodeLabels: o.NodeLabels,
		skipNodeDeletion: o.SkipNodeDeletion, nodes: o.Nodes, counted: map[conflictKey]bool{}}
}

// CountedConflicts is how many identity conflicts the claims check
// remembers having counted. Exported for package cloud's tests only (that
// deleted Nodes are forgotten); nothing else reads it.
func (in *Instances) CountedConflicts() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.counted)
}

// Locate finds node's VM exactly as InstanceMetadata, InstanceExists and
// InstanceShutdown do (their first step), for `diagnose`.
func (in *Instances) Locate(ctx context.Context, node *v1.Node) (*discovery.Result, error) {
	res, err := in.discovery.Locate(ctx, nodes.NodeKeys(node))
	if err != nil {
		in.recordLookupError(node, err)
	}
	return res, err
}

// recordLookupError records why a lookup of node's VM failed: once per
// cause, however many passes of the controllers meet it (events.Log.RecordCause).
func (in *Instances) recordLookupError(node *v1.Node, err error) {
	// VMLookupFailed but for a duplicate UUID or a deletion held back:
	// vCenters that could not answer, a VM outside the configured
	// datacenters or last seen in a removed vCenter: the Node is kept and
	// the Event says why.
	reason, cause, msg := nodes.ReasonLookupFailed, lookupCause(err), err.Error()
	var held *discovery.DeletionHeldError
	switch {
	case errors.As(err, new(*discovery.DuplicateError)):
		reason, cause = nodes.ReasonDuplicateUUID, msg
	case errors.As(err, &held):
		reason, msg = ReasonNodeDeletionHeld, heldMessage(held)
		cause = msg
	}
	in.events.RecordCause(node, v1.EventTypeWarning, reason, cause, msg)
}

// heldMessage says why a deletion is held back in words that stay the same
// while the cause does: the error's own text says how long ago the VM was
// confirmed absent, which changes at every pass. A grace names when the
// absence began (a new run of absence is a new cause) and the grace.
func heldMessage(e *discovery.DeletionHeldError) string {
	if e.Reason == discovery.HeldFrozen {
		return e.Error() // the freeze and the keys that set it: no time
	}
	vcs := "vcenter " + strings.Join(e.VCenters, ", ")
	if len(e.VCenters) != 1 {
		vcs = "vcenters " + strings.Join(e.VCenters, ", ")
	}
	return fmt.Sprintf("%s: its VM has been confirmed absent since %s; reported absent once absent for %s (nodeDeletion.minAbsence of %s); not deleting yet",
		e.What, e.Since.UTC().Format(time.RFC3339), e.MinAbsence, vcs)
}

// lookupCause is what tells one failed lookup's cause from another: the
// vCenters that answered, what was found, and each failing vCenter with
// the kind of its failure (the errors metric's reason), not the text of
// its error, which may change at each try (a duration, a port). A failure
// of no known kind counts by its text.
func lookupCause(err error) string {
	var le *discovery.LookupError
	if !errors.As(err, &le) {
		return err.Error()
	}
	parts := []string{le.What, fmt.Sprint(le.Answered)}
	if le.Found != nil {
		parts = append(parts, le.Found.String())
	}
	if le.Failed != nil {
		for _, f := range le.Failed.Errors {
			var ve *discovery.VCenterError
			name := ""
			if errors.As(f, &ve) {
				name = ve.VCenter
			}
			kind := ErrorReason(f)
			if kind == "other" {
				kind = f.Error()
			}
			parts = append(parts, name+": "+kind)
		}
	}
	return strings.Join(parts, "\x00")
}

// InstanceExists implements cloudprovider.InstancesV2. It answers false only
// when discovery concludes absence: every vCenter that could hold the VM
// answered that it does not, with every guard applied (discovery.Exists).
func (in *Instances) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	const op = "instances.InstanceExists"
	v := in.nodes.Decide(node)
	if v.Why != "" {
		return true, nil
	}
	res, err := in.discovery.Exists(ctx, nodes.NodeKeys(node))
	if err == nil && res == nil && in.skipNodeDeletion {
		err = errSkipNodeDeletion
	}
	if err != nil {
		in.recordLookupError(node, err)
		return false, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
	}
	if undecided := v.UndecidedError(); res == nil && undecided != nil {
		// Its operator may have opted it out before this version: absence
		// would delete it. Its UnmanagedLabelUndecided Event says so.
		return false, fmt.Errorf("%s: node %s: %w", op, node.Name, undecided)
	}
	return res != nil, nil
}

// InstanceShutdown implements cloudprovider.InstancesV2: true for a VM
// found in any power state but poweredOn (suspended too), as CPI answers.
func (in *Instances) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	const op = "instances.InstanceShutdown"
	if in.nodes.Decide(node).Why != "" {
		return false, nil
	}
	res, err := in.Locate(ctx, node)
	if err != nil {
		return false, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
	}
	return res != nil && res.VM.PowerState != "" && res.VM.PowerState != backends.PoweredOn, nil
}

// InstanceMetadata implements cloudprovider.InstancesV2.
func (in *Instances) InstanceMetadata(ctx context.Context, node *v1.Node) (_ *cloudprovider.InstanceMetadata, err error) {
	const op = "instances.InstanceMetadata"
	if in.nodes.Decide(node).Why != "" {
		return unmanagedMetadata(node), nil
	}
	defer func() { in.nodes.MetadataAnswered(node, err) }()
	// Read before any vCenter is asked: a value no kubelet writes fails
	// here as the library would fail it, with an Event saying so.
	nodeIPs, err := metadata.ProvidedNodeIPs(node)
	if err != nil {
		in.events.RecordCause(node, v1.EventTypeWarning, nodes.ReasonInvalidNodeIP, err.Error(), err.Error())
		return nil, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
	}
	cfg := in.config() // one config for the whole answer, even if a reload lands meanwhile
	res, err := in.Locate(ctx, node)
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
	// The keys that found the VM are the kubelet's word: before its
	// identity goes to a Node, no other Node may hold it. An initialized
	// Node has it already.
	if nodes.Uninitialized(node) {
		if err := in.CheckClaim(ctx, node, res); err != nil {
			return nil, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
		}
	}
	families := []string{"ipv4"}
	for _, vc := range cfg.VCenters {
		if vc.Name == res.VCenter {
			families = vc.IPFamily
		}
	}
	addrs, err := metadata.SelectAddresses(vm, families, cfg.Nodes, nodeIPs)
	if err != nil {
		reason := nodes.ReasonNoNodeAddress
		if errors.As(err, new(*metadata.NodeIPError)) {
			reason = nodes.ReasonNodeIPNotOnVM
		}
		in.events.RecordCause(node, v1.EventTypeWarning, reason, err.Error(), err.Error())
		return nil, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
	}
	location := nodes.LocationLabels(res)
	meta := &cloudprovider.InstanceMetadata{
		ProviderID:       discovery.ProviderID(vm.UUID),
		InstanceType:     metadata.InstanceType(vm),
		NodeAddresses:    addrs,
		AdditionalLabels: map[string]string{},
	}
	maps.Copy(meta.AdditionalLabels, in.nodeLabels)
	maps.Copy(meta.AdditionalLabels, location)
	// The labels below the zone asked for (nodes.placementLabels); the
	// nodes owner keeps them current (drift.go).
	for k, v := range metadata.PlacementLabels(vm, cfg.PlacementLabels) {
		if v != "" {
			meta.AdditionalLabels[k] = v
		}
	}
	meta.Zone, meta.Region, err = in.topology(ctx, node, res, metadata.TopologyFor(cfg, res.VCenter))
	if err != nil {
		return nil, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
	}
	// The labels nodes.tagLabels asks for (by key), but for a category the
	// VM has no tag of; the Node writer keeps them current (drift.go). Each
	// category is walked on its own, as CPI walks zone and region together:
	// the first of the VM's ancestries (its host's, its resource pool's, its
	// own) holding a tag of it, nearest first. Read together with the zone,
	// a category the VM has no tag of would make the walk pass over the
	// ancestry the zone is on. From the tag cache: no request per Node.
	for _, t := range cfg.TagLabels {
		tags, err := in.discovery.Tags(ctx, res, []string{t.Category})
		if err != nil {
			return nil, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
		}
		if v := metadata.LabelValue(tags[t.Category]); v != "" {
			meta.AdditionalLabels[t.Key] = v
		}
	}
	in.nodes.Located(node, location)
	return meta, nil
}

// topology reads zone and region as src says: the zone from the VM's
// host's DRS host groups (src.HostGroups) or its tag, the region from its
// tag. From tags as CPI, only when both categories are configured (else
// both are empty; the config notice says so); with host groups the region
// category is optional. A zone or region not found is an error, so the
// Node stays tainted rather than join without its zone.
func (in *Instances) topology(ctx context.Context, node *v1.Node, res *discovery.Result, src metadata.TopologySource) (zone, region string, err error) {
	if !src.Any() {
		return "", "", nil
	}
	if src.HostGroups != nil {
		// First: with no zone, the region's tags need not be read.
		var herr *metadata.ZoneHostGroupError
		if zone, _, herr = metadata.HostGroupZone(&res.VM, res, src.HostGroups); herr != nil {
			in.events.RecordCause(node, v1.EventTypeWarning, herr.Reason(), herr.Error(), herr.Error())
			return "", "", herr
		}
	}
	var cats []string
	for _, kind := range []string{"zone", "region"} {
		if c := src.Category(kind); c != "" {
			cats = append(cats, c)
		}
	}
	if len(cats) == 0 {
		return zone, "", nil
	}
	tags, err := in.discovery.Tags(ctx, res, cats)
	if err != nil {
		return "", "", err
	}
	var missing []string
	if src.Zone != "" {
		if zone = tags[src.Zone]; zone == "" {
			missing = append(missing, fmt.Sprintf("zone (category %q)", src.Zone))
		}
	}
	if region = tags[src.Region]; region == "" {
		missing = append(missing, fmt.Sprintf("region (category %q)", src.Region))
	}
	if len(missing) > 0 {
		err := &metadata.ZoneTagError{VM: res.String(), Missing: missing}
		in.events.RecordCause(node, v1.EventTypeWarning, nodes.ReasonZoneTagMissing, err.Error(), err.Error())
		return "", "", err
	}
	return zone, region, nil
}

// unmanagedMetadata is InstanceMetadata's answer for an unmanaged Node:
// the Node's own providerID and addresses, nothing of ours (no labels,
// zone, region or instance type). The cloud-node controller then removes
// the uninitialized taint of a Node whose kubelet set a providerID, and
// keeps its addresses (the kubelet's --node-ip is among them, as the
// controller requires). One without a providerID gets nil: the controller
// initializes no Node without one (kubernetes/kubernetes#123024) and skips
// it quietly on nil, instead of retrying an error; an initialized one never
// gets nil, which the controller's address update does not expect.
func unmanagedMetadata(node *v1.Node) *cloudprovider.InstanceMetadata {
	if node.Spec.ProviderID == "" && nodes.Uninitialized(node) {
		return nil
	}
	return &cloudprovider.InstanceMetadata{ProviderID: node.Spec.ProviderID, NodeAddresses: slices.Clone(node.Status.Addresses)}
}

// ErrorReason buckets an error for the errors metric (cloud.Metrics) and
// for the causes of failed lookups (lookupCause); it never carries the
// error text, so nothing secret can reach a label.
func ErrorReason(err error) string {
	switch {
	case errors.Is(err, discovery.ErrVCenterDown):
		return "vcenter_down"
	case errors.Is(err, discovery.ErrVCenterConnecting):
		return "connecting"
	case errors.Is(err, discovery.ErrBreakerOpen):
		return "breaker_open"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, backends.ErrAuth):
		return "auth"
	case errors.Is(err, backends.ErrUnreachable):
		return "connection"
	}
	return "other"
}
