package log

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/vfs"
)

// faultyLog is a log on a MemFS behind a fault injector that fails the
// chosen operation while armed.
type faultyLog struct {
	*Log
	faults *vfs.Faults
	armed  atomic.Bool
}

func newFaultyLog(t *testing.T, op vfs.Op, errno syscall.Errno) *faultyLog {
	t.Helper()
	mem := vfs.NewMem()
	f := &faultyLog{faults: vfs.NewFaults(mem)}
	f.faults.SetInjector(func(o vfs.Op, _ string) error {
		if f.armed.Load() && o == op {
			return errno
		}
		return nil
	})
	opts := memOptions(f.faults)
	l, err := Open("/data/t-0", opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	f.Log = l
	return f
}

func TestHealAfterDiskFull(t *testing.T) {
	l := newFaultyLog(t, vfs.OpWrite, syscall.ENOSPC)
	want := fillLog(t, l.Log, 40, 0)
	segments := l.SegmentCount()
	require.Greater(t, segments, 3)

	l.armed.Store(true)
	_, err := l.Append([][]byte{makeBatch(1, 100, 1, 1)}, 1)
	require.ErrorIs(t, err, ErrFailed)
	require.True(t, vfs.IsNoSpace(err), "the cause is kept: %v", err)
	require.True(t, l.Stats().Failed)
	_, err = l.Append([][]byte{makeBatch(1, 100, 1, 1)}, 1)
	require.ErrorIs(t, err, ErrFailed, "offline until healed")

	// Reads go on; so does freeing space, which needs no write.
	require.Empty(t, readEach(t, l.Log, want))
	newStart, err := l.DeleteRecordsBefore(want[10].base)
	require.Error(t, err, "the log start checkpoint cannot be written on a full disk")
	require.Zero(t, newStart)
	require.Less(t, l.SegmentCount(), segments, "but the segments below were deleted first")

	require.Error(t, l.Heal(), "the disk is still full")
	require.True(t, l.Stats().Failed)
	require.Empty(t, readEach(t, l.Log, want[10:]), "a failed heal changes nothing")

	l.armed.Store(false)
	require.NoError(t, l.Heal())
	require.False(t, l.Stats().Failed)
	require.Empty(t, readEach(t, l.Log, want[10:]))
	next := appendBatch(t, l.Log, makeBatch(1, 10, 5, 5), 1)
	require.Equal(t, want[len(want)-1].last+1, next.base)
	require.NoError(t, l.WaitDurable(context.Background(), next.last))
	_, err = l.DeleteRecordsBefore(want[12].base)
	require.NoError(t, err)
	require.Equal(t, want[12].base, l.LogStartOffset())
}

// The generation moves when the log is rewritten (a heal, a truncation, a
// new Open), never on an append: what the group coordinator relies on to
// tell "my appends are waiting for their fsync" from "records were lost".
func TestGenerationMovesOnRewritesOnly(t *testing.T) {
	l := newFaultyLog(t, vfs.OpWrite, syscall.ENOSPC)
	g0 := l.Generation()
	want := fillLog(t, l.Log, 10, 0)
	require.Equal(t, g0, l.Generation(), "appends keep the generation")

	l.armed.Store(true)
	_, err := l.Append([][]byte{makeBatch(1, 100, 1, 1)}, 1)
	require.ErrorIs(t, err, ErrFailed)
	require.Error(t, l.Heal())
	require.Equal(t, g0, l.Generation(), "a heal that failed changed nothing")
	l.armed.Store(false)
	require.NoError(t, l.Heal())
	g1 := l.Generation()
	require.NotEqual(t, g0, g1, "a heal is a rewrite")

	require.NoError(t, l.TruncateTo(want[5].base))
	g2 := l.Generation()
	require.NotEqual(t, g1, g2, "so is a truncation")

	other, err := Open("/data/t-1", memOptions(l.faults))
	require.NoError(t, err)
	defer other.Close()
	require.NotContains(t, []uint64{g0, g1, g2}, other.Generation(), "every Open starts a new generation")
}

// After a failed fsync nothing since the last good one is trusted: Heal
// drops it, and its offsets are given again.
func TestHealDropsWhatWasNotFsynced(t *testing.T) {
	l := newFaultyLog(t, vfs.OpSync, syscall.EIO)
	want := fillLog(t, l.Log, 10, 0)
	l.armed.Store(true)
	lost := appendBatch(t, l.Log, makeBatch(2, 100, 1, 1), 1)
	err := l.WaitDurable(context.Background(), lost.last)
	require.ErrorIs(t, err, ErrFailed)
	require.True(t, errors.Is(err, syscall.EIO), "%v", err)
	require.Equal(t, want[len(want)-1].last+1, l.HighWatermark(), "never readable")

	l.armed.Store(false)
	require.NoError(t, l.Heal())
	require.Equal(t, lost.base, l.LogEndOffset())
	again := appendBatch(t, l.Log, makeBatch(1, 10, 5, 5), 1)
	require.Equal(t, lost.base, again.base)
	require.NoError(t, l.WaitDurable(context.Background(), again.last))
	require.Empty(t, readEach(t, l.Log, append(want, again)))
}

func TestHealAfterDescriptorsRunOut(t *testing.T) {
	l := newFaultyLog(t, vfs.OpOpen, syscall.EMFILE)
	want := fillLog(t, l.Log, 5, 0)
	l.armed.Store(true)
	var err error
	for i := 0; i < 100 && err == nil; i++ { // until a roll needs a new file
		_, err = l.Append([][]byte{makeBatch(2, 300, 1, 100+i)}, 1)
	}
	require.ErrorIs(t, err, ErrFailed)
	require.True(t, vfs.IsTooManyFiles(err), "%v", err)
	require.Error(t, l.Heal())
	l.armed.Store(false)
	require.NoError(t, l.Heal())
	require.Empty(t, readEach(t, l.Log, want))
	next := appendBatch(t, l.Log, makeBatch(1, 10, 5, 5), 1)
	require.NoError(t, l.WaitDurable(context.Background(), next.last))
}

// A heal that cannot finish must not disturb the failed log, which keeps
// serving reads: it checks first that the directory takes writes again
// (the probe), and a recovery that fails after the probe passed (it
// rewrote index files under the live segments) leaves reads scanning.
func TestFailedHealKeepsServingReads(t *testing.T) {
	for _, tc := range []struct {
		name        string
		fails       func(path string) bool // which writes fail during the heal
		removeIndex bool                   // a sealed segment's .index is gone, so recovery rebuilds it
	}{
		{"the probe fails", func(path string) bool { return !strings.HasSuffix(path, logExt) }, false},
		{"recovery fails after the probe", func(path string) bool {
			return strings.HasSuffix(path, indexExt) || strings.HasSuffix(path, timeIndexExt) || strings.Contains(path, recoveryPointFile)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faults := vfs.NewFaults(vfs.NewMem())
			var mode atomic.Int32 // 0 healthy, 1 recovery-point writes fail, 2 tc.fails
			faults.SetInjector(func(op vfs.Op, path string) error {
				switch {
				case mode.Load() == 1 && op == vfs.OpWrite && strings.Contains(path, recoveryPointFile):
					return syscall.ENOSPC
				case mode.Load() == 2 && op == vfs.OpWrite && tc.fails(path):
					return syscall.ENOSPC
				}
				return nil
			})
			l, err := Open("/data/t-0", memOptions(faults))
			require.NoError(t, err)
			defer l.Close()
			want := fillLog(t, l, 30, 0)
			mode.Store(1)
			for i := 0; i < 200 && l.Failure() == nil; i++ {
				res, err := l.Append([][]byte{makeBatch(2, 200, 1, 100+i)}, 1)
				if err == nil {
					_ = l.WaitDurable(context.Background(), res.LastOffset)
				}
			}
			require.Error(t, l.Failure(), "a roll could not checkpoint the recovery point")
			if tc.removeIndex {
				bases := l.SegmentBases()
				require.NoError(t, faults.Remove(filepath.Join("/data/t-0", segmentFileName(bases[1], indexExt))))
			}
			mode.Store(2)
			require.Error(t, l.Heal())
			require.Empty(t, readEach(t, l, want), "reads are served as before the attempt")
			mode.Store(0)
			require.NoError(t, l.Heal())
			require.Empty(t, readEach(t, l, want))
		})
	}
}

// A heal recovers with what the failed log knew: everything below its last
// good fsync is on disk and acknowledged, even where the recovery-point
// checkpoint lags. Damage found there is kept and reported, never cut as a
// tail, and its offsets are not given again.
func TestHealNeverCutsWhatWasFsynced(t *testing.T) {
	for _, damaged := range []int{6, 9} { // in the middle; the last batch, so the damage runs to the end
		mem := vfs.NewMem()
		faults := vfs.NewFaults(mem)
		var full atomic.Bool
		faults.SetInjector(func(op vfs.Op, _ string) error {
			if full.Load() && op == vfs.OpWrite {
				return syscall.ENOSPC
			}
			return nil
		})
		opts := memOptions(faults)
		opts.SegmentBytes = 1 << 20
		l, err := Open("/data/t-0", opts)
		require.NoError(t, err)
		var want []stored
		for i := 0; i < 10; i++ {
			want = append(want, appendBatch(t, l, makeBatch(3, 100, int64(1000+i), i), 1))
		}
		require.NoError(t, l.WaitDurable(context.Background(), want[9].last))
		rp, _, err := readOffsetCheckpoint(mem, "/data/t-0", recoveryPointFile)
		require.NoError(t, err)
		require.Less(t, rp, want[damaged].base, "the checkpoint lags the fsyncs")

		m := memLog{fs: mem, dir: "/data/t-0"}
		name := segmentFileName(0, logExt)
		b := m.read(t, name)
		at := int64(len(b)) - 50
		for _, w := range want[damaged+1:] {
			at -= int64(len(w.bytes))
		}
		m.writeAt(t, name, []byte{b[at] ^ 0x5a}, at) // media damage in fsynced data

		full.Store(true)
		_, err = l.Append([][]byte{makeBatch(1, 100, 1, 1)}, 1)
		require.ErrorIs(t, err, ErrFailed)
		full.Store(false)
		require.NoError(t, l.Heal())
		require.Equal(t, []int{damaged}, readEach(t, l, want), "damaged batch %d: only it is lost", damaged)
		next := appendBatch(t, l, makeBatch(1, 10, 5, 5), 1)
		require.Equal(t, want[9].last+1, next.base, "damaged batch %d: no acknowledged offset is given again", damaged)
		require.NoError(t, l.Close())
	}
}

// Damage that starts in fsynced data and runs past the last good fsync
// (the first unsynced batch is garbage too: its pages were dropped after
// the failed fsync) leaves no batch boundary at the durable mark to cut
// at: the heal ends the segment with the damage, drops what follows
// (never acknowledged) and continues at the mark.
func TestHealWithDamageAcrossTheDurableMark(t *testing.T) {
	l, m, want, pos10 := logWithAFailedFsync(t, nil)
	name := segmentFileName(0, logExt)
	b := m.read(t, name)
	pos9 := pos10 - int64(len(want[9].bytes))
	m.writeAt(t, name, []byte{b[pos9+batch.MagicOffset] ^ 0x5a}, pos9+batch.MagicOffset)   // fsynced batch 9: media damage
	m.writeAt(t, name, []byte{b[pos10+batch.MagicOffset] ^ 0x5a}, pos10+batch.MagicOffset) // unsynced batch 10: dropped page

	require.NoError(t, l.Heal(), "heal")
	require.NoError(t, l.Failure())
	require.Equal(t, []int{9}, readEach(t, l, want), "only the damaged fsynced batch is lost")
	next := appendBatch(t, l, makeBatch(1, 10, 5, 5), 1)
	require.Equal(t, want[9].last+1, next.base, "no acknowledged offset is given again")
	require.NoError(t, l.WaitDurable(context.Background(), next.last))
	require.Empty(t, readEach(t, l, []stored{next}))
}

// logWithAFailedFsync appends 10 batches of 3 records (custom(i, base) may
// supply batch i) and waits for them, then 3 more whose fsync fails: the
// log is failed, with the unsynced batches on "disk" from pos10 (where
// batch 10 starts) on.
func logWithAFailedFsync(t *testing.T, custom func(i int, base int64) []byte) (*Log, memLog, []stored, int64) {
	t.Helper()
	mem := vfs.NewMem()
	faults := vfs.NewFaults(mem)
	var failSync atomic.Bool
	faults.SetInjector(func(op vfs.Op, _ string) error {
		if failSync.Load() && op == vfs.OpSync {
			return syscall.EIO
		}
		return nil
	})
	opts := memOptions(faults)
	opts.SegmentBytes = 1 << 20
	l, err := Open("/data/t-0", opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	var want []stored
	pos10 := int64(0)
	for i := 0; i < 10; i++ {
		var b []byte
		if custom != nil {
			b = custom(i, l.LogEndOffset())
		}
		if b == nil {
			b = makeBatch(3, 100, int64(1000+i), i)
		}
		want = append(want, appendBatch(t, l, b, 1))
		pos10 += int64(len(want[i].bytes))
	}
	require.NoError(t, l.WaitDurable(context.Background(), want[9].last))
	failSync.Store(true)
	var tail [][]byte
	for i := 0; i < 3; i++ {
		tail = append(tail, makeBatch(3, 100, int64(2000+i), 10+i))
	}
	res, err := l.Append(tail, 1)
	require.NoError(t, err)
	require.Error(t, l.WaitDurable(context.Background(), res.LastOffset))
	require.Error(t, l.Failure())
	failSync.Store(false)
	return l, memLog{fs: mem, dir: "/data/t-0"}, want, pos10
}

// TestHealWithDamageAcrossTheDurableMark, with the damaged fsynced batch
// holding a batch in a record value (a mirroring tool's payload) and its
// length field intact: once the segment is cut where the damage ends, no
// real batch follows the damaged one, and the embedded batch must still
// not be taken for one.
func TestHealNeverServesABatchEmbeddedInTheDamage(t *testing.T) {
	t.Run("inside the outer batch's offsets", func(t *testing.T) { healWithEmbeddedDamage(t, 1) })
	// A mirrored payload keeps its source offsets, far past the durable
	// mark.
	t.Run("far past them", func(t *testing.T) { healWithEmbeddedDamage(t, 5_000_000) })
}

func healWithEmbeddedDamage(t *testing.T, innerDelta int64) {
	l, m, want, pos10 := logWithAFailedFsync(t, func(i int, base int64) []byte {
		if i != 9 {
			return nil
		}
		return batchHoldingABatch(base + innerDelta)
	})
	name := segmentFileName(0, logExt)
	b := m.read(t, name)
	m.writeAt(t, name, []byte{b[pos10-1] ^ 0x5a}, pos10-1)                                 // fsynced batch 9: its last byte
	m.writeAt(t, name, []byte{b[pos10+batch.MagicOffset] ^ 0x5a}, pos10+batch.MagicOffset) // unsynced batch 10: dropped page

	require.NoError(t, l.Heal(), "heal")
	data, err := l.Read(want[9].base+innerDelta, 1, l.HighWatermark())
	require.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrOffsetOutOfRange),
		"the batch embedded in batch 9 is not served as offset %d (got %d bytes, err %v)", want[9].base+innerDelta, len(data), err)
	require.Equal(t, []int{9}, readEach(t, l, want))
}
