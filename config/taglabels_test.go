package config

import (
	"fmt"
	"strings"
	"testing"
)

// nodes.tagLabels: a label per tag category, keys of the operator's own
// domain; every mistake named with its category.
func TestTagLabels(t *testing.T) {
	const base = "vcenter:\n  vc1:\n    server: vc1.example.com\n    user: u\n    password: p\n"
	cfg, err := Parse([]byte(base + "nodes:\n  tagLabels:\n    rack: example.com/rack\n    cost centre: finance.example.com/cost-centre\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(cfg.TagLabels), "[{rack example.com/rack} {cost centre finance.example.com/cost-centre}]"; got != want {
		t.Fatalf("TagLabels %s; want %s (by key)", got, want)
	}
	if cfg, err := Parse([]byte(base)); err != nil || len(cfg.TagLabels) != 0 {
		t.Fatalf("none configured: %v, %v", cfg.TagLabels, err)
	}
	for _, tc := range []struct{ section, want string }{
		{"    rack: rack\n", `nodes.tagLabels[rack]: label key "rack" has no prefix`},
		{"    rack: kubernetes.io/rack\n", `nodes.tagLabels[rack]: label key "kubernetes.io/rack" is in a reserved domain`},
		{"    rack: node.kubernetes.io/rack\n", `is in a reserved domain`},
		{"    rack: topology.k8s.io/rack\n", `is in a reserved domain`},
		{"    rack: vsphere-federated-ccm.io/rack\n", `is in a reserved domain`},
		{"    rack: example.com/a rack\n", `nodes.tagLabels[rack]: label key "example.com/a rack": name part must consist of`},
		{"    rack: example.com/rack\n    row: example.com/rack\n", `nodes.tagLabels[row]: label key "example.com/rack" is category "rack"'s too`},
	} {
		_, err := Parse([]byte(base + "nodes:\n  tagLabels:\n" + tc.section))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error saying %s", tc.section, err, tc.want)
		}
	}
}
