package log

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/vfs"
)

// TestCrashBeforeEveryDurabilityPoint takes the filesystem a power cut
// would leave at every moment the log is about to make something durable
// or rename or remove a file (before each fsync, directory sync, rename and
// removal), while it appends, rolls segments and moves its log start. Each
// of those images must reopen and serve every batch acknowledged (its
// WaitDurable returned) before that moment, byte for byte, above the log
// start asked for by then. Unlike the crash matrix, which cuts power once
// at the end, this finds a durability step that is missing or comes too
// late, a directory sync included: the new segment's name is durable only
// once its directory is synced.
func TestCrashBeforeEveryDurabilityPoint(t *testing.T) {
	for seed := uint64(0); seed < 2; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { crashBeforeEveryDurabilityPoint(t, seed) })
	}
}

// crashFS is an in-memory filesystem whose power can be cut, with the
// partition directory dir already durable, and its fault-injecting view.
func crashFS(t *testing.T) (mem *vfs.MemFS, faults *vfs.Faults) {
	t.Helper()
	mem = vfs.NewMem()
	require.NoError(t, mem.MkdirAll(crashDir, 0o755))
	require.NoError(t, mem.SyncDir("/"))
	require.NoError(t, mem.SyncDir("/data"))
	return mem, vfs.NewFaults(mem)
}

const crashDir = "/data/t-0"

func crashBeforeEveryDurabilityPoint(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	mem, faults := crashFS(t)
	const dir = crashDir

	// acked counts the batches whose WaitDurable returned; floor is the
	// highest log start asked for (a crash may keep an older one, which
	// only serves more).
	var acked, floor atomic.Int64
	type image struct {
		fs           *vfs.MemFS
		acked, floor int64
		before       string
	}
	var (
		mu     sync.Mutex
		images []image
	)
	faults.SetInjector(func(op vfs.Op, path string) error {
		switch op {
		case vfs.OpSync, vfs.OpSyncDir, vfs.OpRename, vfs.OpRemove:
			a, f := acked.Load(), floor.Load()
			img := mem.Crash(vfs.CrashOptions{})
			mu.Lock()
			images = append(images, image{fs: img, acked: a, floor: f, before: op.String() + " " + path})
			mu.Unlock()
		}
		return nil
	})

	l, err := Open(dir, memOptions(faults))
	require.NoError(t, err)
	var want []stored
	for i := 0; i < 60; i++ {
		s := appendBatch(t, l, makeBatch(1+rng.IntN(3), 20+rng.IntN(400), int64(1000+i), i), 1)
		require.NoError(t, l.WaitDurable(context.Background(), s.last))
		want = append(want, s)
		acked.Store(int64(len(want)))
		if i == 25 || i == 45 {
			to := want[i-10].base
			floor.Store(to)
			_, err := l.DeleteRecordsBefore(to)
			require.NoError(t, err)
		}
	}
	faults.SetInjector(nil)
	require.NoError(t, l.Close())

	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, len(images), 60, "durability points seen")
	var dirSyncs int
	for n, img := range images {
		if img.before[:len("syncdir")] == "syncdir" {
			dirSyncs++
		}
		var survivors []stored
		for _, s := range want[:img.acked] {
			if s.base >= img.floor {
				survivors = append(survivors, s)
			}
		}
		rl, err := Open(dir, memOptions(img.fs))
		require.NoError(t, err, "image %d (before %s): reopen", n, img.before)
		require.Empty(t, readEach(t, rl, survivors), "image %d (before %s): acknowledged batches corrupt", n, img.before)
		if len(survivors) > 0 {
			require.Greater(t, rl.LogEndOffset(), survivors[len(survivors)-1].last, "image %d (before %s): log end", n, img.before)
		}
		require.NoError(t, rl.Close())
	}
	require.Positive(t, dirSyncs, "directory syncs seen")
}
