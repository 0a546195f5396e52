package config

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// DatacenterKind says how a configured datacenter is named.
type DatacenterKind int

// The three ways CPI (v1.32 and later: pkg/common/vclib GetDatacenter)
// reads a datacenter.
const (
	// DatacenterByName is a datacenter's name ("dc-east"): CPI's finder
	// finds it at any depth of the inventory.
	DatacenterByName DatacenterKind = iota
	// DatacenterByID is a managed object reference, written
	// "Datacenter:datacenter-3" or only its ID, "datacenter-3".
	DatacenterByID
	// DatacenterByPath is an inventory path, "/folder/dc-east" (CPI reads
	// "folder/dc-east" so too: relative to the root folder).
	DatacenterByPath
)

func (k DatacenterKind) String() string {
	switch k {
	case DatacenterByID:
		return "managed object ID"
	case DatacenterByPath:
		return "inventory path"
	case DatacenterByName:
		return "name"
	}
	return "unparsed"
}

// DatacenterSpec is one entry of a vCenter's datacenters, parsed.
type DatacenterSpec struct {
	// Raw is the entry as written, for messages.
	Raw  string
	Kind DatacenterKind
	// Value is the name, the managed object ID ("datacenter-3"), or the
	// cleaned absolute inventory path ("/folder/dc-east").
	Value string
}

func (d DatacenterSpec) String() string { return d.Raw }

// Name is the datacenter's name when the spec alone says it: a name, or
// a path's last element (vCenter escapes a "/" in a name as %2f, so it is
// one). A managed object ID says nothing of it ("" , false): only its
// vCenter can.
func (d DatacenterSpec) Name() (string, bool) {
	switch d.Kind {
	case DatacenterByName:
		return d.Value, true
	case DatacenterByPath:
		return path.Base(d.Value), true
	}
	return "", false
}

// Datacenter is the name, managed object ID and inventory path of one
// datacenter, as its vCenter reports them ("" for what is not known).
// The name is its canonical identity: what VMs, Node labels and the
// config's history carry.
type Datacenter struct {
	Name, ID, Path string
}

// Matches reports whether spec names dc. A part of dc that is not known
// matches nothing.
func (d DatacenterSpec) Matches(dc Datacenter) bool {
	switch d.Kind {
	case DatacenterByName:
		return dc.Name != "" && dc.Name == d.Value
	case DatacenterByID:
		return dc.ID != "" && dc.ID == d.Value
	case DatacenterByPath:
		return dc.Path != "" && dc.Path == d.Value
	}
	return false
}

// datacenterUnparsed is an entry ParseDatacenter refused, in a VCenter
// made by hand (Parse refuses the config): it matches nothing, so that it
// never widens the datacenters searched.
const datacenterUnparsed DatacenterKind = -1

// DatacenterSpecs are v's Datacenters, parsed, in order.
func (v VCenter) DatacenterSpecs() []DatacenterSpec {
	var out []DatacenterSpec
	for _, raw := range v.Datacenters {
		spec, err := ParseDatacenter(raw)
		if err != nil {
			spec = DatacenterSpec{Raw: raw, Kind: datacenterUnparsed}
		}
		out = append(out, spec)
	}
	return out
}

// refPrefixes are the managed object ID prefixes govmomi's
// object.ReferenceFromString, which CPI applies first, reads as a
// reference of that type ("host-12" is a HostSystem). Only "datacenter"
// names a datacenter.
var refPrefixes = map[string]string{
	"datacenter": "Datacenter", "datastore": "Datastore", "domain": "ComputeResource",
	"dvportgroup": "DistributedVirtualPortgroup", "dvs": "DistributedVirtualSwitch",
	"group": "Folder", "host": "HostSystem", "network": "Network",
	"resgroup": "ResourcePool", "vm": "VirtualMachine",
}

// referenceTypes are the managed object types a "Type:value" entry may
// name and CPI would read as a reference: the inventory's and its
// neighbours'. Another "Word:value" is a name, as it is to CPI for any
// word that is not a vSphere type.
var referenceTypes = map[string]bool{
	"Datacenter": true, "Folder": true, "StoragePod": true, "ComputeResource": true,
	"ClusterComputeResource": true, "HostSystem": true, "ResourcePool": true, "VirtualApp": true,
	"VirtualMachine": true, "Datastore": true, "Network": true, "OpaqueNetwork": true,
	"DistributedVirtualPortgroup": true, "DistributedVirtualSwitch": true,
	"VmwareDistributedVirtualSwitch": true, "ManagedEntity": true,
}

// ParseDatacenter reads one datacenters entry as CPI does: a managed
// object reference first ("Datacenter:datacenter-3", or the bare ID
// "datacenter-3"), else an inventory path when it holds a "/", else a
// name. A reference to anything but a datacenter is an error: CPI would
// look it up as that object and never find a datacenter.
func ParseDatacenter(s string) (DatacenterSpec, error) {
	spec := DatacenterSpec{Raw: s}
	s = strings.TrimSpace(s)
	if s == "" {
		return spec, errors.New("empty")
	}
	if typ, id, ok := strings.Cut(s, ":"); ok && referenceTypes[typ] {
		if typ != "Datacenter" {
			return spec, fmt.Errorf("%q is not a Datacenter reference (it names a %s)", s, typ)
		}
		if id == "" {
			return spec, fmt.Errorf("%q has no managed object ID after \"Datacenter:\"", s)
		}
		spec.Kind, spec.Value = DatacenterByID, id
		return spec, nil
	}
	if !strings.Contains(s, "/") {
		prefix, _, ok := strings.Cut(s, "-")
		if typ := refPrefixes[prefix]; ok && typ != "" {
			if typ != "Datacenter" {
				return spec, fmt.Errorf("%q is read as a reference to a %s, not a Datacenter (CPI reads a datacenter's name of this form so too); write a datacenter of that name as its inventory path, like \"/%s\"", s, typ, s)
			}
			spec.Kind, spec.Value = DatacenterByID, s
			return spec, nil
		}
		spec.Kind, spec.Value = DatacenterByName, s
		return spec, nil
	}
	if slices.Contains(strings.Split(s, "/"), "..") {
		return spec, fmt.Errorf("%q goes up a folder (\"..\"): write the datacenter's path from the root folder", s)
	}
	p := path.Clean("/" + s)
	if p == "/" {
		return spec, fmt.Errorf("%q is the root folder, not a datacenter", s)
	}
	spec.Kind, spec.Value = DatacenterByPath, p
	return spec, nil
}
