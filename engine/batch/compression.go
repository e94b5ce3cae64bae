package batch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

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
	limit = min(limit, MaxDecompressed)
	var (
		out []byte
		err error
	)
	switch codec {
	case CompressionNone:
		out = src
	case CompressionGzip:
		var r *gzip.Reader
		if r, err = gzip.NewReader(bytes.NewReader(src)); err == nil {
			out, err = readLimited(r, limit)
		}
	case CompressionSnappy:
		out, err = decodeSnappy(nil, src, limit)
	case CompressionLZ4:
		out, err = readLimited(lz4.NewReader(bytes.NewReader(src)), limit)
	case CompressionZstd:
		// A streaming decoder per call, so the limit bounds what is
		// allocated, not only what is returned (callers are lookups, not
		// the produce path, so the set-up cost does not matter).
		var d *zstd.Decoder
		if d, err = zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(limit)+1)); err == nil {
			out, err = readLimited(d, limit)
			d.Close()
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
				err = overLimit(limit)
			}
		}
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

func readLimited(r io.Reader, limit int) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err == nil && len(out) > limit {
		err = overLimit(limit)
	}
	return out, err
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
	body, err := Decompress(h.Compression(), b[HeaderSize:], limit)
	if err != nil {
		return err
	}
	return walkRecords(body, h.NumRecords, true, fn)
}
