package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Transaction is one open Kafka transaction: a transactional producer with
// its own connection, whose records become visible to read_committed
// consumers only when Commit succeeds. It lives for exactly one transaction:
// Commit and Abort end it and release the producer, and every later call
// fails with an error matching ErrClosed. A Transaction is safe for
// concurrent use; its Produce calls are ordered as they are made.
//
// The owner must end it (Commit or Abort): closing the Client does not,
// and the broker would only abort it at transaction.timeout.ms.
type Transaction struct {
	id      string
	c       *Client
	timeout func(context.Context) (context.Context, context.CancelFunc)

	mu   sync.Mutex // serialises Produce against Commit/Abort
	cl   *kgo.Client
	done bool
}

// BeginTransaction opens a transaction with the given transactional ID.
// Producing under an ID another producer is using fences that producer (its
// open transaction is aborted), as in Kafka. The first Produce registers the
// ID with the transaction coordinator (InitProducerId), so a broker without
// transactions fails there; check APIVersions first to fail earlier.
func (c *Client) BeginTransaction(ctx context.Context, id string) (*Transaction, error) {
	const op = "begin transaction"
	res := "'" + id + "'"
	if id == "" {
		return nil, invalid(op, "empty transactional ID")
	}
	if err := c.checkOpen(); err != nil {
		return nil, wrap(op, res, err)
	}
	cl, err := kgo.NewClient(c.opts.baseKgoOpts(
		kgo.TransactionalID(id),
		kgo.RecordPartitioner(newPartitioner()),
		// Interactive transactions send small batches: send at once.
		kgo.ProducerLinger(0),
		kgo.UnknownTopicRetries(1),
	)...)
	if err != nil {
		return nil, wrap(op, res, err)
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return nil, wrap(op, res, err)
	}
	t := &Transaction{id: id, c: c, cl: cl}
	t.timeout = func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, c.opts.RequestTimeout)
	}
	return t, nil
}

// ID returns the transactional ID.
func (t *Transaction) ID() string { return t.id }

// Produce writes records inside the transaction, choosing partitions like
// Client.Produce (explicit, murmur2 of the key, round-robin), and waits for
// every acknowledgement. After a failed Produce the transaction can only be
// aborted: Kafka does not let a transaction with a failed write commit.
func (t *Transaction) Produce(ctx context.Context, topic string, records []Record) ([]Produced, error) {
	op := "produce in transaction '" + t.id + "' to"
	if topic == "" {
		return nil, invalid(op, "empty topic name")
	}
	if len(records) == 0 {
		return nil, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return nil, wrap(op, topicRes(topic), errTxnEnded)
	}
	ctx, cancel, err := t.c.call(ctx)
	if err != nil {
		return nil, wrap(op, topicRes(topic), err)
	}
	defer cancel()
	return t.c.produceWith(ctx, t.cl, op, topic, records)
}

// errTxnEnded is returned by calls on a Transaction after Commit or Abort.
// It matches ErrClosed.
var errTxnEnded = fmt.Errorf("the transaction has already ended: %w", ErrClosed)

// Commit flushes the transaction's records and commits it. Whatever the
// outcome the transaction is over; if the commit fails, Commit also tries
// to abort, so no transaction is left open on the broker, and returns the
// commit's error.
func (t *Transaction) Commit(ctx context.Context) error {
	return t.end(ctx, true)
}

// Abort discards the transaction's records and ends it.
func (t *Transaction) Abort(ctx context.Context) error {
	return t.end(ctx, false)
}

func (t *Transaction) end(ctx context.Context, commit bool) error {
	op := "abort transaction"
	if commit {
		op = "commit transaction"
	}
	res := "'" + t.id + "'"
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return wrap(op, res, errTxnEnded)
	}
	t.done = true
	defer t.cl.Close()
	// Detached from the caller's cancellation: canceling an in-flight
	// EndTxn leaves its outcome unknown (franz-go's advice is not to).
	// The request timeout still bounds it.
	ctx, cancel := t.timeout(context.WithoutCancel(ctx))
	defer cancel()
	if commit {
		err := t.cl.Flush(ctx)
		if err == nil {
			err = t.cl.EndTransaction(ctx, kgo.TryCommit)
		}
		if err == nil {
			return nil
		}
		t.abortQuietly()
		return wrap(op, res, err)
	}
	_ = t.cl.AbortBufferedRecords(ctx)
	return wrap(op, res, t.cl.EndTransaction(ctx, kgo.TryAbort))
}

// abortQuietly aborts after a failed commit, with a fresh bounded context
// (the commit may have used up the caller's), ignoring the outcome: the
// commit's error is what the caller needs, and the broker aborts an
// abandoned transaction at its timeout anyway.
func (t *Transaction) abortQuietly() {
	ctx, cancel := t.timeout(context.Background())
	defer cancel()
	_ = t.cl.AbortBufferedRecords(ctx)
	_ = t.cl.EndTransaction(ctx, kgo.TryAbort)
}
