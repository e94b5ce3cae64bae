package log

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
)

// FuzzCleanFilter feeds the cleaner's batch filter arbitrary batches (with
// a valid CRC and framing, as the log stores only such batches): it must never
// panic, and whatever it writes must be a valid stored batch with the same
// base offset, not past the original's last offset.
func FuzzCleanFilter(f *testing.F) {
	t := &testing.T{}
	ts := int64(1_700_000_000_000)
	f.Add(keyedBatch(t, []kv{{key: "a", value: []byte("1"), ts: ts}, {key: "b", ts: ts + 1}}, batch.CompressionNone, -1), int64(0))
	f.Add(keyedBatch(t, []kv{{key: "a", value: []byte("1"), ts: ts}, {key: "a", ts: ts}}, batch.CompressionGzip, 3), int64(1))
	f.Add(keyedBatch(t, []kv{{key: "c", value: []byte("x"), ts: ts}}, batch.CompressionZstd, 5), int64(2))
	f.Add(batch.BuildEndTxnMarker(4, 0, batch.EndTxnMarker{Commit: true}, ts), int64(0))
	f.Fuzz(func(t *testing.T, raw []byte, seed int64) {
		h, err := batch.ParseHeader(raw)
		if err != nil || h.Size() != len(raw) || h.Length < batch.HeaderSize-batch.LengthFieldEnd {
			return
		}
		raw = append([]byte(nil), raw...)
		batch.SetBaseOffset(raw, 0)
		h.BaseOffset = 0
		binary.BigEndian.PutUint32(raw[17:], batch.Checksum(raw[batch.CRCStart:]))
		if _, err := batch.ValidateStored(raw); err != nil {
			return // the log holds only batches that passed this
		}
		m := newOffsetMap(1 << 10)
		m.put([]byte("a"), 1)
		m.put([]byte("c"), seed&3)
		var st CleanStats
		o := CleanOptions{Now: time.UnixMilli(ts + seed), DeleteRetention: time.Duration(seed&7) * time.Millisecond}
		fl := &filter{o: &o, m: m, mapEnd: math.MaxInt64, aborted: abortedSet{3: {{ProducerID: 3, FirstOffset: 0, LastOffset: 5}}},
			last: map[int64]int64{h.ProducerID: h.LastOffset()}, st: &st, horizon: math.MaxInt64,
			txn: &txnState{committed: map[int64]bool{}, abortedSeen: map[int64]bool{}}, removedMarkers: map[int64]bool{}}
		out, err := fl.apply(h, raw)
		if err != nil || out == nil {
			return
		}
		nh, err := batch.ValidateStored(out)
		if err != nil {
			t.Fatalf("cleaned batch invalid: %v", err)
		}
		if nh.BaseOffset != h.BaseOffset || nh.LastOffset() > h.LastOffset() {
			t.Fatalf("cleaned batch offsets [%d, %d] outside [%d, %d]", nh.BaseOffset, nh.LastOffset(), h.BaseOffset, h.LastOffset())
		}
	})
}
