package batch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/require"
)

// compressWith encodes src as producers do for each codec; snappy is
// tested both raw (librdkafka, franz-go) and xerial-framed (Java).
func compressWith(t testing.TB, codec string, src []byte) []byte {
	var buf bytes.Buffer
	switch codec {
	case "gzip":
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(src)
		require.NoError(t, w.Close())
	case "snappy":
		return s2.EncodeSnappy(nil, src)
	case "snappy-xerial":
		buf.Write(xerialHeader)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		for rest := src; ; {
			n := min(len(rest), 1000)
			block := s2.EncodeSnappy(nil, rest[:n])
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(block))))
			buf.Write(block)
			rest = rest[n:]
			if len(rest) == 0 {
				break
			}
		}
	case "lz4":
		w := lz4.NewWriter(&buf)
		_, _ = w.Write(src)
		require.NoError(t, w.Close())
	case "zstd":
		enc, err := zstd.NewWriter(nil)
		require.NoError(t, err)
		return enc.EncodeAll(src, nil)
	}
	return buf.Bytes()
}

var codecs = map[string]int8{
	"gzip": CompressionGzip, "snappy": CompressionSnappy, "snappy-xerial": CompressionSnappy,
	"lz4": CompressionLZ4, "zstd": CompressionZstd,
}

func TestDecompressRoundTripAndLimit(t *testing.T) {
	src := bytes.Repeat([]byte("moonmq record payload "), 500) // 11,000 bytes
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			enc := compressWith(t, name, src)
			out, err := Decompress(codec, enc, 1<<20)
			require.NoError(t, err)
			require.Equal(t, src, out)

			_, err = Decompress(codec, enc, len(src)-1)
			require.ErrorIs(t, err, ErrDecompress, "over the limit")

			_, err = Decompress(codec, enc[:len(enc)/2], 1<<20)
			require.ErrorIs(t, err, ErrDecompress, "truncated")
		})
	}
	_, err := Decompress(7, []byte{1}, 100)
	require.ErrorIs(t, err, ErrDecompress)
}

// compressedBatch builds a producer batch of recs and compresses its records
// with the named codec, as a producer would; extra is appended to the
// records before compressing (to test trailing bytes).
func compressedBatch(t testing.TB, name string, recs []Record, extra []byte) []byte {
	plain := Build(Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: 1000, MaxTimestamp: 1190}, recs)
	b := append([]byte(nil), plain[:HeaderSize]...)
	b = append(b, compressWith(t, name, append(plain[HeaderSize:], extra...))...)
	binary.BigEndian.PutUint32(b[LengthFieldEnd-4:], uint32(len(b)-LengthFieldEnd))
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	binary.BigEndian.PutUint16(b[offAttributes:], attrs|uint16(codecs[name]))
	binary.BigEndian.PutUint32(b[offCRC:], Checksum(b[crcStart:]))
	return b
}

func testRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), TimestampDelta: int64(i * 10), Key: []byte("k"),
			Value: []byte(fmt.Sprintf("v%d", i)), Headers: []RecordHeader{{Key: "h", Value: []byte("x")}}}
	}
	return recs
}

// TestValidateCompressed: produce validation decodes compressed payloads
// and checks their records like uncompressed ones.
func TestValidateCompressed(t *testing.T) {
	for name := range codecs {
		t.Run(name, func(t *testing.T) {
			_, err := Validate(compressedBatch(t, name, testRecords(20), nil), 0)
			require.NoError(t, err)

			bad := testRecords(3)
			bad[2].OffsetDelta = 7
			b := compressedBatch(t, name, bad, nil)
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 2) // header consistent, records not
			binary.BigEndian.PutUint32(b[offCRC:], Checksum(b[crcStart:]))
			_, err = Validate(b, 0)
			require.ErrorIs(t, err, ErrInvalidRecord, "offset delta")

			_, err = Validate(compressedBatch(t, name, testRecords(3), []byte{1, 2, 3}), 0)
			require.ErrorIs(t, err, ErrInvalidRecord, "trailing bytes")

			short := compressedBatch(t, name, testRecords(3), nil)
			binary.BigEndian.PutUint32(short[offNumRecords:], 4)
			binary.BigEndian.PutUint32(short[offLastOffsetDelta:], 3)
			binary.BigEndian.PutUint32(short[offCRC:], Checksum(short[crcStart:]))
			_, err = Validate(short, 0)
			require.ErrorIs(t, err, ErrInvalidRecord, "fewer records than declared")
		})
	}
}

// TestDecodeRecordsCompressed walks the records of a compressed batch.
func TestDecodeRecordsCompressed(t *testing.T) {
	for name := range codecs {
		t.Run(name, func(t *testing.T) {
			b := compressedBatch(t, name, testRecords(20), nil)
			require.ErrorIs(t, Records(b, func(Record) bool { return true }), ErrCompressed)

			var got []string
			require.NoError(t, DecodeRecords(b, 1<<20, func(r Record) bool {
				got = append(got, string(r.Value))
				return true
			}))
			require.Len(t, got, 20)
			require.Equal(t, "v19", got[19])
		})
	}
}

// Pooled decoders take each call's limit: one used with a large limit
// enforces a small one next, and the other way round.
func TestDecompressPooledLimits(t *testing.T) {
	src := bytes.Repeat([]byte("moonmq record payload "), 500)
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			enc := compressWith(t, name, src)
			for range 3 {
				out, err := Decompress(codec, enc, 1<<20)
				require.NoError(t, err)
				require.Equal(t, src, out)
				_, err = Decompress(codec, enc, 100)
				require.ErrorIs(t, err, ErrDecodedLimit)
				out, err = Decompress(codec, enc, len(src))
				require.NoError(t, err, "exactly the limit is allowed")
				require.Equal(t, src, out)
			}
		})
	}
}

// A RecordDecoder walks batch after batch of any codec with one buffer;
// each call's records are whole, whatever the previous batch was.
func TestRecordDecoder(t *testing.T) {
	var d RecordDecoder
	names := []string{"zstd", "gzip", "snappy", "snappy-xerial", "lz4", "zstd"}
	for round := range 2 {
		for i, name := range names {
			n := 5 + 7*i + round
			var got []string
			require.NoError(t, d.Records(compressedBatch(t, name, testRecords(n), nil), 1<<20, func(r Record) bool {
				got = append(got, string(r.Value))
				return true
			}), name)
			require.Len(t, got, n, name)
			for j, v := range got {
				require.Equal(t, fmt.Sprintf("v%d", j), v, name)
			}
		}
	}
	plain := Build(Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, testRecords(3))
	count := 0
	require.NoError(t, d.Records(plain, 1<<20, func(Record) bool { count++; return true }))
	require.Equal(t, 3, count, "uncompressed batches too")
	require.ErrorIs(t, d.Records(compressedBatch(t, "zstd", testRecords(50), nil), 10, func(Record) bool { return true }), ErrDecompress)
}

func FuzzDecompress(f *testing.F) {
	src := []byte("fuzz seed payload, fuzz seed payload, fuzz seed payload")
	for name, codec := range codecs {
		f.Add(codec, compressWith(f, name, src))
	}
	f.Fuzz(func(t *testing.T, codec int8, data []byte) {
		out, err := Decompress(codec, data, 1<<16)
		if err == nil && len(out) > 1<<16 {
			t.Fatalf("decoded %d bytes past the limit", len(out))
		}
	})
}

// FuzzValidateCompressed feeds arbitrary payloads to the streaming record
// check behind Validate (the CRC keeps FuzzValidate's mutations from
// reaching it): it must return, without panicking, and never accept a
// payload whose records do not decode.
func FuzzValidateCompressed(f *testing.F) {
	for name, codec := range codecs {
		b := compressedBatch(f, name, testRecords(3), nil)
		f.Add(codec, b[HeaderSize:], int32(3))
	}
	f.Fuzz(func(t *testing.T, codec int8, payload []byte, n int32) {
		if n < 1 || n > 1000 {
			return
		}
		var keyless []int32
		if _, err := validateCompressed(codec, payload, n, 0, &tsRange{}, func(i int32) { keyless = append(keyless, i) }); err == nil && codec != CompressionNone {
			out, err := Decompress(codec, payload, MaxValidatedDecoded)
			if err != nil || len(out) > MaxValidatedDecoded {
				return // accepted past the validation limit, or a codec quirk Decompress rejects
			}
			count := int32(0)
			var want []int32
			if err := walkRecords(out, n, false, func(r Record) bool {
				if r.Key == nil {
					want = append(want, count)
				}
				count++
				return true
			}); err != nil || count != n {
				t.Fatalf("accepted %d records that walkRecords rejects: %v", n, err)
			}
			if !slices.Equal(keyless, want) {
				t.Fatalf("keyless records %v, walkRecords says %v", keyless, want)
			}
		}
	})
}

// BenchmarkValidateCompressed: produce validation of a 1 MiB (decoded)
// batch of 1 KiB records with compressible values, per codec; SetBytes is
// the decoded size.
func BenchmarkValidateCompressed(b *testing.B) {
	recs := make([]Record, 1024)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), Value: bytes.Repeat([]byte(fmt.Sprintf("value %04d ", i)), 100)[:1000]}
	}
	for _, name := range []string{"snappy", "lz4", "zstd", "gzip"} {
		b.Run(name, func(b *testing.B) {
			batch := compressedBatch(b, name, recs, nil)
			b.SetBytes(int64(len(Build(Header{}, recs))))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(batch, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Compress writes what Decompress (and so any Kafka consumer) reads, at
// every level Kafka accepts for the codec.
func TestCompressRoundTrip(t *testing.T) {
	src := bytes.Repeat([]byte("moonmq record payload "), 5000) // 110 KB: several snappy and lz4 blocks
	for _, tc := range []struct {
		codec  int8
		levels []int
	}{
		{CompressionNone, []int{0}},
		{CompressionGzip, []int{-1, 1, 5, 9}},
		{CompressionSnappy, []int{0}},
		{CompressionLZ4, []int{1, 2, 8, 9, 10, 17}},
		{CompressionZstd, []int{-131072, -1, 1, 3, 6, 10, 22}},
	} {
		for _, level := range tc.levels {
			enc, err := Compress(tc.codec, level, src)
			require.NoError(t, err, "codec %d level %d", tc.codec, level)
			out, err := Decompress(tc.codec, enc, 1<<20)
			require.NoError(t, err, "codec %d level %d", tc.codec, level)
			require.Equal(t, src, out)
			if tc.codec != CompressionNone {
				require.Less(t, len(enc), len(src)/4, "codec %d level %d compresses", tc.codec, level)
			}
			empty, err := Compress(tc.codec, level, nil)
			require.NoError(t, err)
			out, err = Decompress(tc.codec, empty, 1<<20)
			require.NoError(t, err)
			require.Empty(t, out)
		}
	}
	enc, err := Compress(CompressionSnappy, 0, src)
	require.NoError(t, err)
	require.Equal(t, xerialHeader, enc[:len(xerialHeader)], "snappy is xerial-framed, as Java writes it")
	_, err = Compress(CompressionGzip, 0, src)
	require.Error(t, err)
	_, err = Compress(9, 0, src)
	require.Error(t, err)
}

// Recompress converts between every pair of codecs and keeps everything but
// the codec bits, the length and the CRC.
func TestRecompress(t *testing.T) {
	recs := testRecords(50)
	plain := Build(Header{ProducerID: 42, ProducerEpoch: 3, BaseSequence: 7, FirstTimestamp: 1000, MaxTimestamp: 1490,
		Attributes: 0}, recs)
	sources := map[string][]byte{"none": plain}
	for name := range codecs {
		sources[name] = compressedBatch(t, name, recs, nil)
	}
	for name, src := range sources {
		srcHeader, err := Validate(src, 0)
		require.NoError(t, err, name)
		for _, to := range []int8{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
			out, err := Recompress(src, to, 0, MaxDecompressed)
			if to == CompressionGzip {
				out, err = Recompress(src, to, -1, MaxDecompressed)
			}
			require.NoError(t, err, "%s -> %d", name, to)
			h, err := Validate(out, 0)
			require.NoError(t, err, "%s -> %d", name, to)
			require.Equal(t, to, h.Compression())
			if srcHeader.Compression() == to {
				require.Equal(t, src, out, "same codec: kept as is")
			}
			want := srcHeader
			want.Attributes = srcHeader.Attributes&^CompressionMask | int16(to)
			want.Length, want.CRC = h.Length, h.CRC
			require.Equal(t, want, h, "%s -> %d: header kept", name, to)

			var got []Record
			require.NoError(t, DecodeRecords(out, 1<<20, func(r Record) bool { got = append(got, r); return true }))
			require.Len(t, got, len(recs))
			for i := range recs {
				require.Equal(t, recs[i].Value, got[i].Value)
				require.Equal(t, recs[i].TimestampDelta, got[i].TimestampDelta)
			}
		}
	}
	_, err := Recompress(plain[:10], CompressionGzip, -1, MaxDecompressed)
	require.ErrorIs(t, err, ErrCorrupt)
}

// Validate reports the records' timestamp range, skipping records without
// a timestamp, for compressed batches too.
func TestValidateRecordTimestamps(t *testing.T) {
	recs := []Record{{OffsetDelta: 0, TimestampDelta: 5}, {OffsetDelta: 1, TimestampDelta: -3}, {OffsetDelta: 2, TimestampDelta: 40}}
	b := Build(Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: 1000, MaxTimestamp: 1040}, recs)
	for _, codec := range []int8{CompressionNone, CompressionGzip, CompressionZstd} {
		c, err := Recompress(b, codec, 3, MaxDecompressed)
		if codec == CompressionGzip {
			c, err = Recompress(b, codec, -1, MaxDecompressed)
		}
		require.NoError(t, err)
		h, err := ValidateRecords(c, 0)
		require.NoError(t, err)
		require.Equal(t, int64(997), h.MinTimestamp, "codec %d", codec)
		require.Equal(t, int64(1040), h.MaxTimestamp, "codec %d", codec)
	}
	// A record whose timestamp is NoTimestamp (-1) has none.
	b = Build(Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: -1, MaxTimestamp: -1},
		[]Record{{OffsetDelta: 0}, {OffsetDelta: 1}})
	h, err := ValidateRecords(b, 0)
	require.NoError(t, err)
	require.Equal(t, int64(NoTimestamp), h.MinTimestamp)
	require.Equal(t, int64(NoTimestamp), h.MaxTimestamp)
	b = Build(Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: -1, MaxTimestamp: 5},
		[]Record{{OffsetDelta: 0}, {OffsetDelta: 1, TimestampDelta: 6}})
	h, err = ValidateRecords(b, 0)
	require.NoError(t, err)
	require.Equal(t, int64(5), h.MinTimestamp)
	require.Equal(t, int64(5), h.MaxTimestamp)
}
