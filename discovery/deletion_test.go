package discovery_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// policyFleet is the three fake vCenters, each with its deletion policy,
// under a fake clock; victim is vc1's first VM, keys its Node's.
type policyFleet struct {
	*fleet
	clock    *clocktesting.FakePassiveClock
	d        *discovery.Discoverer
	policies map[string]config.NodeDeletion
	victim   backends.VM
	keys     discovery.NodeKeys
}

func newPolicyFleet(t *testing.T, policies map[string]config.NodeDeletion) *policyFleet {
	t.Helper()
	f := &policyFleet{fleet: newFleet(), clock: clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0)), policies: policies}
	f.d = discovery.New(f.targets(), discovery.Options{Clock: f.clock})
	t.Cleanup(f.d.Close)
	f.victim = f.vms["vc1"][0]
	f.keys = discovery.NodeKeys{Name: "node-a", ProviderID: discovery.ProviderID(f.victim.UUID)}
	return f
}

func (f *policyFleet) targets() []discovery.Target {
	var vcs []discovery.Target
	for _, n := range f.names {
		vcs = append(vcs, discovery.Target{Name: n, Server: n + ":443", Backend: f.backends[n], RequestTimeout: time.Second,
			ConsecutiveFailures: 5, OpenTimeout: time.Minute, NodeDeletion: f.policies[n]})
	}
	return vcs
}

func (f *policyFleet) after(d time.Duration) { f.clock.SetTime(f.clock.Now().Add(d)) }

// exists asks Exists and returns the DeletionHeldError, nil for (nil,
// nil); anything else fails the test.
func (f *policyFleet) exists(t *testing.T) *discovery.DeletionHeldError {
	t.Helper()
	res, err := f.d.Exists(t.Context(), f.keys)
	if res != nil {
		t.Fatalf("Exists found %s", res)
	}
	if err == nil {
		return nil
	}
	var held *discovery.DeletionHeldError
	if !errors.As(err, &held) {
		t.Fatalf("Exists: %v, want a DeletionHeldError or absence", err)
	}
	return held
}

func (f *policyFleet) held(t *testing.T) map[string]discovery.HeldNodes {
	t.Helper()
	out := map[string]discovery.HeldNodes{}
	for _, h := range f.d.Health() {
		out[h.Name] = h.Held
	}
	return out
}

// The grace: absence is reported only once answers of absence span the
// longest minAbsence of the vCenters that could hold the VM; before, an
// error saying how long it has been absent and how long it must be.
func TestGraceHoldsAbsenceUntilItsSpan(t *testing.T) {
	f := newPolicyFleet(t, map[string]config.NodeDeletion{"vc2": {MinAbsence: 30 * time.Second}, "vc3": {MinAbsence: 10 * time.Second}})
	f.backends["vc1"].Remove(f.victim.Ref.ID)

	held := f.exists(t)
	if held == nil || held.Reason != discovery.HeldGrace {
		t.Fatalf("first absence: %v, want held by the grace", held)
	}
	f.after(12 * time.Second)
	held = f.exists(t)
	if held == nil {
		t.Fatal("12s of 30s: reported absent")
	}
	for _, want := range []string{"confirmed absent 12s ago", "after 30s of absence (nodeDeletion.minAbsence of vcenter vc2)"} {
		if !strings.Contains(held.Error(), want) {
			t.Errorf("error %q, want it to say %q", held.Error(), want)
		}
	}
	if held.Remaining() != 18*time.Second {
		t.Errorf("Remaining = %s, want 18s", held.Remaining())
	}
	if h := f.held(t); h["vc2"].Grace != 1 || h["vc3"].Nodes() != 0 || h["vc1"].Nodes() != 0 {
		t.Errorf("Held = %+v, want one Node held by vc2's grace alone (vc3's 10s have passed)", h)
	}
	f.after(17 * time.Second)
	if held := f.exists(t); held == nil {
		t.Fatal("29s of 30s: reported absent")
	}
	f.after(time.Second)
	if held := f.exists(t); held != nil {
		t.Fatalf("30s of 30s: %v, want absence", held)
	}
	if h := f.held(t); h["vc2"].Nodes() != 0 {
		t.Errorf("after absence was reported, Held = %+v, want none", h)
	}
	// Reported once, the next absence is a new run.
	if held := f.exists(t); held == nil {
		t.Error("the answer after a reported absence: reported absent at once, want a grace of its own")
	}
}

// An answer that finds the VM in between starts the grace over: absence
// at 0s, found at 20s, absent again at 21s, so at 35s it has been absent
// 14s, not 35s.
func TestFoundInBetweenStartsTheGraceOver(t *testing.T) {
	for _, tc := range []struct {
		name string
		find func(f *policyFleet) (*discovery.Result, error)
	}{
		{"Exists", func(f *policyFleet) (*discovery.Result, error) { return f.d.Exists(t.Context(), f.keys) }},
		{"Locate", func(f *policyFleet) (*discovery.Result, error) { return f.d.Locate(t.Context(), f.keys) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPolicyFleet(t, map[string]config.NodeDeletion{"vc1": {MinAbsence: 30 * time.Second}})
			b := f.backends["vc1"]
			b.Remove(f.victim.Ref.ID)
			if f.exists(t) == nil {
				t.Fatal("first absence reported")
			}
			f.after(20 * time.Second)
			b.Add(f.victim, nil) // back: an unregister and register again
			if res, err := tc.find(f); err != nil || res == nil {
				t.Fatalf("%s with the VM back: %v, %v", tc.name, res, err)
			}
			b.Remove(f.victim.Ref.ID)
			f.after(time.Second)
			if f.exists(t) == nil {
				t.Fatal("absent again at 21s: reported at once")
			}
			f.after(14 * time.Second) // 35s since the first absence
			held := f.exists(t)
			if held == nil {
				t.Fatal("35s after the first absence but 14s after the VM was found: reported absent; the found answer did not start the grace over")
			}
			if held.Since != f.clock.Now().Add(-14*time.Second) {
				t.Errorf("Since = %s, want the absence after the VM was found", held.Since)
			}
			f.after(16 * time.Second)
			if held := f.exists(t); held != nil {
				t.Errorf("30s after the new run began: %v, want absence", held)
			}
		})
	}
}

// An error in between is no answer: it neither reports absence nor
// starts the grace over.
func TestErrorInBetweenKeepsTheGraceRunning(t *testing.T) {
	f := newPolicyFleet(t, map[string]config.NodeDeletion{"vc1": {MinAbsence: 30 * time.Second}})
	f.backends["vc1"].Remove(f.victim.Ref.ID)
	if f.exists(t) == nil {
		t.Fatal("first absence reported")
	}
	f.after(20 * time.Second)
	f.backends["vc2"].Fail(errors.New("refused"))
	if res, err := f.d.Exists(t.Context(), f.keys); res != nil || err == nil {
		t.Fatalf("with vc2 failing: %v, %v, want an error", res, err)
	} else if errors.As(err, new(*discovery.DeletionHeldError)) {
		t.Fatalf("with vc2 failing: %v, want a lookup error, not a held absence", err)
	}
	f.backends["vc2"].Fail(nil)
	f.after(10 * time.Second)
	if held := f.exists(t); held != nil {
		t.Errorf("30s of absence with an error in between: %v, want absence", held)
	}
}

// A frozen vCenter that could hold the VM never lets absence through, for
// as long as it is frozen; the error names the freeze and its key. The
// grace runs on meanwhile: unfrozen after it passed, the next answer
// reports absence.
func TestFrozenVCenterNeverYieldsAbsence(t *testing.T) {
	frozen := config.NodeDeletion{MinAbsence: 5 * time.Second, Frozen: true, FrozenBy: "vcenter.vc3.nodeDeletion"}
	f := newPolicyFleet(t, map[string]config.NodeDeletion{"vc3": frozen})
	f.backends["vc1"].Remove(f.victim.Ref.ID)
	for range 5 {
		held := f.exists(t)
		if held == nil || held.Reason != discovery.HeldFrozen {
			t.Fatalf("frozen: %v, want held by the freeze", held)
		}
		if want := "deletion is frozen for vcenter vc3 (vcenter.vc3.nodeDeletion: frozen)"; !strings.Contains(held.Error(), want) {
			t.Errorf("error %q, want it to say %q", held.Error(), want)
		}
		if h := f.held(t); h["vc3"].Frozen != 1 || h["vc1"].Nodes()+h["vc2"].Nodes() != 0 {
			t.Errorf("Held = %+v, want one Node held by vc3's freeze", h)
		}
		f.after(time.Minute) // asked about every minute: remembered
	}
	// The edit: unfrozen, same backends (a reload keeps them).
	f.policies["vc3"] = config.NodeDeletion{MinAbsence: 5 * time.Second}
	f.d.SetVCenters(f.targets())
	if h := f.held(t); h["vc3"].Nodes() != 0 {
		t.Errorf("unfrozen: Held = %+v, want none (its grace has passed)", h)
	}
	if held := f.exists(t); held != nil {
		t.Errorf("unfrozen after minutes of absence: %v, want absence", held)
	}
}

// A Node held back but no longer asked about (Ready again, or deleted by
// someone) is forgotten: memory stays bounded, and asked again its grace
// starts over.
func TestHeldNodesNotAskedAboutAreForgotten(t *testing.T) {
	f := newPolicyFleet(t, map[string]config.NodeDeletion{"vc1": {MinAbsence: 2 * time.Minute}})
	f.backends["vc1"].Remove(f.victim.Ref.ID)
	if f.exists(t) == nil {
		t.Fatal("first absence reported")
	}
	f.after(19 * time.Minute) // under 10× the grace
	if h := f.held(t); h["vc1"].Nodes() != 0 {
		t.Errorf("grace over, Held = %+v: want none held by the grace", h)
	}
	f.after(2 * time.Minute) // 21 minutes without an answer
	if held := f.exists(t); held == nil || held.Absent != 0 {
		t.Errorf("asked again after 21 minutes: %v, want a new grace", held)
	}
}

// Without a grace or a freeze, absence is reported at once, as before.
func TestNoPolicyIsAbsenceAtOnce(t *testing.T) {
	f := newPolicyFleet(t, nil)
	f.backends["vc1"].Remove(f.victim.Ref.ID)
	if held := f.exists(t); held != nil {
		t.Fatalf("no policy: %v, want absence", held)
	}
	for _, h := range f.d.Health() {
		if h.Held.Nodes() != 0 {
			t.Errorf("Held = %+v, want none", h.Held)
		}
	}
}
