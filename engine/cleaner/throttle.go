package cleaner

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/moonmq/moonmq/engine/clock"
)

// Throttler bounds the cleaner's I/O to a rate in bytes per second, shared
// by every cleaner thread (Kafka's log.cleaner.io.max.bytes.per.second and
// its Throttler). It is a token bucket holding at most one second of
// budget: a burst after an idle spell is one second's worth, and a caller
// that overdraws waits until the debt is repaid, so the long-run rate never
// exceeds the limit.
type Throttler struct {
	clock clock.Clock
	rate  float64 // bytes per second; +Inf or <= 0: unlimited

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// NewThrottler returns a throttler of rate bytes per second (<= 0 or +Inf:
// unlimited, Kafka's default of Double.MAX_VALUE).
func NewThrottler(c clock.Clock, rate float64) *Throttler {
	t := &Throttler{clock: c, rate: rate}
	if !t.unlimited() {
		t.tokens, t.last = rate, c.Now()
	}
	return t
}

func (t *Throttler) unlimited() bool {
	return t == nil || t.rate <= 0 || math.IsInf(t.rate, 1) || t.rate >= math.MaxFloat64
}

// reserve takes n bytes from the bucket at now and returns how long the
// caller must wait before doing that I/O. Pure in its arguments and the
// bucket's state, so tests drive it with times.
func (t *Throttler) reserve(now time.Time, n int) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el := now.Sub(t.last); el > 0 {
		t.tokens = min(t.rate, t.tokens+el.Seconds()*t.rate)
		t.last = now
	}
	t.tokens -= float64(n)
	if t.tokens >= 0 {
		return 0
	}
	return time.Duration(-t.tokens / t.rate * float64(time.Second))
}

// Wait blocks until n more bytes may be read or written, or ctx is done
// (its error is returned: an aborted cleaning stops waiting at once).
func (t *Throttler) Wait(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.unlimited() || n <= 0 {
		return nil
	}
	d := t.reserve(t.clock.Now(), n)
	if d <= 0 {
		return nil
	}
	timer := t.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C():
		return nil
	}
}
