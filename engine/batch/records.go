package batch

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Record is one record of an uncompressed batch. Key, Value and header values
// alias the batch bytes; nil means null (length -1) and an empty non-nil slice
// means zero-length.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte
	Value          []byte
	Headers        []RecordHeader
}

// RecordHeader is a record header. Keys are never null; values may be.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Records walks the records of an uncompressed batch b (a whole batch as
// returned by Validate, Split or Iterate), calling fn until it returns false.
// It returns ErrCompressed for a compressed batch and ErrInvalidRecord when
// the record framing is invalid. It does not check the CRC or offset deltas.
func Records(b []byte, fn func(Record) bool) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	if h.Size() != len(b) || h.Length < minLength {
		return fmt.Errorf("%w: batch length field says %d bytes, have %d", ErrCorrupt, h.Size(), len(b))
	}
	if h.Compression() != CompressionNone {
		return fmt.Errorf("%w: codec %d", ErrCompressed, h.Compression())
	}
	if h.NumRecords < 0 {
		return fmt.Errorf("%w: batch declares %d records", ErrInvalidRecord, h.NumRecords)
	}
	return walkRecords(b[HeaderSize:], h.NumRecords, true, fn)
}

// walkRecords decodes up to n records from body, requiring that exactly n
// records exactly fill body unless fn stops the walk early. With
// decodeHeaders false, header keys and values are checked but not
// materialised, so validation allocates nothing.
func walkRecords(body []byte, n int32, decodeHeaders bool, fn func(Record) bool) error {
	pos := 0
	for i := int32(0); i < n; i++ {
		if pos >= len(body) {
			return fmt.Errorf("%w: batch declares %d records, bytes end after %d", ErrInvalidRecord, n, i)
		}
		length, m := readVarint(body[pos:])
		if m <= 0 {
			return fmt.Errorf("%w: record %d: bad length varint", ErrInvalidRecord, i)
		}
		pos += m
		if length < 0 || int64(length) > int64(len(body)-pos) {
			return fmt.Errorf("%w: record %d: length %d with %d bytes left", ErrInvalidRecord, i, length, len(body)-pos)
		}
		rec, err := decodeRecord(body[pos:pos+int(length)], decodeHeaders)
		if err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrInvalidRecord, i, err)
		}
		pos += int(length)
		if !fn(rec) {
			return nil
		}
	}
	if pos != len(body) {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrInvalidRecord, len(body)-pos, n)
	}
	return nil
}

// decodeRecord decodes a record body (everything after its length varint),
// which must be consumed exactly.
func decodeRecord(b []byte, decodeHeaders bool) (Record, error) {
	var r Record
	if len(b) < 1 {
		return r, fmt.Errorf("missing attributes")
	}
	r.Attributes = int8(b[0])
	pos := 1
	ts, m := readVarlong(b[pos:])
	if m <= 0 {
		return r, fmt.Errorf("bad timestamp delta varint")
	}
	r.TimestampDelta = ts
	pos += m
	od, m := readVarint(b[pos:])
	if m <= 0 {
		return r, fmt.Errorf("bad offset delta varint")
	}
	r.OffsetDelta = od
	pos += m
	var err error
	if r.Key, pos, err = readBytes(b, pos, true); err != nil {
		return r, fmt.Errorf("key: %w", err)
	}
	if r.Value, pos, err = readBytes(b, pos, true); err != nil {
		return r, fmt.Errorf("value: %w", err)
	}
	nh, m := readVarint(b[pos:])
	if m <= 0 {
		return r, fmt.Errorf("bad header count varint")
	}
	pos += m
	// Each header takes at least two bytes (two one-byte varints), which bounds
	// the count by the remaining bytes before anything is allocated.
	if nh < 0 || int64(nh)*2 > int64(len(b)-pos) {
		return r, fmt.Errorf("header count %d with %d bytes left", nh, len(b)-pos)
	}
	if decodeHeaders && nh > 0 {
		r.Headers = make([]RecordHeader, 0, nh)
	}
	for j := int32(0); j < nh; j++ {
		var k, v []byte
		if k, pos, err = readBytes(b, pos, false); err != nil {
			return r, fmt.Errorf("header %d key: %w", j, err)
		}
		if v, pos, err = readBytes(b, pos, true); err != nil {
			return r, fmt.Errorf("header %d value: %w", j, err)
		}
		if decodeHeaders {
			r.Headers = append(r.Headers, RecordHeader{Key: string(k), Value: v})
		}
	}
	if pos != len(b) {
		return r, fmt.Errorf("%d bytes after the headers", len(b)-pos)
	}
	return r, nil
}

// readBytes reads a varint-length-prefixed byte string at b[pos:]. A length of
// -1 is null (returned as nil) when nullable.
func readBytes(b []byte, pos int, nullable bool) ([]byte, int, error) {
	n, m := readVarint(b[pos:])
	if m <= 0 {
		return nil, pos, fmt.Errorf("bad length varint")
	}
	pos += m
	if n == -1 && nullable {
		return nil, pos, nil
	}
	if n < 0 || int64(n) > int64(len(b)-pos) {
		return nil, pos, fmt.Errorf("length %d with %d bytes left", n, len(b)-pos)
	}
	return b[pos : pos+int(n) : pos+int(n)], pos + int(n), nil
}

// readVarint decodes a zig-zag varint of at most 5 bytes (Kafka's int32
// varint). It returns the bytes consumed, or 0 if b is too short or the
// encoding is too long or overflows 32 bits.
func readVarint(b []byte) (int32, int) {
	var ux uint32
	for i := 0; i < 5; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		if i == 4 && c > 0x0f {
			return 0, 0
		}
		ux |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int32(ux>>1) ^ -int32(ux&1), i + 1
		}
	}
	return 0, 0
}

// readVarlong decodes a zig-zag varint of at most 10 bytes (Kafka's int64
// varlong), with the same return convention as readVarint.
func readVarlong(b []byte) (int64, int) {
	ux, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0
	}
	return int64(ux>>1) ^ -int64(ux&1), n
}

// Build encodes an uncompressed RecordBatch v2 from h and recs and returns
// it. From h it takes BaseOffset, PartitionLeaderEpoch, Attributes (the
// compression bits are cleared), FirstTimestamp, MaxTimestamp, ProducerID,
// ProducerEpoch and BaseSequence; it computes Length, Magic, CRC, NumRecords
// and LastOffsetDelta (the last record's OffsetDelta, or h.LastOffsetDelta
// when recs is empty). Records are encoded with their own OffsetDelta, so a
// producer-style batch sets them to 0..n-1.
//
// Build is for batches the broker writes itself (control markers, internal
// topics, the log cleaner's) and for tests.
func Build(h Header, recs []Record) []byte {
	return AppendBuild(nil, h, recs)
}

// AppendBuild is Build appending the batch to dst (grown once, to the
// batch's exact size); the batch is the returned slice from len(dst) on.
// The log cleaner rebuilds batch after batch into one buffer.
func AppendBuild(dst []byte, h Header, recs []Record) []byte {
	size := HeaderSize
	for i := range recs {
		l := recordBodyLen(&recs[i])
		size += varintLen(int64(l)) + l
	}
	start := len(dst)
	dst = slices.Grow(dst, size)
	dst = dst[:start+HeaderSize]
	clear(dst[start:])
	b := dst[start:]
	for i := range recs {
		r := &recs[i]
		b = binary.AppendVarint(b, int64(recordBodyLen(r)))
		b = append(b, byte(r.Attributes))
		b = binary.AppendVarint(b, r.TimestampDelta)
		b = binary.AppendVarint(b, int64(r.OffsetDelta))
		b = appendNullableBytes(b, r.Key)
		b = appendNullableBytes(b, r.Value)
		b = binary.AppendVarint(b, int64(len(r.Headers)))
		for _, hd := range r.Headers {
			b = binary.AppendVarint(b, int64(len(hd.Key)))
			b = append(b, hd.Key...)
			b = appendNullableBytes(b, hd.Value)
		}
	}
	lastDelta := h.LastOffsetDelta
	if len(recs) > 0 {
		lastDelta = recs[len(recs)-1].OffsetDelta
	}
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-LengthFieldEnd))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[offMagic] = Magic
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(h.Attributes&^CompressionMask))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(lastDelta))
	binary.BigEndian.PutUint64(b[offFirstTimestamp:], uint64(h.FirstTimestamp))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(h.MaxTimestamp))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[offNumRecords:], uint32(len(recs)))
	binary.BigEndian.PutUint32(b[offCRC:], Checksum(b[crcStart:]))
	if len(b) > size { // cannot happen (size is exact); were it wrong, b moved
		return append(dst[:start], b...)
	}
	return dst[:start+len(b)]
}

func recordBodyLen(r *Record) int {
	n := 1 + varintLen(r.TimestampDelta) + varintLen(int64(r.OffsetDelta)) +
		nullableBytesLen(r.Key) + nullableBytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, hd := range r.Headers {
		n += varintLen(int64(len(hd.Key))) + len(hd.Key) + nullableBytesLen(hd.Value)
	}
	return n
}

func nullableBytesLen(v []byte) int {
	if v == nil {
		return 1
	}
	return varintLen(int64(len(v))) + len(v)
}

func appendNullableBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// varintLen is the encoded size of a zig-zag varint.
func varintLen(v int64) int {
	ux := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for ux >= 0x80 {
		ux >>= 7
		n++
	}
	return n
}
