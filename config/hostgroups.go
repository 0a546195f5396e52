package config

// Zones from DRS host groups: a stretched cluster (vSAN stretched, metro
// storage) is one compute cluster whose hosts are split into a host group
// per site. Tags on hosts drift from group membership as hosts are added;
// the groups are what DRS (and the VM-host rules) act on, so a VM's zone
// is the group of the host it runs on now.

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// hostGroupsSection is the host-group keys: top-level labels' (every
// vCenter's) and a vcenter section's labels (that vCenter's, instead).
type hostGroupsSection struct {
	// ZoneHostGroups maps a DRS host group's name to the zone of the
	// VMs running on its hosts. An empty mapping written in a vcenter
	// section turns host groups off for that vCenter.
	ZoneHostGroups map[string]string `yaml:"zoneHostGroups"`
	// ZoneHostGroupPattern derives the zone from the name of a group the
	// mapping does not name: the regular expression's named group zone
	// ("^(?P<zone>.+)-hosts$").
	ZoneHostGroupPattern string `yaml:"zoneHostGroupPattern"`
}

// set reports whether the section writes either key (an empty mapping
// counts: it turns host groups off).
func (h *hostGroupsSection) set() bool {
	return h != nil && (h.ZoneHostGroups != nil || h.ZoneHostGroupPattern != "")
}

// labelsSection is the top-level labels section: CPI's tag categories
// and the host-group keys.
type labelsSection struct {
	Labels            `yaml:",inline"`
	hostGroupsSection `yaml:",inline"`
}

// HostGroupZones is how the zone of a vCenter's VMs is read from the DRS
// host groups of their clusters (labels.zoneHostGroups,
// labels.zoneHostGroupPattern): the zone a group gives is its entry of
// Groups, else Pattern's group zone of its name.
type HostGroupZones struct {
	// Groups maps a host group's name to a zone.
	Groups map[string]string
	// Pattern, when not nil, derives the zone of a group Groups does not
	// name; it has a named group "zone".
	Pattern *regexp.Regexp
	// From is the config path the setting came from ("labels",
	// "vcenter.east.labels"), for messages.
	From string
}

// ZoneOf is the zone group gives; ok is false when the mapping does not
// name it and the pattern does not match it (or gives an empty zone).
// A zone from the pattern may be no valid label value: the caller checks
// it (InvalidZone).
func (z *HostGroupZones) ZoneOf(group string) (zone string, ok bool) {
	if zone, ok := z.Groups[group]; ok {
		return zone, true
	}
	if z.Pattern == nil {
		return "", false
	}
	m := z.Pattern.FindStringSubmatch(group)
	if m == nil {
		return "", false
	}
	zone = m[z.Pattern.SubexpIndex("zone")]
	return zone, zone != ""
}

// InvalidZone says why zone is no valid label value; "" when it is one.
func InvalidZone(zone string) string {
	return strings.Join(validation.IsValidLabelValue(zone), "; ")
}

// resolveHostGroups checks a host-group section at path (the file's
// "labels" or "vcenter.<name>.labels"): each zone a valid label value,
// each group named, the pattern a regular expression with a named group
// zone. nil when the section turns host groups off (or sets nothing).
func resolveHostGroups(h *hostGroupsSection, path string, add func(string, string, ...any)) *HostGroupZones {
	if !h.set() {
		return nil
	}
	z := &HostGroupZones{Groups: map[string]string{}, From: path}
	for _, group := range slices.Sorted(maps.Keys(h.ZoneHostGroups)) {
		zone := strings.TrimSpace(h.ZoneHostGroups[group])
		p := path + ".zoneHostGroups[" + group + "]"
		switch why := InvalidZone(zone); {
		case strings.TrimSpace(group) == "":
			add(path+".zoneHostGroups", "a host group name is empty")
		case zone == "":
			add(p, "the zone is empty")
		case why != "":
			add(p, "zone %q is no valid label value: %s", zone, why)
		default:
			z.Groups[group] = zone
		}
	}
	if s := h.ZoneHostGroupPattern; s != "" {
		re, err := regexp.Compile(s)
		switch {
		case err != nil:
			add(path+".zoneHostGroupPattern", "not a regular expression: %v", err)
		case re.SubexpIndex("zone") < 0:
			add(path+".zoneHostGroupPattern", "has no named group zone: write (?P<zone>…) around the part of a group's name that is its zone")
		default:
			z.Pattern = re
		}
	}
	if len(z.Groups) == 0 && z.Pattern == nil {
		return nil // off: an empty mapping, or only invalid entries (reported)
	}
	return z
}

// String names the setting for messages: where it is written.
func (z *HostGroupZones) String() string {
	if z == nil {
		return "no host groups"
	}
	return z.From + ".zoneHostGroups"
}
