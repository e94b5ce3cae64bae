package log

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
)

// BenchmarkClean measures the cleaner's throughput on a log on disk (in the
// page cache, as a recently written log is), in two shapes:
//
//   - small: 64 MiB of 10-record batches of 100-byte values over 50,000 keys
//     (per-record costs dominate);
//   - 1KiB: 256 MiB of 256-record batches of 1 KiB values over 100,000 keys,
//     written by one idempotent producer (what `moonmq bench produce --keys`
//     writes; per-byte costs dominate);
//
// each uncompressed and zstd-compressed (values half random, half zeros:
// about 2:1, like real payloads). Building the log is not timed. It reports
// MB/s of log read plus written (the measure, goal at least 100 MB/s:
// the cleaner reads a segment more than once), log-MB/s (the size of the
// log cleaned over the time, whatever the reads), log-MB/cpu-s (the same
// over the process's CPU time during Clean, garbage collection included:
// steadier than the wall clock on a machine shared with other work) and
// read/written.
//
//	go test ./engine/log -run '^$' -bench Clean -benchtime 5x
func BenchmarkClean(b *testing.B) {
	for _, shape := range []cleanShape{
		{name: "small", logBytes: 64 << 20, recs: 10, value: 100, keys: 50_000, mapMemory: 16 << 20, segBytes: 16 << 20},
		{name: "1KiB", logBytes: 256 << 20, recs: 256, value: 1024, keys: 100_000, mapMemory: 16 << 20, segBytes: 64 << 20, producer: true},
	} {
		for _, codec := range []int8{batch.CompressionNone, batch.CompressionZstd} {
			b.Run(fmt.Sprintf("%s/%s", shape.name, map[int8]string{batch.CompressionNone: "none", batch.CompressionZstd: "zstd"}[codec]), func(b *testing.B) {
				var read, written, logBytes int64
				var took, cpu time.Duration
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					l := benchCleanLog(b, shape, codec, uint64(i))
					logBytes += l.Size()
					b.StartTimer()
					start, cpu0 := time.Now(), cpuTime(b)
					st, err := l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(1_800_000_000_000),
						FirstUncleanable: l.HighWatermark(), MapMemory: shape.mapMemory})
					if err != nil {
						b.Fatal(err)
					}
					took += time.Since(start)
					cpu += cpuTime(b) - cpu0
					read += st.BytesRead
					written += st.BytesWritten
					b.StopTimer()
					_ = l.Close()
					b.StartTimer()
				}
				b.ReportMetric(float64(read+written)/took.Seconds()/1e6, "MB/s")
				b.ReportMetric(float64(logBytes)/took.Seconds()/1e6, "log-MB/s")
				b.ReportMetric(float64(logBytes)/cpu.Seconds()/1e6, "log-MB/cpu-s")
				b.ReportMetric(float64(read)/float64(max(written, 1)), "read/written")
			})
		}
	}
}

// cleanShape is the log a BenchmarkClean case cleans.
type cleanShape struct {
	name              string
	logBytes          int64
	recs, value, keys int
	mapMemory         int
	segBytes          int64
	producer          bool // batches of one idempotent producer (else none)
}

// cpuTime is the process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchCleanLog(b *testing.B, shape cleanShape, codec int8, seed uint64) *Log {
	opts := benchOptions(false)
	opts.SegmentBytes = shape.segBytes
	l, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	// Half random, half zeros: compresses about 2:1, like real payloads
	// (identical values would compress a hundredfold and measure only the
	// codec).
	value := make([]byte, shape.value)
	ts := int64(1_700_000_000_000)
	recs := make([]batch.Record, shape.recs)
	seq := int32(0)
	for l.Size() < shape.logBytes {
		for i := range recs {
			v := append([]byte(nil), value...)
			for j := 0; j+8 <= shape.value/2; j += 8 {
				binary.LittleEndian.PutUint64(v[j:], rng.Uint64())
			}
			recs[i] = batch.Record{OffsetDelta: int32(i), Key: fmt.Appendf(nil, "key-%06d", rng.IntN(shape.keys)), Value: v}
		}
		h := batch.Header{FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		if shape.producer {
			h.ProducerID, h.ProducerEpoch, h.BaseSequence = 1, 0, seq
			seq += int32(len(recs))
		}
		bt := batch.Build(h, recs)
		if codec != batch.CompressionNone {
			if bt, err = batch.Recompress(bt, codec, defaultLevel(codec), 1<<20); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := l.Append([][]byte{bt}, 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		b.Fatal(err)
	}
	return l
}
