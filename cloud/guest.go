package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/metadata"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/nodes"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/cloud/servingcert"
)

var _ servingcert.VMs = (*Cloud)(nil)

// Guest implements servingcert.VMs: node's VM found as InstanceMetadata
// finds it (its providerID first), with its guest addresses on every
// adapter and its guest host name, unless another Node holds the VM.
func (c *Cloud) Guest(ctx context.Context, node *v1.Node) (*servingcert.Guest, error) {
	const op = "cloud.Guest"
	res, err := c.instances.Locate(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
	}
	if res == nil {
		return nil, nil
	}
	if err := c.instances.CheckClaim(ctx, node, res); err != nil {
		if conflict := (*nodes.IdentityConflictError)(nil); errors.As(err, &conflict) {
			return nil, fmt.Errorf("%s: %w: %v", op, servingcert.ErrHeldByAnotherNode, err) //nolint:errorlint // the conflict is told, the kind is ErrHeldByAnotherNode
		}
		return nil, fmt.Errorf("%s: node %s: %w", op, node.Name, err)
	}
	g := &servingcert.Guest{VM: res.String(), HostName: res.VM.GuestHostName}
	var ips []string
	for _, nic := range res.VM.NICs {
		ips = append(ips, nic.IPs...)
	}
	// The addresses of guestinfo.metadata are the VM's too: a kubelet's
	// --node-ip may be one (InstanceMetadata accepts it, nodeip.go). One
	// that does not parse gives none: its IPs are not the VM's word.
	if static, err := metadata.StaticAddresses(res.VM.GuestInfoMetadata, res.VM.GuestInfoMetadataEncoding); err == nil {
		ips = append(ips, metadata.SortedStatic(static)...)
	}
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && !slices.Contains(g.IPs, a.Unmap()) {
			g.IPs = append(g.IPs, a.Unmap())
		}
	}
	return g, nil
}
