package log

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/vfs"
)

// kv is one produced or read record.
type kv struct {
	offset int64
	key    string
	value  []byte // nil: tombstone
	ts     int64
}

// keyedBatch builds a producer-style batch of keyed records; a nil value
// is a tombstone. codec compresses it for real.
func keyedBatch(t *testing.T, recs []kv, codec int8, pid int64) []byte {
	t.Helper()
	rs := make([]batch.Record, len(recs))
	first, maxTs := recs[0].ts, recs[0].ts
	for i, r := range recs {
		rs[i] = batch.Record{OffsetDelta: int32(i), TimestampDelta: r.ts - first, Key: []byte(r.key), Value: r.value}
		maxTs = max(maxTs, r.ts)
	}
	h := batch.Header{PartitionLeaderEpoch: -1, FirstTimestamp: first, MaxTimestamp: maxTs,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if pid >= 0 {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = pid, 0, 0
	}
	b := batch.Build(h, rs)
	if codec != batch.CompressionNone {
		var err error
		b, err = batch.Recompress(b, codec, defaultLevel(codec), 1<<20)
		require.NoError(t, err)
	}
	return b
}

// readRecords reads the whole log through Read and decodes every record,
// checking CRCs, that offsets strictly increase and that timestamps read
// as produced (delete horizons rebase them).
func readRecords(t *testing.T, l *Log) []kv {
	t.Helper()
	var out []kv
	off := l.LogStartOffset()
	last := int64(-1)
	for off < l.HighWatermark() {
		data, err := l.Read(off, 64<<10, l.HighWatermark())
		require.NoError(t, err)
		if len(data) == 0 {
			break
		}
		require.NoError(t, batch.Iterate(data, func(h batch.Header, raw []byte) bool {
			_, verr := batch.ValidateStored(raw)
			require.NoError(t, verr)
			require.NoError(t, batch.DecodeRecords(raw, 1<<20, func(r batch.Record) bool {
				o := h.RecordOffset(r)
				require.Greater(t, o, last, "offsets must increase")
				last = o
				var v []byte
				if r.Value != nil {
					v = append([]byte{}, r.Value...)
				}
				out = append(out, kv{offset: o, key: string(r.Key), value: v, ts: h.RecordTimestamp(r)})
				return true
			}))
			off = h.NextOffset()
			return true
		}))
	}
	return out
}

// checkAgainst checks the log's records against everything produced: each
// record is the one produced at its offset, and every key's last record is
// the latest produced (a key whose latest is a tombstone may be gone).
func checkAgainst(t *testing.T, got []kv, produced map[int64]kv, latest map[string]kv) {
	t.Helper()
	lastSeen := map[string]kv{}
	for _, r := range got {
		p, ok := produced[r.offset]
		require.True(t, ok, "offset %d was never produced", r.offset)
		require.Equal(t, p.key, r.key, "offset %d key", r.offset)
		require.Equal(t, p.value, r.value, "offset %d value", r.offset)
		require.Equal(t, p.ts, r.ts, "offset %d timestamp", r.offset)
		lastSeen[r.key] = r
	}
	for k, want := range latest {
		got, ok := lastSeen[k]
		if want.value == nil && !ok {
			continue // a tombstone past its retention
		}
		require.True(t, ok, "key %q lost", k)
		require.Equal(t, want.offset, got.offset, "key %q: latest offset", k)
	}
	for k := range lastSeen {
		_, ok := latest[k]
		require.True(t, ok, "key %q never produced", k)
	}
}

// TestCleanProperty: random produce sequences (keys, values, tombstones,
// compressed batches), random segment sizes and map budgets, cleanings at
// random moments with random times, reopens; after each cleaning the log
// matches a reference map, and below the cleaner checkpoint every key
// appears at most once.
func TestCleanProperty(t *testing.T) {
	for seed := uint64(0); seed < 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { cleanProperty(t, seed) })
	}
}

func cleanProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 16))
	mem := vfs.NewMem()
	opts := memOptions(mem)
	opts.SegmentBytes = int64(300 + rng.IntN(3000))
	opts.IndexIntervalBytes = 64 + rng.IntN(512)
	const dir = "/data/c-0"
	l, err := Open(dir, opts)
	require.NoError(t, err)
	defer func() { _ = l.Close() }()

	produced := map[int64]kv{}
	latest := map[string]kv{}
	nkeys := 3 + rng.IntN(40)
	now := time.UnixMilli(1_700_000_000_000)
	retention := time.Duration(rng.IntN(5)) * time.Minute
	cleanings, removed, passes := 0, int64(0), 0
	for step := 0; step < 400; step++ {
		now = now.Add(time.Duration(rng.IntN(20)) * time.Second)
		n := 1 + rng.IntN(5)
		recs := make([]kv, n)
		for i := range recs {
			recs[i] = kv{key: fmt.Sprintf("k%d", rng.IntN(nkeys)), ts: now.UnixMilli() + int64(i)}
			if rng.IntN(8) != 0 {
				recs[i].value = fmt.Appendf(nil, "v%d-%d", step, i)
			}
		}
		codec := batch.CompressionNone
		switch rng.IntN(4) {
		case 0:
			codec = batch.CompressionGzip
		case 1:
			codec = batch.CompressionZstd
		}
		// Idempotent producers too: their last batch stays, maybe empty.
		res, err := l.Append([][]byte{keyedBatch(t, recs, codec, int64(rng.IntN(3))-1)}, 0)
		require.NoError(t, err)
		for i := range recs {
			recs[i].offset = res.BaseOffset + int64(i)
			produced[recs[i].offset] = recs[i]
			latest[recs[i].key] = recs[i]
		}
		require.NoError(t, l.WaitDurable(context.Background(), res.LastOffset))
		switch rng.IntN(30) {
		case 0, 1, 2:
			mapMem := 1 << 20
			if rng.IntN(2) == 0 {
				mapMem = 16 * mapSlotSize * (1 + rng.IntN(4)) // a few keys: many passes
			}
			st, err := l.Clean(context.Background(), CleanOptions{Now: now, DeleteRetention: retention,
				FirstUncleanable: l.HighWatermark(), MapMemory: mapMem})
			require.NoError(t, err)
			cleanings++
			removed += st.RecordsRemoved
			passes += st.Passes
			got := readRecords(t, l)
			checkAgainst(t, got, produced, latest)
			cleanedTo, err := l.CleanedTo()
			require.NoError(t, err)
			seen := map[string]bool{}
			for _, r := range got {
				if r.offset < cleanedTo {
					require.False(t, seen[r.key], "key %q twice below the checkpoint %d", r.key, cleanedTo)
					seen[r.key] = true
				}
			}
		case 3:
			require.NoError(t, l.Close())
			l, err = Open(dir, opts)
			require.NoError(t, err)
			checkAgainst(t, readRecords(t, l), produced, latest)
		}
	}
	// A final cleaning far in the future removes every tombstone that a
	// previous cleaning stamped, and a second one the rest.
	for i := 0; i < 2; i++ {
		now = now.Add(retention + time.Hour)
		_, err = l.Clean(context.Background(), CleanOptions{Now: now, DeleteRetention: retention,
			FirstUncleanable: l.HighWatermark(), MapMemory: 1 << 20})
		require.NoError(t, err)
	}
	got := readRecords(t, l)
	checkAgainst(t, got, produced, latest)
	l.segMu.RLock()
	activeBase := l.segments[len(l.segments)-1].base
	l.segMu.RUnlock()
	for _, r := range got {
		if r.offset < activeBase {
			require.NotNil(t, r.value, "tombstone at %d outlived its retention", r.offset)
		}
	}
	require.Positive(t, cleanings)
	t.Logf("seed %d: %d cleanings, %d passes, %d records removed of %d", seed, cleanings, passes, removed, len(produced))
}

// TestCleanTombstoneHorizon follows one tombstone through its life: the
// first cleaning keeps it and stamps the horizon, a cleaning before the
// horizon keeps it, one at the horizon removes it.
func TestCleanTombstoneHorizon(t *testing.T) {
	opts := memOptions(vfs.NewMem())
	opts.SegmentBytes = 200
	l := openLog(t, "/d", opts)
	var err error
	now := time.UnixMilli(1_700_000_000_000)
	_, err = l.Append([][]byte{keyedBatch(t, []kv{{key: "a", value: []byte("1"), ts: now.UnixMilli()}}, 0, -1)}, 0)
	require.NoError(t, err)
	_, err = l.Append([][]byte{keyedBatch(t, []kv{{key: "a", ts: now.UnixMilli() + 5}}, 0, -1)}, 0)
	require.NoError(t, err)
	for i := 0; i < 4; i++ { // roll past them
		_, err = l.Append([][]byte{keyedBatch(t, []kv{{key: fmt.Sprint("x", i), value: make([]byte, 150), ts: now.UnixMilli()}}, 0, -1)}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, l.Sync())
	clean := func(at time.Time) {
		_, err := l.Clean(context.Background(), CleanOptions{Now: at, DeleteRetention: time.Hour, FirstUncleanable: l.HighWatermark(), MapMemory: 1 << 16})
		require.NoError(t, err)
	}
	keys := func() []string {
		var out []string
		for _, r := range readRecords(t, l) {
			if r.key == "a" {
				out = append(out, fmt.Sprintf("%d:%v", r.offset, r.value != nil))
			}
		}
		return out
	}
	clean(now)
	require.Equal(t, []string{"1:false"}, keys(), "first cleaning keeps the tombstone, drops the value")
	var horizon int64
	require.NoError(t, l.Batches(0, func(h batch.Header) bool {
		if h.BaseOffset == 1 {
			require.NotZero(t, h.Attributes&batch.DeleteHorizonBit)
			horizon = h.FirstTimestamp
		}
		return true
	}))
	require.Equal(t, now.Add(time.Hour).UnixMilli(), horizon)
	require.NoError(t, l.Batches(0, func(h batch.Header) bool { return true }))
	clean(now.Add(59 * time.Minute))
	require.Equal(t, []string{"1:false"}, keys(), "before the horizon")
	clean(now.Add(time.Hour))
	require.Empty(t, keys(), "at the horizon")
}

// TestCleanKeepsProducerLastBatchAndDropsAborted: an idempotent producer's
// last batch stays, emptied, with its offsets and sequence; batches of an
// aborted transaction go, the markers stay.
func TestCleanKeepsProducerLastBatchAndDropsAborted(t *testing.T) {
	opts := memOptions(vfs.NewMem())
	opts.SegmentBytes = 300
	l := openLog(t, "/d", opts)
	var err error
	ts := int64(1_700_000_000_000)
	// pid 7 writes k=1 then its last batch k=2; k is overwritten later by
	// producer-less batches.
	_, err = l.Append([][]byte{keyedBatch(t, []kv{{key: "k", value: []byte("p1"), ts: ts}}, 0, 7)}, 0)
	require.NoError(t, err)
	r7, err := l.Append([][]byte{keyedBatch(t, []kv{{key: "k", value: []byte("p2"), ts: ts}}, 0, 7)}, 0)
	require.NoError(t, err)
	// A transaction of pid 9 that aborts: its record of key "t" must never
	// win over the committed one before it.
	_, err = l.Append([][]byte{keyedBatch(t, []kv{{key: "t", value: []byte("committed"), ts: ts}}, 0, -1)}, 0)
	require.NoError(t, err)
	txn := keyedBatch(t, []kv{{key: "t", value: []byte("aborted"), ts: ts}}, 0, 9)
	h, _ := batch.ParseHeader(txn)
	h.Attributes |= batch.TransactionalBit
	txn = batch.Build(h, []batch.Record{{Key: []byte("t"), Value: []byte("aborted")}})
	rt, err := l.Append([][]byte{txn}, 0)
	require.NoError(t, err)
	marker := batch.BuildEndTxnMarker(9, 0, batch.EndTxnMarker{}, ts)
	rm, err := l.AppendWith([][]byte{marker}, 0, []AbortedTxn{{ProducerID: 9, FirstOffset: rt.BaseOffset, LastOffset: rt.BaseOffset + 1, LastStableOffset: rt.BaseOffset}})
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		_, err = l.Append([][]byte{keyedBatch(t, []kv{{key: "k", value: make([]byte, 100), ts: ts}}, 0, -1)}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, l.Sync())
	st, err := l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(ts), FirstUncleanable: l.HighWatermark(), MapMemory: 1 << 16})
	require.NoError(t, err)
	require.Positive(t, st.RecordsRemoved)
	var bases []string
	require.NoError(t, l.Batches(0, func(h batch.Header) bool {
		bases = append(bases, fmt.Sprintf("%d/%d/pid%d", h.BaseOffset, h.NumRecords, h.ProducerID))
		return true
	}))
	require.Contains(t, bases, fmt.Sprintf("%d/0/pid7", r7.BaseOffset), "pid 7's last batch kept empty")
	require.NotContains(t, bases, "0/1/pid7", "pid 7's earlier batch removed")
	require.NotContains(t, bases, fmt.Sprintf("%d/1/pid9", rt.BaseOffset), "aborted batch removed")
	require.Contains(t, bases, fmt.Sprintf("%d/1/pid9", rm.BaseOffset), "marker kept")
	var tv []string
	for _, r := range readRecords(t, l) {
		if r.key == "t" {
			tv = append(tv, string(r.value))
		}
	}
	require.Equal(t, []string{"committed"}, tv)
	aborted, err := l.AbortedTxns(0, l.LogEndOffset())
	require.NoError(t, err)
	require.Len(t, aborted, 1, "the aborted-transaction index survives the swap")
	// ... and a reopen.
	require.NoError(t, l.Close())
	l, err = Open("/d", opts)
	require.NoError(t, err)
	aborted, err = l.AbortedTxns(0, l.LogEndOffset())
	require.NoError(t, err)
	require.Len(t, aborted, 1)
}

// TestCleanCrashAtEverySwapStep cuts power before every fsync, rename and
// removal of a cleaning (and reopens each image): the log must hold either
// the old or the new segments, never lose the latest value of a key, and
// leave no cleaner file behind.
func TestCleanCrashAtEverySwapStep(t *testing.T) {
	mem, faults := crashFS(t)
	opts := memOptions(faults)
	opts.SegmentBytes = 400
	l, err := Open(crashDir, opts)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 3))
	produced := map[int64]kv{}
	latest := map[string]kv{}
	ts := int64(1_700_000_000_000)
	for i := 0; i < 60; i++ {
		recs := []kv{{key: fmt.Sprint("k", rng.IntN(25)), value: fmt.Appendf(nil, "v%d", i), ts: ts + int64(i)}}
		if rng.IntN(6) == 0 {
			recs[0].value = nil
		}
		res, err := l.Append([][]byte{keyedBatch(t, recs, batch.CompressionNone, -1)}, 0)
		require.NoError(t, err)
		recs[0].offset = res.BaseOffset
		produced[res.BaseOffset], latest[recs[0].key] = recs[0], recs[0]
	}
	require.NoError(t, l.Sync())
	oldSegs := l.SegmentCount()
	type image struct {
		fs     *vfs.MemFS
		before string
	}
	var mu sync.Mutex
	var images []image
	faults.SetInjector(func(op vfs.Op, path string) error {
		switch op {
		case vfs.OpSync, vfs.OpSyncDir, vfs.OpRename, vfs.OpRemove:
			// A power cut losing everything unsynced, a kill -9 keeping
			// everything written, and a power cut keeping a random part.
			mu.Lock()
			images = append(images,
				image{fs: mem.Crash(vfs.CrashOptions{}), before: "power cut before " + op.String() + " " + path},
				image{fs: mem.Crash(vfs.CrashOptions{ProcessOnly: true}), before: "kill -9 before " + op.String() + " " + path},
				image{fs: mem.Crash(vfs.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(len(images)), 5))}), before: "partial power cut before " + op.String() + " " + path})
			mu.Unlock()
		}
		return nil
	})
	st, err := l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(ts), DeleteRetention: time.Hour,
		FirstUncleanable: l.HighWatermark(), MapMemory: 8 * mapSlotSize})
	faults.SetInjector(nil)
	require.NoError(t, err)
	require.Greater(t, st.Passes, 1, "a small map cleans in passes")
	require.Less(t, l.SegmentCount(), oldSegs)
	final := readRecords(t, l)
	checkAgainst(t, final, produced, latest)
	require.NoError(t, l.Close())

	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, len(images), 10)
	t.Logf("%d crash images, %d passes", len(images), st.Passes)
	damaged := 0
	for n, img := range images {
		if swaps := committedSwaps(img.fs, crashDir); len(swaps) > 0 {
			// The same image with its manifest damaged or gone: recovery
			// cannot know which old segments the swap replaces, and must
			// leave the committed swap alone rather than delete it.
			for _, manifest := range [][]byte{[]byte("garbage"), nil} {
				bad := img.fs.Crash(vfs.CrashOptions{ProcessOnly: true})
				if manifest == nil {
					require.NoError(t, bad.Remove(filepath.Join(crashDir, cleanerSwapFile)))
				} else {
					require.NoError(t, WriteFileAtomic(bad, crashDir, cleanerSwapFile, manifest))
				}
				_, err := Open(crashDir, memOptions(bad))
				require.ErrorIs(t, err, ErrCorrupt, "image %d (before %s)", n, img.before)
				require.Equal(t, swaps, committedSwaps(bad, crashDir), "image %d: the swap is left in place", n)
				damaged++
			}
		}
		rl, err := Open(crashDir, memOptions(img.fs))
		require.NoError(t, err, "image %d (before %s)", n, img.before)
		got := readRecords(t, rl)
		checkAgainst(t, got, produced, latest)
		require.Equal(t, int64(60), rl.LogEndOffset(), "image %d (before %s)", n, img.before)
		entries, err := img.fs.ReadDir(crashDir)
		require.NoError(t, err)
		for _, e := range entries {
			require.NotContains(t, e.Name, ".cleaned", "image %d", n)
			require.NotContains(t, e.Name, ".swap", "image %d", n)
			require.NotContains(t, e.Name, deletedSuffix, "image %d", n)
		}
		// Recovery left a log the cleaner can go on with.
		_, err = rl.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(ts), DeleteRetention: time.Hour,
			FirstUncleanable: rl.HighWatermark(), MapMemory: 64 << 10})
		require.NoError(t, err, "image %d (before %s)", n, img.before)
		checkAgainst(t, readRecords(t, rl), produced, latest)
		require.NoError(t, rl.Close())
	}
	require.Positive(t, damaged, "some images have a committed swap")
}

// TestCleanWhileReading: readers going through the log while it is cleaned
// see no error and no offset going backwards.
func TestCleanWhileReading(t *testing.T) {
	opts := memOptions(vfs.NewMem())
	opts.SegmentBytes = 400
	l := openLog(t, "/d", opts)
	ts := int64(1_700_000_000_000)
	for i := 0; i < 300; i++ {
		_, err := l.Append([][]byte{keyedBatch(t, []kv{{key: fmt.Sprint("k", i%7), value: fmt.Appendf(nil, "v%d", i), ts: ts}}, 0, -1)}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, l.Sync())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				off, last := int64(0), int64(-1)
				for off < l.HighWatermark() {
					data, err := l.Read(off, 200, l.HighWatermark())
					if err != nil {
						errs <- err
						return
					}
					if len(data) == 0 {
						break
					}
					_ = batch.Iterate(data, func(h batch.Header, raw []byte) bool {
						if h.BaseOffset <= last {
							errs <- fmt.Errorf("offset %d after %d", h.BaseOffset, last)
						}
						last = h.LastOffset()
						off = h.NextOffset()
						return true
					})
				}
			}
		}()
	}
	for i := 0; i < 20; i++ {
		_, err := l.Append([][]byte{keyedBatch(t, []kv{{key: fmt.Sprint("k", i%7), value: []byte("x"), ts: ts}}, 0, -1)}, 0)
		require.NoError(t, err)
		require.NoError(t, l.Sync())
		_, err = l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(ts), FirstUncleanable: l.HighWatermark(), MapMemory: 4 << 10})
		require.NoError(t, err)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// TestDirtyRatio: the ratio falls to zero after a cleaning and grows with
// new sealed segments; the checkpoint survives a reopen.
func TestDirtyRatio(t *testing.T) {
	mem := vfs.NewMem()
	opts := memOptions(mem)
	opts.SegmentBytes = 300
	l, err := Open("/d", opts)
	require.NoError(t, err)
	ts := int64(1_700_000_000_000)
	for i := 0; i < 40; i++ {
		_, err := l.Append([][]byte{keyedBatch(t, []kv{{key: fmt.Sprint("k", i%3), value: make([]byte, 50), ts: ts}}, 0, -1)}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, l.Sync())
	r, dirty := l.DirtyRatio(l.HighWatermark())
	require.Equal(t, 1.0, r)
	require.Positive(t, dirty)
	_, err = l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(ts), FirstUncleanable: l.HighWatermark(), MapMemory: 1 << 16})
	require.NoError(t, err)
	r, dirty = l.DirtyRatio(l.HighWatermark())
	require.Zero(t, dirty)
	require.Zero(t, r)
	to, err := l.CleanedTo()
	require.NoError(t, err)
	require.NoError(t, l.Close())
	l, err = Open("/d", opts)
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	to2, err := l.CleanedTo()
	require.NoError(t, err)
	require.Equal(t, to, to2)
	for i := 0; i < 40; i++ {
		_, err := l.Append([][]byte{keyedBatch(t, []kv{{key: fmt.Sprint("k", i%3), value: make([]byte, 50), ts: ts}}, 0, -1)}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, l.Sync())
	r, _ = l.DirtyRatio(l.HighWatermark())
	require.Greater(t, r, 0.5)
}

// TestCleanMinCompactionLagAndBound: segments newer than the lag, or at or
// past FirstUncleanable, are untouched.
func TestCleanMinCompactionLagAndBound(t *testing.T) {
	opts := memOptions(vfs.NewMem())
	opts.SegmentBytes = 300
	l := openLog(t, "/d", opts)
	ts := int64(1_700_000_000_000)
	for i := 0; i < 40; i++ {
		_, err := l.Append([][]byte{keyedBatch(t, []kv{{key: "k", value: make([]byte, 50), ts: ts + int64(i)*1000}}, 0, -1)}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, l.Sync())
	before := readRecords(t, l)
	st, err := l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(ts), MinCompactionLag: time.Hour, FirstUncleanable: l.HighWatermark(), MapMemory: 1 << 16})
	require.NoError(t, err)
	require.Zero(t, st.RecordsRemoved, "everything is within the lag")
	st, err = l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(ts + 3_600_000), FirstUncleanable: 10})
	require.NoError(t, err)
	after := readRecords(t, l)
	for _, r := range before {
		if r.offset >= 10 {
			require.Contains(t, after, r, "offset %d at or past the bound", r.offset)
		}
	}
	_, err = l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(ts + 3_600_000), FirstUncleanable: l.HighWatermark(), MapMemory: 1 << 16})
	require.NoError(t, err)
	after = readRecords(t, l)
	offs := make([]int64, len(after))
	for i, r := range after {
		offs[i] = r.offset
	}
	require.True(t, sort.SliceIsSorted(offs, func(i, j int) bool { return offs[i] < offs[j] }))
	l.segMu.RLock()
	active := l.segments[len(l.segments)-1].base
	l.segMu.RUnlock()
	var sealed int
	for _, r := range after {
		if r.offset < active {
			sealed++
		}
	}
	// Kafka's rule: the map covers the cleanable range only, so the latest
	// copy below the active segment stays.
	require.Equal(t, 1, sealed, "one sealed copy of k")
}

// cleanTestLog is a log of 80 one-record batches over 8 keys in segments
// of about 4 batches, fsynced; it returns what was produced.
func cleanTestLog(t *testing.T, fsys vfs.FS) (*Log, map[int64]kv, map[string]kv) {
	t.Helper()
	opts := memOptions(fsys)
	opts.SegmentBytes = 350
	l, err := Open("/d", opts)
	require.NoError(t, err)
	produced, latest := map[int64]kv{}, map[string]kv{}
	for i := 0; i < 80; i++ {
		r := kv{key: fmt.Sprint("k", i%8), value: fmt.Appendf(nil, "v%d", i), ts: 1_700_000_000_000}
		res, err := l.Append([][]byte{keyedBatch(t, []kv{r}, 0, -1)}, 0)
		require.NoError(t, err)
		r.offset = res.BaseOffset
		produced[r.offset], latest[r.key] = r, r
	}
	require.NoError(t, l.Sync())
	return l, produced, latest
}

func requireNoCleanerFiles(t *testing.T, fsys vfs.FS) {
	t.Helper()
	entries, err := fsys.ReadDir("/d")
	require.NoError(t, err)
	for _, e := range entries {
		require.NotContains(t, e.Name, cleanedSuffix)
		require.NotContains(t, e.Name, swapSuffix)
		require.NotContains(t, e.Name, deletedSuffix, "replaced files are removed after the swap")
		require.NotEqual(t, cleanerSwapFile, e.Name)
	}
}

// TestCleanAbortedByIOLimit: the throttle hook failing (or the context
// ending) stops the cleaning with its error, leaving the log as it was and
// no cleaner file; the next cleaning goes through.
func TestCleanAbortedByIOLimit(t *testing.T) {
	mem := vfs.NewMem()
	l, produced, latest := cleanTestLog(t, mem)
	defer func() { _ = l.Close() }()
	before := readRecords(t, l)
	stop := fmt.Errorf("budget exhausted")
	calls := 0
	for _, failAt := range []int{1, 3, 6} {
		calls = 0
		_, err := l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(1_700_000_000_000), FirstUncleanable: l.HighWatermark(),
			MapMemory: 1 << 16, IOLimit: func(ctx context.Context, n int) error {
				require.Positive(t, n)
				if calls++; calls == failAt {
					return stop
				}
				return nil
			}})
		require.ErrorIs(t, err, stop)
		requireNoCleanerFiles(t, mem)
		if failAt == 1 {
			require.Equal(t, before, readRecords(t, l))
		}
		checkAgainst(t, readRecords(t, l), produced, latest)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.Clean(ctx, CleanOptions{Now: time.UnixMilli(1_700_000_000_000), FirstUncleanable: l.HighWatermark(), MapMemory: 1 << 16})
	require.ErrorIs(t, err, context.Canceled)
	st, err := l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(1_700_000_000_000), FirstUncleanable: l.HighWatermark(), MapMemory: 1 << 16})
	require.NoError(t, err)
	require.Positive(t, st.RecordsRemoved)
	checkAgainst(t, readRecords(t, l), produced, latest)
	requireNoCleanerFiles(t, mem)
}

// TestCleanRacesRetention: DeleteRecordsBefore removing segments at every
// moment of a cleaning (each throttle call) stops or abandons the cleaning
// of what it removed; nothing deleted comes back, nothing else is lost, no
// cleaner file stays.
func TestCleanRacesRetention(t *testing.T) {
	calls := 0
	{
		l, _, _ := cleanTestLog(t, vfs.NewMem())
		_, err := l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(1_700_000_000_000), FirstUncleanable: l.HighWatermark(),
			MapMemory: 1 << 16, IOLimit: func(context.Context, int) error { calls++; return nil }})
		require.NoError(t, err)
		require.NoError(t, l.Close())
	}
	require.Greater(t, calls, 10)
	abandoned := 0
	for k := 1; k <= calls; k++ {
		mem := vfs.NewMem()
		l, produced, latest := cleanTestLog(t, mem)
		var logs bytes.Buffer
		l.logger = slog.New(slog.NewTextHandler(&logs, nil))
		bases := l.SegmentBases()
		cut := bases[len(bases)/2]
		n := 0
		_, err := l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(1_700_000_000_000), FirstUncleanable: l.HighWatermark(),
			MapMemory: 1 << 16, IOLimit: func(ctx context.Context, _ int) error {
				if n++; n == k {
					_, err := l.DeleteRecordsBefore(cut)
					require.NoError(t, err)
				}
				return nil
			}})
		require.NoError(t, err, "k=%d", k)
		if strings.Contains(logs.String(), "abandoned") {
			abandoned++
		}
		requireNoCleanerFiles(t, mem)
		got := readRecords(t, l)
		require.Equal(t, cut, l.LogStartOffset())
		for _, r := range got {
			require.GreaterOrEqual(t, r.offset, cut, "k=%d: a deleted record came back", k)
		}
		checkAgainst(t, got, produced, latest)
		require.NoError(t, l.Close())
	}
	require.Positive(t, abandoned, "some swap found its segments gone")
}

// TestCleanRemovesMarkersWhenSafe follows a commit marker and an abort
// marker through Kafka's rules: kept while a batch of their transaction is
// read by the cleaning, then stamped with a delete horizon, kept until it,
// then removed, with the aborted transaction's index entry.
func TestCleanRemovesMarkersWhenSafe(t *testing.T) {
	opts := memOptions(vfs.NewMem())
	opts.SegmentBytes = 300
	l := openLog(t, "/d", opts)
	var err error
	t0 := time.UnixMilli(1_700_000_000_000)
	ts := t0.UnixMilli()
	txnBatch := func(pid int64, key, value string) []byte {
		h := batch.Header{PartitionLeaderEpoch: -1, FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: pid,
			Attributes: batch.TransactionalBit}
		return batch.Build(h, []batch.Record{{Key: []byte(key), Value: []byte(value)}})
	}
	// pid 11 commits c=1; pid 12 aborts d=1. Both write a later
	// non-transactional batch, so their markers are not their last batch.
	_, err = l.Append([][]byte{txnBatch(11, "c", "1")}, 0)
	require.NoError(t, err)
	commit, err := l.Append([][]byte{batch.BuildEndTxnMarker(11, 0, batch.EndTxnMarker{Commit: true}, ts)}, 0)
	require.NoError(t, err)
	ab, err := l.Append([][]byte{txnBatch(12, "d", "1")}, 0)
	require.NoError(t, err)
	abort, err := l.AppendWith([][]byte{batch.BuildEndTxnMarker(12, 0, batch.EndTxnMarker{}, ts)}, 0,
		[]AbortedTxn{{ProducerID: 12, FirstOffset: ab.BaseOffset, LastOffset: ab.BaseOffset + 1, LastStableOffset: ab.BaseOffset}})
	require.NoError(t, err)
	for _, pid := range []int64{11, 12} {
		_, err = l.Append([][]byte{keyedBatch(t, []kv{{key: fmt.Sprint("z", pid), value: []byte("z"), ts: ts}}, 0, pid)}, 0)
		require.NoError(t, err)
	}
	pad := 0
	addDirty := func() { // new sealed data, so each Clean has a pass
		for i := 0; i < 3; i++ {
			pad++
			_, err := l.Append([][]byte{keyedBatch(t, []kv{{key: "c", value: make([]byte, 150), ts: ts}}, 0, -1)}, 0)
			require.NoError(t, err)
		}
		require.NoError(t, l.Sync())
	}
	markers := func() (out []int64) {
		require.NoError(t, l.Batches(0, func(h batch.Header) bool {
			if h.IsControl() && h.NumRecords > 0 {
				out = append(out, h.BaseOffset)
			}
			return true
		}))
		return out
	}
	clean := func(at time.Time) {
		addDirty()
		_, err := l.Clean(context.Background(), CleanOptions{Now: at, DeleteRetention: time.Hour, FirstUncleanable: l.HighWatermark(), MapMemory: 1 << 16})
		require.NoError(t, err)
	}
	clean(t0)
	require.Equal(t, []int64{commit.BaseOffset, abort.BaseOffset}, markers(), "first cleaning reads their transactions' batches")
	clean(t0)
	require.Equal(t, []int64{commit.BaseOffset, abort.BaseOffset}, markers(), "second: horizon stamped")
	require.NoError(t, l.Batches(0, func(h batch.Header) bool {
		if h.IsControl() {
			require.NotZero(t, h.Attributes&batch.DeleteHorizonBit)
			require.Equal(t, t0.Add(time.Hour).UnixMilli(), h.FirstTimestamp)
		}
		return true
	}))
	clean(t0.Add(30 * time.Minute))
	require.Len(t, markers(), 2, "before the horizon")
	aborted, err := l.AbortedTxns(0, l.LogEndOffset())
	require.NoError(t, err)
	require.Len(t, aborted, 1)
	clean(t0.Add(time.Hour))
	require.Empty(t, markers(), "past the horizon")
	aborted, err = l.AbortedTxns(0, l.LogEndOffset())
	require.NoError(t, err)
	require.Empty(t, aborted, "the abort marker's index entry goes with it")
	require.NoError(t, l.Close())
	l, err = Open("/d", opts)
	require.NoError(t, err)
	aborted, err = l.AbortedTxns(0, l.LogEndOffset())
	require.NoError(t, err)
	require.Empty(t, aborted, "and stays gone after a reopen")
	require.Empty(t, markers())
}

// removeGently frees a replaced file a step at a time, then removes it; a
// cancelled cleaning removes what is left at once.
func TestRemoveGently(t *testing.T) {
	mem, faults := crashFS(t)
	var truncations []string
	faults.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpTruncate {
			truncations = append(truncations, path)
		}
		return nil
	})
	write := func(name string, size int) string {
		path := filepath.Join(crashDir, name)
		f, err := faults.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		_, err = f.WriteAt(make([]byte, size), 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		return path
	}
	yields := 0
	path := write("00000000000000000000.log"+deletedSuffix, 3*freeStep+1)
	require.NoError(t, removeGently(context.Background(), faults, path, func() { yields++ }))
	_, err := mem.Stat(path)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Len(t, truncations, 3, "freed %d bytes at a time before the removal", freeStep)
	require.Equal(t, 3, yields)

	truncations = nil
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path = write("00000000000000000100.log"+deletedSuffix, 3*freeStep)
	require.NoError(t, removeGently(ctx, faults, path, func() {}))
	_, err = mem.Stat(path)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Empty(t, truncations, "an aborted cleaning removes at once")

	require.ErrorIs(t, removeGently(context.Background(), faults, path, func() {}), fs.ErrNotExist)
}

// The replaced segments' files are freed with no lock held: an append goes
// through while they are being removed (step 6 of the swap).
func TestCleanFreesReplacedFilesWithoutTheAppendLock(t *testing.T) {
	_, faults := crashFS(t)
	opts := memOptions(faults)
	opts.SegmentBytes = 400
	l, err := Open(crashDir, opts)
	require.NoError(t, err)
	defer l.Close()
	ts := int64(1_700_000_000_000)
	for i := range 40 {
		_, err := l.Append([][]byte{keyedBatch(t, []kv{{key: fmt.Sprint("k", i%4), value: fmt.Appendf(nil, "v%d", i), ts: ts}}, batch.CompressionNone, -1)}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, l.Sync())

	removing, appended := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var blocked bool
	faults.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpRemove && strings.HasSuffix(path, deletedSuffix) {
			once.Do(func() {
				close(removing)
				select {
				case <-appended:
				case <-time.After(5 * time.Second):
					blocked = true // the append waited for the removal
				}
			})
		}
		return nil
	})
	cleaned := make(chan error, 1)
	go func() {
		_, err := l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(ts), FirstUncleanable: l.HighWatermark(), MapMemory: 64 << 10})
		cleaned <- err
	}()
	select {
	case <-removing:
	case <-time.After(10 * time.Second):
		t.Fatal("the cleaning removed no replaced file")
	}
	_, err = l.Append([][]byte{keyedBatch(t, []kv{{key: "k0", value: []byte("during"), ts: ts}}, batch.CompressionNone, -1)}, 0)
	require.NoError(t, err)
	close(appended)
	require.NoError(t, <-cleaned)
	faults.SetInjector(nil)
	require.False(t, blocked, "the append waited for the removal of a replaced file")
}

// TestCleanBatchWithMoreKeysThanTheMap: a batch with more distinct keys
// than the key map holds (a librdkafka producer sends up to 10,000 records
// a batch; a 64 KiB map holds 1,843 keys) is cleaned in passes whose map
// ends inside the batch, as Kafka's does, instead of making the log
// uncleanable. Compressed batches too: each pass decodes the batch again.
func TestCleanBatchWithMoreKeysThanTheMap(t *testing.T) {
	for _, codec := range []int8{batch.CompressionNone, batch.CompressionZstd} {
		t.Run(fmt.Sprint("codec ", codec), func(t *testing.T) {
			mem := vfs.NewMem()
			opts := memOptions(mem)
			opts.SegmentBytes = 64 // one batch a segment
			l := openLog(t, "/d", opts)
			produced, latest := map[int64]kv{}, map[string]kv{}
			ts := int64(1_700_000_000_000)
			// Two batches of the same 100 keys (the second supersedes the
			// first), then one record of another key so that both are
			// sealed.
			for round, n := range []int{100, 100, 1} {
				recs := make([]kv, n)
				for i := range recs {
					recs[i] = kv{key: fmt.Sprint("k", i), value: fmt.Appendf(nil, "v%d-%d", round, i), ts: ts}
					if round == 2 {
						recs[i].key = "end"
					}
				}
				res, err := l.Append([][]byte{keyedBatch(t, recs, codec, -1)}, 0)
				require.NoError(t, err)
				for i := range recs {
					recs[i].offset = res.BaseOffset + int64(i)
					produced[recs[i].offset], latest[recs[i].key] = recs[i], recs[i]
				}
			}
			require.NoError(t, l.Sync())
			st, err := l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(ts),
				FirstUncleanable: l.HighWatermark(), MapMemory: 16 * mapSlotSize})
			require.NoError(t, err)
			require.Equal(t, 14, st.MapCapacity)
			require.GreaterOrEqual(t, st.Passes, 200/14, "the map ends inside batches")
			require.Equal(t, int64(200), st.CleanedTo, "both sealed batches cleaned")
			got := readRecords(t, l)
			checkAgainst(t, got, produced, latest)
			require.Len(t, got, 101, "only the second batch's records are left, and the active segment's")
			require.Equal(t, int64(100), got[0].offset)
		})
	}
}
