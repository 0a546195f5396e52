package vsphere

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config"
	"github.com/vsphere-federated-ccm/vsphere-federated-ccm/config/credentials"
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
		Config:      config.VCenter{Name: "hung", Server: host, Port: p, InsecureFlag: true, RoundTripCount: 1, RequestTimeout: 200 * time.Millisecond},
		Credentials: credentials.Static{User: "u", Password: "p"},
	})
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		if err := b.Probe(ctx); err == nil {
			t.Fatal("Probe of a server that never answers succeeded")
		}
		cancel()
	}
	deadline := time.Now().Add(5 * time.Second)
	for closed.Load() < accepted.Load() || accepted.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections accepted, %d given up by the client after 5s: hung handshakes are held", accepted.Load(), closed.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
