package controller

import (
	"context"
	"fmt"
	"sync"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// maxPendingDeltas bounds what a subscription holds for a consumer that
// fell behind. Beyond it the pending deltas are folded into one snapshot
// delta of the current state: memory stays bounded by the size of the
// state, Raft's apply never waits, and nothing is lost (the image says
// everything the folded deltas said).
const maxPendingDeltas = 1024

// Subscription delivers the controller's deltas, in log order, to one
// consumer: first the current image (a snapshot delta), then one delta per
// applied entry. Publishing never blocks on the consumer (see
// maxPendingDeltas). The consumer reports how far it got with Done.
type Subscription struct {
	c     *Controller
	await bool

	mu      sync.Mutex
	pending []metadata.Delta
	closed  bool
	// ready has a value when pending is not empty or the subscription is
	// closed.
	ready chan struct{}
	// done is the last index the consumer reconciled; progress is closed
	// and replaced on every advance, waking WaitReconciled.
	done     uint64
	progress chan struct{}
	// folds counts how often pending deltas were folded into an image.
	folds int
}

// SubscribeOptions configures Subscribe.
type SubscribeOptions struct {
	// Await makes the controller's topic changes (CreateTopic,
	// DeleteTopic, CreatePartitions, AlterConfigs, ReplaceConfigs) return
	// only once this subscriber reconciled their entry, or when the
	// request's deadline (at most Options.ApplyTimeout) passes: the node's
	// reconciler sets it, so a produce right after CreateTopics finds the
	// partitions.
	Await bool
}

// Subscribe starts a subscription. Its first delta is the current image.
func (c *Controller) Subscribe(opts SubscribeOptions) *Subscription {
	s := &Subscription{c: c, await: opts.Await, ready: make(chan struct{}, 1), progress: make(chan struct{})}
	c.lmu.Lock()
	defer c.lmu.Unlock()
	c.mu.RLock()
	s.push(c.st.image(), nil)
	c.mu.RUnlock()
	if c.closed.Load() {
		s.close()
	}
	c.subs = append(c.subs, s)
	return s
}

// push queues d; image, when needed, returns the current state's image
// (the caller holds the state lock).
func (s *Subscription) push(d metadata.Delta, image func() metadata.Delta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if d.Snapshot {
		s.pending = s.pending[:0] // the image supersedes them
	}
	s.pending = append(s.pending, d)
	if len(s.pending) > maxPendingDeltas && image != nil {
		s.pending = append(s.pending[:0], image())
		s.folds++
	}
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Next returns the deltas queued since the last call, waiting for at least
// one. Every subscription gets the same delta values: read them, do not
// modify them. It fails once the subscription or the controller is closed, or ctx
// ends.
func (s *Subscription) Next(ctx context.Context) ([]metadata.Delta, error) {
	for {
		s.mu.Lock()
		if len(s.pending) > 0 {
			out := s.pending
			s.pending = nil
			s.mu.Unlock()
			return out, nil
		}
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return nil, metadata.ErrClosed
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Done records that the consumer reconciled everything up to index.
func (s *Subscription) Done(index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index <= s.done {
		return
	}
	s.done = index
	close(s.progress)
	s.progress = make(chan struct{})
}

// Reconciled is the last index the consumer reported with Done.
func (s *Subscription) Reconciled() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// WaitReconciled waits until the consumer reconciled index.
func (s *Subscription) WaitReconciled(ctx context.Context, index uint64) error {
	for {
		s.mu.Lock()
		done, progress, closed := s.done, s.progress, s.closed
		s.mu.Unlock()
		switch {
		case done >= index:
			return nil
		case closed:
			return fmt.Errorf("wait for index %d: %w", index, metadata.ErrClosed)
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return fmt.Errorf("wait for index %d (reconciled %d): %w", index, done, ctx.Err())
		}
	}
}

// Close ends the subscription: Next and WaitReconciled return.
func (s *Subscription) Close() {
	s.c.lmu.Lock()
	s.c.subs = deleteItem(s.c.subs, s)
	s.c.lmu.Unlock()
	s.close()
}

func (s *Subscription) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.pending = nil
	close(s.progress)
	s.progress = make(chan struct{})
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func deleteItem[T comparable](xs []T, x T) []T {
	for i, y := range xs {
		if y == x {
			return append(xs[:i:i], xs[i+1:]...)
		}
	}
	return xs
}

// publish changes the in-memory state with change (under the write lock)
// and queues the delta it returns on every subscription.
func (c *Controller) publish(change func(st *state) metadata.Delta) {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	d := change(&c.st)
	if c.appliedCh != nil {
		close(c.appliedCh)
		c.appliedCh = make(chan struct{})
	}
	for _, s := range c.subs {
		s.push(d, c.st.image)
	}
}

// awaitReconciled waits until every awaiting subscriber reconciled index,
// at most until ctx ends. The change is committed either way: a subscriber
// that is slow (a slow disk creating partitions) delays the answer, not
// the change, and a timeout is logged rather than failing a change that
// happened.
func (c *Controller) awaitReconciled(ctx context.Context, op string, index uint64) {
	c.lmu.Lock()
	subs := make([]*Subscription, 0, len(c.subs))
	for _, s := range c.subs {
		if s.await {
			subs = append(subs, s)
		}
	}
	c.lmu.Unlock()
	for _, s := range subs {
		if err := s.WaitReconciled(ctx, index); err != nil {
			c.logger.Warn("metadata change committed; this node is still applying it", "op", op, "index", index, "err", err)
			return
		}
	}
}
