package discovery_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/discovery"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/backendtest"
)

// flipping is one vCenter address whose appliance changes at a chosen
// read of its instance UUID (counted from arm): before it, the old
// appliance (its embedded Backend, which holds the VM) answers as
// instanceX; from it on, the instance UUID answered is ids(reads since
// the flip), and Find and Get are answered by next (a re-image: the new
// appliance lacks the VM) or still by the old one (a session lost and
// logged in again to the same appliance). So every position in a
// lookup's sequence of reads can be the one at which the answer changes.
type flipping struct {
	*backendtest.Backend
	next  *backendtest.Backend // answers once flipped; nil: the old one does
	ids   func(n int64) string // the instance UUID at the n-th read since the flip
	reads atomic.Int64
	at    atomic.Int64 // the read that flips; -1 before arm
}

const instanceX, instanceY = "instance-x", "instance-y"

func newFlipping(old, next *backendtest.Backend, ids func(int64) string) *flipping {
	f := &flipping{Backend: old, next: next, ids: ids}
	f.at.Store(-1)
	return f
}

// arm makes the k-th read from now the first one after the flip.
func (f *flipping) arm(k int64) { f.at.Store(f.reads.Load() + k) }

func (f *flipping) flipped() bool {
	at := f.at.Load()
	return at >= 0 && f.reads.Load() >= at
}

// State is the old appliance's, with the instance UUID of this read.
func (f *flipping) State() backends.State {
	st := f.Backend.State()
	st.InstanceUUID = instanceX
	n := f.reads.Add(1) - 1
	if at := f.at.Load(); at >= 0 && n >= at {
		st.InstanceUUID = f.ids(n - at)
	}
	return st
}

func (f *flipping) answering() backends.Backend {
	if f.next != nil && f.flipped() {
		return f.next
	}
	return f.Backend
}

func (f *flipping) Find(ctx context.Context, q backends.Query) ([]backends.VM, error) {
	return f.answering().Find(ctx, q)
}

func (f *flipping) Get(ctx context.Context, ref backends.VMRef) (*backends.VM, error) {
	return f.answering().Get(ctx, ref)
}

// Issue 32 §2: a vCenter's identity read several times in one lookup —
// the remembered location checked with one read, its entry picked with
// another — made the second nil when the session ended (or re-logged in
// to another appliance) between them, and the lookup dereferenced it: a
// panic, which the controller's HandleCrash turns into the process's
// death. Whatever read the identity changes at, a lookup must neither
// panic nor answer that a VM that exists (on the appliance recorded for
// the server) is gone.
func TestIdentityChangingBetweenAnyTwoReads(t *testing.T) {
	vm := backends.VM{Ref: backends.VMRef{Datacenter: "dc0", ID: "vm-1"}, Name: "node-1",
		UUID: "4200aaaa-0000-4000-8000-000000000001", PowerState: backends.PoweredOn}
	keys := discovery.NodeKeys{Name: vm.Name, ProviderID: discovery.ProviderID(vm.UUID)}
	modes := []struct {
		name     string
		reimaged bool // answers come from the new appliance, without the VM
		ids      func(n int64) string
	}{
		{"session lost, then back", false, func(n int64) string { return []string{"", "", instanceX}[min(n, 2)] }},
		{"session lost for good", false, func(int64) string { return "" }},
		{"re-imaged", true, func(int64) string { return instanceY }},
		{"re-imaged, no session between", true, func(n int64) string { return []string{"", instanceY}[min(n, 1)] }},
		// Both appliances hold the VM here: a read of X after Y answered
		// would be a backend breaking its contract (an instance UUID
		// never outlives its appliance), which no lookup can tell from
		// the truth.
		{"cycling X, none, Y", false, func(n int64) string { return []string{instanceX, "", instanceY}[n%3] }},
	}
	for _, mode := range modes {
		for k := range int64(40) {
			t.Run(fmt.Sprintf("%s/flip at read %d", mode.name, k), func(t *testing.T) {
				old := backendtest.New()
				old.Add(vm, nil)
				var next *backendtest.Backend
				if mode.reimaged {
					next = backendtest.New()
				}
				b := newFlipping(old, next, mode.ids)
				other := backendtest.New()
				other.SetInstanceUUID("instance-other")
				d := discovery.New([]discovery.Target{
					{Name: "vc1", Server: "vc1:443", Backend: b, RequestTimeout: time.Second, ConsecutiveFailures: 1000, OpenTimeout: time.Minute},
					{Name: "vc2", Server: "vc2:443", Backend: other, RequestTimeout: time.Second, ConsecutiveFailures: 1000, OpenTimeout: time.Minute},
				}, discovery.Options{})
				t.Cleanup(d.Close)
				d.SetHistory(servedAs(map[string]string{"vc1": instanceX, "vc2": "instance-other"}), "")
				ctx := t.Context()
				// Found once: its location (with instance X) is remembered.
				if res, err := d.Exists(ctx, keys); err != nil || res == nil {
					t.Fatalf("before the flip: Exists = %v, %v", res, err)
				}
				b.arm(k)
				for i, lookup := range []func() (*discovery.Result, error){
					func() (*discovery.Result, error) { return d.Exists(ctx, keys) },
					func() (*discovery.Result, error) { return d.Exists(ctx, keys) },
					func() (*discovery.Result, error) { return d.Locate(ctx, byUUID(vm.UUID)) },
					func() (*discovery.Result, error) { return d.Locate(ctx, keys) },
					func() (*discovery.Result, error) { return d.Exists(ctx, keys) },
				} {
					res, panicked, err := noPanic(lookup)
					if panicked != nil {
						t.Fatalf("lookup %d after the flip panicked: %v", i, panicked)
					}
					if res == nil && err == nil {
						t.Fatalf("lookup %d after the flip = nil, nil: the VM on instance X is taken for gone", i)
					}
				}
			})
		}
	}
}

// noPanic runs f and returns what it returned, or what it panicked with.
func noPanic(f func() (*discovery.Result, error)) (res *discovery.Result, panicked any, err error) {
	defer func() { panicked = recover() }()
	res, err = f()
	return res, nil, err
}
