package client

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A committed transaction's records are readable and move the last stable
// offset; an open one holds the last stable offset back; an aborted one
// ends; a Transaction is good for one transaction only.
func TestTransaction(t *testing.T) {
	requireKfake(t) // MoonMQ has no transaction coordinator yet
	cl := newTestClient(t)
	ctx := testCtx(t)
	topic := uniqueTopic(t, "txn")
	require.NoError(t, cl.CreateTopic(ctx, topic, 2, 1, nil))

	_, err := cl.BeginTransaction(ctx, "")
	require.ErrorIs(t, err, ErrInvalidArgument)

	tx, err := cl.BeginTransaction(ctx, "tx-"+topic)
	require.NoError(t, err)
	require.Equal(t, "tx-"+topic, tx.ID())
	res, err := tx.Produce(ctx, topic, []Record{
		{Partition: 1, Value: []byte("a")},
		{Partition: 1, Value: []byte("b")},
		{Partition: AnyPartition, Key: []byte("k"), Value: []byte("c")},
	})
	require.NoError(t, err)
	require.Len(t, res, 3)
	require.Equal(t, int32(1), res[0].Partition)
	require.Equal(t, res[0].Offset+1, res[1].Offset, "in order, in one partition")
	_, err = tx.Produce(ctx, topic, []Record{{Partition: 9, Value: []byte("x")}})
	require.ErrorIs(t, err, ErrNotFound, "a partition outside the topic is refused before producing")

	// While the transaction is open, the last stable offset of the
	// partition it wrote stays at its first record.
	stable, err := cl.StableOffsets(ctx, topic)
	require.NoError(t, err)
	ends, err := cl.EndOffsets(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, int64(0), stable[topic][1])
	require.Greater(t, ends[topic][1], stable[topic][1])

	require.NoError(t, tx.Commit(ctx))
	require.ErrorIs(t, tx.Commit(ctx), ErrClosed, "one transaction per Transaction")
	require.ErrorIs(t, tx.Abort(ctx), ErrClosed)
	_, err = tx.Produce(ctx, topic, []Record{{Value: []byte("late")}})
	require.ErrorIs(t, err, ErrClosed)
	require.Equal(t, "the transaction was already committed or aborted", Explain(err))

	stable, err = cl.StableOffsets(ctx, topic)
	require.NoError(t, err)
	ends, err = cl.EndOffsets(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, ends, stable, "nothing is open after the commit")
	got, err := cl.Read(ctx, ReadRequest{Topic: topic})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a", "b", "c"}, values(got))

	// An aborted transaction ends too, and the ID can be reused.
	tx, err = cl.BeginTransaction(ctx, "tx-"+topic)
	require.NoError(t, err)
	_, err = tx.Produce(ctx, topic, []Record{{Partition: 0, Value: []byte("aborted")}})
	require.NoError(t, err)
	require.NoError(t, tx.Abort(ctx))
	stable, err = cl.StableOffsets(ctx, topic)
	require.NoError(t, err)
	ends, err = cl.EndOffsets(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, ends, stable)

	// A transaction with nothing produced commits and aborts cleanly.
	tx, err = cl.BeginTransaction(ctx, "tx-empty-"+topic)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}
