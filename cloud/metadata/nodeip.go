package metadata

// The kubelet's --node-ip (issue 31; CPI #614). A kubelet started with
// --cloud-provider=external --node-ip=X annotates its Node
// alpha.kubernetes.io/provided-node-ip: X, and the cloud-node controller
// of k8s.io/cloud-provider refuses to initialize the Node unless each IP
// of the annotation is among the addresses InstanceMetadata returned
// (node/helpers.GetNodeAddressesFromNodeIP): the Node would stay tainted,
// with only the CCM's log saying why. CPI returns one InternalIP per IP
// family, chosen by its own rules, so a kubelet naming its second NIC's IP
// never joins. Here each IP of the annotation that the VM reports becomes
// the InternalIP of its family; an IP it does not report is an error
// naming it and the VM's IPs, and an Event on the Node says so.
//
// In SelectAddresses, each node IP the VM reports is the InternalIP of its
// family, whatever CPI's rules (subnets, VM network names, exclude lists)
// would choose; a family without a node IP keeps CPI's choice, and so does
// every ExternalIP. The decisions, and why:
//   - "The VM reports it": on any network adapter, those without a virtual
//     device (DeviceConfigId -1: a bridge, bond or VLAN over the vNIC, a
//     VPN, docker0) included, or among the static addresses of
//     guestinfo.metadata. CPI skips those adapters because it guesses and
//     must not guess docker0; here nothing is guessed: the kubelet was
//     told the IP and checked that it is on one of the guest's interfaces,
//     and a bridge over the vNIC is where the node's IP is on many hosts.
//   - The text put on the Node is the VM's (VMware Tools'; the metadata's
//     canonical form when only the metadata has it), as for every other
//     address, so an address does not change text when --node-ip is set
//     or unset; the IPs are compared parsed (and IPv4-mapped IPv6
//     unmapped), as the library compares them (net.IP.Equal).
//   - A node IP of a family not in the vCenter's ipFamily is still
//     returned, as the only address of its family: the library requires
//     it, and the kubelet's flag is the per-node word on its address;
//     nothing else of that family is.
//   - Where CPI's selection finds no address for the node IP's family
//     (ErrNoSuitableIP: every IP excluded, the VM off the named VM
//     networks, every IP on adapters without a device), the node IP is
//     still the family's InternalIP, without an ExternalIP. A family
//     without a node IP fails as in CPI, and so do CPI's checks of the
//     guest (no host name, no adapter) and an unreadable
//     guestinfo.metadata: they are not about the node IP.
//   - A node IP the VM does not report is a *NodeIPError naming it and the
//     VM's IPs: a list without it would be refused by the library, with
//     nothing but its log to say why.

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// ErrInvalidNodeIP is a provided-node-ip annotation that is not one IP or
// a dual-stack pair a kubelet could have been given.
var ErrInvalidNodeIP = errors.New("invalid node IP annotation")

// NodeIPError is a kubelet's node IP the VM does not report: on none of
// its network adapters, nor among the static addresses of its
// guestinfo.metadata. The Node stays tainted, as the library would keep it.
type NodeIPError struct {
	VM string
	// Missing are the IPs of the annotation the VM does not report, in
	// canonical form (an IPv4-mapped IPv6 as its IPv4).
	Missing []string
	// Reported are the IPs its guest reports on its network adapters
	// (every adapter, in VMware Tools' order), and Static those of its
	// guestinfo.metadata not among them.
	Reported, Static []string
}

func (e *NodeIPError) Error() string {
	ips := "IP " + e.Missing[0]
	if len(e.Missing) > 1 {
		ips = "IPs " + strings.Join(e.Missing, ", ")
	}
	msg := fmt.Sprintf("vm %q: the kubelet's node %s (annotation %s, its --node-ip) not reported by the VM, which reports %s on its network adapters",
		e.VM, ips, cloudproviderapi.AnnotationAlphaProvidedIPAddr, cmp.Or(strings.Join(e.Reported, ", "), "no IP"))
	if len(e.Static) > 0 {
		msg += " and " + strings.Join(e.Static, ", ") + " in guestinfo.metadata"
	}
	return msg + "; the Node is not initialized until its kubelet's --node-ip is one of them"
}

// ProvidedNodeIPs reads node's provided-node-ip annotation: none when
// absent. The parse is strict: one IP, or two of different families
// separated by a comma, each as net.ParseIP reads it (no spaces, zones
// or leading zeros), none of those the kubelet refuses for --node-ip
// (unspecified, loopback, link-local, multicast). The kubelet writes the
// annotation from the IPs it validated with net.IP.String, so anything
// else was not written by a kubelet and is an error, never a guess.
// IPv4-mapped IPv6 (::ffff:a.b.c.d) is the IPv4 address, as for the
// library (its IsIPv6 is To4() == nil).
func ProvidedNodeIPs(node *v1.Node) ([]netip.Addr, error) {
	value, ok := node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]
	if !ok {
		return nil, nil
	}
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w %s=%q: %s", ErrInvalidNodeIP, cloudproviderapi.AnnotationAlphaProvidedIPAddr, value, fmt.Sprintf(format, args...))
	}
	parts := strings.Split(value, ",")
	if len(parts) > 2 {
		return nil, invalid("more than two IPs")
	}
	var out []netip.Addr
	for _, p := range parts {
		ip := net.ParseIP(p)
		if ip == nil {
			return nil, invalid("%q is not an IP", p)
		}
		a, _ := netip.AddrFromSlice(ip)
		a = a.Unmap()
		if a.IsUnspecified() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() {
			return nil, invalid("%s is unspecified, loopback, link-local or multicast, which the kubelet refuses as --node-ip", p)
		}
		out = append(out, a)
	}
	if len(out) == 2 && out[0].Is4() == out[1].Is4() {
		return nil, invalid("two IPs of one family; a pair must be one IPv4 and one IPv6")
	}
	return out, nil
}

func ipFamily(a netip.Addr) string {
	if a.Is4() {
		return config.IPv4
	}
	return config.IPv6
}

// reportedNodeIPs finds each node IP among the IPs vm reports, by family:
// on its adapters first (every adapter, in order: the first text VMware
// Tools gives it), else in its guestinfo.metadata (static, as
// StaticAddresses ranks them). An IP it does not report is a *NodeIPError.
func reportedNodeIPs(vm *backends.VM, static map[string]int, nodeIPs []netip.Addr) (map[string]*candidate, error) {
	reported := usableIPs(vm.NICs)
	var fromMetadata []candidate
	for _, s := range SortedStatic(static) {
		a, err := netip.ParseAddr(s)
		if err != nil || slices.ContainsFunc(reported, func(c candidate) bool { return c.ip == a.Unmap() }) {
			continue
		}
		fromMetadata = append(fromMetadata, candidate{raw: s, ip: a.Unmap()})
	}
	pins := map[string]*candidate{}
	var missing []string
	for _, ip := range nodeIPs {
		match := func(c candidate) bool { return c.ip == ip }
		if i := slices.IndexFunc(reported, match); i >= 0 {
			pins[ipFamily(ip)] = &reported[i]
		} else if i := slices.IndexFunc(fromMetadata, match); i >= 0 {
			pins[ipFamily(ip)] = &fromMetadata[i]
		} else {
			missing = append(missing, ip.String())
		}
	}
	if len(missing) == 0 {
		return pins, nil
	}
	e := &NodeIPError{VM: vm.Name, Missing: missing}
	for _, c := range reported {
		e.Reported = append(e.Reported, c.raw)
	}
	for _, c := range fromMetadata {
		e.Static = append(e.Static, c.raw)
	}
	return nil, e
}

// SortedStatic lists static's IPs by rank (ties by text, so the list is
// the same at every call).
func SortedStatic(static map[string]int) []string {
	return slices.SortedFunc(maps.Keys(static), func(a, b string) int {
		return cmp.Or(cmp.Compare(static[a], static[b]), strings.Compare(a, b))
	})
}
