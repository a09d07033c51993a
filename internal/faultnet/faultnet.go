package faultnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DialTimeout bounds each connection the proxy opens to its target.
const DialTimeout = 5 * time.Second

// bufSize is the largest chunk one read moves through the proxy.
const bufSize = 32 << 10

// Proxy forwards TCP connections from a loopback address to a target and
// injects faults on command. Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	ctx    context.Context // ends dials in progress on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	accepted    atomic.Int64
	repliesLost atomic.Int64

	mu       sync.Mutex
	target   string
	gate     chan struct{} // closed while bytes may flow; open while black-holed
	holed    bool
	refusing bool
	delay    time.Duration
	conns    map[*pair]struct{}
	closed   bool
}

// pair is one proxied connection: the client's side and, once dialled,
// the target's.
type pair struct {
	client net.Conn
	done   chan struct{} // closed when the pair is closed
	// loseReply makes the next bytes from the target vanish and the pair
	// close: see [Proxy.LoseReplies].
	loseReply atomic.Bool

	mu     sync.Mutex
	server net.Conn
	closed bool
}

func (pr *pair) close() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return
	}
	pr.closed = true
	close(pr.done)
	_ = pr.client.Close() // Closing is the point; its error says nothing useful.
	if pr.server != nil {
		_ = pr.server.Close()
	}
}

// connect attaches the target's side, or closes it when the pair was
// closed while it was being dialled. It reports whether the pair is open.
func (pr *pair) connect(s net.Conn) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		_ = s.Close() // Nobody is left to talk to.
		return false
	}
	pr.server = s
	return true
}

// Listen starts a proxy on 127.0.0.1 with a port of the kernel's choosing,
// forwarding every connection to target (host:port). Connections to the
// target are opened when a client connects, each within [DialTimeout]; a
// client whose target cannot be reached is disconnected.
func Listen(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("faultnet: target %q is not host:port: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultnet: listen on loopback: %w", err)
	}
	gate := make(chan struct{})
	close(gate)
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		ln:     ln,
		target: target,
		ctx:    ctx,
		cancel: cancel,
		gate:   gate,
		conns:  make(map[*pair]struct{}),
	}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr returns the proxy's address, host:port, to give to clients.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards new connections to.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// Retarget forwards the connections accepted from now on to target
// (host:port), as a virtual address moved to another server does after a
// failover; connections open now stay with the old target until they end
// or are [Proxy.Cut]. A target that is not host:port is refused, and
// nothing changes.
func (p *Proxy) Retarget(target string) error {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return fmt.Errorf("faultnet: target %q is not host:port: %w", target, err)
	}
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
	return nil
}

// Accepted returns how many connections the proxy has accepted so far,
// refused ones included.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// RepliesLost returns how many replies [Proxy.LoseReplies] has dropped so
// far.
func (p *Proxy) RepliesLost() int64 { return p.repliesLost.Load() }

// Conns returns how many proxied connections are open now.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// BlackHole stops forwarding: open and new connections stay open, and every
// byte they send is held until [Proxy.Restore].
func (p *Proxy) BlackHole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.holed {
		p.holed = true
		p.gate = make(chan struct{})
	}
}

// Refuse makes the proxy close every new connection as soon as it is
// accepted, until [Proxy.Restore]. Open connections are left alone.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = true
}

// Restore ends [Proxy.BlackHole] and [Proxy.Refuse]: held bytes are
// forwarded in order and new connections are accepted again. The delay set
// with [Proxy.SetDelay] stays.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = false
	if p.holed {
		p.holed = false
		close(p.gate)
	}
}

// SetDelay holds every chunk of bytes for d before forwarding it, in both
// directions, from now on. Zero turns the delay off; a negative d is
// treated as zero.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = max(d, 0)
}

// LoseReplies arms every connection open now: the next bytes its target
// sends are discarded, and the connection is then closed in both
// directions. A request the client sends meanwhile reaches the target and
// is carried out; the client never learns its outcome, as when a server
// commits and the network loses its reply. Connections opened later are
// not affected; an armed connection that stays idle stays armed until it
// is used or closed.
func (p *Proxy) LoseReplies() {
	for _, pr := range p.snapshot() {
		pr.loseReply.Store(true)
	}
}

// Cut closes every connection the proxy has accepted, both sides, at once
// (a connection still waiting in the kernel's backlog is not yet accepted). New connections
// are forwarded as before (unless the proxy refuses or black-holes them).
func (p *Proxy) Cut() {
	for _, pr := range p.snapshot() {
		pr.close()
	}
}

// Close stops accepting, closes every connection and waits for every
// goroutine the proxy started. A second Close does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	if already {
		return nil
	}
	p.cancel()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("faultnet: close listener: %w", err)
	}
	return nil
}

func (p *Proxy) snapshot() []*pair {
	p.mu.Lock()
	defer p.mu.Unlock()
	prs := make([]*pair, 0, len(p.conns))
	for pr := range p.conns {
		prs = append(prs, pr)
	}
	return prs
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			// The listener is loopback and ours: its only failures are
			// Close and exhausted resources, and neither gets better by
			// spinning here.
			return
		}
		p.accepted.Add(1)
		pr := &pair{client: c, done: make(chan struct{})}
		p.mu.Lock()
		drop := p.closed || p.refusing
		if !drop {
			p.conns[pr] = struct{}{}
		}
		p.mu.Unlock()
		if drop {
			_ = c.Close() // Refusing is the point.
			continue
		}
		p.wg.Go(func() { p.serve(pr) })
	}
}

// serve connects pr's client to the target and forwards both ways until
// either side closes or the pair is cut.
func (p *Proxy) serve(pr *pair) {
	defer func() {
		pr.close()
		p.mu.Lock()
		delete(p.conns, pr)
		p.mu.Unlock()
	}()
	d := net.Dialer{Timeout: DialTimeout}
	s, err := d.DialContext(p.ctx, "tcp", p.Target())
	if err != nil {
		return // The client sees the target's absence as a closed connection.
	}
	if !pr.connect(s) {
		return
	}
	var both sync.WaitGroup
	both.Go(func() { p.pump(pr, s, pr.client, false) })
	p.pump(pr, pr.client, s, true)
	both.Wait()
}

// pump copies src to dst through the gate and the delay; reply says that
// src is the target. On a clean end of src it half-closes dst, so
// protocols that finish by shutting down one direction still work; on any
// error it closes the pair.
func (p *Proxy) pump(pr *pair, dst, src net.Conn, reply bool) {
	buf := make([]byte, bufSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if reply && pr.loseReply.Load() {
				p.repliesLost.Add(1)
				pr.close()
				return
			}
			if !p.hold(pr) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				pr.close()
				return
			}
		}
		if errors.Is(err, io.EOF) {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite() // Best effort: the pair is closed when both pumps end.
			}
			return
		}
		if err != nil {
			pr.close()
			return
		}
	}
}

// hold waits until bytes may flow and the delay has passed. It reports
// false when the pair was closed meanwhile.
func (p *Proxy) hold(pr *pair) bool {
	for {
		p.mu.Lock()
		gate, delay := p.gate, p.delay
		p.mu.Unlock()
		select {
		case <-gate:
		case <-pr.done:
			return false
		}
		if delay <= 0 {
			return true
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-pr.done:
			t.Stop()
			return false
		}
		p.mu.Lock()
		holed := p.holed
		p.mu.Unlock()
		if !holed {
			return true
		}
	}
}
