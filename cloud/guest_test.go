package cloud_test

import (
	"encoding/base64"
	"net/netip"
	"slices"
	"testing"
)

// The approver's view of a Node's VM holds every IP the VM reports: on
// each adapter and in guestinfo.metadata, which InstanceMetadata accepts as
// a kubelet's --node-ip too (so a Node initialized with that IP can have a
// serving certificate naming it). The guest's host name comes with them.
func TestGuestHoldsEveryIPTheVMReports(t *testing.T) {
	f := newFakeFleet("vcA")
	vm := nicVM(uuidA, deviceNIC("VM Network", "10.0.0.5"), deviceNIC("Storage", "10.1.0.5", "fd00::5"))
	vm.GuestHostName = "vm-1.corp.example"
	meta := "network:\n  version: 2\n  ethernets:\n    id0:\n      addresses: [10.2.0.5/24, 10.0.0.5/24]\n"
	vm.GuestInfoMetadata, vm.GuestInfoMetadataEncoding = base64.StdEncoding.EncodeToString([]byte(meta)), "base64"
	f["vcA"].Add(vm, nil)
	cl := f.start(t, f.yaml("", "vcA"), nil)
	node := kubeletWithNodeIP("vm-1", uuidA, "10.2.0.5")
	if _, err := cl.InstanceMetadata(t.Context(), node); err != nil {
		t.Fatalf("InstanceMetadata with --node-ip 10.2.0.5 (metadata only): %v", err)
	}
	node.Spec.ProviderID = "vsphere://" + uuidA
	g, err := cl.Guest(t.Context(), node)
	if err != nil || g == nil {
		t.Fatalf("Guest = %+v, %v", g, err)
	}
	var got []string
	for _, a := range g.IPs {
		got = append(got, a.String())
	}
	for _, want := range []string{"10.0.0.5", "10.1.0.5", "fd00::5", "10.2.0.5"} {
		if !slices.Contains(g.IPs, netip.MustParseAddr(want)) {
			t.Errorf("Guest IPs %v lack %s", got, want)
		}
	}
	if len(g.IPs) != 4 || g.HostName != "vm-1.corp.example" {
		t.Fatalf("Guest IPs %v (each once), host name %q", got, g.HostName)
	}
}
