package discovery_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// A Trace in the context records every vCenter's answer to a lookup —
// found, none, or the error — and changes nothing: the same lookup
// without a trace answers the same.
func TestTraceRecordsEachVCenterAnswer(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, 100*time.Millisecond, 5, time.Minute)
	defer d.Close()
	vm := f.vms["vc2"][3]
	f.backends["vc3"].Fail(errors.New("connection refused"))

	var tr discovery.Trace
	ctx := discovery.WithTrace(t.Context(), &tr)
	res, err := d.Locate(ctx, byUUID(vm.UUID))
	if err != nil || res == nil || res.VCenter != "vc2" {
		t.Fatalf("Locate = %v, %v; want found in vc2", res, err)
	}
	got := map[string]discovery.TraceAnswer{}
	for _, a := range tr.Answers() {
		got[a.VCenter] = a
	}
	if len(got) != 3 {
		t.Fatalf("trace answers = %+v; want one per vCenter", tr.Answers())
	}
	if a := got["vc2"]; a.Err != nil || len(a.Found) != 1 || a.Found[0].VM.UUID != vm.UUID || a.Pass != discovery.PassDirect || a.Breaker != "closed" {
		t.Errorf("vc2's answer = %+v; want found %s, direct, breaker closed", a, vm.UUID)
	}
	if a := got["vc1"]; a.Err != nil || len(a.Found) != 0 {
		t.Errorf("vc1's answer = %+v; want none found, no error", a)
	}
	if a := got["vc3"]; a.Err == nil || len(a.Found) != 0 {
		t.Errorf("vc3's answer = %+v; want its error", a)
	}
	for _, a := range got {
		if a.Latency <= 0 || a.Lookup == "" {
			t.Errorf("%s: latency %v, lookup %q; want both", a.VCenter, a.Latency, a.Lookup)
		}
	}

	// The second lookup is served from the remembered location: traced
	// as such, one answer.
	var again discovery.Trace
	if res, err := d.Locate(discovery.WithTrace(t.Context(), &again), byUUID(vm.UUID)); err != nil || res == nil {
		t.Fatalf("second Locate = %v, %v", res, err)
	}
	if as := again.Answers(); len(as) != 1 || as[0].Pass != discovery.PassRemembered || as[0].VCenter != "vc2" {
		t.Errorf("second lookup's trace = %+v; want vc2's remembered location re-read", as)
	}

	// Without a trace the answers are the same.
	if res2, err2 := d.Locate(t.Context(), byUUID(vm.UUID)); err2 != nil || res2.VCenter != res.VCenter || res2.VM.UUID != res.VM.UUID {
		t.Errorf("untraced Locate = %v, %v; want %v", res2, err2, res)
	}
}

// A lookup that cannot conclude traces the vCenter that did not answer
// with its error and breaker state, and an absence traces every "none".
func TestTraceOfAnUnansweredAndAnAbsentLookup(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, 50*time.Millisecond, 1, time.Minute)
	defer d.Close()
	f.backends["vc1"].Hang(true)
	var tr discovery.Trace
	_, err := d.Locate(discovery.WithTrace(t.Context(), &tr), byUUID("42ffffff-ffff-4fff-8fff-ffffffffffff"))
	if err == nil {
		t.Fatal("Locate with vc1 hanging: no error")
	}
	var vc1 []discovery.TraceAnswer
	for _, a := range tr.Answers() {
		if a.VCenter == "vc1" {
			vc1 = append(vc1, a)
		}
	}
	if len(vc1) == 0 || !errors.Is(vc1[0].Err, context.DeadlineExceeded) || vc1[0].Breaker != "open" {
		t.Fatalf("vc1's answers = %+v; want a deadline error with its breaker open (one failure trips it)", vc1)
	}

	// Its breaker open, the next lookup sends it nothing: traced so.
	var again discovery.Trace
	_, _ = d.Locate(discovery.WithTrace(t.Context(), &again), byUUID("42ffffff-ffff-4fff-8fff-ffffffffffff"))
	for _, a := range again.Answers() {
		if a.VCenter == "vc1" && (a.Pass != discovery.PassNotAsked || !errors.Is(a.Err, discovery.ErrBreakerOpen)) {
			t.Errorf("vc1 with its breaker open: %+v; want not asked, ErrBreakerOpen", a)
		}
	}

	f.backends["vc1"].Hang(false)
	f2 := newFleet()
	d2 := f2.discoverer(t, time.Second, 5, time.Minute)
	defer d2.Close()
	var absent discovery.Trace
	res, err := d2.Locate(discovery.WithTrace(t.Context(), &absent), byUUID("42ffffff-ffff-4fff-8fff-ffffffffffff"))
	if err != nil || res != nil {
		t.Fatalf("absent: %v, %v; want nil, nil", res, err)
	}
	if as := absent.Answers(); len(as) != 3 {
		t.Fatalf("absent: trace %+v; want 3 answers", as)
	}
	for _, a := range absent.Answers() {
		if a.Err != nil || len(a.Found) != 0 {
			t.Errorf("absent: %s answered %+v; want none", a.VCenter, a)
		}
	}
}

// Connect probes every vCenter and waits: afterwards each is known up or
// down, so a lookup meets no "still connecting" vCenter.
func TestConnectSettlesEveryVCenter(t *testing.T) {
	f := newFleet()
	for _, b := range f.backends {
		b.SetReachability(backends.ConnUnknown, nil)
	}
	d := f.discoverer(t, time.Second, 5, time.Minute)
	defer d.Close()
	d.Connect(t.Context())
	for _, h := range d.Health() {
		if f.backends[h.Name].Probes() != 1 {
			t.Errorf("%s probed %d times; want 1", h.Name, f.backends[h.Name].Probes())
		}
		if h.Breaker != "closed" {
			t.Errorf("%s breaker %q; want closed", h.Name, h.Breaker)
		}
	}
}
