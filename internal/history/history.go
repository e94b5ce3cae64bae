// Package history records what the clients of a fault test did and saw, and
// checks it against what the cluster holds at the end: the checker of the
// Jepsen-style cluster tests (DESIGN.md, "Tests"). It is pure: no clock, no
// network, no MoonMQ package; a test feeds it events and a final read.
//
// The events:
//   - a produce attempt: producer, partition, a value unique to the attempt,
//     and its outcome: acknowledged at an offset, or unknown (an error after
//     which the record may or may not be stored), or not written (a test
//     knows the broker never saw it);
//   - a consumer read: reader, partition, offset, value, leader epoch of its
//     batch, and the partition's high watermark the fetch reported;
//   - a leader-epoch observation: a source (one node, one process lifetime)
//     reported a partition's leader epoch.
//
// The final log is every partition of the one topic a history covers, read
// from its start to its high watermark once the faults healed.
//
// What must hold (Check):
//   - every acknowledged record is in the final log exactly once, at the
//     offset it was acknowledged with;
//   - no value is stored twice (an idempotent producer's retries never
//     duplicate), and nothing "not written" is stored;
//   - per producer and partition, acknowledged offsets strictly increase in
//     acknowledgement order;
//   - every record a consumer read is still in the final log at that offset
//     with that value (nothing read is later lost or replaced), and was read
//     below the high watermark the fetch reported;
//   - leader epochs only grow: along each partition's final log, along each
//     reader's reads of a partition, and per source and partition.
//
// Every violation names the record (value, producer, partition, offset).
package history

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Outcome is what a produce attempt's client learnt.
type Outcome int

const (
	// Unknown: the attempt failed or was abandoned; the record may be
	// stored, at most once.
	Unknown Outcome = iota
	// Acked: the broker acknowledged the record at Offset.
	Acked
	// NotWritten: the record certainly never reached a broker.
	NotWritten
)

func (o Outcome) String() string {
	switch o {
	case Unknown:
		return "unknown"
	case Acked:
		return "acked"
	case NotWritten:
		return "not written"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Produce is one produce attempt, recorded when its outcome is known.
type Produce struct {
	Producer  string
	Partition int32
	Value     string
	Outcome   Outcome
	Offset    int64  // when Acked
	Err       string // what the client saw, when not Acked
}

// Read is one record a consumer received.
type Read struct {
	Reader      string
	Partition   int32
	Offset      int64
	Value       string
	LeaderEpoch int32 // of the record's batch; -1 if unknown
	HW          int64 // the fetch's high watermark; -1 if unknown
}

// Epoch is one observation of a partition's leader epoch.
type Epoch struct {
	Source    string // who reported it: a node in one process lifetime
	Partition int32
	Epoch     int32
}

// Record is one record of the final log.
type Record struct {
	Offset      int64
	Value       string
	LeaderEpoch int32 // -1 if unknown
}

// History is a recording of one test run. Its methods are safe for
// concurrent use by producers, readers and the nemesis.
type History struct {
	mu       sync.Mutex
	produces []Produce
	reads    []Read
	epochs   []Epoch
}

// Produced records a produce attempt's outcome. Calls for one producer must
// come in the order the producer learnt the outcomes (its promise order).
func (h *History) Produced(p Produce) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.produces = append(h.produces, p)
}

// ReadRecord records a consumed record. Calls for one reader must come in
// the order it received the records.
func (h *History) ReadRecord(r Read) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads = append(h.reads, r)
}

// SawEpoch records a leader-epoch observation, in the order observed.
func (h *History) SawEpoch(e Epoch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.epochs = append(h.epochs, e)
}

// Counts summarizes the history: acknowledged and unknown attempts, reads.
func (h *History) Counts() (acked, unknown, reads int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.produces {
		switch p.Outcome {
		case Acked:
			acked++
		case Unknown:
			unknown++
		}
	}
	return acked, unknown, len(h.reads)
}

// Violation is one broken property.
type Violation struct {
	Property string // "lost", "moved", "duplicate", "order", "read lost", "read above hw", "epoch"
	Detail   string
}

func (v Violation) String() string { return v.Property + ": " + v.Detail }

// Result is a check's outcome.
type Result struct {
	Violations []Violation
	// Stored is how many records the final log holds; Unknown how many of
	// the unknown attempts turned out stored.
	Stored, UnknownStored int
}

// OK reports whether nothing was violated.
func (r Result) OK() bool { return len(r.Violations) == 0 }

// Error lists the violations (at most limit of them, 0 = all), or is empty.
func (r Result) Error(limit int) string {
	if r.OK() {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d history violations:", len(r.Violations))
	for i, v := range r.Violations {
		if limit > 0 && i == limit {
			fmt.Fprintf(&b, "\n  ... and %d more", len(r.Violations)-limit)
			break
		}
		b.WriteString("\n  " + v.String())
	}
	return b.String()
}

// where is a stored record's place.
type where struct {
	partition int32
	offset    int64
}

// Check verifies the history against the final log (partition → records in
// offset order).
func (h *History) Check(final map[int32][]Record) Result {
	h.mu.Lock()
	defer h.mu.Unlock()
	var res Result
	bad := func(prop, format string, args ...any) {
		res.Violations = append(res.Violations, Violation{prop, fmt.Sprintf(format, args...)})
	}

	// The final log: where each value is, at most once; epochs grow
	// along each partition.
	stored := map[string]where{}
	at := map[where]Record{}
	for _, part := range sortedParts(final) {
		prevEpoch, prevOffset := int32(-1), int64(-1)
		for _, r := range final[part] {
			if r.Offset <= prevOffset {
				bad("order", "partition %d: final log goes from offset %d back to %d", part, prevOffset, r.Offset)
			}
			prevOffset = r.Offset
			w := where{part, r.Offset}
			at[w] = r
			if first, dup := stored[r.Value]; dup {
				bad("duplicate", "value %q is stored twice: partition %d offset %d and partition %d offset %d",
					r.Value, first.partition, first.offset, part, r.Offset)
			} else {
				stored[r.Value] = w
			}
			if r.LeaderEpoch >= 0 {
				if r.LeaderEpoch < prevEpoch {
					bad("epoch", "partition %d: offset %d (%q) has leader epoch %d after epoch %d earlier in the log",
						part, r.Offset, r.Value, r.LeaderEpoch, prevEpoch)
				}
				prevEpoch = r.LeaderEpoch
			}
			res.Stored++
		}
	}

	// Produce attempts.
	type lane struct {
		producer  string
		partition int32
	}
	last := map[lane]Produce{}
	for _, p := range h.produces {
		w, isStored := stored[p.Value]
		switch p.Outcome {
		case Acked:
			switch {
			case !isStored:
				holds := "nothing"
				if r, ok := at[where{p.Partition, p.Offset}]; ok {
					holds = fmt.Sprintf("%q", r.Value)
				}
				bad("lost", "acknowledged record %q (producer %s, partition %d, offset %d) is not in the final log (that offset holds %s)",
					p.Value, p.Producer, p.Partition, p.Offset, holds)
			case w != where{p.Partition, p.Offset}:
				bad("moved", "acknowledged record %q (producer %s) was acknowledged at partition %d offset %d but is stored at partition %d offset %d",
					p.Value, p.Producer, p.Partition, p.Offset, w.partition, w.offset)
			}
			l := lane{p.Producer, p.Partition}
			if prev, ok := last[l]; ok && p.Offset <= prev.Offset {
				bad("order", "producer %s, partition %d: %q acknowledged at offset %d after %q at offset %d",
					p.Producer, p.Partition, p.Value, p.Offset, prev.Value, prev.Offset)
			}
			last[l] = p
		case NotWritten:
			if isStored {
				bad("phantom", "record %q (producer %s) was never sent but is stored at partition %d offset %d",
					p.Value, p.Producer, w.partition, w.offset)
			}
		case Unknown:
			if isStored {
				res.UnknownStored++
			}
		}
	}

	// Reads: still there, below the high watermark, epochs growing per
	// reader and partition.
	type readLane struct {
		reader    string
		partition int32
	}
	readEpoch := map[readLane]Read{}
	for _, r := range h.reads {
		if r.HW >= 0 && r.Offset >= r.HW {
			bad("read above hw", "reader %s read %q at partition %d offset %d, at or above the high watermark %d of its fetch",
				r.Reader, r.Value, r.Partition, r.Offset, r.HW)
		}
		if f, ok := at[where{r.Partition, r.Offset}]; !ok {
			bad("read lost", "reader %s read %q at partition %d offset %d, which the final log no longer holds",
				r.Reader, r.Value, r.Partition, r.Offset)
		} else if f.Value != r.Value {
			bad("read lost", "reader %s read %q at partition %d offset %d, where the final log holds %q",
				r.Reader, r.Value, r.Partition, r.Offset, f.Value)
		}
		if r.LeaderEpoch >= 0 {
			l := readLane{r.Reader, r.Partition}
			if prev, ok := readEpoch[l]; ok && r.Offset > prev.Offset && r.LeaderEpoch < prev.LeaderEpoch {
				bad("epoch", "reader %s, partition %d: %q at offset %d has leader epoch %d, after epoch %d at offset %d",
					r.Reader, r.Partition, r.Value, r.Offset, r.LeaderEpoch, prev.LeaderEpoch, prev.Offset)
			}
			readEpoch[l] = r
		}
	}

	// Epoch observations per source and partition.
	type epochLane struct {
		source    string
		partition int32
	}
	seen := map[epochLane]int32{}
	for _, e := range h.epochs {
		l := epochLane{e.Source, e.Partition}
		if prev, ok := seen[l]; ok && e.Epoch < prev {
			bad("epoch", "%s reported partition %d's leader epoch %d after %d", e.Source, e.Partition, e.Epoch, prev)
			continue
		}
		seen[l] = e.Epoch
	}
	return res
}

func sortedParts(final map[int32][]Record) []int32 {
	parts := make([]int32, 0, len(final))
	for p := range final {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	return parts
}
