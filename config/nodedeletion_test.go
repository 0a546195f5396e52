package config

import (
	"strings"
	"testing"
	"time"
)

// nodeDeletion inherits field by field from global; the scalar frozen is
// {frozen: true}; a vCenter may unfreeze what global froze.
func TestNodeDeletionResolves(t *testing.T) {
	cfg := mustParse(t, `
global:
  user: u
  password: p
  nodeDeletion: {minAbsence: 1m}
vcenter:
  a: {server: a}
  b: {server: b, nodeDeletion: frozen}
  c: {server: c, nodeDeletion: {minAbsence: 0s}}
  d: {server: d, nodeDeletion: {frozen: true, minAbsence: 5s}}
`)
	want := map[string]NodeDeletion{
		"a": {MinAbsence: time.Minute},
		"b": {MinAbsence: time.Minute, Frozen: true, FrozenBy: "vcenter.b.nodeDeletion"},
		"c": {},
		"d": {MinAbsence: 5 * time.Second, Frozen: true, FrozenBy: "vcenter.d.nodeDeletion"},
	}
	for _, vc := range cfg.VCenters {
		if vc.NodeDeletion != want[vc.Name] {
			t.Errorf("vcenter %s: NodeDeletion = %+v, want %+v", vc.Name, vc.NodeDeletion, want[vc.Name])
		}
	}

	cfg = mustParse(t, "global: {user: u, password: p, nodeDeletion: frozen}\nvcenter: {a: {server: a}, b: {server: b, nodeDeletion: {frozen: false}}}\n")
	if got, want := cfg.VCenters[0].NodeDeletion, (NodeDeletion{MinAbsence: DefaultMinAbsence, Frozen: true, FrozenBy: "global.nodeDeletion"}); got != want {
		t.Errorf("a global freeze: vcenter a has %+v, want %+v", got, want)
	}
	if got, want := cfg.VCenters[1].NodeDeletion, (NodeDeletion{MinAbsence: DefaultMinAbsence}); got != want {
		t.Errorf("a vCenter unfreezing: %+v, want %+v", got, want)
	}
}

// Each wrong form is an error naming the key and what it takes, never
// quoting the value.
func TestNodeDeletionErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"vcenter: {a: {server: a, user: u, password: p, nodeDeletion: freeze}}", "vcenter.a.nodeDeletion: want frozen, or a section of keys (minAbsence: a duration such as 30s, frozen: true or false), got a string (line 1)"},
		{"vcenter: {a: {server: a, user: u, password: p, nodeDeletion: true}}", "vcenter.a.nodeDeletion: want frozen, or a section of keys"},
		{"vcenter: {a: {server: a, user: u, password: p, nodeDeletion: [frozen]}}", "vcenter.a.nodeDeletion: want a section of keys, got a list"},
		{"global: {nodeDeletion: frozzen}\nvcenter: {a: {server: a, user: u, password: p}}", "global.nodeDeletion: want frozen"},
		{"vcenter: {a: {server: a, user: u, password: p, nodeDeletion: {minAbsence: -5s}}}", "vcenter.a.nodeDeletion.minAbsence: must be 0 or more (line 1)"},
		{"vcenter: {a: {server: a, user: u, password: p, nodeDeletion: {minAbsence: soon}}}", "vcenter.a.nodeDeletion.minAbsence: not a duration"},
		{"global: {nodeDeletion: {minAbsence: 30}}\nvcenter: {a: {server: a, user: u, password: p}}", "global.nodeDeletion.minAbsence: not a duration"},
		{"vcenter: {a: {server: a, user: u, password: p, nodeDeletion: {frozen: maybe}}}", "vcenter.a.nodeDeletion.frozen: want true or false, got a string"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.yaml, err, tc.want)
			continue
		}
		for _, v := range []string{"freeze", "frozzen", "soon", "maybe"} {
			if strings.Contains(tc.yaml, v) && strings.Contains(err.Error(), v) {
				t.Errorf("the error quotes the value %q: %v", v, err)
			}
		}
	}
}
