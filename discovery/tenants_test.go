package discovery_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// tenants is one vCenter (server vc1:443) configured as several entries
// (CPI's tenants), each with its own backend (its own session and
// credentials) and datacenters, and optionally a second vCenter, vc2.
// What one vCenter holds, every entry of it sees.
type tenants struct {
	entries  []string // config order
	backends map[string]*backendtest.Backend
	dcs      map[string][]string
	servers  map[string]string
}

// newTenants configures entries of vc1 with the datacenters given ("" for
// every datacenter).
func newTenants(dcs map[string]string) *tenants {
	tn := &tenants{backends: map[string]*backendtest.Backend{}, dcs: map[string][]string{}, servers: map[string]string{}}
	for name, list := range dcs {
		tn.entries = append(tn.entries, name)
		tn.backends[name] = backendtest.New()
		tn.dcs[name] = strings.Fields(list)
		tn.servers[name] = "vc1:443"
	}
	slices.Sort(tn.entries)
	return tn
}

// withOther adds a second vCenter, at another server.
func (tn *tenants) withOther(name string) *backendtest.Backend {
	tn.entries = append(tn.entries, name)
	tn.backends[name] = backendtest.New()
	tn.servers[name] = name + ":443"
	return tn.backends[name]
}

// add puts a VM in vc1 (every entry of it sees it).
func (tn *tenants) add(vm backends.VM) {
	for _, n := range tn.entries {
		if tn.servers[n] == "vc1:443" {
			tn.backends[n].Add(vm, map[string]string{"zone": "z-" + vm.Ref.Datacenter})
		}
	}
}

func (tn *tenants) remove(id string) {
	for _, n := range tn.entries {
		if tn.servers[n] == "vc1:443" {
			tn.backends[n].Remove(id)
		}
	}
}

func (tn *tenants) discoverer(t *testing.T, opts discovery.Options) *discovery.Discoverer {
	t.Helper()
	var vcs []discovery.Target
	for _, n := range tn.entries {
		vcs = append(vcs, discovery.Target{Name: n, Server: tn.servers[n], Backend: tn.backends[n], Datacenters: specs(t, tn.dcs[n]...),
			RequestTimeout: time.Second, ConsecutiveFailures: 1000, OpenTimeout: time.Minute})
	}
	d := discovery.New(vcs, opts)
	scanEvery(t, d, 10*time.Millisecond)
	t.Cleanup(d.Close)
	return d
}

func tenantVM(dc, id string, n int) backends.VM {
	return backends.VM{Ref: backends.VMRef{Datacenter: dc, ID: id}, Name: "node-" + id,
		UUID: fmt.Sprintf("4200aaaa-0000-4000-8000-%012x", n), PowerState: backends.PoweredOn}
}

func nodeOf(vm backends.VM) discovery.NodeKeys {
	return discovery.NodeKeys{Name: vm.Name, ProviderID: discovery.ProviderID(vm.UUID)}
}

// A VM seen through two entries of one vCenter is one VM, attributed to
// the first entry in config order that serves its datacenter; every kind
// of lookup agrees, and the duplicate index reports no twin. Before,
// every such lookup was a DuplicateError naming the VM twice.
func TestVMSeenThroughTwoEntriesIsOneVM(t *testing.T) {
	tn := newTenants(map[string]string{"tenant-a": "", "tenant-b": ""})
	vm := tenantVM("dc0", "vm-1", 1)
	vm.GuestHostName, vm.NICs = "node-vm-1", []backends.NIC{{Network: "VM Network", IPs: []string{"10.0.0.5"}, DeviceConfigID: 4000}}
	tn.add(vm)
	var mu sync.Mutex
	var twins []string
	d := tn.discoverer(t, discovery.Options{OnDuplicate: func(uuid string, vcs []string) {
		mu.Lock()
		defer mu.Unlock()
		twins = append(twins, uuid+" in "+strings.Join(vcs, ","))
	}})
	ctx := t.Context()
	check := func(what string, res *discovery.Result, err error) {
		t.Helper()
		if err != nil || res == nil || res.VCenter != "tenant-a" || res.VM.Ref != vm.Ref {
			t.Errorf("%s = %v, %v; want the VM, through tenant-a", what, res, err)
		}
	}
	for range 2 { // the second time from the remembered location
		res, err := d.Locate(ctx, byUUID(vm.UUID))
		check("Locate by UUID", res, err)
		res, err = d.Locate(ctx, byName(vm.Name))
		check("Locate by name", res, err)
		res, err = d.Exists(ctx, nodeOf(vm))
		check("Exists", res, err)
	}
	// CPI's searches (strict: a second match anywhere is a duplicate).
	res, err := d.Locate(ctx, discovery.NodeKeys{Name: "node-vm-1"})
	check("Locate by guest host name", res, err)
	res, err = d.Locate(ctx, discovery.NodeKeys{Name: "10.0.0.5"})
	check("Locate by guest IP", res, err)
	time.Sleep(50 * time.Millisecond) // several duplicate scans
	mu.Lock()
	defer mu.Unlock()
	if len(twins) > 0 {
		t.Errorf("twins reported: %v; one VM seen through two entries of one vCenter is no twin", twins)
	}
}

// Seen through one entry that serves its datacenter and one that does
// not, it is one VM, found, and not "also outside the configured
// datacenters" (which a strict lookup would refuse as a duplicate).
func TestVMInsideOneEntryAndOutsideTheOtherIsFound(t *testing.T) {
	tn := newTenants(map[string]string{"tenant-a": "dc0", "tenant-b": "dc1"})
	vm := tenantVM("dc1", "vm-1", 1)
	vm.GuestHostName = "node-vm-1"
	tn.add(vm)
	d := tn.discoverer(t, discovery.Options{})
	ctx := t.Context()
	for _, k := range []discovery.NodeKeys{nodeOf(vm), {Name: "node-vm-1"}} {
		res, err := d.Locate(ctx, k)
		if err != nil || res == nil || res.VCenter != "tenant-b" {
			t.Errorf("Locate(%+v) = %v, %v; want the VM through tenant-b", k, res, err)
		}
	}
	// In a datacenter neither serves: outside, named once.
	out := tenantVM("dc2", "vm-2", 2)
	tn.add(out)
	_, err := d.Locate(ctx, byUUID(out.UUID))
	var oe *discovery.OutsideError
	if !errors.As(err, &oe) || len(oe.Matches) != 1 {
		t.Errorf("Locate of a VM outside both entries' datacenters = %v; want an OutsideError naming it once", err)
	}
}

// Two vCenters (two servers) holding a VM of one BIOS UUID are still a
// duplicate, though one of them is configured as two entries.
func TestSameUUIDOnTwoServersIsStillADuplicate(t *testing.T) {
	tn := newTenants(map[string]string{"tenant-a": "", "tenant-b": ""})
	vc2 := tn.withOther("vc2")
	vm := tenantVM("dc0", "vm-1", 1)
	tn.add(vm)
	twin := vm
	twin.Ref.ID = "vm-77"
	vc2.Add(twin, nil)
	var mu sync.Mutex
	reported := map[string]string{}
	d := tn.discoverer(t, discovery.Options{OnDuplicate: func(uuid string, vcs []string) {
		mu.Lock()
		defer mu.Unlock()
		reported[uuid] = strings.Join(vcs, ",")
	}})
	_, err := d.Locate(t.Context(), byUUID(vm.UUID))
	var de *discovery.DuplicateError
	if !errors.As(err, &de) || len(de.Matches) != 2 || !strings.Contains(err.Error(), "vcenter vc2") || !strings.Contains(err.Error(), "vcenter tenant-a") {
		t.Errorf("Locate = %v; want a DuplicateError naming the VM of vc1 (through tenant-a) and vc2's", err)
	}
	eventually(t, "the twin to be reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return reported[vm.UUID] != ""
	})
	// vc2 not waited for (still connecting): its inventory's twin is
	// still a duplicate.
	vc2.Hang(true)
	vc2.SetReachability(backends.ConnUnknown, nil)
	_, err = d.Locate(t.Context(), byUUID(vm.UUID))
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "vcenter vc2") {
		t.Errorf("Locate with vc2 not waited for = %v; want a DuplicateError naming vc2", err)
	}
}

// A located VM's tags are read through the entry that found it (its own
// login), not through another entry of the same server.
func TestTagsAreReadThroughTheEntryThatFoundTheVM(t *testing.T) {
	tn := newTenants(map[string]string{"tenant-a": "dc0", "tenant-b": "dc1"})
	vm := tenantVM("dc1", "vm-1", 1)
	tn.add(vm)
	d := tn.discoverer(t, discovery.Options{})
	ctx := t.Context()
	res, err := d.Locate(ctx, byUUID(vm.UUID))
	if err != nil || res == nil || res.VCenter != "tenant-b" {
		t.Fatalf("Locate = %v, %v; want the VM through tenant-b", res, err)
	}
	// tenant-a's login is refused from now on.
	tn.backends["tenant-a"].Fail(errors.New("login: credentials rejected"))
	tags, err := d.Tags(ctx, res, []string{"zone"})
	if err != nil || tags["zone"] != "z-dc1" {
		t.Errorf("Tags = %v, %v; want zone z-dc1 through tenant-b", tags, err)
	}
}

// tenantState is one entry's state in a Rule-1 case.
type tenantState int

const (
	up tenantState = iota
	refused
	down
)

func (s tenantState) apply(b *backendtest.Backend) {
	switch s {
	case up:
		b.Fail(nil)
		b.SetReachability(backends.ConnUp, nil)
	case refused: // its own credentials are wrong: every call fails
		b.Fail(errors.New("login: credentials rejected"))
		b.SetReachability(backends.ConnUp, nil)
	case down:
		b.Fail(errors.New("connection refused"))
		b.SetReachability(backends.ConnDown, errors.New("connection refused"))
	}
}

// Rule 1 with two entries of one vCenter: absence needs every entry to
// have answered; an entry that cannot answer (its own credentials
// refused, or down) is an error, never absence. A VM is found through
// any entry that answers and serves its datacenter.
func TestRule1WithTwoEntriesOfOneServer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		a, b     string // datacenters of tenant-a and tenant-b
		sa, sb   tenantState
		vmDC     string
		deleted  bool
		cacheHit bool   // found once with both up first (a location remembered)
		want     string // entry found through, "absent", "error" or "outside"
	}{
		{"one down, other up, VM in the other's datacenter", "dc0", "dc1", down, up, "dc1", false, false, "tenant-b"},
		{"one refused, other up, VM in the other's datacenter", "dc0", "dc1", refused, up, "dc1", false, false, "tenant-b"},
		{"one refused, other up, VM in the refused one's datacenter", "dc0", "dc1", refused, up, "dc0", false, false, "error"},
		{"one down, other up, VM in the down one's datacenter", "dc0", "dc1", up, down, "dc1", false, false, "error"},
		{"one refused, other up, VM deleted from the refused one's", "dc0", "dc1", refused, up, "dc0", true, false, "error"},
		{"one refused, other up, VM deleted from the other's", "dc0", "dc1", refused, up, "dc1", true, false, "error"},
		{"one down, other up, VM deleted", "dc0", "dc1", up, down, "dc0", true, false, "error"},
		{"one refused, other up, VM deleted after it was found", "dc0", "dc1", up, refused, "dc1", true, true, "error"},
		{"both up, different datacenters, VM in the second's", "dc0", "dc1", up, up, "dc1", false, false, "tenant-b"},
		{"both up, different datacenters, VM deleted", "dc0", "dc1", up, up, "dc1", true, false, "absent"},
		{"both up, different datacenters, VM deleted after it was found", "dc0", "dc1", up, up, "dc1", true, true, "absent"},
		{"both up, different datacenters, VM in neither's", "dc0", "dc1", up, up, "dc2", false, false, "outside"},
		{"both up, same datacenter", "dc0", "dc0", up, up, "dc0", false, false, "tenant-a"},
		{"both up, same datacenter, VM deleted", "dc0", "dc0", up, up, "dc0", true, false, "absent"},
		{"both up, same datacenter, VM deleted after it was found", "dc0", "dc0", up, up, "dc0", true, true, "absent"},
		{"same datacenter, first refused", "dc0", "dc0", refused, up, "dc0", false, false, "tenant-b"},
		{"same datacenter, first refused, VM deleted", "dc0", "dc0", refused, up, "dc0", true, false, "error"},
		{"same datacenter, first refused after it found the VM", "dc0", "dc0", refused, up, "dc0", false, true, "tenant-b"},
		{"same datacenter, second down, VM deleted after it was found", "dc0", "dc0", up, down, "dc0", true, true, "error"},
		{"every datacenter and one, VM in the one's", "", "dc1", up, up, "dc1", false, false, "tenant-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTenants(map[string]string{"tenant-a": tc.a, "tenant-b": tc.b})
			dc := tc.vmDC
			vm := tenantVM(dc, "vm-1", 1)
			tn.add(vm)
			d := tn.discoverer(t, discovery.Options{})
			// The duplicate index holds both entries' UUIDs (as once each
			// has answered): an entry that fails later does not hold up a
			// VM found through the other (the fakes have no inventory).
			eventually(t, "both entries indexed", func() bool { return indexed(d) })
			ctx := t.Context()
			if tc.cacheHit {
				if res, err := d.Exists(ctx, nodeOf(vm)); err != nil || res == nil {
					t.Fatalf("Exists with both entries up = %v, %v", res, err)
				}
			}
			tc.sa.apply(tn.backends["tenant-a"])
			tc.sb.apply(tn.backends["tenant-b"])
			if tc.deleted {
				tn.remove(vm.Ref.ID)
			}
			res, err := d.Exists(ctx, nodeOf(vm))
			var got string
			var oe *discovery.OutsideError
			switch {
			case err == nil && res == nil:
				got = "absent"
			case err == nil:
				got = res.VCenter
			case errors.As(err, &oe):
				got = "outside"
			default:
				got = "error"
			}
			if got != tc.want {
				t.Errorf("Exists = %v, %v (%s); want %s", res, err, got, tc.want)
			}
		})
	}
}

// Random sequences over one vCenter of two entries (datacenters dc0 and
// dc1 both, or one each, or both the same) and a VM that moves, is
// deleted and comes back, while each entry is up, refused or down. After
// every step: absence only when the VM is gone and both entries are up;
// found only through an entry that is up and serves its datacenter, the
// first such in config order when every entry is up; never a duplicate.
func TestRule1SequencesWithTwoEntriesOfOneServer(t *testing.T) {
	layouts := [][2]string{{"dc0", "dc1"}, {"dc0 dc1", "dc1"}, {"dc0", "dc0"}, {"", "dc1"}}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 22))
		layout := layouts[r.IntN(len(layouts))]
		tn := newTenants(map[string]string{"tenant-a": layout[0], "tenant-b": layout[1]})
		d := tn.discoverer(t, discovery.Options{})
		vm := tenantVM("dc0", "vm-1", 1)
		present := false
		states := map[string]tenantState{"tenant-a": up, "tenant-b": up}
		var steps []string
		for step := range 12 {
			switch op := r.IntN(4); {
			case op == 0 && present:
				tn.remove(vm.Ref.ID)
				present = false
				steps = append(steps, "delete")
			case op <= 1:
				tn.remove(vm.Ref.ID)
				vm.Ref.Datacenter = []string{"dc0", "dc1"}[r.IntN(2)]
				tn.add(vm)
				present = true
				steps = append(steps, "vm in "+vm.Ref.Datacenter)
			default:
				name := tn.entries[r.IntN(2)]
				states[name] = tenantState(r.IntN(3))
				states[name].apply(tn.backends[name])
				steps = append(steps, fmt.Sprintf("%s state %d", name, states[name]))
			}
			res, err := d.Exists(t.Context(), nodeOf(vm))
			fail := func(why string) {
				t.Fatalf("seed %d layout %q step %d (%v): Exists = %v, %v: %s", seed, layout, step, steps, res, err, why)
			}
			var de *discovery.DuplicateError
			if errors.As(err, &de) {
				fail("a duplicate: one VM seen through two entries")
			}
			serving := func(name string) bool {
				dcs := tn.dcs[name]
				return len(dcs) == 0 || slices.Contains(dcs, vm.Ref.Datacenter)
			}
			switch {
			case err == nil && res == nil:
				if present && (serving("tenant-a") || serving("tenant-b")) {
					fail("absent, but the VM is there")
				}
				if states["tenant-a"] != up || states["tenant-b"] != up {
					fail("absent while an entry could not answer")
				}
			case err == nil:
				if !present || states[res.VCenter] != up || !serving(res.VCenter) {
					fail("found through an entry that cannot have answered with it")
				}
				if first := tn.entries[slices.IndexFunc(tn.entries, serving)]; states["tenant-a"] == up && states["tenant-b"] == up && res.VCenter != first {
					fail("attributed to " + res.VCenter + ", want " + first)
				}
			default:
				if present && states["tenant-a"] == up && states["tenant-b"] == up && (serving("tenant-a") || serving("tenant-b")) {
					fail("an error with every entry up and the VM there")
				}
				if !present && states["tenant-a"] == up && states["tenant-b"] == up {
					fail("an error with every entry up and the VM gone")
				}
			}
		}
	}
}
