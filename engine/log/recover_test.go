package log

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/vfs"
)

// fillLog appends n batches and waits until they are durable.
func fillLog(t *testing.T, l *Log, n int, tag int) []stored {
	t.Helper()
	var out []stored
	for i := 0; i < n; i++ {
		out = append(out, appendBatch(t, l, makeBatch(1+i%3, 50+(i*37)%250, int64(10_000+i*7), tag+i), 1))
	}
	require.NoError(t, l.WaitDurable(context.Background(), out[len(out)-1].last))
	return out
}

// answers captures everything lookups return, to compare before and after
// an index rebuild.
type answers struct {
	reads   map[int64][]byte
	times   map[int64][3]int64
	maxOff  int64
	maxTs   int64
	batches []int64
}

func collectAnswers(t *testing.T, l *Log) answers {
	t.Helper()
	a := answers{reads: map[int64][]byte{}, times: map[int64][3]int64{}}
	for off := l.LogStartOffset(); off <= l.LogEndOffset(); off++ {
		data, err := l.Read(off, 700, l.HighWatermark())
		require.NoError(t, err)
		a.reads[off] = data
	}
	for ts := int64(9_990); ts < 10_000+7*200+10; ts += 3 {
		off, rts, ok, err := l.OffsetForTimestamp(ts)
		require.NoError(t, err)
		okv := int64(0)
		if ok {
			okv = 1
		}
		a.times[ts] = [3]int64{off, rts, okv}
	}
	a.maxOff, a.maxTs = l.MaxTimestamp()
	require.NoError(t, l.Batches(0, func(h batch.Header) bool { a.batches = append(a.batches, h.BaseOffset); return true }))
	return a
}

// tailOptions keeps a test log in one segment and never checkpoints the
// recovery point on its own, so after a crash all of it is the unflushed
// tail that recovery may cut.
func tailOptions() Options {
	o := testOptions(nil)
	o.SegmentBytes = 1 << 20
	o.RecoveryPointInterval = time.Hour
	return o
}

func TestRecoveryTornTail(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, tailOptions())
	want := fillLog(t, l, 60, 0)
	before := collectAnswers(t, l)
	l.crash()

	// Tear the last batch: cut the active segment mid-batch.
	logs := segmentFiles(t, dir, logExt)
	require.Len(t, logs, 1)
	last := logs[0]
	lastBatch := want[len(want)-1]
	require.NoError(t, os.Truncate(last, fileSize(t, last)-int64(len(lastBatch.bytes))/2))

	l2 := openLog(t, dir, tailOptions())
	require.Equal(t, lastBatch.base, l2.LogEndOffset())
	require.Equal(t, lastBatch.base, l2.HighWatermark())
	requireSameBatches(t, want[:len(want)-1], readAll(t, l2, 0, 1<<20))
	require.Empty(t, l2.CorruptRanges(), "a torn tail is cut, not reported as damage")
	// Indexes were rebuilt: answers below the cut are unchanged.
	after := collectAnswers(t, l2)
	for off := int64(0); off < lastBatch.base; off++ {
		require.Equal(t, before.reads[off], after.reads[off], "read %d", off)
	}
	// Appending continues at the cut.
	s := appendBatch(t, l2, makeBatch(1, 10, 1, 1), 1)
	require.Equal(t, lastBatch.base, s.base)
}

// A batch cut short below the recovery point was on disk whole: it is
// damage, not a tail. Nothing is cut, its offsets are reported and fail to
// read, and appends continue after the recovery point.
func TestTornBatchBelowRecoveryPointIsKept(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, tailOptions())
	want := fillLog(t, l, 60, 0)
	require.NoError(t, l.Close()) // checkpoints the recovery point at the log end
	require.NoError(t, os.Remove(filepath.Join(dir, cleanFile)))

	last := segmentFiles(t, dir, logExt)[0]
	lastBatch := want[len(want)-1]
	size := fileSize(t, last)
	require.NoError(t, os.Truncate(last, size-int64(len(lastBatch.bytes))/2))

	l2 := openLog(t, dir, tailOptions())
	require.Equal(t, lastBatch.last+1, l2.LogEndOffset(), "offsets of flushed data are never reused")
	require.Equal(t, []CorruptRange{{Segment: 0, FromOffset: lastBatch.base, ToOffset: lastBatch.last + 1,
		FromByte: size - int64(len(lastBatch.bytes)), ToByte: size - int64(len(lastBatch.bytes))/2,
		Reason: l2.CorruptRanges()[0].Reason}}, l2.CorruptRanges())
	require.Equal(t, []int{len(want) - 1}, readEach(t, l2, want))
	s := appendBatch(t, l2, makeBatch(1, 10, 1, 1), 1)
	require.Equal(t, lastBatch.last+1, s.base)
	require.NoError(t, l2.WaitDurable(context.Background(), s.last))
	require.Equal(t, s.bytes, readAll(t, l2, s.base, 1<<20)[0].bytes)
}

func TestRecoveryTornHeader(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testOptions(nil))
	want := fillLog(t, l, 10, 0)
	l.crash()
	logs := segmentFiles(t, dir, logExt)
	last := logs[len(logs)-1]
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, 30)) // half a header of zeros
	require.NoError(t, err)
	require.NoError(t, f.Close())
	l2 := openLog(t, dir, testOptions(nil))
	requireSameBatches(t, want, readAll(t, l2, 0, 1<<20))
}

func TestRecoveryCRCFlip(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, tailOptions())
	want := fillLog(t, l, 60, 0)
	l.crash()

	logs := segmentFiles(t, dir, logExt)
	last := logs[len(logs)-1]
	lastBatch := want[len(want)-1]
	f, err := os.OpenFile(last, os.O_RDWR, 0)
	require.NoError(t, err)
	pos := fileSize(t, last) - 3
	var b [1]byte
	_, err = f.ReadAt(b[:], pos)
	require.NoError(t, err)
	b[0] ^= 0x40
	_, err = f.WriteAt(b[:], pos)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	l2 := openLog(t, dir, tailOptions())
	require.Equal(t, lastBatch.base, l2.LogEndOffset())
	requireSameBatches(t, want[:len(want)-1], readAll(t, l2, 0, 1<<20))
	require.Equal(t, fileSize(t, last), l2.active.size.Load(), "file truncated to the valid prefix")
}

// Damage in a sealed segment is never a tail: nothing after it is deleted.
// The segment is trusted at open (sealed segments are flushed), so the
// damage is found by the CRC check of the first read, reported, and only
// its own offsets fail.
func TestCorruptionInEarlierSegmentIsKept(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(nil)
	opts.FlushAlways = false
	opts.FlushInterval = 1 << 40
	l := openLog(t, dir, opts)
	var want []stored
	for i := 0; i < 60; i++ {
		want = append(want, appendBatch(t, l, makeBatch(2, 200, int64(i), i), 0))
	}
	segments := l.SegmentCount()
	require.Greater(t, segments, 3)
	l.crash()

	logs := segmentFiles(t, dir, logExt)
	second := logs[1]
	base, _, ok := parseSegmentFileName(filepath.Base(second))
	require.True(t, ok)
	// Corrupt the second batch of the second segment.
	var idx int
	for idx = range want {
		if want[idx].base >= base {
			break
		}
	}
	idx++
	f, err := os.OpenFile(second, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xff, 0xff}, int64(len(want[idx-1].bytes))+batch.HeaderSize+5)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	l2 := openLog(t, dir, opts)
	require.Equal(t, want[len(want)-1].last+1, l2.LogEndOffset(), "nothing after the damage is cut")
	require.Equal(t, segments, l2.SegmentCount())
	for i, w := range want {
		data, err := l2.Read(w.base, 1, l2.HighWatermark())
		if i == idx {
			require.ErrorIs(t, err, ErrCorrupt, "the damaged batch is not served")
			continue
		}
		require.NoError(t, err, "batch %d", i)
		require.Equal(t, w.bytes, data, "batch %d", i)
	}
	cr := l2.CorruptRanges()
	require.Len(t, cr, 1)
	require.Equal(t, want[idx].base, cr[0].FromOffset)
	require.Equal(t, want[idx+1].base, cr[0].ToOffset)
	require.Equal(t, 1, l2.Stats().CorruptRanges)
}

func TestIndexRebuildSameAnswers(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(nil)
	opts.IndexIntervalBytes = 300
	l := openLog(t, dir, opts)
	fillLog(t, l, 120, 0)
	require.NoError(t, l.Close())

	l1 := openLog(t, dir, opts)
	before := collectAnswers(t, l1)
	require.NoError(t, l1.Close())
	idxBefore := map[string][]byte{}
	for _, ext := range []string{indexExt, timeIndexExt} {
		for _, p := range segmentFiles(t, dir, ext) {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			idxBefore[p] = b
			require.NoError(t, os.Remove(p))
		}
	}
	require.NotEmpty(t, idxBefore)

	l2 := openLog(t, dir, opts)
	require.Equal(t, l2.SegmentCount(), l2.scannedAtOpen, "every segment rebuilt")
	after := collectAnswers(t, l2)
	require.Equal(t, before, after)
	require.NoError(t, l2.Close())
	for p, b := range idxBefore {
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, b, got, "rebuilt %s", filepath.Base(p))
	}

	// A stale (truncated to a partial entry) index is also rebuilt.
	p := segmentFiles(t, dir, indexExt)[0]
	require.NoError(t, os.Truncate(p, fileSize(t, p)-3))
	l3 := openLog(t, dir, opts)
	require.Equal(t, 1, l3.scannedAtOpen)
	require.Equal(t, before, collectAnswers(t, l3))
}

func TestCleanShutdownSkipsScan(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testOptions(nil))
	want := fillLog(t, l, 80, 0)
	require.NoError(t, l.Close())
	require.FileExists(t, filepath.Join(dir, cleanFile))

	l2 := openLog(t, dir, testOptions(nil))
	require.Zero(t, l2.scannedAtOpen, "clean open scans nothing")
	require.NoFileExists(t, filepath.Join(dir, cleanFile), "marker removed on open")
	requireSameBatches(t, want, readAll(t, l2, 0, 1<<20))
	more := fillLog(t, l2, 5, 1000)
	l2.crash()

	// After a crash only the active segment (past the recovery point) is
	// scanned.
	l3 := openLog(t, dir, testOptions(nil))
	require.Equal(t, 1, l3.scannedAtOpen)
	requireSameBatches(t, append(want, more...), readAll(t, l3, 0, 1<<20))

	// A marker that no longer matches the files is ignored.
	require.NoError(t, l3.Close())
	last := segmentFiles(t, dir, logExt)
	f, err := os.OpenFile(last[len(last)-1], os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{1, 2, 3})
	require.NoError(t, err)
	require.NoError(t, f.Close())
	l4 := openLog(t, dir, testOptions(nil))
	require.Equal(t, 1, l4.scannedAtOpen)
	requireSameBatches(t, append(want, more...), readAll(t, l4, 0, 1<<20))
}

func TestOrphanAndTempFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testOptions(nil))
	want := fillLog(t, l, 5, 0)
	require.NoError(t, l.Close())
	orphan := filepath.Join(dir, segmentFileName(99999, indexExt))
	tmp := filepath.Join(dir, logStartFile+tmpSuffix)
	require.NoError(t, os.WriteFile(orphan, []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(tmp, []byte("x"), 0o644))
	l2 := openLog(t, dir, testOptions(nil))
	require.NoFileExists(t, orphan)
	require.NoFileExists(t, tmp)
	requireSameBatches(t, want, readAll(t, l2, 0, 1<<20))
}

func TestCorruptCheckpointsRecover(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testOptions(nil))
	want := fillLog(t, l, 40, 0)
	require.NoError(t, l.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, epochFile), []byte("garbage"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, recoveryPointFile), []byte("0\nxyz\n"), 0o644))
	l2 := openLog(t, dir, testOptions(nil))
	require.Zero(t, l2.scannedAtOpen, "a bad derived file costs no rescan")
	require.Equal(t, []EpochEntry{{1, 0}}, l2.LeaderEpochs(), "epochs rebuilt from batches")
	requireSameBatches(t, want, readAll(t, l2, 0, 1<<20))
}

// An offset index entry moved by 100 bytes (the reported case: fetches at
// fixed offsets failed for good, silently) is caught when used: the lookup
// scans instead, the index is rebuilt as it was, and it is reported.
func TestMovedIndexEntryIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(nil)
	opts.IndexIntervalBytes = 300
	l := openLog(t, dir, opts)
	want := fillLog(t, l, 80, 0)
	require.NoError(t, l.Close())
	p := segmentFiles(t, dir, indexExt)[1]
	orig, err := os.ReadFile(p)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(orig), 2*offsetEntrySize)
	moved := append([]byte(nil), orig...)
	binary.BigEndian.PutUint32(moved[offsetEntrySize+4:], binary.BigEndian.Uint32(moved[offsetEntrySize+4:])+100)
	require.NoError(t, os.WriteFile(p, moved, 0o644))

	l2 := openLog(t, dir, opts)
	require.Empty(t, readEach(t, l2, want))
	require.EqualValues(t, 1, l2.Stats().IndexFailures)
	rebuilt, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, orig, rebuilt)
	require.Empty(t, readEach(t, l2, want))
	require.EqualValues(t, 1, l2.Stats().IndexFailures, "trusted again once rebuilt")
}

// A missing leader-epoch checkpoint is rebuilt from every segment's batches,
// not only the ones recovery scanned (it once said epoch 0 started at the
// active segment's base).
func TestMissingEpochCheckpointIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testOptions(nil))
	var want []stored
	for i := 0; i < 90; i++ {
		want = append(want, appendBatch(t, l, makeBatch(1, 100, int64(i), i), int32(i/30)))
	}
	require.NoError(t, l.WaitDurable(context.Background(), want[len(want)-1].last))
	epochs := l.LeaderEpochs()
	require.Equal(t, []EpochEntry{{0, 0}, {1, want[30].base}, {2, want[60].base}}, epochs)
	for _, stop := range []func(){func() { require.NoError(t, l.Close()) }, func() { l.crash() }} {
		stop()
		require.NoError(t, os.Remove(filepath.Join(dir, epochFile)))
		l = openLog(t, dir, testOptions(nil))
		require.Equal(t, epochs, l.LeaderEpochs())
		require.Empty(t, readEach(t, l, want))
	}
}

// Damage in flushed data costs only the damaged batches: the search for
// where it ends keeps an intact batch between two damaged ones, whether or
// not the first damaged header still says where that batch ends.
func TestResyncKeepsAnIntactBatchBetweenTwoDamaged(t *testing.T) {
	for _, tc := range []struct {
		name      string
		firstByte int64 // offset into batch 2 of the byte flipped
	}{
		{"body of the first", 100},                // its header still gives its extent
		{"magic of the first", batch.MagicOffset}, // its extent is unknown
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, opts, want, pos := flushedMemLog(t, 10, nil)
			name := segmentFileName(0, logExt)
			b := m.read(t, name)
			m.writeAt(t, name, []byte{b[pos[2]+tc.firstByte] ^ 0x5a}, pos[2]+tc.firstByte)
			m.writeAt(t, name, []byte{b[pos[4]+batch.MagicOffset] ^ 0x5a}, pos[4]+batch.MagicOffset)
			l, err := Open(m.dir, opts)
			require.NoError(t, err)
			defer l.Close()
			require.Equal(t, []int{2, 4}, readEach(t, l, want), "only the damaged batches are lost")
		})
	}
}

// A record value that is itself a valid batch (a mirroring tool's payload)
// is never taken for a batch of the log when the batch holding it is
// damaged: while that batch's length field gives its extent, the search
// resumes after it (wherever else its header is damaged); without it, the
// real next batch chains on and the embedded one does not.
func TestResyncSkipsABatchEmbeddedInADamagedOne(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte, pos []int64) (at int64, v []byte)
	}{
		{"its last byte", func(b []byte, pos []int64) (int64, []byte) { return pos[3] - 1, []byte{b[pos[3]-1] ^ 0x5a} }},
		{"its magic byte", func(b []byte, pos []int64) (int64, []byte) {
			at := pos[2] + batch.MagicOffset
			return at, []byte{b[at] ^ 0x5a}
		}},
		{"its length field", func(b []byte, pos []int64) (int64, []byte) { return pos[2] + 8, []byte{0x7f} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, opts, want, pos := flushedMemLog(t, 6, func(i int, base int64) []byte {
				if i != 2 {
					return nil
				}
				return batchHoldingABatch(base + 1) // plausible: inside the outer batch's offsets
			})
			name := segmentFileName(0, logExt)
			at, v := tc.damage(m.read(t, name), pos)
			m.writeAt(t, name, v, at)
			l, err := Open(m.dir, opts)
			require.NoError(t, err)
			defer l.Close()
			require.Equal(t, []int{2}, readEach(t, l, want))
			_, err = l.Read(want[2].base+1, 1, l.HighWatermark())
			require.ErrorIs(t, err, ErrCorrupt, "the embedded batch is not served")
			cr := l.CorruptRanges()
			require.Len(t, cr, 1)
			require.Equal(t, want[2].base, cr[0].FromOffset)
			require.Equal(t, want[3].base, cr[0].ToOffset)
		})
	}
}

// flushedMemLog writes n batches of 3 records (custom(i, base) may supply
// batch i instead) to one segment, all flushed, and closes the log as a
// crash would after the flush: the next open scans it. It returns where
// each batch starts (and where the last ends).
func flushedMemLog(t *testing.T, n int, custom func(i int, base int64) []byte) (memLog, Options, []stored, []int64) {
	t.Helper()
	mem := vfs.NewMem()
	m := memLog{fs: mem, dir: "/data/t-0"}
	opts := memOptions(mem)
	opts.SegmentBytes = 1 << 20
	l, err := Open(m.dir, opts)
	require.NoError(t, err)
	var want []stored
	pos := []int64{0}
	for i := 0; i < n; i++ {
		var b []byte
		if custom != nil {
			b = custom(i, l.LogEndOffset())
		}
		if b == nil {
			b = makeBatch(3, 100, int64(1000+i), i)
		}
		want = append(want, appendBatch(t, l, b, 1))
		pos = append(pos, pos[i]+int64(len(want[i].bytes)))
	}
	require.NoError(t, l.WaitDurable(context.Background(), want[n-1].last))
	require.NoError(t, l.Close())
	m.remove(t, cleanFile) // the recovery point is the log end: all of it flushed
	return m, opts, want, pos
}

// Flushed batches gone from the end of a segment leave no bytes to mark:
// the range recovery finds is kept in a checkpoint, so it is still
// reported and refused after the next restart and after appends, until a
// truncation below it drops it.
func TestMissingRangeSurvivesRestarts(t *testing.T) {
	m, opts, want, _ := flushedMemLog(t, 5, nil)
	name := segmentFileName(0, logExt)
	f, err := m.fs.OpenFile(m.path(name), os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(int64(len(m.read(t, name))-len(want[4].bytes))))
	require.NoError(t, f.Close())

	gone := CorruptRange{Segment: 0, FromOffset: want[4].base, ToOffset: want[4].last + 1, FromByte: -1, ToByte: -1,
		Reason: "flushed batches missing at the end of a segment"}
	check := func(l *Log, when string) {
		t.Helper()
		require.Equal(t, []CorruptRange{gone}, l.CorruptRanges(), when)
		_, err := l.Read(want[4].base, 1, l.HighWatermark())
		require.ErrorIs(t, err, ErrCorrupt, when)
		require.Equal(t, []int{4}, readEach(t, l, want), when)
	}
	l, err := Open(m.dir, opts)
	require.NoError(t, err)
	check(l, "first open")
	require.NoError(t, l.Close())

	l, err = Open(m.dir, opts)
	require.NoError(t, err)
	check(l, "after a restart")
	nb := appendBatch(t, l, makeBatch(1, 10, 9999, 99), 1)
	require.Equal(t, want[4].last+1, nb.base, "the missing offsets are not given again")
	require.NoError(t, l.WaitDurable(context.Background(), nb.last))
	l.crash()

	l, err = Open(m.dir, opts)
	require.NoError(t, err)
	check(l, "after appends and a crash")
	require.NoError(t, l.TruncateTo(want[4].base))
	require.Empty(t, l.CorruptRanges(), "truncated below the range")
	require.NoError(t, l.Close())
	l, err = Open(m.dir, opts)
	require.NoError(t, err)
	defer l.Close()
	require.Empty(t, l.CorruptRanges())
	require.Equal(t, want[4].base, l.LogEndOffset())
	require.Empty(t, readEach(t, l, want[:4]))
}

// Damage a read finds at the end of the active segment ends where the
// batch appended after it starts: the offsets after it are reported as
// served, and walks over the log (producer state, group replay) see them.
func TestDamageAtTheActiveEndEndsAtTheNextAppend(t *testing.T) {
	mem := vfs.NewMem()
	m := memLog{fs: mem, dir: "/data/t-0"}
	opts := memOptions(mem)
	opts.SegmentBytes = 1 << 20
	l, err := Open(m.dir, opts)
	require.NoError(t, err)
	var want []stored
	now := time.Now().UnixMilli() // recent: the segment is not rolled for its age
	for i := 0; i < 4; i++ {
		want = append(want, appendBatch(t, l, makeBatch(3, 100, now, i), 1))
	}
	require.NoError(t, l.Close()) // clean: the next open trusts the files
	name := segmentFileName(0, logExt)
	b := m.read(t, name)
	m.writeAt(t, name, []byte{b[len(b)-10] ^ 0x5a}, int64(len(b)-10))

	l, err = Open(m.dir, opts)
	require.NoError(t, err)
	defer l.Close()
	require.Equal(t, []int{3}, readEach(t, l, want), "the read finds the damage")
	cr := l.CorruptRanges()
	require.Len(t, cr, 1)
	require.EqualValues(t, -1, cr[0].ToOffset, "nothing follows it yet")

	next := appendBatch(t, l, makeBatch(2, 10, now, 5), 1)
	require.NoError(t, l.WaitDurable(context.Background(), next.last))
	cr = l.CorruptRanges()
	require.Len(t, cr, 1)
	require.Equal(t, want[3].base, cr[0].FromOffset)
	require.Equal(t, []int64{0}, l.SegmentBases(), "appended to the same segment")
	require.Equal(t, next.base, cr[0].ToOffset)
	var seen []int64
	require.NoError(t, l.VerifiedBatches(0, func(h batch.Header, _ []byte) bool {
		seen = append(seen, h.BaseOffset)
		return true
	}))
	require.Equal(t, []int64{want[0].base, want[1].base, want[2].base, next.base}, seen)
}

// A directory left with no segments but a missing-offsets checkpoint (an
// operator cleared the .log files, or a crash cut a reset short) starts
// empty, and the old ranges go: they must not come back over the new
// log's acknowledged records.
func TestMissingRangesDoNotOutliveTheirLog(t *testing.T) {
	m, opts, want, _ := flushedMemLog(t, 5, nil)
	name := segmentFileName(0, logExt)
	f, err := m.fs.OpenFile(m.path(name), os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(int64(len(m.read(t, name))-len(want[4].bytes))))
	require.NoError(t, f.Close())
	l, err := Open(m.dir, opts)
	require.NoError(t, err)
	require.Len(t, l.CorruptRanges(), 1)
	require.NoError(t, l.Close())

	// The crash window: every segment file gone, checkpoints of the reset
	// not written yet.
	entries, err := m.fs.ReadDir(m.dir)
	require.NoError(t, err)
	for _, e := range entries {
		if n := e.Name; strings.HasSuffix(n, logExt) || strings.HasSuffix(n, indexExt) || strings.HasSuffix(n, timeIndexExt) ||
			n == recoveryPointFile || n == cleanFile {
			require.NoError(t, m.fs.Remove(m.path(n)))
		}
	}
	l, err = Open(m.dir, opts)
	require.NoError(t, err)
	require.Empty(t, l.CorruptRanges())
	var last int64
	for i := 0; i < 30; i++ {
		last = appendBatch(t, l, makeBatch(1, 10, 9999, i), 1).last
	}
	require.NoError(t, l.WaitDurable(context.Background(), last))
	require.Greater(t, last, want[4].last, "the new records cover the old range")
	require.NoError(t, l.Close())

	l, err = Open(m.dir, opts)
	require.NoError(t, err)
	defer l.Close()
	require.Empty(t, l.CorruptRanges(), "no range of the old log comes back")
	_, err = l.Read(want[4].base, 1, l.HighWatermark())
	require.NoError(t, err, "an acknowledged new record is served")
}

// The same when the damaged batch holding an embedded one is the last of
// the log: with no real batch after it, the damage runs to the end, and
// the embedded batch is not taken for the next one.
func TestResyncSkipsABatchEmbeddedInTheLastDamagedOne(t *testing.T) {
	m, opts, want, pos := flushedMemLog(t, 3, func(i int, base int64) []byte {
		if i != 2 {
			return nil
		}
		return batchHoldingABatch(base + 1)
	})
	name := segmentFileName(0, logExt)
	b := m.read(t, name)
	m.writeAt(t, name, []byte{b[pos[3]-1] ^ 0x5a}, pos[3]-1)
	l, err := Open(m.dir, opts)
	require.NoError(t, err)
	defer l.Close()
	require.Equal(t, []int{2}, readEach(t, l, want))
	_, err = l.Read(want[2].base+1, 1, l.HighWatermark())
	require.ErrorIs(t, err, ErrCorrupt, "the embedded batch is not served")
	next := appendBatch(t, l, makeBatch(1, 10, 5, 5), 1)
	require.Equal(t, want[2].last+1, next.base)
}
