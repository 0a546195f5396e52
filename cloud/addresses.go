package cloud

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
)

// candidate is one guest IP and the VM network it is on.
type candidate struct {
	ip      netip.Addr
	network string
}

// NodeAddresses selects a VM's addresses by CPI's rules: the guest host name
// always; then, for each IP family in order, an InternalIP and ExternalIP
// chosen by subnet, else by VM network name, never from an excluded subnet;
// when no rule selects either, the first usable IP serves as both.
// Loopback, link-local, multicast and unspecified IPs and NICs that are not
// virtual devices (DeviceConfigID -1) are never used.
func NodeAddresses(vm *backends.VM, families []string, rules config.AddressRules) ([]v1.NodeAddress, error) {
	var out []v1.NodeAddress
	if vm.GuestHostName != "" {
		out = append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: vm.GuestHostName})
	}
	var all []candidate
	for _, nic := range vm.NICs {
		if nic.DeviceConfigID == -1 {
			continue
		}
		for _, s := range nic.IPs {
			ip, err := netip.ParseAddr(s)
			if err != nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
				ip.IsMulticast() || ip.IsUnspecified() {
				continue
			}
			all = append(all, candidate{ip: ip.Unmap(), network: nic.Network})
		}
	}
	add := func(t v1.NodeAddressType, c *candidate) {
		a := v1.NodeAddress{Type: t, Address: c.ip.String()}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, fam := range families {
		var ofFamily []candidate
		for _, c := range all {
			if (fam == config.IPv4) == c.ip.Is4() {
				ofFamily = append(ofFamily, c)
			}
		}
		if len(ofFamily) == 0 {
			continue
		}
		internal := pickAddress(ofFamily, rules.ExcludeInternalSubnets, rules.InternalSubnets, rules.InternalNetworkName)
		external := pickAddress(ofFamily, rules.ExcludeExternalSubnets, rules.ExternalSubnets, rules.ExternalNetworkName)
		if internal == nil && external == nil {
			// No rule selected anything: the first IP not excluded by either.
			for i, c := range ofFamily {
				if !inAny(c.ip, rules.ExcludeInternalSubnets) && !inAny(c.ip, rules.ExcludeExternalSubnets) {
					internal, external = &ofFamily[i], &ofFamily[i]
					break
				}
			}
		}
		if internal == nil && external == nil {
			return nil, fmt.Errorf("vm %q: no usable %s address: every guest IP of that family is excluded", vm.Name, fam)
		}
		if internal != nil {
			add(v1.NodeInternalIP, internal)
		}
		if external != nil {
			add(v1.NodeExternalIP, external)
		}
	}
	return out, nil
}

// pickAddress returns the first candidate outside exclude that is in one of
// subnets, else the first on a VM network named network.
func pickAddress(cands []candidate, exclude, subnets []netip.Prefix, network string) *candidate {
	for i, c := range cands {
		if !inAny(c.ip, exclude) && inAny(c.ip, subnets) {
			return &cands[i]
		}
	}
	if network == "" {
		return nil
	}
	for i, c := range cands {
		if !inAny(c.ip, exclude) && strings.EqualFold(c.network, network) {
			return &cands[i]
		}
	}
	return nil
}

func inAny(ip netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
