package metadata

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v2"
	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// Errors of SelectAddresses, in CPI's words (the texts its users search for).
// Each is returned where CPI's DiscoverNode fails, so the Node stays tainted,
// or keeps the addresses it has, as under CPI.
var (
	ErrGuestHostNameEmpty = errors.New("VM Guest hostname is empty")
	ErrGuestNICsEmpty     = errors.New("VM GuestNicInfo is empty")
	ErrNoSuitableIP       = errors.New("unable to find suitable IP address for node")
	ErrGuestInfoMetadata  = errors.New("cannot read guestinfo.metadata")
)

// candidate is one guest IP and the VM network it is on.
type candidate struct {
	// raw is the IP as VMware Tools wrote it: CPI puts it on the Node and
	// matches static addresses against it unchanged.
	raw     string
	ip      netip.Addr // unmapped, for family and subnet tests
	network string
}

// addressList is a Node's addresses in the order they were chosen, each
// (type and address) once: CPI lists an IP that is both the InternalIP and
// the ExternalIP under both types, never twice under one.
type addressList []v1.NodeAddress

func (l *addressList) add(t v1.NodeAddressType, c *candidate) {
	if a := (v1.NodeAddress{Type: t, Address: c.raw}); !slices.Contains(*l, a) {
		*l = append(*l, a)
	}
}

// SelectAddresses selects a VM's addresses as CPI's DiscoverNode does, but
// for the kubelet's node IPs (ProvidedNodeIPs; none: CPI's answer, byte for
// byte), which nodeip.go explains. The guest host name comes first; then,
// for each IP family in order, an InternalIP and an ExternalIP, each chosen
// among the family's IPs outside its own exclude list: by subnet (in the
// order of the list), else by VM network name; if neither finds either
// address, the first IP outside each exclude list. IPs statically
// configured in the cloud-init metadata (guestinfo.metadata, decoded as
// guestinfo.metadata.encoding says) are tried first. The checks before any
// selection, and their order, are CPI's: each is an error.
func SelectAddresses(vm *backends.VM, families []string, rules config.AddressRules,
	nodeIPs []netip.Addr) ([]v1.NodeAddress, error) {
	if vm.GuestHostName == "" {
		return nil, fmt.Errorf("vm %q: %w: VMware Tools not running, or no host name yet",
			vm.Name, ErrGuestHostNameEmpty)
	}
	// Counted before NICs without a device are dropped, as CPI does.
	if len(vm.NICs) == 0 {
		return nil, fmt.Errorf("vm %q: %w: VMware Tools reports no network adapter", vm.Name, ErrGuestNICsEmpty)
	}
	// CPI chooses among the NICs backed by a virtual device: -1 is none
	// (docker0, a VPN…).
	nics := slices.DeleteFunc(slices.Clone(vm.NICs), func(n backends.NIC) bool { return n.DeviceConfigID == -1 })
	// CPI's check that a VM is on the VM networks named for its addresses:
	// only when both names are set, and even if subnets would match.
	in, ex := rules.InternalNetworkName, rules.ExternalNetworkName
	offNetworks := in != "" && ex != "" && !onNetwork(nics, in) && !onNetwork(nics, ex)
	cands := usableIPs(nics)
	// cpiFails is why CPI's selection finds no address at all, if it does not.
	cpiFails := func() error {
		if offNetworks {
			return fmt.Errorf("vm %q: %w: no network adapter on VM network %q or %q", vm.Name, ErrNoSuitableIP, in, ex)
		}
		if len(cands) == 0 {
			return fmt.Errorf("vm %q: %w after filtering out localhost IPs", vm.Name, ErrNoSuitableIP)
		}
		return nil
	}
	// Without node IPs these come before the metadata is read, as in CPI.
	if err := cpiFails(); err != nil && len(nodeIPs) == 0 {
		return nil, err
	}
	static, err := StaticAddresses(vm.GuestInfoMetadata, vm.GuestInfoMetadataEncoding)
	if err != nil {
		return nil, fmt.Errorf("vm %q: %w: %w", vm.Name, ErrGuestInfoMetadata, err)
	}
	pins, err := reportedNodeIPs(vm, static, nodeIPs)
	if err != nil {
		return nil, err
	}
	preferStatic(cands, static)
	answered := slices.Clone(families)
	for _, ip := range nodeIPs {
		if f := ipFamily(ip); !slices.Contains(answered, f) {
			answered = append(answered, f)
		}
	}

	out := addressList{{Type: v1.NodeHostName, Address: vm.GuestHostName}}
	for _, fam := range answered {
		pin := pins[fam]
		var internal, external *candidate
		switch {
		case !slices.Contains(families, fam): // only the node IP
		case offNetworks || len(cands) == 0:
			if pin == nil {
				return nil, cpiFails()
			}
		default:
			var n int
			internal, external, n = pickAddresses(cands, fam, rules)
			if internal == nil && external == nil && pin == nil {
				why := fmt.Sprintf("no usable %s address on its network adapters", fam)
				if n > 0 {
					why = fmt.Sprintf("each %s address is excluded both as internal and as external", fam)
				}
				return nil, fmt.Errorf("vm %q: %w with IP family %s: %s", vm.Name, ErrNoSuitableIP, fam, why)
			}
		}
		if pin != nil {
			internal = pin
		}
		if internal != nil {
			out.add(v1.NodeInternalIP, internal)
		}
		if external != nil {
			out.add(v1.NodeExternalIP, external)
		}
	}
	return out, nil
}

// usableIPs lists the NICs' IPs in order, without unparsable, unspecified,
// link-local and loopback ones: exactly CPI's filter (so a multicast IP
// outside the link-local block stays, as in CPI). net.ParseIP, not
// netip.ParseAddr, because it is CPI's parser: it refuses zones.
func usableIPs(nics []backends.NIC) []candidate {
	var out []candidate
	for _, n := range nics {
		for _, s := range n.IPs {
			ip := net.ParseIP(s)
			if ip == nil || ip.IsUnspecified() || ip.IsLinkLocalMulticast() || ip.IsLinkLocalUnicast() || ip.IsLoopback() {
				continue
			}
			a, _ := netip.AddrFromSlice(ip)
			out = append(out, candidate{raw: s, ip: a.Unmap(), network: n.Network})
		}
	}
	return out
}

// pickAddresses is one IP family's choice; n counts the family's IPs.
func pickAddresses(cands []candidate, family string, r config.AddressRules) (internal, external *candidate, n int) {
	ofFamily := slices.DeleteFunc(slices.Clone(cands), func(c candidate) bool {
		return (family != config.IPv4 || !c.ip.Is4()) && (family != config.IPv6 || !c.ip.Is6())
	})
	// Each address has its own exclude list: an IP excluded from one may
	// still be the other.
	in := outside(ofFamily, r.ExcludeInternalSubnets)
	ex := outside(ofFamily, r.ExcludeExternalSubnets)
	internal = bySubnet(in, r.InternalSubnets)
	external = bySubnet(ex, r.ExternalSubnets)
	if internal == nil {
		internal = byNetwork(in, r.InternalNetworkName)
	}
	if external == nil {
		external = byNetwork(ex, r.ExternalNetworkName)
	}
	// Only when no rule chose either: one found address means the other
	// is left out, as in CPI.
	if internal == nil && external == nil {
		if len(in) > 0 {
			internal = &in[0]
		}
		if len(ex) > 0 {
			external = &ex[0]
		}
	}
	return internal, external, len(ofFamily)
}

func outside(cands []candidate, exclude []netip.Prefix) []candidate {
	return slices.DeleteFunc(slices.Clone(cands), func(c candidate) bool {
		return slices.ContainsFunc(exclude, func(p netip.Prefix) bool { return p.Contains(c.ip) })
	})
}

// bySubnet tries the subnets in their configured order: the first subnet
// holding any candidate wins, not the first candidate in any subnet.
func bySubnet(cands []candidate, subnets []netip.Prefix) *candidate {
	for _, p := range subnets {
		for i := range cands {
			if p.Contains(cands[i].ip) {
				return &cands[i]
			}
		}
	}
	return nil
}

func byNetwork(cands []candidate, network string) *candidate {
	if network == "" {
		return nil
	}
	for i := range cands {
		if strings.EqualFold(cands[i].network, network) {
			return &cands[i]
		}
	}
	return nil
}

func onNetwork(nics []backends.NIC, network string) bool {
	return slices.ContainsFunc(nics, func(n backends.NIC) bool { return strings.EqualFold(n.Network, network) })
}

// preferStatic moves the IPs configured statically to the front, in their
// order in the metadata; the others keep theirs.
func preferStatic(cands []candidate, static map[string]int) {
	if len(static) == 0 {
		return
	}
	rank := func(c candidate) int {
		if i, ok := static[c.raw]; ok {
			return i
		}
		return math.MaxInt // after every static IP
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(rank(a), rank(b)) })
}

// maxNetworkConfig bounds a gunzipped network config: a real one is a few
// KiB, and a gzip bomb in one VM's extraConfig must not take the CCM down.
const maxNetworkConfig = 8 << 20

// cloud-init network config (netplan v2): only the static addresses matter.
type (
	ethernet struct {
		Addresses []string `yaml:"addresses"`
		// Read only so that a set-name CPI cannot read fails here too.
		SetName string `yaml:"set-name"`
	}
	networkConfig struct {
		Ethernets map[string]ethernet `yaml:"ethernets"`
	}
	// ethernetOrder is the same document read for its ethernets' order.
	ethernetOrder struct {
		Ethernets yaml.MapSlice `yaml:"ethernets"`
	}
)

// metadataNetwork is the metadata document read for its network key.
type metadataNetwork[T any] struct {
	Network T `yaml:"network"`
}

// StaticAddresses reads the static IPs of a VM's cloud-init metadata
// (extraConfig guestinfo.metadata, with guestinfo.metadata.encoding) and
// returns each IP's rank, as CPI does. CPI's rules: the metadata is read
// only when its encoding is exactly "base64" (gzip+base64 metadata is
// ignored, though cloud-init accepts it); the network config is either the
// metadata's network key, or, if network.encoding is base64/b64 or
// gzip+base64/gz+b64, that key's encoded value; an address is its text
// before any "/", in canonical form ("<nil>" if not an IP). A metadata CPI
// cannot read is an error.
//
// Ranks follow CPI's bookkeeping: each entry sets its IP's rank to the
// number of distinct IPs seen so far, so an IP listed twice ranks at its
// later place (possibly tied with the next, which then keep NIC order).
// Ethernets are taken in document order: CPI walks a Go map, in random
// order, so with several ethernets CPI's ranks change from one call to the
// next; document order is one of its outcomes, and the one its comment
// promises.
func StaticAddresses(metadata, encoding string) (map[string]int, error) {
	if metadata == "" || encoding != "base64" {
		return nil, nil
	}
	doc, err := base64.StdEncoding.DecodeString(metadata)
	if err != nil {
		return nil, err
	}
	var head struct {
		Encoding string `yaml:"network.encoding"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return nil, err
	}
	var (
		cfg   networkConfig
		order ethernetOrder
	)
	switch head.Encoding {
	case "base64", "b64", "gzip+base64", "gz+b64":
		var enc metadataNetwork[string]
		if err := yaml.Unmarshal(doc, &enc); err != nil {
			return nil, err
		}
		raw, err := base64.StdEncoding.DecodeString(enc.Network)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(head.Encoding, "gz") {
			if raw, err = gunzip(raw); err != nil {
				return nil, err
			}
		}
		if err := yaml.Unmarshal(raw, &cfg); err != nil {
			return nil, err
		}
		_ = yaml.Unmarshal(raw, &order) // order only: on error, sorted
	default: // the network config as it is
		var plain metadataNetwork[networkConfig]
		if err := yaml.Unmarshal(doc, &plain); err != nil {
			return nil, err
		}
		var plainOrder metadataNetwork[ethernetOrder]
		_ = yaml.Unmarshal(doc, &plainOrder) // order only: on error, sorted
		cfg, order = plain.Network, plainOrder.Network
	}
	rank := map[string]int{}
	for _, name := range ethernetNames(cfg.Ethernets, order.Ethernets) {
		for _, a := range cfg.Ethernets[name].Addresses {
			ip, _, _ := strings.Cut(a, "/")
			rank[net.ParseIP(ip).String()] = len(rank)
		}
	}
	return rank, nil
}

// ethernetNames lists the ethernets in document order; a key the ordered
// read spells differently (a non-string key) goes last, in sorted order.
func ethernetNames(eths map[string]ethernet, order yaml.MapSlice) []string {
	names := make([]string, 0, len(eths))
	seen := map[string]bool{}
	for _, item := range order {
		name, ok := item.Key.(string)
		if _, known := eths[name]; ok && known && !seen[name] {
			names = append(names, name)
			seen[name] = true
		}
	}
	var rest []string
	for name := range eths {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	return append(names, rest...)
}

func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxNetworkConfig+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxNetworkConfig {
		return nil, fmt.Errorf("network config larger than %d bytes once gunzipped", maxNetworkConfig)
	}
	return out, zr.Close()
}
