package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A big reservation that has to wait does not hold back small requests.
func TestBudgetLetsSmallRequestsPass(t *testing.T) {
	b := newMemBudget(100)
	require.NoError(t, b.acquire(context.Background(), nil, 60))
	bigDone := make(chan error, 1)
	go func() { bigDone <- b.acquire(context.Background(), nil, 80) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.NoError(t, b.acquire(ctx, nil, 30), "a small request fits beside the held bytes")
	require.Equal(t, int64(90), b.inUse(), "the big request cannot fit yet")
	b.release(60)
	b.release(30)
	require.NoError(t, <-bigDone)
	require.Equal(t, int64(80), b.inUse())
	// Alone, a request larger than the whole budget still gets through.
	b.release(80)
	require.NoError(t, b.acquire(context.Background(), nil, 500))
}

func TestMemoryIsReturnedAfterASpike(t *testing.T) {
	a, b := newMemBudget(1<<30), newMemBudget(1<<30)
	w := spikeWatch{budgets: []*memBudget{a, b}}
	require.False(t, w.over(), "nothing happened")

	a.force(reclaimAfterPeak)
	require.False(t, w.over(), "the spike is held")
	require.False(t, w.over(), "the spike is still held")
	a.release(reclaimAfterPeak)
	require.False(t, w.over(), "the interval that released it peaked too")
	require.True(t, w.over(), "a whole interval below the spike")
	require.False(t, w.over(), "reclaimed once per spike")

	// Steady large traffic (a spike in every interval) is left alone, and
	// reclaimed once it ends.
	for i := range 5 {
		b.force(reclaimAfterPeak)
		b.release(reclaimAfterPeak)
		require.False(t, w.over(), "interval %d of steady traffic", i)
	}
	require.True(t, w.over(), "the traffic ended")

	// Peaks are per budget: two that together cross the mark are two
	// small bursts, left to the runtime.
	a.force(reclaimAfterPeak / 2)
	b.force(reclaimAfterPeak / 2)
	a.release(reclaimAfterPeak / 2)
	b.release(reclaimAfterPeak / 2)
	require.False(t, w.over())
	require.False(t, w.over(), "small bursts are left to the runtime")

	// A spike still mostly held is not over even if its peak passed.
	a.force(reclaimAfterPeak)
	require.False(t, w.over())
	a.release(reclaimAfterPeak - reclaimWhenBelow)
	require.False(t, w.over())
	require.False(t, w.over(), "still holding reclaimWhenBelow")
	a.release(reclaimWhenBelow)
	require.True(t, w.over())
}
