package cleaner

import (
	"os"
	"runtime"
	"time"
)

// A cleaning is CPU-bound for seconds at a time (reading from the page
// cache, decoding, hashing keys, copying), and Go shares a processor (P)
// among goroutines cooperatively: a goroutine that never blocks is preempted
// only after 10 ms, and a P looks at the network poller only when it has
// nothing else queued. On a broker with one P (pinned to one core, a
// one-CPU container) a cleaning therefore held every produce and fetch
// request back, by up to 10 ms at each step of its way through the broker,
// and the network's readiness was noticed only by the runtime's monitor,
// every 10 ms: produce at 5,000 records/s went from p50 1.9 ms to 23-37 ms
// while a cleaning ran. runtime.Gosched does not help: the yielding
// goroutine goes to the global run queue, which a P serves before it polls
// the network, so the cleaner runs again at once.
//
// yielder gives the P away after every yieldQuantum of work in a way that
// makes the scheduler poll the network: the cleaning goroutine blocks
// reading a pipe that a helper goroutine writes to once it runs. While the
// cleaner is blocked the P runs what is queued (the helper among it) and,
// its queues empty, polls the network, which returns the pipe's readiness
// with the connections' that became ready meanwhile: the cleaner is then
// one runnable goroutine among those, in turn. Where a P is free (a broker
// on several cores), the requests never waited for the cleaner, and a yield
// costs a few microseconds per quantum.
//
// A yielder is used by one goroutine (the cleaning's) and made per
// cleaning: its pipe and helper exist only once a cleaning has run for a
// quantum, and go with Close.
type yielder struct {
	quantum time.Duration
	last    time.Time // the end of the last yield (or the start)
	r, w    *os.File  // nil until the first yield; r nil after a failed os.Pipe
	kick    chan struct{}
	done    chan struct{}
	noPipe  bool
}

// yieldQuantum is how long a cleaning runs between yields: short against
// a produce request's millisecond, long against a yield's few microseconds.
const yieldQuantum = 100 * time.Microsecond

func newYielder(quantum time.Duration) *yielder {
	return &yielder{quantum: quantum, last: time.Now()}
}

// Yield returns at once within a quantum of the last yield; past it, it
// lets every goroutine that is runnable or whose connection is ready run
// first.
func (y *yielder) Yield() {
	if time.Since(y.last) < y.quantum {
		return
	}
	y.yield()
	y.last = time.Now()
}

func (y *yielder) yield() {
	if y.r == nil && !y.noPipe {
		r, w, err := os.Pipe() // non-blocking, on the network poller
		if err != nil {
			y.noPipe = true // out of descriptors: a lesser yield
		} else {
			y.r, y.w = r, w
			y.kick, y.done = make(chan struct{}), make(chan struct{})
			go y.helper()
		}
	}
	if y.noPipe {
		runtime.Gosched()
		return
	}
	y.kick <- struct{}{} // the helper runs once this goroutine blocks
	var b [1]byte
	if _, err := y.r.Read(b[:]); err != nil {
		runtime.Gosched() // the pipe was closed (helper): a lesser yield
	}
}

// helper writes one byte to the pipe per kick. It runs only when the
// cleaning goroutine has blocked (on one P), or on another P.
func (y *yielder) helper() {
	defer close(y.done)
	one := []byte{1}
	for range y.kick {
		if _, err := y.w.Write(one); err != nil {
			// Cannot happen while the read end is open; should it, the
			// reader must not wait for a byte that never comes: closed,
			// the pipe reads as EOF.
			_ = y.w.Close()
		}
	}
}

// Close ends the helper and closes the pipe.
func (y *yielder) Close() {
	if y.r == nil {
		return
	}
	close(y.kick)
	<-y.done
	_ = y.r.Close()
	_ = y.w.Close()
}
