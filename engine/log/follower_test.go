package log

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/vfs"
)

// TestOwnedHighWatermark: once the owner sets the high watermark, it no
// longer follows the committed end; it stays within the log, drops with a
// truncation and a restart, wakes long polls when it moves, and Release
// hands it back.
func TestOwnedHighWatermark(t *testing.T) {
	l := openLog(t, t.TempDir(), testOptions(nil))
	for i := 0; i < 4; i++ {
		s := appendBatch(t, l, makeBatch(2, 10, 0, i), 1)
		require.NoError(t, l.WaitDurable(context.Background(), s.last))
	}
	require.Equal(t, int64(8), l.HighWatermark(), "alone: the committed end")
	ch := l.Changed()
	l.SetHighWatermark(3)
	require.Equal(t, int64(3), l.HighWatermark())
	require.Equal(t, int64(8), l.CommittedEnd())
	requireClosed(t, ch, "a moved high watermark wakes long polls")

	s := appendBatch(t, l, makeBatch(2, 10, 0, 9), 1)
	require.NoError(t, l.WaitDurable(context.Background(), s.last))
	require.Equal(t, int64(3), l.HighWatermark(), "owned: an fsync does not raise it")
	require.Equal(t, int64(10), l.CommittedEnd())
	data, err := l.Read(0, 1<<20, l.HighWatermark())
	require.NoError(t, err)
	require.Equal(t, int64(4), lastNext(t, data), "reads end at the first batch past it")

	l.SetHighWatermark(100)
	require.Equal(t, int64(10), l.HighWatermark(), "clamped to the log end")
	require.NoError(t, l.TruncateTo(6))
	require.Equal(t, int64(6), l.HighWatermark(), "a truncation lowers it with the log end")
	require.NoError(t, l.TruncateFullyAndStartAt(50))
	require.Equal(t, int64(50), l.HighWatermark(), "a restart moves it to the new start")
	l.SetHighWatermark(0)
	require.Equal(t, int64(50), l.HighWatermark(), "never below the log start")

	s = appendBatch(t, l, makeBatch(2, 10, 0, 9), 1)
	require.NoError(t, l.WaitDurable(context.Background(), s.last))
	ch = l.Changed()
	l.ReleaseHighWatermark()
	requireClosed(t, ch, "release wakes long polls")
	require.Equal(t, int64(52), l.HighWatermark(), "released: the committed end again")
}

func requireClosed(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	default:
		t.Fatal(msg)
	}
}

func lastNext(t *testing.T, data []byte) int64 {
	t.Helper()
	var next int64
	require.NoError(t, batch.Iterate(data, func(h batch.Header, _ []byte) bool {
		next = h.NextOffset()
		return true
	}))
	return next
}

// TestCrashBeforeEveryFollowerDurabilityPoint is the crashpoints test for
// a follower's log: replicated appends keeping the leader's offsets and
// epochs, truncations of a divergent tail (TruncateTo) and a restart at a
// leader's log start (TruncateFullyAndStartAt). At every moment the log is
// about to fsync, sync a directory, rename or remove a file, the image a
// power cut would leave must reopen with every batch acknowledged by then
// (fsynced and not truncated since) byte for byte; no batch a finished
// truncation removed may come back; and the leader-epoch checkpoint must
// agree with the batches' own epochs, since OffsetForLeaderEpoch answers
// from it.
func TestCrashBeforeEveryFollowerDurabilityPoint(t *testing.T) {
	for seed := uint64(0); seed < 2; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { crashFollower(t, seed) })
	}
}

func crashFollower(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	mem, faults := crashFS(t)
	const dir = crashDir

	// state is what an image must show: the acknowledged batches still in
	// the log, and the batches finished truncations removed.
	type state struct {
		acked   []stored
		removed [][]byte
	}
	var (
		mu     sync.Mutex
		cur    state
		images []struct {
			fs     *vfs.MemFS
			st     state
			before string
		}
		inject atomic.Bool
	)
	snapshot := func() state {
		mu.Lock()
		defer mu.Unlock()
		return state{acked: append([]stored(nil), cur.acked...), removed: append([][]byte(nil), cur.removed...)}
	}
	faults.SetInjector(func(op vfs.Op, path string) error {
		if !inject.Load() {
			return nil
		}
		switch op {
		case vfs.OpSync, vfs.OpSyncDir, vfs.OpRename, vfs.OpRemove:
			st := snapshot()
			img := mem.Crash(vfs.CrashOptions{})
			mu.Lock()
			images = append(images, struct {
				fs     *vfs.MemFS
				st     state
				before string
			}{img, st, op.String() + " " + path})
			mu.Unlock()
		}
		return nil
	})
	inject.Store(true)
	l, err := Open(dir, memOptions(faults))
	require.NoError(t, err)

	next, epoch := int64(0), int32(1)
	replicate := func() {
		b := makeBatch(1+rng.IntN(3), 20+rng.IntN(300), next, int(epoch)*100+int(next))
		next += int64(rng.IntN(2)) // a gap now and then, as compaction leaves
		batch.SetBaseOffset(b, next)
		batch.SetPartitionLeaderEpoch(b, epoch)
		res, err := l.AppendReplicated([][]byte{b})
		require.NoError(t, err)
		require.NoError(t, l.WaitDurable(context.Background(), res.LastOffset))
		next = res.LastOffset + 1
		mu.Lock()
		cur.acked = append(cur.acked, stored{base: res.BaseOffset, last: res.LastOffset, bytes: b})
		mu.Unlock()
	}
	// While a truncation runs, the batches it removes may or may not be in
	// an image: they leave the acknowledged set (from index keep on) before
	// cut starts and join the removed set once it returned.
	removing := func(keep int, cut func() error) {
		mu.Lock()
		going := append([]stored(nil), cur.acked[keep:]...)
		cur.acked = cur.acked[:keep]
		mu.Unlock()
		require.NoError(t, cut())
		mu.Lock()
		for _, s := range going {
			cur.removed = append(cur.removed, s.bytes)
		}
		mu.Unlock()
	}
	for round := 0; round < 4; round++ {
		for i := 0; i < 12; i++ {
			replicate()
		}
		mu.Lock()
		keep := len(cur.acked) - 1 - rng.IntN(5) // a divergent tail of a few batches
		to := cur.acked[keep].base
		mu.Unlock()
		removing(keep, func() error { return l.TruncateTo(to) })
		next = to
		epoch += 1 + int32(rng.IntN(2))
	}
	start := next + 100
	removing(0, func() error { return l.TruncateFullyAndStartAt(start) })
	next = start
	for i := 0; i < 5; i++ {
		replicate()
	}
	inject.Store(false)
	require.NoError(t, l.Close())

	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, len(images), 60, "durability points seen")
	for n, img := range images {
		rl, err := Open(dir, memOptions(img.fs))
		require.NoError(t, err, "image %d (before %s): reopen", n, img.before)
		require.Empty(t, readEach(t, rl, img.st.acked), "image %d (before %s): acknowledged batches corrupt", n, img.before)
		for _, got := range readAll(t, rl, rl.LogStartOffset(), 1<<20) {
			for _, r := range img.st.removed {
				require.False(t, bytes.Equal(got.bytes, r), "image %d (before %s): a truncated batch at %d came back", n, img.before, got.base)
			}
			h, err := batch.ParseHeader(got.bytes)
			require.NoError(t, err)
			e, end := rl.EndOffsetForEpoch(h.PartitionLeaderEpoch)
			require.Equal(t, h.PartitionLeaderEpoch, e, "image %d (before %s): epoch of the batch at %d in the checkpoint", n, img.before, got.base)
			require.Greater(t, end, got.last, "image %d (before %s): the checkpoint ends epoch %d before its batch at %d", n, img.before, e, got.base)
		}
		for _, e := range rl.LeaderEpochs() {
			require.LessOrEqual(t, e.StartOffset, rl.LogEndOffset(), "image %d (before %s): epoch %d starts past the log end", n, img.before, e.Epoch)
		}
		require.NoError(t, rl.Close())
	}
}

// The owner's high watermark survives a restart through its checkpoint
// (written on request and at Close), clamped to what the log recovered;
// released, it is gone and the log reopens with its committed end.
func TestHighWatermarkCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testOptions(nil))
	for i := 0; i < 5; i++ {
		s := appendBatch(t, l, makeBatch(2, 10, 0, i), 1)
		require.NoError(t, l.WaitDurable(context.Background(), s.last))
	}
	require.NoError(t, l.CheckpointHighWatermark(), "not owned: nothing to write")
	l.SetHighWatermark(4)
	require.NoError(t, l.CheckpointHighWatermark())
	l.SetHighWatermark(6) // written by Close
	require.NoError(t, l.Close())

	l = openLog(t, dir, testOptions(nil))
	require.Equal(t, int64(6), l.HighWatermark(), "reopened below its end of 10")
	require.Equal(t, int64(10), l.CommittedEnd())
	l.SetHighWatermark(8)
	require.NoError(t, l.CheckpointHighWatermark())
	l.crash()
	l = openLog(t, dir, testOptions(nil))
	require.Equal(t, int64(8), l.HighWatermark(), "a crash keeps the last checkpoint")

	require.NoError(t, l.ReleaseHighWatermark())
	require.Equal(t, int64(10), l.HighWatermark())
	require.NoError(t, l.Close())
	l = openLog(t, dir, testOptions(nil))
	require.Equal(t, int64(10), l.HighWatermark(), "released: the committed end after a reopen")
}
