package client

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Isolation says which records a read returns, as Kafka's consumer
// isolation.level does.
type Isolation uint8

const (
	// ReadUncommitted (the zero value, Kafka's default) returns every
	// record up to the high watermark, including those of open and aborted
	// transactions.
	ReadUncommitted Isolation = iota
	// ReadCommitted returns only records that are not part of a
	// transaction or whose transaction committed, up to the last stable
	// offset (LSO): records of aborted transactions are dropped, records
	// of open ones are not reached yet.
	ReadCommitted
)

// String returns "read_uncommitted" or "read_committed", Kafka's names.
func (i Isolation) String() string {
	if i == ReadCommitted {
		return "read_committed"
	}
	return "read_uncommitted"
}

// ParseIsolation accepts Kafka's names (read_committed, read_uncommitted),
// also with a space or a hyphen, in any case.
func ParseIsolation(s string) (Isolation, error) {
	switch strings.NewReplacer(" ", "_", "-", "_").Replace(strings.ToLower(strings.TrimSpace(s))) {
	case "read_committed":
		return ReadCommitted, nil
	case "read_uncommitted":
		return ReadUncommitted, nil
	}
	return 0, fmt.Errorf("%w: isolation %q: want read_committed or read_uncommitted", ErrInvalidArgument, s)
}

func (i Isolation) kgo() kgo.IsolationLevel {
	if i == ReadCommitted {
		return kgo.ReadCommitted()
	}
	return kgo.ReadUncommitted()
}

// Control record types (the int16 after the version in a control record's
// key).
const (
	controlAbort  = 0
	controlCommit = 1
)

// committedFilter applies read_committed to one partition's records read
// at read_uncommitted (every data record and every control record, in
// offset order). Kafka consumers do this with a fetch's AbortedTransactions
// list: per producer, an aborted transaction's records run from its first
// offset to that producer's abort marker. A bounded read does it with the
// markers themselves, which it sees anyway: a transactional record waits
// until its producer's next marker says commit (shown) or abort (dropped).
// That needs no broker support beyond the markers, and a read always sees
// the offsets it covers, so it knows when it reached its end even when the
// last records before it are aborted ones (a read_committed fetch would
// silently skip them).
//
// Records at or past the last stable offset are never shown: the first of
// them belongs to a transaction still open when the read began. The read
// may go on past it only to find the markers of transactions that started
// below it and ended above it.
type committedFilter struct {
	stable  int64
	queue   []queued      // records below stable not yet released, in offset order
	waiting map[int64]int // producer id -> records of it in queue awaiting its marker
}

type queued struct {
	r     *kgo.Record
	state uint8 // qWait, qShow or qDrop
}

const (
	qWait = iota
	qShow
	qDrop
)

func newCommittedFilter(stable int64) *committedFilter {
	return &committedFilter{stable: stable, waiting: map[int64]int{}}
}

// add takes the next record of the partition and returns the records it
// releases, in offset order: data records that are visible at
// read_committed and are no longer held back by an earlier undecided
// transactional record.
func (f *committedFilter) add(r *kgo.Record) []*kgo.Record {
	switch {
	case r.Attrs.IsControl():
		if f.waiting[r.ProducerID] == 0 {
			return nil
		}
		var st uint8
		switch controlType(r.Key) {
		case controlCommit:
			st = qShow
		case controlAbort:
			st = qDrop
		default:
			return nil // not a transaction marker
		}
		for i := range f.queue {
			if q := &f.queue[i]; q.state == qWait && q.r.ProducerID == r.ProducerID {
				q.state = st
			}
		}
		delete(f.waiting, r.ProducerID)
		return f.release()
	case r.Offset >= f.stable:
		return nil
	case r.Attrs.IsTransactional():
		f.queue = append(f.queue, queued{r: r, state: qWait})
		f.waiting[r.ProducerID]++
		return nil
	default:
		f.queue = append(f.queue, queued{r: r, state: qShow})
		return f.release()
	}
}

// release pops the decided records at the head of the queue.
func (f *committedFilter) release() []*kgo.Record {
	var out []*kgo.Record
	i := 0
	for ; i < len(f.queue) && f.queue[i].state != qWait; i++ {
		if f.queue[i].state == qShow {
			out = append(out, f.queue[i].r)
		}
	}
	f.queue = f.queue[i:]
	return out
}

// undecided reports whether records below the stable offset still wait for
// their transaction's marker.
func (f *committedFilter) undecided() bool { return len(f.waiting) > 0 }

// finish ends the partition (its end was reached): a record still waiting
// has no marker before the high watermark, so its transaction is open and
// it is not visible; the visible records queued behind it are released.
func (f *committedFilter) finish() []*kgo.Record {
	var out []*kgo.Record
	for _, q := range f.queue {
		if q.state == qShow {
			out = append(out, q.r)
		}
	}
	f.queue, f.waiting = nil, map[int64]int{}
	return out
}

// controlType returns a control record's type from its key (int16 version,
// int16 type), or -1 if the key is too short.
func controlType(key []byte) int {
	if len(key) < 4 {
		return -1
	}
	return int(int16(uint16(key[2])<<8 | uint16(key[3])))
}
