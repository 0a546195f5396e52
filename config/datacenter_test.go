package config

import (
	"strings"
	"testing"
)

// TestParseDatacenter holds CPI's cases (pkg/common/vclib GetDatacenter:
// govmomi's ReferenceFromString first, then the finder's path or name).
func TestParseDatacenter(t *testing.T) {
	for _, c := range []struct {
		in        string
		kind      DatacenterKind
		value     string
		name      string // Name(); "" when the spec does not say it
		wantError string
	}{
		{in: "dc-east", kind: DatacenterByName, value: "dc-east", name: "dc-east"},
		{in: "DC0", kind: DatacenterByName, value: "DC0", name: "DC0"},
		// A word before ":" that is no vSphere type is part of a name.
		{in: "eu:west", kind: DatacenterByName, value: "eu:west", name: "eu:west"},
		{in: "datacenter:x", kind: DatacenterByName, value: "datacenter:x", name: "datacenter:x"},
		{in: "/dc-east", kind: DatacenterByPath, value: "/dc-east", name: "dc-east"},
		{in: "/folder/dc-east", kind: DatacenterByPath, value: "/folder/dc-east", name: "dc-east"},
		{in: "/a/b/dc-east/", kind: DatacenterByPath, value: "/a/b/dc-east", name: "dc-east"},
		// CPI's finder reads a relative path from the root folder.
		{in: "folder/dc-east", kind: DatacenterByPath, value: "/folder/dc-east", name: "dc-east"},
		{in: "./folder//dc-east", kind: DatacenterByPath, value: "/folder/dc-east", name: "dc-east"},
		{in: "Datacenter:datacenter-3", kind: DatacenterByID, value: "datacenter-3"},
		{in: "datacenter-3", kind: DatacenterByID, value: "datacenter-3"},
		{in: "Datacenter:dc-7", kind: DatacenterByID, value: "dc-7"},
		// What ReferenceFromString reads as another object's reference.
		{in: "Folder:group-3", wantError: `"Folder:group-3" is not a Datacenter reference`},
		{in: "VirtualMachine:vm-42", wantError: `"VirtualMachine:vm-42" is not a Datacenter reference`},
		{in: "ClusterComputeResource:domain-c7", wantError: "not a Datacenter reference"},
		{in: "host-12", wantError: `"host-12" is read as a reference to a HostSystem, not a Datacenter`},
		{in: "vm-lab", wantError: `like "/vm-lab"`},
		{in: "group-d1", wantError: "Folder"},
		{in: "Datacenter:", wantError: "no managed object ID"},
		{in: "/", wantError: "root folder"},
		{in: "/a/../dc", wantError: `goes up a folder`},
		{in: " ", wantError: "empty"},
	} {
		got, err := ParseDatacenter(c.in)
		if c.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantError) {
				t.Errorf("ParseDatacenter(%q) = %+v, %v; want an error with %q", c.in, got, err, c.wantError)
			}
			continue
		}
		if err != nil || got.Kind != c.kind || got.Value != c.value || got.Raw != c.in {
			t.Errorf("ParseDatacenter(%q) = %+v, %v; want %s %q", c.in, got, err, c.kind, c.value)
			continue
		}
		if name, ok := got.Name(); name != c.name || ok != (c.name != "") {
			t.Errorf("ParseDatacenter(%q).Name() = %q, %v; want %q", c.in, name, ok, c.name)
		}
	}
}

func TestDatacenterSpecMatches(t *testing.T) {
	east := Datacenter{Name: "dc-east", ID: "datacenter-3", Path: "/folder/dc-east"}
	for _, c := range []struct {
		spec string
		dc   Datacenter
		want bool
	}{
		{"dc-east", east, true},
		{"dc-west", east, false},
		{"Datacenter:datacenter-3", east, true},
		{"datacenter-3", east, true},
		{"datacenter-4", east, false},
		{"/folder/dc-east", east, true},
		{"folder/dc-east", east, true},
		{"/dc-east", east, false}, // another datacenter of that name, at the root
		// What is not known matches nothing.
		{"datacenter-3", Datacenter{Name: "dc-east"}, false},
		{"/folder/dc-east", Datacenter{Name: "dc-east", ID: "datacenter-3"}, false},
	} {
		spec, err := ParseDatacenter(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := spec.Matches(c.dc); got != c.want {
			t.Errorf("%q.Matches(%+v) = %v, want %v", c.spec, c.dc, got, c.want)
		}
	}
}

// A bad entry is an error naming its field and index, in both of CPI's
// forms (YAML list or comma-separated string, INI).
func TestDatacentersErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ name, cfg, want string }{
		{"yaml list", `
vcenter:
  X:
    server: vc
    user: u
    password: p
    datacenters: [dc-east, "Folder:group-3"]
`, `vcenter.X.datacenters[1]: "Folder:group-3" is not a Datacenter reference`},
		{"yaml comma string", `
vcenter:
  X:
    server: vc
    user: u
    password: p
    datacenters: "Datacenter:datacenter-3, /f/dc-east, host-9"
`, `vcenter.X.datacenters[2]: "host-9" is read as a reference to a HostSystem`},
		{"inherited from global", `
global:
  datacenters: [vm-1]
vcenter:
  X: {server: vc, user: u, password: p}
`, `global.datacenters[0]: "vm-1"`},
		{"ini", `[Global]
user = "u"
password = "p"
[VirtualCenter "vc"]
datacenters = "dc-east,Folder:group-3"
`, `vcenter.vc.datacenters[1]: "Folder:group-3" is not a Datacenter reference`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.cfg))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse: %v\nwant an error with %q", err, c.want)
			}
		})
	}
}

// The three forms load, parsed, beside the entries as written.
func TestDatacentersParsed(t *testing.T) {
	cfg := mustParse(t, `
vcenter:
  X:
    server: vc
    user: u
    password: p
    datacenters: "dc-west, Datacenter:datacenter-3, /folder/dc-east"
`)
	vc := cfg.VCenters[0]
	got := vc.DatacenterSpecs()
	want := []DatacenterSpec{
		{Raw: "dc-west", Kind: DatacenterByName, Value: "dc-west"},
		{Raw: "Datacenter:datacenter-3", Kind: DatacenterByID, Value: "datacenter-3"},
		{Raw: "/folder/dc-east", Kind: DatacenterByPath, Value: "/folder/dc-east"},
	}
	if len(got) != len(want) {
		t.Fatalf("DatacenterSpecs() = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] || vc.Datacenters[i] != want[i].Raw {
			t.Errorf("entry %d = %+v (%q), want %+v", i, got[i], vc.Datacenters[i], want[i])
		}
	}
}

// An entry Parse would refuse, in a VCenter made by hand, still counts as
// a configured datacenter and matches none: it never widens the search to
// every datacenter.
func TestUnparsedDatacenterMatchesNothing(t *testing.T) {
	specs := VCenter{Datacenters: []string{"Folder:group-3"}}.DatacenterSpecs()
	if len(specs) != 1 {
		t.Fatalf("DatacenterSpecs() = %+v, want one entry", specs)
	}
	for _, dc := range []Datacenter{{Name: "Folder:group-3"}, {Name: "x", ID: "group-3", Path: "/Folder:group-3"}} {
		if specs[0].Matches(dc) {
			t.Errorf("%+v matches %+v", specs[0], dc)
		}
	}
	if _, ok := specs[0].Name(); ok {
		t.Error("an unparsed entry says a name")
	}
}
