package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHistogramBuckets(t *testing.T) {
	// Every value maps to a bucket whose upper bound is >= the value and
	// within 1/128 of it; buckets are monotonic.
	prev := -1
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 1 << 20, 123456789, 1<<40 + 7, math.MaxInt64} {
		i := bucketOf(v)
		require.Less(t, i, numBuckets)
		require.Greater(t, i, prev, "monotonic at %d", v)
		prev = i
		hi := bucketHigh(i)
		require.GreaterOrEqual(t, hi, v)
		require.LessOrEqual(t, float64(hi-v), float64(v)/128+1, "precision at %d", v)
		if v > 0 {
			require.Equal(t, i, bucketOf(hi), "upper bound stays in bucket %d", i)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		v := r.Uint64N(math.MaxInt64)
		hi := bucketHigh(bucketOf(v))
		require.GreaterOrEqual(t, hi, v)
		require.LessOrEqual(t, float64(hi-v), float64(v)/128+1)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	h := NewHistogram()
	require.Zero(t, h.Quantile(0.5))
	require.Zero(t, h.Min())
	require.Zero(t, h.Mean())

	// 1..10000 microseconds, shuffled: quantiles match the exact ones
	// within the bucket precision.
	var vals []time.Duration
	for i := 1; i <= 10000; i++ {
		vals = append(vals, time.Duration(i)*time.Microsecond)
	}
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
	var wg sync.WaitGroup
	for w := range 4 { // concurrent recording
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, v := range vals[w*2500 : (w+1)*2500] {
				h.Record(v)
			}
		}()
	}
	wg.Wait()
	sorted := append([]time.Duration(nil), vals...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	require.Equal(t, uint64(10000), h.Count())
	require.Equal(t, 10*time.Millisecond, h.Max())
	require.Equal(t, time.Microsecond, h.Min())
	require.InDelta(t, float64(5000500*time.Nanosecond), float64(h.Mean()), float64(time.Microsecond))
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		exact := sorted[int(math.Ceil(q*float64(len(sorted))))-1]
		got := h.Quantile(q)
		require.GreaterOrEqual(t, got, exact, "q=%v", q)
		require.LessOrEqual(t, float64(got-exact), float64(exact)/128, "q=%v", q)
	}
	require.Equal(t, h.Max(), h.Quantile(1))

	// Merge adds counts and keeps extremes.
	o := NewHistogram()
	o.Record(time.Hour)
	o.Record(-time.Second) // clamped to 0
	h.Merge(o)
	require.Equal(t, uint64(10002), h.Count())
	require.Equal(t, time.Hour, h.Max())
	require.Equal(t, time.Duration(0), h.Min())
}

// fakeClock drives a pacer without real sleeping.
type fakeClock struct{ now time.Time }

func (c *fakeClock) pacer(rate float64) *pacer {
	p := newPacer(rate)
	p.now = func() time.Time { return c.now }
	p.sleep = func(_ context.Context, d time.Duration) error { c.now = c.now.Add(d); return nil }
	p.next = c.now
	return p
}

func TestPacer(t *testing.T) {
	c := &fakeClock{now: time.Unix(1000, 0)}
	p := c.pacer(1000) // 1ms apart
	start := c.now
	for range 100 {
		require.NoError(t, p.wait(context.Background()))
	}
	require.Equal(t, 99*time.Millisecond, c.now.Sub(start), "100 events at 1000/s span 99ms")

	// Falling far behind releases at most ~10ms of backlog at once.
	c.now = c.now.Add(time.Second)
	before := c.now
	for range 10 {
		require.NoError(t, p.wait(context.Background()))
	}
	require.Equal(t, before, c.now, "catch-up events go out without sleeping")
	require.NoError(t, p.wait(context.Background()))
	require.NoError(t, p.wait(context.Background()))
	require.Greater(t, c.now, before, "then pacing resumes")

	// Very high rates never sleep below timer resolution per event.
	c2 := &fakeClock{now: time.Unix(0, 0)}
	fast := c2.pacer(10_000_000)
	for range 1000 {
		require.NoError(t, fast.wait(context.Background()))
	}
	require.Equal(t, 999*100*time.Nanosecond, c2.now.Sub(time.Unix(0, 0)))

	// A canceled context stops a sleeping pacer.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	slow := newPacer(0.001)
	require.NoError(t, slow.wait(ctx), "first event is due immediately")
	require.ErrorIs(t, slow.wait(ctx), context.Canceled)
}
