package discovery_test

// Tests of single decisions of the absence code that the scenario tests
// pass through without telling their branches apart: each asserts what one
// comparison decides, so that the comparison turned the other way (a
// mutation test's mutant, see test/mutation.sh) fails it.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
)

func TestRetiredNamesWhatLeft(t *testing.T) {
	since := time.Date(2026, 2, 1, 10, 0, 0, 0, time.FixedZone("x", 3600))
	until := since.Add(time.Hour)
	where := discovery.VCenterRecord{Server: "vc.example.com", Port: 443, InstanceUUID: "i-1"}
	at := func(server string, port int) discovery.VCenterRecord {
		return discovery.VCenterRecord{Server: server, Port: port}
	}
	for _, c := range []struct {
		r    discovery.Retired
		want string
	}{
		{discovery.Retired{VCenter: "old"}, "vcenter old"},
		{discovery.Retired{VCenter: "old", VCenterRecord: at("vc.example.com", 443)}, "vcenter old at vc.example.com:443"},
		// A record without a port (written before it was kept) is at the
		// default one; servers compare lowercased.
		{discovery.Retired{VCenter: "old", VCenterRecord: at("VC.example.com", 0)}, "vcenter old at vc.example.com:443"},
		{discovery.Retired{VCenter: "old", VCenterRecord: at("vc.example.com", 8443)}, "vcenter old at vc.example.com:8443"},
		{discovery.Retired{VCenter: "old", VCenterRecord: where, Datacenter: "*"}, "the datacenters no longer listed of vcenter old at vc.example.com:443 (instance i-1)"},
		{discovery.Retired{VCenter: "old", Datacenter: "dc1", Since: since}, "datacenter dc1 of vcenter old (left the config 2026-02-01T09:00:00Z)"},
		{discovery.Retired{VCenter: "old", Since: since, Until: until}, "vcenter old (left the config 2026-02-01T09:00:00Z, remembered until 2026-02-01T10:00:00Z)"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.r, got, c.want)
		}
	}
}

func TestLabelValues(t *testing.T) {
	for _, c := range []struct{ server, want string }{
		{"vc.example.com:443", "vc.example.com"},
		{"vc.example.com:8443", discovery.LabelValue("vc.example.com:8443")},
		{"vc.example.com", "vc.example.com"},
	} {
		if got := discovery.ServerLabelValue(c.server); got != c.want {
			t.Errorf("ServerLabelValue(%q) = %q, want %q", c.server, got, c.want)
		}
	}
	if got := discovery.LabelValue("dc-1"); got != "dc-1" {
		t.Errorf("LabelValue(dc-1) = %q", got)
	}
	long := strings.Repeat("a", 64)
	if got := discovery.LabelValue(long); !strings.HasPrefix(got, "sha256-") || len(got) != len("sha256-")+40 {
		t.Errorf("LabelValue(64 characters) = %q, want sha256- and 40 hex digits", got)
	}
	if discovery.LabelValue("fd00::1") == discovery.LabelValue("fd00::2") {
		t.Error("two IPv6 servers share a label value")
	}
}

func TestUUIDCharacters(t *testing.T) {
	for _, u := range []string{
		"09af09af-09af-09af-09af-09af09af09af",
		" 0123456F-89AB-CDEF-0123-456789ABCDEF ",
	} {
		if _, err := discovery.NormalizeUUID(u); err != nil {
			t.Errorf("NormalizeUUID(%q): %v", u, err)
		}
	}
	for _, u := range []string{
		"/0000000-0000-0000-0000-000000000000",
		":0000000-0000-0000-0000-000000000000",
		"`0000000-0000-0000-0000-000000000000",
		"g0000000-0000-0000-0000-000000000000",
		"00000000-0000-0000-0000-00000000000",
		"00000000-0000-0000-0000-0000000000000",
		"000000000000-0000-0000-00000000-0000",
		"00000000x0000-0000-0000-000000000000",
	} {
		if got, err := discovery.NormalizeUUID(u); err == nil {
			t.Errorf("NormalizeUUID(%q) = %q, want an error", u, got)
		}
	}
	if _, err := discovery.NormalizeUUID("00000000-0000-0000-00000000000000000"); err == nil || !strings.Contains(err.Error(), "position 24") {
		t.Errorf("misplaced dash: err = %v, want it at position 24", err)
	}
	if got := discovery.SwapByteOrder("00112233-4455-6677-8899-aabbccddeeff"); got != "33221100-5544-7766-8899-aabbccddeeff" {
		t.Errorf("SwapByteOrder = %q", got)
	}
	if got := discovery.ProviderID("4200ABCD-0000-0000-0000-000000000001"); got != "vsphere://4200abcd-0000-0000-0000-000000000001" {
		t.Errorf("ProviderID = %q", got)
	}
	if _, err := discovery.ParseProviderID("vsphere://not-a-uuid"); err == nil || !strings.Contains(err.Error(), "vsphere://not-a-uuid") {
		t.Errorf("ParseProviderID(bad uuid) err = %v", err)
	}
}

func TestIdentityComparisons(t *testing.T) {
	a := discovery.Identity{Server: "vc.example.com:443"}
	ax := discovery.Identity{Server: "vc.example.com:443", InstanceUUID: "x"}
	ay := discovery.Identity{Server: "vc.example.com:443", InstanceUUID: "y"}
	bx := discovery.Identity{Server: "other.example.com:443", InstanceUUID: "x"}
	for _, c := range []struct {
		id, cur discovery.Identity
		want    bool
	}{
		{a, ax, true}, {a, a, true}, {ax, ax, true}, {ax, a, false}, {ax, ay, false}, {bx, ax, false},
	} {
		if got := c.id.Is(c.cur); got != c.want {
			t.Errorf("%v.Is(%v) = %v, want %v", c.id, c.cur, got, c.want)
		}
	}
	if a.String() != "vc.example.com:443" || ax.String() != "vc.example.com:443 (instance x)" {
		t.Errorf("String: %q, %q", a.String(), ax.String())
	}
	if got := discovery.ServerKey("[FD00::1]", 443); got != "[fd00::1]:443" {
		t.Errorf("ServerKey = %q", got)
	}
}

func TestDeletionHeldErrorSaysWhy(t *testing.T) {
	grace := &discovery.DeletionHeldError{What: "uuid u", Reason: discovery.HeldGrace, VCenters: []string{"a"}, Absent: 10 * time.Second, MinAbsence: 30 * time.Second}
	if got := grace.Remaining(); got != 20*time.Second {
		t.Errorf("Remaining = %s, want 20s", got)
	}
	if msg := grace.Error(); !strings.Contains(msg, "confirmed absent 10s ago") || !strings.Contains(msg, "minAbsence of vcenter a)") {
		t.Errorf("grace message %q", msg)
	}
	grace.VCenters = []string{"a", "b"}
	grace.Absent = 1500 * time.Microsecond
	if msg := grace.Error(); !strings.Contains(msg, "vcenters a, b") || !strings.Contains(msg, "absent 2ms ago") {
		t.Errorf("grace message %q", msg)
	}
	grace.Absent = 40 * time.Second
	if got := grace.Remaining(); got != 0 {
		t.Errorf("Remaining past the grace = %s, want 0", got)
	}
	frozen := &discovery.DeletionHeldError{What: "uuid u", Reason: discovery.HeldFrozen, VCenters: []string{"a"}, Keys: []string{"vcenter.a.nodeDeletion", "global.nodeDeletion"}, Absent: time.Second, MinAbsence: time.Minute}
	if got := frozen.Remaining(); got != 0 {
		t.Errorf("Remaining while frozen = %s, want 0", got)
	}
	if msg := frozen.Error(); !strings.Contains(msg, "frozen for vcenter a (vcenter.a.nodeDeletion: frozen, global.nodeDeletion: frozen)") {
		t.Errorf("frozen message %q", msg)
	}
	if n := (discovery.HeldNodes{Grace: 3, Frozen: 4}).Nodes(); n != 7 {
		t.Errorf("Nodes = %d, want 7", n)
	}
}

// uuidBlind is a vCenter whose UUID searches find nothing, while its
// other searches find its VMs.
type uuidBlind struct{ *backendtest.Backend }

func (b uuidBlind) Find(ctx context.Context, q backends.Query) ([]backends.VM, error) {
	if q.By == backends.ByUUID {
		return nil, nil
	}
	return b.Backend.Find(ctx, q)
}

// A VM found by a fallback whose UUID is the Node's system UUID, in either
// byte order, is no mismatch: nothing is logged about it. One of another
// UUID is.
func TestFallbackMatchingTheSystemUUIDLogsNoMismatch(t *testing.T) {
	const uuid = "42000000-bbbb-4000-8000-000000000001"
	b := backendtest.New()
	b.Add(backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: "vm-1"}, Name: "vm-1", UUID: uuid, GuestHostName: "web-1.example.com", PowerState: backends.PoweredOn}, nil)
	d := discovery.New([]discovery.Target{{Name: "vc1", Server: "vc1:443", Backend: uuidBlind{b}, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute}}, discovery.Options{})
	t.Cleanup(d.Close)
	var logs logLines
	ctx := logs.ctx(t)
	for _, system := range []string{uuid, discovery.SwapByteOrder(uuid)} {
		res, err := d.Locate(ctx, discovery.NodeKeys{Name: "web-1.example.com", SystemUUID: system})
		if err != nil || res == nil || res.VM.UUID != uuid {
			t.Fatalf("Locate(system UUID %s) = %v, %v; want the VM by its guest host name", system, res, err)
		}
	}
	if got := logs.with("another UUID"); len(got) != 0 {
		t.Fatalf("the VM of the Node's own system UUID was logged as a mismatch: %q", got)
	}
	if _, err := d.Locate(ctx, discovery.NodeKeys{Name: "web-1.example.com", SystemUUID: noSuchUUID}); err != nil {
		t.Fatal(err)
	}
	if got := logs.with("another UUID", noSuchUUID); len(got) != 1 {
		t.Fatalf("a VM of another UUID than the system UUID: logged %q, want one line", logs.with())
	}
}

// A Node labelled with a datacenter no longer configured: the vCenter is
// asked for its datacenters only when one is configured by ID, whose name
// only it can tell; with every one named, not even when it cannot answer.
func TestLabelledDatacenterNotNamedNeedsNoDatacenterRead(t *testing.T) {
	b, vms := placedVCenter()
	vm := vms["east"]
	b.Remove(vm.Ref.ID)
	keys := discovery.NodeKeys{Name: vm.Name, ProviderID: discovery.ProviderID(vm.UUID), ClaimedVCenter: "vc1", ClaimedDatacenter: "north"}
	d := datacenterDiscoverer(t, b, specs(t, "east", "Datacenter:datacenter-4"))
	before := b.DatacenterCalls()
	if _, err := d.Exists(t.Context(), keys); err == nil || !strings.Contains(err.Error(), "datacenter north of vcenter vc1 (by its labels), which is no longer configured") {
		t.Fatalf("Exists(labelled north) err = %v; want north not configured", err)
	}
	if n := b.DatacenterCalls() - before; n != 1 {
		t.Fatalf("the vCenter was asked %d times for its datacenters, want once (for datacenter-4)", n)
	}
	b.FailDatacenters(errors.New("no answer within requestTimeout"))
	d2 := datacenterDiscoverer(t, b, specs(t, "east", "/amer/west"))
	before = b.DatacenterCalls()
	if _, err := d2.Exists(t.Context(), keys); err == nil || !strings.Contains(err.Error(), "which is no longer configured") {
		t.Fatalf("Exists(labelled north, datacenters named) err = %v; want north not configured", err)
	}
	if n := b.DatacenterCalls() - before; n != 0 {
		t.Fatalf("every datacenter named: the vCenter was asked %d times for its datacenters", n)
	}
}

// Held counts a Node under a vCenter's grace while less than its
// minAbsence has passed since the absence began: at exactly its
// minAbsence, no longer (that answer reports the absence).
func TestHeldCountsTheGraceToItsEnd(t *testing.T) {
	f := newPolicyFleet(t, map[string]config.NodeDeletion{"vc2": {MinAbsence: 30 * time.Second}, "vc3": {MinAbsence: 10 * time.Second}})
	f.backends["vc1"].Remove(f.victim.Ref.ID)
	if held := f.exists(t); held == nil {
		t.Fatal("first absence reported")
	}
	f.after(10 * time.Second)
	if h := f.held(t); h["vc2"].Grace != 1 || h["vc3"].Grace != 0 {
		t.Fatalf("at 10s: Held = %+v, want vc2's grace alone (vc3's 10s have passed)", h)
	}
	f.after(20 * time.Second)
	if h := f.held(t); h["vc2"].Grace != 0 {
		t.Fatalf("at 30s: Held = %+v, want no Node in vc2's grace", h)
	}
}

// A Target without a required setting is a programming error, named.
func TestTargetWithoutARequiredSettingPanics(t *testing.T) {
	ok := discovery.Target{Name: "vc1", Server: "vc1:443", Backend: backendtest.New(), RequestTimeout: time.Second, ConsecutiveFailures: 1, OpenTimeout: time.Second}
	for missing, edit := range map[string]func(*discovery.Target){
		"Server":              func(t *discovery.Target) { t.Server = "" },
		"RequestTimeout":      func(t *discovery.Target) { t.RequestTimeout = 0 },
		"ConsecutiveFailures": func(t *discovery.Target) { t.ConsecutiveFailures = 0 },
		"OpenTimeout":         func(t *discovery.Target) { t.OpenTimeout = 0 },
	} {
		target := ok
		edit(&target)
		got := func() (p any) {
			defer func() { p = recover() }()
			discovery.New([]discovery.Target{target}, discovery.Options{})
			return nil
		}()
		if s, _ := got.(string); !strings.Contains(s, "vc1 has no "+missing) {
			t.Errorf("Target without %s: panic %v, want it named", missing, got)
		}
	}
	d := discovery.New([]discovery.Target{ok}, discovery.Options{})
	d.Close()
}

// SetVCenters keeps a vCenter's breaker while its backend and breaker
// settings are the same; a change of either gives it a new one.
func TestSetVCentersKeepsTheBreakerOfAnUnchangedVCenter(t *testing.T) {
	b := backendtest.New()
	target := discovery.Target{Name: "vc1", Server: "vc1:443", Backend: b, RequestTimeout: time.Second, ConsecutiveFailures: 2, OpenTimeout: time.Hour}
	d := discovery.New([]discovery.Target{target}, discovery.Options{})
	t.Cleanup(d.Close)
	trip := func() {
		t.Helper()
		b.Fail(errors.New("connection refused"))
		for range 2 {
			if _, err := d.Locate(t.Context(), byUUID(noSuchUUID)); err == nil {
				t.Fatal("want an error while vc1 fails")
			}
		}
		b.Fail(nil)
		if _, err := d.Locate(t.Context(), byUUID(noSuchUUID)); !errors.Is(err, discovery.ErrBreakerOpen) {
			t.Fatalf("after 2 failures err = %v, want ErrBreakerOpen", err)
		}
	}
	breaker := func() string { return d.Health()[0].Breaker }
	if h := d.Health()[0]; h.BreakerOpen || !h.Healthy() {
		t.Fatalf("before any failure: health %+v, want the breaker closed", h)
	}
	trip()
	if h := d.Health()[0]; !h.BreakerOpen || h.Healthy() {
		t.Fatalf("tripped: health %+v, want the breaker open", h)
	}
	edited := target
	edited.RequestTimeout = 2 * time.Second
	d.SetVCenters([]discovery.Target{edited})
	if got := breaker(); got != "open" {
		t.Fatalf("request timeout edited: breaker %s, want it kept open", got)
	}
	for name, change := range map[string]func(*discovery.Target){
		"consecutive failures": func(t *discovery.Target) { t.ConsecutiveFailures = 3 },
		"open timeout":         func(t *discovery.Target) { t.OpenTimeout = 2 * time.Hour },
		"backend":              func(t *discovery.Target) { t.Backend = backendtest.New() },
	} {
		d.SetVCenters([]discovery.Target{target})
		trip()
		next := target
		change(&next)
		d.SetVCenters([]discovery.Target{next})
		if got := breaker(); got != "closed" {
			t.Errorf("%s changed: breaker %s, want a new one", name, got)
		}
		if res, err := d.Locate(t.Context(), byUUID(noSuchUUID)); err != nil || res != nil {
			t.Errorf("%s changed: Locate = %v, %v; want absence", name, res, err)
		}
	}
}

// A vCenter that refused a lookup as still connecting stays owed that
// lookup across an edit of its settings: Connected lists it once it is up.
func TestRefusedConnectingOutlastsASettingsEdit(t *testing.T) {
	b := backendtest.New()
	b.SetReachability(backends.ConnUnknown, nil)
	target := discovery.Target{Name: "vc1", Server: "vc1:443", Backend: b, RequestTimeout: time.Second, ConsecutiveFailures: 2, OpenTimeout: time.Hour}
	d := discovery.New([]discovery.Target{target}, discovery.Options{ConnectWait: 10 * time.Millisecond})
	t.Cleanup(d.Close)
	// The first lookup meets it connecting; one past ConnectWait is
	// refused.
	var err error
	if !(poll.Schedule{Every: 20 * time.Millisecond, Within: 5 * time.Second}).Holds(func() bool {
		_, err = d.Locate(t.Context(), byUUID(noSuchUUID))
		return errors.Is(err, discovery.ErrVCenterConnecting)
	}) {
		t.Fatalf("connecting for 5s: err = %v, want ErrVCenterConnecting", err)
	}
	target.ConsecutiveFailures = 3
	d.SetVCenters([]discovery.Target{target})
	b.SetReachability(backends.ConnUp, nil)
	if got := d.Connected(); len(got) != 1 || got[0] != "vc1" {
		t.Fatalf("Connected = %v after an edit of vc1's breaker settings, want [vc1]", got)
	}
}

// A vCenter known down is probed in the background, at most once per
// ProbeInterval (default 1s) however many lookups meet it.
func TestKnownDownIsProbedOncePerInterval(t *testing.T) {
	for _, interval := range []time.Duration{time.Hour, 0} {
		b := backendtest.New()
		b.Fail(errors.New("connection refused")) // its probes too
		b.SetReachability(backends.ConnDown, errors.New("connection refused"))
		d := discovery.New([]discovery.Target{{Name: "vc1", Server: "vc1:443", Backend: b, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Hour}}, discovery.Options{ProbeInterval: interval})
		for i := range 5 {
			if _, err := d.Locate(t.Context(), byUUID(noSuchUUID)); !errors.Is(err, discovery.ErrVCenterDown) {
				t.Fatalf("lookup %d: err = %v, want ErrVCenterDown", i, err)
			}
			time.Sleep(20 * time.Millisecond) // the probe before it has ended
		}
		d.Close()
		if n := b.Probes(); n != 1 {
			t.Fatalf("ProbeInterval %s: %d probes within 100ms, want 1", interval, n)
		}
	}
}

// A frozen vCenter holds the Node back even without a grace.
func TestFrozenWithoutGraceHoldsTheNode(t *testing.T) {
	f := newPolicyFleet(t, map[string]config.NodeDeletion{"vc2": {Frozen: true}})
	f.backends["vc1"].Remove(f.victim.Ref.ID)
	held := f.exists(t)
	if held == nil || held.Reason != discovery.HeldFrozen || len(held.Keys) != 1 || held.Keys[0] != "nodeDeletion" {
		t.Fatalf("frozen, minAbsence 0: %v, want held by the freeze (key nodeDeletion)", held)
	}
}

// The vCenters a grace names are those whose minAbsence has not passed:
// at exactly its minAbsence, one no longer holds.
func TestGraceNamesTheVCentersStillHolding(t *testing.T) {
	f := newPolicyFleet(t, map[string]config.NodeDeletion{"vc2": {MinAbsence: 30 * time.Second}, "vc3": {MinAbsence: 10 * time.Second}})
	f.backends["vc1"].Remove(f.victim.Ref.ID)
	if held := f.exists(t); held == nil || len(held.VCenters) != 2 {
		t.Fatalf("first absence: %v, want vc2 and vc3 holding", held)
	}
	f.after(10 * time.Second)
	if held := f.exists(t); held == nil || len(held.VCenters) != 1 || held.VCenters[0] != "vc2" {
		t.Fatalf("at 10s: %v, want vc2 alone holding", held)
	}
}

// What is held is forgotten once not asked about for more than 10
// minutes (the least, for graces under a minute), looked at once a
// minute: asked again at exactly 10 minutes, the absence spans them; past
// them, its grace starts over.
func TestHeldAbsenceIsForgottenPastTenMinutes(t *testing.T) {
	f := newPolicyFleet(t, map[string]config.NodeDeletion{"vc2": {MinAbsence: 30 * time.Second}})
	f.backends["vc1"].Remove(f.victim.Ref.ID)
	if held := f.exists(t); held == nil {
		t.Fatal("first absence reported")
	}
	f.after(10 * time.Minute)
	if held := f.exists(t); held != nil {
		t.Fatalf("asked again after exactly 10 minutes: %v, want the absence reported", held)
	}

	g := newPolicyFleet(t, map[string]config.NodeDeletion{"vc2": {MinAbsence: 30 * time.Second}})
	g.backends["vc1"].Remove(g.victim.Ref.ID)
	if held := g.exists(t); held == nil {
		t.Fatal("first absence reported")
	}
	g.after(9*time.Minute + 30*time.Second)
	g.held(t) // looks at every entry: none is stale yet
	g.after(time.Minute)
	if held := g.exists(t); held == nil {
		t.Fatal("asked again 10m30s later, a minute after the last look: absence reported, want the grace started over")
	}
}

// The server label keeps a Node only when it names a server not
// configured; naming one configured, it proves nothing.
func TestServerLabelKeepsOnlyWhenNotConfigured(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	vm := f.vms["vc2"][0]
	f.backends["vc2"].Remove(vm.Ref.ID)
	keys := discovery.NodeKeys{Name: vm.Name, ProviderID: discovery.ProviderID(vm.UUID), ClaimedServer: "old.example.com"}
	if _, err := d.Exists(t.Context(), keys); err == nil || !strings.Contains(err.Error(), "server old.example.com (by its label), which is no longer configured") {
		t.Fatalf("labelled with a server not configured: err = %v", err)
	}
	keys.ClaimedServer = "vc2"
	if res, err := d.Exists(t.Context(), keys); err != nil || res != nil {
		t.Fatalf("labelled with a configured server: %v, %v; want absence", res, err)
	}
}

// A VM of the Node's name blocks absence only when its UUID cannot be
// read: one whose UUID reads (another VM, named alike) is not the Node's.
func TestNamesakeWithAUUIDIsAnotherVM(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	vm := f.vms["vc1"][0]
	f.backends["vc1"].Remove(vm.Ref.ID)
	f.backends["vc3"].Add(backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: "vm-twin"}, Name: vm.Name, UUID: "42000000-cccc-4000-8000-000000000001", PowerState: backends.PoweredOn}, nil)
	keys := discovery.NodeKeys{Name: vm.Name, ProviderID: discovery.ProviderID(vm.UUID)}
	if res, err := d.Exists(t.Context(), keys); err != nil || res != nil {
		t.Fatalf("a namesake of another UUID: %v, %v; want absence", res, err)
	}
	f.backends["vc3"].Add(backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: "vm-twin"}, Name: vm.Name, ConnectionState: "inaccessible"}, nil)
	if _, err := d.Exists(t.Context(), keys); err == nil || !strings.Contains(err.Error(), "cannot be read") {
		t.Fatalf("a namesake whose UUID cannot be read: err = %v, want the Node kept", err)
	}
}

// A remembered location re-read: the VM there is still the Node's when
// its UUID matches or cannot be read (inaccessible: the reference is never
// reused), not when it reads as another UUID. Its vCenter failing is an
// error at once, without asking the others (none could settle it).
func TestRememberedLocationReread(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	ctx := t.Context()
	vm := f.vms["vc2"][3]
	if _, err := d.Locate(ctx, byUUID(vm.UUID)); err != nil {
		t.Fatal(err)
	}
	inaccessible := vm
	inaccessible.UUID, inaccessible.ConnectionState = "", "inaccessible"
	f.backends["vc2"].Add(inaccessible, nil)
	if res, err := d.Locate(ctx, byUUID(vm.UUID)); err != nil || res == nil || res.VM.Ref != vm.Ref {
		t.Fatalf("remembered VM now inaccessible: %v, %v; want it found at its reference", res, err)
	}
	f.backends["vc2"].Fail(errors.New("connection refused"))
	before := f.calls()
	if res, err := d.Locate(ctx, byUUID(vm.UUID)); err == nil || res != nil {
		t.Fatalf("remembered vCenter failing: %v, %v; want an error", res, err)
	}
	if after := f.calls(); after["vc1"] != before["vc1"] || after["vc3"] != before["vc3"] {
		t.Fatalf("remembered vCenter failing: calls before %v after %v; want no other vCenter asked", before, after)
	}
	f.backends["vc2"].Fail(nil)
	other := vm
	other.UUID = "42000000-dddd-4000-8000-000000000001"
	f.backends["vc2"].Add(other, nil)
	if res, err := d.Locate(ctx, byUUID(vm.UUID)); err != nil || res != nil {
		t.Fatalf("the remembered reference now reads as another UUID: %v, %v; want absence", res, err)
	}
}

// A lookup that stopped waiting for a vCenter still connecting (its call
// under way, no answer within ConnectWait) owes it that lookup: Connected
// lists it once it is up.
func TestNotWaitedForWhileConnectingIsListedOnceUp(t *testing.T) {
	b := backendtest.New()
	b.SetReachability(backends.ConnUnknown, nil)
	b.Hang(true)
	d := discovery.New([]discovery.Target{{Name: "vc1", Server: "vc1:443", Backend: b, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Hour}}, discovery.Options{ConnectWait: 30 * time.Millisecond})
	t.Cleanup(d.Close)
	if _, err := d.Locate(t.Context(), byUUID(noSuchUUID)); !errors.Is(err, discovery.ErrVCenterConnecting) {
		t.Fatalf("no answer while connecting: err = %v, want ErrVCenterConnecting", err)
	}
	b.Hang(false)
	b.SetReachability(backends.ConnUp, nil)
	if got := d.Connected(); len(got) != 1 || got[0] != "vc1" {
		t.Fatalf("Connected = %v once vc1 is up, want [vc1]", got)
	}
}

// flipOnGet is a vCenter whose session logs in to another appliance at
// its address while it answers a Get, once flip is set.
type flipOnGet struct {
	*backendtest.Backend
	flip *atomic.Bool
}

func (b flipOnGet) Get(ctx context.Context, ref backends.VMRef) (*backends.VM, error) {
	vm, err := b.Backend.Get(ctx, ref)
	if b.flip.Load() {
		b.SetInstanceUUID("inst-2")
	}
	return vm, err
}

// A remembered location re-read while its vCenter turned into another
// appliance: the answer is not the VM's (the reference may name another
// VM there), so the lookup is an error, never a VM found.
func TestRememberedLocationReadFromAnotherApplianceIsAnError(t *testing.T) {
	b := backendtest.New()
	b.SetInstanceUUID("inst-1")
	vm := backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: "vm-1"}, Name: "n1", UUID: "42000000-eeee-4000-8000-000000000001", PowerState: backends.PoweredOn}
	b.Add(vm, nil)
	var flip atomic.Bool
	d := discovery.New([]discovery.Target{{Name: "vc1", Server: "vc1:443", Backend: flipOnGet{b, &flip}, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Hour}}, discovery.Options{})
	t.Cleanup(d.Close)
	if res, err := d.Locate(t.Context(), byUUID(vm.UUID)); err != nil || res == nil {
		t.Fatalf("Locate = %v, %v; want found", res, err)
	}
	flip.Store(true)
	res, err := d.Locate(t.Context(), byUUID(vm.UUID))
	if res != nil || !errors.Is(err, discovery.ErrInstanceChanged) {
		t.Fatalf("re-read while the appliance changed: %v, %v; want ErrInstanceChanged", res, err)
	}
}

// One VM seen through two entries of one vCenter (CPI's tenants), one of
// which does not know its instance yet: one VM, in either config order.
func TestVMSeenThroughAnEntryOfUnknownInstanceIsOneVM(t *testing.T) {
	vm := backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: "vm-1"}, Name: "n1", UUID: "42000000-ffff-4000-8000-000000000001", PowerState: backends.PoweredOn}
	for _, order := range [][]string{{"inst-1", ""}, {"", "inst-1"}} {
		var targets []discovery.Target
		for i, instance := range order {
			b := backendtest.New()
			b.SetInstanceUUID(instance)
			b.Add(vm, nil)
			targets = append(targets, discovery.Target{Name: fmt.Sprintf("tenant-%d", i), Server: "vc.example.com:443", Backend: b, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Hour})
		}
		d := discovery.New(targets, discovery.Options{})
		res, err := d.Locate(t.Context(), byUUID(vm.UUID))
		d.Close()
		if err != nil || res == nil || res.VCenter != "tenant-0" {
			t.Fatalf("instances %q: Locate = %v, %v; want one VM, through tenant-0", order, res, err)
		}
	}
}

// Tags are read through the entry that found the VM (its login saw it),
// not the first entry of its vCenter.
func TestTagsThroughTheEntryNamedByTheResult(t *testing.T) {
	vm := backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: "vm-1"}, Name: "n1", UUID: "42000000-abab-4000-8000-000000000001", PowerState: backends.PoweredOn}
	var targets []discovery.Target
	for i, zone := range []string{"zone-a", "zone-b"} {
		b := backendtest.New()
		b.SetInstanceUUID("inst-1")
		b.Add(vm, map[string]string{"k8s-zone": zone})
		targets = append(targets, discovery.Target{Name: fmt.Sprintf("tenant-%d", i), Server: "vc.example.com:443", Backend: b, RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Hour})
	}
	d := discovery.New(targets, discovery.Options{})
	t.Cleanup(d.Close)
	res := &discovery.Result{VCenter: "tenant-1", Where: discovery.Identity{Server: "vc.example.com:443", InstanceUUID: "inst-1"}, VM: vm}
	tags, err := d.Tags(t.Context(), res, []string{"k8s-zone"})
	if err != nil || tags["k8s-zone"] != "zone-b" {
		t.Fatalf("Tags through tenant-1 = %v, %v; want tenant-1's zone-b", tags, err)
	}
}
