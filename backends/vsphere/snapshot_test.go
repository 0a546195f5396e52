package vsphere

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// holdingWaits holds every WaitForUpdatesEx request until release is
// closed (or its own deadline), counting them in held; other requests
// pass.
func holdingWaits(release <-chan struct{}, held *atomic.Int64) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Body != nil {
				body, err := io.ReadAll(r.Body)
				if err != nil {
					return nil, err
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				if bytes.Contains(body, []byte("<WaitForUpdatesEx")) {
					held.Add(1)
					select {
					case <-release:
					case <-r.Context().Done():
						return nil, r.Context().Err()
					}
				}
			}
			return next.RoundTrip(r)
		})
	}
}

// The first load is a RetrievePropertiesEx snapshot: the inventory is in
// service before a single WaitForUpdatesEx is answered. The watch's
// initial set, computed after VMs were destroyed, powered off, given
// another UUID and guest host name, then brings the inventory to what
// vCenter says, as if it had loaded from the set alone: the destroyed VM
// is no longer held.
func TestInventoryServesFromASnapshotTheWatchCorrects(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	release := make(chan struct{})
	var held atomic.Int64
	opts := func(inventory bool) Options {
		o := optionsVia(vc, vc.Host, vc.Port, 5*time.Second)
		o.Inventory, o.Heartbeat, o.TagRefresh = inventory, time.Minute, time.Hour
		return o
	}
	o := opts(true)
	o.WrapTransport = holdingWaits(release, &held)
	b := New(o)
	b.Start()
	direct := New(opts(false))
	direct.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Close(ctx)
		_ = direct.Close(ctx)
	})
	fx := &invFixture{t: t, vc: vc, b: b, direct: direct}
	fx.eventually("the inventory is in service", func() bool { return inService(b) })
	if held.Load() == 0 {
		t.Fatal("in service before any watch polled: the test's hold did not engage")
	}
	if st := inventoryOf(b); st.VMs != len(vc.VMs) {
		t.Fatalf("the snapshot holds %d VMs, want %d", st.VMs, len(vc.VMs))
	}

	ctx := ctxFor(t)
	off, gone, renumbered, renamed := vc.VMs[0], vc.VMs[1], vc.VMs[2], vc.VMs[3]
	if err := vc.PowerOff(ctx, off); err != nil {
		t.Fatal(err)
	}
	if err := vc.Destroy(ctx, gone); err != nil {
		t.Fatal(err)
	}
	vc.SetUUID(renumbered, "42abcdef-0000-4000-8000-00000000abcd")
	renumbered.UUID = "42abcdef-0000-4000-8000-00000000abcd"
	vc.SetGuestHostName(renamed, "renamed.example.com")
	// Still the snapshot: the watch has not answered.
	byName := backends.Query{By: backends.ByName, Values: []string{gone.Name}}
	if vms, ok := b.inv.find(byName); !ok || len(vms) != 1 {
		t.Fatalf("before the watch answers, find(%s) = %v, %v; want the snapshot's VM", gone.Name, vms, ok)
	}

	close(release)
	fx.eventually("the watch's initial set corrects the snapshot", func() bool {
		vms, ok := b.inv.find(byName)
		return ok && len(vms) == 0
	})
	for _, want := range vc.VMs {
		if want == gone {
			continue
		}
		for _, q := range queriesFor(want) {
			got, ok := b.inv.find(q)
			ref, err := direct.Find(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if !ok || !reflect.DeepEqual(got, ref) {
				t.Fatalf("find(%+v) from the inventory = %+v, %v; vCenter says %+v", q, got, ok, ref)
			}
		}
	}
	if st := inventoryOf(b); st.VMs != len(vc.VMs)-1 {
		t.Fatalf("the inventory holds %d VMs, want %d", st.VMs, len(vc.VMs)-1)
	}
}

// An enter is the whole object: a property an earlier record held and
// the enter leaves out (unset since) is gone, and so is its index entry.
func TestAnEnterReplacesTheRecord(t *testing.T) {
	s := newInvState()
	vm := types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-1"}
	enter := func(changes ...types.PropertyChange) {
		s.apply([]types.ObjectUpdate{{Kind: types.ObjectUpdateKindEnter, Obj: vm, ChangeSet: changes}})
	}
	enter(types.PropertyChange{Name: "name", Val: "a"}, types.PropertyChange{Name: "guest.hostName", Val: "a.example.com"})
	enter(types.PropertyChange{Name: "name", Val: "a"})
	if ids := s.byDNS.appendIDs(nil, backends.DNSNameKey("a.example.com")); len(ids) != 0 {
		t.Fatalf("the guest host name the second enter left out is still indexed: %v", ids)
	}
	if got := s.vms["vm-1"].vm.GuestHostName; got != "" {
		t.Fatalf("GuestHostName = %q, want it unset", got)
	}
	folder := types.ManagedObjectReference{Type: "Folder", Value: "group-1"}
	s.apply([]types.ObjectUpdate{{Kind: types.ObjectUpdateKindEnter, Obj: folder, ChangeSet: []types.PropertyChange{
		{Name: "name", Val: "f"}, {Name: "parent", Val: types.ManagedObjectReference{Type: "Folder", Value: "group-0"}},
	}}})
	s.apply([]types.ObjectUpdate{{Kind: types.ObjectUpdateKindEnter, Obj: folder, ChangeSet: []types.PropertyChange{{Name: "name", Val: "f"}}}})
	if e := s.entities[folder]; e != (entity{name: "f"}) {
		t.Fatalf("entity = %+v, want its parent unset", e)
	}
}

// A snapshot that fails costs only time: the watch's own pages load the
// inventory, and it holds what vCenter holds.
func TestInventoryLoadsFromTheWatchWhenTheSnapshotFails(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{})
	faults := vc.InjectFault(simulator.FaultTypeGeneric, 1, "RetrievePropertiesEx")
	defer faults.Remove()
	_, calls, held := coldLoad(t, vc, p, keep)
	if faults.Injected()["RetrievePropertiesEx"] == 0 {
		t.Fatal("no snapshot was refused: the test proves nothing")
	}
	if held != len(vc.VMs) || calls["WaitForUpdatesEx"] == 0 {
		t.Fatalf("held %d VMs after %d WaitForUpdatesEx; want %d", held, calls["WaitForUpdatesEx"], len(vc.VMs))
	}
}

// The first load is over when the last configured datacenter is
// published, also when another's snapshot went overdue meanwhile (its
// watch's initial set still under way): nothing publishes that one again,
// and lookups would wait firstLoadWait each, for good (seen in the bench:
// every Node 5 s after a leader change at 200 ms).
func TestFirstLoadEndsWhenTheLastDatacenterIsPublished(t *testing.T) {
	inv := newInventory(nil, time.Second, nil, klog.Background())
	inv.started.Store(true)
	root := types.ManagedObjectReference{Type: "Folder", Value: "group-d1"}
	list := newInvState()
	list.entities[root] = entity{}
	refs := []types.ManagedObjectReference{datacenterRef("datacenter-2"), datacenterRef("datacenter-3")}
	for i, dc := range refs {
		list.apply([]types.ObjectUpdate{{Kind: types.ObjectUpdateKindEnter, Obj: dc, ChangeSet: []types.PropertyChange{
			{Name: "name", Val: fmt.Sprintf("DC%d", i)}, {Name: "parent", Val: root},
		}}})
	}
	now := time.Now()
	inv.list = &watched{state: list, freshUntil: now.Add(time.Hour)}
	inv.views = map[types.ManagedObjectReference]*watched{
		refs[0]: {dc: refs[0], state: newInvState(), freshUntil: now.Add(-time.Second)}, // overdue
		refs[1]: {dc: refs[1]},
	}
	inv.setState(inv.views[refs[1]], newInvState(), now.Add(time.Hour))
	select {
	case <-inv.firstAttempt:
	default:
		t.Fatal("every configured datacenter is loaded, one overdue, and the first load is not over: lookups keep waiting for it")
	}
}
