package txncoord

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/coord"
)

// shard is the transactions of one __transaction_state partition: the
// coord.State the runtime replays, ticks and serialises. Its methods run
// as runtime operations (under the shard's lock), with the time as input.
type shard struct {
	c  *Coordinator
	sh *coord.Shard
	p  int32
	// coordEpoch is the leader epoch of the partition when the shard
	// loaded: every marker carries it, so partitions refuse a deposed
	// coordinator's.
	coordEpoch int32

	txns map[string]Metadata
	// markers are the transactions in Prepare* whose markers are not all
	// written.
	markers    map[string]*markerTxn
	nextExpire time.Time
	// held are the AddPartitions of ids whose previous transaction is
	// still writing its markers (see holdAdd), oldest first.
	held map[string][]heldAdd
}

// heldAdd is an AddPartitions waiting for the previous transaction of its
// id to complete: answered when it does (the partitions added in the same
// operation as the Complete* record, so both share one fsync), or with
// CONCURRENT_TRANSACTIONS at its deadline, if the transaction is fenced
// instead, or with the unload's error.
type heldAdd struct {
	pid      int64
	epoch    int16
	tps      []TP
	tv       int16
	deadline time.Time
	reply    *Reply[error]
}

// Holding an AddPartitions instead of answering CONCURRENT_TRANSACTIONS:
// a producer's next transaction typically starts (its client's
// AddPartitionsToTxn, or a partition leader's verification of its first
// produce) while the markers of its previous one are being written, a
// millisecond or two. Answered at once, the request is retried after a
// backoff (Kafka's clients and partition leaders wait 20 ms or more, far
// longer than the markers take here); held, it is answered as soon as the
// transaction completes. maxHeldPerID bounds
// the requests one id may have held (a producer has a handful in flight;
// past it the answer is CONCURRENT_TRANSACTIONS at once); holdTimeout
// bounds a hold, for markers that cannot be written now (a partition
// without a leader): the caller then retries as it would have.
const (
	maxHeldPerID = 8
	holdTimeout  = time.Second
)

// markerTxn is the marker work of one transaction in Prepare*.
type markerTxn struct {
	pid    int64
	epoch  int16
	commit bool
	tv     int16
	// ready is closed (by the coordinator, once the Prepare record is
	// durable) before any marker is sent.
	ready bool
	parts map[TP]*markerPart
}

type markerPart struct {
	attempts int
	retryAt  time.Time
	inFlight bool
}

func (c *Coordinator) newShard(sh *coord.Shard) *shard {
	return &shard{c: c, sh: sh, p: sh.Partition(), txns: map[string]Metadata{}, markers: map[string]*markerTxn{},
		held: map[string][]heldAdd{}}
}

// Replay implements coord.State.
func (s *shard) Replay(_ time.Time, r coord.Record) bool {
	d, known, err := decodeRecord(r.Key, r.Value)
	if err != nil {
		return false
	}
	if !known {
		return true
	}
	if d.deleted {
		delete(s.txns, d.id)
	} else {
		s.txns[d.id] = d.m
	}
	return true
}

// Activate implements coord.State: the shard serves with the coordinator
// epoch of its leadership, and sends again the markers of every
// transaction a previous coordinator prepared and did not complete.
func (s *shard) Activate(now time.Time) {
	s.coordEpoch = s.c.leaderEpoch(s.p)
	s.nextExpire = now.Add(s.c.cfg.RemoveExpiredInterval)
	gate := coord.NewFuture[struct{}]()
	gate.Complete(s.sh, struct{}{}) // replayed bytes may not be durable yet
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(s.txns)) {
		if m := s.txns[id]; m.State.preparing() {
			s.queueMarkers(m)
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		s.c.log.Info("completing transactions a previous coordinator prepared", "partition", s.p,
			"transactions", len(ids), "coordinator_epoch", s.coordEpoch)
		s.c.whenDurable(s.p, gate, ids)
	}
}

// Unload implements coord.State: the marker work goes with the shard.
func (s *shard) Unload(err error) {
	clear(s.markers)
	for id := range s.held {
		s.releaseHeld(id, err)
	}
}

// settle answers the held AddPartitions of id, whose transaction stopped
// completing here without completing (fenced), with
// CONCURRENT_TRANSACTIONS: they are asked again and meet whatever state
// it is in then.
func (s *shard) settle(id string) {
	if len(s.held[id]) > 0 {
		s.releaseHeld(id, fmt.Errorf("%w: %q's previous transaction did not complete here", ErrConcurrentTransactions, id))
	}
}

// holdAdd holds an AddPartitions of (pid, epoch) that found id's previous
// transaction writing its markers on this shard, and reports whether it
// did (false: answer CONCURRENT_TRANSACTIONS now). A request of another
// producer or epoch is not held: it is answered at once (fenced, or
// refused) by prepareAdd.
func (s *shard) holdAdd(now time.Time, id string, m Metadata, pid int64, epoch int16, tps []TP, tv int16, reply *Reply[error]) bool {
	if !m.State.preparing() || s.markers[id] == nil || checkProducer(m, pid, epoch) != nil ||
		len(s.held[id]) >= maxHeldPerID {
		return false
	}
	s.held[id] = append(s.held[id], heldAdd{pid: pid, epoch: epoch, tps: slices.Clone(tps), tv: tv,
		deadline: now.Add(holdTimeout), reply: reply})
	return true
}

// releaseHeld answers every held AddPartitions of id with err.
func (s *shard) releaseHeld(id string, err error) {
	for _, h := range s.held[id] {
		h.reply.Complete(s.sh, err)
	}
	delete(s.held, id)
}

// expireHeld answers the held AddPartitions past their deadline with
// CONCURRENT_TRANSACTIONS, so their callers retry as without holding.
func (s *shard) expireHeld(now time.Time) {
	for id, hs := range s.held {
		keep := hs[:0]
		for _, h := range hs {
			if now.Before(h.deadline) {
				keep = append(keep, h)
				continue
			}
			h.reply.Complete(s.sh, fmt.Errorf("%w: %q's previous transaction is still completing", ErrConcurrentTransactions, id))
		}
		if len(keep) == 0 {
			delete(s.held, id)
		} else {
			s.held[id] = keep
		}
	}
}

// addHeld applies the held AddPartitions of id once its previous
// transaction completed, in this operation, so their records share the
// Complete* record's fsync.
func (s *shard) addHeld(now time.Time, id string) {
	hs := s.held[id]
	delete(s.held, id)
	for _, h := range hs {
		err := s.addPartitions(now, id, h.pid, h.epoch, h.tps, h.tv)
		h.reply.Complete(s.sh, err)
	}
}

// Tick implements coord.State: transactions past their timeout are aborted
// (the producer fenced), and idle transactional ids expire.
func (s *shard) Tick(now time.Time) {
	s.expireHeld(now)
	nowMs := now.UnixMilli()
	for _, id := range slices.Sorted(maps.Keys(s.txns)) {
		m := s.txns[id]
		if m.State != StateOngoing || m.StartMs+int64(m.TimeoutMs) >= nowMs {
			continue
		}
		next, err := prepareFence(m, s.c.cfg.TransactionVersion, -1, nowMs)
		if errors.Is(err, errNeedProducerID) {
			next, err = prepareFence(m, s.c.cfg.TransactionVersion, s.c.takeSpareProducerID(), nowMs)
		}
		if err != nil {
			s.c.log.Warn("transaction timed out, but cannot be aborted yet", "transactional_id", id, "err", err)
			continue
		}
		if err := s.write(now, next); err != nil {
			return // the shard reloads
		}
		s.c.log.Info("aborting a transaction past its timeout", "transactional_id", id, "producer_id", m.ProducerID,
			"timeout_ms", m.TimeoutMs)
		s.c.metrics.timedOut.Add(1)
		s.prepared(next)
	}
	if !now.Before(s.nextExpire) {
		s.nextExpire = now.Add(s.c.cfg.RemoveExpiredInterval)
		s.expire(now)
	}
}

// expire removes the transactional ids idle for
// TransactionalIDExpiration with no transaction under way, with
// tombstones (Kafka's removeExpiredTransactionalIds).
func (s *shard) expire(now time.Time) {
	limit := now.Add(-s.c.cfg.TransactionalIDExpiration).UnixMilli()
	var recs []batch.Record
	var ids []string
	size := 0
	flush := func() bool {
		if len(recs) == 0 {
			return true
		}
		if _, err := s.sh.Append(now, recs); err != nil {
			return false
		}
		for _, id := range ids {
			delete(s.txns, id)
		}
		recs, ids, size = nil, nil, 0
		return true
	}
	for _, id := range slices.Sorted(maps.Keys(s.txns)) {
		m := s.txns[id]
		if !m.State.completed() || m.LastUpdateMs > limit {
			continue
		}
		k := encodeKey(id)
		if size+len(k)+32 > s.c.cfg.MaxRecordBytes/2 && !flush() {
			return
		}
		recs, ids, size = append(recs, batch.Record{Key: k}), append(ids, id), size+len(k)+32
	}
	if n := len(ids); flush() && n > 0 {
		s.c.log.Info("expired idle transactional ids", "partition", s.p, "count", n)
	}
}

// write appends the records of ms, in order, as one batch and applies
// them.
func (s *shard) write(now time.Time, ms ...Metadata) error {
	return s.writeWith(s.sh.Append, now, ms...)
}

// writeWith is write through appendFn (the shard's Append or
// AppendDeferred).
func (s *shard) writeWith(appendFn func(time.Time, []batch.Record) (int64, error), now time.Time, ms ...Metadata) error {
	recs := make([]batch.Record, len(ms))
	for i, m := range ms {
		recs[i] = batch.Record{Key: encodeKey(m.ID), Value: encodeValue(m, s.c.cfg.TransactionVersion)}
	}
	if _, err := appendFn(now, recs); err != nil {
		return err
	}
	for _, m := range ms {
		s.txns[m.ID] = m
	}
	return nil
}

// prepared notes a transaction entering Prepare*: its markers, sent once
// its record is durable (the coordinator waits for a gate completed now).
func (s *shard) prepared(m Metadata) {
	s.queueMarkers(m)
	gate := coord.NewFuture[struct{}]()
	gate.Complete(s.sh, struct{}{})
	s.c.whenDurable(s.p, gate, []string{m.ID})
}

func (s *shard) queueMarkers(m Metadata) {
	w := &markerTxn{pid: m.ProducerID, epoch: m.Epoch, commit: m.State == StatePrepareCommit, tv: m.ClientTV,
		parts: map[TP]*markerPart{}}
	for tp := range m.Partitions {
		w.parts[tp] = &markerPart{}
	}
	s.markers[m.ID] = w
}

// markersDurable lets the markers of ids go: their Prepare records are
// durable. Transactions with no partition complete at once.
func (s *shard) markersDurable(now time.Time, ids []string) {
	for _, id := range ids {
		if w := s.markers[id]; w != nil {
			w.ready = true
			if len(w.parts) == 0 {
				s.complete(now, id)
			}
		}
	}
}

// pollMarkers marks in flight and returns the markers due at now.
func (s *shard) pollMarkers(now time.Time) []MarkerWrite {
	var out []MarkerWrite
	for _, id := range slices.Sorted(maps.Keys(s.markers)) {
		w := s.markers[id]
		if !w.ready {
			continue
		}
		for _, tp := range slices.SortedFunc(maps.Keys(w.parts), compareTP) {
			part := w.parts[tp]
			if part.inFlight || now.Before(part.retryAt) {
				continue
			}
			part.inFlight = true
			out = append(out, MarkerWrite{TP: tp, TransactionalID: id, ProducerID: w.pid, ProducerEpoch: w.epoch,
				Commit: w.commit, CoordinatorEpoch: s.coordEpoch, TransactionVersion: w.tv, coordinator: s.p})
		}
	}
	return out
}

// nextMarkerRetry is the earliest time a backed-off marker may go again
// (zero: none waits).
func (s *shard) nextMarkerRetry() time.Time {
	var next time.Time
	for _, w := range s.markers {
		if !w.ready {
			continue
		}
		for _, part := range w.parts {
			if !part.inFlight && (next.IsZero() || part.retryAt.Before(next)) {
				next = part.retryAt
			}
		}
	}
	return next
}

// markerWritten applies a partition's answer to a marker.
func (s *shard) markerWritten(now time.Time, r MarkerResult) {
	w := s.markers[r.Write.TransactionalID]
	if r.Write.CoordinatorEpoch != s.coordEpoch || w == nil || w.pid != r.Write.ProducerID || w.epoch != r.Write.ProducerEpoch {
		return // for another coordinator or transaction
	}
	part := w.parts[r.Write.TP]
	if part == nil {
		return
	}
	part.inFlight = false
	switch r.Outcome {
	case MarkerDone:
		delete(w.parts, r.Write.TP)
	case MarkerFenced:
		// A newer coordinator or producer epoch owns the transaction
		// (Kafka's removeMarkersForTxn): stop; the shard will be
		// unloaded, or the producer moved on.
		s.c.log.Warn("marker refused as fenced; no more markers for this transaction", "transactional_id",
			r.Write.TransactionalID, "topic", r.Write.TP.Topic, "partition", r.Write.TP.Partition, "err", r.Err)
		delete(s.markers, r.Write.TransactionalID)
		s.settle(r.Write.TransactionalID)
		return
	default:
		part.attempts++
		backoff := s.c.cfg.MarkerRetryBackoff << min(part.attempts-1, 16)
		part.retryAt = now.Add(min(backoff, s.c.cfg.MaxMarkerRetryBackoff))
		if r.Outcome == MarkerFailed {
			s.c.log.Error("marker write failed unexpectedly; retrying", "transactional_id", r.Write.TransactionalID,
				"topic", r.Write.TP.Topic, "partition", r.Write.TP.Partition, "err", r.Err)
		}
		return
	}
	if len(w.parts) == 0 {
		s.complete(now, r.Write.TransactionalID)
	}
}

// complete writes CompleteCommit or CompleteAbort once every marker of id
// is written, and then the AddPartitions held for it (their answers wait
// for both records' durability). If it is lost, a reload finds the
// Prepare* and writes the (idempotent) markers again; so nobody waits for
// it, and it starts no fsync of its own (AppendDeferred): the next write
// of the shard, typically the producer's next transaction's Ongoing
// record, makes it durable in the same round, where it would otherwise
// cost a round of its own, and one the Ongoing record may queue behind.
func (s *shard) complete(now time.Time, id string) {
	m, ok := s.txns[id]
	if !ok || !m.State.preparing() {
		delete(s.markers, id)
		s.settle(id)
		return
	}
	next := prepareComplete(m, now.UnixMilli())
	if err := s.writeWith(s.sh.AppendDeferred, now, next); err != nil {
		return // the shard reloads; Unload answers what is held
	}
	delete(s.markers, id)
	s.addHeld(now, id)
	if next.State == StateCompleteCommit {
		s.c.metrics.committed.Add(1)
	} else {
		s.c.metrics.aborted.Add(1)
	}
}

var _ coord.State = (*shard)(nil)
