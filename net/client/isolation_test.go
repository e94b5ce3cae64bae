package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseIsolation(t *testing.T) {
	for in, want := range map[string]Isolation{
		"read_committed": ReadCommitted, "READ COMMITTED": ReadCommitted, "read-committed": ReadCommitted,
		"read_uncommitted": ReadUncommitted, " Read Uncommitted ": ReadUncommitted,
	} {
		got, err := ParseIsolation(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := ParseIsolation("serializable")
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Equal(t, "read_committed", ReadCommitted.String())
	require.Equal(t, "read_uncommitted", ReadUncommitted.String())
}

// The read_committed filter, record by record: per producer, transactional
// records wait for that producer's next marker; commit shows them, abort
// drops them; plain records show at once but never overtake an earlier
// undecided record; nothing at or past the stable offset shows, but markers
// there still decide transactions begun below it.
func TestCommittedFilter(t *testing.T) {
	var log []*kgo.Record
	data := func(pid int64, txn bool, v string) {
		r := &kgo.Record{Offset: int64(len(log)), ProducerID: pid, Value: []byte(v)}
		if txn {
			r.Attrs = txnAttrs(false)
		}
		log = append(log, r)
	}
	marker := func(pid int64, typ byte) {
		log = append(log, &kgo.Record{Offset: int64(len(log)), ProducerID: pid, Attrs: txnAttrs(true), Key: []byte{0, 0, 0, typ}})
	}
	data(-1, false, "plain-0")  // 0
	data(1, true, "p1-commit")  // 1
	data(2, true, "p2-abort")   // 2
	data(-1, false, "plain-1")  // 3: held behind 1 and 2
	marker(2, controlAbort)     // 4
	data(1, true, "p1-commit2") // 5
	marker(1, controlCommit)    // 6: releases 1, 3, 5
	data(3, true, "p3-late")    // 7: its abort marker comes after the stable offset
	data(4, true, "p4-open")    // 8: the open transaction: stable offset 8
	marker(3, controlAbort)     // 9
	data(-1, false, "plain-2")  // 10: past the stable offset

	f := newCommittedFilter(8)
	var shown []string
	var releasedAt []int64
	for _, r := range log {
		for _, kr := range f.add(r) {
			shown = append(shown, string(kr.Value))
			releasedAt = append(releasedAt, r.Offset)
		}
		if r.Offset == 7 {
			require.True(t, f.undecided(), "offset 7 waits for producer 3's marker")
		}
	}
	require.Equal(t, []string{"plain-0", "p1-commit", "plain-1", "p1-commit2"}, shown)
	require.Equal(t, []int64{0, 6, 6, 6}, releasedAt)
	require.False(t, f.undecided())
	require.Empty(t, f.finish())

	// A record whose marker never comes (its transaction is open) is not
	// shown; the plain records queued behind it are, when the read ends.
	f = newCommittedFilter(10)
	require.Empty(t, f.add(&kgo.Record{Offset: 0, ProducerID: 7, Attrs: txnAttrs(false), Value: []byte("open")}))
	require.Empty(t, f.add(&kgo.Record{Offset: 1, ProducerID: -1, Value: []byte("behind")}))
	// Another producer's marker decides nothing here; neither does a
	// control record that is not a transaction marker.
	require.Empty(t, f.add(&kgo.Record{Offset: 2, ProducerID: 8, Attrs: txnAttrs(true), Key: []byte{0, 0, 0, controlCommit}}))
	require.Empty(t, f.add(&kgo.Record{Offset: 3, ProducerID: 7, Attrs: txnAttrs(true), Key: []byte{0, 0, 0, 5}}))
	require.True(t, f.undecided())
	rest := f.finish()
	require.Len(t, rest, 1)
	require.Equal(t, "behind", string(rest[0].Value))
}

// txnAttrs returns record attributes of a transactional batch, a control
// batch if control.
func txnAttrs(control bool) kgo.RecordAttrs {
	return kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: control})
}

// End to end on kfake, which implements transactions: a committed, an
// aborted and an open transaction, read at both isolation levels.
func TestReadIsolation(t *testing.T) {
	requireKfake(t)
	cl := newTestClient(t)
	ctx := testCtx(t)
	topic := uniqueTopic(t, "iso")
	require.NoError(t, cl.CreateTopic(ctx, topic, 1, 1, nil))
	produce := func(vals ...string) {
		t.Helper()
		var recs []Record
		for _, v := range vals {
			recs = append(recs, Record{Partition: 0, Value: []byte(v)})
		}
		_, err := cl.Produce(ctx, topic, recs)
		require.NoError(t, err)
	}
	inTxn := func(id string, vals ...string) *Transaction {
		t.Helper()
		tx, err := cl.BeginTransaction(ctx, id)
		require.NoError(t, err)
		var recs []Record
		for _, v := range vals {
			recs = append(recs, Record{Partition: 0, Value: []byte(v)})
		}
		_, err = tx.Produce(ctx, topic, recs)
		require.NoError(t, err)
		return tx
	}
	read := func(iso Isolation, limit int) []string {
		t.Helper()
		got, err := cl.Read(ctx, ReadRequest{Topic: topic, Isolation: iso, Limit: limit})
		require.NoError(t, err)
		return values(got)
	}

	produce("plain-0")
	require.NoError(t, inTxn("tx-commit", "c1", "c2").Commit(ctx))
	require.NoError(t, inTxn("tx-abort", "a1").Abort(ctx))
	open := inTxn("tx-open", "o1")
	produce("plain-1")

	require.Equal(t, []string{"plain-0", "c1", "c2", "a1", "o1", "plain-1"}, read(ReadUncommitted, 0))
	require.Equal(t, []string{"plain-0", "c1", "c2"}, read(ReadCommitted, 0))
	require.Equal(t, []string{"plain-0", "c1"}, read(ReadCommitted, 2))
	// FROM LATEST counts back from the stable offset (6: markers take
	// offsets too), not from the high watermark.
	got, err := cl.Read(ctx, ReadRequest{Topic: topic, Isolation: ReadCommitted, Start: FromEnd(4)})
	require.NoError(t, err)
	require.Equal(t, []string{"c2"}, values(got))

	d, err := cl.DescribeTopic(ctx, topic)
	require.NoError(t, err)
	p := d.Partitions[0]
	require.Greater(t, p.HighWatermark, p.LastStable, "the open transaction holds the stable offset back")

	require.NoError(t, open.Commit(ctx))
	require.Equal(t, []string{"plain-0", "c1", "c2", "o1", "plain-1"}, read(ReadCommitted, 0))
	d, err = cl.DescribeTopic(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, d.Partitions[0].HighWatermark, d.Partitions[0].LastStable)
}

// The case a read_committed fetch cannot end on its own: the last records
// before the stable offset belong to a transaction that aborted after
// another one began, so its marker lies past the stable offset. The read
// sees every offset, finds the marker, and returns.
func TestReadCommittedAbortedBeforeOpen(t *testing.T) {
	requireKfake(t)
	cl := newTestClient(t)
	ctx := testCtx(t)
	topic := uniqueTopic(t, "isotail")
	require.NoError(t, cl.CreateTopic(ctx, topic, 1, 1, nil))
	begin := func(id, v string) *Transaction {
		tx, err := cl.BeginTransaction(ctx, id)
		require.NoError(t, err)
		_, err = tx.Produce(ctx, topic, []Record{{Partition: 0, Value: []byte(v)}})
		require.NoError(t, err)
		return tx
	}
	late := begin("tx-late", "aborted")
	open := begin("tx-open", "open")
	require.NoError(t, late.Abort(ctx))
	defer func() { _ = open.Abort(ctx) }()

	start := time.Now()
	got, err := cl.Read(ctx, ReadRequest{Topic: topic, Isolation: ReadCommitted})
	require.NoError(t, err)
	require.Empty(t, got)
	require.Less(t, time.Since(start), 5*time.Second, "the read ends by offsets, not by the idle guard")
	got, err = cl.Read(ctx, ReadRequest{Topic: topic})
	require.NoError(t, err)
	require.Equal(t, []string{"aborted", "open"}, values(got))
}

func TestListAndDescribeTransactions(t *testing.T) {
	requireKfake(t)
	cl := newTestClient(t)
	ctx := testCtx(t)
	topic := uniqueTopic(t, "txlist")
	require.NoError(t, cl.CreateTopic(ctx, topic, 2, 1, nil))

	done, err := cl.BeginTransaction(ctx, "tx-done")
	require.NoError(t, err)
	_, err = done.Produce(ctx, topic, []Record{{Partition: 0, Value: []byte("x")}})
	require.NoError(t, err)
	require.NoError(t, done.Commit(ctx))

	before := time.Now().Add(-time.Second)
	open, err := cl.BeginTransaction(ctx, "tx-open")
	require.NoError(t, err)
	defer func() { _ = open.Abort(ctx) }()
	_, err = open.Produce(ctx, topic, []Record{{Partition: 1, Value: []byte("y")}, {Partition: 0, Value: []byte("z")}})
	require.NoError(t, err)

	ls, err := cl.ListTransactions(ctx)
	require.NoError(t, err)
	require.Len(t, ls, 2)
	require.Equal(t, "tx-done", ls[0].ID)
	require.False(t, TxnOpen(ls[0].State), ls[0].State)
	require.Equal(t, "tx-open", ls[1].ID)
	require.Equal(t, TxnStateOngoing, ls[1].State)
	require.True(t, TxnOpen(ls[1].State))
	require.NotEqual(t, ls[0].ProducerID, ls[1].ProducerID)

	d, err := cl.DescribeTransaction(ctx, "tx-open")
	require.NoError(t, err)
	require.Equal(t, TxnStateOngoing, d.State)
	require.Equal(t, ls[1].ProducerID, d.ProducerID)
	require.Positive(t, d.Timeout)
	require.True(t, d.Started.After(before), "%v", d.Started)
	require.Equal(t, []TopicPartitions{{Topic: topic, Partitions: []int32{0, 1}}}, d.Partitions)

	d, err = cl.DescribeTransaction(ctx, "tx-done")
	require.NoError(t, err)
	require.False(t, TxnOpen(d.State))
	require.True(t, d.Started.IsZero())
	require.Empty(t, d.Partitions)

	_, err = cl.DescribeTransaction(ctx, "nope")
	require.ErrorIs(t, err, ErrNotFound)
	require.EqualError(t, err, "transaction 'nope' does not exist")
}
