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

// TestDecodeRecordsCompressed walks the records of a compressed batch.
func TestDecodeRecordsCompressed(t *testing.T) {
	recs := make([]Record, 20)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), TimestampDelta: int64(i * 10), Value: []byte(fmt.Sprintf("v%d", i))}
	}
	plain := Build(Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: 1000, MaxTimestamp: 1190}, recs)
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			b := append([]byte(nil), plain[:HeaderSize]...)
			b = append(b, compressWith(t, name, plain[HeaderSize:])...)
			binary.BigEndian.PutUint32(b[LengthFieldEnd-4:], uint32(len(b)-LengthFieldEnd))
			attrs := binary.BigEndian.Uint16(b[offAttributes:])
			binary.BigEndian.PutUint16(b[offAttributes:], attrs|uint16(codec))
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
