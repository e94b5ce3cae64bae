// Package protoext holds MoonMQ's extensions to the Kafka protocol, shared
// by the broker (net/kafka) and the client facade (net/client). Extensions
// are added the way KIP-482 allows: as tagged fields with numbers far above
// any Kafka assigns (Kafka numbers its tags from 0 up), so stock clients
// skip them and see standard responses.
//
// It imports nothing from MoonMQ.
package protoext

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// PartitionHealthTag is the tagged field MoonMQ adds to every partition of
// a DescribeLogDirs response (v2 and later, the flexible versions): the
// replica's storage state, which the standard fields cannot express (a
// partition that is online but has damaged ranges).
const PartitionHealthTag = 10000

// PartitionHealth is the storage state of one replica.
type PartitionHealth struct {
	// Offline: the replica cannot serve (it could not be opened, or its
	// log failed an I/O operation; the broker retries it). Error says why.
	Offline bool
	Error   string
	// Corrupt lists damaged ranges of an online replica: their offsets are
	// not served, everything else is.
	Corrupt []CorruptRange
}

// CorruptRange is a damaged stretch of a replica's log: offsets
// [FromOffset, ToOffset) cannot be read (ToOffset -1: to the end of its
// segment).
type CorruptRange struct {
	FromOffset, ToOffset int64
	Reason               string
}

const healthVersion = 0

// maxRanges bounds what a parser accepts (a peer sizes the array).
const maxRanges = 1 << 16

// Append encodes h: int8 version, int8 offline, compact string error,
// compact array of (int64 from, int64 to, compact string reason).
func (h PartitionHealth) Append(dst []byte) []byte {
	dst = append(dst, healthVersion)
	off := byte(0)
	if h.Offline {
		off = 1
	}
	dst = append(dst, off)
	dst = kbin.AppendCompactString(dst, h.Error)
	dst = kbin.AppendCompactArrayLen(dst, len(h.Corrupt))
	for _, r := range h.Corrupt {
		dst = kbin.AppendInt64(dst, r.FromOffset)
		dst = kbin.AppendInt64(dst, r.ToOffset)
		dst = kbin.AppendCompactString(dst, r.Reason)
	}
	return dst
}

// ErrMalformed marks a health value that does not decode.
var ErrMalformed = errors.New("protoext: malformed partition health")

// ParsePartitionHealth decodes a value written by Append. Newer versions
// are refused rather than misread.
func ParsePartitionHealth(b []byte) (PartitionHealth, error) {
	r := kbin.Reader{Src: b}
	var h PartitionHealth
	if v := r.Int8(); v != healthVersion {
		return h, fmt.Errorf("%w: version %d", ErrMalformed, v)
	}
	h.Offline = r.Int8() != 0
	h.Error = r.CompactString()
	n := r.CompactArrayLen()
	if !r.Ok() || n < 0 || n > maxRanges || int(n)*17 > len(r.Src) {
		return PartitionHealth{}, fmt.Errorf("%w: %d ranges", ErrMalformed, n)
	}
	for range n {
		cr := CorruptRange{FromOffset: r.Int64(), ToOffset: r.Int64(), Reason: r.CompactString()}
		h.Corrupt = append(h.Corrupt, cr)
	}
	if !r.Ok() {
		return PartitionHealth{}, fmt.Errorf("%w: truncated", ErrMalformed)
	}
	return h, nil
}
