package client

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type posKind uint8

const (
	posEarliest posKind = iota // zero value: a zero Position is Earliest
	posLatest
	posOffset
	posTime
	posFromEnd
)

// Position says where in each partition a Read or Consume starts. The zero
// value is Earliest.
type Position struct {
	kind posKind
	n    int64
	t    time.Time
}

// Earliest starts at the log start offset (the oldest retained record).
func Earliest() Position { return Position{kind: posEarliest} }

// Latest starts at the end of the log: Consume sees only new records, and a
// Read returns nothing (use FromEnd to read the newest records).
func Latest() Position { return Position{kind: posLatest} }

// Offset starts at offset n in every partition, clamped to the retained log
// [log start, end].
func Offset(n int64) Position { return Position{kind: posOffset, n: max(n, 0)} }

// Timestamp starts at the first record whose timestamp is at or after t (the
// end of the log if there is none).
func Timestamp(t time.Time) Position { return Position{kind: posTime, t: t} }

// FromEnd starts n records before the end of each partition (at the log
// start if fewer are retained): "the newest n records per partition".
func FromEnd(n int64) Position { return Position{kind: posFromEnd, n: max(n, 0)} }

// IsEarliest and the other predicates let renderers describe a Position.
func (p Position) IsEarliest() bool { return p.kind == posEarliest }

// IsLatest reports whether p is Latest.
func (p Position) IsLatest() bool { return p.kind == posLatest }

// String renders p in the syntax ParsePosition accepts.
func (p Position) String() string {
	switch p.kind {
	case posLatest:
		return "latest"
	case posOffset:
		return strconv.FormatInt(p.n, 10)
	case posTime:
		if y := p.t.UTC().Year(); y < 0 || y > 9999 {
			// RFC 3339 has four-digit years only.
			return "@" + strconv.FormatInt(p.t.UnixMilli(), 10)
		}
		return p.t.UTC().Format(time.RFC3339Nano)
	case posFromEnd:
		return "-" + strconv.FormatInt(p.n, 10)
	default:
		return "earliest"
	}
}

// ParsePosition parses the command-line syntax for a Position:
//
//	earliest | oldest | beginning   Earliest()
//	latest | newest | end           Latest()
//	N (N >= 0)                      Offset(N)
//	-N                              FromEnd(N)
//	RFC 3339 time                   Timestamp(t), e.g. 2024-05-01T12:00:00Z
//	@MILLIS                         Timestamp(unix milliseconds)
func ParsePosition(s string) (Position, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "earliest", "oldest", "beginning", "start":
		return Earliest(), nil
	case "latest", "newest", "end":
		return Latest(), nil
	}
	if ms, ok := strings.CutPrefix(s, "@"); ok {
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return Position{}, fmt.Errorf("%w: position %q: want @unix-milliseconds", ErrInvalidArgument, s)
		}
		return Timestamp(time.UnixMilli(n)), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if strings.HasPrefix(s, "-") { // "-0" too: FromEnd(0)
			if n == math.MinInt64 {
				return Position{}, fmt.Errorf("%w: position %q out of range", ErrInvalidArgument, s)
			}
			return FromEnd(-n), nil
		}
		return Offset(n), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Timestamp(t), nil
	}
	return Position{}, fmt.Errorf("%w: position %q: want earliest, latest, an offset, -N (from end), "+
		"an RFC 3339 time or @unix-millis", ErrInvalidArgument, s)
}

// kgoOffset converts p to a franz-go offset for Consume.
func (p Position) kgoOffset() kgo.Offset {
	switch p.kind {
	case posLatest:
		return kgo.NewOffset().AtEnd()
	case posOffset:
		return kgo.NewOffset().At(p.n)
	case posTime:
		return kgo.NewOffset().AfterMilli(p.t.UnixMilli())
	case posFromEnd:
		return kgo.NewOffset().AtEnd().Relative(-p.n)
	default:
		return kgo.NewOffset().AtStart()
	}
}

// resolve returns the concrete start offset for a partition retaining
// [start, end), given the offset found for a Timestamp position (ts, -1 if
// none). The result is always within [start, end].
func (p Position) resolve(start, end, ts int64) int64 {
	var at int64
	switch p.kind {
	case posLatest:
		at = end
	case posOffset:
		at = p.n
	case posTime:
		at = ts
		if ts < 0 {
			at = end
		}
	case posFromEnd:
		at = end - p.n
	default:
		at = start
	}
	return min(max(at, start), end)
}
