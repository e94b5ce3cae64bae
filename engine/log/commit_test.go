package log

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
)

// TestGroupCommit: concurrent producers appending and waiting for
// durability all get distinct, contiguous offsets, and share fsyncs.
func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(nil)
	opts.SegmentBytes = 256 << 10
	l := openLog(t, dir, opts)
	const producers, perProducer, records = 8, 40, 3
	var (
		mu     sync.Mutex
		ranges [][2]int64
		wg     sync.WaitGroup
	)
	errc := make(chan error, producers)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i := 0; i < perProducer; i++ {
				res, err := l.Append([][]byte{makeBatch(records, 100, 0, p*1000+i)}, 0)
				if err == nil {
					err = l.WaitDurable(ctx, res.LastOffset)
				}
				if err == nil && l.DurableOffset() <= res.LastOffset {
					err = errors.New("WaitDurable returned before the offset was durable")
				}
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				ranges = append(ranges, [2]int64{res.BaseOffset, res.LastOffset})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	sort.Slice(ranges, func(i, j int) bool { return ranges[i][0] < ranges[j][0] })
	require.Len(t, ranges, producers*perProducer)
	next := int64(0)
	for _, r := range ranges {
		require.Equal(t, next, r[0], "contiguous")
		require.Equal(t, r[0]+records-1, r[1])
		next = r[1] + 1
	}
	require.Equal(t, next, l.LogEndOffset())
	st := l.Stats()
	require.Equal(t, uint64(producers*perProducer), st.Appends)
	require.Less(t, st.Fsyncs, st.Appends, "fsyncs are shared")
	require.Positive(t, st.FsyncNanos)
	t.Logf("%d appends, %d fsyncs", st.Appends, st.Fsyncs)
	require.Len(t, readAll(t, l, 0, 1<<20), producers*perProducer)
}

func TestWaitDurableErrors(t *testing.T) {
	l := openLog(t, t.TempDir(), testOptions(nil))
	err := l.WaitDurable(context.Background(), 0)
	require.ErrorIs(t, err, ErrOffsetOutOfRange, "nothing appended yet")

	l.syncMu.Lock()
	s := appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, l.WaitDurable(ctx, s.last), context.Canceled)
	l.syncMu.Unlock()
	require.NoError(t, l.WaitDurable(context.Background(), s.last))
}

// TestConcurrentAppendRead tails the log with readers while producers append
// across rolls: readers see only whole, valid, in-order batches.
func TestConcurrentAppendRead(t *testing.T) {
	opts := testOptions(nil)
	opts.SegmentBytes = 8 << 10
	l := openLog(t, t.TempDir(), opts)
	const total = 400
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(0)
			for off < total {
				ch := l.Changed()
				data, err := l.Read(off, 3000, l.HighWatermark())
				if err != nil {
					errc <- err
					return
				}
				if len(data) == 0 {
					select {
					case <-ch:
					case <-time.After(10 * time.Second):
						errc <- errors.New("reader starved")
						return
					}
					continue
				}
				err = batch.Iterate(data, func(h batch.Header, raw []byte) bool {
					if _, verr := batch.ValidateStored(raw); verr != nil {
						err = verr
						return false
					}
					if h.BaseOffset > off || h.LastOffset() < off {
						err = errors.New("batch does not contain the requested offset")
						return false
					}
					off = h.NextOffset()
					return true
				})
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	for p := 0; p < 2; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < total/2; i++ {
				if _, err := l.Append([][]byte{makeBatch(1, 150, 0, i)}, 0); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
}

// notified collects NotifyDurable outcomes.
type notified struct {
	mu   sync.Mutex
	errs map[int64]error
	n    int
}

func (n *notified) fn(offset int64) func(error) {
	return func(err error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.errs == nil {
			n.errs = map[int64]error{}
		}
		n.errs[offset] = err
		n.n++
	}
}

func (n *notified) get(offset int64) (error, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	err, ok := n.errs[offset]
	return err, ok
}

func (n *notified) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.n
}

// TestNotifyDurable: callbacks run once each, after the fsync that covers
// their offset, and with the reason when it can never come.
func TestNotifyDurable(t *testing.T) {
	l := openLog(t, t.TempDir(), testOptions(nil))
	var got notified

	l.NotifyDurable(0, got.fn(0))
	err, ok := got.get(0)
	require.True(t, ok, "settled at once")
	require.ErrorIs(t, err, ErrOffsetOutOfRange, "nothing appended yet")

	// Hold the flusher off: the callback must wait for the fsync.
	l.syncMu.Lock()
	s := appendBatch(t, l, makeBatch(3, 10, 0, 0), 0)
	l.NotifyDurable(s.last, got.fn(s.last))
	_, ok = got.get(s.last)
	require.False(t, ok, "not durable yet")
	l.syncMu.Unlock()
	require.Eventually(t, func() bool { _, ok := got.get(s.last); return ok }, 10*time.Second, time.Millisecond)
	err, _ = got.get(s.last)
	require.NoError(t, err)
	require.Greater(t, l.DurableOffset(), s.last)

	// Already durable: answered before NotifyDurable returns.
	l.NotifyDurable(s.base, got.fn(s.base))
	err, ok = got.get(s.base)
	require.True(t, ok)
	require.NoError(t, err)

	// Truncated away before its fsync: out of range.
	l.syncMu.Lock()
	s2 := appendBatch(t, l, makeBatch(1, 10, 0, 1), 0)
	l.NotifyDurable(s2.last, got.fn(s2.last))
	l.syncMu.Unlock()
	// The flusher may win the race and make it durable first; either way
	// it is settled exactly once.
	require.NoError(t, l.TruncateTo(s2.base))
	require.Eventually(t, func() bool { _, ok := got.get(s2.last); return ok }, 10*time.Second, time.Millisecond)
	if err, _ := got.get(s2.last); err != nil {
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
	}

	// Close: covered waits succeed, later registrations get ErrClosed.
	s3 := appendBatch(t, l, makeBatch(1, 10, 0, 2), 0)
	l.NotifyDurable(s3.last, got.fn(s3.last))
	require.NoError(t, l.Close())
	err, ok = got.get(s3.last)
	require.True(t, ok)
	require.NoError(t, err, "the final fsync of Close covers it")
	l.NotifyDurable(s3.last+1, got.fn(s3.last+1))
	err, _ = got.get(s3.last + 1)
	require.ErrorIs(t, err, ErrClosed)
	require.Equal(t, 6, got.count(), "each callback ran exactly once")
}

// TestNotifyDurableFailure: a failed log settles every waiter with the
// failure.
func TestNotifyDurableFailure(t *testing.T) {
	l := openLog(t, t.TempDir(), testOptions(nil))
	var got notified
	l.syncMu.Lock()
	s := appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
	l.NotifyDurable(s.last, got.fn(s.last))
	_ = l.fail(errors.New("injected fsync failure"))
	l.syncMu.Unlock()
	err, ok := got.get(s.last)
	require.True(t, ok)
	require.ErrorIs(t, err, ErrFailed)
}

// TestGroupCommitWindow: with a window, appends that arrive while a round
// was just made share the next one, which starts when the window ends and
// not before; the first round and Close never wait for it. It runs in a
// synctest bubble: time moves only when every goroutine (the flusher too)
// waits, so "no fsync before the window ends, exactly one at its end" is
// asserted as order and state, not as elapsed wall time.
func TestGroupCommitWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 200 * time.Millisecond
		opts := testOptions(nil)
		opts.GroupCommitWindow = window
		l := openLog(t, t.TempDir(), opts)
		ctx := context.Background()

		start := time.Now()
		s := appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
		require.NoError(t, l.WaitDurable(ctx, s.last))
		require.Equal(t, start, time.Now(), "the first round does not wait")
		rounds := l.Stats().Fsyncs

		// Three appends right after a round: no fsync until the window
		// has passed since that round, then exactly one covering them all.
		var got notified
		var last int64
		for i := range 3 {
			last = appendBatch(t, l, makeBatch(1, 10, 0, i+1), 0).last
			l.NotifyDurable(last, got.fn(last))
		}
		synctest.Wait() // the flusher waits out the window
		require.Equal(t, rounds, l.Stats().Fsyncs, "no fsync inside the window")
		time.Sleep(window - time.Nanosecond)
		synctest.Wait()
		require.Equal(t, rounds, l.Stats().Fsyncs, "no fsync a nanosecond before the window ends")
		require.Zero(t, got.count())
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.Equal(t, rounds+1, l.Stats().Fsyncs, "one round when the window ends")
		require.Equal(t, 3, got.count(), "it covered every append of the window")
		require.Greater(t, l.DurableOffset(), last)

		// Close does its final round at once, inside a new window.
		s = appendBatch(t, l, makeBatch(1, 10, 0, 9), 0)
		l.NotifyDurable(s.last, got.fn(s.last))
		synctest.Wait()
		closing := time.Now()
		require.NoError(t, l.Close())
		require.Equal(t, closing, time.Now(), "Close does not wait for the window")
		err, ok := got.get(s.last)
		require.True(t, ok)
		require.NoError(t, err)
	})

	bad := testOptions(nil)
	bad.GroupCommitWindow = -time.Millisecond
	require.ErrorIs(t, bad.Validate(), ErrInvalidOptions)
}

// TestNotifyDurableRestartedLog: waits for appends that a restart of the log
// deletes before their fsync fail, although the restarted log's durable mark
// is above them.
func TestNotifyDurableRestartedLog(t *testing.T) {
	opts := testOptions(nil)
	opts.GroupCommitWindow = time.Hour // holds the second round off
	l := openLog(t, t.TempDir(), opts)
	s := appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
	require.NoError(t, l.WaitDurable(context.Background(), s.last))

	var got notified
	s2 := appendBatch(t, l, makeBatch(1, 10, 0, 1), 0)
	l.NotifyDurable(s2.last, got.fn(s2.last))
	require.NoError(t, l.TruncateFullyAndStartAt(s2.last+10))
	err, ok := got.get(s2.last)
	require.True(t, ok)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
}

// TestHurryCutsGroupCommitWindow: an append followed by Hurry is fsynced
// without waiting out the window (a transaction's marker), together with
// the appends already waiting in it; and a Hurry with no round to cut
// short lets the next one start at once, while later rounds wait again.
func TestHurryCutsGroupCommitWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 200 * time.Millisecond
		opts := testOptions(nil)
		opts.GroupCommitWindow = window
		l := openLog(t, t.TempDir(), opts)
		defer l.Close()
		ctx := context.Background()

		s := appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
		require.NoError(t, l.WaitDurable(ctx, s.last))
		rounds := l.Stats().Fsyncs

		// An append waits in the window...
		var got notified
		waiting := appendBatch(t, l, makeBatch(1, 10, 0, 1), 0).last
		l.NotifyDurable(waiting, got.fn(waiting))
		synctest.Wait()
		require.Equal(t, rounds, l.Stats().Fsyncs, "no fsync inside the window")

		// ...until a hurried one arrives: one round, at once, for both.
		start := time.Now()
		hurried := appendBatch(t, l, makeBatch(1, 10, 0, 2), 0).last
		l.Hurry()
		require.NoError(t, l.WaitDurable(ctx, hurried))
		require.Equal(t, start, time.Now(), "the hurried round did not wait for the window")
		require.Equal(t, rounds+1, l.Stats().Fsyncs)
		err, ok := got.get(waiting)
		require.True(t, ok, "the round covered the append waiting in the window")
		require.NoError(t, err)

		// The window applies again to the next append.
		next := appendBatch(t, l, makeBatch(1, 10, 0, 3), 0).last
		l.NotifyDurable(next, got.fn(next))
		synctest.Wait()
		require.Equal(t, rounds+1, l.Stats().Fsyncs, "an append without Hurry waits for the window")
		time.Sleep(window)
		synctest.Wait()
		require.Equal(t, rounds+2, l.Stats().Fsyncs)
		_, ok = got.get(next)
		require.True(t, ok)
	})
}

// TestAppendDeferred: a deferred append starts no fsync round, nor does a
// deferred durability wait on it; the next round something else starts
// covers it, and its waiter learns so then.
func TestAppendDeferred(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := openLog(t, t.TempDir(), testOptions(nil))
		defer l.Close()
		ctx := context.Background()
		s := appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
		require.NoError(t, l.WaitDurable(ctx, s.last))
		// Append and WaitDurable each kick the flusher: let it take the
		// kick left over, which finds nothing pending, before the deferred
		// append makes something pending.
		synctest.Wait()
		rounds := l.Stats().Fsyncs

		res, err := l.AppendDeferred([][]byte{makeBatch(1, 10, 0, 1)}, 0)
		require.NoError(t, err)
		var got notified
		l.NotifyDurableDeferred(res.LastOffset, got.fn(res.LastOffset))
		synctest.Wait()
		require.Equal(t, rounds, l.Stats().Fsyncs, "a deferred append starts no round")
		require.Less(t, l.DurableOffset(), res.LastOffset+1)
		require.Zero(t, got.count())

		next := appendBatch(t, l, makeBatch(1, 10, 0, 2), 0).last
		require.NoError(t, l.WaitDurable(ctx, next))
		require.Equal(t, rounds+1, l.Stats().Fsyncs, "one round covers the deferred append and the next")
		err, ok := got.get(res.LastOffset)
		require.True(t, ok)
		require.NoError(t, err)
	})
}
