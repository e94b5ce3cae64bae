package txncoord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/moonmq/moonmq/engine/coord"
)

// InitResult answers InitProducerId.
type InitResult struct {
	ProducerID int64
	Epoch      int16
	Err        error
}

// InitProducerID gives transactional id id a producer id and a new epoch
// (fencing the producer that had it), with transactions timing out after
// timeoutMs. expected is the id and epoch the producer had, when it asks
// to keep them (KIP-360). An Ongoing transaction of id is aborted first:
// the answer is ErrConcurrentTransactions, and the producer's retry gets
// the new epoch.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, expected *PidEpoch) *Reply[InitResult] {
	fail := func(err error) InitResult { return InitResult{ProducerID: -1, Epoch: -1, Err: err} }
	switch {
	case id == "":
		return coord.Resolved(fail(fmt.Errorf("%w: empty transactional id", ErrInvalidRequest)))
	case timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.cfg.TransactionMaxTimeout:
		return coord.Resolved(fail(fmt.Errorf("%w: %d ms; transaction.max.timeout.ms is %d", ErrInvalidTransactionTimeout,
			timeoutMs, c.cfg.TransactionMaxTimeout.Milliseconds())))
	}
	return withProducerID(c, ctx, fail, func(candidate int64) (*Reply[InitResult], bool) {
		need := false
		reply := do(c, id, fail, func(s *shard, reply *Reply[InitResult]) {
			need = s.initProducerID(c.cfg.Now(), id, timeoutMs, expected, candidate, reply)
		})
		return reply, need
	})
}

// withProducerID runs attempt without a fresh producer id, and again with
// one (allocated outside any shard lock) if it needs one.
func withProducerID[T any](c *Coordinator, ctx context.Context, fail func(error) T, attempt func(candidate int64) (*Reply[T], bool)) *Reply[T] {
	reply, need := attempt(-1)
	if !need {
		return reply
	}
	pid, err := c.pids.Next(ctx)
	if err != nil {
		return coord.Resolved(fail(fmt.Errorf("%w: allocating a producer id: %v", ErrUnavailable, err)))
	}
	reply, need = attempt(pid)
	if need {
		return coord.Resolved(fail(fmt.Errorf("%w: a producer id was needed twice", ErrUnavailable)))
	}
	return reply
}

func (s *shard) initProducerID(now time.Time, id string, timeoutMs int32, expected *PidEpoch, candidate int64, reply *Reply[InitResult]) (needID bool) {
	nowMs := now.UnixMilli()
	m, ok := s.txns[id]
	if !ok {
		if candidate < 0 {
			return true
		}
		m = newMetadata(id, candidate, timeoutMs, nowMs)
	}
	next, outcome, err := prepareInit(m, timeoutMs, expected, candidate, s.c.cfg.TransactionVersion, nowMs)
	if errors.Is(err, errNeedProducerID) {
		return true
	}
	if err == nil {
		err = s.write(now, next)
	}
	switch {
	case err != nil:
		reply.Complete(s.sh, InitResult{ProducerID: -1, Epoch: -1, Err: err})
	case outcome == initFence:
		s.c.log.Info("aborting the transaction of a producer a new one replaces", "transactional_id", id,
			"producer_id", m.ProducerID, "epoch", m.Epoch)
		s.prepared(next)
		reply.Complete(s.sh, InitResult{ProducerID: -1, Epoch: -1,
			Err: fmt.Errorf("%w: %q's previous transaction is being aborted", ErrConcurrentTransactions, id)})
	default:
		reply.Complete(s.sh, InitResult{ProducerID: next.ProducerID, Epoch: next.Epoch})
	}
	return false
}

// AddPartitions adds partitions to the transaction of (pid, epoch) of
// transactional id id, beginning it if none is under way
// (AddPartitionsToTxn from clients, AddOffsetsToTxn, and a partition
// leader's implicit add of transaction version 2). tv is the transaction
// version of the request. One that finds the producer's previous
// transaction writing its markers here is answered once that completes
// (see holdAdd), not with CONCURRENT_TRANSACTIONS.
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, tps []TP, tv int16) *Reply[error] {
	fail := func(err error) error { return err }
	if id == "" {
		return coord.Resolved(fail(fmt.Errorf("%w: empty transactional id", ErrInvalidRequest)))
	}
	return do(c, id, fail, func(s *shard, reply *Reply[error]) {
		now := c.cfg.Now()
		if m, ok := s.txns[id]; ok && s.holdAdd(now, id, m, pid, epoch, tps, tv, reply) {
			return // answered when the previous transaction completes
		}
		reply.Complete(s.sh, s.addPartitions(now, id, pid, epoch, tps, tv))
	})
}

// addPartitions is AddPartitions on the shard, at once.
func (s *shard) addPartitions(now time.Time, id string, pid int64, epoch int16, tps []TP, tv int16) error {
	m, ok := s.txns[id]
	if !ok {
		return fmt.Errorf("%w: %q has no producer id", ErrInvalidProducerIDMapping, id)
	}
	next, changed, err := prepareAdd(m, pid, epoch, tps, tv, s.c.cfg.MaxTxnPartitions, now.UnixMilli())
	if err == nil && changed {
		err = s.write(now, next)
	}
	return err
}

// VerifyResult answers a verification: an error per partition (nil: in
// the transaction), or Err for all.
type VerifyResult struct {
	Partitions map[TP]error
	Err        error
}

// VerifyPartitions answers a partition leader asking whether partitions
// are in the transaction of (pid, epoch) (KIP-890 part 1). The answer
// waits for the durability of what put them there.
func (c *Coordinator) VerifyPartitions(id string, pid int64, epoch int16, tps []TP) *Reply[VerifyResult] {
	fail := func(err error) VerifyResult { return VerifyResult{Err: err} }
	if id == "" {
		return coord.Resolved(fail(fmt.Errorf("%w: empty transactional id", ErrInvalidRequest)))
	}
	return do(c, id, fail, func(s *shard, reply *Reply[VerifyResult]) {
		m, ok := s.txns[id]
		if !ok {
			reply.Complete(s.sh, fail(fmt.Errorf("%w: %q has no producer id", ErrInvalidProducerIDMapping, id)))
			return
		}
		parts, err := verify(m, pid, epoch, tps)
		reply.Complete(s.sh, VerifyResult{Partitions: parts, Err: err})
	})
}

// EndResult answers EndTxn: the producer id and epoch the producer goes on
// with (transaction version 2 bumps the epoch), or the error.
type EndResult struct {
	ProducerID int64
	Epoch      int16
	Err        error
}

// EndTxn commits or aborts the transaction of (pid, epoch). The answer
// comes once PrepareCommit or PrepareAbort is durable; the markers follow.
// tv is the request's transaction version.
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool, tv int16) *Reply[EndResult] {
	fail := func(err error) EndResult { return EndResult{ProducerID: -1, Epoch: -1, Err: err} }
	if id == "" {
		return coord.Resolved(fail(fmt.Errorf("%w: empty transactional id", ErrInvalidRequest)))
	}
	return withProducerID(c, ctx, fail, func(candidate int64) (*Reply[EndResult], bool) {
		need := false
		reply := do(c, id, fail, func(s *shard, reply *Reply[EndResult]) {
			need = s.endTxn(c.cfg.Now(), id, pid, epoch, commit, tv, candidate, reply)
		})
		return reply, need
	})
}

func (s *shard) endTxn(now time.Time, id string, pid int64, epoch int16, commit bool, tv int16, candidate int64, reply *Reply[EndResult]) (needID bool) {
	nowMs := now.UnixMilli()
	m, ok := s.txns[id]
	if !ok {
		reply.Complete(s.sh, EndResult{ProducerID: -1, Epoch: -1,
			Err: fmt.Errorf("%w: %q has no producer id", ErrInvalidProducerIDMapping, id)})
		return false
	}
	next, outcome, err := prepareEnd(m, pid, epoch, commit, tv, candidate, nowMs)
	if errors.Is(err, errNeedProducerID) {
		return true
	}
	if err == nil {
		switch outcome {
		case endPrepare:
			if err = s.write(now, next); err == nil {
				s.prepared(next)
			}
		case endAbortNothing:
			// Nothing to mark: PrepareAbort and CompleteAbort at once.
			err = s.write(now, next, prepareComplete(next, nowMs))
			if err == nil {
				s.c.metrics.aborted.Add(1)
			}
		}
	}
	if err != nil {
		reply.Complete(s.sh, EndResult{ProducerID: -1, Epoch: -1, Err: err})
		return false
	}
	r := endReply(next)
	reply.Complete(s.sh, EndResult{ProducerID: r.ProducerID, Epoch: r.Epoch})
	return false
}

// Description is what DescribeTransactions says of a transactional id.
type Description struct {
	ID         string
	State      State
	ProducerID int64
	Epoch      int16
	TimeoutMs  int32
	StartMs    int64
	Partitions []TP
	Err        error
}

// Describe describes transactional ids.
func (c *Coordinator) Describe(ids []string) []*Reply[Description] {
	out := make([]*Reply[Description], len(ids))
	for i, id := range ids {
		fail := func(err error) Description { return Description{ID: id, Err: err} }
		out[i] = do(c, id, fail, func(s *shard, reply *Reply[Description]) {
			m, ok := s.txns[id]
			if !ok {
				reply.Complete(s.sh, fail(fmt.Errorf("%w: %q", ErrTransactionalIDNotFound, id)))
				return
			}
			reply.Complete(s.sh, describe(m))
		})
	}
	return out
}

func describe(m Metadata) Description {
	return Description{ID: m.ID, State: m.State, ProducerID: m.ProducerID, Epoch: m.Epoch, TimeoutMs: m.TimeoutMs,
		StartMs: m.StartMs, Partitions: m.SortedPartitions()}
}

// Listing is one transactional id ListTransactions returns.
type Listing struct {
	ID         string
	ProducerID int64
	State      State
	StartMs    int64 // -1: none under way
}

// List lists the transactional ids this node coordinates, in the given
// states and of the given producer ids (empty: any).
func (c *Coordinator) List(states []State, pids []int64) []Listing {
	var out []Listing
	c.rt.Each(func(_ int32, s *shard) {
		for _, id := range slices.Sorted(maps.Keys(s.txns)) {
			m := s.txns[id]
			if (len(states) == 0 || slices.Contains(states, m.State)) && (len(pids) == 0 || slices.Contains(pids, m.ProducerID)) {
				out = append(out, Listing{ID: id, ProducerID: m.ProducerID, State: m.State, StartMs: m.StartMs})
			}
		}
	})
	return out
}

// Stats counts the transactions this node coordinates by state, and the
// transactions committed, aborted and timed out since it started.
type Stats struct {
	ByState                      map[State]int
	Committed, Aborted, TimedOut int64
	MarkersPending               int
}

// Stats reports the coordinator's counts.
func (c *Coordinator) Stats() Stats {
	st := Stats{ByState: map[State]int{}, Committed: c.metrics.committed.Load(), Aborted: c.metrics.aborted.Load(),
		TimedOut: c.metrics.timedOut.Load()}
	c.rt.Each(func(_ int32, s *shard) {
		for _, m := range s.txns {
			st.ByState[m.State]++
		}
		for _, w := range s.markers {
			st.MarkersPending += len(w.parts)
		}
	})
	return st
}
