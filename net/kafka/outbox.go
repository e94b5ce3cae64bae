package kafka

import (
	"context"
	"slices"
	"sync"
)

// outbox holds the replies a connection owes, in request order. The read
// loop reserves an entry for each request before handling it; whoever has
// the answer (the handler itself, a parked continuation, a durability
// callback) fills it; the write loop takes the filled entries at the front.
//
// The write loop is woken only when the front entry is filled (or the
// outbox closes), not once per request read, so an acks=all produce costs
// one wake-up of the writer, after its fsync.
type outbox struct {
	mu      sync.Mutex
	queue   []*entry    // oldest first
	closed  bool        // the read loop stopped reserving
	dropped func(reply) // set by abandon: the writer is gone, replies are dropped

	ready  chan struct{} // capacity 1: the front entry was filled, or closed
	tokens chan struct{} // one per reserved entry: bounds the entries in flight
}

// entry is one request's place in the reply order; it is filled once.
type entry struct {
	rp     reply
	filled bool
}

func newOutbox(maxInFlight int) *outbox {
	return &outbox{ready: make(chan struct{}, 1), tokens: make(chan struct{}, maxInFlight)}
}

// reserve appends an entry for the next request, waiting while the
// connection already has its maximum of requests in flight.
func (o *outbox) reserve(ctx context.Context) (*entry, error) {
	select {
	case o.tokens <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	e := &entry{}
	o.mu.Lock()
	o.queue = append(o.queue, e)
	o.mu.Unlock()
	return e, nil
}

// fill records e's reply. It reports false if e was already filled (a
// handler that panicked after arranging a later answer): the first reply
// stands.
func (o *outbox) fill(e *entry, rp reply) bool {
	o.mu.Lock()
	if e.filled {
		o.mu.Unlock()
		return false
	}
	e.rp, e.filled = rp, true
	if drop := o.dropped; drop != nil {
		o.queue = slices.DeleteFunc(o.queue, func(x *entry) bool { return x == e })
		o.mu.Unlock()
		drop(rp)
		return true
	}
	front := o.queue[0] == e
	o.mu.Unlock()
	if front {
		o.wake()
	}
	return true
}

// abandon tells the outbox that its writer has stopped for good: replies
// filled but never taken, and every reply filled from now on, are handed
// to drop (which gives back what they hold) instead of being queued.
func (o *outbox) abandon(drop func(reply)) {
	o.mu.Lock()
	o.dropped = drop
	var stranded []reply
	keep := o.queue[:0]
	for _, e := range o.queue {
		if e.filled {
			stranded = append(stranded, e.rp)
			continue
		}
		keep = append(keep, e)
	}
	clear(o.queue[len(keep):])
	o.queue = keep
	o.mu.Unlock()
	for _, rp := range stranded {
		drop(rp)
	}
}

// close tells the write loop that no more entries will be reserved.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.wake()
}

func (o *outbox) wake() {
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// take moves the filled replies at the front into dst and returns it, and
// reports whether the outbox is closed and has nothing left at all. The
// caller hands the count back with done once it has written them.
func (o *outbox) take(dst []reply) ([]reply, bool) {
	o.mu.Lock()
	n := 0
	for n < len(o.queue) && o.queue[n].filled {
		dst = append(dst, o.queue[n].rp)
		n++
	}
	// Shift rather than reslice, so the backing array (at most MaxInFlight
	// long) is reused instead of reallocated as the queue moves along.
	rest := copy(o.queue, o.queue[n:])
	clear(o.queue[rest:])
	o.queue = o.queue[:rest]
	finished := o.closed && len(o.queue) == 0
	o.mu.Unlock()
	return dst, finished
}

// done gives back the places of n taken replies once they are written, so
// the read loop can reserve again: replies in the writer's hands still count
// against the in-flight bound.
func (o *outbox) done(n int) {
	for range n {
		<-o.tokens
	}
}

// empty reports whether no reply is owed.
func (o *outbox) empty() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.queue) == 0
}

// isClosed reports whether the read loop has stopped reserving.
func (o *outbox) isClosed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closed
}
