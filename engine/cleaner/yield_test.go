package cleaner

import (
	"net"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestYieldPollsTheNetwork: on one processor, a goroutine that only
// computes and yields lets a goroutine whose connection became readable
// run at its next yield. runtime.Gosched would not (the scheduler serves
// its run queues before it polls the network, and the runtime's monitor
// polls it only every 10 ms: thousands of yields later), nor would a
// yielder that does nothing.
func TestYieldPollsTheNetwork(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	server, err := ln.Accept()
	require.NoError(t, err)
	defer server.Close()

	var got atomic.Int32
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		var b [1]byte
		for {
			if _, err := server.Read(b[:]); err != nil {
				return
			}
			got.Add(1)
		}
	}()

	y := newYielder(0) // every call yields
	defer y.Close()
	for round := int32(1); round <= 20; round++ {
		y.Yield() // the reader is parked on the network poller by now
		_, err := client.Write([]byte{1})
		require.NoError(t, err)
		// The byte is readable at once (loopback): the reader must have
		// run within two yields (one if it comes first off the poller).
		yields := 0
		for got.Load() < round {
			require.Less(t, yields, 2, "round %d: the reader did not run", round)
			y.Yield()
			yields++
		}
	}
	server.Close()
	<-readerDone
}

// A yielder within its quantum does nothing, and one that never yielded
// holds no pipe.
func TestYieldQuantum(t *testing.T) {
	y := newYielder(1 << 62)
	for range 1000 {
		y.Yield()
	}
	require.Nil(t, y.r, "no pipe before the first yield")
	y.Close()

	y = newYielder(0)
	y.Yield()
	require.NotNil(t, y.r)
	y.Close()
	require.Error(t, func() error { _, err := y.r.Read(make([]byte, 1)); return err }(), "closed with the yielder")
}

func BenchmarkYield(b *testing.B) {
	y := newYielder(0)
	defer y.Close()
	for b.Loop() {
		y.Yield()
	}
}
