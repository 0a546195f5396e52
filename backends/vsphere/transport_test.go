package vsphere

import (
	"context"
	"testing"
	"time"

	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// Large responses (what the inventory's initial load reads) leave their
// connection to be reused: one TLS connection serves them all, where
// govmomi alone opens a new one for each.
func TestLargeResponsesReuseTheirConnection(t *testing.T) {
	vc, p := proxiedVCenter(t, vcsim.Options{Datacenters: 1, MachinesPerPool: 50})
	b := New(optionsVia(vc, p.Host(), p.Port(), 10*time.Second))
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
