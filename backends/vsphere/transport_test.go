package vsphere

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// Large responses (what the inventory's initial load reads) leave their
// connection to be reused: one TLS connection serves them all, where
// govmomi alone opens a new one for each.
func TestLargeResponsesReuseTheirConnection(t *testing.T) {
	f, err := vcsim.Start(vcsim.Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 50})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	vc := f.VCenters[0]
	p, err := vcsim.NewProxy(vc.Host, fmt.Sprintf("%s:%d", vc.Host, vc.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	b := New(Options{
		Config: config.VCenterConfig{Name: vc.Name, Server: p.Host(), Port: p.Port(), InsecureFlag: true,
			RoundTripCount: 1, RequestTimeout: 10 * time.Second},
		Credentials: credentials.Static{User: vc.User, Password: config.Password(vc.Password)},
	})
	ctx := ctxFor(t)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	c, err := b.sessions.client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := view.NewManager(c).CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	if err != nil {
		t.Fatal(err)
	}
	const reads = 10
	for range reads {
		var vms []mo.VirtualMachine
		if err := v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "config.uuid", "guest.net"}, &vms); err != nil {
			t.Fatal(err)
		}
		if len(vms) != len(vc.VMs) {
			t.Fatalf("read %d VMs, want %d", len(vms), len(vc.VMs))
		}
	}
	// The tagging service's JSON answers too (the REST client reads them
	// to the end itself and shares the SOAP client's connection pool).
	rc, err := b.sessions.restClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refs := make([]mo.Reference, 0, len(vc.VMs))
	for _, vm := range vc.VMs {
		refs = append(refs, types.ManagedObjectReference{Type: "VirtualMachine", Value: vm.Ref})
	}
	for range reads {
		if _, err := tags.NewManager(rc).GetAttachedTagsOnObjects(ctx, refs); err != nil {
			t.Fatal(err)
		}
	}
	tr := p.Traffic()
	t.Logf("%d reads of %d VMs, SOAP and REST: %+v", reads, len(vc.VMs), tr)
	if tr.Connections != 1 {
		t.Errorf("%d connections for %d sequential requests, want 1", tr.Connections, tr.Requests)
	}
}
