// Package faultproxy is a TCP proxy for fault-injection tests: it listens
// on 127.0.0.1, forwards every connection to one target, and can be told
// to stop doing so in one of two ways and later to heal. A proxy stands for
// one network link (node 1 → node 2's raft port, say), so a test cuts a link
// by cutting its proxy.
//
// Modes:
//   - Pass: connections are forwarded both ways.
//   - Blackhole: the nasty case of a real partition. New connections are
//     accepted but nothing passes in either direction and nothing is closed:
//     the peer sees a silent link and must notice by its own timeouts. Bytes
//     already in flight on existing connections stop moving too.
//   - Refuse: existing connections are reset and new ones are closed as soon
//     as they are accepted: what a peer sees when the other side is down.
//
// Heal (SetMode(Pass)) lets new connections through again. Connections held
// in a blackhole are closed on heal rather than resumed: a partition that
// heals does not deliver the bytes it swallowed, and the peers reconnect.
//
// Invariants: no goroutine outlives Close; a blackholed connection never
// delivers a byte; every accepted connection is closed by Close.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Mode is what a proxy does with traffic.
type Mode int

const (
	// Pass forwards connections.
	Pass Mode = iota
	// Blackhole accepts connections and forwards nothing, closing nothing.
	Blackhole
	// Refuse resets connections.
	Refuse
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Blackhole:
		return "blackhole"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Proxy forwards connections from its listener to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	mode   Mode
	conns  map[*link]struct{}
	closed bool
	// gen changes with every mode change: a link that saw an older
	// generation while blocked is closed rather than resumed.
	gen  uint64
	cond *sync.Cond

	wg sync.WaitGroup
}

// link is one proxied connection: the client side and the target side.
type link struct {
	client, server net.Conn
	gen            uint64 // generation at accept
}

// New listens on addr ("127.0.0.1:0" for a free port) and forwards to target.
func New(addr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen %s: %w", addr, err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*link]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Mode is the proxy's current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// SetMode switches the proxy. Blackhole freezes every connection; Refuse
// resets every connection; Pass (heal) closes what a blackhole held and lets
// new connections through.
func (p *Proxy) SetMode(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || m == p.mode {
		return
	}
	prev := p.mode
	p.mode, p.gen = m, p.gen+1
	if m == Refuse || (prev == Blackhole && m == Pass) {
		for l := range p.conns {
			l.close(m == Refuse)
		}
	}
	p.cond.Broadcast()
}

// Close stops listening and closes every connection. It waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for l := range p.conns {
		l.close(false)
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target for one accepted connection and pumps both ways.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	mode, gen, closed := p.mode, p.gen, p.closed
	p.mu.Unlock()
	if closed || mode == Refuse {
		resetClose(client)
		return
	}
	l := &link{client: client}
	if mode == Pass {
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			// The target is down: the client sees the link reset, as it
			// would dialling the target directly.
			resetClose(client)
			return
		}
		l.server = server
	}
	p.mu.Lock()
	if p.closed || p.gen != gen {
		// The mode changed while dialling: drop the connection rather
		// than let it slip past the new mode.
		p.mu.Unlock()
		l.close(true)
		return
	}
	l.gen = p.gen
	p.conns[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
		l.close(false)
	}()

	if l.server == nil {
		// Accepted into a blackhole: hold it, silently, until the mode
		// changes (then it is closed) or the proxy closes.
		p.mu.Lock()
		for !p.closed && p.gen == l.gen {
			p.cond.Wait()
		}
		p.mu.Unlock()
		return
	}
	done := make(chan bool, 2)
	go func() { done <- p.pump(l, l.server, l.client) }()
	go func() { done <- p.pump(l, l.client, l.server) }()
	if !<-done {
		l.close(false) // one side failed or was cut: end the other
	}
	<-done
}

// pump copies src to dst in chunks; before passing each chunk it waits while
// the proxy blackholes. A chunk read under a blackhole is never written. It
// reports whether src ended cleanly (EOF, passed on as a half-close).
func (p *Proxy) pump(l *link, dst, src net.Conn) bool {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.passable(l) {
				return false
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return false
			}
		}
		if err != nil {
			tc, ok := dst.(*net.TCPConn)
			if !errors.Is(err, io.EOF) || !ok || !p.passable(l) {
				return false
			}
			// Pass the FIN on, so a peer that closes its write side
			// and then reads the answer still works.
			return tc.CloseWrite() == nil
		}
	}
}

// passable blocks while the proxy blackholes and reports whether the bytes
// just read may be written: false once the link was cut in any way since it
// was opened (the swallowed bytes are dropped with the connection).
func (p *Proxy) passable(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && p.mode == Blackhole && p.gen == l.gen+1 {
		p.cond.Wait()
	}
	return !p.closed && p.gen == l.gen && p.mode == Pass
}

// close closes both sides; reset sends an RST instead of a FIN.
func (l *link) close(reset bool) {
	if reset {
		resetClose(l.client)
		if l.server != nil {
			resetClose(l.server)
		}
		return
	}
	_ = l.client.Close()
	if l.server != nil {
		_ = l.server.Close()
	}
}

// resetClose closes c with an RST (SO_LINGER 0), the way a refused or
// crashed peer looks.
func resetClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
