package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// producerBatch builds a producer-style uncompressed batch of n records with
// offset deltas 0..n-1 and values of valueSize bytes.
func producerBatch(n, valueSize int) []byte {
	recs := make([]Record, n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, valueSize)
		recs[i] = Record{
			TimestampDelta: int64(i),
			OffsetDelta:    int32(i),
			Key:            []byte(fmt.Sprintf("key-%d", i)),
			Value:          v,
		}
	}
	return Build(Header{
		PartitionLeaderEpoch: -1,
		FirstTimestamp:       1_700_000_000_000,
		MaxTimestamp:         1_700_000_000_000 + int64(n-1),
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
	}, recs)
}

// kmsgBatch encodes a batch with franz-go's kmsg types, independently of
// Build, so the two encoders cross-check each other.
func kmsgBatch(t testing.TB, n int, compression int16, payload []byte) []byte {
	t.Helper()
	var records []byte
	if payload != nil {
		records = payload
	} else {
		for i := 0; i < n; i++ {
			r := kmsg.Record{
				TimestampDelta64: int64(i * 3),
				OffsetDelta:      int32(i),
				Key:              []byte(fmt.Sprintf("k%d", i)),
				Value:            []byte(fmt.Sprintf("value-%d", i)),
				Headers:          []kmsg.Header{{Key: "h", Value: []byte("v")}, {Key: "nil", Value: nil}},
			}
			body := r.AppendTo(nil) // Length 0 encodes as one byte
			r.Length = int32(len(body) - 1)
			records = r.AppendTo(records)
		}
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           compression,
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       1000,
		MaxTimestamp:         1000 + int64(3*(n-1)),
		ProducerID:           77,
		ProducerEpoch:        2,
		FirstSequence:        10,
		NumRecords:           int32(n),
		Records:              records,
	}
	rb.Length = int32(HeaderSize - LengthFieldEnd + len(records))
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[offCRC:], Checksum(b[crcStart:]))
	return b
}

func TestValidateKmsgBatch(t *testing.T) {
	b := kmsgBatch(t, 5, 0, nil)
	h, err := Validate(b, 0)
	require.NoError(t, err)
	require.Equal(t, int32(5), h.NumRecords)
	require.Equal(t, int32(4), h.LastOffsetDelta)
	require.Equal(t, int64(77), h.ProducerID)
	require.Equal(t, int16(2), h.ProducerEpoch)
	require.Equal(t, int32(10), h.BaseSequence)
	require.Equal(t, len(b), h.Size())
	require.Equal(t, int64(4), h.LastOffset())

	var got []Record
	require.NoError(t, Records(b, func(r Record) bool { got = append(got, r); return true }))
	require.Len(t, got, 5)
	for i, r := range got {
		require.Equal(t, int32(i), r.OffsetDelta)
		require.Equal(t, int64(i*3), r.TimestampDelta)
		require.Equal(t, int64(1000+i*3), h.RecordTimestamp(r))
		require.Equal(t, fmt.Sprintf("k%d", i), string(r.Key))
		require.Equal(t, fmt.Sprintf("value-%d", i), string(r.Value))
		require.Equal(t, []RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "nil", Value: nil}}, r.Headers)
	}
}

func TestBuildDecodesWithKmsg(t *testing.T) {
	recs := []Record{
		{OffsetDelta: 0, Key: nil, Value: []byte("v0")},
		{OffsetDelta: 1, TimestampDelta: -5, Key: []byte{}, Value: nil,
			Headers: []RecordHeader{{Key: "a", Value: []byte("b")}}},
		{OffsetDelta: 2, TimestampDelta: 1 << 40, Key: []byte("k"), Value: bytes.Repeat([]byte("x"), 300)},
	}
	b := Build(Header{BaseOffset: 42, PartitionLeaderEpoch: 3, Attributes: TransactionalBit | CompressionMask,
		FirstTimestamp: 9, MaxTimestamp: 1<<40 + 9, ProducerID: 5, ProducerEpoch: 1, BaseSequence: 7}, recs)

	h, err := Validate(b, 0)
	require.NoError(t, err)
	require.Equal(t, CompressionNone, h.Compression(), "Build clears compression bits")
	require.True(t, h.IsTransactional())
	require.False(t, h.IsControl())
	require.Equal(t, int64(44), h.LastOffset())

	var rb kmsg.RecordBatch
	require.NoError(t, rb.ReadFrom(b))
	require.Equal(t, int64(42), rb.FirstOffset)
	require.Equal(t, int32(3), rb.NumRecords)
	require.Equal(t, uint32(rb.CRC), Checksum(b[crcStart:]))
	body := rb.Records
	for i := range recs {
		var r kmsg.Record
		// Each record is length-prefixed; decode length to find its end.
		l, m := readVarint(body)
		require.Positive(t, m)
		require.NoError(t, r.ReadFrom(body[:m+int(l)]))
		require.Equal(t, recs[i].OffsetDelta, r.OffsetDelta)
		require.Equal(t, recs[i].TimestampDelta, r.TimestampDelta64)
		require.Equal(t, recs[i].Key, r.Key)
		require.Equal(t, recs[i].Value, r.Value)
		body = body[m+int(l):]
	}
	require.Empty(t, body)
}

func TestValidateErrors(t *testing.T) {
	good := producerBatch(3, 10)
	mut := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	recrc := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[offCRC:], Checksum(b[crcStart:]))
		return b
	}
	// badRecords rebuilds the batch around a hand-made records section.
	badRecords := func(n int32, body []byte) []byte {
		b := append([]byte(nil), good[:HeaderSize]...)
		b = append(b, body...)
		binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-LengthFieldEnd))
		binary.BigEndian.PutUint32(b[offNumRecords:], uint32(n))
		binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(n-1))
		return recrc(b)
	}
	rec := func(offsetDelta int32) []byte {
		r := Build(Header{}, []Record{{OffsetDelta: offsetDelta, Value: []byte("v")}})
		return r[HeaderSize:]
	}

	cases := []struct {
		name     string
		b        []byte
		maxBytes int
		want     error
	}{
		{"empty", nil, 0, ErrCorrupt},
		{"short header", good[:40], 0, ErrCorrupt},
		{"magic 1", mut(func(b []byte) []byte { b[offMagic] = 1; return b }), 0, ErrUnsupportedMagic},
		{"magic 0 short", mut(func(b []byte) []byte { b[offMagic] = 0; return b[:20] }), 0, ErrUnsupportedMagic},
		{"length too long", mut(func(b []byte) []byte { return b[:len(b)-1] }), 0, ErrCorrupt},
		{"length too short", mut(func(b []byte) []byte { return append(b, 0) }), 0, ErrCorrupt},
		{"negative length", mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLength:], 0xffffffff)
			return b
		}), 0, ErrCorrupt},
		{"too large", good, len(good) - 1, ErrTooLarge},
		{"crc", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), 0, ErrCorrupt},
		{"crc field", mut(func(b []byte) []byte { b[offCRC] ^= 0x80; return b }), 0, ErrCorrupt},
		{"zero records", mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offNumRecords:], 0)
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 0xffffffff)
			return recrc(b)
		}), 0, ErrCorrupt},
		{"count mismatch", mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 5)
			return recrc(b)
		}), 0, ErrCorrupt},
		{"fewer records than declared", badRecords(2, rec(0)), 0, ErrInvalidRecord},
		{"more records than declared", badRecords(1, append(rec(0), rec(1)...)), 0, ErrInvalidRecord},
		{"offset delta out of order", badRecords(2, append(rec(1), rec(0)...)), 0, ErrInvalidRecord},
		{"trailing garbage", badRecords(1, append(rec(0), 0)), 0, ErrInvalidRecord},
		{"record length beyond batch", badRecords(1, []byte{0x7e, 0}), 0, ErrInvalidRecord},
		{"record length negative", badRecords(1, []byte{0x01, 0}), 0, ErrInvalidRecord},
		{"varint too long", badRecords(1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}), 0, ErrInvalidRecord},
		{"key length beyond record", badRecords(1, []byte{0x0a, 0, 0, 0, 0x7e, 0, 0}), 0, ErrInvalidRecord},
		{"header count beyond record", badRecords(1, []byte{0x0c, 0, 0, 0, 1, 1, 0x7e}), 0, ErrInvalidRecord},
		{"null header key", badRecords(1, []byte{0x10, 0, 0, 0, 1, 1, 2, 1, 1}), 0, ErrInvalidRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate(tc.b, tc.maxBytes)
			require.ErrorIs(t, err, tc.want)
		})
	}

	// The corrupt-record builders must be otherwise valid: a well-formed body
	// through the same path passes.
	_, err := Validate(badRecords(2, append(rec(0), rec(1)...)), 0)
	require.NoError(t, err)
}

func TestValidateCompressedGarbage(t *testing.T) {
	// A payload that does not decode with its codec is corrupt.
	b := kmsgBatch(t, 4, int16(CompressionZstd), []byte("not really zstd"))
	_, err := Validate(b, 0)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorIs(t, Records(b, func(Record) bool { return true }), ErrCompressed)
}

func TestValidateStored(t *testing.T) {
	b := producerBatch(3, 5)
	_, err := ValidateStored(b)
	require.NoError(t, err)

	// A compacted batch: fewer records than the offset span is fine for
	// stored data but not for produce.
	c := Build(Header{}, []Record{{OffsetDelta: 0}, {OffsetDelta: 4}})
	_, err = ValidateStored(c)
	require.NoError(t, err)
	_, err = Validate(c, 0)
	require.ErrorIs(t, err, ErrCorrupt)

	c[len(c)-1] ^= 0xff
	_, err = ValidateStored(c)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestSplit(t *testing.T) {
	a, b := producerBatch(2, 10), producerBatch(5, 100)
	all := append(append([]byte(nil), a...), b...)
	batches, hs, err := Split(all, 0)
	require.NoError(t, err)
	require.Equal(t, [][]byte{a, b}, batches)
	require.Len(t, hs, 2)
	require.Equal(t, int32(5), hs[1].NumRecords)

	_, _, err = Split(nil, 0)
	require.ErrorIs(t, err, ErrInvalidRecord)
	for cut := 1; cut < len(b); cut += 7 {
		_, _, err = Split(all[:len(a)+cut], 0)
		require.ErrorIs(t, err, ErrCorrupt, "cut %d", cut)
	}
	_, _, err = Split(all, len(b)-1)
	require.ErrorIs(t, err, ErrTooLarge)
	// A truncated batch whose declared size exceeds the limit is too large.
	_, _, err = Split(all[:len(a)+HeaderSize], len(b)-1)
	require.ErrorIs(t, err, ErrTooLarge)

	old := append([]byte(nil), all...)
	old[len(a)+offMagic] = 1
	_, _, err = Split(old, 0)
	require.ErrorIs(t, err, ErrUnsupportedMagic)

	bad := append([]byte(nil), all...)
	bad[len(bad)-1] ^= 1
	_, _, err = Split(bad, 0)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestSetters(t *testing.T) {
	b := producerBatch(3, 10)
	SetBaseOffset(b, 1234)
	SetPartitionLeaderEpoch(b, 9)
	h, err := Validate(b, 0)
	require.NoError(t, err, "base offset and epoch are outside the CRC")
	require.Equal(t, int64(1234), h.BaseOffset)
	require.Equal(t, int32(9), h.PartitionLeaderEpoch)
	require.False(t, h.LogAppendTime())

	SetLogAppendTime(b, 5555)
	h, err = Validate(b, 0)
	require.NoError(t, err, "SetLogAppendTime recomputes the CRC")
	require.True(t, h.LogAppendTime())
	require.Equal(t, int64(5555), h.MaxTimestamp)
	require.Equal(t, int64(1_700_000_000_000), h.FirstTimestamp)
	require.NoError(t, Records(b, func(r Record) bool {
		require.Equal(t, int64(5555), h.RecordTimestamp(r))
		return true
	}))
}

func TestIterate(t *testing.T) {
	var all []byte
	var want []int32
	for i := 1; i <= 4; i++ {
		b := producerBatch(i, 20*i)
		SetBaseOffset(b, int64(i*100))
		all = append(all, b...)
		want = append(want, int32(i))
	}
	collect := func(b []byte) ([]int32, error) {
		var got []int32
		err := Iterate(b, func(h Header, raw []byte) bool {
			require.Equal(t, h.Size(), len(raw))
			_, verr := Validate(raw, 0)
			require.NoError(t, verr)
			got = append(got, h.NumRecords)
			return true
		})
		return got, err
	}
	got, err := collect(all)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// Partial trailing batch: stop without error.
	got, err = collect(all[:len(all)-1])
	require.NoError(t, err)
	require.Equal(t, want[:3], got)
	got, err = collect(all[:len(all)-HeaderSize-50])
	require.NoError(t, err)
	require.Equal(t, want[:3], got)

	// Early stop.
	n := 0
	require.NoError(t, Iterate(all, func(Header, []byte) bool { n++; return n < 2 }))
	require.Equal(t, 2, n)

	// Nonsense length.
	bad := append([]byte(nil), all...)
	binary.BigEndian.PutUint32(bad[offLength:], 3)
	_, err = collect(bad)
	require.ErrorIs(t, err, ErrCorrupt)
	bad = append([]byte(nil), all...)
	bad[offMagic] = 7
	_, err = collect(bad)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestVarints(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, 1 << 20, -(1 << 20), 1<<31 - 1, -(1 << 31)} {
		enc := binary.AppendVarint(nil, v)
		require.Equal(t, len(enc), varintLen(v))
		got, n := readVarint(enc)
		require.Equal(t, len(enc), n, "value %d", v)
		require.Equal(t, int32(v), got)
		got64, n := readVarlong(enc)
		require.Equal(t, len(enc), n)
		require.Equal(t, v, got64)
	}
	// Values beyond int32 are rejected by the 32-bit reader.
	_, n := readVarint(binary.AppendVarint(nil, 1<<32))
	require.Zero(t, n)
	_, n = readVarint([]byte{0x80})
	require.Zero(t, n)
}

func BenchmarkValidate(b *testing.B) {
	// 16 KiB batch of 1 KiB records.
	batch := producerBatch(15, 1024)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Validate(batch, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}

// Validation counts the records without a key (null, not empty) in plain
// and compressed batches alike: a compacted topic refuses them.
func TestValidateCountsNullKeys(t *testing.T) {
	recs := []Record{
		{Key: []byte("k"), Value: []byte("v")},
		{Key: nil, Value: []byte("keyless")},
		{Key: []byte{}, Value: []byte("empty key is a key")},
		{Key: nil, Value: nil},
	}
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
	}
	h := Header{Magic: Magic, ProducerID: -1, BaseSequence: -1, FirstTimestamp: 1000, MaxTimestamp: 1000, LastOffsetDelta: 3, NumRecords: 4}
	plain := Build(h, recs)
	v, err := ValidateRecords(plain, 0)
	require.NoError(t, err)
	require.Equal(t, int32(2), v.NullKeys)
	require.True(t, v.Walked)
	idx, err := KeylessRecords(plain, 10)
	require.NoError(t, err)
	require.Equal(t, []int32{1, 3}, idx)
	idx, err = KeylessRecords(plain, 1)
	require.NoError(t, err)
	require.Equal(t, []int32{1}, idx, "at most max")
	for _, codec := range []int8{CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		level := 0
		if codec == CompressionGzip {
			level = GzipDefaultLevel
		}
		b, err := Recompress(plain, codec, level, 1<<20)
		require.NoError(t, err, codec)
		v, err := ValidateRecords(b, 0)
		require.NoError(t, err, codec)
		require.Equal(t, codec, v.Compression())
		require.Equal(t, int32(2), v.NullKeys, "codec %d", codec)
		require.True(t, v.Walked)
		idx, err := KeylessRecords(b, 10)
		require.NoError(t, err)
		require.Equal(t, []int32{1, 3}, idx, "codec %d", codec)
	}
	keyed := Build(h, []Record{{Key: []byte("a")}, {Key: []byte("b"), OffsetDelta: 1}, {Key: []byte("c"), OffsetDelta: 2}, {Key: []byte("d"), OffsetDelta: 3}})
	v, err = ValidateRecords(keyed, 0)
	require.NoError(t, err)
	require.Zero(t, v.NullKeys)
}

// AppendBuild writes what Build writes after what dst holds, which it
// leaves alone.
func TestAppendBuild(t *testing.T) {
	h := Header{BaseOffset: 7, FirstTimestamp: 1000, MaxTimestamp: 1190, ProducerID: 3, ProducerEpoch: 1, BaseSequence: 9}
	for _, recs := range [][]Record{nil, testRecords(1), testRecords(40)} {
		want := Build(h, recs)
		prefix := []byte("already here")
		for _, dst := range [][]byte{nil, append([]byte(nil), prefix...), append(make([]byte, 0, 4096), prefix...)} {
			n := len(dst)
			got := AppendBuild(dst, h, recs)
			require.Equal(t, want, got[n:])
			require.Equal(t, string(dst), string(got[:n]))
			if len(recs) > 0 {
				_, err := Validate(got[n:], 0)
				require.NoError(t, err)
			}
		}
	}
}
