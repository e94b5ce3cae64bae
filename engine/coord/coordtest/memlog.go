// Package coordtest helps test coordinators built on engine/coord: an
// in-memory partitioned log (MemLog) whose durable mark tests move, fail
// and heal, and the core of a datadriven harness (Harness) that tracks
// parked replies and prints what each command appended. It is imported by
// tests only.
package coordtest

import (
	"context"
	"errors"
	"sync"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/coord"
)

// MemLog is an in-memory internal topic: batches per partition with
// offsets assigned, and a durable mark moved explicitly (or on every
// append while auto-sync is on, the default). Like a broker log, Read and
// Bounds reach the log end, past the durable mark; FailWith models a
// failed log (appends and waits fail) and Heal what log.Heal does: drop
// what is not durable and move to a new generation. It implements
// coord.Storage, plus the Partitions and Create a coordinator's topic
// management needs.
type MemLog struct {
	mu          sync.Mutex
	parts       [][][]byte
	ends        []int64
	durable     []int64
	gens        []uint64
	autoSync    bool
	hwBounds    bool          // Bounds ends at the durable mark, as a FlushAlways log's high watermark does
	synced      chan struct{} // closed and replaced whenever durable moves
	failWith    error
	readErr     error
	readErrPart int32         // readErr applies to this partition only when >= 0; -1: all
	readGate    chan struct{} // when set, Read blocks until it is closed
}

// NewMemLog returns a log without partitions (Create makes them).
func NewMemLog() *MemLog {
	return &MemLog{autoSync: true, synced: make(chan struct{}), readErrPart: -1}
}

// Partitions is the partition count, 0 before Create.
func (s *MemLog) Partitions() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int32(len(s.parts))
}

// Create makes n empty partitions unless there are some already.
func (s *MemLog) Create(_ context.Context, n int32) (int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.parts) == 0 {
		s.parts = make([][][]byte, n)
		s.ends = make([]int64, n)
		s.durable = make([]int64, n)
		s.gens = make([]uint64, n)
		for p := range s.gens {
			s.gens[p] = uint64(100 + p) // like log.Generation: never 0 for a log that exists
		}
	}
	return int32(len(s.parts)), nil
}

// Append implements coord.Storage.
func (s *MemLog) Append(p int32, b []byte) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failWith != nil {
		return 0, s.failWith
	}
	h, err := batch.ParseHeader(b)
	if err != nil {
		return 0, err
	}
	cp := append([]byte(nil), b...)
	batch.SetBaseOffset(cp, s.ends[p])
	s.parts[p] = append(s.parts[p], cp)
	s.ends[p] += int64(h.LastOffsetDelta) + 1
	if s.autoSync {
		s.syncLocked()
	}
	return s.ends[p] - 1, nil
}

func (s *MemLog) syncLocked() {
	copy(s.durable, s.ends)
	close(s.synced)
	s.synced = make(chan struct{})
}

// Sync makes everything appended durable.
func (s *MemLog) Sync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncLocked()
}

// SetAutoSync says whether every append is durable at once.
func (s *MemLog) SetAutoSync(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.autoSync = on
}

// SetHWBounds makes Bounds end at the durable mark.
func (s *MemLog) SetHWBounds(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hwBounds = on
}

// FailWith makes appends and waits fail with err (nil: they work again).
func (s *MemLog) FailWith(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = err
}

// FailReads makes reads of partition p (every partition if p < 0) fail
// with err; nil makes them work again.
func (s *MemLog) FailReads(p int32, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readErr, s.readErrPart = err, p
}

// GateReads makes reads block until the returned release is called.
func (s *MemLog) GateReads() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gate := make(chan struct{})
	s.readGate = gate
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		close(gate)
		s.readGate = nil
	}
}

// Heal brings a failed partition back as log.Heal does.
func (s *MemLog) Heal(p int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = nil
	kept := s.parts[p][:0]
	for _, b := range s.parts[p] {
		if h, _ := batch.ParseHeader(b); h.LastOffset() < s.durable[p] {
			kept = append(kept, b)
		}
	}
	s.parts[p], s.ends[p] = kept, s.durable[p]
	s.gens[p]++
	close(s.synced)
	s.synced = make(chan struct{})
}

// WaitDurable implements coord.Storage.
func (s *MemLog) WaitDurable(ctx context.Context, p int32, offset int64) error {
	for {
		s.mu.Lock()
		ok, ch, failed := s.durable[p] > offset, s.synced, s.failWith
		end := s.ends[p]
		s.mu.Unlock()
		if ok {
			return nil
		}
		if failed != nil {
			return failed
		}
		if offset >= end {
			return errors.New("offset truncated away")
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Read implements coord.Storage.
func (s *MemLog) Read(p int32, offset int64, maxBytes int) ([]byte, error) {
	s.mu.Lock()
	gate := s.readGate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readErr != nil && (s.readErrPart < 0 || s.readErrPart == p) {
		return nil, s.readErr
	}
	var out []byte
	for _, b := range s.parts[p] {
		h, _ := batch.ParseHeader(b)
		if h.LastOffset() < offset {
			continue
		}
		if len(out) > 0 && len(out)+len(b) > maxBytes {
			break
		}
		out = append(out, b...)
	}
	return out, nil
}

// Damaged implements coord.Storage: a MemLog has no damaged ranges.
func (s *MemLog) Damaged(int32, int64) (int64, bool) { return 0, false }

// Generation implements coord.Storage.
func (s *MemLog) Generation(p int32) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gens[p], nil
}

// Bounds implements coord.Storage.
func (s *MemLog) Bounds(p int32) (int64, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hwBounds {
		return 0, s.durable[p], nil
	}
	return 0, s.ends[p], nil
}

// Batches returns partition p's batches from the one at index from on,
// and how many batches the partition holds.
func (s *MemLog) Batches(p int32, from int) ([][]byte, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(p) >= len(s.parts) {
		return nil, 0
	}
	n := len(s.parts[p])
	if from >= n {
		return nil, n
	}
	return append([][]byte(nil), s.parts[p][from:]...), n
}

// AppendTxn implements coord.TxnStorage: the batch is appended as it is
// (the guard is not checked: MemLog keeps no producer state).
func (s *MemLog) AppendTxn(p int32, b []byte, _ any) (int64, error) { return s.Append(p, b) }

// WriteMarker implements coord.TxnStorage: the marker's control batch is
// appended.
func (s *MemLog) WriteMarker(p int32, m coord.Marker) (int64, error) {
	return s.Append(p, batch.BuildEndTxnMarker(m.ProducerID, m.Epoch,
		batch.EndTxnMarker{Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}, 0))
}
