package log

import (
	"context"
	"fmt"
	"sync"
)

// durableWaiters holds the callbacks waiting for offsets to become durable.
// The flusher settles them right after each fsync round, on its own
// goroutine, so an acknowledgement costs no goroutine of its own and no
// extra wake-up between the fsync and the reply.
type durableWaiters struct {
	mu     sync.Mutex
	list   []durableWaiter
	closed bool // Close has finished: nothing more will become durable
}

type durableWaiter struct {
	offset int64
	fn     func(error)
}

// NotifyDurable arranges for fn to be called once every offset up to and
// including offset is fsynced (fn(nil)), or with the reason it never will
// be: the log failed (ErrFailed), closed first (ErrClosed), or offset was
// never appended or was truncated away (ErrOffsetOutOfRange). Without
// FlushAlways fn(nil) is called at once.
//
// fn is called exactly once, either before NotifyDurable returns or later on
// the log's flusher goroutine, so it must be quick and must not block or
// call back into the log.
func (l *Log) NotifyDurable(offset int64, fn func(error)) {
	l.notifyDurable(offset, fn, true)
}

// NotifyDurableDeferred is NotifyDurable that starts no fsync round: fn
// runs after the next round something else starts (see AppendDeferred).
func (l *Log) NotifyDurableDeferred(offset int64, fn func(error)) {
	l.notifyDurable(offset, fn, false)
}

func (l *Log) notifyDurable(offset int64, fn func(error), kick bool) {
	l.waiters.mu.Lock()
	err, settled := l.durableOutcome(offset)
	if !settled {
		l.waiters.list = append(l.waiters.list, durableWaiter{offset: offset, fn: fn})
	}
	l.waiters.mu.Unlock()
	if settled {
		fn(err)
		return
	}
	if kick {
		l.kickFlusher()
	}
}

// WaitDurable blocks until every offset up to and including offset is
// fsynced. Concurrent waiters share fsyncs (group commit). Without
// FlushAlways it returns immediately. It fails like NotifyDurable, or with
// ctx's error.
func (l *Log) WaitDurable(ctx context.Context, offset int64) error {
	done := make(chan error, 1)
	l.NotifyDurable(offset, func(err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// The registration stays until the next fsync round settles it;
		// done is buffered, so that costs nothing.
		return ctx.Err()
	}
}

// durableOutcome reports whether a wait for offset is settled now, and how.
// Caller holds waiters.mu.
func (l *Log) durableOutcome(offset int64) (error, bool) {
	switch {
	case !l.opts.Load().FlushAlways, l.durable.Load() > offset:
		return nil, true
	}
	if err := l.failure(); err != nil {
		return err, true
	}
	if l.waiters.closed {
		return ErrClosed, true
	}
	if leo := l.leo.Load(); offset >= leo {
		return fmt.Errorf("%w: wait for offset %d, log end is %d", ErrOffsetOutOfRange, offset, leo), true
	}
	return nil, false
}

// settleWaiters calls every waiter whose outcome is now known: after an
// fsync round, a failure, a truncation, a flush-policy change and Close.
func (l *Log) settleWaiters() {
	l.waiters.mu.Lock()
	var ready []durableWaiter
	var errs []error
	keep := l.waiters.list[:0]
	for _, w := range l.waiters.list {
		if err, settled := l.durableOutcome(w.offset); settled {
			ready = append(ready, w)
			errs = append(errs, err)
			continue
		}
		keep = append(keep, w)
	}
	clear(l.waiters.list[len(keep):]) // drop the settled callbacks for the GC
	l.waiters.list = keep
	l.waiters.mu.Unlock()
	for i, w := range ready {
		w.fn(errs[i])
	}
}

// resetWaiters runs reset (which moves the log's marks) and removes every
// waiter, atomically with respect to registrations, and returns the removed
// waiters for the caller to settle.
func (l *Log) resetWaiters(reset func()) []durableWaiter {
	l.waiters.mu.Lock()
	defer l.waiters.mu.Unlock()
	reset()
	dropped := l.waiters.list
	l.waiters.list = nil
	return dropped
}

// closeWaiters settles every remaining waiter for good at Close: what the
// final fsync covered succeeded, the rest gets ErrClosed, and so does any
// later registration.
func (l *Log) closeWaiters() {
	l.waiters.mu.Lock()
	l.waiters.closed = true
	l.waiters.mu.Unlock()
	l.settleWaiters()
}
