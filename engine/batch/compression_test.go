package batch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
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
		if validateCompressed(codec, payload, n) == nil && codec != CompressionNone {
			out, err := Decompress(codec, payload, MaxValidatedDecoded)
			if err != nil || len(out) > MaxValidatedDecoded {
				return // accepted past the validation limit, or a codec quirk Decompress rejects
			}
			count := int32(0)
			if err := walkRecords(out, n, false, func(Record) bool { count++; return true }); err != nil || count != n {
				t.Fatalf("accepted %d records that walkRecords rejects: %v", n, err)
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
