package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/txncoord"
)

// Verification of transactional writes on a partition leader (KIP-890
// part 1): before a producer's first transactional batch opens a
// transaction on a partition (a produce, or a TxnOffsetCommit's offsets
// partition), the leader asks the transactional id's coordinator whether
// the partition is in the producer's transaction, so a late or
// misdirected write can never open a transaction nobody will end.

// Verifier asks the coordinator of a transactional id, wherever it runs,
// about partitions of producer (pid, epoch)'s transaction: with add false
// whether they are in it (AddPartitionsToTxn v4, VerifyOnly), with add true
// adding them (v5, transaction version 2). It returns an error per
// partition (nil: in the transaction), or one error for all: the
// coordinator's answer or the transport's failure.
type Verifier interface {
	Verify(ctx context.Context, txnID string, pid int64, epoch int16, tps []txncoord.TP, add bool) (map[txncoord.TP]error, error)
}

// verifyBatch gathers the verifications a produce request's partitions
// ask for while the handler walks them, and sends them to the coordinator
// as one request once it is done (flush), as Kafka sends one
// AddPartitionsToTxn per produce request. A verification asked later (a
// queued append that needs its own) goes out alone.
type verifyBatch struct {
	c       *conn
	txnID   string
	version int16 // of the request being verified, for the error mapping
	add     bool
	timeout time.Duration

	mu      sync.Mutex
	flushed bool
	tps     []txncoord.TP
	dones   []func(error)
	pid     int64
	epoch   int16
}

func (c *conn) newVerifyBatch(txnID string, produceVersion int16, timeout time.Duration) *verifyBatch {
	if timeout <= 0 || timeout > txnWait {
		timeout = txnWait
	}
	// Produce v12 (transaction version 2) adds the partitions to the
	// transaction rather than checking the client added them.
	return &verifyBatch{c: c, txnID: txnID, version: produceVersion, add: produceVersion >= 12, timeout: timeout}
}

// fn is the partition tp's VerifyFunc.
func (b *verifyBatch) fn(tp txncoord.TP) replica.VerifyFunc {
	return func(pid int64, epoch int16, done func(error)) {
		b.mu.Lock()
		if !b.flushed {
			b.tps, b.dones, b.pid, b.epoch = append(b.tps, tp), append(b.dones, done), pid, epoch
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		go b.run(pid, epoch, []txncoord.TP{tp}, []func(error){done})
	}
}

// flush sends the verifications gathered so far.
func (b *verifyBatch) flush() {
	b.mu.Lock()
	b.flushed = true
	tps, dones, pid, epoch := b.tps, b.dones, b.pid, b.epoch
	b.tps, b.dones = nil, nil
	b.mu.Unlock()
	if len(tps) > 0 {
		go b.run(pid, epoch, tps, dones)
	}
}

func (b *verifyBatch) run(pid int64, epoch int16, tps []txncoord.TP, dones []func(error)) {
	v := b.c.s.opts.Verifier
	var (
		res map[txncoord.TP]error
		err error
	)
	if v == nil {
		err = errors.New("no transaction verifier")
	} else {
		ctx, cancel := context.WithTimeout(b.c.ctx, b.timeout)
		res, err = verifyRetrying(ctx, v, b.txnID, pid, epoch, tps, b.add)
		cancel()
	}
	for i, tp := range tps {
		e := err
		if e == nil {
			e = answerFor(res, tp)
		}
		dones[i](b.c.produceVerifyError(e, b.version))
	}
}

// produceVerifyError is the error a produce gets for a failed
// verification, as Kafka's AddPartitionsToTxnManager maps the
// coordinator's answer (docs/design/transactions.md §1.6): a partition not
// in the transaction is INVALID_TXN_STATE before Produce v11 and
// TRANSACTION_ABORTABLE from it; a fenced producer INVALID_PRODUCER_EPOCH;
// a coordinator that cannot answer now, or cannot be reached,
// NOT_ENOUGH_REPLICAS, which clients retry without refreshing metadata.
func (c *conn) produceVerifyError(err error, version int16) error {
	if err == nil {
		return nil
	}
	code := c.errCode(err)
	switch code {
	case kerr.TransactionAbortable.Code:
		if version < 11 {
			return fmt.Errorf("%w: the partition is not in the transaction", kerr.InvalidTxnState)
		}
		return kerr.TransactionAbortable
	case kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code:
		return kerr.InvalidProducerEpoch
	case kerr.InvalidProducerIDMapping.Code:
		return kerr.InvalidProducerIDMapping
	case kerr.ClusterAuthorizationFailed.Code:
		return kerr.InvalidTxnState
	case kerr.ConcurrentTransactions.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code,
		kerr.NotCoordinator.Code, kerr.RequestTimedOut.Code, kerr.UnknownServerError.Code:
		return fmt.Errorf("%w: unable to verify the partition has been added to the transaction: %v", kerr.NotEnoughReplicas, err)
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		// A transport failure (the coordinator's broker unreachable).
		return fmt.Errorf("%w: unable to verify the partition has been added to the transaction: %v", kerr.NotEnoughReplicas, err)
	}
	return err
}

// Backoffs of a verification the coordinator answers
// CONCURRENT_TRANSACTIONS. Kafka waits 20 ms first
// (add.partitions.to.txn.retry.backoff.ms), longer than the markers of the
// previous transaction take here (a few fsyncs), which cost a producer of
// small transactions most of its throughput; starting at 1 ms and doubling
// keeps the retries few when markers are slow.
const (
	verifyRetryBackoff    = time.Millisecond
	verifyRetryBackoffMax = 100 * time.Millisecond
)

// verifyRetrying is v.Verify that asks again, with a short backoff until
// ctx ends, for the partitions the coordinator answered
// CONCURRENT_TRANSACTIONS: the producer's previous transaction is still
// writing its markers, which takes milliseconds. Kafka's partition
// leaders retry so too, so a produce of the producer's next transaction
// is delayed, not failed; failing it would leave the client ending a
// transaction at an epoch the coordinator, still completing the previous
// one, takes for a zombie's.
func verifyRetrying(ctx context.Context, v Verifier, txnID string, pid int64, epoch int16, tps []txncoord.TP, add bool) (map[txncoord.TP]error, error) {
	out := make(map[txncoord.TP]error, len(tps))
	backoff := verifyRetryBackoff
	for {
		res, err := v.Verify(ctx, txnID, pid, epoch, tps, add)
		if err != nil && !concurrentTxns(err) {
			return nil, err
		}
		var again []txncoord.TP
		for _, tp := range tps {
			e := err
			if e == nil {
				e = answerFor(res, tp)
			}
			if concurrentTxns(e) {
				again = append(again, tp)
				continue
			}
			out[tp] = e
		}
		if len(again) == 0 {
			return out, nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			for _, tp := range again {
				out[tp] = kerr.ConcurrentTransactions
			}
			return out, nil
		case <-t.C:
		}
		backoff = min(2*backoff, verifyRetryBackoffMax)
		tps = again
	}
}

// answerFor is a verification's answer for tp; a partition the answer
// leaves out is not verified (never "in the transaction").
func answerFor(res map[txncoord.TP]error, tp txncoord.TP) error {
	e, ok := res[tp]
	if !ok {
		return fmt.Errorf("%w: no answer for %s-%d", txncoord.ErrUnavailable, tp.Topic, tp.Partition)
	}
	return e
}

func concurrentTxns(err error) bool {
	return errors.Is(err, txncoord.ErrConcurrentTransactions) || errors.Is(err, kerr.ConcurrentTransactions)
}
