package discovery_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
)

// targets are the fleet's vCenters as discovery targets, with server
// overrides by name.
func (f *fleet) targets(servers map[string]string) []discovery.Target {
	var vcs []discovery.Target
	for _, n := range f.names {
		server := n + ":443"
		if s, ok := servers[n]; ok {
			server = s
		}
		vcs = append(vcs, discovery.Target{Name: n, Server: server, Backend: f.backends[n], RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute})
	}
	return vcs
}

// Issue 20, path 1: a vCenter name repointed to another server (a
// migration, or a typo naming the DR site) is another vCenter. The VM
// remembered in the old one is not looked for at its reference on the new
// one, and not finding it there is not absence. Before the fix the
// location cache identified a vCenter by its name: the remembered "vc1"
// counted as configured, the old server was never asked, and Exists
// answered (nil, nil).
func TestNameRepointedToAnotherServerIsAnotherVCenter(t *testing.T) {
	f := newFleet()
	d := discovery.New(f.targets(nil), discovery.Options{})
	scanEvery(t, d, time.Second)
	t.Cleanup(d.Close)
	ctx := t.Context()
	vm := f.vms["vc1"][0]
	keys := discovery.NodeKeys{Name: vm.Name, ProviderID: discovery.ProviderID(vm.UUID)}
	if res, err := d.Exists(ctx, keys); err != nil || res == nil {
		t.Fatalf("before the edit: Exists = %v, %v", res, err)
	}
	// vc1 now names another server: a new, empty appliance (whose
	// inventory reuses the reference vm-00 for another VM).
	other := backendtest.New()
	other.Add(backends.VM{Ref: vm.Ref, Name: "someone-else", UUID: "42eeeeee-0000-4000-8000-000000000001", PowerState: backends.PoweredOn}, nil)
	f.backends["vc1"] = other
	d.SetVCenters(f.targets(map[string]string{"vc1": "dr-site.example.com:443"}))
	res, err := d.Exists(ctx, keys)
	var re *discovery.RetiredError
	if res != nil || !errors.As(err, &re) || re.LastSeen == nil || !strings.Contains(err.Error(), "vc1:443") {
		t.Fatalf("after repointing vc1: Exists = %v, %v; want a RetiredError naming where it was last seen (vc1:443)", res, err)
	}
	// A rename of the same server is the same vCenter.
	renamed := newFleet()
	d2 := discovery.New(renamed.targets(nil), discovery.Options{})
	scanEvery(t, d2, time.Second)
	t.Cleanup(d2.Close)
	vm2 := renamed.vms["vc2"][1]
	keys2 := discovery.NodeKeys{Name: vm2.Name, ProviderID: discovery.ProviderID(vm2.UUID)}
	if res, err := d2.Exists(ctx, keys2); err != nil || res == nil {
		t.Fatal(err)
	}
	vcs := renamed.targets(nil)
	vcs[1].Name = "vc2-renamed"
	d2.SetVCenters(vcs)
	renamed.backends["vc2"].Remove(vm2.Ref.ID)
	if res, err := d2.Exists(ctx, keys2); err != nil || res != nil {
		t.Fatalf("renamed, VM destroyed where it was seen: Exists = %v, %v; want absence", res, err)
	}
}

// An address that answers as another vCenter instance (its DNS name moved
// to a new appliance): a VM remembered there is not read at its old
// reference, and the History's record of the instance that served there
// keeps absence an error until the record retires it.
func TestServerAnsweringAsAnotherInstanceIsAnotherVCenter(t *testing.T) {
	f := newFleet()
	for i, n := range f.names {
		f.backends[n].SetInstanceUUID("instance-" + string(rune('a'+i)))
	}
	var noted atomic.Int32
	d := discovery.New(f.targets(nil), discovery.Options{OnIdentity: func() { noted.Add(1) }})
	scanEvery(t, d, time.Second)
	t.Cleanup(d.Close)
	d.SetHistory(servedAs(map[string]string{"vc1": "instance-a", "vc2": "instance-b", "vc3": "instance-c"}), "")
	ctx := t.Context()
	vm := f.vms["vc1"][1]
	keys := discovery.NodeKeys{Name: vm.Name, ProviderID: discovery.ProviderID(vm.UUID)}
	if res, err := d.Exists(ctx, keys); err != nil || res == nil {
		t.Fatalf("before: Exists = %v, %v", res, err)
	}
	if n := noted.Load(); n != 0 {
		t.Fatalf("OnIdentity called %d times for instances the History records", n)
	}
	f.backends["vc1"].SetInstanceUUID("instance-new")
	f.backends["vc1"].Remove(vm.Ref.ID)
	res, err := d.Exists(ctx, keys)
	if res != nil || err == nil {
		t.Fatalf("vc1's address answering as another instance: Exists = %v, %v; want an error", res, err)
	}
	if noted.Load() == 0 {
		t.Fatal("OnIdentity was not told of the new instance")
	}
	// Not remembered by this process: the History alone keeps it.
	other := f.vms["vc1"][2]
	f.backends["vc1"].Remove(other.Ref.ID)
	_, err = d.Exists(ctx, discovery.NodeKeys{Name: other.Name, ProviderID: discovery.ProviderID(other.UUID)})
	if err == nil || !strings.Contains(err.Error(), "instance-a") {
		t.Fatalf("a VM of the old instance never seen by this process: err = %v; want one naming the instance that served before", err)
	}
}

// A VM found while its vCenter's instance is not known (its connection
// retired for another appliance at the address, its inventory still
// answering) is served, but where it was is not remembered over what was:
// a location without an instance matches whatever appliance answers next,
// and that one's "not found" forgot it and concluded absence (seen over
// vcsim with the race detector: TestReimagedVCenterKeepsItsNodes).
func TestFoundWhileTheInstanceIsUnknownKeepsTheLocation(t *testing.T) {
	f := newFleet()
	for i, n := range f.names {
		f.backends[n].SetInstanceUUID("instance-" + string(rune('a'+i)))
	}
	d := discovery.New(f.targets(nil), discovery.Options{})
	scanEvery(t, d, time.Second)
	t.Cleanup(d.Close)
	// Known, recording no instance: only the location cache can tell.
	d.SetHistory(discovery.History{}, "")
	ctx := t.Context()
	vm := f.vms["vc1"][1]
	keys := discovery.NodeKeys{Name: vm.Name, ProviderID: discovery.ProviderID(vm.UUID)}
	if res, err := d.Exists(ctx, keys); err != nil || res == nil {
		t.Fatalf("before: Exists = %v, %v", res, err)
	}
	f.backends["vc1"].SetInstanceUUID("")
	if res, err := d.Exists(ctx, keys); err != nil || res == nil {
		t.Fatalf("instance unknown, VM still answered: Exists = %v, %v; want it found", res, err)
	}
	f.backends["vc1"].SetInstanceUUID("instance-new")
	f.backends["vc1"].Remove(vm.Ref.ID)
	res, err := d.Exists(ctx, keys)
	if res != nil || err == nil || !strings.Contains(err.Error(), "instance-a") {
		t.Fatalf("another appliance at vc1's address without the VM: Exists = %v, %v; want an error naming instance-a, where it was last seen", res, err)
	}
}

// Issue 20, finding 7: a VM found while a vCenter cannot answer is served
// only if the duplicate index holds that vCenter's UUIDs. One it does not
// (inventory off) may hold a twin: once it has answered, the lookup fails
// while it cannot. Before the fix the VM found elsewhere was served, and a
// twin reported a moment ago disappeared while its vCenter was down.
func TestFoundWhileAnUnindexedVCenterIsDownIsAnError(t *testing.T) {
	f := newFleet()
	f.backends["vc3"].WithoutInventory()
	vm := f.vms["vc1"][1]
	f.backends["vc3"].Add(backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: "vm-twin"}, Name: "twin", UUID: vm.UUID}, nil)
	d := discovery.New(f.targets(nil), discovery.Options{})
	scanEvery(t, d, 10*time.Millisecond)
	t.Cleanup(d.Close)
	ctx := t.Context()
	var de *discovery.DuplicateError
	if _, err := d.Locate(ctx, byUUID(vm.UUID)); !errors.As(err, &de) {
		t.Fatalf("twin in vc3, every vCenter answering: err = %v; want a DuplicateError", err)
	}
	refused := errors.New("connection refused")
	f.backends["vc3"].Fail(refused)
	_, err := d.Locate(ctx, byUUID(vm.UUID))
	var le *discovery.LookupError
	if !errors.As(err, &le) || le.Found == nil || failedVCenters(le) != "vc3" {
		t.Fatalf("the twin's vCenter (not indexed) down: err = %v; want a LookupError naming vc3, not the VM in vc1", err)
	}
	if _, err := d.Locate(ctx, byUUID(f.vms["vc1"][2].UUID)); !errors.As(err, &le) {
		t.Fatalf("any VM found while vc3 (not indexed) is down: err = %v; want a LookupError", err)
	}
	for _, h := range d.Health() {
		if h.Name == "vc3" && h.Indexed {
			t.Fatal("Health says vc3 is indexed")
		}
	}
}

// A vCenter down since it was configured was never seen: it does not hold
// up the VMs found in the others (one dead vCenter costs the others
// nothing), and an indexed one that goes down keeps its twins seen.
func TestVCenterNeverSeenUpDoesNotHoldUpTheOthers(t *testing.T) {
	f := newFleet()
	refused := errors.New("connection refused")
	f.backends["vc3"].Fail(refused)
	var twins atomic.Int32
	d := discovery.New(f.targets(nil), discovery.Options{OnDuplicate: func(string, []string) { twins.Add(1) }})
	scanEvery(t, d, 10*time.Millisecond)
	t.Cleanup(d.Close)
	ctx := t.Context()
	vm := f.vms["vc1"][1]
	if res, err := d.Locate(ctx, byUUID(vm.UUID)); err != nil || res == nil {
		t.Fatalf("vc3 down since start: Locate = %v, %v; want found in vc1", res, err)
	}
	f.backends["vc3"].Fail(nil)
	f.backends["vc3"].Add(backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: "vm-twin"}, Name: "twin", UUID: vm.UUID}, nil)
	waitFor(t, "the twin indexed", func() bool { return twins.Load() > 0 })
	f.backends["vc3"].Fail(refused)
	var de *discovery.DuplicateError
	if _, err := d.Locate(ctx, byUUID(vm.UUID)); !errors.As(err, &de) {
		t.Fatalf("twin in vc3, vc3 indexed then down: err = %v; want a DuplicateError", err)
	}
	if res, err := d.Locate(ctx, byUUID(f.vms["vc1"][2].UUID)); err != nil || res == nil {
		t.Fatalf("vc3 indexed, then down: Locate = %v, %v; want found in vc1", res, err)
	}
}

// waitFor polls cond every 5ms for up to 10s.
var waitFor = poll.Schedule{Every: 5 * time.Millisecond, Within: 10 * time.Second}.Until

// servedAs is a History recording each server (port 443) as serving the
// instance UUID given.
func servedAs(instances map[string]string) discovery.History {
	h := discovery.History{Served: map[string]discovery.Served{}}
	for server, id := range instances {
		record := discovery.VCenterRecord{Server: server, Port: 443, InstanceUUID: id}
		h.Served[server] = discovery.Served{VCenterRecord: record}
	}
	return h
}
