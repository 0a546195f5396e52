package metadata

import (
	"errors"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/node/helpers"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// annotated is a Node whose kubelet was started with --node-ip=value.
func annotated(value string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: value}}}
}

// The annotation is read as the kubelet writes it (net.IP.String of IPs it
// accepted as --node-ip); anything else is an error naming the annotation
// and the value, which the library would refuse too or no kubelet writes.
func TestProvidedNodeIPs(t *testing.T) {
	for value, want := range map[string][]string{
		"10.0.0.5":            {"10.0.0.5"},
		"fd00::5":             {"fd00::5"},
		"10.0.0.5,fd00::5":    {"10.0.0.5", "fd00::5"},
		"fd00::5,10.0.0.5":    {"fd00::5", "10.0.0.5"},
		"FD00:0:0::5":         {"fd00::5"},
		"::ffff:10.0.0.5":     {"10.0.0.5"}, // IPv4, as for the library
		"::ffff:10.0.0.5,::5": {"10.0.0.5", "::5"},
	} {
		got, err := ProvidedNodeIPs(annotated(value))
		if err != nil {
			t.Errorf("%q: %v", value, err)
			continue
		}
		var gotS []string
		for _, a := range got {
			gotS = append(gotS, a.String())
		}
		if !reflect.DeepEqual(gotS, want) {
			t.Errorf("%q: %v, want %v", value, gotS, want)
		}
	}
	for _, value := range []string{
		"", " 10.0.0.5", "10.0.0.5 ", "10.0.0.5,", ",10.0.0.5", "10.0.0.5, fd00::5", "10.0.0.5,10.0.0.6", "fd00::5,fd00::6",
		"::ffff:10.0.0.5,10.0.0.6", "10.0.0.5,fd00::5,10.0.0.7", "010.0.0.5", "fd00::5%eth0", "10.0.0.5/24", "node-1",
		"0.0.0.0", "::", "127.0.0.1", "::1", "169.254.1.1", "fe80::1", "224.0.0.5", "ff02::1",
	} {
		_, err := ProvidedNodeIPs(annotated(value))
		if !errors.Is(err, ErrInvalidNodeIP) || !strings.Contains(err.Error(), cloudproviderapi.AnnotationAlphaProvidedIPAddr+"=") ||
			!strings.Contains(err.Error(), "\""+value+"\"") && !strings.Contains(err.Error(), strings.ReplaceAll(value, `"`, `\"`)) {
			t.Errorf("%q: %v; want ErrInvalidNodeIP naming the annotation and the value", value, err)
		}
	}
	if got, err := ProvidedNodeIPs(&v1.Node{}); got != nil || err != nil {
		t.Errorf("no annotation: %v, %v; want none", got, err)
	}
}

// dev is a NIC backed by a virtual device; bridge one that is not
// (DeviceConfigId -1: a bridge or bond over the vNIC, docker0, a VPN).
func dev(network string, ips ...string) backends.NIC {
	return backends.NIC{Network: network, IPs: ips, DeviceConfigID: 4000}
}

func bridge(ips ...string) backends.NIC {
	return backends.NIC{Network: "", IPs: ips, DeviceConfigID: -1}
}

func hostname(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeHostName, Address: a} }

type nodeIPCase struct {
	name       string
	annotation string
	families   []string
	rules      config.AddressRules
	nics       []backends.NIC
	metadata   string // plain netplan addresses of guestinfo.metadata ("" none)
	want       []v1.NodeAddress
	wantErr    error // ErrNoSuitableIP, or a *NodeIPError (only its kind is checked)
}

func nodeIPCases() []nodeIPCase {
	v4 := []string{config.IPv4}
	v4v6 := []string{config.IPv4, config.IPv6}
	h := hostname("vm-1.example.com")
	two := []backends.NIC{dev("VM Network", "10.0.0.5"), dev("Storage", "10.1.0.5")}
	return []nodeIPCase{
		{name: "first NIC (CPI's own choice)", annotation: "10.0.0.5", families: v4, nics: two,
			want: []v1.NodeAddress{h, internalIP("10.0.0.5"), externalIP("10.0.0.5")}},
		{name: "second NIC", annotation: "10.1.0.5", families: v4, nics: two,
			want: []v1.NodeAddress{h, internalIP("10.1.0.5"), externalIP("10.0.0.5")}},
		{name: "second IP of one NIC", annotation: "10.0.0.6", families: v4, nics: []backends.NIC{dev("VM Network", "10.0.0.5", "10.0.0.6")},
			want: []v1.NodeAddress{h, internalIP("10.0.0.6"), externalIP("10.0.0.5")}},
		{name: "dual-stack pair, IPv4 on one NIC and IPv6 on another", annotation: "10.0.0.5,fd00::5", families: v4v6,
			nics: []backends.NIC{dev("VM Network", "10.0.0.5", "fd00::1"), dev("v6", "fd00::5")},
			want: []v1.NodeAddress{h, internalIP("10.0.0.5"), externalIP("10.0.0.5"), internalIP("fd00::5"), externalIP("fd00::1")}},
		{name: "dual-stack pair, IPv6 first", annotation: "fd00::5,10.1.0.5", families: v4v6,
			nics: []backends.NIC{dev("VM Network", "10.0.0.5", "fd00::1"), dev("v6", "10.1.0.5", "fd00::5")},
			want: []v1.NodeAddress{h, internalIP("10.1.0.5"), externalIP("10.0.0.5"), internalIP("fd00::5"), externalIP("fd00::1")}},
		{name: "IPv4 node IP, the IPv6 family keeps CPI's choice", annotation: "10.1.0.5", families: v4v6,
			nics: []backends.NIC{dev("VM Network", "10.0.0.5", "fd00::1"), dev("v6", "10.1.0.5", "fd00::5")},
			want: []v1.NodeAddress{h, internalIP("10.1.0.5"), externalIP("10.0.0.5"), internalIP("fd00::1"), externalIP("fd00::1")}},
		// internalNetworkSubnetCidr picks 10.0.0.5; the kubelet's IP wins.
		// CPI's ExternalIP stays (none: a rule found the internal one).
		{name: "over a subnet rule picking another", annotation: "10.1.0.5", families: v4,
			rules: config.AddressRules{InternalSubnets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}, nics: two,
			want: []v1.NodeAddress{h, internalIP("10.1.0.5")}},
		{name: "over subnet rules for both", annotation: "10.1.0.5", families: v4,
			rules: config.AddressRules{InternalSubnets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, ExternalSubnets: []netip.Prefix{netip.MustParsePrefix("10.2.0.0/24")}},
			nics:  append(two, dev("Public", "10.2.0.5")),
			want:  []v1.NodeAddress{h, internalIP("10.1.0.5"), externalIP("10.2.0.5")}},
		{name: "over a VM network name rule", annotation: "10.1.0.5", families: v4,
			rules: config.AddressRules{InternalNetworkName: "vm network"}, nics: two,
			want: []v1.NodeAddress{h, internalIP("10.1.0.5")}},
		{name: "over an exclude list", annotation: "10.1.0.5", families: v4,
			rules: config.AddressRules{ExcludeInternalSubnets: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}, nics: two,
			want: []v1.NodeAddress{h, internalIP("10.1.0.5"), externalIP("10.0.0.5")}},
		{name: "only in guestinfo.metadata", annotation: "10.2.0.5", families: v4, nics: two, metadata: `"10.2.0.5/24"`,
			want: []v1.NodeAddress{h, internalIP("10.2.0.5"), externalIP("10.0.0.5")}},
		{name: "static in guestinfo.metadata and on a NIC: CPI's order for the rest", annotation: "10.0.0.5", families: v4, nics: two,
			metadata: `"10.1.0.5/24"`,
			want:     []v1.NodeAddress{h, internalIP("10.0.0.5"), externalIP("10.1.0.5")}},
		// DeviceConfigId -1: a bridge over the vNIC holds the node's IP.
		{name: "on an adapter without a device", annotation: "10.1.0.5", families: v4,
			nics: []backends.NIC{dev("VM Network", "10.0.0.5"), bridge("10.1.0.5")},
			want: []v1.NodeAddress{h, internalIP("10.1.0.5"), externalIP("10.0.0.5")}},
		// CPI fails (ErrNoSuitableIP) where the node IP is on the VM.
		{name: "every IP on adapters without a device", annotation: "10.1.0.5", families: v4,
			nics: []backends.NIC{dev("VM Network", "fe80::1"), bridge("10.1.0.5")},
			want: []v1.NodeAddress{h, internalIP("10.1.0.5")}},
		{name: "every IP excluded both ways", annotation: "10.0.0.5", families: v4,
			rules: config.AddressRules{ExcludeInternalSubnets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, ExcludeExternalSubnets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
			nics:  two, want: []v1.NodeAddress{h, internalIP("10.0.0.5")}},
		{name: "VM off the named VM networks", annotation: "10.0.0.5", families: v4,
			rules: config.AddressRules{InternalNetworkName: "int", ExternalNetworkName: "ext"},
			nics:  two, want: []v1.NodeAddress{h, internalIP("10.0.0.5")}},
		{name: "the other family still fails as in CPI", annotation: "10.0.0.5", families: v4v6,
			nics: two, wantErr: ErrNoSuitableIP},
		// Families outside ipFamily: the node IP is still returned.
		{name: "IPv6 node IP, ipFamily ipv4", annotation: "fd00::5", families: v4,
			nics: []backends.NIC{dev("VM Network", "10.0.0.5", "fd00::5")},
			want: []v1.NodeAddress{h, internalIP("10.0.0.5"), externalIP("10.0.0.5"), internalIP("fd00::5")}},
		{name: "dual-stack pair, ipFamily ipv4", annotation: "10.1.0.5,fd00::5", families: v4,
			nics: []backends.NIC{dev("VM Network", "10.0.0.5", "fd00::5"), dev("Storage", "10.1.0.5")},
			want: []v1.NodeAddress{h, internalIP("10.1.0.5"), externalIP("10.0.0.5"), internalIP("fd00::5")}},
		// Text forms: compared parsed; the VM's text goes on the Node.
		{name: "IPv6 upper case and uncompressed in the annotation", annotation: "FD00:0:0:0::5", families: []string{config.IPv6},
			nics: []backends.NIC{dev("VM Network", "fd00::1"), dev("v6", "fd00::5")},
			want: []v1.NodeAddress{h, internalIP("fd00::5"), externalIP("fd00::1")}},
		{name: "IPv6 upper case on the VM", annotation: "fd00::5", families: []string{config.IPv6},
			nics: []backends.NIC{dev("VM Network", "fd00::1"), dev("v6", "FD00::5")},
			want: []v1.NodeAddress{h, internalIP("FD00::5"), externalIP("fd00::1")}},
		{name: "IPv4-mapped IPv6 in the annotation", annotation: "::ffff:10.1.0.5", families: v4, nics: two,
			want: []v1.NodeAddress{h, internalIP("10.1.0.5"), externalIP("10.0.0.5")}},
		{name: "IPv4-mapped IPv6 on the VM", annotation: "10.1.0.5", families: v4,
			nics: []backends.NIC{dev("VM Network", "10.0.0.5"), dev("Storage", "::ffff:10.1.0.5")},
			want: []v1.NodeAddress{h, internalIP("::ffff:10.1.0.5"), externalIP("10.0.0.5")}},
		{name: "not on the VM", annotation: "10.9.9.9", families: v4, nics: two, metadata: `"10.2.0.5/24"`, wantErr: &NodeIPError{}},
		{name: "half a pair not on the VM", annotation: "10.0.0.5,fd00::9", families: v4v6,
			nics: []backends.NIC{dev("VM Network", "10.0.0.5", "fd00::5")}, wantErr: &NodeIPError{}},
		{name: "link-local on the VM is not reported", annotation: "10.9.9.9", families: v4,
			nics: []backends.NIC{dev("VM Network", "10.0.0.5", "fe80::1")}, wantErr: &NodeIPError{}},
	}
}

// plainMetadata is base64 guestinfo.metadata whose one ethernet has the
// static addresses given (a YAML flow list's items).
func plainMetadata(addresses string) string {
	return b64("network:\n  version: 2\n  ethernets:\n    id0:\n      addresses: [" + addresses + "]\n")
}

func (c nodeIPCase) run(t *testing.T) ([]v1.NodeAddress, error) {
	t.Helper()
	vm := &backends.VM{Name: "vm-1", GuestHostName: "vm-1.example.com", NICs: c.nics}
	var md, enc string
	if c.metadata != "" {
		md, enc = plainMetadata(c.metadata), "base64"
	}
	ips, err := ProvidedNodeIPs(annotated(c.annotation))
	if err != nil {
		t.Fatalf("annotation %q: %v", c.annotation, err)
	}
	return SelectAddresses(withMetadata(vm, md, enc), c.families, c.rules, ips)
}

// Each node IP the VM reports is the InternalIP of its family, and the
// list is one the cloud-node controller accepts: the library's own check
// (helpers.GetNodeAddressesFromNodeIP, which updateNodeAddressesFromNodeIP
// calls before it removes the taint) passes, and keeps the node IPs as the
// Node's InternalIPs.
// CPI's answer fails that check for every case but the first NIC's.
func TestSelectForNodeIPs(t *testing.T) {
	for _, c := range nodeIPCases() {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.run(t)
			if c.wantErr != nil {
				var nip, wantNIP *NodeIPError
				if want := errors.As(c.wantErr, &wantNIP); want && !errors.As(err, &nip) || !want && !errors.Is(err, c.wantErr) {
					t.Fatalf("got %v, %v; want an error %T %v", got, err, c.wantErr, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("addresses\n got %v\nwant %v", got, c.want)
			}
			enforced, err := helpers.GetNodeAddressesFromNodeIP(c.annotation, got)
			if err != nil {
				t.Fatalf("the library refuses %v for %q: %v", got, c.annotation, err)
			}
			// Its InternalIPs are the node IPs, in the annotation's order.
			var internal []net.IP
			for _, a := range enforced {
				if a.Type == v1.NodeInternalIP {
					internal = append(internal, net.ParseIP(a.Address))
				}
			}
			provided := strings.Split(c.annotation, ",")
			for i, s := range provided {
				if len(internal) != len(provided) || !internal[i].Equal(net.ParseIP(s)) {
					t.Fatalf("the library's list %v: InternalIPs %v, want %v", enforced, internal, provided)
				}
			}
		})
	}
}

// The error names the IPs the annotation gives that the VM lacks, and every
// IP the VM reports, on any adapter and in its metadata: what to fix.
func TestNodeIPNotOnVMNamesTheIPs(t *testing.T) {
	c := nodeIPCase{annotation: "10.9.9.9", families: []string{config.IPv4},
		nics:     []backends.NIC{dev("VM Network", "10.0.0.5", "fe80::1"), bridge("172.17.0.1")},
		metadata: `"10.2.0.5/24", "10.0.0.5/24"`}
	_, err := c.run(t)
	var nip *NodeIPError
	if !errors.As(err, &nip) {
		t.Fatalf("got %v; want a *NodeIPError", err)
	}
	want := `vm "vm-1": the kubelet's node IP 10.9.9.9 (annotation alpha.kubernetes.io/provided-node-ip, its --node-ip) not reported by the VM, ` +
		`which reports 10.0.0.5, 172.17.0.1 on its network adapters and 10.2.0.5 in guestinfo.metadata; ` +
		`the Node is not initialized until its kubelet's --node-ip is one of them`
	if err.Error() != want {
		t.Fatalf("error\n got %s\nwant %s", err, want)
	}
}

// Without the annotation the answer is CPI's, byte for byte, on CPI's own
// 53 cases (errors too).
func TestSelectForNodeIPsWithoutAnnotationIsCPIs(t *testing.T) {
	for _, c := range cpiAddressCases(t) {
		families, rules := cpiRules(t, c.ipFamily, c.nodes)
		vm := &backends.VM{Name: "vm", GuestHostName: cpiHost, NICs: c.nics}
		md, enc := "", ""
		if c.guestinfo != "" {
			md, enc = b64(c.guestinfo), "base64"
		}
		ips, err := ProvidedNodeIPs(&v1.Node{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ips) != 0 {
			t.Fatalf("no annotation: node IPs %v", ips)
		}
		got, gotErr := SelectAddresses(withMetadata(vm, md, enc), families, rules, ips)
		want := append([]v1.NodeAddress{{Type: v1.NodeHostName, Address: cpiHost}}, c.want...)
		if c.wantErr != "" {
			want = nil
		}
		wrongErr := gotErr != nil && !strings.Contains(gotErr.Error(), c.wantErr)
		if !reflect.DeepEqual(got, want) || (gotErr == nil) != (c.wantErr == "") || wrongErr {
			t.Errorf("%s: got %v, %v; CPI's %v, %q", c.name, got, gotErr, want, c.wantErr)
		}
	}
}

// On each of CPI's 53 cases, a kubelet given any IP the VM reports joins:
// the library accepts the answer, with that IP as the InternalIP. The
// answer fails only where CPI's does, for a reason that is not the node
// IP's family. Today's (CPI's) answer fails the library for most of them.
func TestEveryReportedIPJoinsOnCPICases(t *testing.T) {
	joined := 0
	for _, c := range cpiAddressCases(t) {
		families, rules := cpiRules(t, c.ipFamily, c.nodes)
		vm := &backends.VM{Name: "vm", GuestHostName: cpiHost, NICs: c.nics}
		md, enc := "", ""
		if c.guestinfo != "" {
			md, enc = b64(c.guestinfo), "base64"
		}
		vm = withMetadata(vm, md, enc)
		_, cpiErr := SelectAddresses(vm, families, rules, nil)
		for _, cand := range usableIPs(c.nics) {
			if cand.ip.IsMulticast() {
				continue // kept by CPI's filter, refused by the kubelet
			}
			got, err := SelectAddresses(vm, families, rules, []netip.Addr{cand.ip})
			if err != nil {
				if cpiErr == nil {
					t.Errorf("%s, --node-ip=%s: %v; CPI answers", c.name, cand.raw, err)
				}
				continue
			}
			enforced, err := helpers.GetNodeAddressesFromNodeIP(cand.ip.String(), got)
			if err != nil {
				t.Errorf("%s, --node-ip=%s: the library refuses %v: %v", c.name, cand.raw, got, err)
				continue
			}
			if enforced[0].Type != v1.NodeInternalIP || enforced[0].Address != cand.raw {
				t.Errorf("%s, --node-ip=%s: the library's list %v does not start with it as InternalIP", c.name, cand.raw, enforced)
			}
			joined++
		}
	}
	if joined < 100 {
		t.Fatalf("only %d (case, IP) pairs joined: the cases do not cover what they should", joined)
	}
}
