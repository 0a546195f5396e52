package vsphere

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
)

// The indexes answer as a scan of the records would, through VMs
// entering, changing and leaving with keys they share (names, UUIDs
// differing in case only, DNS names, one address on two NICs), and
// hold nothing once the VMs are gone.
func TestIndexesAgreeWithAScanOfTheRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
	names := []string{"n0", "n1", "n2"}
	uuids := []string{"4210AAAA-0000-4000-8000-000000000000", "4210aaaa-0000-4000-8000-000000000000", "4210bbbb-0000-4000-8000-000000000000"}
	hosts := []string{"h0.Example.com", "H0.example.COM", "h1.example.com", ""}
	ips := []string{"10.0.0.1", "10.0.0.2", "fe80::1", "10.0.0.3"}
	change := func() types.PropertyChange {
		assign := func(name string, v any) types.PropertyChange {
			if rng.IntN(8) == 0 {
				return types.PropertyChange{Name: name, Op: types.PropertyChangeOpRemove}
			}
			return types.PropertyChange{Name: name, Op: types.PropertyChangeOpAssign, Val: v}
		}
		switch rng.IntN(4) {
		case 0:
			return assign("name", pick(names...))
		case 1:
			return assign("config.uuid", pick(uuids...))
		case 2:
			return assign("guest.hostName", pick(hosts...))
		}
		var net types.ArrayOfGuestNicInfo
		for range rng.IntN(3) {
			var addrs []string
			for range rng.IntN(3) {
				addrs = append(addrs, pick(ips...))
			}
			net.GuestNicInfo = append(net.GuestNicInfo, types.GuestNicInfo{Network: "VM Network", IpAddress: addrs})
		}
		return assign("guest.net", net)
	}
	s := newInvState()
	check := func(step int) {
		t.Helper()
		type index struct {
			name  string
			x     *vmIndex
			keys  []string
			holds func(vm *backends.VM, k string) bool
		}
		lower := make([]string, len(uuids))
		for i, u := range uuids {
			lower[i] = strings.ToLower(u)
		}
		dns := make([]string, len(hosts))
		for i, h := range hosts {
			dns[i] = backends.DNSNameKey(h)
		}
		for _, ix := range []index{
			{"byUUID", s.byUUID, lower, func(vm *backends.VM, k string) bool { return vm.UUID == k }},
			{"byName", s.byName, names, func(vm *backends.VM, k string) bool { return vm.Name == k }},
			{"byDNS", s.byDNS, dns, func(vm *backends.VM, k string) bool { return backends.DNSNameKey(vm.GuestHostName) == k }},
			{"byIP", s.byIP, ips, func(vm *backends.VM, k string) bool {
				return slices.ContainsFunc(vm.NICs, func(n backends.NIC) bool { return slices.Contains(n.IPs, k) })
			}},
		} {
			held := 0
			for _, k := range slices.Compact(slices.Sorted(slices.Values(ix.keys))) {
				var want []string
				for id, rec := range s.vms {
					if vm := s.placed(rec); k != "" && ix.holds(&vm, k) {
						want = append(want, id)
					}
				}
				slices.Sort(want)
				got := ix.x.appendIDs(nil, k)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("step %d: %s[%q] = %v, a scan finds %v", step, ix.name, k, got, want)
				}
				if len(want) > 0 {
					held++
				}
			}
			if ix.x.len() != held {
				t.Fatalf("step %d: %s holds %d keys, the records %d", step, ix.name, ix.x.len(), held)
			}
		}
		var want []string
		for _, rec := range s.vms {
			if u := rec.vm.UUID; u != "" && !slices.Contains(want, u) {
				want = append(want, u)
			}
		}
		got := s.appendUUIDs(nil)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: appendUUIDs(nil) = %v, the records hold %v", step, got, want)
		}
	}
	for step := range 3000 {
		u := types.ObjectUpdate{Obj: vmRef(fmt.Sprintf("vm-%d", rng.IntN(6))), Kind: types.ObjectUpdateKindModify}
		if rng.IntN(10) == 0 {
			u.Kind = types.ObjectUpdateKindLeave
		} else {
			for range 1 + rng.IntN(3) {
				u.ChangeSet = append(u.ChangeSet, change())
			}
		}
		s.apply([]types.ObjectUpdate{u})
		check(step)
	}
	var leave []types.ObjectUpdate
	for id := range s.vms {
		leave = append(leave, types.ObjectUpdate{Obj: vmRef(id), Kind: types.ObjectUpdateKindLeave})
	}
	s.apply(leave)
	for name, x := range map[string]*vmIndex{"byUUID": s.byUUID, "byName": s.byName, "byIP": s.byIP, "byDNS": s.byDNS} {
		if x.len() != 0 {
			t.Errorf("with no VM held, %s holds %d keys", name, x.len())
		}
	}
}

// A lookup keeps only the VMs holding the key looked up, not every VM
// under its hash: two keys can share one.
func TestIndexLookupChecksTheKey(t *testing.T) {
	s := newInvState()
	s.apply(benchUpdates(1))
	// As if "node-x" hashed as node-0 does.
	x := s.byName
	x.one[maphash.String(x.seed, "node-x")] = s.vms["vm-0"]
	if got := x.appendIDs(nil, "node-x"); len(got) != 0 {
		t.Errorf("byName[node-x] = %v, want none: vm-0 is node-0", got)
	}
	if got := x.appendIDs(nil, "node-0"); !slices.Equal(got, []string{"vm-0"}) {
		t.Errorf("byName[node-0] = %v, want vm-0", got)
	}
}

// The inventory keeps no decoded string of a value that repeats from VM
// to VM: two VMs' copies of a guest OS id, a connection state, a host,
// a pool, a network name, an extraConfig flag are one, not the decoded
// update's (which is garbage once applied).
func TestRepeatedValuesAreHeldOnce(t *testing.T) {
	updates := benchUpdates(65)
	s := newInvState()
	s.apply(updates)
	a, _ := s.vm("vm-0")
	b, _ := s.vm("vm-64") // on vm-0's host, in its pool (see benchUpdates)
	decoded := map[string]bool{}
	for _, u := range updates {
		for _, c := range u.ChangeSet {
			switch v := c.Val.(type) {
			case string:
				decoded[addr(v)] = true
			case types.VirtualMachinePowerState:
				decoded[addr(string(v))] = true
			case types.VirtualMachineConnectionState:
				decoded[addr(string(v))] = true
			case types.ManagedObjectReference:
				decoded[addr(v.Type)], decoded[addr(v.Value)] = true, true
			case types.OptionValue:
				decoded[addr(v.Value.(string))] = true
			case types.ArrayOfGuestNicInfo:
				for _, n := range v.GuestNicInfo {
					decoded[addr(n.Network)] = true
				}
			}
		}
	}
	for _, f := range []struct {
		name string
		a, b string
	}{
		{"PowerState", string(a.PowerState), string(b.PowerState)},
		{"ConnectionState", a.ConnectionState, b.ConnectionState},
		{"GuestID", a.GuestID, b.GuestID},
		{"Host", a.Host, b.Host},
		{"ResourcePool", a.ResourcePool, b.ResourcePool},
		{"ResourcePoolType", a.ResourcePoolType, b.ResourcePoolType},
		{"GuestInfoMetadataEncoding", a.GuestInfoMetadataEncoding, b.GuestInfoMetadataEncoding},
		{"DiskEnableUUID", a.DiskEnableUUID, b.DiskEnableUUID},
		{"HardwareVersion", a.HardwareVersion, b.HardwareVersion},
		{"NICs[0].Network", a.NICs[0].Network, b.NICs[0].Network},
	} {
		switch {
		case f.a == "" || f.a != f.b:
			t.Errorf("%s: %q and %q, want the same value set", f.name, f.a, f.b)
		case decoded[addr(f.a)] || decoded[addr(f.b)]:
			t.Errorf("%s %q: the decoded update's string is held", f.name, f.a)
		case addr(f.a) != addr(f.b):
			t.Errorf("%s %q: held twice", f.name, f.a)
		}
	}
}

// addr is where s's bytes are.
func addr(s string) string { return fmt.Sprint(unsafe.StringData(s)) }

// A change that moves no index key (a power state) allocates nothing:
// the record is updated in place, the value interned.
func TestAnUnindexedChangeAllocatesNothing(t *testing.T) {
	s := newInvState()
	s.apply(benchUpdates(100))
	states := []types.VirtualMachinePowerState{types.VirtualMachinePowerStatePoweredOff, types.VirtualMachinePowerStatePoweredOn}
	updates := make([][]types.ObjectUpdate, 0, 200)
	for i := range 200 {
		updates = append(updates, []types.ObjectUpdate{{
			Kind: types.ObjectUpdateKindModify, Obj: vmRef(fmt.Sprintf("vm-%d", i%100)),
			ChangeSet: []types.PropertyChange{{Name: "runtime.powerState", Op: types.PropertyChangeOpAssign, Val: types.VirtualMachinePowerState(strings.Clone(string(states[i/100])))}},
		}})
	}
	i := 0
	allocs := testing.AllocsPerRun(len(updates), func() {
		s.apply(updates[i%len(updates)])
		i++
	})
	if allocs != 0 {
		t.Errorf("a power state change allocates %v times, want 0", allocs)
	}
	if vm, _ := s.vm("vm-7"); vm.PowerState != backends.PowerState(types.VirtualMachinePowerStatePoweredOn) {
		t.Errorf("vm-7 is %s after its changes, want poweredOn", vm.PowerState)
	}
}
