package batch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression levels are Kafka's (compression.gzip.level, .lz4.level,
// .zstd.level), mapped onto the Go encoders.
const (
	GzipDefaultLevel = -1 // compress/gzip's and Java's default
	LZ4DefaultLevel  = 9  // Kafka's: its fast compressor
	ZstdDefaultLevel = 3
)

// xerialBlockSize is the block size Java's snappy stream writes.
const xerialBlockSize = 32 << 10

var (
	gzipWriters [11]sync.Pool // by level+1, -1 ... 9
	lz4Writers  [10]sync.Pool // by lz4Level index: Fast, Level1 ... Level9
	// zstdEncoders pools single-goroutine encoders by zstd.EncoderLevel
	// (1 to 4): concurrent recompressions each take one, and the garbage
	// collector frees the idle ones. One shared encoder would serialise
	// them, and one per core (its concurrency) would hold hundreds of MiB
	// at the high levels for the life of the process.
	zstdEncoders [zstd.SpeedBestCompression + 1]sync.Pool
)

// Compress encodes an uncompressed records payload (the bytes after a batch
// header) with codec at a Kafka compression level, in the framing Kafka's
// broker writes, so every consumer that reads Kafka's batches reads these:
//
//   - gzip: a gzip stream, level -1 (default) or 1 to 9;
//   - snappy: xerial framing (Java's SnappyOutputStream) of 32 KiB blocks;
//   - lz4: an LZ4 frame of independent 64 KiB blocks; level 9, Kafka's
//     default, uses the fast compressor as Kafka does, other levels the
//     high-compression one (this encoder's levels stop at 9, so 10 to 17
//     compress as 9);
//   - zstd: a zstd frame with a 64 KiB window, the level mapped to the
//     encoder's nearest speed (zstd.EncoderLevelFromZstd).
//
// CompressionNone returns src itself.
func Compress(codec int8, level int, src []byte) ([]byte, error) {
	if codec == CompressionNone {
		return src, nil
	}
	return appendCompressed(nil, codec, level, src)
}

// appendCompressed appends src compressed with codec (not CompressionNone)
// to dst, so Recompress writes the payload after the batch header it
// keeps instead of copying it there.
func appendCompressed(dst []byte, codec int8, level int, src []byte) ([]byte, error) {
	switch codec {
	case CompressionGzip:
		if level != GzipDefaultLevel && (level < gzip.BestSpeed || level > gzip.BestCompression) {
			return nil, fmt.Errorf("gzip level %d is not -1 or 1 to 9", level)
		}
		pool := &gzipWriters[level+1]
		w, _ := pool.Get().(*gzip.Writer)
		buf := bytes.NewBuffer(dst)
		buf.Grow(len(src)/2 + 64)
		if w == nil {
			var err error
			if w, err = gzip.NewWriterLevel(buf, level); err != nil {
				return nil, err
			}
		} else {
			w.Reset(buf)
		}
		defer pool.Put(w)
		return compressInto(w, buf, src)
	case CompressionSnappy:
		out := slices.Grow(dst, xerialPrefixLen+len(src)+len(src)/6+64)
		out = append(out, xerialHeader...)
		out = binary.BigEndian.AppendUint32(out, 1) // version
		out = binary.BigEndian.AppendUint32(out, 1) // compatible version
		for rest := src; len(rest) > 0; {
			n := min(len(rest), xerialBlockSize)
			block := s2.EncodeSnappy(nil, rest[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
			out = append(out, block...)
			rest = rest[n:]
		}
		return out, nil
	case CompressionLZ4:
		idx, cl := lz4Level(level)
		pool := &lz4Writers[idx]
		w, _ := pool.Get().(*lz4.Writer)
		buf := bytes.NewBuffer(dst)
		buf.Grow(len(src)/2 + 64)
		if w == nil {
			w = lz4.NewWriter(buf)
			if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false), lz4.CompressionLevelOption(cl)); err != nil {
				return nil, fmt.Errorf("lz4 level %d: %w", level, err)
			}
		} else {
			w.Reset(buf) // keeps the options
		}
		defer pool.Put(w)
		return compressInto(w, buf, src)
	case CompressionZstd:
		l := zstd.EncoderLevelFromZstd(level)
		pool := &zstdEncoders[l]
		enc, _ := pool.Get().(*zstd.Encoder)
		if enc == nil {
			var err error
			if enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithWindowSize(64<<10),
				zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true)); err != nil {
				return nil, fmt.Errorf("zstd encoder: %w", err)
			}
		}
		defer pool.Put(enc)
		return enc.EncodeAll(src, slices.Grow(dst, len(src)/2+64)), nil
	default:
		return nil, fmt.Errorf("unknown codec %d", codec)
	}
}

// lz4Level maps a Kafka lz4 level to a pool index and the encoder's level.
func lz4Level(level int) (int, lz4.CompressionLevel) {
	levels := [...]lz4.CompressionLevel{lz4.Fast, lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4,
		lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}
	if level == LZ4DefaultLevel {
		return 0, lz4.Fast
	}
	i := min(max(level, 1), 9)
	return i, levels[i]
}

// Recompress returns the batch b (validated, e.g. by Split) with its records
// stored with codec at level (see Compress): the header is kept, but for the
// codec bits, Length and CRC; records are not touched, so offsets,
// sequences and timestamps are unchanged. A batch already in codec is
// returned as is, whatever level it was compressed at (Kafka recompresses
// only when the codec differs). maxDecoded bounds the decoded records held
// in memory (a small hostile batch can expand a thousandfold): a payload
// that decodes to more is ErrTooLarge, one that does not decode ErrCorrupt.
func Recompress(b []byte, codec int8, level, maxDecoded int) ([]byte, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if h.Compression() == codec {
		return b, nil
	}
	records := b[HeaderSize:]
	if from := h.Compression(); from != CompressionNone {
		if records, err = Decompress(from, records, maxDecoded); err != nil {
			if errors.Is(err, ErrDecodedLimit) {
				return nil, fmt.Errorf("%w: its records decode to more than %d bytes, the most recompression takes", ErrTooLarge, min(maxDecoded, MaxDecompressed))
			}
			return nil, fmt.Errorf("%w: recompressing: %v", ErrCorrupt, err)
		}
	}
	var out []byte
	if codec == CompressionNone {
		out = append(append(make([]byte, 0, HeaderSize+len(records)), b[:HeaderSize]...), records...)
	} else if out, err = appendCompressed(b[:HeaderSize:HeaderSize], codec, level, records); err != nil {
		return nil, fmt.Errorf("recompress to codec %d: %w", codec, err)
	}
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-LengthFieldEnd))
	attrs := uint16(h.Attributes)&^CompressionMask | uint16(codec)
	binary.BigEndian.PutUint16(out[offAttributes:], attrs)
	binary.BigEndian.PutUint32(out[offCRC:], Checksum(out[crcStart:]))
	return out, nil
}

// compressInto writes src through w, a pooled compressor already reset to
// write into buf, and returns what it wrote.
func compressInto(w io.WriteCloser, buf *bytes.Buffer, src []byte) ([]byte, error) {
	if _, err := w.Write(src); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
