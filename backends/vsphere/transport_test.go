package vsphere

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// Large responses (what the inventory's initial load reads) leave their
// connection to be reused: one TLS connection serves them all, where
// govmomi alone opens a new one for each.
func TestLargeResponsesReuseTheirConnection(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1, MachinesPerPool: 50})
	b := New(optionsVia(vc, p.Host(), p.Port(), 10*time.Second))
	b.Start()
	ctx := ctxFor(t)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	cur, err := b.sessions.current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := cur.vim
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

// flakyOnce fails every other call with a temporary network error.
type flakyOnce struct{ calls int }

func (f *flakyOnce) RoundTrip(context.Context, soap.HasFault, soap.HasFault) error {
	f.calls++
	if f.calls%2 == 1 {
		return &url.Error{Op: "Post", URL: "https://vc/sdk", Err: context.DeadlineExceeded} // Temporary()
	}
	return nil
}

// Every request gets its own retries, for the client's whole life: a
// transient error on the hundredth request is retried like on the first.
func TestRetriesArePerRequest(t *testing.T) {
	f := &flakyOnce{}
	rt := withRetries(f, 3)
	for i := range 100 {
		if err := rt.RoundTrip(context.Background(), nil, nil); err != nil {
			t.Fatalf("request %d failed after a single transient error: %v", i+1, err)
		}
	}
	if f.calls != 200 {
		t.Fatalf("%d attempts for 100 requests, each failing once: want 200", f.calls)
	}
	if withRetries(f, 1) != soap.RoundTripper(f) {
		t.Fatal("soapRoundtripCount 1 must mean no retry")
	}
}
