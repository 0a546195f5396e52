package nodes

// Nodes that follow their VMs: the nodes owner's pass over the
// initialized Nodes, from the inventories' memory alone
// (discovery.Placed), never a vCenter request. A VM moves (vMotion, a
// cross-vCenter vMotion, a failover, DRS) while the cloud-node controller
// labels a Node only at initialization: the pass rewrites our location
// and placement labels, reports zone and region drift (and rewrites them
// when nodes.reconcileTopology is set), and reports what CSI and the
// scheduler need that the VM lacks (disk.EnableUUID, a zone tag).

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// DefaultNodeResync is how often every Node is looked at even when no
// inventory changed: tags are re-read into memory without an inventory
// update.
const DefaultNodeResync = 30 * time.Second

// nodeReport is what the pass last reported of one Node, so that each
// Event is recorded once per change, and the gauges count it.
type nodeReport struct {
	// drift is each kind (zone, region) whose label differs from the
	// VM's tag, to "old → new".
	drift map[string]string
	// diskUUIDOff: the VM lacks disk.EnableUUID=TRUE.
	diskUUIDOff bool
	// missing are the categories (zone, region) the VM has no tag of.
	missing []string
	// groupErr is why the VM's host groups give no zone
	// (metadata.ZoneHostGroupError), groupReason its Event reason; "" when they
	// give one or are not read.
	groupErr, groupReason string
}

// carry keeps in r what prev reported of kind (zone, region): what is
// not in memory yet concludes nothing.
func (r *nodeReport) carry(prev *nodeReport, kind string) {
	if c, ok := prev.drift[kind]; ok {
		r.drift[kind] = c
	}
	if slices.Contains(prev.missing, kind) {
		r.missing = append(r.missing, kind)
	}
	if kind == "zone" {
		r.groupErr, r.groupReason = prev.groupErr, prev.groupReason
	}
}

// passCategories are the tag categories a pass places VMs with, read once
// per pass: zone and region, when both are configured; else the region
// alone, when some vCenter's zones come from host groups.
func passCategories(cfg *config.Config) []string {
	hostGroups := slices.ContainsFunc(cfg.VCenters, func(vc config.VCenter) bool { return vc.ZoneHostGroups != nil })
	if cfg.Labels.Zone != "" && cfg.Labels.Region != "" {
		return []string{cfg.Labels.Zone, cfg.Labels.Region}
	}
	if cfg.Labels.Region != "" && hostGroups {
		return []string{cfg.Labels.Region}
	}
	return nil
}

// followVMs is the pass, run by run every poll: every initialized Node
// (all, the tick's list) when the inventories or the config changed or
// every resync, else only the Nodes the informer saw change.
func (n *Owner) followVMs(ctx context.Context, client kubernetes.Interface, lister corelisters.NodeLister,
	all []*v1.Node, now time.Time) {
	cfg := n.config()
	version := n.discovery.InventoryVersion()
	full := cfg != n.passConfig || version != n.passVersion || now.Sub(n.lastFull) >= n.resync
	changed := take(&n.mu, &n.changed)
	list := all
	if full {
		n.passConfig, n.passVersion, n.lastFull = cfg, version, now
	} else {
		list = nil
		for name := range changed {
			if node, err := lister.Get(name); err == nil {
				list = append(list, node)
			}
		}
	}
	if len(list) == 0 {
		return
	}
	categories := passCategories(cfg)
	start := time.Now()
	for _, node := range list {
		n.follow(ctx, client, cfg, categories, node)
	}
	n.setGauges()
	klog.FromContext(ctx).V(4).Info("Nodes compared with their VMs", "full", full, "nodes", len(list), "took", time.Since(start))
}

// follow brings one Node's labels after its VM and reports what changed.
func (n *Owner) follow(ctx context.Context, client kubernetes.Interface, cfg *config.Config, categories []string,
	node *v1.Node) {
	uuid, err := discovery.ParseProviderID(node.Spec.ProviderID)
	if Uninitialized(node) || n.Unmanaged(node) || err != nil {
		n.setReport(node.Name, nil)
		return
	}
	// Built per Node only when something is logged: the pass runs over
	// every Node at every inventory change.
	log := func() klog.Logger { return klog.FromContext(ctx).WithValues("node", node.Name) }
	placed, ok := n.discovery.Placed(uuid, categories)
	if !ok {
		if v := klog.FromContext(ctx).V(5); v.Enabled() {
			v.Info("The inventories cannot place the Node's VM alone; nothing concluded", "node", node.Name, "uuid", uuid)
		}
		return // nothing concluded: the report stands
	}
	// What was last reported of the Node: empty when nothing was.
	n.mu.Lock()
	prev, reported := n.reports[node.Name]
	n.mu.Unlock()
	if !reported {
		prev = &nodeReport{}
	}
	next := &nodeReport{drift: map[string]string{}, diskUUIDOff: !placed.VM.DiskUUIDEnabled()}
	patch := map[string]*string{}
	// set patches label k to v ("" removes it), and reports whether that
	// changes the Node.
	set := func(k, v string) bool {
		cur, ok := node.Labels[k]
		switch {
		case v == "" && ok:
			patch[k] = nil
		case v != "" && (!ok || cur != v):
			patch[k] = &v
		default:
			return false
		}
		return true
	}

	// Where the VM is: our location labels always follow it.
	location := LocationLabels(&placed.Result)
	var moves []string
	if old := node.Labels[LabelServer]; old != "" && !strings.EqualFold(old, location[LabelServer]) {
		from := cmp.Or(node.Labels[LabelVCenter], old)
		moves = append(moves, fmt.Sprintf("vcenter %s → %s", from, location[LabelVCenter]))
	}
	if old, now := node.Labels[LabelDatacenter], location[LabelDatacenter]; old != "" && now != "" && old != now {
		moves = append(moves, fmt.Sprintf("datacenter %s → %s", old, now))
	}
	for k, v := range location {
		set(k, v)
	}
	locationPatched := len(patch) > 0

	// The labels below the zone: ours, they follow too.
	var placement []string
	below := metadata.PlacementLabels(&placed.VM, cfg.PlacementLabels)
	for _, k := range []string{metadata.LabelHost, metadata.LabelCluster, metadata.LabelResourcePool} {
		if set(k, below[k]) {
			placement = append(placement, labelChange(k, node.Labels[k], below[k]))
		}
	}

	// The labels from tag categories: ours to keep, they follow the tags
	// (each category walked on its own, see instances.InstanceMetadata).
	var tagged []string
	for _, t := range cfg.TagLabels {
		p, ok := n.discovery.Placed(uuid, []string{t.Category})
		if !ok || !p.TagsKnown {
			continue
		}
		if v := metadata.LabelValue(p.Tags[t.Category]); set(t.Key, v) {
			tagged = append(tagged, labelChange(t.Key, node.Labels[t.Key], v))
		}
	}

	// Zone and region: reported; rewritten only when asked. Each from
	// where the VM's vCenter reads it: the host groups, or the tags.
	var reconciled []string
	src := metadata.TopologyFor(cfg, placed.VCenter)
	tags, tagsKnown := placed.Tags, placed.TagsKnown
	if src.HostGroups != nil && src.Region != "" && len(categories) != 1 {
		// The region walked alone (the zone is no tag there), from memory:
		// a second lookup only when the first walked zone and region.
		tags, tagsKnown = nil, false
		if p, ok := n.discovery.Placed(uuid, []string{src.Region}); ok && p.VCenter == placed.VCenter {
			tags, tagsKnown = p.Tags, p.TagsKnown
		}
	}
	var zoneGroup string // the host group the zone is read from
	if src.Any() {
		for _, t := range []struct{ kind, ga, beta string }{
			{"region", v1.LabelTopologyRegion, v1.LabelFailureDomainBetaRegion},
			{"zone", v1.LabelTopologyZone, v1.LabelFailureDomainBetaZone},
		} {
			var want string
			switch cat := src.Category(t.kind); {
			case t.kind == "zone" && src.HostGroups != nil:
				if !placed.VM.HostGroupsKnown {
					next.carry(prev, t.kind)
					continue
				}
				zone, group, herr := metadata.HostGroupZone(&placed.VM, &placed.Result, src.HostGroups)
				if herr != nil {
					next.groupErr, next.groupReason = herr.Error(), herr.Reason()
					continue
				}
				want, zoneGroup = zone, group
			case cat == "":
				continue
			case !tagsKnown:
				// Tags not in memory yet: what was reported of them stands.
				next.carry(prev, t.kind)
				continue
			default:
				if want = tags[cat]; want == "" {
					next.missing = append(next.missing, t.kind)
					continue
				}
			}
			have, ok := node.Labels[t.ga]
			if !ok {
				have = node.Labels[t.beta]
			}
			if have == want {
				continue
			}
			change := labelChange(t.kind, have, want)
			if !cfg.ReconcileTopology {
				next.drift[t.kind] = change
				continue
			}
			set(t.ga, want)
			if _, ok := node.Labels[t.beta]; ok {
				set(t.beta, want)
			}
			reconciled = append(reconciled, change)
		}
	}

	written := true
	if len(patch) > 0 {
		if err := patchNode(ctx, client, node.Name, "labels", patch); err != nil {
			// Retried at the next pass, which sees the same differences.
			log().Error(err, "Rewriting the labels of a Node whose VM moved failed; retried at the next pass", "labels", slices.Collect(maps.Keys(patch)))
			written = false
			for _, c := range reconciled {
				kind, _, _ := strings.Cut(c, " ")
				next.drift[kind] = c
			}
		}
	}
	if written {
		if locationPatched {
			n.metrics.labelUpdates.WithLabelValues("location").Inc()
		}
		for _, m := range moves {
			kind, _, _ := strings.Cut(m, " ") // vcenter, datacenter
			n.metrics.moves.WithLabelValues(kind).Inc()
		}
		for _, c := range reconciled {
			kind, _, _ := strings.Cut(c, " ")
			n.metrics.labelUpdates.WithLabelValues(kind).Inc()
		}
		if len(reconciled) > 0 {
			n.events.Record(node, v1.EventTypeNormal, ReasonTopologyReconciled,
				fmt.Sprintf("Zone and region labels follow %s: %s (nodes.reconcileTopology)", placed.String(), strings.Join(reconciled, ", ")))
		}
		if len(tagged) > 0 {
			n.metrics.labelUpdates.WithLabelValues("tag").Inc()
			n.events.Record(node, v1.EventTypeNormal, ReasonTagLabelsUpdated,
				fmt.Sprintf("Tag labels follow %s: %s (nodes.tagLabels)", placed.String(), strings.Join(tagged, ", ")))
		}
		if len(placement) > 0 {
			for _, p := range placement {
				name, _, _ := strings.Cut(strings.TrimPrefix(p, "vsphere-federated-ccm.io/"), " ")
				n.metrics.labelUpdates.WithLabelValues(name).Inc()
			}
			log().V(2).Info("Placement labels follow the VM", "vm", placed.String(), "changes", placement)
			n.events.Record(node, v1.EventTypeNormal, ReasonPlacementLabelsUpdated,
				fmt.Sprintf("Placement labels follow %s: %s", placed.String(), strings.Join(placement, ", ")))
		}
	} else {
		moves = nil // reported once written
	}

	// Drift: once per change.
	driftChanged := len(next.drift) > 0 && !maps.Equal(prev.drift, next.drift)
	if len(moves) > 0 || driftChanged {
		parts := moves
		for _, kind := range []string{"region", "zone"} {
			if c, ok := next.drift[kind]; ok {
				parts = append(parts, c)
			}
		}
		msg := fmt.Sprintf("VM now at %s: %s", placed.String(), strings.Join(parts, ", "))
		if len(moves) > 0 {
			msg += "; the location labels follow"
		}
		if _, ok := next.drift["zone"]; ok && zoneGroup != "" {
			host := cmp.Or(placed.VM.HostName, placed.VM.Host)
			msg += fmt.Sprintf("; its host %s is in host group %s (%s)", host, zoneGroup, src.HostGroups)
		}
		if len(next.drift) > 0 {
			msg += "; the zone and region labels are kept (nodes.reconcileTopology is off)"
		}
		log().Info("Node's VM moved or its topology drifted", "vm", placed.String(), "changes", parts)
		n.events.Record(node, v1.EventTypeWarning, ReasonTopologyDrift, msg)
	}
	if len(prev.drift) > 0 && len(next.drift) == 0 {
		n.events.Record(node, v1.EventTypeNormal, ReasonTopologyDriftCleared,
			fmt.Sprintf("Zone and region labels match %s again", placed.String()))
	}
	if next.diskUUIDOff && !prev.diskUUIDOff {
		n.events.Record(node, v1.EventTypeWarning, ReasonDiskUUIDDisabled,
			fmt.Sprintf("%s has no disk.EnableUUID=TRUE: vSphere CSI cannot see its disks' UUIDs", placed.String()))
	}
	if len(next.missing) > 0 && !slices.Equal(prev.missing, next.missing) {
		var cats []string
		for _, kind := range next.missing {
			cat := cfg.Labels.Zone
			if kind == "region" {
				cat = cfg.Labels.Region
			}
			cats = append(cats, fmt.Sprintf("%s (category %q)", kind, cat))
		}
		n.events.Record(node, v1.EventTypeWarning, ReasonZoneTagMissing, (&metadata.ZoneTagError{VM: placed.String(), Missing: cats}).Error())
	}
	if next.groupErr != "" && prev.groupErr != next.groupErr {
		n.events.Record(node, v1.EventTypeWarning, next.groupReason, next.groupErr)
	}
	if v := klog.FromContext(ctx).V(5); v.Enabled() {
		v.Info("Node compared with its VM", "node", node.Name, "vm", placed.String(), "tagsKnown", placed.TagsKnown,
			"patched", slices.Collect(maps.Keys(patch)), "drift", next.drift, "missing", next.missing,
			"diskUUIDOff", next.diskUUIDOff)
	}
	n.setReport(node.Name, next)
}

// setReport keeps r as what is reported of the Node name; nil forgets it.
func (n *Owner) setReport(name string, r *nodeReport) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if r == nil {
		delete(n.reports, name)
		return
	}
	n.reports[name] = r
}

// setGauges sets the gauges from the reports.
func (n *Owner) setGauges() {
	n.mu.Lock()
	drift := map[string]int{"zone": 0, "region": 0}
	missing := map[string]int{"zone": 0, "region": 0}
	disk := 0
	groups := map[string]int{metadata.ReasonZoneHostGroupMissing: 0, metadata.ReasonZoneHostGroupAmbiguous: 0}
	for _, r := range n.reports {
		if r.groupReason != "" {
			groups[r.groupReason]++
		}
		for kind := range r.drift {
			drift[kind]++
		}
		for _, kind := range r.missing {
			missing[kind]++
		}
		if r.diskUUIDOff {
			disk++
		}
	}
	n.mu.Unlock()
	setEach(n.metrics.drift, drift)
	setEach(n.metrics.tagMissing, missing)
	n.metrics.diskUUID.Set(float64(disk))
	setEach(n.metrics.hostGroupZone, groups)
}

// setEach sets g's gauge of each label value to its count.
func setEach(g *metrics.GaugeVec, counts map[string]int) {
	for value, c := range counts {
		g.WithLabelValues(value).Set(float64(c))
	}
}

// labelChange says how a label changes, "key old → new", (none) for no
// value.
func labelChange(key, from, to string) string {
	return fmt.Sprintf("%s %s → %s", key, cmp.Or(from, "(none)"), cmp.Or(to, "(none)"))
}
