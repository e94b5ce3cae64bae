package cleaner

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/clock"
)

// The bucket holds one second of budget; overdrawing costs the time to
// repay the debt, so the long-run rate is the limit.
func TestThrottlerReserve(t *testing.T) {
	t0 := time.Unix(1000, 0)
	th := NewThrottler(clock.NewFake(t0), 1000) // 1000 B/s, starts full
	require.Zero(t, th.reserve(t0, 600))
	require.Zero(t, th.reserve(t0, 400))
	require.Equal(t, 500*time.Millisecond, th.reserve(t0, 500), "500 B over: half a second")
	// Half a second later the debt is repaid; nothing more is owed.
	require.Zero(t, th.reserve(t0.Add(500*time.Millisecond), 0))
	require.Equal(t, time.Second, th.reserve(t0.Add(500*time.Millisecond), 1000))
	// A long idle spell refills one second's worth, no more.
	t1 := t0.Add(time.Hour)
	require.Zero(t, th.reserve(t1, 1000))
	require.Equal(t, 100*time.Millisecond, th.reserve(t1, 100))

	// 10 MB through a 1 MB/s throttler in 64 KiB steps takes 9 s of waits
	// (the first second is the bucket), whatever the steps.
	th = NewThrottler(clock.NewFake(t0), 1<<20)
	now, total := t0, 0
	for total < 10<<20 {
		d := th.reserve(now, 64<<10)
		now = now.Add(d)
		total += 64 << 10
	}
	require.Equal(t, 9*time.Second, now.Sub(t0))
}

func TestThrottlerWait(t *testing.T) {
	ctx := context.Background()
	for _, rate := range []float64{0, math.Inf(1), math.MaxFloat64} {
		th := NewThrottler(clock.NewFake(time.Unix(0, 0)), rate)
		require.NoError(t, th.Wait(ctx, math.MaxInt32), "unlimited: %g", rate)
	}
	clk := clock.NewFake(time.Unix(0, 0))
	th := NewThrottler(clk, 100)
	require.NoError(t, th.Wait(ctx, 100))
	done := make(chan error, 1)
	go func() { done <- th.Wait(ctx, 50) }()
	waitTimer(t, clk)
	select {
	case <-done:
		t.Fatal("returned before its time")
	default:
	}
	clk.Advance(500 * time.Millisecond)
	require.NoError(t, <-done)

	// Cancelling the context (an aborted cleaning) ends the wait at once.
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- th.Wait(cctx, 1000) }()
	waitTimer(t, clk)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.ErrorIs(t, th.Wait(cctx, 1), context.Canceled)
}

// waitTimer polls until the fake clock has a timer armed (a goroutine is
// waiting on it), with a deadline rather than a sleep.
func waitTimer(t *testing.T, clk *clock.Fake) {
	t.Helper()
	require.Eventually(t, func() bool { return len(clk.Timers()) > 0 }, 10*time.Second, time.Millisecond)
}
