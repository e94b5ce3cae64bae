package kafka

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// memBudget bounds bytes held at once: request frames being received or
// handled, or fetched record data waiting to be written. Unlike a FIFO
// semaphore, a waiter that fits goes ahead of a larger one that does not,
// so one big reservation never holds back small requests behind it (a
// large waiter can be passed over while small ones keep fitting; each
// connection has a bounded number of requests in flight, so it is not
// starved for long). A reservation larger than the whole budget is granted
// when nothing else is held. Callers never wait while holding part of a
// reservation (see conn.readFrame), so waiters cannot block each other for
// good.
type memBudget struct {
	mu    sync.Mutex
	limit int64 // fixed at creation
	used  int64
	peak  int64         // most held since the last takePeak
	freed chan struct{} // closed at the next release; nil until someone waits
}

func newMemBudget(limit int64) *memBudget {
	return &memBudget{limit: limit}
}

// acquire takes n bytes, waiting until they fit, ctx ends or abort is
// closed (nil: never).
func (b *memBudget) acquire(ctx context.Context, abort <-chan struct{}, n int64) error {
	for {
		b.mu.Lock()
		if b.used+n <= b.limit || b.used == 0 {
			b.used += n
			b.peak = max(b.peak, b.used)
			b.mu.Unlock()
			return nil
		}
		ch := b.freedLocked()
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-abort:
			return errDraining
		}
	}
}

// tryAcquire takes n bytes if they fit now.
func (b *memBudget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit && b.used != 0 {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

// tryUpTo takes as much of n as is free now, without waiting, and returns
// how much it took.
func (b *memBudget) tryUpTo(n int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := min(n, max(b.limit-b.used, 0))
	b.used += g
	b.peak = max(b.peak, b.used)
	return g
}

// force takes n bytes whether they fit or not (the first batch of a fetch
// is always returned, as in Kafka, even past every limit).
func (b *memBudget) force(n int64) {
	b.mu.Lock()
	b.used += n
	b.peak = max(b.peak, b.used)
	b.mu.Unlock()
}

// releaseQuiet gives back n bytes without waking waiters: for room taken
// and returned within one pass of a parked fetch, which frees nothing that
// was not free when the pass began. Waking the other parked fetches for it
// would have them wake each other, pass after pass, until MaxWait.
func (b *memBudget) releaseQuiet(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// release gives back n bytes and wakes every waiter.
func (b *memBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	b.mu.Unlock()
}

// inUse is how many bytes are held.
func (b *memBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// released returns a channel closed at the next release, for waiting on
// room alongside other events.
func (b *memBudget) released() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.freedLocked()
}

func (b *memBudget) freedLocked() chan struct{} {
	if b.freed == nil {
		b.freed = make(chan struct{})
	}
	return b.freed
}

// takePeak returns the most bytes held since the last call, and the bytes
// held now, and starts a new peak.
func (b *memBudget) takePeak() (peak, now int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	peak, now = b.peak, b.used
	b.peak = b.used
	return peak, now
}

// Reclaiming memory after a spike. A burst of large requests or replies
// leaves the heap grown, and Go returns it to the system only gradually;
// buffer pools keep big buffers alive until two garbage collections, which
// an idle broker may not run for minutes. Once a spike is over, the server
// collects twice and hands the free memory back at once.
const (
	reclaimInterval  = 5 * time.Second
	reclaimAfterPeak = 32 << 20 // spikes smaller than this are left to the runtime
	reclaimWhenBelow = 16 << 20 // and memory is reclaimed only once the spike has passed
)

// spikeWatch decides, once per interval, whether a spike in the budgets
// is over. It has no clock: reclaimAfterSpikes calls over every interval.
type spikeWatch struct {
	budgets []*memBudget
	spiked  bool
}

// over reports whether the interval that just ended was the first one
// below a spike: memory should be reclaimed now. An interval whose peak
// reached reclaimAfterPeak (steady large traffic, which reuses the memory)
// keeps waiting; small peaks never start a wait.
func (w *spikeWatch) over() bool {
	var peak, now int64
	for _, b := range w.budgets {
		p, n := b.takePeak()
		peak, now = max(peak, p), now+n
	}
	switch {
	case peak >= reclaimAfterPeak:
		w.spiked = true
	case w.spiked && now < reclaimWhenBelow:
		w.spiked = false
		return true
	}
	return false
}

func reclaimAfterSpikes(stop <-chan struct{}, interval time.Duration, reclaim func(), budgets ...*memBudget) {
	t := time.NewTicker(interval)
	defer t.Stop()
	w := spikeWatch{budgets: budgets}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if w.over() {
			reclaim()
		}
	}
}

// returnMemory collects garbage and gives free heap back to the system.
func returnMemory() {
	runtime.GC() // moves pooled buffers to the victim cache
	debug.FreeOSMemory()
}
