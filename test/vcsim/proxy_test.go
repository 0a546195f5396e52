package vcsim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
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

// TestHangTLS checks the HangTLS mode against a TLS server: a new
// connection's handshake never completes (its ClientHello is read and
// counted, nothing is answered), while a connection opened before the
// switch keeps working; Refuse drops the held connection.
func TestHangTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	p, err := NewProxy("127.0.0.1", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	addr := net.JoinHostPort(p.Host(), strconv.Itoa(p.Port()))
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	get := func() error {
		res, err := client.Get("https://" + addr + "/")
		if err != nil {
			return err
		}
		defer res.Body.Close()
		_, err = io.Copy(io.Discard, res.Body)
		return err
	}
	if err := get(); err != nil {
		t.Fatalf("through the proxy in Pass mode: %v", err)
	}
	if err := p.SetMode(HangTLS); err != nil {
		t.Fatal(err)
	}
	// The keep-alive connection opened before the switch still works.
	before := p.Traffic()
	if err := get(); err != nil {
		t.Fatalf("an open connection after the switch to HangTLS: %v", err)
	}
	if tr := p.Traffic().Sub(before); tr.Connections != 0 || tr.Requests != 1 {
		t.Fatalf("the request after the switch used a new connection or was not answered: %+v", tr)
	}

	// A new connection: TCP is accepted, the handshake never completes.
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("HangTLS must accept TCP: %v", err)
	}
	defer raw.Close()
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = conn.HandshakeContext(ctx)
	if err == nil {
		t.Fatal("the TLS handshake completed in HangTLS mode")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("handshake: %v, want it to hang until the deadline", err)
	}
	if n := p.Traffic().HeldHandshakes; n != 1 {
		t.Fatalf("HeldHandshakes = %d, want 1", n)
	}
	if n := p.Traffic().Sub(before).Connections; n != 0 {
		t.Fatalf("HangTLS connected to the target %d times", n)
	}

	// A held connection is dropped by Refuse: the client sees it closed.
	raw2, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw2.Close()
	done := make(chan error, 1)
	go func() { done <- tls.Client(raw2, &tls.Config{InsecureSkipVerify: true}).Handshake() }()
	poll.Schedule{Every: 10 * time.Millisecond, Within: 5 * time.Second}.Until(t, "the second ClientHello to be held", func() bool {
		return p.Traffic().HeldHandshakes >= 2
	})
	if err := p.SetMode(Refuse); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a held handshake completed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Refuse did not drop the held connection")
	}
}
