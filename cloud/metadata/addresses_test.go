package metadata_test

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

const addrHost = "node-1.example.com"

// addrVM is a VM whose guest reports hostname addrHost and nics.
func addrVM(nics ...backends.NIC) *backends.VM {
	return &backends.VM{Name: "node-1", GuestHostName: addrHost, NICs: nics}
}

// vnic is a NIC backed by a virtual device on network.
func vnic(network string, ips ...string) backends.NIC {
	return backends.NIC{Network: network, IPs: ips, DeviceConfigID: 4000}
}

func hostAddr(a string) v1.NodeAddress {
	return v1.NodeAddress{Type: v1.NodeHostName, Address: a}
}

func internalAddr(a string) v1.NodeAddress {
	return v1.NodeAddress{Type: v1.NodeInternalIP, Address: a}
}

func externalAddr(a string) v1.NodeAddress {
	return v1.NodeAddress{Type: v1.NodeExternalIP, Address: a}
}

// both is ip as InternalIP and ExternalIP.
func both(ip string) []v1.NodeAddress { return []v1.NodeAddress{internalAddr(ip), externalAddr(ip)} }

func addrs(groups ...any) []v1.NodeAddress {
	out := []v1.NodeAddress{hostAddr(addrHost)}
	for _, g := range groups {
		switch g := g.(type) {
		case v1.NodeAddress:
			out = append(out, g)
		case []v1.NodeAddress:
			out = append(out, g...)
		default:
			panic(g)
		}
	}
	return out
}

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

var (
	ipv4Only  = []string{config.IPv4}
	ipv6Only  = []string{config.IPv6}
	dualStack = []string{config.IPv4, config.IPv6}
	v6First   = []string{config.IPv6, config.IPv4}
)

func TestNodeAddresses(t *testing.T) {
	tests := []struct {
		name     string
		vm       *backends.VM
		families []string
		rules    config.AddressRules
		want     []v1.NodeAddress
	}{
		{
			name:     "default: first IP is internal and external",
			vm:       addrVM(vnic("VM Network", "10.0.0.5", "10.0.0.6"), vnic("Other", "10.9.0.5")),
			families: ipv4Only,
			want:     addrs(both("10.0.0.5")),
		},
		{
			name: "NIC without virtual device skipped",
			vm: addrVM(
				backends.NIC{Network: "docker0", IPs: []string{"172.17.0.1"}, DeviceConfigID: -1},
				vnic("VM Network", "10.0.0.5"),
			),
			families: ipv4Only,
			want:     addrs(both("10.0.0.5")),
		},
		{
			name: "loopback, link-local, unspecified and junk dropped",
			vm: addrVM(vnic("VM Network",
				"127.0.0.1", "169.254.10.1", "0.0.0.0", "224.0.0.251", "not-an-ip", "", " 10.0.0.1",
				"::1", "fe80::250:56ff:fe00:1", "::", "ff02::1", "::ffff:127.0.0.1", "fd00::1%eth0",
				"10.0.0.7", "2001:db8::7")),
			families: dualStack,
			want:     addrs(both("10.0.0.7"), both("2001:db8::7")),
		},
		{
			// CPI drops only link-local multicast.
			name:     "other multicast kept, as CPI",
			vm:       addrVM(vnic("VM Network", "239.1.2.3", "10.0.0.7")),
			families: ipv4Only,
			want:     addrs(both("239.1.2.3")),
		},
		{
			// Matched as IPv4, written as VMware Tools wrote it, as CPI.
			name:     "IPv4-mapped IPv6 counts as IPv4, kept as written",
			vm:       addrVM(vnic("VM Network", "::ffff:10.0.0.8")),
			families: ipv4Only,
			rules:    config.AddressRules{InternalSubnets: prefixes("10.0.0.0/24")},
			want:     addrs(internalAddr("::ffff:10.0.0.8")),
		},
		{
			name:     "IPv6 kept as written",
			vm:       addrVM(vnic("VM Network", "2001:DB8:0::5")),
			families: ipv6Only,
			want:     addrs(both("2001:DB8:0::5")),
		},
		{
			name: "internal and external by subnet",
			vm: addrVM(
				vnic("a", "10.0.0.5"),
				vnic("b", "198.51.100.7"),
				vnic("c", "192.0.2.10"),
			),
			families: ipv4Only,
			rules: config.AddressRules{
				InternalSubnets: prefixes("192.0.2.0/24"),
				ExternalSubnets: prefixes("198.51.100.0/24"),
			},
			want: addrs(internalAddr("192.0.2.10"), externalAddr("198.51.100.7")),
		},
		{
			name: "by VM network name, case-insensitive, when no subnet matches",
			vm: addrVM(
				vnic("EXTERNAL/Outbound Traffic", "203.0.113.5"),
				vnic("internal k8s traffic", "10.1.1.1"),
			),
			families: ipv4Only,
			rules: config.AddressRules{
				InternalSubnets:     prefixes("192.0.2.0/24"),
				ExternalSubnets:     prefixes("198.51.100.0/24"),
				InternalNetworkName: "Internal K8s Traffic",
				ExternalNetworkName: "External/Outbound Traffic",
			},
			want: addrs(internalAddr("10.1.1.1"), externalAddr("203.0.113.5")),
		},
		{
			name:     "subnet wins over network name",
			vm:       addrVM(vnic("net-a", "10.1.0.1"), vnic("net-b", "10.2.0.1")),
			families: ipv4Only,
			rules: config.AddressRules{
				InternalSubnets:     prefixes("10.2.0.0/16"),
				InternalNetworkName: "net-a",
				ExternalNetworkName: "net-a",
			},
			want: addrs(internalAddr("10.2.0.1"), externalAddr("10.1.0.1")),
		},
		{
			name:     "exclude applied before subnet",
			vm:       addrVM(vnic("VM Network", "10.0.0.5", "10.1.0.5")),
			families: ipv4Only,
			rules: config.AddressRules{
				InternalSubnets:        prefixes("10.0.0.0/8"),
				ExternalSubnets:        prefixes("10.0.0.0/8"),
				ExcludeInternalSubnets: prefixes("10.0.0.0/24"),
				ExcludeExternalSubnets: prefixes("10.1.0.0/24"),
			},
			want: addrs(internalAddr("10.1.0.5"), externalAddr("10.0.0.5")),
		},
		{
			name:     "exclude applied before network name",
			vm:       addrVM(vnic("net-a", "10.0.0.5", "10.0.0.6")),
			families: ipv4Only,
			rules: config.AddressRules{
				InternalNetworkName:    "net-a",
				ExcludeInternalSubnets: prefixes("10.0.0.5/32"),
			},
			want: addrs(internalAddr("10.0.0.6")),
		},
		{
			// Each default is the first IP outside its own exclude list.
			name:     "exclude applied to each default choice",
			vm:       addrVM(vnic("VM Network", "192.1.2.3", "10.0.0.5", "10.0.0.9")),
			families: ipv4Only,
			rules: config.AddressRules{
				ExcludeInternalSubnets: prefixes("10.0.0.5/32"),
				ExcludeExternalSubnets: prefixes("192.1.2.0/24"),
			},
			want: addrs(internalAddr("192.1.2.3"), externalAddr("10.0.0.5")),
		},
		{
			name:     "internal excluded everywhere: the default is external only",
			vm:       addrVM(vnic("VM Network", "10.0.0.5", "10.0.0.6", "2001:db8::5")),
			families: ipv4Only,
			rules:    config.AddressRules{ExcludeInternalSubnets: prefixes("10.0.0.0/24")},
			want:     addrs(externalAddr("10.0.0.5")),
		},
		{
			name:     "external excluded everywhere in one family only",
			vm:       addrVM(vnic("VM Network", "10.0.0.5", "2001:db8::5")),
			families: dualStack,
			rules: config.AddressRules{
				InternalNetworkName:    "nowhere",
				ExcludeExternalSubnets: prefixes("2001:db8::/32"),
			},
			want: addrs(both("10.0.0.5"), internalAddr("2001:db8::5")),
		},
		{
			// The first subnet listed that holds an IP wins, whatever the
			// IPs' order.
			name:     "subnets tried in the configured order",
			vm:       addrVM(vnic("a", "10.1.0.1"), vnic("b", "10.2.0.1")),
			families: ipv4Only,
			rules: config.AddressRules{
				InternalSubnets: prefixes("10.2.0.0/16", "10.1.0.0/16"),
				ExternalSubnets: prefixes("10.9.0.0/16", "10.1.0.0/16", "10.2.0.0/16"),
			},
			want: addrs(internalAddr("10.2.0.1"), externalAddr("10.1.0.1")),
		},
		{
			// CPI's network check needs both names; then a subnet match
			// does not save the Node (see TestNodeAddressesErrors).
			name:     "one network name absent: no check",
			vm:       addrVM(vnic("net-a", "10.1.0.1")),
			families: ipv4Only,
			rules:    config.AddressRules{InternalNetworkName: "nowhere"},
			want:     addrs(both("10.1.0.1")),
		},
		{
			name:     "only internal found: only InternalIP",
			vm:       addrVM(vnic("a", "10.0.0.5"), vnic("b", "192.0.2.10")),
			families: ipv4Only,
			rules:    config.AddressRules{InternalSubnets: prefixes("192.0.2.0/24")},
			want:     addrs(internalAddr("192.0.2.10")),
		},
		{
			name:     "only external found: only ExternalIP",
			vm:       addrVM(vnic("a", "10.0.0.5"), vnic("b", "192.0.2.10")),
			families: ipv4Only,
			rules: config.AddressRules{
				ExternalSubnets:        prefixes("192.0.2.0/24"),
				ExcludeInternalSubnets: prefixes("192.0.2.0/24"),
			},
			want: addrs(externalAddr("192.0.2.10")),
		},
		{
			name:     "dual-stack ipv4 then ipv6",
			vm:       addrVM(vnic("VM Network", "2001:db8::5", "10.0.0.5", "2001:db8::6", "10.0.0.6")),
			families: dualStack,
			want:     addrs(both("10.0.0.5"), both("2001:db8::5")),
		},
		{
			name:     "dual-stack ipv6 then ipv4",
			vm:       addrVM(vnic("VM Network", "10.0.0.5", "2001:db8::5")),
			families: v6First,
			want:     addrs(both("2001:db8::5"), both("10.0.0.5")),
		},
		{
			name:     "dual-stack rules per family",
			vm:       addrVM(vnic("a", "10.0.0.5", "2001:db8:a::5"), vnic("b", "192.0.2.10", "2001:db8:b::10")),
			families: dualStack,
			rules: config.AddressRules{
				InternalSubnets: prefixes("192.0.2.0/24", "2001:db8:b::/48"),
				ExternalSubnets: prefixes("2001:db8:a::/48"),
			},
			want: addrs(internalAddr("192.0.2.10"), internalAddr("2001:db8:b::10"), externalAddr("2001:db8:a::5")),
		},
		{
			name:     "ipv6 only",
			vm:       addrVM(vnic("VM Network", "10.0.0.5", "fe80::1", "2001:db8::5")),
			families: ipv6Only,
			want:     addrs(both("2001:db8::5")),
		},
		{
			name:     "no family configured: hostname only",
			vm:       addrVM(vnic("VM Network", "10.0.0.5")),
			families: nil,
			want:     addrs(),
		},
		{
			name:     "an address is listed once",
			vm:       addrVM(vnic("a", "10.0.0.5"), vnic("b", "10.0.0.5")),
			families: []string{config.IPv4, config.IPv4},
			want:     addrs(both("10.0.0.5")),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metadata.SelectAddresses(tt.vm, tt.families, tt.rules, nil)
			if err != nil {
				t.Fatalf("NodeAddresses: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("NodeAddresses =\n %v\nwant\n %v", got, tt.want)
			}
		})
	}
}

func TestNodeAddressesHostnameFirst(t *testing.T) {
	vm := addrVM(vnic("VM Network", "10.0.0.5"))
	vm.GuestHostName = "guest-name"
	got, err := metadata.SelectAddresses(vm, ipv4Only, config.AddressRules{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0] != hostAddr("guest-name") {
		t.Fatalf("NodeAddresses = %v, want the guest host name first", got)
	}
	for _, a := range got[1:] {
		if a.Type == v1.NodeHostName {
			t.Errorf("second Hostname in %v", got)
		}
	}
}

// Where CPI's DiscoverNode fails, NodeAddresses fails: no addresses, an
// error with CPI's words, the VM's name and a sentinel for the caller.
func TestNodeAddressesErrors(t *testing.T) {
	tests := []struct {
		name     string
		vm       *backends.VM
		families []string
		rules    config.AddressRules
		is       error
		text     []string
	}{
		{
			name:     "no guest host name",
			vm:       &backends.VM{Name: "node-1", NICs: []backends.NIC{vnic("VM Network", "10.0.0.5")}},
			families: ipv4Only,
			is:       metadata.ErrGuestHostNameEmpty,
			text:     []string{"VM Guest hostname is empty"},
		},
		{
			name:     "no NICs",
			vm:       addrVM(),
			families: ipv4Only,
			is:       metadata.ErrGuestNICsEmpty,
			text:     []string{"VM GuestNicInfo is empty"},
		},
		{
			name:     "only loopback and link-local",
			vm:       addrVM(vnic("VM Network", "127.0.0.1", "fe80::1")),
			families: ipv4Only,
			is:       metadata.ErrNoSuitableIP,
			text:     []string{"unable to find suitable IP address for node after filtering out localhost IPs"},
		},
		{
			name:     "neither named network present, though a subnet matches",
			vm:       addrVM(vnic("VM Network", "192.0.2.5")),
			families: ipv4Only,
			rules: config.AddressRules{
				InternalSubnets:     prefixes("192.0.2.0/24"),
				InternalNetworkName: "internal",
				ExternalNetworkName: "external",
			},
			is:   metadata.ErrNoSuitableIP,
			text: []string{"unable to find suitable IP address for node", `"internal"`, `"external"`},
		},
		{
			name:     "a listed family without IPs",
			vm:       addrVM(vnic("VM Network", "10.0.0.5")),
			families: v6First,
			is:       metadata.ErrNoSuitableIP,
			text:     []string{"unable to find suitable IP address for node with IP family ipv6", "no usable ipv6 address"},
		},
		{
			name:     "ipv4 excluded on both sides, ipv6 fine",
			vm:       addrVM(vnic("VM Network", "10.0.0.5", "10.0.0.6", "2001:db8::5")),
			families: v6First,
			rules: config.AddressRules{
				ExcludeInternalSubnets: prefixes("10.0.0.0/24"),
				ExcludeExternalSubnets: prefixes("10.0.0.0/8"),
			},
			is:   metadata.ErrNoSuitableIP,
			text: []string{"with IP family ipv4", "each ipv4 address is excluded both as internal and as external"},
		},
		{
			name:     "excluded on both sides though a subnet matches",
			vm:       addrVM(vnic("VM Network", "192.0.2.5")),
			families: ipv4Only,
			rules: config.AddressRules{
				InternalSubnets:        prefixes("192.0.2.0/24"),
				ExternalSubnets:        prefixes("192.0.2.0/24"),
				ExcludeInternalSubnets: prefixes("192.0.2.0/24"),
				ExcludeExternalSubnets: prefixes("192.0.2.0/25"),
			},
			is:   metadata.ErrNoSuitableIP,
			text: []string{"with IP family ipv4"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metadata.SelectAddresses(tt.vm, tt.families, tt.rules, nil)
			if err == nil {
				t.Fatalf("NodeAddresses = %v, want an error", got)
			}
			if got != nil {
				t.Errorf("NodeAddresses returned %v with its error", got)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %q is not %q", err, tt.is)
			}
			for _, want := range append(tt.text, tt.vm.Name) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}
