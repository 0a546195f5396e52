package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// threeVCenters is diagConfig with a third vCenter.
var threeVCenters = strings.Replace(diagConfig, "labels:", "  vcC:\n    server: c.example.com\nlabels:", 1)

// answersBy is a report's answers by vCenter (the last of each).
func answersBy(r *nodeReport) map[string]vcenterAnswer {
	out := map[string]vcenterAnswer{}
	for _, a := range r.Lookup {
		out[a.VCenter] = a
	}
	return out
}

// The report shows each vCenter's answer to the lookup — found, none, or
// its error — as its backend gave it, logged from outside the lookup; a
// lookup served from the remembered location shows that one answer; and
// the lookup answers the same without a log.
func TestDiagnoseShowsEachVCenterAnswer(t *testing.T) {
	fleet := map[string]*backendtest.Backend{"vcA": backendtest.New(), "vcB": backendtest.New(), "vcC": backendtest.New()}
	fleet["vcB"].Add(diagVM("vm-1", "node-1", diagUUID), diagTags)
	fleet["vcC"].FailQuery(backends.ByUUID, errors.New("connection refused"))
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + diagUUID}}
	d := testDiagnoserOf(t, threeVCenters, fleet, fake.NewClientset(node))

	r, _ := report(t, d, node)
	got := answersBy(r)
	if len(got) != 3 {
		t.Fatalf("answers %+v; want one per vCenter", r.Lookup)
	}
	if a := got["vcB"]; a.Answer != "found" || len(a.Found) != 1 || !strings.Contains(a.Found[0], "vm-1") ||
		a.Pass != passDirect || a.Breaker != "closed" {
		t.Errorf("vcB's answer %+v; want found vm-1, direct, breaker closed", a)
	}
	if a := got["vcA"]; a.Answer != "absent" || a.Error != "" {
		t.Errorf("vcA's answer %+v; want none found, no error", a)
	}
	if a := got["vcC"]; a.Answer != "error" || !strings.Contains(a.Error, "connection refused") {
		t.Errorf("vcC's answer %+v; want its error", a)
	}
	for _, a := range r.Lookup {
		if a.LatencyMS <= 0 || a.Lookup != `uuid "`+diagUUID+`"` {
			t.Errorf("%s: latency %v, lookup %q; want both", a.VCenter, a.LatencyMS, a.Lookup)
		}
	}

	// The next lookup is served from the remembered location: one answer.
	var calls callLog
	res, err := d.provider.Locate(context.WithValue(t.Context(), callLogKey{}, &calls), node)
	if err != nil || res == nil || res.VCenter != "vcB" {
		t.Fatalf("second Locate = %v, %v; want vcB", res, err)
	}
	as := calls.report(err, d.provider.VCenterStatuses())
	if len(as) != 1 || as[0].Pass != passRemembered || as[0].VCenter != "vcB" {
		t.Errorf("second lookup's answers %+v; want vcB's remembered location re-read", as)
	}
	// Without a log the answer is the same.
	res2, err2 := d.provider.Locate(t.Context(), node)
	if err2 != nil || res2.VCenter != res.VCenter || res2.VM.UUID != res.VM.UUID {
		t.Errorf("unlogged Locate = %v, %v; want %v", res2, err2, res)
	}
}

// A lookup that cannot conclude shows the vCenter that did not answer
// with its error and breaker; one whose breaker is then open is shown
// not asked, with the lookup's error; an absence shows every "none".
func TestDiagnoseShowsUnansweredAndAbsentLookups(t *testing.T) {
	fleet := map[string]*backendtest.Backend{"vcA": backendtest.New(), "vcB": backendtest.New(), "vcC": backendtest.New()}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-gone"},
		Spec: v1.NodeSpec{ProviderID: "vsphere://" + diagUUID}}
	oneFailure := strings.Replace(threeVCenters, "requestTimeout: 2s\n",
		"requestTimeout: 50ms\n  breaker:\n    consecutiveFailures: 1\n    openTimeout: 1m\n", 1)
	d := testDiagnoserOf(t, oneFailure, fleet, fake.NewClientset(node))
	fleet["vcA"].Hang(true) // once settled: up, then silent

	r, _ := report(t, d, node)
	a := answersBy(r)["vcA"]
	if a.Answer != "error" || !strings.Contains(a.Error, "deadline exceeded") || a.Breaker != "open" {
		t.Fatalf("vcA's answer %+v; want a deadline error with its breaker open (one failure trips it)", a)
	}
	r, _ = report(t, d, node)
	if a := answersBy(r)["vcA"]; a.Pass != passNotAsked || a.Answer != "error" || !strings.Contains(a.Error, "breaker") {
		t.Errorf("vcA with its breaker open: %+v; want not asked, its breaker named", a)
	}

	fleet["vcA"].Hang(false)
	absent := map[string]*backendtest.Backend{"vcA": backendtest.New(), "vcB": backendtest.New(), "vcC": backendtest.New()}
	r, _ = report(t, testDiagnoserOf(t, threeVCenters, absent, fake.NewClientset(node)), node)
	if len(answersBy(r)) != 3 {
		t.Fatalf("absent: answers %+v; want 3", r.Lookup)
	}
	for _, a := range r.Lookup {
		if a.Answer != "absent" {
			t.Errorf("absent: %s answered %+v; want none", a.VCenter, a)
		}
	}
}

// A VM found while another vCenter is down: the report shows the one
// that was not asked, with why, and the verdict says it was not needed.
func TestDiagnoseShowsAVCenterNotAsked(t *testing.T) {
	fleet := newDiagFleet()
	fleet["vcA"].Add(diagVM("vm-1", "node-1", diagUUID), diagTags)
	fleet["vcB"].Fail(errors.New("dial tcp: connection refused")) // its probe at Settle too
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: v1.NodeSpec{ProviderID: "vsphere://" + diagUUID}}
	r, _ := report(t, testDiagnoser(t, fleet, fake.NewClientset(node)), node)
	got := answersBy(r)
	if len(r.Lookup) != 2 || got["vcA"].Answer != "found" {
		t.Fatalf("answers %+v; want vcA's and vcB's, vcA found", r.Lookup)
	}
	a := got["vcB"]
	if a.Pass != passNotAsked || a.Answer != "error" || !strings.Contains(a.Error, "connection refused") ||
		a.Reachability != "down" {
		t.Errorf("vcB's answer %+v; want not asked, down, its error", a)
	}
	if !slices.ContainsFunc(r.Why, func(s string) bool { return strings.HasPrefix(s, "vcB did not answer") }) {
		t.Errorf("why = %q; want vcB's silence explained", r.Why)
	}
}
