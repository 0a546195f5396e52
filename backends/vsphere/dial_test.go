package vsphere

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/backends"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/poll"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/test/vcsim"
)

// A server that accepts TCP and never answers the TLS handshake: every
// attempt to reach it gives its connection up within the request timeout.
// govmomi's own dialer (tls.Dial, no deadline) held each one for ever, so
// a dead vCenter probed once a second leaked a socket a second.
func TestHungTLSHandshakesAreAbandoned(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var accepted, closed atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						closed.Add(1) // the client gave the connection up
						return
					}
				}
			}()
		}
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	b := New(Options{
		Config:      config.VCenter{Name: "hung", Server: host, Port: p, InsecureFlag: true, RoundTripCount: 1, RequestTimeout: 200 * time.Millisecond}.WithDefaults(),
		Credentials: credentials.Static{User: "u", Password: "p"},
	})
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		if err := b.Probe(ctx); err == nil {
			t.Fatal("Probe of a server that never answers succeeded")
		}
		cancel()
	}
	if !(poll.Schedule{Every: 20 * time.Millisecond, Within: 5 * time.Second}).Holds(func() bool {
		return closed.Load() >= accepted.Load() && accepted.Load() != 0
	}) {
		t.Fatalf("%d connections accepted, %d given up by the client after 5s: hung handshakes are held", accepted.Load(), closed.Load())
	}
}

// A connection given up closes its sockets: a vCenter that refuses every
// login, probed again and again, holds no more connections open than one
// probe does, and a closed backend none. Each connect has a transport of
// its own, whose idle connection used to stay open for its idle timeout
// (90 s): one more at every probe.
func TestGivenUpConnectionsCloseTheirSockets(t *testing.T) {
	vc, p := vcsim.StartProxied(t, vcsim.Options{Datacenters: 1, MachinesPerPool: 1})
	vc.SetPassword("not what the backend logs in with")
	b := New(optionsVia(vc, p.Host(), p.Port(), 10*time.Second))
	b.Start()
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	ctx := ctxFor(t)
	const probes = 10
	for range probes {
		if err := b.Probe(ctx); !errors.Is(err, backends.ErrAuth) {
			t.Fatalf("Probe with a refused password: %v, want ErrAuth", err)
		}
	}
	if n := p.Traffic().Connections; n < probes {
		t.Fatalf("%d connections for %d probes: each probe should connect anew", n, probes)
	}
	// Sockets close asynchronously: wait for them, never for all of them
	// to stay open (that takes 90 s).
	settled := func(want int) int {
		var n int
		poll.Schedule{Every: 20 * time.Millisecond, Within: 10 * time.Second}.Holds(func() bool { n = p.Open(); return n <= want })
		return n
	}
	if n := settled(0); n > 0 {
		t.Fatalf("%d connections open after %d refused logins: want none", n, probes)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A backend that logs in (the refused credentials are never sent
	// again by b, so another one does) and is closed leaves nothing open.
	vc.SetPassword(vc.Password)
	served := New(optionsVia(vc, p.Host(), p.Port(), 10*time.Second))
	served.Start()
	t.Cleanup(func() { _ = served.Close(context.Background()) })
	if err := served.Probe(ctx); err != nil {
		t.Fatalf("Probe with the password accepted: %v", err)
	}
	if n := p.Open(); n == 0 {
		t.Fatal("no connection open while logged in: the proxy does not see the backend")
	}
	if err := served.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := settled(0); n > 0 {
		t.Fatalf("%d connections open after Close: want none", n)
	}
}
