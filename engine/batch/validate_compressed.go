package batch

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// MaxValidatedDecoded bounds how much of a compressed batch's decoded
// payload produce validation reads. A batch that decodes to more (a
// compression bomb, or an exotic producer) is accepted on its CRC alone, as
// all compressed batches were before, rather than costing unbounded CPU or
// being refused although it may be legitimate.
const MaxValidatedDecoded = 256 << 20

// errUnchecked stops a validation that reached MaxValidatedDecoded.
var errUnchecked = errors.New("decoded payload past the validation limit")

var (
	gzipReaders sync.Pool // *gzip.Reader
	lz4Readers  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	zstdReaders sync.Pool // *zstd.Decoder
	bufReaders  = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}
	snappyBufs  sync.Pool // *[]byte
)

// maxPooledSnappy keeps unusually large decoded snappy buffers out of the
// pool.
const maxPooledSnappy = 8 << 20

// validateCompressed decodes the payload of a compressed batch as a stream
// and checks its n records like an uncompressed batch's: framing, offset
// deltas 0..n-1, exactly n records and nothing after them. Keys, values and
// headers are skipped, not kept, so memory stays small whatever the payload
// expands to. A payload that does not decode is ErrCorrupt; bad record
// framing is ErrInvalidRecord. The records' timestamps (firstTs plus their
// deltas) go into ts. checked is false when the walk stopped at
// MaxValidatedDecoded (the batch is accepted; ts is then partial). Each
// record without a key is passed to nullKey (by its index in the batch).
func validateCompressed(codec int8, payload []byte, n int32, firstTs int64, ts *tsRange, nullKey func(int32)) (checked bool, err error) {
	src, release, err := openDecoder(codec, payload)
	if err != nil {
		return false, fmt.Errorf("%w: codec %d: %v", ErrCorrupt, codec, err)
	}
	defer release()
	br := bufReaders.Get().(*bufio.Reader)
	br.Reset(&limitedSource{r: src, left: MaxValidatedDecoded})
	defer func() {
		br.Reset(nil)
		bufReaders.Put(br)
	}()
	err = walkRecordStream(br, n, firstTs, ts, nullKey)
	switch {
	case errors.Is(err, errUnchecked):
		return false, nil
	case err != nil:
		return false, err
	}
	switch _, err := br.ReadByte(); {
	case err == nil:
		return false, fmt.Errorf("%w: bytes after the last of %d records", ErrInvalidRecord, n)
	case err == io.EOF, errors.Is(err, errUnchecked):
		return true, nil // every record was walked; only the check for trailing bytes hit the limit
	default:
		return false, decodeErr(err)
	}
}

// openDecoder returns a reader of the decoded payload and a function giving
// its resources back.
func openDecoder(codec int8, payload []byte) (io.Reader, func(), error) {
	switch codec {
	case CompressionGzip:
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(bytes.NewReader(payload))
		} else {
			err = zr.Reset(bytes.NewReader(payload))
		}
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { gzipReaders.Put(zr) }, nil
	case CompressionSnappy:
		// Snappy blocks decode whole; decodeSnappy checks the sizes they
		// claim against the limit before allocating. The buffer is pooled:
		// every snappy produce passes through here.
		bp, _ := snappyBufs.Get().(*[]byte)
		if bp == nil {
			bp = new([]byte)
		}
		out, err := decodeSnappy(*bp, payload, MaxValidatedDecoded)
		if err != nil {
			snappyBufs.Put(bp)
			return nil, nil, err
		}
		return bytes.NewReader(out), func() {
			if cap(out) <= maxPooledSnappy {
				*bp = out[:0]
			}
			snappyBufs.Put(bp)
		}, nil
	case CompressionLZ4:
		lr := lz4Readers.Get().(*lz4.Reader)
		lr.Reset(bytes.NewReader(payload))
		return lr, func() { lz4Readers.Put(lr) }, nil
	case CompressionZstd:
		zd, _ := zstdReaders.Get().(*zstd.Decoder)
		var err error
		if zd == nil {
			zd, err = zstd.NewReader(bytes.NewReader(payload), zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderMaxMemory(MaxValidatedDecoded), zstd.WithDecoderLowmem(true))
		} else {
			err = zd.Reset(bytes.NewReader(payload))
		}
		if err != nil {
			return nil, nil, err
		}
		return zd, func() {
			_ = zd.Reset(nil)
			zstdReaders.Put(zd)
		}, nil
	default:
		return nil, nil, fmt.Errorf("unknown codec %d", codec)
	}
}

// limitedSource ends the decoded stream with errUnchecked past left bytes.
type limitedSource struct {
	r    io.Reader
	left int64
}

func (l *limitedSource) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errUnchecked
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// decodeErr classifies an error met while reading the decoded stream.
func decodeErr(err error) error {
	switch {
	case errors.Is(err, errUnchecked), errors.Is(err, ErrInvalidRecord):
		return err
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return fmt.Errorf("%w: decoded payload ends early", ErrInvalidRecord)
	default:
		return fmt.Errorf("%w: decoding payload: %v", ErrCorrupt, err)
	}
}

var errRecordOverrun = fmt.Errorf("%w: fields overrun the record length", ErrInvalidRecord)

// recordReader reads within one record of known length.
type recordReader struct {
	br   *bufio.Reader
	left int64
	err  error
}

func (r *recordReader) ReadByte() (byte, error) {
	if r.left <= 0 {
		return 0, errRecordOverrun
	}
	c, err := r.br.ReadByte()
	if err != nil {
		return 0, err
	}
	r.left--
	return c, nil
}

func (r *recordReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, err := binary.ReadVarint(r)
	if err != nil {
		r.err = err
	}
	return v
}

// skip discards n bytes of the record; n < min is invalid (min is -1 for
// nullable fields, 0 otherwise).
func (r *recordReader) skip(n, min int64, what string) {
	if r.err != nil {
		return
	}
	switch {
	case n < min:
		r.err = fmt.Errorf("%w: %s length %d", ErrInvalidRecord, what, n)
	case n > r.left:
		r.err = fmt.Errorf("%w: %s of %d bytes overruns its record", ErrInvalidRecord, what, n)
	case n > 0:
		d, err := r.br.Discard(int(n))
		r.left -= int64(d)
		if err != nil {
			r.err = err
		}
	}
}

// walkRecordStream checks n records read from br, adding their timestamps
// (firstTs plus each delta) to ts and passing the index of each keyless
// record to nullKey.
func walkRecordStream(br *bufio.Reader, n int32, firstTs int64, ts *tsRange, nullKey func(int32)) error {
	r := &recordReader{br: br} // one per walk: it escapes into binary.ReadVarint
	for i := int32(0); i < n; i++ {
		length, err := binary.ReadVarint(br)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, decodeErr(err))
		}
		if length < 0 || length > MaxValidatedDecoded {
			return fmt.Errorf("%w: record %d has length %d", ErrInvalidRecord, i, length)
		}
		r.left, r.err = length, nil
		if _, err := r.ReadByte(); err != nil { // attributes
			r.err = err
		}
		tsDelta := r.varint()
		if delta := r.varint(); r.err == nil && delta != int64(i) {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrInvalidRecord, i, delta)
		}
		keyLen := r.varint()
		if r.err == nil && keyLen == -1 {
			nullKey(i)
		}
		r.skip(keyLen, -1, "key")
		r.skip(r.varint(), -1, "value")
		headers := r.varint()
		if r.err == nil && headers < 0 {
			return fmt.Errorf("%w: record %d has %d headers", ErrInvalidRecord, i, headers)
		}
		for j := int64(0); j < headers && r.err == nil; j++ {
			r.skip(r.varint(), 0, "header key")
			r.skip(r.varint(), -1, "header value")
		}
		if r.err != nil {
			return fmt.Errorf("record %d: %w", i, decodeErr(r.err))
		}
		ts.add(firstTs + tsDelta)
		if r.left != 0 {
			return fmt.Errorf("%w: record %d declares %d bytes, its fields take %d", ErrInvalidRecord, i, length, length-r.left)
		}
	}
	return nil
}
