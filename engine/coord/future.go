package coord

import (
	"context"
	"fmt"
)

// Future is a reply produced by an operation: its value is set during the
// operation (or a later one: a parked request), and Wait returns it only
// once everything its shard appended by the end of that operation is
// durable.
type Future[T any] struct {
	done   chan struct{}
	v      T
	sh     *Shard
	offset int64 // -1: nothing to wait for
	err    error // the shard's last append failed
	// gen is the Storage generation the shard's state was replayed from:
	// a log rewritten since (a heal) may have dropped what the reply
	// reveals, and refilled the offsets it waits for with other records.
	gen uint64
}

// NewFuture returns a future to complete with Complete (or Resolve).
func NewFuture[T any]() *Future[T] { return &Future[T]{done: make(chan struct{})} }

// Resolved returns a future holding v that waits for nothing: for replies
// that reveal no shard state (a request refused before it reached one).
func Resolved[T any](v T) *Future[T] {
	f := NewFuture[T]()
	f.Resolve(v)
	return f
}

// Resolve sets v without a durability wait (see Resolved). Call it, or
// Complete, once.
func (f *Future[T]) Resolve(v T) {
	f.v, f.offset = v, -1
	close(f.done)
}

// Complete sets v during an operation on sh: Wait returns it once what sh
// appended by the end of this operation is durable. Outside an operation
// it is Resolve.
func (f *Future[T]) Complete(sh *Shard, v T) {
	if sh == nil || !sh.inOp {
		f.Resolve(v)
		return
	}
	f.v = v
	sh.completions = append(sh.completions, func(offset int64, err error) {
		f.sh, f.offset, f.err, f.gen = sh, offset, err, sh.gen
		close(f.done)
	})
}

// Done is closed once the value is set (it may not be durable yet).
func (f *Future[T]) Done() <-chan struct{} { return f.done }

// Ready returns the value if Wait would return it at once without error:
// completed, and durable as far as the shard knows. A caller that must not
// block tries it before parking on Wait.
func (f *Future[T]) Ready() (T, bool) {
	select {
	case <-f.done:
	default:
		var zero T
		return zero, false
	}
	if f.err != nil || f.offset >= 0 && f.offset > f.sh.durable.Load() {
		var zero T
		return zero, false
	}
	return f.v, true
}

// Wait returns the value once it is set and durable. The error is ctx's
// if it ended first, or ErrUnavailable if the shard's append or fsync
// failed or its log was rewritten before the records were fsynced; the
// value is returned then too (the caller decides what of it to answer,
// e.g. the per-partition errors of a commit), but it is not durable.
func (f *Future[T]) Wait(ctx context.Context) (T, error) {
	select {
	case <-f.done:
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
	if f.err != nil {
		return f.v, fmt.Errorf("%w: %s-%d: %v", ErrUnavailable, f.sh.cfg.Topic, f.sh.p, f.err)
	}
	if f.offset < 0 || f.offset <= f.sh.durable.Load() {
		return f.v, nil
	}
	wctx, cancel := context.WithTimeout(ctx, f.sh.cfg.SyncTimeout)
	defer cancel()
	if err := f.sh.store.WaitDurable(wctx, f.sh.p, f.offset); err != nil {
		if ctx.Err() != nil {
			return f.v, ctx.Err()
		}
		return f.v, fmt.Errorf("%w: syncing %s-%d: %v", ErrUnavailable, f.sh.cfg.Topic, f.sh.p, err)
	}
	// Durable, but in which log? A heal between the operation and now
	// dropped what was not fsynced, and later appends of the stale shard
	// (the recheck reloads it only later) may have fsynced other records
	// at these offsets. The generation read after the wait tells: a
	// rewrite after it keeps the records, fsynced by then. The durable
	// mark is advanced only past this check, so Ready and the fast path
	// above need none.
	if gen, err := f.sh.store.Generation(f.sh.p); err != nil || gen != f.gen {
		if err == nil {
			err = fmt.Errorf("its log was rewritten (generation %d, replayed %d)", gen, f.gen)
		}
		return f.v, fmt.Errorf("%w: %s-%d: %v", ErrUnavailable, f.sh.cfg.Topic, f.sh.p, err)
	}
	for {
		d := f.sh.durable.Load()
		if d >= f.offset || f.sh.durable.CompareAndSwap(d, f.offset) {
			return f.v, nil
		}
	}
}
