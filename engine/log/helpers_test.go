package log

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/clock"
)

// newFakeClock returns a fake clock for segment age and retention.
func newFakeClock() *clock.Fake { return clock.NewFake(time.UnixMilli(1_700_000_000_000)) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testOptions(clk *clock.Fake) Options {
	o := Options{
		SegmentBytes:       4 << 10,
		IndexIntervalBytes: 512,
		Retention:          -1,
		RetentionBytes:     -1,
		FlushAlways:        true,
		Logger:             quietLogger(),
	}
	if clk != nil {
		o.Clock = clk
	}
	return o
}

func openLog(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// makeBatch builds a producer-style uncompressed batch of n records whose
// timestamps are ts, ts+1, ... and whose values identify (tag, record).
func makeBatch(n int, valueSize int, ts int64, tag int) []byte {
	recs := make([]batch.Record, n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte(tag)}, valueSize)
		if valueSize >= 8 {
			binary.BigEndian.PutUint32(v, uint32(tag))
			binary.BigEndian.PutUint32(v[4:], uint32(i))
		}
		recs[i] = batch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Value: v}
	}
	return batch.Build(batch.Header{
		PartitionLeaderEpoch: -1, FirstTimestamp: ts, MaxTimestamp: ts + int64(n-1),
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}, recs)
}

// batchHoldingABatch is a batch of 3 records whose second record's value
// is itself a valid one-record batch at innerBase, as a mirroring tool's
// payload would be.
func batchHoldingABatch(innerBase int64) []byte {
	inner := makeBatch(1, 50, 7, 77)
	batch.SetBaseOffset(inner, innerBase)
	return batch.Build(batch.Header{PartitionLeaderEpoch: -1, FirstTimestamp: 2, MaxTimestamp: 4,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]batch.Record{{Value: []byte("a")}, {OffsetDelta: 1, Value: inner}, {OffsetDelta: 2, Value: []byte("c")}})
}

// compress marks a batch as compressed (codec bits) and fixes its CRC. The
// payload is not really compressed; the log never looks inside.
func compress(b []byte) []byte {
	attrs := binary.BigEndian.Uint16(b[21:])
	binary.BigEndian.PutUint16(b[21:], attrs|uint16(batch.CompressionLZ4))
	binary.BigEndian.PutUint32(b[17:], batch.Checksum(b[batch.CRCStart:]))
	return b
}

// gzipBatch really compresses an uncompressed batch's records with gzip, as
// a producer would, fixing the length, attributes and CRC.
func gzipBatch(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, err := w.Write(b[batch.HeaderSize:])
	require.NoError(t, err)
	require.NoError(t, w.Close())
	out := append(append([]byte(nil), b[:batch.HeaderSize]...), buf.Bytes()...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-batch.LengthFieldEnd))
	attrs := binary.BigEndian.Uint16(out[21:])
	binary.BigEndian.PutUint16(out[21:], attrs|uint16(batch.CompressionGzip))
	binary.BigEndian.PutUint32(out[17:], batch.Checksum(out[batch.CRCStart:]))
	return out
}

// stored is what a test expects the log to hold.
type stored struct {
	base, last int64
	bytes      []byte
}

func appendBatch(t *testing.T, l *Log, b []byte, epoch int32) stored {
	t.Helper()
	res, err := l.Append([][]byte{b}, epoch)
	require.NoError(t, err)
	return stored{base: res.BaseOffset, last: res.LastOffset, bytes: b}
}

// readAll reads every batch from offset to the log end through Read.
func readAll(t *testing.T, l *Log, from int64, maxBytes int) []stored {
	t.Helper()
	var out []stored
	off := from
	for {
		data, err := l.Read(off, maxBytes, l.HighWatermark())
		require.NoError(t, err)
		if len(data) == 0 {
			return out
		}
		require.NoError(t, batch.Iterate(data, func(h batch.Header, raw []byte) bool {
			_, verr := batch.ValidateStored(raw)
			require.NoError(t, verr)
			out = append(out, stored{base: h.BaseOffset, last: h.LastOffset(), bytes: append([]byte(nil), raw...)})
			off = h.NextOffset()
			return true
		}))
	}
}

// readEach reads every batch of want at its own offset and returns the
// indexes of those that answer ErrCorrupt; every other one must come back
// byte for byte.
func readEach(t *testing.T, l *Log, want []stored) (corrupt []int) {
	t.Helper()
	for i, w := range want {
		data, err := l.Read(w.base, 1, l.HighWatermark())
		if errors.Is(err, ErrCorrupt) {
			corrupt = append(corrupt, i)
			continue
		}
		require.NoError(t, err, "batch %d at offset %d", i, w.base)
		require.Equal(t, w.bytes, data, "batch %d at offset %d", i, w.base)
	}
	return corrupt
}

func requireSameBatches(t *testing.T, want, got []stored) {
	t.Helper()
	require.Equal(t, len(want), len(got), "batch count")
	for i := range want {
		require.Equal(t, want[i].base, got[i].base, "batch %d base", i)
		require.Equal(t, want[i].last, got[i].last, "batch %d last", i)
		require.True(t, bytes.Equal(want[i].bytes, got[i].bytes), "batch %d bytes", i)
	}
}

// crash abandons the log as a kill -9 would: the flusher stops, files are
// closed, nothing else is written (no clean marker, no final index flush).
// Unsynced data stays in the page cache, as it does after a process kill.
func (l *Log) crash() {
	l.appendMu.Lock()
	if l.closed {
		l.appendMu.Unlock()
		return
	}
	l.closed = true
	l.isClosed.Store(true)
	l.appendMu.Unlock()
	close(l.stop)
	<-l.done
	l.syncMu.Lock()
	l.appendMu.Lock()
	l.releaseLocked()
	l.appendMu.Unlock()
	l.syncMu.Unlock()
	l.finishWaiters()
}

func segmentFiles(t *testing.T, dir, ext string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	require.NoError(t, err)
	sort.Strings(m)
	return m
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Size()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
