package vcsim

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// TestTrafficCounters checks the proxy's wire counters and the simulator's
// SOAP counts against a client-side count of the HTTP requests of a known
// workload: SOAP and REST calls on one shared transport, over several
// connections (idle connections closed midway, so close_notify turns and
// new handshakes occur).
func TestTrafficCounters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(Options{VCenters: 1, Datacenters: 1, MachinesPerPool: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vc := f.VCenters[0]
	p, err := NewProxy(vc.Host, fmt.Sprintf("%s:%d", vc.Host, vc.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	soapBefore, soapTotalBefore := vc.SOAPCalls()
	var httpRequests atomic.Int64
	count := CountRequests(&httpRequests)

	u := &url.URL{Scheme: "https", Host: fmt.Sprintf("%s:%d", p.Host(), p.Port()), Path: "/sdk",
		User: url.UserPassword(vc.User, vc.Password)}
	c, err := govmomi.NewClient(ctx, u, true) // RetrieveServiceContent and Login: not counted client-side
	if err != nil {
		t.Fatal(err)
	}
	const uncounted = 2
	c.Client.Client.Client.Transport = count(c.Client.Client.Client.Transport)
	rc := rest.NewClient(c.Client)
	rc.Client.Client.Transport = count(rc.Client.Client.Transport)
	if err := rc.Login(ctx, u.User); err != nil {
		t.Fatal(err)
	}
	tm := tags.NewManager(rc)
	si := object.NewSearchIndex(c.Client)
	vm := vc.VMs[0]
	for i := range 60 {
		if _, err := si.FindAllByUuid(ctx, nil, vm.UUID, true, types.NewBool(false)); err != nil {
			t.Fatal(err)
		}
		var o mo.VirtualMachine
		ref := types.ManagedObjectReference{Type: "VirtualMachine", Value: vm.Ref}
		if err := c.RetrieveOne(ctx, ref, []string{"name", "config.uuid"}, &o); err != nil {
			t.Fatal(err)
		}
		if _, err := tm.ListCategories(ctx); err != nil {
			t.Fatal(err)
		}
		if i%20 == 19 {
			// New connections from here on: the closed ones end with a
			// close_notify turn that must not count as a request.
			c.Client.Client.CloseIdleConnections()
		}
	}
	if err := rc.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	c.Client.Client.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond) // the last close_notify reaches the proxy

	soapAfter, soapTotalAfter := vc.SOAPCalls()
	tr := p.Traffic()
	want := httpRequests.Load() + uncounted
	t.Logf("traffic %+v; HTTP requests %d; SOAP calls %d (FindAllByUuid %d, RetrieveProperties(Ex) %d)", tr, want,
		soapTotalAfter-soapTotalBefore, soapAfter["FindAllByUuid"]-soapBefore["FindAllByUuid"],
		soapAfter["RetrieveProperties"]+soapAfter["RetrievePropertiesEx"]-soapBefore["RetrieveProperties"]-soapBefore["RetrievePropertiesEx"])
	if tr.Requests != want {
		t.Errorf("proxy counted %d requests, the client sent %d", tr.Requests, want)
	}
	if tr.Connections < 4 {
		t.Errorf("%d connections: the workload should have used at least 4", tr.Connections)
	}
	if got := soapAfter["FindAllByUuid"] - soapBefore["FindAllByUuid"]; got != 60 {
		t.Errorf("SOAP FindAllByUuid counted %d, want 60", got)
	}
	// The REST calls are the rest: login, 60 lists, logout.
	if soap, rest := soapTotalAfter-soapTotalBefore, int64(1+60+1); soap != want-rest {
		t.Errorf("SOAP calls %d, want %d HTTP requests − %d REST requests", soap, want, rest)
	}
}
