package metadata

// CPI's own address tests, ported case for case: TestDiscoverNodeIPs in
// kubernetes/cloud-provider-vsphere pkg/cloudprovider/vsphere/nodemanager_test.go
// (HEAD 60f6c5df). Each case keeps CPI's testName, so a failure here can be
// traced to the case there. Inputs are translated into ours: CPI's
// ipFamilyPriority and cpiConfig.Nodes go through our config parser, guest
// NICs become backends.NIC (DeviceConfigId left 0 as in CPI's cases), and the
// guestinfo is base64-encoded with guestinfo.metadata.encoding "base64", as
// CPI's harness does. An internal test: it gives the guestinfo.metadata
// and its encoding to SelectAddresses directly, as CPI's cases do.

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// cpiHost is the guest host name every case's VM reports.
const cpiHost = "cpi-vm"

func internalIP(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeInternalIP, Address: a} }
func externalIP(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeExternalIP, Address: a} }

// cpiNIC is a guest NIC as CPI's cases write one: DeviceConfigId unset (0).
func cpiNIC(network string, ips ...string) backends.NIC {
	return backends.NIC{Network: network, IPs: ips}
}

// cpiRules runs CPI's ipFamilyPriority and nodes settings through our config
// parser, so the case also checks that a CPI config means the same to us.
func cpiRules(t *testing.T, families []string, n config.Nodes) ([]string, config.AddressRules) {
	t.Helper()
	var b strings.Builder
	b.WriteString("global: {server: vc.example.com, user: u, password: p")
	if len(families) > 0 {
		fmt.Fprintf(&b, ", ipFamily: [%s]", strings.Join(families, ", "))
	}
	b.WriteString("}\nnodes: {")
	sep := ""
	for _, kv := range [][2]string{
		{"internalNetworkSubnetCidr", n.InternalNetworkSubnetCIDR},
		{"externalNetworkSubnetCidr", n.ExternalNetworkSubnetCIDR},
		{"internalVmNetworkName", n.InternalVMNetworkName},
		{"externalVmNetworkName", n.ExternalVMNetworkName},
		{"excludeInternalNetworkSubnetCidr", n.ExcludeInternalNetworkSubnetCIDR},
		{"excludeExternalNetworkSubnetCidr", n.ExcludeExternalNetworkSubnetCIDR},
	} {
		if kv[1] != "" {
			fmt.Fprintf(&b, "%s%s: %q", sep, kv[0], kv[1])
			sep = ", "
		}
	}
	b.WriteString("}\n")
	cfg, err := config.Parse([]byte(b.String()))
	if err != nil {
		t.Fatalf("config for the case does not parse: %v\n%s", err, b.String())
	}
	return cfg.VCenters[0].IPFamily, cfg.Nodes
}

// cloudInitMetadata is cloud-init metadata with a netplan v2 network whose
// one ethernet has addresses (a flow list, as CPI's fixture writes it).
func cloudInitMetadata(addresses string) string {
	return `instance-id: "tkg-mgmt-vc"
local-hostname: "tkg-mgmt-vc"
wait-on-network:
  ipv4: false
  ipv6: false
network:
  version: 2
  ethernets:
    id0:
      addresses: [` + addresses + `]
      match:
        macaddress: "00:11:22"
      set-name: "eth0"
      wakeonlan: true
      dhcp4: false
      dhcp6: false`
}

// cloudInitMetadataDHCP6 is cloud-init metadata whose ethernet uses DHCPv6:
// no static address.
func cloudInitMetadataDHCP6() string {
	return `instance-id: "tkg-mgmt-vc"
local-hostname: "tkg-mgmt-vc"
wait-on-network:
  ipv4: false
  ipv6: false
network:
  version: 2
  ethernets:
    id0:
      match:
        macaddress: "00:11:22"
      set-name: "eth0"
      wakeonlan: true
      dhcp4: false
      dhcp6: true`
}

// cloudInitMetadataEncodedNetwork carries the network config encoded
// ("base64" or "gzip+base64") in the network key, named by network.encoding.
func cloudInitMetadataEncodedNetwork(t *testing.T, encoding, addresses string) string {
	t.Helper()
	network := []byte(`version: 2
ethernets:
  id0:
    addresses: [` + addresses + `]
    match:
      macaddress: "00:11:22"
    set-name: "eth0"
    dhcp4: false
    dhcp6: false`)
	return `instance-id: "tkg-mgmt-vc"
local-hostname: "tkg-mgmt-vc"
network.encoding: ` + encoding + `
network: ` + encodeNetwork(t, encoding, network)
}

func encodeNetwork(t *testing.T, encoding string, network []byte) string {
	t.Helper()
	switch encoding {
	case "base64", "b64":
		return base64.StdEncoding.EncodeToString(network)
	case "gzip+base64", "gz+b64":
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(network); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(buf.Bytes())
	}
	t.Fatalf("no encoding %q", encoding)
	return ""
}

type cpiAddressCase struct {
	name      string // CPI's testName
	ipFamily  []string
	nodes     config.Nodes // CPI's cpiConfig.Nodes (same keys); zero for a nil cpiConfig
	nics      []backends.NIC
	guestinfo string           // guestinfo.metadata before its base64 encoding
	want      []v1.NodeAddress // after the Hostname, which CPI always puts first
	wantErr   string           // CPI's expectedErrorSubstring
}

func cpiAddressCases(t *testing.T) []cpiAddressCase {
	v4 := []string{"ipv4"}
	v6 := []string{"ipv6"}
	v4v6 := []string{"ipv4", "ipv6"}
	v6v4 := []string{"ipv6", "ipv4"}
	return []cpiAddressCase{
		{
			name:     "BySubnet",
			ipFamily: v4,
			nodes:    config.Nodes{InternalNetworkSubnetCIDR: "10.10.0.0/16", ExternalNetworkSubnetCIDR: "172.15.0.0/16"},
			nics: []backends.NIC{
				cpiNIC("net_123abc", "127.0.0.6", "20.30.40.50", "10.10.1.22", "10.10.1.23", "172.15.108.10", "172.15.108.11"),
			},
			want: []v1.NodeAddress{internalIP("10.10.1.22"), externalIP("172.15.108.10")},
		},
		{
			name:     "ByNetworkName",
			ipFamily: v4,
			nodes:    config.Nodes{InternalVMNetworkName: "internal_net", ExternalVMNetworkName: "external_net"},
			nics: []backends.NIC{
				cpiNIC("internal_net", "127.0.0.6", "10.10.1.22", "10.10.1.23"),
				cpiNIC("external_net", "127.0.0.7", "172.15.108.10", "172.15.108.11"),
			},
			want: []v1.NodeAddress{internalIP("10.10.1.22"), externalIP("172.15.108.10")},
		},
		{
			name:     "ByDefaultSelection",
			ipFamily: v4,
			nics: []backends.NIC{
				cpiNIC("net_123abc", "127.0.0.6", "10.10.1.22", "10.10.1.23"),
				cpiNIC("test_another_nic", "127.0.0.7", "172.15.108.11"),
			},
			want: []v1.NodeAddress{internalIP("10.10.1.22"), externalIP("10.10.1.22")},
		},
		{
			name:     "BySubnetIPv6",
			ipFamily: v6,
			nodes:    config.Nodes{InternalNetworkSubnetCIDR: "fd00:cccc::/64", ExternalNetworkSubnetCIDR: "fd00:bbbb::/64"},
			nics: []backends.NIC{
				cpiNIC("net_123abc", "fe80::1", "fd00:aaaa::1", "fd00:cccc::1", "fd00:cccc::2", "fd00:bbbb::1", "fd00:bbbb::2"),
			},
			want: []v1.NodeAddress{internalIP("fd00:cccc::1"), externalIP("fd00:bbbb::1")},
		},
		{
			name:     "ByNetworkNameIPv6",
			ipFamily: v6,
			nodes:    config.Nodes{InternalVMNetworkName: "internal_net", ExternalVMNetworkName: "external_net"},
			nics: []backends.NIC{
				cpiNIC("internal_net", "fe80::3", "fd00:cccc::1", "fd00:cccc::2"),
				cpiNIC("external_net", "fe80::2", "fd00:bbbb::1", "fd00:bbbb::2"),
			},
			want: []v1.NodeAddress{internalIP("fd00:cccc::1"), externalIP("fd00:bbbb::1")},
		},
		{
			name:     "ByDefaultSelectionIPv6",
			ipFamily: v6,
			nics: []backends.NIC{
				cpiNIC("net_123abc", "fe80::3", "fd00:cccc::1", "fd00:cccc::2"),
				cpiNIC("test_another_nic", "fe80::2", "fd00:bbbb::1", "fd00:bbbb::2"),
			},
			want: []v1.NodeAddress{internalIP("fd00:cccc::1"), externalIP("fd00:cccc::1")},
		},
		{
			name:     "ByNetworkNameAndTwoNICs_desiredIPsAfterFirstNIC",
			ipFamily: v4,
			nodes:    config.Nodes{InternalVMNetworkName: "internal_net", ExternalVMNetworkName: "external_net"},
			nics: []backends.NIC{
				cpiNIC("net_123abc", "127.0.0.6", "169.0.1.2"),
				cpiNIC("internal_net", "10.10.10.10"),
				cpiNIC("external_net", "172.15.108.11"),
			},
			want: []v1.NodeAddress{internalIP("10.10.10.10"), externalIP("172.15.108.11")},
		},
		{
			name:     "ByMultipleSubnets_dualstack_itSelectsBothIPv4andIPv6Addrs",
			ipFamily: v4v6,
			nodes: config.Nodes{
				InternalNetworkSubnetCIDR: "10.10.0.0/16,fd00:cccc::/64",
				ExternalNetworkSubnetCIDR: "172.15.0.0/16,fd00:dddd::/64",
			},
			nics: []backends.NIC{
				cpiNIC("net_foo", "127.0.0.6", "169.0.1.2"),
				cpiNIC("net_bar", "10.10.1.22", "fd00:dddd::11"),
				cpiNIC("net_baz", "172.15.108.11", "fd00:cccc::22"),
			},
			want: []v1.NodeAddress{
				internalIP("10.10.1.22"), externalIP("172.15.108.11"),
				internalIP("fd00:cccc::22"), externalIP("fd00:dddd::11"),
			},
		},
		{
			name:     "ByMultipleSubnets_dualstack_WhenNoIPsOfFamilyMatchAnySubnets_itFallsThroughToDefaultSelection",
			ipFamily: v4v6,
			nodes: config.Nodes{
				InternalNetworkSubnetCIDR: "10.10.0.0/16,fd00:ffff::/64",
				ExternalNetworkSubnetCIDR: "172.15.0.0/16,fd00:eeee::/64",
			},
			nics: []backends.NIC{
				cpiNIC("net_foo", "127.0.0.6", "169.0.1.2"),
				cpiNIC("net_bar", "10.10.1.22", "fd00:dddd::11"),
				cpiNIC("net_baz", "172.15.108.11", "fd00:cccc::22"),
			},
			want: []v1.NodeAddress{
				internalIP("10.10.1.22"), externalIP("172.15.108.11"),
				internalIP("fd00:dddd::11"), externalIP("fd00:dddd::11"),
			},
		},
		{
			name:     "ByMultipleSubnets_dualstack_WhenNoIPsOfFamilyMatchesInternalOrExternalSubnets_itUsesSubnetSelectionAndOmitsTheIPThatHasNoMatch",
			ipFamily: v4v6,
			nodes: config.Nodes{
				InternalNetworkSubnetCIDR: "10.10.0.0/16,fd00:ffff::/64",
				ExternalNetworkSubnetCIDR: "172.15.0.0/16,fd00:dddd::/64",
			},
			nics: []backends.NIC{
				cpiNIC("net_foo", "127.0.0.6", "169.0.1.2"),
				cpiNIC("net_bar", "10.10.1.22", "fd00:dddd::11"),
				cpiNIC("net_baz", "172.15.108.11", "fd00:cccc::22"),
			},
			want: []v1.NodeAddress{
				internalIP("10.10.1.22"), externalIP("172.15.108.11"),
				externalIP("fd00:dddd::11"),
			},
		},
		{
			name:     "ByMultipleSubnets",
			ipFamily: v4,
			nodes:    config.Nodes{InternalNetworkSubnetCIDR: "170.12.0.0/16,10.10.0.0/16", ExternalNetworkSubnetCIDR: "172.15.0.0/16"},
			nics: []backends.NIC{
				cpiNIC("net_123abc", "127.0.0.6", "169.0.1.2"),
				cpiNIC("internal_net", "10.10.1.22"),
				cpiNIC("external_net", "172.15.108.11"),
			},
			want: []v1.NodeAddress{internalIP("10.10.1.22"), externalIP("172.15.108.11")},
		},
		{
			name:     "BySubnetAndTwoNICs_desiredIPsAfterFirstNIC",
			ipFamily: v4,
			nodes:    config.Nodes{InternalNetworkSubnetCIDR: "10.10.0.0/16", ExternalNetworkSubnetCIDR: "172.15.0.0/16"},
			nics: []backends.NIC{
				cpiNIC("net_123abc", "127.0.0.6", "169.0.1.2"),
				cpiNIC("internal_net", "10.10.1.22"),
				cpiNIC("external_net", "172.15.108.11"),
			},
			want: []v1.NodeAddress{internalIP("10.10.1.22"), externalIP("172.15.108.11")},
		},
		{
			name:     "BySubnetAndTwoNICs_desiredIPsAreSplitAcrossNICs",
			ipFamily: v4,
			nodes:    config.Nodes{InternalNetworkSubnetCIDR: "10.10.0.0/16", ExternalNetworkSubnetCIDR: "172.15.0.0/16"},
			nics: []backends.NIC{
				cpiNIC("net_123abc", "127.0.0.6", "169.0.1.2", "10.10.1.22"),
				cpiNIC("test_another_nic", "127.0.0.7", "172.15.108.11"),
			},
			want: []v1.NodeAddress{internalIP("10.10.1.22"), externalIP("172.15.108.11")},
		},
		{
			name:     "BySubnet_whenExternalCIDRHasNoMatch_itReturnsOnlyInternalIP",
			ipFamily: v4,
			nodes:    config.Nodes{InternalNetworkSubnetCIDR: "10.10.0.0/16", ExternalNetworkSubnetCIDR: "172.15.0.0/16"},
			nics: []backends.NIC{
				cpiNIC("net_123abc", "127.0.0.6", "169.0.1.2", "10.10.1.22"),
				cpiNIC("test_another_nic", "127.0.0.7"),
			},
			want: []v1.NodeAddress{internalIP("10.10.1.22")},
		},
		{
			name:     "BySubnet_whenInternalCIDRHasNoMatch_itReturnsOnlyExternalIP",
			ipFamily: v4,
			nodes:    config.Nodes{InternalNetworkSubnetCIDR: "10.10.0.0/16", ExternalNetworkSubnetCIDR: "172.15.0.0/16"},
			nics: []backends.NIC{
				cpiNIC("net_123abc", "127.0.0.6", "169.0.1.2", "172.15.108.11"),
				cpiNIC("test_another_nic", "127.0.0.7"),
			},
			want: []v1.NodeAddress{externalIP("172.15.108.11")},
		},
		{
			name:     "ByNetworkName_whenInternalNameHasNoMatch_itReturnsOnlyExternalIP",
			ipFamily: v4,
			nodes:    config.Nodes{InternalVMNetworkName: "no-matches", ExternalVMNetworkName: "external_net"},
			nics: []backends.NIC{
				cpiNIC("net_123abc", "127.0.0.6"),
				cpiNIC("internal_net", "10.10.5.8"),
				cpiNIC("external_net", "172.15.2.3"),
			},
			want: []v1.NodeAddress{externalIP("172.15.2.3")},
		},
		{
			name:     "ByNetworkName_whenExternalNameHasNoMatch_itReturnsOnlyInternalIP",
			ipFamily: v4,
			nodes:    config.Nodes{InternalVMNetworkName: "internal_net", ExternalVMNetworkName: "no-matches"},
			nics: []backends.NIC{
				cpiNIC("net_123abc", "127.0.0.6"),
				cpiNIC("internal_net", "10.10.5.8"),
				cpiNIC("external_net", "172.15.2.3"),
			},
			want: []v1.NodeAddress{internalIP("10.10.5.8")},
		},
		{
			name:     "BySubnet_whenOnlyExternalCIDRIsSet_itReturnsOnlyExternalIP",
			ipFamily: v4,
			nodes:    config.Nodes{ExternalNetworkSubnetCIDR: "172.15.0.0/16"},
			nics: []backends.NIC{
				cpiNIC("net_123abc", "127.0.0.6", "20.30.40.50", "10.10.1.22", "10.10.1.23", "172.15.108.10", "172.15.108.11"),
			},
			want: []v1.NodeAddress{externalIP("172.15.108.10")},
		},
		{
			name:     "BySubnet_whenOnlyInternalCIDRIsSet_itReturnsOnlyInternalIP",
			ipFamily: v4,
			nodes:    config.Nodes{InternalNetworkSubnetCIDR: "10.10.0.0/16"},
			nics: []backends.NIC{
				cpiNIC("net_123abc", "127.0.0.6", "20.30.40.50", "10.10.1.22", "10.10.1.23", "172.15.108.10", "172.15.108.11"),
			},
			want: []v1.NodeAddress{internalIP("10.10.1.22")},
		},
		{
			name:     "ByNetworkName_selectsIgnoringCase",
			ipFamily: v4,
			nodes:    config.Nodes{InternalVMNetworkName: "InTerNal_NEt", ExternalVMNetworkName: "ExTeRnAL_NeT"},
			nics: []backends.NIC{
				cpiNIC("internal_net", "127.0.0.6", "20.30.40.50"),
				cpiNIC("external_net", "127.0.0.6", "20.30.40.51"),
			},
			want: []v1.NodeAddress{internalIP("20.30.40.50"), externalIP("20.30.40.51")},
		},
		{
			name:     "ByNetworkName_whenOnlyExternalNetworkIsSet_onlyExternalNetIsSet",
			ipFamily: v4,
			nodes:    config.Nodes{ExternalVMNetworkName: "external_net"},
			nics: []backends.NIC{
				cpiNIC("internal_net", "127.0.0.6", "10.10.1.22", "10.10.1.23"),
				cpiNIC("external_net", "127.0.0.7", "172.15.108.10", "172.15.108.11"),
			},
			want: []v1.NodeAddress{externalIP("172.15.108.10")},
		},
		{
			name:     "ByNetworkName_whenOnlyInternalNetworkIsSet_itReturnsOnlyInternalIP",
			ipFamily: v4,
			nodes:    config.Nodes{InternalVMNetworkName: "internal_net"},
			nics: []backends.NIC{
				cpiNIC("internal_net", "127.0.0.6", "10.10.1.22", "10.10.1.23"),
				cpiNIC("external_net", "127.0.0.7", "172.15.108.10", "172.15.108.11"),
			},
			want: []v1.NodeAddress{internalIP("10.10.1.22")},
		},
		{
			name:     "BySubnetAndNetworkNameTwoNICs_desiredIPsAreSplitAcrossNICs",
			ipFamily: v4,
			nodes:    config.Nodes{InternalNetworkSubnetCIDR: "10.10.0.0/16", ExternalVMNetworkName: "test_another_nic"},
			nics: []backends.NIC{
				cpiNIC("net_123abc", "127.0.0.6", "169.0.1.2", "10.10.1.22"),
				cpiNIC("test_another_nic", "127.0.0.7", "172.15.108.11"),
			},
			want: []v1.NodeAddress{internalIP("10.10.1.22"), externalIP("172.15.108.11")},
		},
		{
			name:     "BySettingBothNetworkNameAndSubnets_SubnetSelectionHasPrecedenceWhenMatchesAreFound",
			ipFamily: v4,
			nodes: config.Nodes{
				InternalNetworkSubnetCIDR: "10.10.0.0/16", ExternalNetworkSubnetCIDR: "172.15.0.0/16",
				InternalVMNetworkName: "internal_net", ExternalVMNetworkName: "external_net",
			},
			nics: []backends.NIC{
				cpiNIC("internal_net", "22.22.22.22", "172.15.108.11"),
				cpiNIC("external_net", "33.33.33.33", "10.10.1.22"),
			},
			want: []v1.NodeAddress{internalIP("10.10.1.22"), externalIP("172.15.108.11")},
		},
		{
			name:     "BySettingBothNetworkNameAndSubnets_whenSubnetsMatchNoIPs_itUsesNetworkNameSelection",
			ipFamily: v4,
			nodes: config.Nodes{
				InternalNetworkSubnetCIDR: "254.10.0.0/16", ExternalNetworkSubnetCIDR: "253.15.0.0/16",
				InternalVMNetworkName: "internal_net", ExternalVMNetworkName: "external_net",
			},
			nics: []backends.NIC{
				cpiNIC("internal_net", "22.22.22.22", "172.15.108.11"),
				cpiNIC("external_net", "33.33.33.33", "10.10.1.22"),
			},
			want: []v1.NodeAddress{internalIP("22.22.22.22"), externalIP("33.33.33.33")},
		},
		{
			name:     "ItIgnoresVNICDevices",
			ipFamily: v4,
			nodes: config.Nodes{
				InternalNetworkSubnetCIDR: "254.10.0.0/16", ExternalNetworkSubnetCIDR: "253.15.0.0/16",
				InternalVMNetworkName: "internal_net", ExternalVMNetworkName: "external_net",
			},
			nics: []backends.NIC{
				{DeviceConfigID: -1, Network: "vnic-device", IPs: []string{"254.10.1.2", "253.15.2.4"}},
				cpiNIC("internal_net", "22.22.22.22", "172.15.108.11"),
				cpiNIC("external_net", "33.33.33.33", "10.10.1.22"),
			},
			want: []v1.NodeAddress{internalIP("22.22.22.22"), externalIP("33.33.33.33")},
		},
		{
			name:     "BySettingANetworkNameThatDoesntExist",
			ipFamily: v4,
			nodes:    config.Nodes{InternalVMNetworkName: "internal_net", ExternalVMNetworkName: "external_net"},
			nics: []backends.NIC{
				cpiNIC("net_a", "10.10.1.22"),
				cpiNIC("net_b", "172.15.108.11"),
			},
			wantErr: "unable to find suitable IP address for node",
		},
		{
			name:     "ByDiscoveringAnUnParsableIP_itIsIgnored",
			ipFamily: v4,
			nics: []backends.NIC{
				cpiNIC("net_123abc", "blarg", "127.0.0.6", "10.10.1.22", "10.10.1.23"),
				cpiNIC("test_another_nic", "127.0.0.7", "172.15.108.11"),
			},
			want: []v1.NodeAddress{internalIP("10.10.1.22"), externalIP("10.10.1.22")},
		},
		{
			name:     "ByDefaultSelection_whenTheSecondNICHasNoIPs",
			ipFamily: v4,
			nics: []backends.NIC{
				cpiNIC("net_a", "172.15.108.11"),
				cpiNIC("net_b"),
			},
			want: []v1.NodeAddress{internalIP("172.15.108.11"), externalIP("172.15.108.11")},
		},
		{
			name:     "ByDefaultSelection_whenTheFirstNICHasNoIPs",
			ipFamily: v4,
			nics: []backends.NIC{
				cpiNIC("net_a"),
				cpiNIC("net_b", "172.15.108.11"),
			},
			want: []v1.NodeAddress{internalIP("172.15.108.11"), externalIP("172.15.108.11")},
		},
		{
			name:     "ByDefaultSelection_whenTheFirstNICHasNoIPsOfTheDesiredFamily",
			ipFamily: v4,
			nics: []backends.NIC{
				cpiNIC("net_a", "fd00:cccc::1"),
				cpiNIC("net_b", "172.15.108.11"),
			},
			want: []v1.NodeAddress{internalIP("172.15.108.11"), externalIP("172.15.108.11")},
		},
		{
			name:     "ByDefaultSelection_TheSecondNICHasNoIPsOfTheDesiredFamily",
			ipFamily: v4,
			nics: []backends.NIC{
				cpiNIC("net_a", "172.15.108.11", "fe80:cccc::1"),
				cpiNIC("net_b", "fe80:cccc::2"),
			},
			want: []v1.NodeAddress{internalIP("172.15.108.11"), externalIP("172.15.108.11")},
		},
		{
			name:     "ByDefaultSelection_whenDualStackIPv4Primary_itReturnsIPv4AddrsFirst",
			ipFamily: v4v6,
			nics: []backends.NIC{
				cpiNIC("net_a", "172.15.108.11", "fd00:cccc::1"),
				cpiNIC("net_b", "fd00:cccc::2"),
			},
			want: []v1.NodeAddress{
				internalIP("172.15.108.11"), externalIP("172.15.108.11"),
				internalIP("fd00:cccc::1"), externalIP("fd00:cccc::1"),
			},
		},
		{
			name:     "ByDefaultSelection_itDoesNotSelectIPsFromtheExclusionCIDRList",
			ipFamily: v4v6,
			nodes: config.Nodes{
				ExcludeInternalNetworkSubnetCIDR: "172.15.108.11/32,fd00:cccc::1/128,fd00:cccc::2/128",
				ExcludeExternalNetworkSubnetCIDR: "172.15.108.11/32,172.15.108.12/32,fd00:cccc::1/128",
			},
			nics: []backends.NIC{
				cpiNIC("net_a", "172.15.108.11", "172.15.108.12", "172.15.108.13", "fd00:cccc::1"),
				cpiNIC("net_b", "fd00:cccc::2", "fd00:cccc::3"),
			},
			want: []v1.NodeAddress{
				internalIP("172.15.108.12"), externalIP("172.15.108.13"),
				internalIP("fd00:cccc::3"), externalIP("fd00:cccc::2"),
			},
		},
		{
			name:     "ByDefaultSelection_DualStackIPv6Primary_itReturnsIPv6AddrsFirst",
			ipFamily: v6v4,
			nics: []backends.NIC{
				cpiNIC("net_a", "172.15.108.11", "fd00:cccc::1"),
				cpiNIC("net_b", "fd00:cccc::2"),
			},
			want: []v1.NodeAddress{
				internalIP("fd00:cccc::1"), externalIP("fd00:cccc::1"),
				internalIP("172.15.108.11"), externalIP("172.15.108.11"),
			},
		},
		{
			name:     "ByNetworkName_whenDualStack",
			ipFamily: v6v4,
			nodes:    config.Nodes{InternalVMNetworkName: "internal_net", ExternalVMNetworkName: "external_net"},
			nics: []backends.NIC{
				cpiNIC("internal_net", "172.15.108.11", "fd00:cccc::1"),
				cpiNIC("external_net", "fd00:cccc::2", "172.15.108.12"),
			},
			want: []v1.NodeAddress{
				internalIP("fd00:cccc::1"), externalIP("fd00:cccc::2"),
				internalIP("172.15.108.11"), externalIP("172.15.108.12"),
			},
		},
		{
			name:     "BySubnet_itDoesNotSelectIPsFromtheExclusionCIDRList",
			ipFamily: v4v6,
			nodes: config.Nodes{
				InternalNetworkSubnetCIDR:        "172.15.0.0/16,fd00:cccc::0/32",
				ExternalNetworkSubnetCIDR:        "173.15.0.0/16,fd01:cccc::0/32",
				ExcludeInternalNetworkSubnetCIDR: "172.15.108.11/32,fd00:cccc::1/128,fd00:cccc::2/128",
				ExcludeExternalNetworkSubnetCIDR: "173.15.108.11/32,173.15.108.12/32,fd01:cccc::1/128",
			},
			nics: []backends.NIC{
				cpiNIC("internal_net", "172.15.108.11", "172.15.108.12", "172.15.108.13", "fd00:cccc::1", "fd00:cccc::2", "fd00:cccc::3"),
				cpiNIC("external_net", "173.15.108.11", "173.15.108.12", "173.15.108.13", "fd01:cccc::1", "fd01:cccc::2", "fd01:cccc::3"),
			},
			want: []v1.NodeAddress{
				internalIP("172.15.108.12"), externalIP("173.15.108.13"),
				internalIP("fd00:cccc::3"), externalIP("fd01:cccc::2"),
			},
		},
		{
			name:     "ByNetworkName_itDoesNotSelectIPsFromtheExclusionCIDRList",
			ipFamily: v4v6,
			nodes: config.Nodes{
				InternalVMNetworkName:            "internal_net",
				ExternalVMNetworkName:            "external_net",
				ExcludeInternalNetworkSubnetCIDR: "172.15.108.11/32,fd00:cccc::1/128,fd00:cccc::2/128",
				ExcludeExternalNetworkSubnetCIDR: "173.15.108.11/32,173.15.108.12/32,fd01:cccc::1/128",
			},
			nics: []backends.NIC{
				cpiNIC("internal_net", "172.15.108.11", "172.15.108.12", "172.15.108.13", "fd00:cccc::1", "fd00:cccc::2", "fd00:cccc::3"),
				cpiNIC("external_net", "173.15.108.11", "173.15.108.12", "173.15.108.13", "fd01:cccc::1", "fd01:cccc::2", "fd01:cccc::3"),
			},
			want: []v1.NodeAddress{
				internalIP("172.15.108.12"), externalIP("173.15.108.13"),
				internalIP("fd00:cccc::3"), externalIP("fd01:cccc::2"),
			},
		},
		{
			name:     "Dualstack_ExcludingSubnets_whenNoIPv4AddrIsDiscovered",
			ipFamily: v6v4,
			nodes: config.Nodes{
				ExcludeInternalNetworkSubnetCIDR: "172.15.108.11/8",
				ExcludeExternalNetworkSubnetCIDR: "172.15.108.11/8",
			},
			nics:    []backends.NIC{cpiNIC("internal_net", "172.15.108.11", "fd00:cccc::1")},
			wantErr: "unable to find suitable IP address for node",
		},
		{
			name:     "Dualstack_ExcludingSubnets_whenNoIPv6AddrIsDiscovered",
			ipFamily: v6v4,
			nodes: config.Nodes{
				ExcludeInternalNetworkSubnetCIDR: "fd00:cccc::1/16",
				ExcludeExternalNetworkSubnetCIDR: "fd00:cccc::1/16",
			},
			nics:    []backends.NIC{cpiNIC("internal_net", "172.15.108.11", "fd00:cccc::1")},
			wantErr: "unable to find suitable IP address for node",
		},
		{
			name:     "DualStack_whenNoIPsOfOneFamilyAreDiscovered",
			ipFamily: v6v4,
			nics:     []backends.NIC{cpiNIC("internal_net", "127.0.0.1", "fd00:cccc::1")},
			wantErr:  "unable to find suitable IP address for node",
		},
		{
			name:      "IPv6_guestInfoWithDHCP",
			ipFamily:  v6,
			guestinfo: cloudInitMetadataDHCP6(),
			nics:      []backends.NIC{cpiNIC("VM Network", "fe80::1", "fd01:1234::1", "fd01:cccc::1")},
			want:      []v1.NodeAddress{internalIP("fd01:1234::1"), externalIP("fd01:1234::1")},
		},
		{
			name:      "StaticAddresses_IPv6_usesStaticAddressForExternalInternal",
			ipFamily:  v6,
			guestinfo: cloudInitMetadata("fd01:cccc::1/128"),
			nics:      []backends.NIC{cpiNIC("VM Network", "fe80::1", "fd01:1234::1", "fd01:cccc::1")},
			want:      []v1.NodeAddress{internalIP("fd01:cccc::1"), externalIP("fd01:cccc::1")},
		},
		{
			name:      "StaticAddresses_IPv4_usesStaticAddressForExternalInternal",
			ipFamily:  v4,
			guestinfo: cloudInitMetadata("192.168.1.12/64"), // not a valid IPv4 CIDR: only the IP counts
			nics:      []backends.NIC{cpiNIC("VM Network", "192.168.1.10", "192.168.1.12")},
			want:      []v1.NodeAddress{internalIP("192.168.1.12"), externalIP("192.168.1.12")},
		},
		{
			name:      "StaticAddresses_prioritizesOrderFromAddresses",
			ipFamily:  v4,
			guestinfo: cloudInitMetadata("192.168.1.12/64,192.168.1.10/64"),
			nics:      []backends.NIC{cpiNIC("VM Network", "192.168.1.10", "192.168.1.12")},
			want:      []v1.NodeAddress{internalIP("192.168.1.12"), externalIP("192.168.1.12")},
		},
		{
			name:      "StaticAddresses_usesTheStaticAddressInTheNetworkCIDR",
			ipFamily:  v4,
			guestinfo: cloudInitMetadata("10.10.10.10/64,192.168.1.12/64"),
			nodes:     config.Nodes{InternalNetworkSubnetCIDR: "192.168.0.0/16", ExternalNetworkSubnetCIDR: "192.168.0.0/16"},
			nics:      []backends.NIC{cpiNIC("VM Network", "192.168.1.10", "192.168.1.12", "10.10.10.10")},
			want:      []v1.NodeAddress{internalIP("192.168.1.12"), externalIP("192.168.1.12")},
		},
		{
			name:      "StaticAddresses_ignoresStaticAddressWhenWithinExcludeCIDR",
			ipFamily:  v4,
			guestinfo: cloudInitMetadata("192.168.1.12/64,10.10.10.10/64"),
			nodes:     config.Nodes{ExcludeInternalNetworkSubnetCIDR: "192.168.0.0/16", ExcludeExternalNetworkSubnetCIDR: "192.168.0.0/16"},
			nics:      []backends.NIC{cpiNIC("VM Network", "192.168.1.10", "192.168.1.12", "10.10.10.10")},
			want:      []v1.NodeAddress{internalIP("10.10.10.10"), externalIP("10.10.10.10")},
		},
		{
			name:      "StaticAddresses_usesTheStaticAddressInTheConfiguredNetworkName",
			ipFamily:  v4,
			guestinfo: cloudInitMetadata("192.168.1.8/64,192.168.1.12/64,10.10.10.10/64"),
			nodes:     config.Nodes{InternalVMNetworkName: "VM Network", ExternalVMNetworkName: "VM Network"},
			nics: []backends.NIC{
				cpiNIC("internal_net", "192.168.1.8"),
				cpiNIC("VM Network", "192.168.1.10", "192.168.1.12", "10.10.10.10"),
			},
			want: []v1.NodeAddress{internalIP("192.168.1.12"), externalIP("192.168.1.12")},
		},
		{
			name:      "StaticAddresses_addressesAreNotAssignedToTheNIC",
			ipFamily:  v4,
			guestinfo: cloudInitMetadata("192.168.1.12/64,10.10.10.10/64"),
			nics:      []backends.NIC{cpiNIC("VM Network", "192.168.1.8")},
			want:      []v1.NodeAddress{internalIP("192.168.1.8"), externalIP("192.168.1.8")},
		},
		{
			name:      "StaticAddresses_IPv6_handlesShorthandVsLonghandAddrs",
			ipFamily:  v6,
			guestinfo: cloudInitMetadata("fd01:1:2:2919:abba:0000:0000:401/128"),
			nics:      []backends.NIC{cpiNIC("VM Network", "fd00::1", "fd01:1:2:2919:abba::401")},
			want:      []v1.NodeAddress{internalIP("fd01:1:2:2919:abba::401"), externalIP("fd01:1:2:2919:abba::401")},
		},
		{
			// CPI's name says B64, its input is gzip+base64 (the next case is the reverse).
			name:      "StaticAddresses_IPv6_usesNetworkB64EncodedStaticAddressForExternalInternal",
			ipFamily:  v6,
			guestinfo: cloudInitMetadataEncodedNetwork(t, "gzip+base64", "fd01:cccc::1/128"),
			nics:      []backends.NIC{cpiNIC("VM Network", "fe80::1", "fd01:1234::1", "fd01:cccc::1")},
			want:      []v1.NodeAddress{internalIP("fd01:cccc::1"), externalIP("fd01:cccc::1")},
		},
		{
			name:      "StaticAddresses_IPv6_usesNetworkGZB64EncodedStaticAddressForExternalInternal",
			ipFamily:  v6,
			guestinfo: cloudInitMetadataEncodedNetwork(t, "base64", "fd01:cccc::1/128"),
			nics:      []backends.NIC{cpiNIC("VM Network", "fe80::1", "fd01:1234::1", "fd01:cccc::1")},
			want:      []v1.NodeAddress{internalIP("fd01:cccc::1"), externalIP("fd01:cccc::1")},
		},
		{
			name:      "StaticAddresses_errorsOnInvalidGuestInfoFormat",
			guestinfo: "not-valid-yaml this should error",
			nics:      []backends.NIC{cpiNIC("VM Network", "192.168.1.10")},
			wantErr:   "cannot unmarshal",
		},
	}
}

func TestNodeAddressesCPIDiscoverNodeIPs(t *testing.T) {
	cases := cpiAddressCases(t)
	if len(cases) != 53 {
		t.Fatalf("%d cases, CPI's TestDiscoverNodeIPs has 53", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			families, rules := cpiRules(t, tc.ipFamily, tc.nodes)
			vm := &backends.VM{Name: "cpi", GuestHostName: cpiHost, NICs: tc.nics}
			var metadata, encoding string
			if tc.guestinfo != "" {
				metadata, encoding = base64.StdEncoding.EncodeToString([]byte(tc.guestinfo)), "base64"
			}
			got, err := SelectAddresses(withMetadata(vm, metadata, encoding), families, rules, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q (addresses %v)", err, tc.wantErr, got)
				}
				if got != nil {
					t.Errorf("addresses %v returned with the error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			want := append([]v1.NodeAddress{{Type: v1.NodeHostName, Address: cpiHost}}, tc.want...)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("addresses =\n %v\nwant (CPI)\n %v", got, want)
			}
		})
	}
}

// CPI's TestDiscoverNodeWithMultiIFByName, the one other address case in
// nodemanager_test.go: link-local IPs skipped across NICs on one network.
func TestNodeAddressesCPIMultiIF(t *testing.T) {
	vm := &backends.VM{Name: "cpi", GuestHostName: cpiHost, NICs: []backends.NIC{
		cpiNIC("test_k8s_tenant_c123", "fe80::250:56ff:fe89:d2c7"),
		cpiNIC("test_k8s_tenant_c123", "10.10.108.12", "10.10.108.10", "fe80::250:56ff:fe89:d2c7"),
	}}
	got, err := SelectAddresses(vm, []string{config.IPv4}, config.AddressRules{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []v1.NodeAddress{{Type: v1.NodeHostName, Address: cpiHost}, internalIP("10.10.108.12"), externalIP("10.10.108.12")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("addresses = %v, want %v", got, want)
	}
}

// The errors CPI's DiscoverNode returns before selecting any address, in
// its order, each with its sentinel so the caller can name it in an Event.
func TestNodeAddressesCPIErrors(t *testing.T) {
	bothNames := config.AddressRules{InternalNetworkName: "internal_net", ExternalNetworkName: "external_net"}
	tests := []struct {
		name     string
		vm       backends.VM
		rules    config.AddressRules
		metadata string
		is       error
		text     string // CPI's words
	}{
		{
			name: "empty guest host name comes first",
			vm:   backends.VM{Name: "vm-1", NICs: nil},
			is:   ErrGuestHostNameEmpty, text: "VM Guest hostname is empty",
		},
		{
			name:     "no guest NICs, before unreadable metadata",
			vm:       backends.VM{Name: "vm-1", GuestHostName: "h"},
			metadata: "%%% not base64",
			is:       ErrGuestNICsEmpty, text: "VM GuestNicInfo is empty",
		},
		{
			name:  "neither named network on a NIC, though an IP is usable",
			vm:    backends.VM{Name: "vm-1", GuestHostName: "h", NICs: []backends.NIC{cpiNIC("other", "10.0.0.1")}},
			rules: bothNames,
			is:    ErrNoSuitableIP, text: "unable to find suitable IP address for node",
		},
		{
			// The network check only looks at real NICs.
			name: "a named network only on a NIC without a device",
			vm: backends.VM{Name: "vm-1", GuestHostName: "h", NICs: []backends.NIC{
				{Network: "internal_net", IPs: []string{"10.0.0.1"}, DeviceConfigID: -1},
				cpiNIC("other", "10.0.0.2"),
			}},
			rules: bothNames,
			is:    ErrNoSuitableIP, text: "unable to find suitable IP address for node",
		},
		{
			// An IP-less NIC on a named network passes the network check;
			// the localhost check then fails.
			name: "only loopback and link-local IPs, before unreadable metadata",
			vm: backends.VM{Name: "vm-1", GuestHostName: "h", NICs: []backends.NIC{
				cpiNIC("internal_net"),
				cpiNIC("other", "127.0.0.1", "::1", "fe80::1", "169.254.1.1", "0.0.0.0", "junk"),
			}},
			rules:    bothNames,
			metadata: "%%% not base64",
			is:       ErrNoSuitableIP, text: "unable to find suitable IP address for node after filtering out localhost IPs",
		},
		{
			name: "NICs, but every one without a device",
			vm: backends.VM{Name: "vm-1", GuestHostName: "h", NICs: []backends.NIC{
				{Network: "n", IPs: []string{"10.0.0.1"}, DeviceConfigID: -1},
			}},
			is: ErrNoSuitableIP, text: "after filtering out localhost IPs",
		},
		{
			name:     "unreadable metadata, once an IP is usable",
			vm:       backends.VM{Name: "vm-1", GuestHostName: "h", NICs: []backends.NIC{cpiNIC("n", "10.0.0.1")}},
			metadata: "%%% not base64",
			is:       ErrGuestInfoMetadata, text: "illegal base64 data",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vm := withMetadata(&tt.vm, tt.metadata, "base64")
			got, err := SelectAddresses(vm, []string{config.IPv4}, tt.rules, nil)
			if err == nil {
				t.Fatalf("addresses %v, want an error", got)
			}
			if got != nil {
				t.Errorf("addresses %v returned with the error", got)
			}
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.text) || !strings.Contains(err.Error(), tt.vm.Name) {
				t.Errorf("error %q: want %v, containing %q and the VM's name", err, tt.is, tt.text)
			}
		})
	}
}

// Beyond CPI's table: how CPI reads guestinfo.metadata, case by case.

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// plainNetwork is metadata whose network config lists ethernets (name,
// then its addresses), in that order.
func plainNetwork(ethernets ...[]string) string {
	var b strings.Builder
	b.WriteString("instance-id: x\nnetwork:\n  version: 2\n  ethernets:\n")
	for _, e := range ethernets {
		fmt.Fprintf(&b, "    %s:\n      addresses: [%s]\n", e[0], strings.Join(e[1:], ", "))
	}
	return b.String()
}

func TestStaticAddresses(t *testing.T) {
	gzNetwork := cloudInitMetadataEncodedNetwork(t, "gzip+base64", "10.0.0.2/24")
	tests := []struct {
		name               string
		metadata, encoding string
		want               map[string]int
	}{
		{name: "no metadata", encoding: "base64"},
		{name: "metadata without encoding: CPI ignores it", metadata: plainNetwork([]string{"eth0", "10.0.0.2/24"})},
		{
			// cloud-init reads gzip+base64 metadata; CPI does not.
			name:     "gzip+base64 metadata ignored, as CPI",
			metadata: gzipB64(t, plainNetwork([]string{"eth0", "10.0.0.2/24"})), encoding: "gzip+base64",
		},
		{name: "b64 metadata ignored, as CPI", metadata: b64(plainNetwork([]string{"eth0", "10.0.0.2/24"})), encoding: "b64"},
		{name: "encoding is case-sensitive", metadata: b64(plainNetwork([]string{"eth0", "10.0.0.2/24"})), encoding: "BASE64"},
		{
			name:     "plain network config",
			metadata: b64(plainNetwork([]string{"eth0", "10.0.0.2/24", "fd00::2/64"})), encoding: "base64",
			want: map[string]int{"10.0.0.2": 0, "fd00::2": 1},
		},
		{
			name:     "network encoded b64",
			metadata: b64(cloudInitMetadataEncodedNetwork(t, "b64", "10.0.0.2/24")), encoding: "base64",
			want: map[string]int{"10.0.0.2": 0},
		},
		{
			name:     "network encoded gz+b64",
			metadata: b64(cloudInitMetadataEncodedNetwork(t, "gz+b64", "10.0.0.2/24")), encoding: "base64",
			want: map[string]int{"10.0.0.2": 0},
		},
		{
			name:     "network encoded gzip+base64",
			metadata: b64(gzNetwork), encoding: "base64",
			want: map[string]int{"10.0.0.2": 0},
		},
		{
			// CPI walks a map (random order); we take the document's.
			name: "ethernets in document order",
			metadata: b64(plainNetwork(
				[]string{"id9", "10.0.0.9/24"}, []string{"id1", "10.0.0.1/24"}, []string{"id10", "10.0.0.10/24"},
			)), encoding: "base64",
			want: map[string]int{"10.0.0.9": 0, "10.0.0.1": 1, "10.0.0.10": 2},
		},
		{
			name:     "canonical form, text before the slash",
			metadata: b64(plainNetwork([]string{"eth0", "fd01:1:2:2919:abba:0000:0000:401/128", "192.168.1.12/64", "10.0.0.3"})), encoding: "base64",
			want: map[string]int{"fd01:1:2:2919:abba::401": 0, "192.168.1.12": 1, "10.0.0.3": 2},
		},
		{
			// CPI's bookkeeping: an IP listed again is ranked anew, after
			// the others; a non-IP takes a rank under "<nil>".
			name:     "repeated and unparsable entries ranked as CPI",
			metadata: b64(plainNetwork([]string{"eth0", "10.0.0.1/24", "dhcp", "10.0.0.2/24", "10.0.0.1/24"})), encoding: "base64",
			want: map[string]int{"10.0.0.1": 3, "<nil>": 1, "10.0.0.2": 2},
		},
		{
			name:     "JSON metadata",
			metadata: b64(`{"network": {"version": 2, "ethernets": {"eth0": {"addresses": ["10.0.0.2/24"], "dhcp4": false}}}}`), encoding: "base64",
			want: map[string]int{"10.0.0.2": 0},
		},
		{
			name:     "network config v1: no ethernets",
			metadata: b64("network:\n  version: 1\n  config:\n  - type: physical\n    name: eth0\n"), encoding: "base64",
			want: map[string]int{},
		},
		{
			name:     "DHCP only",
			metadata: b64(cloudInitMetadataDHCP6()), encoding: "base64",
			want: map[string]int{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := StaticAddresses(tt.metadata, tt.encoding)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) || (len(got) > 0 && !reflect.DeepEqual(got, tt.want)) {
				t.Errorf("StaticAddresses = %v, want %v", got, tt.want)
			}
		})
	}
}

func gzipB64(t *testing.T, s string) string {
	t.Helper()
	return encodeNetwork(t, "gzip+base64", []byte(s))
}

// Metadata CPI cannot read fails DiscoverNode; so it fails here.
func TestStaticAddressesErrors(t *testing.T) {
	bomb := func() string {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zeros := make([]byte, 1<<20)
		for range 9 {
			if _, err := zw.Write(zeros); err != nil {
				t.Fatal(err)
			}
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return "network.encoding: gzip+base64\nnetwork: " + base64.StdEncoding.EncodeToString(buf.Bytes())
	}()
	tests := []struct {
		name, metadata, text string
	}{
		{"metadata not base64", "%%%", "illegal base64 data"},
		{"metadata a YAML scalar", b64("just text"), "cannot unmarshal"},
		{"metadata a YAML list", b64("- a\n- b"), "cannot unmarshal"},
		{"network encoded but not base64", b64("network.encoding: base64\nnetwork: '%%%'"), "illegal base64 data"},
		{"network encoded, a map", b64("network.encoding: base64\nnetwork: {version: 2}"), "cannot unmarshal"},
		{"network gzip but not gzip", b64("network.encoding: gzip+base64\nnetwork: " + b64("plain text")), "gzip: invalid header"},
		{"network a string without encoding", b64("network: " + b64("version: 2")), "cannot unmarshal"},
		{"unknown network encoding", b64("network.encoding: gzip\nnetwork: " + b64("version: 2")), "cannot unmarshal"},
		{"addresses not a list", b64("network:\n  ethernets:\n    eth0:\n      addresses: {a: b}\n"), "cannot unmarshal"},
		{"set-name not a string", b64("network:\n  ethernets:\n    eth0:\n      set-name: {a: b}\n"), "cannot unmarshal"},
		{"ethernets a list", b64("network:\n  ethernets: [eth0]\n"), "cannot unmarshal"},
		{"gzip bomb", b64(bomb), "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := StaticAddresses(tt.metadata, "base64")
			if err == nil || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("StaticAddresses = %v, %v; want an error containing %q", got, err, tt.text)
			}
		})
	}
}

// Static IPs go first in the metadata's order, matched against the IP as
// VMware Tools writes it (as CPI: an IP written otherwise is not matched);
// the others keep their order, and the rules then apply as usual.
func TestNodeAddressesPreferStatic(t *testing.T) {
	vm := &backends.VM{Name: "vm-1", GuestHostName: "h", NICs: []backends.NIC{
		cpiNIC("a", "10.0.0.1", "FD00::5", "10.0.0.2", "10.0.0.3"),
		cpiNIC("b", "10.0.0.4", "fd00::6"),
	}}
	metadata := b64(plainNetwork(
		[]string{"id0", "10.0.0.4/24", "fd00::5/64"},
		[]string{"id1", "10.0.0.3/24", "fd00::6/64"},
	))
	tests := []struct {
		name     string
		families []string
		rules    config.AddressRules
		want     []v1.NodeAddress
	}{
		{
			name:     "default choice",
			families: []string{config.IPv4, config.IPv6},
			want: []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: "h"},
				internalIP("10.0.0.4"), externalIP("10.0.0.4"),
				internalIP("fd00::6"), externalIP("fd00::6"),
			},
		},
		{
			name:     "subnet order still first",
			families: []string{config.IPv4},
			rules: config.AddressRules{
				InternalSubnets: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/32"), netip.MustParsePrefix("10.0.0.0/24")},
				ExternalSubnets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")},
			},
			want: []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: "h"},
				internalIP("10.0.0.2"), externalIP("10.0.0.4"),
			},
		},
		{
			name:     "network name over static",
			families: []string{config.IPv4},
			rules:    config.AddressRules{InternalNetworkName: "A"},
			want: []v1.NodeAddress{
				{Type: v1.NodeHostName, Address: "h"},
				internalIP("10.0.0.3"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SelectAddresses(withMetadata(vm, metadata, "base64"), tt.families, tt.rules, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("addresses =\n %v\nwant\n %v", got, tt.want)
			}
		})
	}
	// The VM's NICs are the caller's: the reordering must not show there.
	if ips := vm.NICs[0].IPs; ips[0] != "10.0.0.1" || ips[3] != "10.0.0.3" {
		t.Errorf("NICs reordered: %v", vm.NICs)
	}
}

// withMetadata is a copy of vm with guestinfo.metadata and its encoding set.
func withMetadata(vm *backends.VM, metadata, encoding string) *backends.VM {
	c := *vm
	c.GuestInfoMetadata, c.GuestInfoMetadataEncoding = metadata, encoding
	return &c
}
