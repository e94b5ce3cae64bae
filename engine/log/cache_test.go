package log

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/vfs"
)

// Logs sharing a FileCache hold at most its capacity of idle descriptors
// plus one pinned .log each, however many segments they have and however
// they are read; a process limit below what all segments would need is
// never hit.
func TestFileCacheBoundsDescriptors(t *testing.T) {
	faults := vfs.NewFaults(vfs.NewMem())
	const logs, capacity = 20, 8
	cache := NewFileCache(capacity)
	limit := logs + capacity + 4 // pinned files, the cache, a few in use at once
	faults.SetMaxOpen(limit)
	opts := memOptions(faults)
	opts.Files = cache
	var all []*Log
	var want [][]stored
	for i := 0; i < logs; i++ {
		l, err := Open(fmt.Sprintf("/data/t-%d", i), opts)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		w := fillLog(t, l, 30, i*100)
		require.Greater(t, l.SegmentCount(), 3)
		all = append(all, l)
		want = append(want, w)
	}
	segments := 0
	for _, l := range all {
		segments += l.SegmentCount()
	}
	require.Greater(t, 3*segments, limit, "without the cache the files would not fit")
	for round := 0; round < 2; round++ {
		for i, l := range all {
			require.Empty(t, readEach(t, l, want[i]))
			_, _, ok, err := l.OffsetForTimestamp(10_000 + 7*15)
			require.NoError(t, err)
			require.True(t, ok)
			require.LessOrEqual(t, faults.OpenFiles(), limit)
		}
	}
	st := cache.Stats()
	require.Equal(t, logs, st.Pinned)
	require.LessOrEqual(t, st.Open, logs+capacity)
	require.Greater(t, st.Evicted, uint64(0))

	// Closing every log gives every descriptor back.
	for _, l := range all {
		require.NoError(t, l.Close())
	}
	require.Zero(t, cache.Stats().Open)
	require.Zero(t, faults.OpenFiles())
}

// A reader of a segment that retention removes under it finishes with what
// it opened, or learns the data is gone; it never reads another file.
func TestFileCacheRemovedSegment(t *testing.T) {
	mem := vfs.NewMem()
	opts := memOptions(mem)
	opts.Files = NewFileCache(1)
	l, err := Open("/data/t-0", opts)
	require.NoError(t, err)
	defer l.Close()
	want := fillLog(t, l, 30, 0)
	require.Greater(t, l.SegmentCount(), 2)
	second := l.SegmentBases()[1]
	_, err = l.DeleteRecordsBefore(second)
	require.NoError(t, err)
	_, err = l.Read(want[0].base, 1, l.HighWatermark())
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	for _, w := range want {
		if w.base >= second {
			data, err := l.Read(w.base, 1, l.HighWatermark())
			require.NoError(t, err)
			require.Equal(t, w.bytes, data)
		}
	}
	require.NoError(t, l.WaitDurable(context.Background(), want[len(want)-1].last))
}

// At the descriptor limit, an open first closes the idle file it evicts
// for it, so it succeeds without giving back every other idle file, and
// even a cache of one opens file after file.
func TestFileCacheOpensAtTheDescriptorLimit(t *testing.T) {
	for _, capacity := range []int{1, 3} {
		mem := vfs.NewMem()
		faults := vfs.NewFaults(mem)
		var names []string
		for i := 0; i < 6; i++ {
			name := fmt.Sprintf("/f-%d", i)
			f, err := mem.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			names = append(names, name)
		}
		faults.SetMaxOpen(capacity) // exactly what the cache keeps
		cache := NewFileCache(capacity)
		for round := 0; round < 2; round++ {
			for _, name := range names {
				cf, err := cache.acquire(faults, name, os.O_RDWR)
				require.NoError(t, err, "capacity %d: open %s", capacity, name)
				cache.release(cf)
				require.LessOrEqual(t, faults.OpenFiles(), capacity)
			}
		}
		st := cache.Stats()
		require.Equal(t, uint64(2*len(names)-capacity), st.Evicted, "capacity %d: one eviction per open past the capacity", capacity)
		require.Equal(t, capacity, st.Open)
	}
}
