package batch

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite testdata/fuzz seed corpora")

// seedBatches returns valid batches of assorted shapes (built both with
// Build and with franz-go's kmsg) plus a few near-misses, for fuzz seeds.
func seedBatches(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{
		"one-record":        producerBatch(1, 0),
		"three-records":     producerBatch(3, 16),
		"kmsg-headers":      kmsgBatch(t, 4, 0, nil),
		"kmsg-zstd-opaque":  kmsgBatch(t, 2, int16(CompressionZstd), []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0}),
		"null-key-value":    Build(Header{}, []Record{{Key: nil, Value: nil}}),
		"transactional":     Build(Header{Attributes: TransactionalBit, ProducerID: 9}, []Record{{Value: []byte("x")}, {OffsetDelta: 1}}),
		"control":           Build(Header{Attributes: TransactionalBit | ControlBit}, []Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 5}}}),
		"log-append-time":   func() []byte { b := producerBatch(2, 3); SetLogAppendTime(b, 99); return b }(),
		"bad-crc":           func() []byte { b := producerBatch(2, 3); b[len(b)-1] ^= 1; return b }(),
		"magic-1":           func() []byte { b := producerBatch(1, 3); b[offMagic] = 1; return b }(),
		"header-only":       producerBatch(1, 0)[:HeaderSize],
		"large-value-1kib":  producerBatch(2, 1024),
		"negative-ts-delta": Build(Header{FirstTimestamp: 100}, []Record{{TimestampDelta: -100, Value: []byte("v")}}),
	}
	return seeds
}

func writeSeed(t *testing.T, dir, name string, args ...any) {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			fmt.Fprintf(&buf, "[]byte(%q)\n", v)
		case int:
			fmt.Fprintf(&buf, "int(%d)\n", v)
		default:
			t.Fatalf("unsupported seed arg %T", a)
		}
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644))
}

// TestWriteFuzzSeeds regenerates the checked-in seed corpora when run with
// -update-fuzz-seeds; otherwise it only checks that the corpora exist.
func TestWriteFuzzSeeds(t *testing.T) {
	seeds := seedBatches(t)
	if *updateSeeds {
		for name, b := range seeds {
			writeSeed(t, filepath.Join("testdata", "fuzz", "FuzzValidate"), name, b, 0)
			writeSeed(t, filepath.Join("testdata", "fuzz", "FuzzValidate"), name+"-limit", b, len(b)-1)
		}
		var all []byte
		for _, name := range []string{"one-record", "kmsg-headers", "three-records"} {
			all = append(all, seeds[name]...)
		}
		writeSeed(t, filepath.Join("testdata", "fuzz", "FuzzSplit"), "three-batches", all, 0)
		writeSeed(t, filepath.Join("testdata", "fuzz", "FuzzSplit"), "trailing-bytes", append(append([]byte(nil), all...), 0, 0, 0), 0)
		writeSeed(t, filepath.Join("testdata", "fuzz", "FuzzSplit"), "single", seeds["transactional"], 1<<20)
	}
	for _, target := range []string{"FuzzValidate", "FuzzSplit"} {
		entries, err := os.ReadDir(filepath.Join("testdata", "fuzz", target))
		require.NoError(t, err, "seed corpus missing; run go test -run TestWriteFuzzSeeds -update-fuzz-seeds")
		require.NotEmpty(t, entries)
	}
}

// checkValidBatch asserts the properties every batch accepted by Validate
// must have, across the package's other entry points.
func checkValidBatch(t *testing.T, b []byte, h Header) {
	if h.Size() != len(b) || h.NumRecords < 1 {
		t.Fatalf("validated batch has size %d/%d and %d records", h.Size(), len(b), h.NumRecords)
	}
	if _, err := ValidateStored(b); err != nil {
		t.Fatalf("Validate accepted but ValidateStored rejected: %v", err)
	}
	n := 0
	if err := Iterate(b, func(ih Header, raw []byte) bool {
		n++
		if ih != h || len(raw) != len(b) {
			t.Fatalf("Iterate header %+v differs from Validate %+v", ih, h)
		}
		return true
	}); err != nil || n != 1 {
		t.Fatalf("Iterate over a valid batch: %d batches, err %v", n, err)
	}
	if h.Compression() != CompressionNone {
		return
	}
	var recs []Record
	if err := Records(b, func(r Record) bool { recs = append(recs, r); return true }); err != nil {
		t.Fatalf("Records over a valid batch: %v", err)
	}
	if len(recs) != int(h.NumRecords) {
		t.Fatalf("Records yielded %d records, header says %d", len(recs), h.NumRecords)
	}
	// Re-encoding the decoded records must give a valid batch with the same
	// records (byte equality is not required: varints may be non-minimal).
	rb := Build(h, recs)
	rh, err := Validate(rb, 0)
	if err != nil {
		t.Fatalf("rebuilt batch invalid: %v", err)
	}
	i := 0
	if err := Records(rb, func(r Record) bool {
		o := recs[i]
		if r.OffsetDelta != o.OffsetDelta || r.TimestampDelta != o.TimestampDelta || !bytes.Equal(r.Key, o.Key) ||
			!bytes.Equal(r.Value, o.Value) || (r.Key == nil) != (o.Key == nil) || len(r.Headers) != len(o.Headers) {
			t.Fatalf("record %d changed on rebuild", i)
		}
		i++
		return true
	}); err != nil || rh.NumRecords != h.NumRecords {
		t.Fatalf("rebuilt batch records: %v", err)
	}
}

func FuzzValidate(f *testing.F) {
	for _, b := range seedBatches(f) {
		f.Add(b, 0)
	}
	f.Fuzz(func(t *testing.T, b []byte, maxBytes int) {
		check := func(b []byte) {
			h, err := Validate(b, maxBytes)
			if err != nil {
				return
			}
			if maxBytes > 0 && len(b) > maxBytes {
				t.Fatalf("accepted %d bytes over limit %d", len(b), maxBytes)
			}
			checkValidBatch(t, b, h)
		}
		check(b)
		// Random bytes almost never carry a matching CRC and length, which
		// would leave the record walker unexplored; repair both and retry.
		if len(b) >= HeaderSize {
			fixed := append([]byte(nil), b...)
			fixed[offMagic] = Magic
			binary.BigEndian.PutUint32(fixed[offLength:], uint32(len(fixed)-LengthFieldEnd))
			binary.BigEndian.PutUint32(fixed[offCRC:], Checksum(fixed[crcStart:]))
			check(fixed)
		}
	})
}

func FuzzSplit(f *testing.F) {
	seeds := seedBatches(f)
	f.Add(append(append([]byte(nil), seeds["one-record"]...), seeds["kmsg-headers"]...), 0)
	f.Add(seeds["three-records"], 1<<20)
	f.Fuzz(func(t *testing.T, records []byte, maxBytes int) {
		batches, hs, err := Split(records, maxBytes)
		if err != nil {
			return
		}
		if len(batches) != len(hs) || len(batches) == 0 {
			t.Fatalf("%d batches, %d headers", len(batches), len(hs))
		}
		var joined []byte
		for i, b := range batches {
			checkValidBatch(t, b, hs[i].Header)
			checkTimestamps(t, b, hs[i])
			joined = append(joined, b...)
		}
		if !bytes.Equal(joined, records) {
			t.Fatal("batches do not concatenate to the input")
		}
	})
}

// checkTimestamps recomputes a batch's record timestamp range and count of
// keyless records by decoding it whole (compressed ones too, when
// validation walked them all).
func checkTimestamps(t *testing.T, b []byte, v Validated) {
	if !v.Walked {
		if v.Compression() == CompressionNone {
			t.Fatal("an uncompressed batch is always walked")
		}
		return
	}
	var ts tsRange
	var nullKeys int32
	err := DecodeRecords(b, MaxValidatedDecoded, func(r Record) bool {
		ts.add(v.FirstTimestamp + r.TimestampDelta)
		if r.Key == nil {
			nullKeys++
		}
		return true
	})
	if err != nil {
		t.Fatalf("DecodeRecords over a valid batch: %v", err)
	}
	if want := ts.validated(v.Header, nullKeys, true); want != v {
		t.Fatalf("timestamps %d..%d and %d keyless records, records say %d..%d and %d",
			v.MinTimestamp, v.MaxTimestamp, v.NullKeys, want.MinTimestamp, want.MaxTimestamp, want.NullKeys)
	}
	// KeylessRecords names them, in order, at most max of them.
	idx, err := KeylessRecords(b, 5)
	if err != nil || len(idx) != min(int(nullKeys), 5) {
		t.Fatalf("KeylessRecords: %v, %v for %d keyless records", idx, err, nullKeys)
	}
	for i := 1; i < len(idx); i++ {
		if idx[i] <= idx[i-1] {
			t.Fatalf("KeylessRecords out of order: %v", idx)
		}
	}
}
