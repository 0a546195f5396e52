package config

import (
	"strings"
	"testing"
)

// labels.zoneHostGroups: the top level's for every vCenter, a vcenter
// section's instead for its own (an empty mapping turns them off there);
// the mapping first, then the pattern.
func TestZoneHostGroups(t *testing.T) {
	const vcs = "vcenter:\n" +
		"  east:\n    server: vc-east\n    user: u\n    password: p\n" +
		"  west:\n    server: vc-west\n    user: u\n    password: p\n    labels:\n      zoneHostGroups: {west-a: west-a}\n" +
		"  lab:\n    server: vc-lab\n    user: u\n    password: p\n    labels:\n      zoneHostGroups: {}\n"
	cfg, err := Parse([]byte(vcs + "labels:\n  region: k8s-region\n  zoneHostGroups:\n    site-a-hosts: site-a\n  zoneHostGroupPattern: '^(?P<zone>.+)-hosts$'\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cfg.Notices {
		if n.Path == "labels" {
			t.Errorf("a region category with host groups is no half of a pair: %s", n)
		}
	}
	by := map[string]*HostGroupZones{}
	for _, vc := range cfg.VCenters {
		by[vc.Name] = vc.ZoneHostGroups
	}
	if by["lab"] != nil {
		t.Errorf("lab: an empty mapping turns host groups off, got %v", by["lab"])
	}
	east, west := by["east"], by["west"]
	if east == nil || west == nil {
		t.Fatalf("east %v, west %v: want both set", east, west)
	}
	for _, tc := range []struct {
		z           *HostGroupZones
		group, zone string
		ok          bool
	}{
		{east, "site-a-hosts", "site-a", true},
		{east, "site-b-hosts", "site-b", true}, // the pattern
		{east, "gpu", "", false},
		{east, "-hosts", "", false}, // an empty zone is none
		{west, "west-a", "west-a", true},
		{west, "site-b-hosts", "", false}, // its own section, whole: no pattern
	} {
		if zone, ok := tc.z.ZoneOf(tc.group); zone != tc.zone || ok != tc.ok {
			t.Errorf("%s: ZoneOf(%q) = %q, %v; want %q, %v", tc.z, tc.group, zone, ok, tc.zone, tc.ok)
		}
	}
	if east.String() != "labels.zoneHostGroups" || west.String() != "vcenter.west.labels.zoneHostGroups" {
		t.Errorf("named %q, %q", east, west)
	}
	// None: no vCenter reads host groups, and a region alone is half a
	// pair again.
	cfg, err = Parse([]byte("vcenter:\n  east:\n    server: vc-east\n    user: u\n    password: p\nlabels:\n  region: k8s-region\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.VCenters[0].ZoneHostGroups != nil {
		t.Errorf("not configured: %v", cfg.VCenters[0].ZoneHostGroups)
	}
	if !strings.Contains(noticesText(cfg), "labels") {
		t.Errorf("a region alone without host groups: want the notice, got %q", noticesText(cfg))
	}
}

func noticesText(cfg *Config) string {
	var b strings.Builder
	for _, n := range cfg.Notices {
		b.WriteString(n.String() + "\n")
	}
	return b.String()
}

// Every mistake named by its path.
func TestZoneHostGroupsInvalid(t *testing.T) {
	const base = "vcenter:\n  east:\n    server: vc-east\n    user: u\n    password: p\n"
	for _, tc := range []struct{ section, want string }{
		{"labels:\n  zoneHostGroups:\n    a: 'site a'\n", `labels.zoneHostGroups[a]: zone "site a" is no valid label value`},
		{"labels:\n  zoneHostGroups:\n    a: ''\n", `labels.zoneHostGroups[a]: the zone is empty`},
		{"labels:\n  zoneHostGroupPattern: '^(.+)-hosts$'\n", `labels.zoneHostGroupPattern: has no named group zone`},
		{"labels:\n  zoneHostGroupPattern: '^(?P<zone>.+'\n", `labels.zoneHostGroupPattern: not a regular expression`},
		{"labels:\n  zoneHostGroups: [a, b]\n", `labels.zoneHostGroups: want a section of keys`},
		{"global:\n  labels:\n    zoneHostGroups: {a: a}\n", `global.labels: labels is a section of its own`},
		{"vcenter:\n  east:\n    labels:\n      zoneHostGroups: {a: 'x y'}\n", `vcenter.east.labels.zoneHostGroups[a]: zone "x y" is no valid label value`},
	} {
		doc := base + tc.section
		if strings.HasPrefix(tc.section, "vcenter:") {
			doc = "vcenter:\n  east:\n    server: vc-east\n    user: u\n    password: p\n    labels:\n      zoneHostGroups: {a: 'x y'}\n"
		}
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.section, err, tc.want)
		}
	}
}
