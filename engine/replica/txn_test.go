package replica

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/txn"
	"github.com/moonmq/moonmq/internal/syncbuf"
)

func txnBatch7(epoch int16, seq int32, values ...string) []byte {
	b := producerBatch(7, epoch, seq, values...)
	h, _ := batch.ParseHeader(b)
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{OffsetDelta: int32(i), Value: []byte(v)}
	}
	h.Attributes |= batch.TransactionalBit
	return batch.Build(h, recs)
}

// verifier records verification requests and answers them when told.
type verifier struct {
	mu    sync.Mutex
	calls []func(error)
}

func (v *verifier) fn(pid int64, epoch int16, done func(error)) {
	v.mu.Lock()
	v.calls = append(v.calls, done)
	v.mu.Unlock()
}

func (v *verifier) answer(t *testing.T, err error) {
	t.Helper()
	v.mu.Lock()
	require.NotEmpty(t, v.calls, "a verification was asked for")
	done := v.calls[0]
	v.calls = v.calls[1:]
	v.mu.Unlock()
	done(err)
}

type outcome struct {
	res ProduceResult
	err error
}

func appendTxn(p *Partition, v *verifier, b []byte) chan outcome {
	ch := make(chan outcome, 1)
	p.AppendTxn(b, v.fn, func(res ProduceResult, err error) { ch <- outcome{res, err} })
	return ch
}

func wait(t *testing.T, ch chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return outcome{}
	}
}

// A producer's first transactional batch on a partition waits for the
// coordinator's verification, and its later batches queue behind it in
// order; a marker ends the transaction, an abort indexing it for
// read_committed fetches; the open transaction holds the LSO back.
func TestTxnAppendVerificationMarkersAndLSO(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	tp := TopicPartition{Topic: "t", Partition: 0}
	p, err := b.EnsurePartition(tp, nil)
	require.NoError(t, err)
	_, err = p.Append(producerBatch(-1, -1, -1, "plain"))
	require.NoError(t, err)

	v := &verifier{}
	first := appendTxn(p, v, txnBatch7(0, 0, "t1", "t2"))
	second := appendTxn(p, v, txnBatch7(0, 2, "t3"))
	require.Equal(t, int64(1), p.log.LogEndOffset(), "nothing appended before the verification")
	v.answer(t, nil)
	o1, o2 := wait(t, first), wait(t, second)
	require.NoError(t, o1.err)
	require.NoError(t, o2.err)
	require.Equal(t, int64(1), o1.res.BaseOffset)
	require.Equal(t, int64(3), o2.res.BaseOffset, "in arrival order")
	require.NoError(t, p.WaitDurable(context.Background(), o2.res))

	fetch := func(iso IsolationLevel) FetchResult {
		res, err := p.Fetch(FetchParams{Offset: 0, MaxBytes: 1 << 20, Isolation: iso, ReplicaID: -1, CurrentLeaderEpoch: NoLeaderEpoch})
		require.NoError(t, err)
		return res
	}
	res := fetch(ReadCommitted)
	require.Equal(t, int64(4), res.HighWatermark)
	require.Equal(t, int64(1), res.LastStable, "the open transaction holds the LSO at its first offset")
	require.NotNil(t, res.Aborted)
	require.Nil(t, fetch(ReadUncommitted).Aborted)

	// The abort marker ends it: the LSO moves past it, and the aborted
	// transaction is listed for read_committed fetches over it.
	m, err := p.WriteMarker(MarkerParams{ProducerID: 7, Epoch: 0, Commit: false, CoordinatorEpoch: 1})
	require.NoError(t, err)
	require.NoError(t, p.WaitDurable(context.Background(), m))
	res = fetch(ReadCommitted)
	require.Equal(t, int64(5), res.LastStable)
	require.Equal(t, []AbortedTxn{{ProducerID: 7, FirstOffset: 1}}, res.Aborted)

	// A verification refused fails only the batch it was for.
	refused := appendTxn(p, v, txnBatch7(0, 3, "late"))
	v.answer(t, errors.New("not in the transaction"))
	require.Error(t, wait(t, refused).err)
	// A stale coordinator epoch and a stale producer epoch are fenced.
	_, err = p.WriteMarker(MarkerParams{ProducerID: 7, Epoch: 0, Commit: true, CoordinatorEpoch: 0})
	require.ErrorIs(t, err, txn.ErrCoordinatorFenced)
	o := wait(t, appendTxn(p, v, txnBatch7(-1, 0, "zombie")))
	require.ErrorIs(t, o.err, txn.ErrInvalidEpoch)
	require.NoError(t, b.Close())

	// After a restart the aborted transaction is still indexed, once.
	b = open(t, dir)
	defer b.Close()
	p, err = b.EnsurePartition(tp, nil)
	require.NoError(t, err)
	res, err = p.Fetch(FetchParams{Offset: 0, MaxBytes: 1 << 20, Isolation: ReadCommitted, ReplicaID: -1, CurrentLeaderEpoch: NoLeaderEpoch})
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{{ProducerID: 7, FirstOffset: 1}}, res.Aborted)
	require.Equal(t, res.HighWatermark, res.LastStable)
}

// An open transaction survives a restart: it still holds the LSO back
// until its marker comes.
func TestOpenTransactionSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	tp := TopicPartition{Topic: "t", Partition: 0}
	p, err := b.EnsurePartition(tp, nil)
	require.NoError(t, err)
	v := &verifier{}
	ch := appendTxn(p, v, txnBatch7(0, 0, "open"))
	v.answer(t, nil)
	o := wait(t, ch)
	require.NoError(t, o.err)
	require.NoError(t, p.WaitDurable(context.Background(), o.res))
	_, err = p.Append(producerBatch(-1, -1, -1, "after"))
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b = open(t, dir)
	defer b.Close()
	p, err = b.EnsurePartition(tp, nil)
	require.NoError(t, err)
	lso, err := p.ListOffset(ListOffsetParams{Timestamp: ListLatest, Isolation: ReadCommitted, CurrentLeaderEpoch: NoLeaderEpoch})
	require.NoError(t, err)
	require.Equal(t, int64(0), lso.Offset)
	m, err := p.WriteMarker(MarkerParams{ProducerID: 7, Epoch: 0, Commit: true, CoordinatorEpoch: 0})
	require.NoError(t, err)
	require.NoError(t, p.WaitDurable(context.Background(), m))
	lso, err = p.ListOffset(ListOffsetParams{Timestamp: ListLatest, Isolation: ReadCommitted, CurrentLeaderEpoch: NoLeaderEpoch})
	require.NoError(t, err)
	require.Equal(t, int64(3), lso.Offset)
}

// The log cleaner keeps a marker it removed as an empty control batch
// when it was its producer's last (Kafka's rule). Replayed (at load after
// a crash, or copied by a follower), it gives the producer state nothing
// and is no reason for a warning; a marker with its record still ends its
// transaction.
func TestEmptyControlBatchIsNothingToTheProducerState(t *testing.T) {
	var logged syncbuf.Buffer
	b, err := Open(Options{DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	defer b.Close()
	p, err := b.EnsurePartition(TopicPartition{"empty-marker", 0}, map[string]string{"cleanup.policy": "compact"})
	require.NoError(t, err)

	marker := batch.BuildEndTxnMarker(7, 0, batch.EndTxnMarker{Commit: true}, 1000)
	h, err := batch.ParseHeader(marker)
	require.NoError(t, err)
	empty := batch.Build(h, nil)
	eh, err := batch.ParseHeader(empty)
	require.NoError(t, err)
	require.True(t, eh.IsControl())
	require.Zero(t, eh.NumRecords)

	tb, ok, err := txnBatch(eh, empty, 5)
	require.NoError(t, err)
	require.False(t, ok, "nothing for the producer state")
	require.Nil(t, tb.Marker)
	tb, ok, err = txnBatch(h, marker, 5)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotNil(t, tb.Marker)
	require.True(t, tb.Marker.Commit)

	p.mu.Lock()
	p.stageStored(p.producers.Begin(txn.OriginReplication), eh, empty)
	p.mu.Unlock()
	require.Empty(t, logged.String(), "an empty control batch is not a batch the producer state fails to understand")
}
