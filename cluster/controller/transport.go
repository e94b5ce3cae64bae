package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// One cluster port carries two protocols, told apart by the first byte a
// client sends on a new connection (as Consul and Nomad multiplex their
// RPC port): Raft's own RPCs (hashicorp/raft's NetworkTransport) and the
// controller RPC that forwards writes to the active controller (rpc.go).
const (
	muxRaft byte = 'R'
	muxRPC  byte = 'C'
)

// muxHandshakeTimeout bounds the wait for a new connection's first byte,
// so a client that connects and says nothing does not hold a goroutine.
const muxHandshakeTimeout = 5 * time.Second

// mux accepts connections on the cluster listener and routes each by its
// first byte: Raft connections to the stream layer's Accept, controller
// RPC connections to serveRPC (one goroutine each, closed on Close).
type mux struct {
	ln       net.Listener
	dial     dialFunc // to the peers' cluster ports
	logger   *slog.Logger
	serveRPC func(net.Conn)

	raftConns chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool // controller RPC connections being served
	// rconns are Raft's connections, both ways; once aborted no new ones
	// are made (abortRaft).
	rconns  map[*raftConn]bool
	aborted bool
}

// raftConn is a Raft connection the mux can close under Raft: a peer that
// is stopped (SIGSTOP) or cut off answers nothing, and Raft's shutdown
// would wait for its RPC to time out.
type raftConn struct {
	net.Conn
	m *mux
}

func (c *raftConn) Close() error {
	c.m.mu.Lock()
	delete(c.m.rconns, c)
	c.m.mu.Unlock()
	return c.Conn.Close()
}

// trackRaft wraps conn as a raftConn, or closes it if Raft's connections
// are being torn down.
func (m *mux) trackRaft(conn net.Conn) (*raftConn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.aborted {
		_ = conn.Close()
		return nil, net.ErrClosed
	}
	rc := &raftConn{Conn: conn, m: m}
	m.rconns[rc] = true
	return rc, nil
}

// abortRaft closes every Raft connection and refuses new ones, so RPCs
// in flight (to a peer that answers nothing) fail now and Raft can shut
// down without waiting for their timeouts.
func (m *mux) abortRaft() {
	m.mu.Lock()
	m.aborted = true
	conns := make([]*raftConn, 0, len(m.rconns))
	for c := range m.rconns {
		conns = append(conns, c)
	}
	m.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// dialFunc connects to a cluster port (Options.ClusterDial).
type dialFunc func(ctx context.Context, addr string) (net.Conn, error)

// dialTCP is the default dialFunc.
func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func newMux(ln net.Listener, dial dialFunc, logger *slog.Logger) *mux {
	if dial == nil {
		dial = dialTCP
	}
	return &mux{ln: ln, dial: dial, logger: logger, raftConns: make(chan net.Conn),
		closed: make(chan struct{}), conns: map[net.Conn]bool{}, rconns: map[*raftConn]bool{}}
}

// start accepts connections until Close; serveRPC serves one controller
// RPC connection until it ends.
func (m *mux) start(serveRPC func(net.Conn)) {
	m.serveRPC = serveRPC
	m.wg.Add(1)
	go m.acceptLoop()
}

func (m *mux) acceptLoop() {
	defer m.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				m.logger.Error("cluster listener closed under the controller", "err", err)
				return
			}
			// Out of file descriptors and the like: retry, slower.
			m.logger.Warn("cluster listener accept failed; retrying", "err", err)
			select {
			case <-time.After(backoff):
			case <-m.closed:
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		m.wg.Add(1)
		go m.route(conn)
	}
}

func (m *mux) route(conn net.Conn) {
	defer m.wg.Done()
	var b [1]byte
	_ = conn.SetReadDeadline(time.Now().Add(muxHandshakeTimeout))
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		// On a TLS cluster port this read runs the handshake: a peer
		// without a certificate the CA verifies ends here.
		m.logger.Debug("cluster port: no protocol byte; closing", "remote", conn.RemoteAddr(), "err", err)
		_ = conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	switch b[0] {
	case muxRaft:
		rc, err := m.trackRaft(conn)
		if err != nil {
			return
		}
		select {
		case m.raftConns <- rc:
		case <-m.closed:
			_ = rc.Close()
		}
	case muxRPC:
		if !m.track(conn) {
			_ = conn.Close()
			return
		}
		defer m.untrack(conn)
		m.serveRPC(conn)
	default:
		m.logger.Debug("cluster port: unknown protocol; closing", "remote", conn.RemoteAddr(), "first_byte", b[0])
		_ = conn.Close()
	}
}

func (m *mux) track(conn net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.closed:
		return false
	default:
	}
	m.conns[conn] = true
	return true
}

func (m *mux) untrack(conn net.Conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conns, conn)
	_ = conn.Close()
}

// Close closes the listener and every connection and waits for the
// mux's goroutines.
func (m *mux) Close() error {
	var err error
	m.closeOnce.Do(func() {
		m.abortRaft()
		m.mu.Lock()
		close(m.closed)
		for c := range m.conns {
			_ = c.Close()
		}
		m.mu.Unlock()
		if cerr := m.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = fmt.Errorf("close cluster listener: %w", cerr)
		}
		m.wg.Wait()
	})
	return err
}

// streamLayer is the raft.StreamLayer over the mux. Its Addr is this
// node's --peers address, not the listener's: Raft tells followers the
// leader's address from it, and a proxy may sit in front of the listener.
type streamLayer struct {
	m    *mux
	addr net.Addr
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.m.raftConns:
		return c, nil
	case <-s.m.closed:
		return nil, net.ErrClosed
	}
}

func (s *streamLayer) Close() error   { return s.m.Close() }
func (s *streamLayer) Addr() net.Addr { return s.addr }

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := dialCluster(ctx, s.m.dial, string(addr), muxRaft)
	if err != nil {
		return nil, err
	}
	return s.m.trackRaft(conn)
}

// dialCluster connects to a cluster port and says which protocol follows.
func dialCluster(ctx context.Context, dial dialFunc, addr string, proto byte) (net.Conn, error) {
	conn, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetWriteDeadline(dl)
	}
	if _, err := conn.Write([]byte{proto}); err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return conn, nil
}

// peerAddr is a --peers address as a net.Addr.
type peerAddr string

func (a peerAddr) Network() string { return "tcp" }
func (a peerAddr) String() string  { return string(a) }
