package bench

import (
	"context"
	"time"
)

// pacer spaces events at a fixed rate: a token bucket refilled at rate
// tokens/s holding at most burst tokens. It is schedule-based (the n-th event
// is due at start + n/rate), so it sustains rates far above timer resolution:
// it only sleeps when ahead of schedule, and several events then go out
// without sleeping. When the caller falls behind (the broker pushes back),
// at most burst events are sent back-to-back to catch up; the rest of the
// backlog is forgotten rather than released as one huge burst that would
// distort latency at the target rate.
//
// A pacer is used by one goroutine.
type pacer struct {
	interval time.Duration
	burst    time.Duration // how far behind schedule we may be before resetting
	next     time.Time

	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

// newPacer returns a pacer for rate events/s. rate must be > 0.
func newPacer(rate float64) *pacer {
	interval := time.Duration(float64(time.Second) / rate)
	interval = max(interval, 1)
	// Allow catching up ~10ms worth of events (at least one).
	burst := max(10*time.Millisecond, interval)
	p := &pacer{interval: interval, burst: burst, now: time.Now, sleep: sleepCtx}
	p.next = p.now()
	return p
}

// wait blocks until the next event is due (or ctx is done).
func (p *pacer) wait(ctx context.Context) error {
	now := p.now()
	if d := p.next.Sub(now); d > 0 {
		if err := p.sleep(ctx, d); err != nil {
			return err
		}
	} else if -d > p.burst {
		p.next = now.Add(-p.burst)
	}
	p.next = p.next.Add(p.interval)
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
