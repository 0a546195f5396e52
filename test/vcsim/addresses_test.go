package vcsim

import (
	"fmt"
	"net"
	"testing"
)

// TestGuestAddressesUniqueAt25000VMsPerDatacenter checks that 25,000 VMs
// of a datacenter, and the datacenters and vCenters beside it, get valid,
// distinct guest IPs and MACs.
func TestGuestAddressesUniqueAt25000VMsPerDatacenter(t *testing.T) {
	ips, macs := map[string]string{}, map[string]string{}
	for _, vc := range []int{0, 1, 9, wideVCenters - 1} {
		for _, dc := range []int{0, 1, wideDCs - 1} {
			for vm := range 25000 {
				who := fmt.Sprintf("vc %d dc %d vm %d", vc, dc, vm)
				ip, mac, err := guestAddress(vc, dc, vm)
				if err != nil {
					t.Fatalf("%s: %v", who, err)
				}
				parsed := net.ParseIP(ip).To4()
				if parsed == nil || parsed[0] != 10 || parsed[3] < 10 || parsed[3] > 249 {
					t.Fatalf("%s: IP %q: want 10.x.y.z with z in 10..249", who, ip)
				}
				if hw, err := net.ParseMAC(mac); err != nil || hw[0] != 0x00 || hw[1] != 0x50 || hw[2] != 0x56 {
					t.Fatalf("%s: MAC %q: want 00:50:56:xx:xx:xx (%v)", who, mac, err)
				}
				if other, ok := ips[ip]; ok {
					t.Fatalf("%s: IP %s already given to %s", who, ip, other)
				}
				if other, ok := macs[mac]; ok {
					t.Fatalf("%s: MAC %s already given to %s", who, mac, other)
				}
				ips[ip], macs[mac] = who, who
			}
		}
	}
}

// TestGuestAddressesKeepTheNarrowScheme checks that the first 3,840 VMs of
// a datacenter keep the addresses the e2e tests were written against.
func TestGuestAddressesKeepTheNarrowScheme(t *testing.T) {
	for _, c := range []struct {
		vc, dc, vm int
		ip, mac    string
	}{
		{0, 0, 0, "10.1.0.10", "00:50:56:00:00:00"},
		{0, 1, 3, "10.1.1.13", "00:50:56:00:01:03"},
		{2, 1, 239, "10.3.1.249", "00:50:56:02:01:ef"},
		{2, 1, 240, "10.3.17.10", "00:50:56:02:11:00"},
		{0, 15, 3839, "10.1.255.249", "00:50:56:00:ff:ef"},
		// The wide range, past the narrow one.
		{0, 0, 3840, "10.128.0.10", "00:50:56:80:00:0a"},
		{0, 1, 3840, "10.128.128.10", "00:50:56:80:80:0a"},
		{1, 2, 3840 + 240, "10.137.1.10", "00:50:56:89:01:0a"},
	} {
		ip, mac, err := guestAddress(c.vc, c.dc, c.vm)
		if err != nil || ip != c.ip || mac != c.mac {
			t.Errorf("guestAddress(%d, %d, %d) = %s, %s, %v; want %s, %s", c.vc, c.dc, c.vm, ip, mac, err, c.ip, c.mac)
		}
	}
}

// TestGuestAddressesRefuseBeyondTheScheme checks the limits are errors,
// never repeated addresses.
func TestGuestAddressesRefuseBeyondTheScheme(t *testing.T) {
	if _, _, err := guestAddress(0, 0, MaxVMsPerDatacenter-1); err != nil {
		t.Errorf("the last VM a datacenter can have: %v", err)
	}
	for _, c := range [][3]int{{0, 0, MaxVMsPerDatacenter}, {0, wideDCs, 0}, {wideVCenters, 0, narrowVMs}, {0, 0, -1}} {
		if ip, mac, err := guestAddress(c[0], c[1], c[2]); err == nil {
			t.Errorf("guestAddress%v = %s, %s; want an error", c, ip, mac)
		}
	}
}
