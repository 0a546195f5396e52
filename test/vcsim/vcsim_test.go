package vcsim

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// TestFederationVMs checks what a client of each simulator sees of every
// VM of a federation built in parallel: the names, BIOS UUIDs, guest
// networking, power state, size, placement and zone tags the VM list
// promises, and the datacenter in a folder where Options.Folders puts it.
func TestFederationVMs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := Start(Options{VCenters: 3, Datacenters: 2, Folders: 1, MachinesPerPool: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for vcIndex, vc := range f.VCenters {
		if len(vc.VMs) != 2*2*3 {
			t.Fatalf("%s: %d VMs, want 12", vc.Name, len(vc.VMs))
		}
		c, err := vc.Client(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v, err := view.NewManager(c.Client).CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
		if err != nil {
			t.Fatal(err)
		}
		var got []mo.VirtualMachine
		if err := v.Retrieve(ctx, []string{"VirtualMachine"}, []string{
			"name", "config.uuid", "config.guestId", "config.hardware.numCPU", "config.hardware.memoryMB",
			"runtime.powerState", "runtime.host", "guest.hostName", "guest.net",
		}, &got); err != nil {
			t.Fatal(err)
		}
		byRef := map[string]mo.VirtualMachine{}
		for _, g := range got {
			byRef[g.Self.Value] = g
		}
		rc := rest.NewClient(c.Client)
		if err := rc.Login(ctx, url.UserPassword(vc.User, vc.Password)); err != nil {
			t.Fatal(err)
		}
		tm := tags.NewManager(rc)
		perDC := map[string]int{}
		for _, want := range vc.VMs {
			dcIndex := map[string]int{"DC0": 0, "DC1": 1}[want.Datacenter]
			vmIndex := perDC[want.Datacenter]
			perDC[want.Datacenter]++
			ip, mac, _ := guestAddress(vcIndex, dcIndex, vmIndex)
			g, ok := byRef[want.Ref]
			if !ok {
				t.Fatalf("%s: no VM %s", want.Name, want.Ref)
			}
			if g.Name != want.Name || want.UUID != UUIDFor(vcIndex, dcIndex, vmIndex) || g.Config.Uuid != want.UUID ||
				g.Config.GuestId != "ubuntu64Guest" || g.Config.Hardware.NumCPU != 4 || g.Config.Hardware.MemoryMB != 8192 ||
				g.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
				t.Errorf("%s: %s %s %s %d CPUs %d MB %s; want %s %s ubuntu64Guest 4 CPUs 8192 MB poweredOn",
					want.Name, g.Name, g.Config.Uuid, g.Config.GuestId, g.Config.Hardware.NumCPU, g.Config.Hardware.MemoryMB, g.Runtime.PowerState, want.Name, want.UUID)
			}
			if want.IP != ip || g.Guest.HostName != want.HostName || len(g.Guest.Net) != 1 || g.Guest.Net[0].MacAddress != mac ||
				len(g.Guest.Net[0].IpAddress) == 0 || g.Guest.Net[0].IpAddress[0] != ip {
				t.Errorf("%s: guest %+v, IP %s; want %s, %s, %s", want.Name, g.Guest, want.IP, want.HostName, ip, mac)
			}
			// The first half of a datacenter's VMs are in its cluster,
			// the second on its standalone host, each with its zone.
			wantHost := want.Datacenter + "_C0_H0"
			if vmIndex >= 3 {
				wantHost = want.Datacenter + "_H0"
			}
			var h mo.HostSystem
			if err := object.NewHostSystem(c.Client, *g.Runtime.Host).Properties(ctx, *g.Runtime.Host, []string{"name", "parent"}, &h); err != nil {
				t.Fatal(err)
			}
			if h.Name != wantHost || want.Host != wantHost {
				t.Errorf("%s: on host %s (listed %s), want %s", want.Name, h.Name, want.Host, wantHost)
			}
			attached, err := tm.GetAttachedTags(ctx, *h.Parent)
			if err != nil || len(attached) != 1 || attached[0].Name != want.Zone {
				t.Errorf("%s: zone tags %+v, %v; want %s", want.Name, attached, err, want.Zone)
			}
		}
		if path := vc.VMs[len(vc.VMs)-1].DatacenterPath; path != "/F0/DC1" {
			t.Errorf("%s: the last datacenter's path is %s, want /F0/DC1", vc.Name, path)
		}
	}
}

// TestStartRefusesBeyondTheAddressScheme checks that a federation whose
// VMs the guest address scheme cannot number fails before building.
func TestStartRefusesBeyondTheAddressScheme(t *testing.T) {
	start := time.Now()
	f, err := Start(Options{VCenters: 1, Datacenters: 1, MachinesPerPool: MaxVMsPerDatacenter/2 + 1})
	if err == nil {
		f.Close()
		t.Fatal("Start succeeded")
	}
	t.Logf("refused after %s: %v", time.Since(start), err)
}

// TestAddGuestNIC checks that a second NIC shows in guest.net after the
// first, with its own MAC and device key, its IPs in order, and that the
// first NIC is unchanged.
func TestAddGuestNIC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vc := f.VCenters[0]
	vm := vc.VMs[0]
	vc.AddGuestNIC(vm, "storage", "192.0.2.10", "2001:db8::10")
	vc.AddGuestNIC(vm, "management", "198.51.100.10")
	c, err := vc.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got mo.VirtualMachine
	ref := types.ManagedObjectReference{Type: "VirtualMachine", Value: vm.Ref}
	if err := object.NewVirtualMachine(c.Client, ref).Properties(ctx, ref, []string{"guest.net"}, &got); err != nil {
		t.Fatal(err)
	}
	net := got.Guest.Net
	if len(net) != 3 {
		t.Fatalf("guest.net has %d NICs, want 3: %+v", len(net), net)
	}
	if net[0].IpAddress[0] != vm.IP || net[0].DeviceConfigId != 4000 {
		t.Errorf("first NIC changed: %+v", net[0])
	}
	if net[1].Network != "storage" || len(net[1].IpAddress) != 2 || net[1].IpAddress[0] != "192.0.2.10" || net[1].IpAddress[1] != "2001:db8::10" || net[1].DeviceConfigId != 4001 {
		t.Errorf("second NIC: %+v", net[1])
	}
	if net[2].Network != "management" || len(net[2].IpAddress) != 1 || net[2].IpAddress[0] != "198.51.100.10" || net[2].DeviceConfigId != 4002 {
		t.Errorf("third NIC: %+v", net[2])
	}
	if net[1].MacAddress == net[0].MacAddress || net[1].MacAddress == net[2].MacAddress {
		t.Errorf("NICs share a MAC: %s %s %s", net[0].MacAddress, net[1].MacAddress, net[2].MacAddress)
	}
}

// TestLoginOutcomesByUser checks that a vCenter records the time of every
// login it refuses, by user name (SOAP and REST alike, concurrent ones
// all counted), and not the logins it accepts (recorded apart, with the
// session they open listed in the process while it lasts).
func TestLoginOutcomesByUser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vc := f.VCenters[0]
	login := func(user, password string) (*govmomi.Client, error) {
		u := *vc.Server.URL
		u.User = url.UserPassword(user, password)
		return govmomi.NewClient(ctx, &u, true)
	}
	if r := vc.Refusals(vc.User); len(r) != 0 {
		t.Fatalf("refusals after populate's logins: %v", r)
	}
	accepted := len(vc.Logins(vc.User)) // populate's
	if accepted == 0 {
		t.Fatal("populate's logins were not recorded as accepted")
	}

	// A wrong password over SOAP: one refusal, timed.
	before := time.Now()
	if c, err := login(vc.User, "not-"+vc.Password); err == nil {
		_ = c.Logout(ctx)
		t.Fatal("a wrong password logged in")
	}
	after := time.Now()
	r := vc.Refusals(vc.User)
	if len(r) != 1 || r[0].Before(before) || r[0].After(after) {
		t.Fatalf("refusals after one wrong SOAP login in [%s, %s]: %v", before.Format(time.StampMicro), after.Format(time.StampMicro), r)
	}

	// The right password: accepted, not a refusal, its session listed.
	c, err := login(vc.User, vc.Password)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(vc.Refusals(vc.User)); n != 1 {
		t.Errorf("an accepted login changed the refusals: %d, want 1", n)
	}
	if n := len(vc.Logins(vc.User)); n != accepted+1 {
		t.Errorf("accepted logins: %d, want %d", n, accepted+1)
	}
	open := vc.OpenSessions(vc.User)
	if len(open) != 1 || open[0].UserAgent == "" || open[0].LoginTime.Before(after.Add(-time.Second)) {
		t.Errorf("open sessions after one login: %+v", open)
	}
	if n := len(vc.Logins(vc.User)); n != accepted+1 {
		t.Errorf("OpenSessions logged in: %d accepted logins, want %d", n, accepted+1)
	}

	// A wrong password over REST (a vAPI session): a refusal too.
	if err := rest.NewClient(c.Client).Login(ctx, url.UserPassword(vc.User, "not-"+vc.Password)); err == nil {
		t.Fatal("a wrong password logged in over REST")
	}
	if n := len(vc.Refusals(vc.User)); n != 2 {
		t.Errorf("refusals after a wrong REST login: %d, want 2", n)
	}
	if err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if open := vc.OpenSessions(vc.User); len(open) != 0 {
		t.Errorf("open sessions after the logout: %+v", open)
	}

	// Another user's refusals are its own; concurrent ones all count.
	const other, n = "someone@vsphere.local", 8
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if c, err := login(other, vc.Password); err == nil {
				_ = c.Logout(ctx)
				t.Error("an unknown user logged in")
			}
		})
	}
	wg.Wait()
	if got := len(vc.Refusals(other)); got != n {
		t.Errorf("%s: %d refusals, want %d", other, got, n)
	}
	if got := len(vc.Refusals(vc.User)); got != 2 {
		t.Errorf("%s: %d refusals after another user's, want 2", vc.User, got)
	}

	// After a rotation the old password is refused.
	vc.SetPassword("rotated")
	if c, err := login(vc.User, vc.Password); err == nil {
		_ = c.Logout(ctx)
		t.Fatal("the old password logged in after SetPassword")
	}
	if got := len(vc.Refusals(vc.User)); got != 3 {
		t.Errorf("refusals after the rotation: %d, want 3", got)
	}
}
