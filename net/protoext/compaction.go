package protoext

import (
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kbin"
)

// PartitionCompactionTag is the tagged field MoonMQ adds to a partition of
// a DescribeLogDirs response (v2 and later) when the partition belongs to
// a compacted topic and the log cleaner has looked at it: what the
// cleaner knows of it, which Kafka exposes only as broker metrics (JMX),
// never on the wire. A tool reading a stock Kafka broker finds no such
// tag and shows the state as unknown.
const PartitionCompactionTag = 10001

// PartitionCompaction is the log cleaner's view of one replica of a
// compacted partition. Its values are the cleaner's as of its last look
// at the partition (a pass, at most the cleaner's backoff ago) and of its
// last cleaning, not recomputed for the request.
type PartitionCompaction struct {
	// DirtyRatio is the share, in [0, 1], of the partition's cleanable
	// bytes not cleaned yet; it is cleaned once this exceeds the topic's
	// min.cleanable.dirty.ratio. DirtyBytes are those bytes: the
	// cleaner's lag in bytes.
	DirtyRatio float64
	DirtyBytes int64
	// CompactionDelayMs is how far past max.compaction.lag.ms the oldest
	// dirty record is (0: within it): the cleaner's lag in time.
	CompactionDelayMs int64
	// Cleanings counts the cleanings of the partition that ended well
	// since the broker started.
	Cleanings int64
	// LastCleanedMs is when the last of them ended (Unix milliseconds; -1:
	// none since start) and LastDurationMs how long it took.
	LastCleanedMs  int64
	LastDurationMs int64
	// Cleaning is set while a cleaning of the partition runs.
	Cleaning bool
	// Uncleanable says why the partition's cleaning failed; the broker
	// does not clean it again until it is truncated, re-created or the
	// broker restarts. Empty while the partition is cleanable.
	Uncleanable string
}

const compactionVersion = 0

// compactionFlagCleaning is bit 0 of the flags byte: a cleaning runs.
const compactionFlagCleaning = 1

// Append encodes c: int8 version, int8 flags (bit 0: cleaning), float64
// dirty ratio, int64 dirty bytes, int64 compaction delay ms, int64
// cleanings, int64 last cleaned ms, int64 last duration ms, compact string
// uncleanable.
func (c PartitionCompaction) Append(dst []byte) []byte {
	dst = append(dst, compactionVersion)
	var flags byte
	if c.Cleaning {
		flags |= compactionFlagCleaning
	}
	dst = append(dst, flags)
	dst = kbin.AppendFloat64(dst, c.DirtyRatio)
	dst = kbin.AppendInt64(dst, c.DirtyBytes)
	dst = kbin.AppendInt64(dst, c.CompactionDelayMs)
	dst = kbin.AppendInt64(dst, c.Cleanings)
	dst = kbin.AppendInt64(dst, c.LastCleanedMs)
	dst = kbin.AppendInt64(dst, c.LastDurationMs)
	return kbin.AppendCompactString(dst, c.Uncleanable)
}

// ErrMalformedCompaction marks a compaction value that does not decode.
var ErrMalformedCompaction = errors.New("protoext: malformed partition compaction state")

// MaxUncleanable bounds the reason, in bytes, a parser accepts: a
// sentence, not a payload (the broker writes an error's text, cut to
// this).
const MaxUncleanable = 4 << 10

// ParsePartitionCompaction decodes a value written by Append. A newer
// version, an unknown flag, trailing bytes or a value out of its range (a
// ratio outside [0, 1], a negative count, a time before -1) is refused
// rather than misread: a tool shows the state as unknown then.
func ParsePartitionCompaction(b []byte) (PartitionCompaction, error) {
	r := kbin.Reader{Src: b}
	if v := r.Int8(); v != compactionVersion {
		return PartitionCompaction{}, fmt.Errorf("%w: version %d", ErrMalformedCompaction, v)
	}
	flags := r.Int8()
	c := PartitionCompaction{
		Cleaning:          flags&compactionFlagCleaning != 0,
		DirtyRatio:        r.Float64(),
		DirtyBytes:        r.Int64(),
		CompactionDelayMs: r.Int64(),
		Cleanings:         r.Int64(),
		LastCleanedMs:     r.Int64(),
		LastDurationMs:    r.Int64(),
	}
	// The length is checked before the string is copied out.
	n := r.Uvarint()
	switch {
	case !r.Ok():
		return PartitionCompaction{}, fmt.Errorf("%w: truncated", ErrMalformedCompaction)
	case flags&^compactionFlagCleaning != 0:
		return PartitionCompaction{}, fmt.Errorf("%w: unknown flags %#x", ErrMalformedCompaction, flags)
	case n == 0 || n-1 > MaxUncleanable:
		return PartitionCompaction{}, fmt.Errorf("%w: uncleanable reason of length %d", ErrMalformedCompaction, int64(n)-1)
	}
	c.Uncleanable = string(r.Span(int(n - 1)))
	switch {
	case !r.Ok():
		return PartitionCompaction{}, fmt.Errorf("%w: truncated", ErrMalformedCompaction)
	case len(r.Src) != 0:
		return PartitionCompaction{}, fmt.Errorf("%w: %d bytes after the value", ErrMalformedCompaction, len(r.Src))
	case math.IsNaN(c.DirtyRatio) || c.DirtyRatio < 0 || c.DirtyRatio > 1:
		return PartitionCompaction{}, fmt.Errorf("%w: dirty ratio %v", ErrMalformedCompaction, c.DirtyRatio)
	case c.DirtyBytes < 0 || c.CompactionDelayMs < 0 || c.Cleanings < 0 || c.LastDurationMs < 0 || c.LastCleanedMs < -1:
		return PartitionCompaction{}, fmt.Errorf("%w: a negative count or time", ErrMalformedCompaction)
	}
	return c, nil
}
