package log

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
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
