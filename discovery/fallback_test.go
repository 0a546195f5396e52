package discovery_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
)

// CPI's searches for a Node without providerID (guest host name, then
// guest IP) can find a VM or fail; they never make a Node absent.

const noSuchUUID = "42ffffff-ffff-4fff-8fff-ffffffffffff"

// guestVM adds to vCenter vc of f a VM whose guest reports host name
// hostName and IP ip.
func (f *fleet) guestVM(vc, dc, id, hostName, ip, uuid string) backends.VM {
	vm := backends.VM{
		Ref: backends.VMRef{Datacenter: dc, ID: id}, Name: "vm-" + id, UUID: uuid, PowerState: backends.PoweredOn,
		GuestHostName: hostName,
	}
	if ip != "" {
		vm.NICs = []backends.NIC{{Network: "VM Network", IPs: []string{ip}, DeviceConfigID: 4000}}
	}
	f.backends[vc].Add(vm, nil)
	return vm
}

// logLines captures what the discoverer logs through ctx.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) ctx(t *testing.T) context.Context {
	logger := funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{})
	return klog.NewContext(t.Context(), logger)
}

func (l *logLines) with(sub ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		all := true
		for _, s := range sub {
			all = all && strings.Contains(line, s)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

func TestFallbackFindsByGuestHostName(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	vm := f.guestVM("vc2", "dc1", "vm-web", "Web-1.Example.com", "10.0.0.7", "42000000-aaaa-4000-8000-000000000001")
	var logs logLines
	ctx := logs.ctx(t)

	for _, k := range []discovery.NodeKeys{
		{Name: "web-1.example.com"}, // no system UUID: VM name, then guest host name
		{Name: "web-1.example.com", SystemUUID: noSuchUUID},
	} {
		res, err := d.Locate(ctx, k)
		if err != nil || res == nil || res.VCenter != "vc2" || res.VM.Ref != vm.Ref {
			t.Fatalf("Locate(%+v) = %v, %v; want %s in vc2", k, res, err, vm.Ref.ID)
		}
		res, err = d.Exists(ctx, k)
		if err != nil || res == nil || res.VM.Ref != vm.Ref {
			t.Fatalf("Exists(%+v) = %v, %v; want found", k, res, err)
		}
	}
	// The system UUID names no VM: the one found is still used, and both
	// UUIDs are logged.
	if got := logs.with("web-1.example.com", vm.UUID, noSuchUUID); len(got) == 0 {
		t.Fatalf("no log line names both the VM's UUID and the system UUID: %q", logs.with())
	}
	// A Node whose system UUID is the VM's own (either byte order) is
	// found by it: nothing to log.
	before := len(logs.with(vm.UUID))
	if res, err := d.Locate(ctx, discovery.NodeKeys{Name: "web-1.example.com", SystemUUID: discovery.SwapByteOrder(vm.UUID)}); err != nil || res == nil {
		t.Fatalf("Locate by system UUID = %v, %v", res, err)
	}
	if after := len(logs.with(vm.UUID)); after != before {
		t.Fatalf("a VM found by its system UUID was logged as a mismatch: %q", logs.with(vm.UUID))
	}

	// A short Node name is not the FQDN the guest reports: nothing found;
	// without a providerID that is never absence (it may not be a VM).
	short := discovery.NodeKeys{Name: "web-1", SystemUUID: noSuchUUID}
	if res, err := d.Locate(ctx, short); err != nil || res != nil {
		t.Fatalf("Locate(short name) = %v, %v; want nil, nil", res, err)
	}
	if res, err := d.Exists(ctx, short); !errors.Is(err, discovery.ErrNoProviderID) || res != nil {
		t.Fatalf("Exists(short name, system UUID of no VM) = %v, %v; want ErrNoProviderID", res, err)
	}
	if _, err := d.Exists(ctx, discovery.NodeKeys{Name: "web-1"}); !errors.Is(err, discovery.ErrNameOnly) {
		t.Fatalf("Exists(name only, nothing found) err = %v, want ErrNameOnly", err)
	}
}

// The VM-name search stays ahead of CPI's: a Node without system UUID
// named like one VM and reporting another's host name resolves as before.
func TestVMNameSearchComesBeforeGuestHostName(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	byName := f.vms["vc1"][1]
	f.guestVM("vc3", "dc0", "vm-other", byName.Name, "", "42000000-aaaa-4000-8000-000000000002")
	res, err := d.Locate(t.Context(), discovery.NodeKeys{Name: byName.Name})
	if err != nil || res == nil || res.VM.Ref != byName.Ref || res.VCenter != "vc1" {
		t.Fatalf("Locate = %v, %v; want the VM named %s", res, err, byName.Name)
	}
}

func TestFallbackFindsByIPWhenTheNodeNameIsOne(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	ctx := t.Context()
	vm := f.guestVM("vc3", "dc0", "vm-ip", "localhost.localdomain", "10.20.30.40", "42000000-aaaa-4000-8000-000000000003")
	for _, k := range []discovery.NodeKeys{{Name: "10.20.30.40"}, {Name: "10.20.30.40", SystemUUID: noSuchUUID}} {
		if res, err := d.Locate(ctx, k); err != nil || res == nil || res.VM.Ref != vm.Ref {
			t.Fatalf("Locate(%+v) = %v, %v; want %s", k, res, err, vm.Ref.ID)
		}
		if res, err := d.Exists(ctx, k); err != nil || res == nil || res.VM.Ref != vm.Ref {
			t.Fatalf("Exists(%+v) = %v, %v; want found", k, res, err)
		}
	}
	// A name that is no IP is never searched as one: a failing IP search
	// does not touch it.
	f.backends["vc2"].FailQuery(backends.ByIP, errors.New("connection reset"))
	if res, err := d.Exists(ctx, discovery.NodeKeys{Name: "node-7", SystemUUID: noSuchUUID}); !errors.Is(err, discovery.ErrNoProviderID) || res != nil {
		t.Fatalf("Exists(non-IP name, nothing found) = %v, %v; want ErrNoProviderID (the IP search failing is not met)", res, err)
	}
}

// A vCenter that cannot answer a fallback search makes it an error, never
// "not found" — also when the VM was found elsewhere (another VM of that
// name or IP there cannot be ruled out), and in Exists.
func TestFallbackWithAVCenterDownIsAnError(t *testing.T) {
	for _, by := range []backends.By{backends.ByDNSName, backends.ByIP} {
		t.Run(by.String(), func(t *testing.T) {
			f := newFleet()
			d := f.discoverer(t, time.Second, 100, time.Minute) // the breaker stays closed
			ctx := t.Context()
			f.backends["vc3"].FailQuery(by, errors.New("connection refused"))
			name := "10.9.9.9" // no VM: both searches run
			for _, k := range []discovery.NodeKeys{{Name: name}, {Name: name, SystemUUID: noSuchUUID}} {
				res, err := d.Locate(ctx, k)
				var le *discovery.LookupError
				if res != nil || !errors.As(err, &le) || failedVCenters(le) != "vc3" {
					t.Fatalf("Locate(%+v) = %v, %v; want a LookupError naming vc3", k, res, err)
				}
				if res, err := d.Exists(ctx, k); err == nil || res != nil || errors.Is(err, discovery.ErrNameOnly) {
					t.Fatalf("Exists(%+v) = %v, %v; want the lookup error", k, res, err)
				}
			}
			// Found in vc1 while vc3 cannot answer: still an error.
			ip, host := "", ""
			if by == backends.ByIP {
				ip = name
			} else {
				host = name
			}
			vm := f.guestVM("vc1", "dc0", "vm-found", host, ip, "42000000-aaaa-4000-8000-000000000004")
			res, err := d.Locate(ctx, discovery.NodeKeys{Name: name, SystemUUID: noSuchUUID})
			var le *discovery.LookupError
			if res != nil || !errors.As(err, &le) || le.Found == nil || le.Found.VM.Ref != vm.Ref {
				t.Fatalf("Locate with vc3 failing = %v, %v; want a LookupError naming the VM found", res, err)
			}
			if !strings.Contains(err.Error(), "vm-found") || !strings.Contains(err.Error(), "vc3") {
				t.Fatalf("error %q does not name the VM found and the vCenter that failed", err)
			}
			if res, err := d.Exists(ctx, discovery.NodeKeys{Name: name, SystemUUID: noSuchUUID}); err == nil || res != nil {
				t.Fatalf("Exists with vc3 failing = %v, %v; want an error", res, err)
			}
			f.backends["vc3"].FailQuery(by, nil)
			if res, err := d.Locate(ctx, discovery.NodeKeys{Name: name, SystemUUID: noSuchUUID}); err != nil || res == nil || res.VM.Ref != vm.Ref {
				t.Fatalf("Locate with vc3 healed = %v, %v; want found", res, err)
			}
		})
	}
}

func TestFallbackMatchingTwoVMsIsAnError(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	ctx := t.Context()
	a := f.guestVM("vc1", "dc0", "vm-a", "db-0.example.com", "10.1.1.1", "42000000-aaaa-4000-8000-00000000000a")
	b := f.guestVM("vc2", "dc1", "vm-b", "DB-0.example.com", "10.1.1.1", "42000000-aaaa-4000-8000-00000000000b")
	for _, k := range []discovery.NodeKeys{
		{Name: "db-0.example.com"}, {Name: "db-0.example.com", SystemUUID: noSuchUUID},
		{Name: "10.1.1.1"}, {Name: "10.1.1.1", SystemUUID: noSuchUUID},
	} {
		res, err := d.Locate(ctx, k)
		var de *discovery.DuplicateError
		if res != nil || !errors.As(err, &de) || len(de.Matches) != 2 {
			t.Fatalf("Locate(%+v) = %v, %v; want a DuplicateError with 2 matches", k, res, err)
		}
		for _, want := range []string{a.Name, b.Name} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name %s", err, want)
			}
		}
		if res, err := d.Exists(ctx, k); !errors.As(err, &de) || res != nil {
			t.Fatalf("Exists(%+v) = %v, %v; want a DuplicateError", k, res, err)
		}
	}
	// In one vCenter too; and one in a datacenter the config leaves out
	// counts: either could be the Node's.
	f.backends["vc2"].Remove(b.Ref.ID)
	f.guestVM("vc1", "dc1", "vm-c", "db-0.example.com", "", "42000000-aaaa-4000-8000-00000000000c")
	var de *discovery.DuplicateError
	if _, err := d.Locate(ctx, discovery.NodeKeys{Name: "db-0.example.com"}); !errors.As(err, &de) {
		t.Fatalf("two in one vCenter: err = %v, want DuplicateError", err)
	}
	f.backends["vc1"].Remove("vm-c")
	f.guestVM("vc3", "dc-unserved", "vm-d", "db-0.example.com", "", "42000000-aaaa-4000-8000-00000000000d")
	vcs := []discovery.Target{
		{Name: "vc1", Server: "vc1:443", Backend: f.backends["vc1"], RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute},
		{Name: "vc2", Server: "vc2:443", Backend: f.backends["vc2"], RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute},
		{Name: "vc3", Server: "vc3:443", Backend: f.backends["vc3"], RequestTimeout: time.Second, ConsecutiveFailures: 5, OpenTimeout: time.Minute, Datacenters: specs(t, "dc0", "dc1")},
	}
	narrow := discovery.New(vcs, discovery.Options{})
	scanEvery(t, narrow, time.Second)
	t.Cleanup(narrow.Close)
	if _, err := narrow.Locate(ctx, discovery.NodeKeys{Name: "db-0.example.com"}); !errors.As(err, &de) || len(de.Matches) != 2 {
		t.Fatalf("a twin outside the configured datacenters: err = %v, want DuplicateError", err)
	}
}

// A Node with a providerID is looked up by it alone: a VM reporting its
// name is not its VM, and a failing fallback search is never made.
func TestProviderIDNodeNeverFallsBack(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	ctx := t.Context()
	f.guestVM("vc1", "dc0", "vm-web", "web-2.example.com", "10.3.3.3", "42000000-aaaa-4000-8000-00000000000e")
	for _, name := range []string{"web-2.example.com", "10.3.3.3"} {
		k := discovery.NodeKeys{Name: name, ProviderID: discovery.ProviderID(noSuchUUID), SystemUUID: noSuchUUID}
		if res, err := d.Locate(ctx, k); err != nil || res != nil {
			t.Fatalf("Locate(%+v) = %v, %v; want nil, nil", k, res, err)
		}
		if res, err := d.Exists(ctx, k); err != nil || res != nil {
			t.Fatalf("Exists(%+v) = %v, %v; want confirmed absence", k, res, err)
		}
	}
	for _, n := range f.names {
		f.backends[n].FailQuery(backends.ByDNSName, errors.New("must not be asked"))
		f.backends[n].FailQuery(backends.ByIP, errors.New("must not be asked"))
	}
	k := discovery.NodeKeys{Name: "10.3.3.3", ProviderID: discovery.ProviderID(noSuchUUID)}
	if res, err := d.Exists(ctx, k); err != nil || res != nil {
		t.Fatalf("Exists(%+v) with fallback searches failing = %v, %v; want confirmed absence", k, res, err)
	}
}

// A system UUID search that fails is an error: a weaker search does not
// stand in for it (the VM may be in the vCenter that did not answer).
func TestFailedUUIDSearchIsNotReplacedByAFallback(t *testing.T) {
	f := newFleet()
	d := f.discoverer(t, time.Second, 5, time.Minute)
	ctx := t.Context()
	f.guestVM("vc1", "dc0", "vm-web", "web-3.example.com", "", "42000000-aaaa-4000-8000-00000000000f")
	f.backends["vc2"].FailQuery(backends.ByUUID, errors.New("connection refused"))
	k := discovery.NodeKeys{Name: "web-3.example.com", SystemUUID: noSuchUUID}
	for name, call := range map[string]func(context.Context, discovery.NodeKeys) (*discovery.Result, error){"Locate": d.Locate, "Exists": d.Exists} {
		res, err := call(ctx, k)
		var le *discovery.LookupError
		if res != nil || !errors.As(err, &le) || le.Found != nil || !strings.Contains(err.Error(), "uuid") {
			t.Fatalf("%s = %v, %v; want the UUID search's LookupError", name, res, err)
		}
	}
}
