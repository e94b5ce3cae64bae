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

// ErrDecompress reports a compressed payload that does not decode with its
// codec, or whose decoded size exceeds the caller's limit.
var ErrDecompress = errors.New("cannot decompress record batch")

// xerialHeader starts snappy payloads in the framing of Java's
// snappy-java (xerial), which Java producers use: magic, then a version and
// a compatible-version int32, then [int32 length][snappy block] chunks.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialPrefixLen = 16

// MaxDecompressed is the largest decoded payload Decompress accepts.
const MaxDecompressed = 256 << 20

// ErrDecodedLimit is wrapped (with ErrDecompress) by a Decompress that
// stopped at its limit: the payload may be valid, only larger than allowed.
var ErrDecodedLimit = errors.New("decoded payload over the limit")

func overLimit(limit int) error {
	return fmt.Errorf("%w: more than %d bytes decoded", ErrDecodedLimit, limit)
}

// Decompress decodes the records payload of a batch compressed with codec
// (a Compression constant), refusing to produce more than limit bytes
// (capped at MaxDecompressed), so a small hostile batch cannot expand into
// gigabytes.
func Decompress(codec int8, src []byte, limit int) ([]byte, error) {
	return decompressInto(nil, codec, src, limit)
}

// decompressInto is Decompress writing into dst's memory when it is large
// enough (dst's contents are overwritten; CompressionNone returns src).
// Decoders are pooled and decode whole payloads: the log cleaner decodes
// every batch of a compacted topic twice, and a decoder made per call (a
// zstd one allocates its history and block buffers) cost more than the
// decoding.
func decompressInto(dst []byte, codec int8, src []byte, limit int) ([]byte, error) {
	limit = min(limit, MaxDecompressed)
	var (
		out []byte
		err error
	)
	switch codec {
	case CompressionNone:
		out = src
	case CompressionGzip:
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		if zr == nil {
			zr, err = gzip.NewReader(bytes.NewReader(src))
		} else {
			err = zr.Reset(bytes.NewReader(src))
		}
		if err == nil {
			out, err = readLimited(dst, zr, limit)
			gzipReaders.Put(zr)
		}
	case CompressionSnappy:
		out, err = decodeSnappy(dst, src, limit)
	case CompressionLZ4:
		lr := lz4Readers.Get().(*lz4.Reader)
		lr.Reset(bytes.NewReader(src))
		out, err = readLimited(dst, lr, limit)
		lr.Reset(nil)
		lz4Readers.Put(lr)
	case CompressionZstd:
		out, err = decodeZstd(dst, src, limit)
	default:
		return nil, fmt.Errorf("%w: unknown codec %d", ErrDecompress, codec)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: codec %d: %w", ErrDecompress, codec, err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w: codec %d: %w", ErrDecompress, codec, overLimit(limit))
	}
	return out, nil
}

// zstdDecoders pools whole-payload (DecodeAll) zstd decoders; each call
// sets its own limit on the one it takes.
var zstdDecoders sync.Pool // *zstd.Decoder

// decodeZstd decodes src into dst's memory. The decoder's memory limit
// bounds what it allocates, not only what it returns: it stops a frame
// whose declared size is over the limit before decoding it, and one of
// unknown size within a block (128 KiB) of passing the limit.
func decodeZstd(dst, src []byte, limit int) ([]byte, error) {
	maxMem := zstd.WithDecoderMaxMemory(uint64(limit) + 1) // limit itself is allowed; over it is caught below
	d, _ := zstdDecoders.Get().(*zstd.Decoder)
	var err error
	if d == nil {
		d, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), maxMem)
	} else {
		err = d.ResetWithOptions(nil, maxMem)
	}
	if err != nil {
		return nil, err
	}
	out, err := d.DecodeAll(src, dst[:0])
	zstdDecoders.Put(d)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		err = overLimit(limit)
	}
	return out, err
}

// readLimited reads r to its end into dst's memory (grown as needed),
// failing past limit bytes.
func readLimited(dst []byte, r io.Reader, limit int) ([]byte, error) {
	out := dst[:0]
	for {
		if len(out) == cap(out) {
			// Grow by what was read so far (at least 4 KiB), never
			// more than one byte past the limit.
			out = slices.Grow(out, min(max(len(out), 4<<10), limit+1-len(out)))
		}
		n, err := r.Read(out[len(out):min(cap(out), limit+1)])
		out = out[:len(out)+n]
		if len(out) > limit {
			return nil, overLimit(limit)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// decodeSnappy decodes a raw snappy block or xerial-framed chunks into buf
// (reused when it is large enough, else allocated once). The decoded sizes
// the blocks claim are summed and checked against limit before anything is
// allocated.
func decodeSnappy(buf, src []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialHeader) {
		n, err := s2.DecodedLen(src)
		if err != nil {
			return nil, err
		}
		if n > limit {
			return nil, overLimit(limit)
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		return s2.Decode(buf[:n], src)
	}
	if len(src) < xerialPrefixLen {
		return nil, errors.New("truncated xerial header")
	}
	var blocks [][]byte
	total := 0
	for rest := src[xerialPrefixLen:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, errors.New("truncated xerial chunk length")
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, fmt.Errorf("xerial chunk of %d bytes, %d left", n, len(rest))
		}
		dn, err := s2.DecodedLen(rest[:n])
		if err != nil {
			return nil, err
		}
		if total += dn; total > limit {
			return nil, overLimit(limit)
		}
		blocks = append(blocks, rest[:n])
		rest = rest[n:]
	}
	out := buf[:0]
	if cap(out) < total {
		out = make([]byte, 0, total)
	}
	for _, b := range blocks {
		dec, err := s2.Decode(out[len(out):cap(out)], b)
		if err != nil {
			return nil, err
		}
		out = out[:len(out)+len(dec)]
	}
	return out, nil
}

// DecodeRecords walks the records of batch b like Records, decompressing
// its payload first (at most limit decoded bytes) when it is compressed.
func DecodeRecords(b []byte, limit int, fn func(Record) bool) error {
	var d RecordDecoder
	return d.Records(b, limit, fn)
}

// RecordDecoder walks the records of batches one after another (the log
// cleaner reads every batch of a compacted log), decoding compressed
// payloads into one buffer it keeps instead of a new one per batch.
type RecordDecoder struct {
	buf []byte
}

// maxKeptDecoded keeps an unusually large decoded payload's memory from
// being held by a RecordDecoder after its batch.
const maxKeptDecoded = 8 << 20

// Records is DecodeRecords. The records passed to fn may alias the
// decoder's buffer: they are valid until the next call.
func (d *RecordDecoder) Records(b []byte, limit int, fn func(Record) bool) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	if h.Compression() == CompressionNone {
		return Records(b, fn)
	}
	if h.Size() != len(b) || h.Length < minLength {
		return fmt.Errorf("%w: batch length field says %d bytes, have %d", ErrCorrupt, h.Size(), len(b))
	}
	if h.NumRecords < 0 {
		return fmt.Errorf("%w: batch declares %d records", ErrInvalidRecord, h.NumRecords)
	}
	body, err := decompressInto(d.buf, h.Compression(), b[HeaderSize:], limit)
	if err != nil {
		return err
	}
	if cap(body) <= maxKeptDecoded {
		d.buf = body[:0]
	}
	return walkRecords(body, h.NumRecords, true, fn)
}
