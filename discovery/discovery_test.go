package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
)

// fleet is three fake vCenters with two datacenters and two VMs each.
type fleet struct {
	names    []string
	backends map[string]*backendtest.Backend
	vms      map[string][]backends.VM
}

func uuidOf(vc, dc, i int) string {
	return fmt.Sprintf("4200%02x%02x-%04x-4000-8000-%012x", vc, dc, i, vc*100+dc*10+i)
}

func newFleet() *fleet {
	f := &fleet{backends: map[string]*backendtest.Backend{}, vms: map[string][]backends.VM{}}
	for vc := range 3 {
		name := fmt.Sprintf("vc%d", vc+1)
		b := backendtest.New()
		for dc := range 2 {
			for i := range 2 {
				vm := backends.VM{
					Ref:  backends.VMRef{Datacenter: fmt.Sprintf("dc%d", dc), ID: fmt.Sprintf("vm-%d%d", dc, i)},
					Name: fmt.Sprintf("%s-dc%d-vm%d", name, dc, i), UUID: uuidOf(vc, dc, i), PowerState: backends.PoweredOn,
				}
				b.Add(vm, nil)
				f.vms[name] = append(f.vms[name], vm)
			}
		}
		f.names = append(f.names, name)
		f.backends[name] = b
	}
	return f
}

// discoverer is a Discoverer over the fleet whose duplicate index holds
// every vCenter's UUIDs (as once each has answered): a vCenter that fails
// afterwards does not hold up a VM found elsewhere.
func (f *fleet) discoverer(t testing.TB, timeout time.Duration, failures uint32, open time.Duration) *discovery.Discoverer {
	var vcs []discovery.Target
	for _, n := range f.names {
		vcs = append(vcs, discovery.Target{Name: n, Server: n + ":443", Backend: f.backends[n], RequestTimeout: timeout, ConsecutiveFailures: failures, OpenTimeout: open})
	}
	d := discovery.New(vcs, discovery.Options{})
	scanEvery(t, d, 10*time.Millisecond)
	poll.Schedule{Every: 5 * time.Millisecond, Within: 10 * time.Second}.Holds(func() bool { return indexed(d) })
	return d
}

// indexed reports whether the duplicate index holds every vCenter's UUIDs.
func indexed(d *discovery.Discoverer) bool {
	for _, h := range d.Health() {
		if !h.Indexed {
			return false
		}
	}
	return true
}

func (f *fleet) calls() map[string]int64 {
	out := map[string]int64{}
	for n, b := range f.backends {
		out[n] = b.Calls()
	}
	return out
}

func TestFoundInEveryVCenterAndDatacenter(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	ctx := t.Context()
	for _, vc := range f.names {
		for _, vm := range f.vms[vc] {
			for _, key := range []string{vm.UUID, discovery.SwapByteOrder(vm.UUID), strings.ToUpper(vm.UUID)} {
				res, err := d.Locate(ctx, byUUID(key))
				if err != nil || res == nil {
					t.Fatalf("Locate(%s) = %v, %v", key, res, err)
				}
				if res.VCenter != vc || res.VM.Ref != vm.Ref {
					t.Fatalf("Locate(%s) found %s, want vcenter %s %v", key, res, vc, vm.Ref)
				}
			}
			res, err := d.Locate(ctx, byProviderID(discovery.ProviderID(vm.UUID)))
			if err != nil || res == nil || res.VM.UUID != vm.UUID {
				t.Fatalf("Locate(providerID %s) = %v, %v", vm.UUID, res, err)
			}
			res, err = d.Locate(ctx, byName(vm.Name))
			if err != nil || res == nil || res.VM.UUID != vm.UUID {
				t.Fatalf("Locate(name %s) = %v, %v", vm.Name, res, err)
			}
		}
	}
}

// Issue 20, path 3: some kubelets set --provider-id from the system UUID
// they read, in the kubelet's byte order (product_uuid; Photon 2.0). CPI
// finds the VM by the reversed form too. Before the fix only the form
// given was searched: such a Node never initialized, and once NotReady its
// running VM was "confirmed absent in every vCenter" and the Node deleted.
func TestProviderIDInTheKubeletsByteOrderIsItsVM(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	vm := f.vms["vc2"][0]
	swapped := discovery.ProviderID(discovery.SwapByteOrder(vm.UUID))
	res, err := d.Locate(t.Context(), byProviderID(swapped))
	if err != nil || res == nil || res.VM.UUID != vm.UUID {
		t.Fatalf("Locate(swapped providerID) = %v, %v; want %s", res, err, vm.Ref.ID)
	}
	res, err = d.Exists(t.Context(), discovery.NodeKeys{Name: "n", ProviderID: swapped})
	if err != nil || res == nil || res.VM.UUID != vm.UUID {
		t.Fatalf("Exists(providerID swapped) = %v, %v; want its VM found", res, err)
	}
	if _, err := d.Locate(t.Context(), byProviderID("aws:///i-123")); err == nil {
		t.Fatal("a foreign providerID must be an error")
	}
}

func TestNotFoundOnlyWhenEveryVCenterAnswered(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	ctx := t.Context()
	missing := "42ffffff-ffff-4fff-8fff-ffffffffffff"
	res, err := d.Locate(ctx, byUUID(missing))
	if err != nil || res != nil {
		t.Fatalf("all answered: Locate = %v, %v; want nil, nil", res, err)
	}
	for _, failure := range []error{
		errors.New("connection refused"),
		fmt.Errorf("login as %q failed: %w", "ccm", errors.New("InvalidLogin")),
	} {
		f.backends["vc2"].Fail(failure)
		res, err = d.Locate(ctx, byUUID(missing))
		if err == nil || res != nil {
			t.Fatalf("vc2 failing (%v): Locate = %v, %v; want an error", failure, res, err)
		}
		var le *discovery.LookupError
		if !errors.As(err, &le) || failedVCenters(le) != "vc2" {
			t.Fatalf("error %v does not name exactly vc2 as failed", err)
		}
		if !strings.Contains(err.Error(), failure.Error()) {
			t.Fatalf("error %q does not say why vc2 failed", err)
		}
		f.backends["vc2"].Fail(nil)
	}
	// A VM in a healthy vCenter is found while another vCenter is down.
	f.backends["vc3"].Fail(errors.New("connection refused"))
	vm := f.vms["vc1"][3]
	res, err = d.Locate(ctx, byUUID(vm.UUID))
	if err != nil || res == nil || res.VCenter != "vc1" {
		t.Fatalf("Locate with vc3 down = %v, %v; want found in vc1", res, err)
	}
}

func TestDeadlineIsAnErrorNotAbsence(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, 50*time.Millisecond, 5, time.Minute)
	f.backends["vc3"].Hang(true)
	ctx := t.Context()
	res, err := d.Locate(ctx, byUUID("42ffffff-ffff-4fff-8fff-ffffffffffff"))
	if err == nil || res != nil {
		t.Fatalf("Locate with vc3 hanging = %v, %v; want an error", res, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "requestTimeout") {
		t.Fatalf("error %v should be a deadline naming requestTimeout", err)
	}
	vm := f.vms["vc2"][1]
	if res, err := d.Locate(ctx, byUUID(vm.UUID)); err != nil || res == nil {
		t.Fatalf("healthy vCenter lookup with vc3 hanging = %v, %v", res, err)
	}
}

func TestBreakerOpensFailsFastAndRecovers(t *testing.T) {
	f := newFleet()
	const open = 200 * time.Millisecond
	d := f.discoverer(t, time.Second, 3, open)
	ctx := t.Context()
	missing := "42ffffff-ffff-4fff-8fff-ffffffffffff"
	f.backends["vc1"].Fail(errors.New("connection refused"))
	for range 3 {
		if _, err := d.Locate(ctx, byUUID(missing)); err == nil {
			t.Fatal("want an error while vc1 fails")
		}
	}
	before := f.backends["vc1"].Calls()
	_, err := d.Locate(ctx, byUUID(missing))
	if !errors.Is(err, discovery.ErrBreakerOpen) {
		t.Fatalf("after 3 failures err = %v, want ErrBreakerOpen", err)
	}
	if got := f.backends["vc1"].Calls(); got != before {
		t.Fatalf("open breaker let %d calls through", got-before)
	}
	// Healed: after openTimeout one probe goes through and closes it.
	f.backends["vc1"].Fail(nil)
	time.Sleep(open + 50*time.Millisecond)
	res, err := d.Locate(ctx, byUUID(missing))
	if err != nil || res != nil {
		t.Fatalf("after recovery Locate = %v, %v; want confirmed absence", res, err)
	}
	if f.backends["vc1"].Calls() != before+1 {
		t.Fatalf("half-open probe: want exactly one call, got %d", f.backends["vc1"].Calls()-before)
	}
}

// "Not found" is an answer about the VM: it never trips a breaker.
func TestNotFoundAnswersDoNotTripBreaker(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 2, time.Minute)
	ctx := t.Context()
	for i := range 10 {
		if res, err := d.Locate(ctx, byUUID(fmt.Sprintf("42ffffff-ffff-4fff-8fff-%012x", i))); err != nil || res != nil {
			t.Fatalf("lookup %d = %v, %v", i, res, err)
		}
	}
	// Cached locations whose VM was deleted answer ErrNotFound from Get.
	vm := f.vms["vc1"][0]
	for range 5 {
		if _, err := d.Locate(ctx, byUUID(vm.UUID)); err != nil {
			t.Fatal(err)
		}
		f.backends["vc1"].Remove(vm.Ref.ID)
		if res, err := d.Locate(ctx, byUUID(vm.UUID)); err != nil || res != nil {
			t.Fatalf("deleted VM lookup = %v, %v; want nil, nil", res, err)
		}
		f.backends["vc1"].Add(vm, nil)
	}
}

func TestDuplicateUUIDIsAnErrorNamingBoth(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	orig := f.vms["vc1"][2]
	dup := f.vms["vc3"][1]
	dup.UUID = orig.UUID
	f.backends["vc3"].Add(dup, nil)
	res, err := d.Locate(t.Context(), byUUID(orig.UUID))
	var de *discovery.DuplicateError
	if res != nil || !errors.As(err, &de) || len(de.Matches) != 2 {
		t.Fatalf("Locate(duplicate) = %v, %v; want DuplicateError with 2 matches", res, err)
	}
	for _, want := range []string{"vcenter vc1", orig.Name, "vcenter vc3", dup.Name} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %q", err, want)
		}
	}
	// One VM with u and another with its byte-swapped form: ambiguous too.
	other := f.vms["vc2"][0]
	other.UUID = discovery.SwapByteOrder(f.vms["vc1"][0].UUID)
	f.backends["vc2"].Add(other, nil)
	if _, err := d.Locate(t.Context(), byUUID(f.vms["vc1"][0].UUID)); !errors.As(err, &de) {
		t.Fatalf("byte-order collision err = %v, want DuplicateError", err)
	}
}

func TestCachedLocationIsReverified(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	ctx := t.Context()
	vm := f.vms["vc2"][3]
	if _, err := d.Locate(ctx, byUUID(vm.UUID)); err != nil {
		t.Fatal(err)
	}
	before := f.calls()
	res, err := d.Locate(ctx, byUUID(vm.UUID))
	if err != nil || res == nil || res.VCenter != "vc2" {
		t.Fatalf("cached lookup = %v, %v", res, err)
	}
	after := f.calls()
	if after["vc2"]-before["vc2"] != 1 || after["vc1"] != before["vc1"] || after["vc3"] != before["vc3"] {
		t.Fatalf("cached lookup calls: before %v after %v; want one Get on vc2 only", before, after)
	}
	// Power state comes from the re-read, not the cache.
	f.backends["vc2"].SetPower(vm.Ref.ID, backends.PoweredOff)
	if res, _ := d.Locate(ctx, byUUID(vm.UUID)); res == nil || res.VM.PowerState != backends.PoweredOff {
		t.Fatalf("cached lookup served a stale power state: %v", res)
	}
	// Its vCenter down: an error, never a guess from the cache.
	f.backends["vc2"].Fail(errors.New("connection refused"))
	if res, err := d.Locate(ctx, byUUID(vm.UUID)); err == nil || res != nil {
		t.Fatalf("cached lookup with vc2 down = %v, %v; want error", res, err)
	}
	f.backends["vc2"].Fail(nil)
	// Deleted while another vCenter is down: still an error, not absence.
	f.backends["vc2"].Remove(vm.Ref.ID)
	f.backends["vc1"].Fail(errors.New("connection refused"))
	if res, err := d.Locate(ctx, byUUID(vm.UUID)); err == nil || res != nil {
		t.Fatalf("deleted VM with vc1 down = %v, %v; want error", res, err)
	}
	f.backends["vc1"].Fail(nil)
	if res, err := d.Locate(ctx, byUUID(vm.UUID)); err != nil || res != nil {
		t.Fatalf("deleted VM, all answering = %v, %v; want nil, nil", res, err)
	}
}

// A location is remembered for LocationTTL only: after it, a lookup
// searches every vCenter again instead of re-reading the remembered one.
func TestRememberedLocationExpires(t *testing.T) {
	f := newFleet()
	const ttl = 50 * time.Millisecond
	var vcs []discovery.Target
	for _, n := range f.names {
		vcs = append(vcs, discovery.Target{Name: n, Server: n + ":443", Backend: f.backends[n], RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
	}
	d := discovery.New(vcs, discovery.Options{LocationTTL: ttl})
	scanEvery(t, d, time.Second)
	vm := f.vms["vc2"][1]
	lookup := func() map[string]int64 {
		t.Helper()
		before := f.calls()
		if res, err := d.Locate(t.Context(), byUUID(vm.UUID)); err != nil || res == nil || res.VCenter != "vc2" {
			t.Fatalf("Locate = %v, %v", res, err)
		}
		after := f.calls()
		for n := range after {
			after[n] -= before[n]
		}
		return after
	}
	lookup()
	if calls := lookup(); calls["vc1"] != 0 || calls["vc3"] != 0 {
		t.Fatalf("lookup within the TTL asked %v; want vc2 only", calls)
	}
	time.Sleep(2 * ttl)
	if calls := lookup(); calls["vc1"] == 0 || calls["vc3"] == 0 {
		t.Fatalf("lookup after the TTL asked %v; want every vCenter", calls)
	}
}

func TestDatacenterFilter(t *testing.T) {
	f := newFleet()
	vcs := []discovery.Target{{Name: "vc1", Server: "vc1:443", Backend: f.backends["vc1"], RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute, Datacenters: specs(t, "dc1")}}
	d := discovery.New(vcs, discovery.Options{})
	scanEvery(t, d, time.Second)
	ctx := t.Context()
	in, out := f.vms["vc1"][2], f.vms["vc1"][0] // dc1, dc0
	if res, err := d.Locate(ctx, byUUID(in.UUID)); err != nil || res == nil {
		t.Fatalf("VM in configured datacenter: %v, %v", res, err)
	}
	// It exists, outside the configured datacenters: not served, not gone.
	res, err := d.Locate(ctx, byUUID(out.UUID))
	var oe *discovery.OutsideError
	if res != nil || !errors.As(err, &oe) || !strings.Contains(err.Error(), "datacenter dc0") {
		t.Fatalf("VM outside configured datacenters: %v, %v; want an OutsideError naming dc0", res, err)
	}
	if res, err := d.Locate(ctx, byUUID("42ffffff-ffff-4fff-8fff-ffffffffffff")); err != nil || res != nil {
		t.Fatalf("VM nowhere: %v, %v; want nil, nil", res, err)
	}
	if _, err := discovery.New(nil, discovery.Options{}).Locate(ctx, byUUID(out.UUID)); err == nil {
		t.Fatal("with no vCenter configured, absence must not be confirmed")
	}
}

func TestConcurrentLookups(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	ctx := t.Context()
	var wg sync.WaitGroup
	for _, vc := range f.names {
		for _, vm := range f.vms[vc] {
			for range 4 {
				wg.Go(func() {
					res, err := d.Locate(ctx, byUUID(vm.UUID))
					if err != nil || res == nil || res.VM.UUID != vm.UUID {
						t.Errorf("Locate(%s) = %v, %v", vm.UUID, res, err)
					}
				})
			}
		}
	}
	wg.Wait()
}

func TestUUIDHelpers(t *testing.T) {
	u := "422e4956-ad22-1139-1234-567890abcdef"
	if got := discovery.SwapByteOrder(u); got != "56492e42-22ad-3911-1234-567890abcdef" {
		t.Fatalf("SwapByteOrder = %s", got)
	}
	if discovery.SwapByteOrder(discovery.SwapByteOrder(u)) != u {
		t.Fatal("SwapByteOrder is not its own inverse")
	}
	for _, bad := range []string{"", "42", "422e4956-ad22-1139-1234-567890abcdeg", "422e4956ad22-1139-1234-567890abcdef0"} {
		if _, err := discovery.NormalizeUUID(bad); err == nil {
			t.Errorf("NormalizeUUID(%q) accepted", bad)
		}
	}
	if id, err := discovery.ParseProviderID("vsphere://422E4956-AD22-1139-1234-567890ABCDEF"); err != nil || id != u {
		t.Fatalf("ParseProviderID = %q, %v", id, err)
	}
}

// FuzzParseProviderID: never panics; what it accepts is a normalized UUID
// that formats back to the same providerID (up to case).
func FuzzParseProviderID(f *testing.F) {
	for _, s := range []string{
		"vsphere://422e4956-ad22-1139-1234-567890abcdef", "vsphere://422E4956-AD22-1139-1234-567890ABCDEF",
		"vsphere://", "aws:///i-1", "vsphere://422e4956ad2211391234567890abcdef", "vsphere:// 422e4956-ad22-1139-1234-567890abcdef",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		u, err := discovery.ParseProviderID(id)
		if err != nil {
			return
		}
		if n, err := discovery.NormalizeUUID(u); err != nil || n != u {
			t.Fatalf("ParseProviderID(%q) = %q, not normalized (%v)", id, u, err)
		}
		if discovery.SwapByteOrder(discovery.SwapByteOrder(u)) != u {
			t.Fatalf("SwapByteOrder is not an involution on %q", u)
		}
		if !strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(id, discovery.ProviderPrefix)), u) {
			t.Fatalf("ParseProviderID(%q) = %q changed more than case and spaces", id, u)
		}
	})
}

// An inventory that has not caught up with a VM answers "none known"; the
// lookup then asks every inventoried vCenter again without its cache and
// finds the VM: an inventory's silence never becomes absence.
func TestLaggingInventoryIsAskedAgainDirectly(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	ctx := t.Context()
	vm := f.vms["vc2"][1]
	f.backends["vc2"].Lag(vm.Ref.ID)
	f.backends["vc3"].Lag("vm-none") // inventoried, holding all its VMs
	before := f.calls()
	res, err := d.Locate(ctx, byUUID(vm.UUID))
	if err != nil || res == nil || res.VCenter != "vc2" || res.VM.Ref != vm.Ref {
		t.Fatalf("Locate of a VM the inventory lags on = %v, %v; want it in vc2", res, err)
	}
	after := f.calls()
	// vc1 has no inventory: its first answer already was vCenter's.
	if got := map[string]int64{"vc1": after["vc1"] - before["vc1"], "vc2": after["vc2"] - before["vc2"], "vc3": after["vc3"] - before["vc3"]}; got["vc1"] != 1 || got["vc2"] != 2 || got["vc3"] != 2 {
		t.Fatalf("calls per vCenter = %v; want vc1 1, vc2 and vc3 2 (cached pass, then direct)", got)
	}

	// Found in an inventory: no second pass.
	other := f.vms["vc3"][0]
	before = f.calls()
	if res, err := d.Locate(ctx, byName(other.Name)); err != nil || res == nil || res.VCenter != "vc3" {
		t.Fatalf("Locate(name %s) = %v, %v", other.Name, res, err)
	}
	after = f.calls()
	for _, n := range f.names {
		if after[n]-before[n] != 1 {
			t.Fatalf("%s: %d calls for a VM found in an inventory, want 1", n, after[n]-before[n])
		}
	}

	// Absent everywhere: confirmed by the direct pass.
	cachedBefore := f.backends["vc3"].CachedCalls()
	if res, err := d.Locate(ctx, byUUID("42ffffff-ffff-4fff-8fff-ffffffffffff")); err != nil || res != nil {
		t.Fatalf("Locate(absent) = %v, %v", res, err)
	}
	if got := f.backends["vc3"].CachedCalls() - cachedBefore; got != 1 {
		t.Fatalf("absent lookup made %d cached calls to vc3, want 1 then a direct one", got)
	}
}

// A vCenter failing the direct pass makes the lookup an error, never
// absence, even though every inventory said "none known".
func TestDirectPassFailureIsAnError(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, 200*time.Millisecond, 5, time.Minute)
	ctx := t.Context()
	vm := f.vms["vc1"][0]
	f.backends["vc1"].Lag(vm.Ref.ID)
	f.backends["vc1"].FailDirect(errors.New("connection refused"))
	res, err := d.Locate(ctx, byUUID(vm.UUID))
	var le *discovery.LookupError
	if res != nil || !errors.As(err, &le) || !strings.Contains(err.Error(), "vc1") {
		t.Fatalf("Locate with vc1's direct pass failing = %v, %v; want a LookupError naming vc1", res, err)
	}
}

// failedVCenters names the vCenters that could not answer le.
func failedVCenters(le *discovery.LookupError) string {
	var out []string
	for _, err := range le.Failed.Errors {
		var ve *discovery.VCenterError
		if errors.As(err, &ve) {
			out = append(out, ve.VCenter)
		}
	}
	return strings.Join(out, ",")
}
