package metadata

// Zones from DRS host groups (labels.zoneHostGroups): a stretched
// cluster's VM is in the zone of the host group of the host it runs on
// now. Read from the inventories (the clusters' configurationEx, watched),
// no request per Node; the region is still its tag's.

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Event reasons of zones from host groups; the Node stays tainted, as
// for a missing zone tag (ZoneTagMissing), and the drift pass reports
// an initialized Node's once per change.
const (
	// ReasonZoneHostGroupMissing: the VM's host is in no host group that
	// gives a zone (or its groups are not known yet).
	ReasonZoneHostGroupMissing = "ZoneHostGroupMissing"
	// ReasonZoneHostGroupAmbiguous: the VM's host is in host groups that
	// give different zones.
	ReasonZoneHostGroupAmbiguous = "ZoneHostGroupAmbiguous"
)

// ZoneHostGroupError is a located VM whose zone its host's DRS host
// groups do not give: its host in no group that the config maps, in
// groups of different zones, or its groups not known. InstanceMetadata
// fails, so the Node stays tainted rather than join without its zone.
type ZoneHostGroupError struct {
	VM      string // the VM, as discovery.Result names it
	Host    string // its host's name (or ID when the name is not known)
	Cluster string // "" for a standalone host
	// Groups are all the host's groups; Zones the zone of each that the
	// config maps.
	Groups []string
	Zones  map[string]string
	// Setting names the config key ("labels.zoneHostGroups").
	Setting string
	// Unknown: the host's groups are not known (not read yet).
	Unknown bool
	// Invalid says why a zone the pattern derived is no label value.
	Invalid string
}

// Reason is the Event reason of e.
func (e *ZoneHostGroupError) Reason() string {
	if !e.Unknown && e.Invalid == "" && len(slices.Compact(slices.Sorted(maps.Values(e.Zones)))) > 1 {
		return ReasonZoneHostGroupAmbiguous
	}
	return ReasonZoneHostGroupMissing
}

func (e *ZoneHostGroupError) Error() string {
	where := "host " + e.Host
	if e.Cluster != "" {
		where += " of cluster " + e.Cluster
	}
	switch {
	case e.Unknown:
		return fmt.Sprintf("%s: the host groups of its %s are not known yet: no zone (%s)", e.VM, where, e.Setting)
	case e.Invalid != "":
		return fmt.Sprintf("%s: its %s is in host groups %s: %s (%s)", e.VM, where, e.mapped(), e.Invalid, e.Setting)
	case len(e.Zones) == 0:
		groups := "in no host group"
		if len(e.Groups) > 0 {
			groups = "in host groups " + strings.Join(e.Groups, ", ") + ", none"
		}
		return fmt.Sprintf("%s: its %s is %s of %s: no zone", e.VM, where, groups, e.Setting)
	}
	return fmt.Sprintf("%s: its %s is in host groups of different zones, %s (%s): no zone", e.VM, where, e.mapped(), e.Setting)
}

// mapped lists the mapped groups with their zones, "a → site-a, b → site-b".
func (e *ZoneHostGroupError) mapped() string {
	var parts []string
	for _, g := range slices.Sorted(maps.Keys(e.Zones)) {
		parts = append(parts, g+" → "+e.Zones[g])
	}
	return strings.Join(parts, ", ")
}

// HostGroupZone is the zone z gives vm (named by what): that of the host
// groups of its host that z maps, all of which must give one zone.
// group is the first such group, for messages.
func HostGroupZone(vm *backends.VM, what fmt.Stringer, z *config.HostGroupZones) (zone, group string, err *ZoneHostGroupError) {
	// The usual case first, without allocating: the pass meets it for
	// every Node at every pass.
	if vm.HostGroupsKnown {
		one := true
		for _, g := range vm.HostGroups {
			if gz, ok := z.ZoneOf(g); ok {
				if zone == "" {
					zone, group = gz, g
				}
				one = one && gz == zone
			}
		}
		// A zone of the mapping was checked with the config; one of the
		// pattern is checked here.
		if _, mapped := z.Groups[group]; zone != "" && one && (mapped || config.InvalidZone(zone) == "") {
			return zone, group, nil
		}
	}
	e := &ZoneHostGroupError{VM: what.String(), Host: cmp.Or(vm.HostName, vm.Host), Cluster: vm.Cluster,
		Groups: vm.HostGroups, Zones: map[string]string{}, Setting: z.String(), Unknown: !vm.HostGroupsKnown}
	if e.Unknown {
		return "", "", e
	}
	// Why not: no mapped group, two zones, or a zone no label value.
	for _, g := range vm.HostGroups {
		if zone, ok := z.ZoneOf(g); ok {
			e.Zones[g] = zone
			if why := config.InvalidZone(zone); why != "" && e.Invalid == "" {
				e.Invalid = fmt.Sprintf("zone %q of group %s is no valid label value: %s", zone, g, why)
			}
		}
	}
	return "", "", e
}

// TopologySource is where a vCenter's VMs get their zone and region: the
// host groups (HostGroups set: zone from them, region from its category
// when set), else the tag categories, both or neither (CPI's rule).
type TopologySource struct {
	HostGroups   *config.HostGroupZones
	Zone, Region string // tag categories
}

// TopologyFor is the TopologySource of the VMs of the vcenter entry named
// vcenter under cfg.
func TopologyFor(cfg *config.Config, vcenter string) TopologySource {
	for _, vc := range cfg.VCenters {
		if vc.Name == vcenter && vc.ZoneHostGroups != nil {
			return TopologySource{HostGroups: vc.ZoneHostGroups, Region: cfg.Labels.Region}
		}
	}
	if cfg.Labels.Zone != "" && cfg.Labels.Region != "" {
		return TopologySource{Zone: cfg.Labels.Zone, Region: cfg.Labels.Region}
	}
	return TopologySource{}
}

// Any reports whether s gives a zone or a region.
func (s TopologySource) Any() bool { return s.HostGroups != nil || s.Zone != "" }

// Category is the tag category of kind (zone, region), "" when not read
// from tags.
func (s TopologySource) Category(kind string) string {
	if kind == "zone" {
		return s.Zone
	}
	if s.Any() {
		return s.Region
	}
	return ""
}
