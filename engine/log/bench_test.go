package log

import (
	"context"
	"testing"
	"time"
)

// benchBatch is a 16 KiB batch of 1 KiB records.
func benchBatch() []byte { return makeBatch(15, 1024, 1_700_000_000_000, 1) }

func benchOptions(always bool) Options {
	return Options{
		FlushAlways:    always,
		FlushInterval:  time.Hour,
		Retention:      -1,
		RetentionBytes: -1,
		SegmentBytes:   256 << 20,
		Logger:         quietLogger(),
	}
}

func BenchmarkAppend(b *testing.B) {
	b.Run("page-cache", func(b *testing.B) {
		l, err := Open(b.TempDir(), benchOptions(false))
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		bt := benchBatch()
		b.SetBytes(int64(len(bt)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Append([][]byte{bt}, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("durable-1-producer", func(b *testing.B) {
		l, err := Open(b.TempDir(), benchOptions(true))
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		bt := benchBatch()
		b.SetBytes(int64(len(bt)))
		ctx := context.Background()
		for b.Loop() {
			res, err := l.Append([][]byte{bt}, 0)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.WaitDurable(ctx, res.LastOffset); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(l.Stats().Fsyncs)/float64(b.N), "fsyncs/op")
	})
	b.Run("durable-parallel-producers", func(b *testing.B) {
		l, err := Open(b.TempDir(), benchOptions(true))
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		b.SetBytes(int64(len(benchBatch())))
		b.SetParallelism(16) // 32 producers on 2 cores, like many connections
		ctx := context.Background()
		b.RunParallel(func(pb *testing.PB) {
			bt := benchBatch()
			for pb.Next() {
				res, err := l.Append([][]byte{bt}, 0)
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.WaitDurable(ctx, res.LastOffset); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(l.Stats().Fsyncs)/float64(b.N), "fsyncs/op")
	})
}

func BenchmarkRead(b *testing.B) {
	l, err := Open(b.TempDir(), benchOptions(false))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	bt := benchBatch()
	const total = 64 << 20
	for n := 0; n < total; n += len(bt) {
		if _, err := l.Append([][]byte{bt}, 0); err != nil {
			b.Fatal(err)
		}
	}
	const fetch = 1 << 20
	b.SetBytes(fetch)
	b.ReportAllocs()
	var buf []byte
	off := int64(0)
	for b.Loop() {
		buf, err = l.ReadAppend(buf[:0], off, fetch, l.HighWatermark())
		if err != nil {
			b.Fatal(err)
		}
		if len(buf) == 0 {
			off = 0
			continue
		}
		// Next fetch starts after the last batch returned.
		h := lastHeader(b, buf)
		off = h + 1
	}
}

func lastHeader(b *testing.B, data []byte) int64 {
	var last int64
	for pos := 0; pos+61 <= len(data); {
		size := 12 + int(uint32(data[pos+8])<<24|uint32(data[pos+9])<<16|uint32(data[pos+10])<<8|uint32(data[pos+11]))
		base := int64(0)
		for i := 0; i < 8; i++ {
			base = base<<8 | int64(data[pos+i])
		}
		delta := int64(int32(uint32(data[pos+23])<<24 | uint32(data[pos+24])<<16 | uint32(data[pos+25])<<8 | uint32(data[pos+26])))
		last = base + delta
		pos += size
	}
	if last == 0 && len(data) > 0 {
		b.Fatal("no batch parsed")
	}
	return last
}
