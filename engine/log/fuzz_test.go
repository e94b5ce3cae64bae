package log

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/vfs"
)

// FuzzRecover feeds recovery arbitrary bytes as a segment, its indexes and
// the checkpoints: Open either refuses with an error or opens a log whose
// every offset reads as whole, CRC-checked batches, a corruption error or
// out of range — never a panic — and appends then work.
func FuzzRecover(f *testing.F) {
	// Seed: the files of a real log, cleanly closed.
	mem := vfs.NewMem()
	opts := memOptions(mem)
	opts.SegmentBytes = 1 << 20
	l, err := Open("/seed", opts)
	require.NoError(f, err)
	for i := 0; i < 20; i++ {
		_, err := l.Append([][]byte{makeBatch(1+i%3, 40+i*7, int64(1000+i), i)}, int32(i/7))
		require.NoError(f, err)
	}
	require.NoError(f, l.Close())
	read := func(name string) []byte {
		b, err := vfs.ReadFile(mem, filepath.Join("/seed", name), 1<<20)
		require.NoError(f, err)
		return b
	}
	seg, idx, tidx := read(segmentFileName(0, logExt)), read(segmentFileName(0, indexExt)), read(segmentFileName(0, timeIndexExt))
	rp, epochs := read(recoveryPointFile), read(epochFile)
	f.Add(seg, idx, tidx, rp, epochs, true)
	f.Add(seg, idx, tidx, rp, epochs, false)
	flipped := append([]byte(nil), seg...)
	flipped[len(flipped)/2] ^= 1
	f.Add(flipped, idx, tidx, []byte("0\n100000\n"), []byte("garbage"), false)
	f.Add(seg[:len(seg)-5], []byte{}, tidx, []byte{}, epochs, false)

	f.Fuzz(func(t *testing.T, seg, idx, tidx, rp, epochs []byte, clean bool) {
		fsys := vfs.NewMem()
		dir := "/data/t-0"
		require.NoError(t, fsys.MkdirAll(dir, 0o755))
		write := func(name string, b []byte) {
			fh, err := fsys.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
			require.NoError(t, err)
			_, err = fh.WriteAt(b, 0)
			require.NoError(t, err)
			require.NoError(t, fh.Close())
		}
		write(segmentFileName(0, logExt), seg)
		write(segmentFileName(0, indexExt), idx)
		write(segmentFileName(0, timeIndexExt), tidx)
		write(recoveryPointFile, rp)
		write(epochFile, epochs)
		if clean {
			write(cleanFile, fmt.Appendf(nil, "0\n0 %d 20\n", len(seg)))
		}
		l, err := Open(dir, memOptions(fsys))
		if err != nil {
			return
		}
		defer l.Close()
		for off := l.LogStartOffset(); off < l.LogEndOffset() && off < l.LogStartOffset()+500; off++ {
			data, err := l.Read(off, 1<<16, l.HighWatermark())
			if err != nil {
				require.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrOffsetOutOfRange), "offset %d: %v", off, err)
				continue
			}
			require.NoError(t, batch.Iterate(data, func(h batch.Header, raw []byte) bool {
				require.Equal(t, h.CRC, batch.Checksum(raw[batch.CRCStart:]), "a served batch passes its CRC")
				return true
			}))
		}
		_, _, _, _ = l.OffsetForTimestamp(0)
		l.MaxTimestamp()
		l.LeaderEpochs()
		res, err := l.Append([][]byte{makeBatch(1, 10, 1, 1)}, 1)
		require.NoError(t, err)
		require.NoError(t, l.WaitDurable(context.Background(), res.LastOffset))
	})
}
