// Package batch owns the Kafka RecordBatch v2 byte format: parsing the fixed
// header, validating a batch exactly as received from a producer, splitting a
// produce request's records field into batches, patching the fields the broker
// owns (base offset, partition leader epoch, LogAppendTime), walking the
// records of an uncompressed batch, and building uncompressed batches.
//
// Everything here is a pure function over byte slices: no I/O, no goroutines,
// no retained state. Returned slices alias the input unless documented
// otherwise.
//
// Invariants and rules:
//   - Every size read from the bytes is bounded by the bytes actually present
//     before it is used to slice or allocate, so hostile input can never panic
//     or allocate more than its own length.
//   - A batch that passed Validate has magic 2, a Length consistent with its
//     slice, a correct CRC-32C over bytes [21:], NumRecords == LastOffsetDelta+1
//     >= 1 and, when uncompressed, records whose framing exactly fills the batch
//     with offset deltas 0..n-1 in order.
//   - The base offset (bytes [0:8]) and partition leader epoch (bytes [12:16])
//     are outside the CRC, so the broker may rewrite them without recomputing
//     it; anything else that is changed requires a CRC update (SetLogAppendTime
//     does this).
package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Layout of the RecordBatch v2 header. All integers are big-endian.
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// HeaderSize is the length of the fixed RecordBatch v2 header; records
	// start at this offset.
	HeaderSize = 61

	// LengthFieldEnd is the number of bytes (base offset + length) that precede
	// the part of the batch counted by the Length field. A batch occupies
	// LengthFieldEnd + Length bytes.
	LengthFieldEnd = 12

	// minLength is the smallest legal Length: the header after the length
	// field, with no records.
	minLength = HeaderSize - LengthFieldEnd

	// crcStart is where the CRC-32C coverage begins (the attributes field).
	crcStart = offAttributes

	// Magic is the only supported message format version.
	Magic = 2
	// MagicOffset is where the magic byte sits in every message format, so
	// a scan for batch boundaries can test it before parsing a header.
	MagicOffset = offMagic
)

// Attribute bits.
const (
	// CompressionMask selects the compression codec bits of the attributes.
	CompressionMask = 0x07
	// TimestampTypeBit is set when timestamps are LogAppendTime.
	TimestampTypeBit = 0x08
	// TransactionalBit is set on batches written inside a transaction.
	TransactionalBit = 0x10
	// ControlBit is set on control batches (transaction markers).
	ControlBit = 0x20
	// DeleteHorizonBit is set by compaction once tombstones have a delete
	// horizon (KIP-534); FirstTimestamp then holds that horizon.
	DeleteHorizonBit = 0x40
)

// Compression codecs as stored in the low three attribute bits.
const (
	CompressionNone   int8 = 0
	CompressionGzip   int8 = 1
	CompressionSnappy int8 = 2
	CompressionLZ4    int8 = 3
	CompressionZstd   int8 = 4
)

// Sentinel errors. Callers map them to Kafka error codes with errors.Is; every
// returned error wraps exactly one of them and adds detail.
var (
	// ErrCorrupt reports bad framing, a CRC mismatch or inconsistent counts:
	// Kafka CORRUPT_MESSAGE.
	ErrCorrupt = errors.New("corrupt record batch")
	// ErrUnsupportedMagic reports a message format other than v2: Kafka
	// UNSUPPORTED_FOR_MESSAGE_FORMAT.
	ErrUnsupportedMagic = errors.New("unsupported record batch magic")
	// ErrTooLarge reports a batch larger than the allowed size: Kafka
	// MESSAGE_TOO_LARGE.
	ErrTooLarge = errors.New("record batch too large")
	// ErrInvalidRecord reports records inside an uncompressed batch whose
	// framing is invalid, or an empty records field: Kafka INVALID_RECORD.
	ErrInvalidRecord = errors.New("invalid record")
	// ErrCompressed is returned by Records for a compressed batch, whose
	// records cannot be walked without decompressing.
	ErrCompressed = errors.New("record batch is compressed")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) of b, the checksum RecordBatch v2
// stores over bytes [21:].
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// UpdateChecksum extends a running CRC-32C with b, for callers that checksum a
// batch in pieces (e.g. recovery streaming a large batch from disk).
func UpdateChecksum(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// CRCStart is the byte offset within a batch where CRC coverage begins.
const CRCStart = crcStart

// Header is the fixed part of a RecordBatch v2.
type Header struct {
	BaseOffset           int64
	Length               int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Validated is a batch header with what validation learned from the
// batch's records.
type Validated struct {
	Header
	// MinTimestamp and MaxTimestamp are the smallest and largest record
	// timestamps (FirstTimestamp plus each record's delta), leaving out
	// records without one (NoTimestamp); both are NoTimestamp when no record
	// has one. For a compressed batch decoded past MaxValidatedDecoded they
	// are FirstTimestamp and MaxTimestamp, the bounds the producer declared.
	MinTimestamp, MaxTimestamp int64
	// NullKeys counts the records without a key (key length -1; an empty
	// key is a key, as Kafka's Record.hasKey says). A compacted topic
	// refuses them. It is counted during the walk validation does anyway,
	// so a topic that allows keyless records pays nothing for it.
	NullKeys int32
	// Walked reports that every record was walked, so NullKeys and the
	// timestamps are exact; it is false only for a compressed batch that
	// decodes past MaxValidatedDecoded (accepted on its CRC alone).
	Walked bool
}

// NoTimestamp is the timestamp of a record that has none (Kafka's
// RecordBatch.NO_TIMESTAMP).
const NoTimestamp = -1

// tsRange accumulates the record timestamps Validate sees.
type tsRange struct {
	min, max int64
	any      bool
}

func (r *tsRange) add(ts int64) {
	switch {
	case ts == NoTimestamp:
	case !r.any:
		r.min, r.max, r.any = ts, ts, true
	default:
		r.min, r.max = min(r.min, ts), max(r.max, ts)
	}
}

func (r *tsRange) validated(h Header, nullKeys int32, walked bool) Validated {
	if !r.any {
		return Validated{Header: h, MinTimestamp: NoTimestamp, MaxTimestamp: NoTimestamp, NullKeys: nullKeys, Walked: walked}
	}
	return Validated{Header: h, MinTimestamp: r.min, MaxTimestamp: r.max, NullKeys: nullKeys, Walked: walked}
}

// Compression returns the compression codec (attributes & 7).
func (h Header) Compression() int8 { return int8(h.Attributes & CompressionMask) }

// LogAppendTime reports whether the batch's timestamps are broker-assigned;
// every record's timestamp is then MaxTimestamp.
func (h Header) LogAppendTime() bool { return h.Attributes&TimestampTypeBit != 0 }

// IsTransactional reports whether the batch belongs to a transaction.
func (h Header) IsTransactional() bool { return h.Attributes&TransactionalBit != 0 }

// IsControl reports whether the batch holds control records (transaction
// markers).
func (h Header) IsControl() bool { return h.Attributes&ControlBit != 0 }

// Size is the total number of bytes the batch occupies: 12 + Length.
func (h Header) Size() int { return LengthFieldEnd + int(h.Length) }

// LastOffset is the offset of the last record: BaseOffset + LastOffsetDelta.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset following the batch: LastOffset + 1.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// RecordTimestamp returns the timestamp of a record of this batch, honouring
// LogAppendTime (where every record carries the batch's MaxTimestamp).
func (h Header) RecordTimestamp(r Record) int64 {
	if h.LogAppendTime() {
		return h.MaxTimestamp
	}
	return h.FirstTimestamp + r.TimestampDelta
}

// RecordOffset returns the absolute offset of a record of this batch.
func (h Header) RecordOffset(r Record) int64 { return h.BaseOffset + int64(r.OffsetDelta) }

// ParseHeader decodes the fixed header at the start of b. It checks only that
// the header is present (ErrCorrupt otherwise) and that the magic byte is 2
// (ErrUnsupportedMagic otherwise); Length, CRC and counts are not checked.
// On ErrUnsupportedMagic the returned header still carries BaseOffset, Length
// and Magic, which sit at the same positions in every message format.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < offMagic+1 {
		return Header{}, fmt.Errorf("%w: %d bytes is shorter than a batch header (%d)", ErrCorrupt, len(b), HeaderSize)
	}
	h := Header{
		BaseOffset: int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		Length:     int32(binary.BigEndian.Uint32(b[offLength:])),
		Magic:      int8(b[offMagic]),
	}
	if h.Magic != Magic {
		return h, fmt.Errorf("%w: magic %d, only %d is supported", ErrUnsupportedMagic, h.Magic, Magic)
	}
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes is shorter than a batch header (%d)", ErrCorrupt, len(b), HeaderSize)
	}
	h.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
	h.CRC = binary.BigEndian.Uint32(b[offCRC:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[offAttributes:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
	h.FirstTimestamp = int64(binary.BigEndian.Uint64(b[offFirstTimestamp:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[offMaxTimestamp:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[offProducerID:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[offBaseSequence:]))
	h.NumRecords = int32(binary.BigEndian.Uint32(b[offNumRecords:]))
	return h, nil
}

// checkFraming verifies the parts of a batch every stored or received batch
// must satisfy: a parseable v2 header, a sane Length matching len(b), and the
// CRC. It does not look at counts or records.
func checkFraming(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Length < minLength {
		return h, fmt.Errorf("%w: batch length %d is below the minimum %d", ErrCorrupt, h.Length, minLength)
	}
	if h.Size() != len(b) {
		return h, fmt.Errorf("%w: batch length field says %d bytes, have %d", ErrCorrupt, h.Size(), len(b))
	}
	if got := Checksum(b[crcStart:]); got != h.CRC {
		return h, fmt.Errorf("%w: crc mismatch: stored %#08x, computed %#08x", ErrCorrupt, h.CRC, got)
	}
	return h, nil
}

// Validate checks one complete batch as received from a producer: magic 2,
// Length consistent with len(b), size <= maxBytes (ErrTooLarge; maxBytes <= 0
// means no limit), CRC-32C over bytes [21:], NumRecords == LastOffsetDelta+1
// and NumRecords >= 1, and for an uncompressed batch the records' framing:
// each record's varint fields fit its declared length, offset deltas are
// 0..n-1 in order, there are exactly NumRecords records, and they exactly fill
// the batch. A compressed batch's payload is decoded as a stream and its
// records checked the same way (ErrCorrupt if it does not decode), up to
// MaxValidatedDecoded decoded bytes.
func Validate(b []byte, maxBytes int) (Header, error) {
	v, err := ValidateRecords(b, maxBytes)
	return v.Header, err
}

// ValidateRecords is Validate, also returning the records' timestamp range
// found by the walk over them (the produce path checks it against the
// topic's message.timestamp bounds without decoding the batch again).
func ValidateRecords(b []byte, maxBytes int) (Validated, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return Validated{Header: h}, err
	}
	// Size is checked before the CRC, as Kafka does, so an oversized batch is
	// reported as too large rather than costing a full checksum pass.
	if maxBytes > 0 && len(b) > maxBytes {
		return Validated{Header: h}, fmt.Errorf("%w: %d bytes exceeds the limit of %d", ErrTooLarge, len(b), maxBytes)
	}
	if h, err = checkFraming(b); err != nil {
		return Validated{Header: h}, err
	}
	if h.NumRecords < 1 {
		return Validated{Header: h}, fmt.Errorf("%w: batch declares %d records", ErrCorrupt, h.NumRecords)
	}
	if int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
		return Validated{Header: h}, fmt.Errorf("%w: %d records but last offset delta %d", ErrCorrupt, h.NumRecords, h.LastOffsetDelta)
	}
	var ts tsRange
	if h.Compression() != CompressionNone {
		var nullKeys int32
		checked, err := validateCompressed(h.Compression(), b[HeaderSize:], h.NumRecords, h.FirstTimestamp, &ts, func(int32) { nullKeys++ })
		if err == nil && !checked {
			ts = tsRange{}
			ts.add(h.FirstTimestamp)
			ts.add(h.MaxTimestamp)
			nullKeys = 0
		}
		return ts.validated(h, nullKeys, checked), err
	}
	n, nullKeys := int32(0), int32(0)
	err = walkRecords(b[HeaderSize:], h.NumRecords, false, func(r Record) bool {
		if r.OffsetDelta != n {
			err = fmt.Errorf("%w: record %d has offset delta %d", ErrInvalidRecord, n, r.OffsetDelta)
			return false
		}
		if r.Key == nil {
			nullKeys++
		}
		ts.add(h.FirstTimestamp + r.TimestampDelta)
		n++
		return true
	})
	if err != nil {
		return Validated{Header: h}, err
	}
	if n != h.NumRecords {
		return Validated{Header: h}, fmt.Errorf("%w: found %d records, header declares %d", ErrInvalidRecord, n, h.NumRecords)
	}
	return ts.validated(h, nullKeys, true), nil
}

// KeylessRecords returns the indexes (positions in the batch, from 0) of
// the first max records of b without a key, for a produce refused on a
// compacted topic. b must have passed ValidateRecords with Walked set; a
// compressed batch is decoded as a stream, as validation does, so memory
// stays small whatever its payload expands to.
func KeylessRecords(b []byte, max int) ([]int32, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	var out []int32
	add := func(i int32) {
		if len(out) < max {
			out = append(out, i)
		}
	}
	if h.Compression() != CompressionNone {
		var ts tsRange
		checked, err := validateCompressed(h.Compression(), b[HeaderSize:], h.NumRecords, h.FirstTimestamp, &ts, add)
		if err == nil && !checked {
			err = fmt.Errorf("%w: decodes to more than %d bytes", ErrTooLarge, MaxValidatedDecoded)
		}
		return out, err
	}
	i := int32(0)
	err = Records(b, func(r Record) bool {
		if r.Key == nil {
			add(i)
		}
		i++
		return len(out) < max
	})
	return out, err
}

// ValidateStored checks a batch read back from a log or received from a
// replication leader: magic, Length and CRC. Counts are only checked for
// consistency (NumRecords <= LastOffsetDelta+1, both non-negative) because
// compaction legitimately removes records from a batch and may leave it
// empty. Records are not walked: the CRC proves the bytes are the ones that
// were validated on produce.
func ValidateStored(b []byte) (Header, error) {
	h, err := checkFraming(b)
	if err != nil {
		return h, err
	}
	if h.LastOffsetDelta < 0 || h.NumRecords < 0 || int64(h.NumRecords) > int64(h.LastOffsetDelta)+1 {
		return h, fmt.Errorf("%w: %d records with last offset delta %d", ErrCorrupt, h.NumRecords, h.LastOffsetDelta)
	}
	return h, nil
}

// Split splits a produce request's records field (one or more concatenated
// batches) into batches, validating each with ValidateRecords. Trailing bytes that do
// not form a whole batch are ErrCorrupt; an empty field is ErrInvalidRecord.
// The returned batches alias records.
func Split(records []byte, maxBytes int) ([][]byte, []Validated, error) {
	if len(records) == 0 {
		return nil, nil, fmt.Errorf("%w: no record batches", ErrInvalidRecord)
	}
	var (
		batches [][]byte
		headers []Validated
	)
	for rest := records; len(rest) > 0; {
		if len(rest) < LengthFieldEnd {
			return nil, nil, fmt.Errorf("%w: %d trailing bytes after %d batches", ErrCorrupt, len(rest), len(batches))
		}
		if len(rest) > offMagic && rest[offMagic] != Magic {
			return nil, nil, fmt.Errorf("%w: magic %d, only %d is supported", ErrUnsupportedMagic, int8(rest[offMagic]), Magic)
		}
		length := int32(binary.BigEndian.Uint32(rest[offLength:]))
		if length < minLength {
			return nil, nil, fmt.Errorf("%w: batch length %d is below the minimum %d", ErrCorrupt, length, minLength)
		}
		size := int64(LengthFieldEnd) + int64(length)
		if size > int64(len(rest)) {
			if maxBytes > 0 && size > int64(maxBytes) {
				return nil, nil, fmt.Errorf("%w: batch of %d bytes exceeds the limit of %d", ErrTooLarge, size, maxBytes)
			}
			return nil, nil, fmt.Errorf("%w: batch of %d bytes truncated to %d", ErrCorrupt, size, len(rest))
		}
		b := rest[:size:size]
		h, err := ValidateRecords(b, maxBytes)
		if err != nil {
			return nil, nil, fmt.Errorf("batch %d: %w", len(batches), err)
		}
		batches = append(batches, b)
		headers = append(headers, h)
		rest = rest[size:]
	}
	return batches, headers, nil
}

// SetBaseOffset writes the base offset (bytes [0:8], outside the CRC). b must
// be a whole batch, e.g. as returned by Validate or Split.
func SetBaseOffset(b []byte, off int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(off))
}

// SetPartitionLeaderEpoch writes the partition leader epoch (bytes [12:16],
// outside the CRC). b must be a whole batch.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime applies Kafka's LogAppendTime: it sets the timestamp-type
// attribute bit, sets MaxTimestamp to ts (consumers then use it for every
// record) and recomputes the CRC. b must be a whole batch.
func SetLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	binary.BigEndian.PutUint16(b[offAttributes:], attrs|TimestampTypeBit)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[offCRC:], Checksum(b[crcStart:]))
}

// Iterate walks the batches of a byte slice read from a log (for example a
// fetch result), calling fn with each header and the batch's bytes until fn
// returns false. A partial trailing batch ends the walk without error, since
// reads may stop mid-batch; a length that cannot be a batch, or a magic other
// than 2, is ErrCorrupt. The CRC is not checked.
func Iterate(b []byte, fn func(h Header, raw []byte) bool) error {
	for pos := 0; len(b)-pos >= HeaderSize; {
		h, err := ParseHeader(b[pos:])
		if err != nil {
			return fmt.Errorf("%w: at byte %d: %v", ErrCorrupt, pos, err)
		}
		if h.Length < minLength {
			return fmt.Errorf("%w: at byte %d: batch length %d is below the minimum %d", ErrCorrupt, pos, h.Length, minLength)
		}
		size := h.Size()
		if size > len(b)-pos {
			return nil
		}
		if !fn(h, b[pos:pos+size:pos+size]) {
			return nil
		}
		pos += size
	}
	return nil
}
