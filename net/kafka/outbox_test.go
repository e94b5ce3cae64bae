package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func reqWithCorr(corr int32) *request { return &request{corr: corr} }

func corrs(rs []reply) []int32 {
	var out []int32
	for _, r := range rs {
		out = append(out, r.req.corr)
	}
	return out
}

func woken(o *outbox) bool {
	select {
	case <-o.ready:
		return true
	default:
		return false
	}
}

// TestOutboxOrder: replies leave in request order whatever order they are
// filled in, and the writer is woken only when the front one is ready.
func TestOutboxOrder(t *testing.T) {
	ctx := context.Background()
	o := newOutbox(8)
	var es []*entry
	for range 3 {
		e, err := o.reserve(ctx)
		require.NoError(t, err)
		es = append(es, e)
	}
	require.False(t, woken(o), "reserving does not wake the writer")

	require.True(t, o.fill(es[2], reply{req: reqWithCorr(2)}))
	require.False(t, woken(o), "filling behind the front does not wake the writer")
	got, finished := o.take(nil)
	require.Empty(t, got)
	require.False(t, finished)

	require.True(t, o.fill(es[0], reply{req: reqWithCorr(0)}))
	require.True(t, woken(o))
	got, _ = o.take(nil)
	require.Equal(t, []int32{0}, corrs(got), "entry 1 still owes its reply")

	require.True(t, o.fill(es[1], reply{req: reqWithCorr(1)}))
	require.False(t, o.fill(es[1], reply{req: reqWithCorr(9)}), "the first reply stands")
	require.True(t, woken(o))
	got, finished = o.take(nil)
	require.Equal(t, []int32{1, 2}, corrs(got))
	require.False(t, finished, "not closed yet")

	o.close()
	require.True(t, woken(o))
	_, finished = o.take(nil)
	require.True(t, finished)
}

// TestOutboxInFlightBound: reserve waits while maxInFlight replies are owed,
// and gives up when its context ends.
func TestOutboxInFlightBound(t *testing.T) {
	o := newOutbox(2)
	ctx := context.Background()
	e0, err := o.reserve(ctx)
	require.NoError(t, err)
	_, err = o.reserve(ctx)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = o.reserve(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "two in flight already")

	reserved := make(chan error, 1)
	go func() {
		_, err := o.reserve(ctx)
		reserved <- err
	}()
	o.fill(e0, reply{req: reqWithCorr(0)})
	got, _ := o.take(nil)
	require.Len(t, got, 1)
	select {
	case <-reserved:
		t.Fatal("a taken reply still counts until it is written")
	case <-time.After(20 * time.Millisecond):
	}
	o.done(len(got))
	select {
	case err := <-reserved:
		require.NoError(t, err, "writing a reply frees its place")
	case <-time.After(10 * time.Second):
		t.Fatal("reserve still blocked after a reply was written")
	}
}
