package bench

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produce --transactional: each producer runs transactions one after the
// other on its own kgo client (its own transactional ID): BeginTransaction,
// N records (partitioned as the plain mode does), Flush, EndTransaction
// commit. Only records of committed transactions count as produced, so
// records/s and MB/s are committed throughput; the commit latency is the
// EndTransaction(commit) call alone (the records were all acknowledged by
// then). A transaction with a failed record, or whose commit fails, is
// aborted and its records counted as failed; one cut short by --timeout or
// an interrupt is aborted without failing anything, as the plain mode
// does not count records abandoned when the run stops.

// endTimeout bounds ending a transaction. Ending runs on a context the
// run's stop (--timeout, Ctrl-C) does not cancel: kgo documents that an
// EndTransaction cancelled mid-way leaves the client not knowing whether it
// committed, and the broker would hold read_committed consumers back until
// transaction.timeout.ms.
const endTimeout = 30 * time.Second

// transactionalIDs returns one transactional ID per producer for a
// --transactional run, nil otherwise. IDs carry a random tag of the run, so
// two runs at once (or a run and a crashed earlier one) never fence each
// other's producers.
func transactionalIDs(cfg ProduceConfig) []string {
	if !cfg.Transactional {
		return nil
	}
	var tag [4]byte
	_, _ = crand.Read(tag[:])
	ids := make([]string, cfg.Producers)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-txn-%08x-%d", cfg.ClientID, binary.BigEndian.Uint32(tag[:]), i)
	}
	return ids
}

// txnStats are the transaction counts and commit latencies of a run, shared
// by its producers.
type txnStats struct {
	committed, aborted atomic.Int64
	commit             *Histogram
}

func newTxnStats() *txnStats { return &txnStats{commit: NewHistogram()} }

func (s *txnStats) transactions(records int) *Transactions {
	return &Transactions{Committed: s.committed.Load(), Aborted: s.aborted.Load(), Records: records}
}

// txnProducer is one producer of a transactional run, with the run's shared
// counters.
type txnProducer struct {
	cfg  *ProduceConfig
	cl   *kgo.Client
	pace *pacer
	gen  *recordGen

	hist              *Histogram
	stalls            *stallTracker
	acked, ackedBytes *atomic.Int64
	failed            *atomic.Int64
	firstErr          *atomic.Pointer[error]
	stats             *txnStats
}

// run produces n records in transactions of cfg.TransactionRecords (the
// last one smaller if they do not divide n), until done, stopped, or the
// client cannot go on (the records it did not send are then failed too).
func (p txnProducer) run(ctx context.Context, n int64) {
	for sent := int64(0); sent < n; {
		if ctx.Err() != nil {
			return
		}
		k := min(int64(p.cfg.TransactionRecords), n-sent)
		ok := p.transaction(ctx, k)
		sent += k
		if !ok {
			p.failed.Add(n - sent)
			return
		}
	}
}

func (p *txnProducer) fail(err error) { p.firstErr.CompareAndSwap(nil, &err) }

// transaction runs one transaction of k records and reports whether the
// client can run another.
func (p *txnProducer) transaction(ctx context.Context, k int64) bool {
	if err := p.cl.BeginTransaction(); err != nil {
		p.fail(err)
		p.failed.Add(k)
		return false
	}
	var (
		recFailed, txAcked, txBytes atomic.Int64
		produced                    int64
		stopped                     bool
	)
	promise := func(r *kgo.Record, sent time.Time, err error) {
		if err != nil {
			// Records abandoned because the run was stopped, or
			// failed by the abort of their transaction, are not
			// broker failures.
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
				!errors.Is(err, kgo.ErrAborting) {
				recFailed.Add(1)
				p.fail(err)
			}
			return
		}
		now := time.Now()
		p.hist.Record(now.Sub(sent))
		p.stalls.acked(r.Partition, now)
		txAcked.Add(1)
		txBytes.Add(int64(len(r.Key) + len(r.Value)))
	}
	for range k {
		if p.pace != nil {
			if p.pace.wait(ctx) != nil {
				stopped = true
				break
			}
		} else if ctx.Err() != nil {
			stopped = true
			break
		}
		r := p.gen.next()
		sent := time.Now()
		r.Timestamp = sent
		produced++
		p.cl.Produce(ctx, r, func(r *kgo.Record, err error) { promise(r, sent, err) })
	}
	// Flush fails only when ctx is done; every promise has run when it
	// returns nil.
	if !stopped && p.cl.Flush(ctx) != nil {
		stopped = true
	}

	endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
	defer cancel()
	failedTxn := recFailed.Load() > 0
	if !stopped && !failedTxn {
		start := time.Now()
		err := p.cl.EndTransaction(endCtx, kgo.TryCommit)
		took := time.Since(start)
		if err == nil {
			p.stats.commit.Record(took)
			p.stats.committed.Add(1)
			p.acked.Add(txAcked.Load())
			p.ackedBytes.Add(txBytes.Load())
			return true
		}
		// Not committed (or not known to be): abort, as kgo asks.
		p.fail(err)
		failedTxn = true
	}

	// Abort: a record failed, the commit failed, or the run was stopped.
	err := p.cl.AbortBufferedRecords(endCtx)
	if err == nil {
		err = p.cl.EndTransaction(endCtx, kgo.TryAbort)
	}
	if failedTxn {
		p.failed.Add(k)
	}
	if produced > 0 || failedTxn {
		p.stats.aborted.Add(1)
	}
	if err != nil {
		p.fail(fmt.Errorf("abort: %w", err))
		if !failedTxn { // the records were not failed yet, but are not committed either
			p.failed.Add(k)
		}
		return false
	}
	return true
}
