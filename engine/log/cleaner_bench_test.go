package log

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
)

// BenchmarkClean measures the cleaner's throughput, in MB/s of log read
// plus written (the goal: at least 100 MB/s), on a 64 MiB log on
// disk of 10-record batches with 100-byte values over 50,000 keys, so
// most records are superseded. Building the log is not timed.
//
//	go test ./engine/log -run '^$' -bench BenchmarkClean -benchtime 5x
func BenchmarkClean(b *testing.B) {
	for _, codec := range []int8{batch.CompressionNone, batch.CompressionZstd} {
		b.Run(fmt.Sprintf("codec-%d", codec), func(b *testing.B) {
			var read, written int64
			var took time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				l := benchCleanLog(b, codec, uint64(i))
				b.StartTimer()
				start := time.Now()
				st, err := l.Clean(context.Background(), CleanOptions{Now: time.UnixMilli(1_800_000_000_000),
					FirstUncleanable: l.HighWatermark(), MapMemory: 16 << 20})
				if err != nil {
					b.Fatal(err)
				}
				took += time.Since(start)
				read += st.BytesRead
				written += st.BytesWritten
				b.StopTimer()
				_ = l.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(read+written)/took.Seconds()/1e6, "MB/s")
			b.ReportMetric(float64(read)/float64(max(written, 1)), "read/written")
		})
	}
}

func benchCleanLog(b *testing.B, codec int8, seed uint64) *Log {
	opts := benchOptions(false)
	opts.SegmentBytes = 16 << 20
	l, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	// Half random, half zeros: compresses about 2:1, like real payloads
	// (identical values would compress a hundredfold and measure only the
	// codec).
	value := make([]byte, 100)
	ts := int64(1_700_000_000_000)
	for l.Size() < 64<<20 {
		recs := make([]batch.Record, 10)
		for i := range recs {
			v := append([]byte(nil), value...)
			for j := 0; j < 50; j += 8 {
				binary.LittleEndian.PutUint64(v[j:], rng.Uint64())
			}
			recs[i] = batch.Record{OffsetDelta: int32(i), Key: fmt.Appendf(nil, "key-%06d", rng.IntN(50_000)), Value: v}
		}
		bt := batch.Build(batch.Header{FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
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
