package faultproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echoServer answers every connection by echoing it and counts the bytes it
// received, so a test can tell that a blackhole passed nothing.
type echoServer struct {
	ln       net.Listener
	received atomic.Int64
}

func newEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &echoServer{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					e.received.Add(int64(n))
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return e
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New("127.0.0.1:0", target)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err := c.Write([]byte(msg))
	require.NoError(t, err)
	buf := make([]byte, len(msg))
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	require.Equal(t, msg, string(buf))
}

// silent checks that nothing comes back on c for a while and that c is not
// closed either: a blackhole. (A quiet link can only be observed over time;
// the wait can make this pass wrongly, never fail wrongly.)
func silent(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	n, err := c.Read(make([]byte, 16))
	require.Zero(t, n)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "a blackhole neither answers nor closes")
}

// cut checks that c was closed or reset by the proxy.
func cut(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := c.Read(make([]byte, 16))
	require.Error(t, err)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "connection should be closed, not silent")
}

// refused checks that a new connection to addr fails: at connect, or at
// the first read.
func refused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer c.Close()
	cut(t, c)
}

func TestPassForwardsBothWays(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	require.Equal(t, Pass, p.Mode())
	c := dial(t, p.Addr())
	roundTrip(t, c, "hello")
	roundTrip(t, c, "again")
}

func TestBlackholeFreezesOldAndNewConnections(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	old := dial(t, p.Addr())
	roundTrip(t, old, "before")
	before := e.received.Load()

	p.SetMode(Blackhole)
	_, err := old.Write([]byte("swallowed"))
	require.NoError(t, err)
	silent(t, old)

	fresh := dial(t, p.Addr()) // accepted: the nasty case
	_, err = fresh.Write([]byte("into the void"))
	require.NoError(t, err)
	silent(t, fresh)
	require.Equal(t, before, e.received.Load(), "the target received nothing during the blackhole")

	// Heal: what the blackhole held is closed, new connections pass, and
	// the swallowed bytes never arrive.
	p.SetMode(Pass)
	cut(t, old)
	cut(t, fresh)
	roundTrip(t, dial(t, p.Addr()), "after")
	require.Equal(t, before+int64(len("after")), e.received.Load())
}

func TestRefuseResetsConnections(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	old := dial(t, p.Addr())
	roundTrip(t, old, "before")

	p.SetMode(Refuse)
	cut(t, old)
	refused(t, p.Addr())

	p.SetMode(Pass)
	roundTrip(t, dial(t, p.Addr()), "healed")
}

func TestRefuseAfterBlackholeClosesTheHeld(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	roundTrip(t, c, "x")
	p.SetMode(Blackhole)
	silent(t, c)
	p.SetMode(Refuse)
	cut(t, c)
}

func TestTargetDownLooksLikeRefusal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	target := ln.Addr().String()
	require.NoError(t, ln.Close())
	p := newProxy(t, target)
	refused(t, p.Addr())
}

func TestHalfCloseIsPassedOn(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr()).(*net.TCPConn)
	_, err := c.Write([]byte("ping"))
	require.NoError(t, err)
	require.NoError(t, c.CloseWrite())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Equal(t, "ping", string(got))
}

func TestCloseEndsEverything(t *testing.T) {
	e := newEcho(t)
	p, err := New("127.0.0.1:0", e.ln.Addr().String())
	require.NoError(t, err)
	a := dial(t, p.Addr())
	roundTrip(t, a, "a")
	p.SetMode(Blackhole)
	b := dial(t, p.Addr())
	silent(t, b)
	require.NoError(t, p.Close()) // waits for every goroutine
	cut(t, a)
	cut(t, b)
	_, err = net.Dial("tcp", p.Addr())
	require.Error(t, err, "a closed proxy no longer listens")
}
