package client

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Transaction states as Kafka's transaction coordinators report them
// (ListTransactions, DescribeTransactions).
const (
	TxnStateEmpty          = "Empty"
	TxnStateOngoing        = "Ongoing"
	TxnStatePrepareCommit  = "PrepareCommit"
	TxnStatePrepareAbort   = "PrepareAbort"
	TxnStateCompleteCommit = "CompleteCommit"
	TxnStateCompleteAbort  = "CompleteAbort"
	TxnStateDead           = "Dead"
	TxnStatePrepareFence   = "PrepareEpochFence"
)

// TxnOpen reports whether a transaction in this state still holds back the
// last stable offset of its partitions: it has begun and its markers are not
// all written. Empty, CompleteCommit, CompleteAbort and Dead are not open.
func TxnOpen(state string) bool {
	switch state {
	case TxnStateEmpty, TxnStateCompleteCommit, TxnStateCompleteAbort, TxnStateDead, "":
		return false
	}
	return true
}

// TransactionSummary is one row of ListTransactions.
type TransactionSummary struct {
	// ID is the transactional id.
	ID         string `json:"id"`
	ProducerID int64  `json:"producer_id"`
	// State is e.g. Ongoing, PrepareCommit, CompleteAbort or Empty (the
	// producer has no transaction in progress).
	State string `json:"state"`
	// Coordinator is the broker that coordinates the transactional id.
	Coordinator int32 `json:"coordinator"`
}

// TransactionDescription is the result of DescribeTransaction.
type TransactionDescription struct {
	ID            string `json:"id"`
	State         string `json:"state"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
	// Timeout is the transaction timeout the producer registered: the
	// coordinator aborts a transaction open longer than that.
	Timeout time.Duration `json:"timeout"`
	// Started is when the current transaction began; zero when none is
	// in progress.
	Started     time.Time `json:"started"`
	Coordinator int32     `json:"coordinator"`
	// Partitions are those the transaction wrote to (or, while it
	// completes, those still without a marker), sorted.
	Partitions []TopicPartitions `json:"partitions"`
}

func txnRes(id string) string { return "transaction '" + id + "'" }

// ListTransactions lists the transactional ids every broker coordinates,
// with their producer id and state, sorted by id (ListTransactions, sent to
// all brokers). A broker without the API fails with an error matching
// ErrUnsupported; check APIVersions first to fail earlier.
func (c *Client) ListTransactions(ctx context.Context) ([]TransactionSummary, error) {
	const op = "list transactions"
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	defer cancel()
	ls, err := c.adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		// Some brokers answering is worth showing; none is an error.
		se, ok := errors.AsType[*kadm.ShardErrors](err)
		if !ok || se.AllFailed {
			return nil, wrap(op, "", err)
		}
	}
	out := make([]TransactionSummary, 0, len(ls))
	for _, t := range ls.Sorted() {
		out = append(out, TransactionSummary{ID: t.TxnID, ProducerID: t.ProducerID, State: t.State, Coordinator: t.Coordinator})
	}
	return out, nil
}

// DescribeTransaction returns the state of one transactional id, asked of
// its coordinator (FindCoordinator with key type transaction, then
// DescribeTransactions). An id the coordinator does not know is an error
// matching ErrNotFound.
func (c *Client) DescribeTransaction(ctx context.Context, id string) (TransactionDescription, error) {
	const op = "describe transaction"
	res := txnRes(id)
	if id == "" {
		return TransactionDescription{}, invalid(op, "empty transactional ID")
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return TransactionDescription{}, wrap(op, res, err)
	}
	defer cancel()
	ds, err := c.adm.DescribeTransactions(ctx, id)
	if err != nil {
		return TransactionDescription{}, wrap(op, res, err)
	}
	d, err := ds.On(id, nil)
	if err == nil {
		err = d.Err
	}
	if err != nil {
		return TransactionDescription{}, wrap(op, res, err)
	}
	out := TransactionDescription{
		ID: d.TxnID, State: d.State, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
		Timeout: time.Duration(d.TimeoutMillis) * time.Millisecond, Coordinator: d.Coordinator,
		Partitions: []TopicPartitions{},
	}
	if d.StartTimestamp >= 0 {
		out.Started = time.UnixMilli(d.StartTimestamp)
	}
	for topic, ps := range d.Topics {
		parts := make([]int32, 0, len(ps))
		for p := range ps {
			parts = append(parts, p)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		out.Partitions = append(out.Partitions, TopicPartitions{Topic: topic, Partitions: parts})
	}
	sort.Slice(out.Partitions, func(i, j int) bool { return out.Partitions[i].Topic < out.Partitions[j].Topic })
	return out, nil
}
