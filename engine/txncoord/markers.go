package txncoord

import (
	"context"
	"time"

	"github.com/moonmq/moonmq/engine/coord"
)

// The marker sender. A transaction entering Prepare* queues its markers
// in its shard; whenDurable lets them go once the Prepare record is
// durable; the sender (or a test, through PollMarkers) collects the
// markers due from every shard, has the MarkerWriter write them, and feeds
// each answer back to its shard (MarkersWritten), which completes the
// transaction once every partition has its marker.

// maxMarkerCallsInFlight bounds the WriteMarkers calls outstanding at once;
// maxMarkersPerCall, the markers of one call.
const (
	maxMarkerCallsInFlight = 16
	maxMarkersPerCall      = 1000
)

// whenDurable waits, off the shard's lock, for gate (completed in the
// operation that prepared ids) to be durable, then lets their markers go.
// A gate that fails (the append was lost) lets nothing go: the reload the
// runtime makes replays what the log holds, and Activate queues that.
func (c *Coordinator) whenDurable(p int32, gate *coord.Future[struct{}], ids []string) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if _, err := gate.Wait(c.ctx); err != nil {
			return
		}
		if err := c.rt.Do(p, func(s *shard) { s.markersDurable(c.cfg.Now(), ids) }); err == nil {
			c.wake()
		}
	}()
}

func (c *Coordinator) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// PollMarkers returns the markers due at now from every shard, marked in
// flight: each must be answered through MarkersWritten. The sender calls
// it; so do tests without a MarkerWriter, after waiting for the
// durability gates of what they did (Settle).
func (c *Coordinator) PollMarkers(now time.Time) []MarkerWrite {
	var out []MarkerWrite
	c.rt.Each(func(_ int32, s *shard) { out = append(out, s.pollMarkers(now)...) })
	return out
}

// MarkersWritten feeds the answers to markers back to their shards.
func (c *Coordinator) MarkersWritten(now time.Time, results []MarkerResult) {
	byShard := map[int32][]MarkerResult{}
	for _, r := range results {
		byShard[r.Write.coordinator] = append(byShard[r.Write.coordinator], r)
	}
	for p, rs := range byShard {
		_ = c.rt.Do(p, func(s *shard) {
			for _, r := range rs {
				s.markerWritten(now, r)
			}
		}) // a shard gone since: its successor sends its own
	}
	c.wake()
}

// Settle waits until the durability gates of the operations done so far
// have let their markers go (tests drive markers by hand after it).
func (c *Coordinator) Settle() { c.wg.Wait() }

// nextRetry is the earliest time a backed-off marker of any shard may go
// again (zero: none).
func (c *Coordinator) nextRetry() time.Time {
	var next time.Time
	c.rt.Each(func(_ int32, s *shard) {
		if t := s.nextMarkerRetry(); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	})
	return next
}

// sendLoop sends the markers due whenever an operation or answer wakes it,
// or a retry comes due, until Close.
func (c *Coordinator) sendLoop() {
	defer c.wg.Done()
	calls := make(chan struct{}, maxMarkerCallsInFlight)
	for {
		var (
			retry <-chan time.Time
			timer *time.Timer
		)
		if next := c.nextRetry(); !next.IsZero() {
			timer = time.NewTimer(max(time.Until(next), time.Millisecond))
			retry = timer.C
		}
		select {
		case <-c.ctx.Done():
		case <-c.kick:
		case <-retry:
		}
		if timer != nil {
			timer.Stop()
		}
		if c.ctx.Err() != nil {
			return
		}
		writes := c.PollMarkers(c.cfg.Now())
		for len(writes) > 0 {
			n := min(len(writes), maxMarkersPerCall)
			batch := writes[:n:n]
			writes = writes[n:]
			select {
			case calls <- struct{}{}:
			case <-c.ctx.Done():
				return
			}
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				defer func() { <-calls }()
				results := c.writer.WriteMarkers(c.ctx, batch)
				if c.ctx.Err() != nil {
					return
				}
				c.MarkersWritten(c.cfg.Now(), results)
			}()
		}
	}
}

// takeSpareProducerID returns the producer id kept for operations that
// cannot wait for an allocation (a timeout's abort at an exhausted epoch),
// or -1 while none is ready; taking one starts fetching the next.
func (c *Coordinator) takeSpareProducerID() int64 {
	pid := c.spare.Swap(-1)
	if c.refilling.CompareAndSwap(false, true) {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer c.refilling.Store(false)
			ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
			defer cancel()
			if next, err := c.pids.Next(ctx); err == nil {
				c.spare.CompareAndSwap(-1, next)
			}
		}()
	}
	return pid
}
