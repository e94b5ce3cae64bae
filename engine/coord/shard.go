package coord

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
)

type status int

const (
	statusLoading status = iota // hosted, replay not done yet
	statusActive                // replayed, serving
	statusDown                  // its replay failed; Recheck retries it
	statusGone                  // unloaded
)

// Shard is the runtime's handle on one hosted partition, given to its
// State: the State appends through it and completes Futures against it.
// Its methods are for use inside an operation only (the shard's lock is
// held then).
type Shard struct {
	p     int32
	store Storage
	cfg   *Config

	mu     sync.Mutex
	status status
	down   error // why a down shard is not served
	// failures counts replays that failed in a row; skip, the rechecks
	// left before the next try.
	failures, skip int
	gen            uint64 // Storage.Generation the state was replayed from
	last           int64  // last offset appended or replayed; -1: none
	// lastErr is the first append failure since the replay: the State
	// may have applied what the append was to write, so from then on no
	// reply is released and nothing is appended, until Recheck replays
	// the partition (the log's state, not the memory's).
	lastErr error
	// reloads counts the replays forced by failed appends in a row; a
	// fresh shard inherits it, an append that succeeds resets it. It
	// spaces the next reload (skip), as failures does for a down shard:
	// a log that reads but cannot be written is otherwise replayed whole
	// at every recheck.
	reloads int

	inOp bool
	// completions are the Futures completed during the operation under
	// way, released at its end with the durability point.
	completions []func(offset int64, err error)
	// durable is the highest offset a reply has seen fsynced: replies at
	// or below it need no wait.
	durable atomic.Int64
}

// Partition is the internal partition the shard holds.
func (s *Shard) Partition() int32 { return s.p }

func (s *Shard) servingLocked(topic string) error {
	switch s.status {
	case statusActive:
		return nil
	case statusLoading:
		return fmt.Errorf("%w: replaying %s-%d", ErrLoading, topic, s.p)
	case statusDown:
		return fmt.Errorf("%w: %s-%d is unavailable (retrying): %v", ErrUnavailable, topic, s.p, s.down)
	}
	return fmt.Errorf("%w: %s-%d was unloaded", ErrNotCoordinator, topic, s.p)
}

func (s *Shard) begin() { s.inOp = true }

// finish ends an operation: the Futures it completed learn where their
// durability point is (what the shard has appended so far).
func (s *Shard) finish() { s.release(s.last, s.lastErr) }

// finishUnload ends the unload operation: what it answered reveals no
// state (the state is gone), so it waits for nothing.
func (s *Shard) finishUnload() { s.release(-1, nil) }

func (s *Shard) release(off int64, err error) {
	for _, c := range s.completions {
		c(off, err)
	}
	clear(s.completions)
	s.completions, s.inOp = s.completions[:0], false
}

// Append writes recs to the shard's partition as one batch stamped with
// now. It is for operations only: the State applies what it appended in
// the same operation, so memory follows log order.
func (s *Shard) Append(now time.Time, recs []batch.Record) (last int64, err error) {
	return s.appendWith("Append", s.store.Append, now, recs)
}

// appendWith is Append (named op in errors) through the storage's append.
func (s *Shard) appendWith(op string, appendFn func(p int32, b []byte) (int64, error), now time.Time,
	recs []batch.Record,
) (last int64, err error) {
	if err := s.writable(op); err != nil {
		return 0, err
	}
	b, err := s.buildBatch(now, -1, -1, -1, recs)
	if err != nil {
		return 0, err
	}
	last, err = appendFn(s.p, b)
	if err != nil {
		return 0, s.appendFailed(err)
	}
	s.last, s.reloads = last, 0
	return last, nil
}

// DeferredStorage is a Storage that can append without starting an fsync
// round (Shard.AppendDeferred); one that cannot appends as usual.
type DeferredStorage interface {
	AppendDeferred(p int32, batch []byte) (last int64, err error)
}

// AppendDeferred is Append for records whose loss in a crash the State's
// replay repairs (the transaction coordinator's Complete*, after durable
// markers: a replay that misses it finds the Prepare* and completes again):
// the storage starts no fsync round for them (DeferredStorage), so the
// next append's round covers them. Replies still wait for their
// durability like any other (a wait starts a round).
func (s *Shard) AppendDeferred(now time.Time, recs []batch.Record) (last int64, err error) {
	ds, ok := s.store.(DeferredStorage)
	if !ok {
		return s.Append(now, recs)
	}
	return s.appendWith("AppendDeferred", ds.AppendDeferred, now, recs)
}

// TxnStorage is the part of Storage a coordinator that writes inside
// transactions needs (the group coordinator's transactional offset
// commits): a transactional batch of a producer, appended with the
// verification guard the partition handed out (see engine/txn), and an
// end-transaction marker.
//
// A write the partition refuses before writing anything (the producer's
// epoch is fenced, its transaction is not verified there) is returned
// wrapping ErrRefused, so the shard need not be replayed.
type TxnStorage interface {
	AppendTxn(p int32, batch []byte, guard any) (last int64, err error)
	WriteMarker(p int32, m Marker) (offset int64, err error)
}

// Marker is an end-transaction marker to write.
type Marker struct {
	ProducerID         int64
	Epoch              int16
	Commit             bool
	CoordinatorEpoch   int32
	TransactionVersion int16
}

// AppendTxn writes recs to the shard's partition as one transactional
// batch of producer (pid, epoch), stamped with now, and returns the
// offsets of its first and last records. Like Append, for operations only.
func (s *Shard) AppendTxn(now time.Time, pid int64, epoch int16, recs []batch.Record, guard any) (first, last int64, err error) {
	ts, err := s.txnStorage()
	if err != nil {
		return 0, 0, err
	}
	// Sequence 0, as Kafka's coordinators number their transactional
	// batches (the partition checks no sequences for them).
	b, err := s.buildBatch(now, pid, epoch, 0, recs)
	if err != nil {
		return 0, 0, err
	}
	last, err = ts.AppendTxn(s.p, b, guard)
	if errors.Is(err, ErrRefused) {
		return 0, 0, err // nothing was written: the shard's state still matches its log
	}
	if err != nil {
		return 0, 0, s.appendFailed(err)
	}
	s.last, s.reloads = last, 0
	return last - int64(len(recs)) + 1, last, nil
}

// AppendMarker writes an end-transaction marker to the shard's partition
// and returns its offset. Like Append, for operations only. A marker the
// partition refuses (a stale producer or coordinator epoch) is returned as
// the partition's error, and does not fail the shard: nothing was written.
func (s *Shard) AppendMarker(m Marker) (offset int64, err error) {
	ts, err := s.txnStorage()
	if err != nil {
		return 0, err
	}
	offset, err = ts.WriteMarker(s.p, m)
	if err != nil {
		return 0, err
	}
	s.last, s.reloads = offset, 0
	return offset, nil
}

// txnStorage is the storage of a transactional write, once the shard may
// append.
func (s *Shard) txnStorage() (TxnStorage, error) {
	if err := s.writable("a transactional append"); err != nil {
		return nil, err
	}
	ts, ok := s.store.(TxnStorage)
	if !ok {
		return nil, fmt.Errorf("%w: %s-%d: its storage does not take transactional writes", ErrUnavailable, s.cfg.Topic, s.p)
	}
	return ts, nil
}

// writable says why the shard cannot append now (what names the caller),
// or nil: appends happen inside an operation, on a served shard that has
// not failed an append since its replay.
func (s *Shard) writable(what string) error {
	switch {
	case !s.inOp:
		return fmt.Errorf("coord: %s outside an operation", what)
	case s.status != statusActive:
		return fmt.Errorf("%w: %s-%d is not served", ErrUnavailable, s.cfg.Topic, s.p)
	case s.lastErr != nil:
		return fmt.Errorf("%w: %s-%d is to be replayed after a failed append: %v", ErrUnavailable, s.cfg.Topic, s.p, s.lastErr)
	}
	return nil
}

// appendFailed notes a failed append: the shard is replayed before it
// serves again.
func (s *Shard) appendFailed(err error) error {
	s.lastErr, s.skip = err, recheckBackoff(s.reloads)
	return fmt.Errorf("%w: appending to %s-%d: %v", ErrUnavailable, s.cfg.Topic, s.p, err)
}

// buildBatch wraps records in an uncompressed RecordBatch v2 stamped with
// now, as a broker writes its own internal records: a transactional batch
// of producer (pid, epoch) from sequence seq, or a plain one (pid -1).
// It must fit Config.MaxBatchBytes.
func (s *Shard) buildBatch(now time.Time, pid int64, epoch int16, seq int32, recs []batch.Record) ([]byte, error) {
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
	}
	h := batch.Header{FirstTimestamp: now.UnixMilli(), MaxTimestamp: now.UnixMilli(),
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, PartitionLeaderEpoch: -1}
	if pid >= 0 {
		h.Attributes = batch.TransactionalBit
	}
	b := batch.Build(h, recs)
	if len(b) > s.cfg.MaxBatchBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrBatchTooLarge, len(b), s.cfg.MaxBatchBytes)
	}
	return b, nil
}
