package config

import (
	"slices"
	"strings"
	"testing"
)

func TestParseRequestBudget(t *testing.T) {
	cfg := mustParse(t, `
global: {user: u, password: p, requestsPerSecond: 0.5}
vcenter:
  inherits: {server: a}
  own: {server: b, requestsPerSecond: 40, requestBurst: 3}
`)
	if vc := cfg.VCenters[0]; vc.RequestsPerSecond != 0.5 || vc.RequestBurst != DefaultRequestBurst {
		t.Errorf("inherits: %v/s burst %d, want global's 0.5/s and the default burst %d", vc.RequestsPerSecond, vc.RequestBurst, DefaultRequestBurst)
	}
	if vc := cfg.VCenters[1]; vc.RequestsPerSecond != 40 || vc.RequestBurst != 3 {
		t.Errorf("own: %v/s burst %d, want 40/s burst 3", vc.RequestsPerSecond, vc.RequestBurst)
	}
	def := mustParse(t, "vcenter: {a: {server: a, user: u, password: p}}").VCenters[0]
	if def.RequestsPerSecond != DefaultRequestsPerSecond || def.RequestBurst != DefaultRequestBurst {
		t.Errorf("defaults: %v/s burst %d", def.RequestsPerSecond, def.RequestBurst)
	}
}

func TestParseRequestBudgetErrors(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"zero rate", "vcenter: {a: {server: a, user: u, password: p, requestsPerSecond: 0}}", "vcenter.a.requestsPerSecond: must be a number > 0"},
		{"negative rate", "vcenter: {a: {server: a, user: u, password: p, requestsPerSecond: -2}}", "vcenter.a.requestsPerSecond: must be a number > 0"},
		{"not a number", "vcenter: {a: {server: a, user: u, password: p, requestsPerSecond: fast}}", "vcenter.a.requestsPerSecond: want a number, got a string (line 1)"},
		{"NaN", "vcenter: {a: {server: a, user: u, password: p, requestsPerSecond: .nan}}", "vcenter.a.requestsPerSecond: must be a number > 0"},
		{"infinite", "vcenter: {a: {server: a, user: u, password: p, requestsPerSecond: .inf}}", "vcenter.a.requestsPerSecond: must be a number > 0"},
		{"global rate", "global: {requestsPerSecond: -1}\nvcenter: {a: {server: a, user: u, password: p}}", "global.requestsPerSecond: must be a number > 0"},
		{"zero burst", "vcenter: {a: {server: a, user: u, password: p, requestBurst: 0}}", "vcenter.a.requestBurst: must be a whole number > 0"},
		{"negative burst", "vcenter: {a: {server: a, user: u, password: p, requestBurst: -5}}", "vcenter.a.requestBurst: must be a whole number > 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
		})
	}
}

func TestParseThumbprints(t *testing.T) {
	for _, tt := range []struct {
		name, conf string
		want       []string
	}{
		{"CPI's single value", `vcenter: {a: {server: a, user: u, password: p, thumbprint: "AA:BB"}}`, []string{"AA:BB"}},
		{"a list", `vcenter: {a: {server: a, user: u, password: p, thumbprint: ["AA:BB", "CC:DD"]}}`, []string{"AA:BB", "CC:DD"}},
		{"comma-separated", `vcenter: {a: {server: a, user: u, password: p, thumbprint: "AA:BB, CC:DD"}}`, []string{"AA:BB", "CC:DD"}},
		{"global's list", "global: {thumbprint: [\"AA:BB\", \"CC:DD\"]}\nvcenter: {a: {server: a, user: u, password: p}}", []string{"AA:BB", "CC:DD"}},
		{"INI", "[Global]\nuser = u\npassword = p\nthumbprint = \"AA:BB,CC:DD\"\n[VirtualCenter \"a\"]\n", []string{"AA:BB", "CC:DD"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tt.conf)
			if got := cfg.VCenters[0].Thumbprints; !slices.Equal(got, tt.want) {
				t.Errorf("Thumbprints = %q, want %q", got, tt.want)
			}
		})
	}
}
