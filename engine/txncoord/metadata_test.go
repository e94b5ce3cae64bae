package txncoord

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/coord/coordtest"
)

// At the end of the epoch range a producer moves to a new producer id:
// at InitProducerId (the new id at epoch 0), at a version-2 EndTxn (the
// markers carry the last epoch; the id changes once they are written) and
// at a fence; a retry of an EndTxn across the rotation is recognised by the
// previous id.
func TestEpochExhaustionRotatesProducerID(t *testing.T) {
	const now = 1_700_000_000_000
	m := newMetadata("x", 1000, 60000, now)
	m.Epoch, m.State = maxEpoch-1, StateCompleteCommit

	_, _, err := prepareInit(m, 60000, nil, -1, 2, now)
	require.ErrorIs(t, err, errNeedProducerID)
	next, outcome, err := prepareInit(m, 60000, nil, 2000, 2, now)
	require.NoError(t, err)
	require.Equal(t, initReply, outcome)
	require.Equal(t, int64(2000), next.ProducerID)
	require.Equal(t, int16(0), next.Epoch)
	require.Equal(t, int64(1000), next.PrevProducerID)

	// KIP-360: the exhausted producer asks to continue with its id and
	// epoch; it gets the new id, and a retry of that call (naming the old
	// id and epoch) the same answer.
	exp := &PidEpoch{ProducerID: 1000, Epoch: maxEpoch - 1}
	rotated, _, err := prepareInit(m, 60000, exp, 2000, 2, now)
	require.NoError(t, err)
	require.Equal(t, int64(2000), rotated.ProducerID)
	again, _, err := prepareInit(rotated, 60000, exp, -1, 2, now)
	require.NoError(t, err, "a retry naming the previous id and an exhausted epoch")
	require.Equal(t, PidEpoch{ProducerID: 2000, Epoch: 0}, PidEpoch{again.ProducerID, again.Epoch})

	// EndTxn v5 at an exhausted epoch.
	ongoing := m
	ongoing.State, ongoing.ClientTV = StateOngoing, 2
	ongoing.Partitions = map[TP]struct{}{{"t", 0}: {}}
	_, _, err = prepareEnd(ongoing, 1000, maxEpoch-1, true, 2, -1, now)
	require.ErrorIs(t, err, errNeedProducerID)
	prep, out, err := prepareEnd(ongoing, 1000, maxEpoch-1, true, 2, 3000, now)
	require.NoError(t, err)
	require.Equal(t, endPrepare, out)
	require.Equal(t, int16(maxEpoch), prep.Epoch, "the markers carry the last epoch")
	require.Equal(t, PidEpoch{ProducerID: 3000, Epoch: 0}, endReply(prep), "the producer continues with the new id")
	done := prepareComplete(prep, now)
	require.Equal(t, int64(3000), done.ProducerID)
	require.Equal(t, int16(0), done.Epoch)
	require.Equal(t, int64(1000), done.PrevProducerID)
	_, out, err = prepareEnd(done, 1000, maxEpoch-1, true, 2, -1, now)
	require.NoError(t, err, "the EndTxn retried with the old id")
	require.Equal(t, endReplyOnly, out)

	// A fence at an epoch whose bumps would overflow.
	_, err = prepareFence(ongoing, 2, -1, now)
	require.ErrorIs(t, err, errNeedProducerID)
	fenced, err := prepareFence(ongoing, 2, 4000, now)
	require.NoError(t, err)
	require.Equal(t, int16(maxEpoch), fenced.Epoch)
	require.Equal(t, int64(4000), fenced.NextProducerID)
}

// EndTxn's table of states and requests (Kafka's endTransaction, with
// 4.0's empty abort), for a metadata of each transaction version.
func TestEndTxnStates(t *testing.T) {
	const now = 1_700_000_000_000
	base := newMetadata("x", 1000, 60000, now)
	base.Epoch = 5
	for _, tc := range []struct {
		state    State
		metaTV   int16
		commit   bool
		reqTV    int16
		epoch    int16
		want     error
		wantWhat endOutcome
	}{
		{StateOngoing, 2, true, 2, 5, nil, endPrepare},
		{StatePrepareCommit, 0, true, 0, 5, ErrConcurrentTransactions, 0},
		{StatePrepareCommit, 0, false, 0, 5, ErrInvalidTxnState, 0},
		{StatePrepareAbort, 0, false, 0, 5, ErrConcurrentTransactions, 0},
		{StatePrepareCommit, 2, true, 2, 4, ErrConcurrentTransactions, 0}, // a retry at the pre-bump epoch
		// The producer's next EndTxn at the epoch it was handed, while the
		// markers are written: retried (Kafka fences it; clients die of it).
		{StatePrepareCommit, 2, true, 2, 5, ErrConcurrentTransactions, 0},
		{StatePrepareAbort, 2, false, 2, 5, ErrConcurrentTransactions, 0},
		{StatePrepareCommit, 2, true, 2, 6, ErrProducerFenced, 0},
		{StateCompleteCommit, 0, true, 0, 5, nil, endReplyOnly},
		{StateCompleteCommit, 0, false, 0, 5, ErrInvalidTxnState, 0},
		{StateCompleteCommit, 2, true, 2, 4, nil, endReplyOnly},
		{StateCompleteCommit, 2, true, 2, 5, ErrInvalidTxnState, 0},
		{StateCompleteCommit, 2, false, 2, 5, nil, endAbortNothing},
		{StateCompleteAbort, 0, false, 0, 5, nil, endReplyOnly},
		{StateCompleteAbort, 2, false, 2, 5, nil, endAbortNothing},
		{StateCompleteAbort, 2, true, 2, 5, ErrInvalidTxnState, 0},
		{StateEmpty, 0, false, 2, 5, nil, endAbortNothing},
		{StateEmpty, 0, false, 0, 5, ErrInvalidTxnState, 0},
		{StateEmpty, 0, true, 2, 5, ErrInvalidTxnState, 0},
		{StateOngoing, 0, true, 0, 4, ErrProducerFenced, 0},
	} {
		m := base
		m.State, m.ClientTV = tc.state, tc.metaTV
		_, what, err := prepareEnd(m, 1000, tc.epoch, tc.commit, tc.reqTV, -1, now)
		if tc.want != nil {
			require.ErrorIs(t, err, tc.want, "%+v", tc)
			continue
		}
		require.NoError(t, err, "%+v", tc)
		require.Equal(t, tc.wantWhat, what, "%+v", tc)
	}
}

// failingCreate is a storage whose topic creation fails (a controller
// failing over).
type failingCreate struct{ memStore }

func (failingCreate) Partitions() int32 { return 0 }
func (failingCreate) Create(context.Context, int32) (int32, error) {
	return 0, errors.New("controller rpc create_topic: no answer")
}

// A failure to create __transaction_state is COORDINATOR_NOT_AVAILABLE to
// the client (retriable), never an unknown error, which franz-go takes as
// fatal for its producer.
func TestEnsureTopicFailureIsUnavailable(t *testing.T) {
	c, err := New(Config{Logger: slog.New(slog.DiscardHandler)}, failingCreate{memStore{MemLog: coordtest.NewMemLog(), epoch: func() int32 { return 0 }}},
		fakePIDs{new(atomic.Int64)}, nil)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.EnsureTopic(context.Background())
	require.ErrorIs(t, err, ErrUnavailable)
}

// A load for an older leadership that finishes after a newer one's
// changes nothing: markers keep the newer coordinator epoch.
func TestLoadPartitionKeepsTheNewerEpoch(t *testing.T) {
	c, err := New(Config{Partitions: 1, Logger: slog.New(slog.DiscardHandler)},
		memStore{MemLog: coordtest.NewMemLog(), epoch: func() int32 { return 0 }}, fakePIDs{new(atomic.Int64)}, nil)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.EnsureTopic(context.Background())
	require.NoError(t, err)
	c.Start(nil)
	require.NoError(t, c.LoadPartition(0, 5))
	require.NoError(t, c.LoadPartition(0, 3))
	require.Equal(t, int32(5), c.leaderEpoch(0))
}
