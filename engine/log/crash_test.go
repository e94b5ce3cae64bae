package log

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/vfs"
)

// The crash matrix. A log on a MemFS is filled with acknowledged (durable)
// and unacknowledged batches, then stopped in each way a machine stops (a
// clean close; a process kill, which keeps the page cache; a power cut
// losing everything not synced; a power cut keeping a random part of it),
// then damaged in every combination of the ways a disk or an operator
// damages a log directory: a flipped byte in a sealed segment, in the
// active segment, a missing .index or .timeindex, a missing recovery-point
// checkpoint, a malformed leader-epoch checkpoint, an index entry moved by
// 100 bytes. After reopening:
//
//  1. no acknowledged batch below the recovery point is lost: it is served
//     byte for byte at its offset, or, if the damage hit it, answers
//     ErrCorrupt and lies in a reported corrupt range;
//  2. nothing is served that was not appended at that offset, and no
//     corrupt range is reported without damage;
//  3. an append goes after every offset that was acknowledged below the
//     recovery point;
//  4. the leader epochs are those of the batches that survived.

type crashMode int

const (
	crashClean crashMode = iota
	crashKill
	crashPowerCut
	crashPowerCutPartial
)

func (m crashMode) String() string {
	return [...]string{"clean", "kill", "power-cut", "power-cut-partial"}[m]
}

type damage uint

const (
	flipSealed damage = 1 << iota
	flipActive
	noIndex
	noTimeIndex
	noRecoveryPoint
	badEpochs
	shiftIndexEntry
	noActiveIndexes
	cutLastBatch
	allDamage = 1<<iota - 1
)

func (d damage) String() string {
	names := []string{"flip-sealed", "flip-active", "no-index", "no-timeindex", "no-recovery-point", "bad-epochs",
		"shift-index-entry", "no-active-indexes", "cut-last-batch"}
	var out []string
	for i, n := range names {
		if d&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "+")
}

type memLog struct {
	fs  *vfs.MemFS
	dir string
}

func (m memLog) path(name string) string { return filepath.Join(m.dir, name) }

func (m memLog) read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := vfs.ReadFile(m.fs, m.path(name), 1<<30)
	require.NoError(t, err)
	return b
}

func (m memLog) writeAt(t *testing.T, name string, b []byte, off int64) {
	t.Helper()
	f, err := m.fs.OpenFile(m.path(name), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func (m memLog) remove(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, m.fs.Remove(m.path(name)))
}

func (m memLog) segmentBases(t *testing.T) []int64 {
	t.Helper()
	es, err := m.fs.ReadDir(m.dir)
	require.NoError(t, err)
	var out []int64
	for _, e := range es {
		if b, ext, ok := parseSegmentFileName(e.Name); ok && ext == logExt {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func memOptions(fsys vfs.FS) Options {
	o := testOptions(nil)
	o.FS = fsys
	o.SegmentBytes = 3 << 10
	o.IndexIntervalBytes = 256
	return o
}

// crashOutcome counts what a case saw, so the matrix can check that it
// really exercised each path (a matrix that never meets damage proves
// nothing).
type crashOutcome struct {
	corrupt, tailCut, unackedLost, indexFailures, boundaryCuts int
}

func TestCrashMatrix(t *testing.T) {
	var total crashOutcome
	runs := 0
	for mode := crashClean; mode <= crashPowerCutPartial; mode++ {
		for d := damage(0); d <= allDamage; d++ {
			for seed := uint64(0); seed < 2; seed++ {
				name := fmt.Sprintf("%s/%s/%d", mode, d, seed)
				t.Run(name, func(t *testing.T) {
					o := crashCase(t, mode, d, seed)
					total.corrupt += o.corrupt
					total.tailCut += o.tailCut
					total.unackedLost += o.unackedLost
					total.indexFailures += o.indexFailures
					total.boundaryCuts += o.boundaryCuts
				})
				runs++
			}
		}
	}
	require.Equal(t, 4*int(allDamage+1)*2, runs)
	t.Logf("outcomes: %+v", total)
	require.Greater(t, total.corrupt, 300, "damaged batches reported corrupt")
	require.Greater(t, total.tailCut, 20, "acknowledged batches past the recovery point cut with a damaged tail")
	require.Greater(t, total.unackedLost, 50, "unacknowledged batches lost to power cuts")
	require.Greater(t, total.indexFailures, 50, "moved index entries noticed")
	require.Greater(t, total.boundaryCuts, 50, "flushed batches cut at a boundary")
}

func crashCase(t *testing.T, mode crashMode, d damage, seed uint64) (out crashOutcome) {
	rng := rand.New(rand.NewPCG(seed, uint64(d)<<8|uint64(mode)))
	mem := vfs.NewMem()
	m := memLog{fs: mem, dir: "/data/t-0"}
	l, err := Open(m.dir, memOptions(mem))
	require.NoError(t, err)
	// The partition directory's own name is made durable by its creator
	// (the broker), not by the log.
	require.NoError(t, mem.SyncDir("/"))
	require.NoError(t, mem.SyncDir("/data"))

	// Acknowledged batches, with leader epochs changing twice.
	var acked, unacked []stored
	n := 50 + rng.IntN(30)
	for i := 0; i < n; i++ {
		epoch := int32(1)
		switch {
		case i > 2*n/3:
			epoch = 4
		case i > n/3:
			epoch = 3
		}
		acked = append(acked, appendBatch(t, l, makeBatch(1+rng.IntN(3), 20+rng.IntN(300), int64(1000+i), i), epoch))
	}
	require.NoError(t, l.WaitDurable(context.Background(), acked[len(acked)-1].last))
	for i := 0; i < rng.IntN(12); i++ {
		unacked = append(unacked, appendBatch(t, l, makeBatch(1+rng.IntN(3), 20+rng.IntN(300), int64(5000+i), 500+i), 4))
	}

	switch mode {
	case crashClean:
		require.NoError(t, l.Close())
	case crashKill:
		l.crash()
	case crashPowerCut:
		l.crash()
		m.fs = mem.Crash(vfs.CrashOptions{})
	case crashPowerCutPartial:
		l.crash()
		m.fs = mem.Crash(vfs.CrashOptions{Rand: rng})
	}

	// The recovery point the crash left, as recovery will read it.
	bases := m.segmentBases(t)
	require.NotEmpty(t, bases)
	rp := int64(math.MaxInt64)
	if mode != crashClean {
		rp = bases[len(bases)-1]
		if b, err := vfs.ReadFile(m.fs, m.path(recoveryPointFile), 1<<10); err == nil && d&noRecoveryPoint == 0 {
			var v, off int64
			_, err := fmt.Sscanf(string(b), "%d\n%d\n", &v, &off)
			require.NoError(t, err)
			rp = off
		}
	}
	lastSealed := -1 // index of the last acked batch in a sealed segment
	segOf := func(off int64) int64 {
		i := sort.Search(len(bases), func(i int) bool { return bases[i] > off }) - 1
		return bases[max(i, 0)]
	}
	active := bases[len(bases)-1]
	for i, a := range acked {
		if segOf(a.base) != active && a.last < active {
			lastSealed = i
		}
	}

	// Damage.
	damaged := map[int]bool{}
	flip := func(i int) {
		a := acked[i]
		seg := segOf(a.base)
		pos := int64(0)
		for _, b := range acked[:i] {
			if segOf(b.base) == seg {
				pos += int64(len(b.bytes))
			}
		}
		name := segmentFileName(seg, logExt)
		at := pos + batch.HeaderSize + int64(rng.IntN(len(a.bytes)-batch.HeaderSize))
		b := m.read(t, name)
		m.writeAt(t, name, []byte{b[at] ^ 0x5a}, at)
		damaged[i] = true
	}
	if d&flipSealed != 0 && lastSealed > 2 {
		flip(1 + rng.IntN(lastSealed-1))
	}
	if d&flipActive != 0 {
		for i := len(acked) - 1; i >= 0; i-- {
			if segOf(acked[i].base) == active {
				if i > 0 && segOf(acked[i-1].base) == active && rng.IntN(2) == 0 {
					i--
				}
				flip(i)
				break
			}
		}
	}
	victim := bases[rng.IntN(max(len(bases)-1, 1))] // a sealed segment, if there is one
	if d&noIndex != 0 {
		m.remove(t, segmentFileName(victim, indexExt))
	}
	if d&noTimeIndex != 0 {
		m.remove(t, segmentFileName(victim, timeIndexExt))
	}
	if d&noRecoveryPoint != 0 {
		_ = m.fs.Remove(m.path(recoveryPointFile))
	}
	if d&badEpochs != 0 {
		f, err := m.fs.OpenFile(m.path(epochFile), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("0\n3\n1 0\nnot an entry\n"), 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	if d&noActiveIndexes != 0 {
		_ = m.fs.Remove(m.path(segmentFileName(active, indexExt)))
		_ = m.fs.Remove(m.path(segmentFileName(active, timeIndexExt)))
	}
	if d&cutLastBatch != 0 && mode != crashPowerCutPartial {
		// Remove the last acknowledged batch exactly, when it ends the
		// active segment's file: flushed data lost at a batch boundary.
		name := segmentFileName(active, logExt)
		b := m.read(t, name)
		i := len(acked) - 1
		if segOf(acked[i].base) == active && len(unacked) == 0 && len(b) >= len(acked[i].bytes) &&
			string(b[len(b)-len(acked[i].bytes)+12:]) == string(acked[i].bytes[12:]) {
			f, err := m.fs.OpenFile(m.path(name), os.O_RDWR, 0)
			require.NoError(t, err)
			require.NoError(t, f.Truncate(int64(len(b)-len(acked[i].bytes))))
			require.NoError(t, f.Close())
			damaged[i] = true
			out.boundaryCuts++
		}
	}
	if d&shiftIndexEntry != 0 {
		for _, b := range bases {
			name := segmentFileName(b, indexExt)
			ix, err := vfs.ReadFile(m.fs, m.path(name), 1<<20)
			if err != nil || len(ix) < offsetEntrySize {
				continue
			}
			e := rng.IntN(len(ix) / offsetEntrySize)
			pos := binary.BigEndian.Uint32(ix[e*offsetEntrySize+4:])
			var v [4]byte
			binary.BigEndian.PutUint32(v[:], pos+100)
			m.writeAt(t, name, v[:], int64(e*offsetEntrySize+4))
			break
		}
	}

	l2, err := Open(m.dir, memOptions(m.fs))
	require.NoError(t, err)
	defer l2.Close()

	// 1 and 2: acknowledged batches.
	lostFrom := -1 // first acked batch cut as part of the tail
	for i, a := range acked {
		data, err := l2.Read(a.base, 1, l2.HighWatermark())
		switch {
		case err == nil && len(data) > 0:
			require.Equal(t, a.bytes, data, "batch %d at %d", i, a.base)
			require.False(t, damaged[i], "damaged batch %d was served", i)
			require.Equal(t, -1, lostFrom, "batch %d served after batch %d was cut", i, lostFrom)
		case errors.Is(err, ErrCorrupt):
			require.True(t, damaged[i], "batch %d at %d reported corrupt without damage: %v", i, a.base, err)
			out.corrupt++
		default:
			// Gone: only the tail past the recovery point may be cut.
			require.True(t, err == nil || errors.Is(err, ErrOffsetOutOfRange), "batch %d: %v", i, err)
			require.GreaterOrEqual(t, a.base, rp, "batch %d at %d below the recovery point %d lost: %v", i, a.base, rp, err)
			if lostFrom < 0 {
				lostFrom = i
			}
			out.tailCut++
		}
	}
	// Unacknowledged batches are intact, corrupt or gone, never wrong.
	for _, u := range unacked {
		data, err := l2.Read(u.base, 1, l2.HighWatermark())
		if err == nil && len(data) > 0 {
			h, herr := batch.ParseHeader(data)
			require.NoError(t, herr)
			if h.BaseOffset == u.base {
				require.Equal(t, u.bytes, data)
				continue
			}
		}
		out.unackedLost++
	}
	for _, cr := range l2.CorruptRanges() {
		hit := false
		for i := range damaged {
			a := acked[i]
			if a.base < cr.ToOffset || cr.ToOffset < 0 {
				if a.last >= cr.FromOffset {
					hit = true
				}
			}
		}
		require.True(t, hit || mode == crashPowerCutPartial, "corrupt range %+v without damage", cr)
	}

	// 3: appends go after every acknowledged offset that survived.
	for i, a := range acked {
		if lostFrom >= 0 && i >= lostFrom {
			break
		}
		require.Greater(t, l2.LogEndOffset(), a.last)
	}
	next := appendBatch(t, l2, makeBatch(1, 10, 9999, 9999), 5)
	for i, a := range acked {
		if a.base < rp {
			require.Greater(t, next.base, a.last, "acknowledged offsets below the recovery point are never given again (batch %d)", i)
		}
	}
	require.NoError(t, l2.WaitDurable(context.Background(), next.last))
	got, err := l2.Read(next.base, 1, l2.HighWatermark())
	require.NoError(t, err)
	require.Equal(t, next.bytes, got)

	// 4: epochs, from what survived.
	var want []EpochEntry
	for i, a := range acked {
		if (lostFrom >= 0 && i >= lostFrom) || damaged[i] {
			continue
		}
		h, err := batch.ParseHeader(a.bytes)
		require.NoError(t, err)
		if len(want) == 0 || want[len(want)-1].Epoch < h.PartitionLeaderEpoch {
			want = append(want, EpochEntry{Epoch: h.PartitionLeaderEpoch, StartOffset: a.base})
		}
	}
	got2 := l2.LeaderEpochs()
	// The last entry is the epoch of the append just made; survivors of the
	// unacknowledged tail may add an entry for epoch 4 if none was acked.
	require.Equal(t, EpochEntry{Epoch: 5, StartOffset: next.base}, got2[len(got2)-1])
	out.indexFailures = int(l2.Stats().IndexFailures)
	got2 = got2[:len(got2)-1]
	for i, w := range want {
		require.Less(t, i, len(got2), "epochs %v, want %v", got2, want)
		require.Equal(t, w.Epoch, got2[i].Epoch, "epochs %v, want %v", got2, want)
		// A damaged first batch of an epoch moves its start to the next
		// batch; never earlier.
		require.LessOrEqual(t, got2[i].StartOffset, w.StartOffset, "epochs %v, want %v", got2, want)
	}
	return out
}
