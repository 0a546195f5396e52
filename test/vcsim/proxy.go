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
	// HangTLS accepts new connections, reads their first TLS record (a
	// ClientHello, counted in Traffic.HeldHandshakes) and never answers:
	// the client hangs in the TLS handshake. Unlike Blackhole it never
	// connects to the target, and connections opened before the switch
	// keep passing traffic (a vCenter whose TLS front end stopped
	// accepting sessions). A held connection stays held after a switch
	// back to Pass (its ClientHello is gone); Refuse or Close drop it.
	//
	// For a client with no connection open yet (a process started while
	// the vCenter is down) Blackhole looks the same from the client's
	// side; HangTLS also proves the hang is in the handshake.
	HangTLS
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

	// Wire counters; see Traffic.
	connections, turns, exchanges, requests, chunks, heldHandshakes atomic.Int64
}

// Traffic is what a Proxy counted on the wire since it started. The proxy
// forwards TCP (TLS passes through), so it cannot parse HTTP; it counts
// turns of the conversation instead. A client turn starts with the first
// client data of a connection, or with client data after the server has
// sent data; it is answered when the server sends data after it.
//
// Over HTTP/1.1 without pipelining (what govmomi's SOAP and REST clients
// speak) a TLS connection is one handshake turn (ClientHello; Go's TLS 1.3
// client sends its Finished with the first request) followed by one turn
// per request, and, when the client closes it, a close_notify turn. The
// server may answer that with its own close_notify before the proxy sees
// the client's end of the connection, so a turn that is one short TLS
// record (an alert; no HTTP request fits in one) never counts as answered.
// So Requests (answered turns after the first of their connection)
// is the number of HTTP requests answered, SOAP and REST alike: exactly,
// as TestTrafficCounters checks against a client-side count of a known mix
// of SOAP and REST requests over several connections (and SOAP alone
// against VCenter.SOAPCalls). It misses a request the server never
// answered (a client timeout, Blackhole), and would be wrong for a server
// that speaks first, a client that pipelines, or HTTP/2 (its control
// frames make turns of their own); none of these happen with govmomi and
// the simulator.
type Traffic struct {
	Connections int64 // accepted and connected to the target
	Turns       int64 // client turns, answered or not (handshakes and close_notify included)
	Exchanges   int64 // client turns the server answered (handshakes included, alerts not)
	Requests    int64 // Exchanges other than the first of their connection
	// Chunks are the reads of client data forwarded, each delayed by
	// SetDelay's duration: Chunks/Turns is how many delays a turn costs.
	Chunks int64
	// HeldHandshakes are the connections HangTLS accepted whose first TLS
	// record was a ClientHello, read and never answered.
	HeldHandshakes int64
}

// Sub returns t − u, for the traffic of an interval.
func (t Traffic) Sub(u Traffic) Traffic {
	return Traffic{
		Connections: t.Connections - u.Connections, Turns: t.Turns - u.Turns,
		Exchanges: t.Exchanges - u.Exchanges, Requests: t.Requests - u.Requests,
		Chunks: t.Chunks - u.Chunks, HeldHandshakes: t.HeldHandshakes - u.HeldHandshakes,
	}
}

// Open is the number of client connections open now: accepted and not
// yet closed by the client (or by Refuse or Close).
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Traffic returns the counters so far.
func (p *Proxy) Traffic() Traffic {
	return Traffic{
		Connections: p.connections.Load(), Turns: p.turns.Load(),
		Exchanges: p.exchanges.Load(), Requests: p.requests.Load(),
		Chunks: p.chunks.Load(), HeldHandshakes: p.heldHandshakes.Load(),
	}
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

// Host of the proxy's listener.
func (p *Proxy) Host() string { h, _, _ := net.SplitHostPort(p.addr); return h }

// Port of the proxy's listener.
func (p *Proxy) Port() int { _, s, _ := net.SplitHostPort(p.addr); n, _ := strconv.Atoi(s); return n }

// SetDelay delays every request by d.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// SetMode switches behaviour for new and open connections (HangTLS: for
// new ones only).
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
	if Mode(p.mode.Load()) == HangTLS {
		p.holdHandshake(client)
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	defer server.Close()
	p.connections.Add(1)
	// awaiting is set when client data is forwarded and cleared by the
	// first server data after it: one client turn, answered. Set before
	// the data is written to the server, and the server's data read before
	// it reaches the client, so an answer is never missed.
	var awaiting, alert atomic.Bool // alert: the awaiting turn is a TLS alert
	var answered int64              // turns of this connection answered, server side only
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				if awaiting.Swap(false) && !alert.Load() {
					p.exchanges.Add(1)
					if answered++; answered > 1 {
						p.requests.Add(1)
					}
				}
				if _, werr := client.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = client.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if Mode(p.mode.Load()) == Blackhole {
				continue // swallowed: the client waits for ever
			}
			p.chunks.Add(1)
			if !awaiting.Load() {
				alert.Store(isTLSAlert(buf[:n]))
				awaiting.Store(true)
				p.turns.Add(1)
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

// holdHandshake reads the client's first TLS record, counts it when it is
// a ClientHello, and then reads and discards whatever follows until the
// connection is closed (by the client, Refuse or Close): no byte is ever
// sent back.
func (p *Proxy) holdHandshake(client net.Conn) {
	const handshake, clientHello = 22, 1
	header := make([]byte, 5)
	if _, err := io.ReadFull(client, header); err != nil {
		return
	}
	body := make([]byte, int(header[3])<<8|int(header[4]))
	if _, err := io.ReadFull(client, body); err != nil {
		return
	}
	if header[0] == handshake && len(body) > 0 && body[0] == clientHello {
		p.heldHandshakes.Add(1)
	}
	_, _ = io.Copy(io.Discard, client)
}

// isTLSAlert reports whether b is exactly one TLS record short enough to
// be only an alert: 2 bytes of alert, encrypted (TLS 1.3 wraps it as
// application data with a content-type byte and a 16-byte tag; TLS 1.2
// adds up to a 16-byte nonce or MAC). An HTTP request is never this short.
func isTLSAlert(b []byte) bool {
	const header, maxAlert = 5, 2 + 1 + 16 + 16
	if len(b) < header || (b[0] != 21 && b[0] != 23) {
		return false
	}
	n := int(b[3])<<8 | int(b[4])
	return n <= maxAlert && len(b) == header+n
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
