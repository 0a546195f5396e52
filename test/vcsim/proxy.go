package vcsim

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is how a Proxy treats traffic.
type Mode int32

const (
	// Pass forwards traffic (after Delay, when set).
	Pass Mode = iota
	// Blackhole accepts connections and swallows requests: a vCenter that
	// never answers.
	Blackhole
	// Refuse closes the listener: connections are refused.
	Refuse
)

// Proxy is a loopback TCP proxy in front of a simulated vCenter, to make it
// slow, silent or unreachable without touching the simulator.
type Proxy struct {
	addr   string
	target string
	mode   atomic.Int32
	delay  atomic.Int64 // per forwarded client chunk

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
}

// NewProxy listens on listenHost (a free port) and forwards to target.
func NewProxy(listenHost, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(listenHost, "0"))
	if err != nil {
		return nil, err
	}
	p := &Proxy{addr: ln.Addr().String(), target: target, conns: map[net.Conn]struct{}{}}
	p.ln = ln
	go p.serve(ln)
	return p, nil
}

// Host and Port of the proxy's listener.
func (p *Proxy) Host() string { h, _, _ := net.SplitHostPort(p.addr); return h }
func (p *Proxy) Port() int    { _, s, _ := net.SplitHostPort(p.addr); n, _ := strconv.Atoi(s); return n }

// SetDelay delays every request by d.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// SetMode switches behaviour for new and open connections.
func (p *Proxy) SetMode(m Mode) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode.Store(int32(m))
	switch {
	case m == Refuse && p.ln != nil:
		err := p.ln.Close()
		p.ln = nil
		for c := range p.conns {
			_ = c.Close()
		}
		return err
	case m != Refuse && p.ln == nil && !p.closed:
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			return err
		}
		p.ln = ln
		go p.serve(ln)
	}
	return nil
}

func (p *Proxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		go p.handle(c)
	}
}

func (p *Proxy) handle(client net.Conn) {
	defer func() {
		_ = client.Close()
		p.mu.Lock()
		delete(p.conns, client)
		p.mu.Unlock()
	}()
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		_, _ = io.Copy(client, server)
		_ = client.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if Mode(p.mode.Load()) == Blackhole {
				continue // swallowed: the client waits for ever
			}
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d)
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Close stops the proxy and drops its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

// CountRequests returns a transport wrapper (for vsphere.Options.WrapTransport)
// that counts the HTTP requests sent to a vCenter into n.
func CountRequests(n *atomic.Int64) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			return next.RoundTrip(r)
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
