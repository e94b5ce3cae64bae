package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/txncoord"
	"github.com/moonmq/moonmq/node"
)

// consumeValues reads topic from the start at isolation to the end the
// broker reports for it (the last stable offset for read_committed, the
// high watermark otherwise), and returns the values read, sorted: all of
// them, so a record that should not be there cannot hide behind the ones
// that should.
func consumeValues(t *testing.T, addr, topic string, isolation kgo.IsolationLevel) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.KeepControlRecords())
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if isolation == kgo.ReadCommitted() {
		ends, err = adm.ListCommittedOffsets(ctx, topic)
	}
	require.NoError(t, err)
	next := map[int32]int64{} // the offset after the last record read, control records included
	done := func() bool {
		finished := true
		ends.Each(func(o kadm.ListedOffset) { finished = finished && next[o.Partition] >= o.Offset })
		return finished
	}
	var got []string
	for !done() {
		require.NoError(t, ctx.Err(), "read to the end of %s: %v of %v", topic, next, ends)
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				got = append(got, string(r.Value))
			}
		})
	}
	slices.Sort(got)
	return got
}

// requireValues reads topic to its end at isolation (consumeValues) until
// it holds exactly want, which a transaction's markers, written just after
// its producer learned the outcome, may take a moment to make so; at the
// deadline it fails with the difference.
func requireValues(t *testing.T, addr, topic string, isolation kgo.IsolationLevel, want []string) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got = consumeValues(t, addr, topic, isolation); slices.Equal(got, want) || time.Now().After(deadline) {
			break
		}
	}
	require.Equal(t, want, got)
}

// A transactional producer's committed transactions are seen by
// read_committed consumers, its aborted ones never; read_uncommitted sees
// both; an open transaction holds the last stable offset back.
func TestTransactionsCommitAbortAndIsolation(t *testing.T) {
	forEachTransactionVersion(t, testTransactionsCommitAbortAndIsolation)
}

// forEachTransactionVersion runs test against a broker of each transaction
// version: 0 (KIP-890 part 1 only) and 2 (part 2: implicit adds, an epoch
// bump per transaction), which franz-go picks from ApiVersions.
func forEachTransactionVersion(t *testing.T, test func(t *testing.T, cfg node.Config)) {
	for _, tv := range []int16{0, 2} {
		t.Run(fmt.Sprintf("tv%d", tv), func(t *testing.T) {
			test(t, node.Config{Txns: txncoord.Config{TransactionVersion: tv}})
		})
	}
}

func testTransactionsCommitAbortAndIsolation(t *testing.T, cfg node.Config) {
	s := startServer(t, cfg)
	createTopic(t, s, "t", 2)
	addr := s.Addr().String()

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("tx-1"),
		kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(10*time.Second))
	require.NoError(t, err)
	defer cl.Close()
	ctx := context.Background()
	txn := func(commit kgo.TransactionEndTry, values ...string) {
		t.Helper()
		require.NoError(t, cl.BeginTransaction())
		for i, v := range values {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: int32(i % 2)}).FirstErr())
		}
		require.NoError(t, cl.EndTransaction(ctx, commit))
	}
	txn(kgo.TryCommit, "c1", "c2")
	txn(kgo.TryAbort, "a1", "a2")
	txn(kgo.TryCommit, "c3", "c4")

	requireValues(t, addr, "t", kgo.ReadCommitted(), []string{"c1", "c2", "c3", "c4"})
	requireValues(t, addr, "t", kgo.ReadUncommitted(), []string{"a1", "a2", "c1", "c2", "c3", "c4"})

	// An open transaction: read_committed stops at its first record.
	require.NoError(t, cl.BeginTransaction())
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("open"), Partition: 0}).FirstErr())
	adm := kadm.NewClient(cl)
	committed, err := adm.ListEndOffsets(ctx, "t")
	require.NoError(t, err)
	hw, _ := committed.Lookup("t", 0)
	stable, err := adm.ListCommittedOffsets(ctx, "t") // ListOffsets at READ_COMMITTED: the LSO
	require.NoError(t, err)
	lso, _ := stable.Lookup("t", 0)
	require.Less(t, lso.Offset, hw.Offset, "the open transaction holds the LSO back")
	require.NoError(t, cl.EndTransaction(ctx, kgo.TryCommit))
	requireValues(t, addr, "t", kgo.ReadCommitted(), []string{"c1", "c2", "c3", "c4", "open"})

	// The coordinator describes and lists the id.
	desc, err := adm.DescribeTransactions(ctx, "tx-1")
	require.NoError(t, err)
	d, ok := desc["tx-1"]
	require.True(t, ok)
	require.NoError(t, d.Err)
	require.Equal(t, "CompleteCommit", d.State)
	if cfg.Txns.TransactionVersion >= 2 {
		// KIP-890 part 2: every EndTxn bumped the epoch (4 transactions).
		require.GreaterOrEqual(t, d.ProducerEpoch, int16(4), "the client used transaction version 2")
	} else {
		require.Equal(t, int16(0), d.ProducerEpoch)
	}
	listed, err := adm.ListTransactions(ctx, nil, nil)
	require.NoError(t, err)
	require.Contains(t, listed.TransactionalIDs(), "tx-1")
}

// A second producer with the same transactional id fences the first: its
// open transaction is aborted and its next write refused.
func TestTransactionalProducerFencing(t *testing.T) {
	forEachTransactionVersion(t, testTransactionalProducerFencing)
}

func testTransactionalProducerFencing(t *testing.T, cfg node.Config) {
	s := startServer(t, cfg)
	createTopic(t, s, "t", 1)
	addr := s.Addr().String()
	ctx := context.Background()
	newProducer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("tx-z"), kgo.DefaultProduceTopic("t"))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	zombie := newProducer()
	require.NoError(t, zombie.BeginTransaction())
	require.NoError(t, zombie.ProduceSync(ctx, kgo.StringRecord("zombie-1")).FirstErr())

	fresh := newProducer()
	require.NoError(t, fresh.BeginTransaction())
	require.NoError(t, fresh.ProduceSync(ctx, kgo.StringRecord("fresh")).FirstErr())
	require.NoError(t, fresh.EndTransaction(ctx, kgo.TryCommit))

	err := zombie.ProduceSync(ctx, kgo.StringRecord("zombie-2")).FirstErr()
	require.Error(t, err)
	require.True(t, errorsIsAny(err, kerr.InvalidProducerEpoch, kerr.ProducerFenced, kerr.InvalidTxnState),
		"the zombie is fenced: %v", err)
	requireValues(t, addr, "t", kgo.ReadCommitted(), []string{"fresh"})
}

func errorsIsAny(err error, targets ...*kerr.Error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// Consume-transform-produce with franz-go's GroupTransactSession: every
// input record reaches the output exactly once for a read_committed
// reader, and the group's committed offsets end at the input's end.
func TestGroupTransactSessionExactlyOnce(t *testing.T) {
	forEachTransactionVersion(t, testGroupTransactSessionExactlyOnce)
}

func testGroupTransactSessionExactlyOnce(t *testing.T, cfg node.Config) {
	s := startServer(t, cfg)
	createTopic(t, s, "in", 3)
	createTopic(t, s, "out", 3)
	addr := s.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const n = 300
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("in"))
	require.NoError(t, err)
	defer prod.Close()
	for i := range n {
		prod.Produce(ctx, kgo.StringRecord(fmt.Sprintf("r%03d", i)), nil)
	}
	require.NoError(t, prod.Flush(ctx))

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("eos-1"),
		kgo.ConsumerGroup("eos"), kgo.ConsumeTopics("in"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic("out"),
		kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer sess.Close()
	moved := 0
	for moved < n && ctx.Err() == nil {
		fs := sess.PollFetches(ctx)
		require.NoError(t, sess.Begin())
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, kgo.StringRecord("out-"+string(r.Value)), nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		require.NoError(t, err)
		if committed {
			moved += fs.NumRecords()
		}
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("out-r%03d", i)
	}
	requireValues(t, addr, "out", kgo.ReadCommitted(), want)
	adm := kadm.NewClient(prod)
	offs, err := adm.FetchOffsets(ctx, "eos")
	require.NoError(t, err)
	total := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	require.Equal(t, int64(n), total, "the group's offsets end at the input's end")
}

// ApiVersions offers the KIP-890 part 2 versions and the
// transaction.version feature only at transaction version 2.
func TestApiVersionsTransactionVersion(t *testing.T) {
	forEachTransactionVersion(t, func(t *testing.T, cfg node.Config) {
		s := startServer(t, cfg)
		rc := dialRaw(t, s)
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		rc.send(req)
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		rc.recv(resp)
		max := map[int16]int16{}
		for _, k := range resp.ApiKeys {
			max[k.ApiKey] = k.MaxVersion
		}
		tv := cfg.Txns.TransactionVersion
		want := map[int16]int16{kmsg.Produce.Int16(): 11, kmsg.EndTxn.Int16(): 4, kmsg.TxnOffsetCommit.Int16(): 4, kmsg.AddPartitionsToTxn.Int16(): 4}
		if tv >= 2 {
			want = map[int16]int16{kmsg.Produce.Int16(): 12, kmsg.EndTxn.Int16(): 5, kmsg.TxnOffsetCommit.Int16(): 5, kmsg.AddPartitionsToTxn.Int16(): 5}
		}
		for k, v := range want {
			require.Equal(t, v, max[k], "%s", kmsg.NameForKey(k))
		}
		require.Equal(t, int64(0), resp.FinalizedFeaturesEpoch) // a fixed setting: its epoch never moves
		require.Len(t, resp.FinalizedFeatures, 1)
		require.Equal(t, "transaction.version", resp.FinalizedFeatures[0].Name)
		require.Equal(t, tv, resp.FinalizedFeatures[0].MaxVersionLevel)
	})
}

// A transaction open longer than its timeout is aborted by the coordinator:
// read_committed consumers are not held back past it, its records are
// never visible, and the stuck producer is fenced.
func TestTransactionTimeoutAborts(t *testing.T) {
	forEachTransactionVersion(t, func(t *testing.T, cfg node.Config) {
		s := startServer(t, cfg)
		createTopic(t, s, "t", 1)
		addr := s.Addr().String()
		ctx := context.Background()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("tx-slow"), kgo.DefaultProduceTopic("t"),
			kgo.TransactionTimeout(time.Second))
		require.NoError(t, err)
		defer cl.Close()
		require.NoError(t, cl.BeginTransaction())
		require.NoError(t, cl.ProduceSync(ctx, kgo.StringRecord("stuck")).FirstErr())

		adm := kadm.NewClient(cl)
		eventually(t, "the coordinator aborts the timed-out transaction", 20*time.Second, func() bool {
			d, err := adm.DescribeTransactions(ctx, "tx-slow")
			if err != nil {
				return false
			}
			st := d["tx-slow"].State
			return st == "CompleteAbort"
		})
		eventually(t, "the LSO reaches the high watermark", 20*time.Second, func() bool {
			end, err1 := adm.ListEndOffsets(ctx, "t")
			stable, err2 := adm.ListCommittedOffsets(ctx, "t")
			if err1 != nil || err2 != nil {
				return false
			}
			hw, _ := end.Lookup("t", 0)
			lso, _ := stable.Lookup("t", 0)
			return hw.Offset > 0 && lso.Offset == hw.Offset
		})
		// The stuck producer's next write belongs to a transaction the
		// coordinator ended: it is refused.
		err = cl.ProduceSync(ctx, kgo.StringRecord("late")).FirstErr()
		if err == nil {
			err = cl.EndTransaction(ctx, kgo.TryCommit)
		}
		require.Error(t, err, "the timed-out producer cannot commit")
		require.Empty(t, consumeValues(t, addr, "t", kgo.ReadCommitted()), "aborted records are never read_committed")
	})
}

// Requests naming another producer's transaction are refused with
// Kafka's codes and change nothing: AddPartitionsToTxn and TxnOffsetCommit
// with a producer id the transactional id does not have.
func TestTransactionRequestsForAnotherProducer(t *testing.T) {
	s := startServer(t, node.Config{})
	createTopic(t, s, "t", 1)
	addr := s.Addr().String()
	ctx := context.Background()
	owner, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("tx-owned"), kgo.DefaultProduceTopic("t"))
	require.NoError(t, err)
	defer owner.Close()
	require.NoError(t, owner.BeginTransaction())
	require.NoError(t, owner.ProduceSync(ctx, kgo.StringRecord("mine")).FirstErr())

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version = 3
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "tx-owned", 999999, 0
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "t", []int32{0}
	add.Topics = append(add.Topics, at)
	addResp, err := add.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.ErrorIs(t, kerr.ErrorForCode(addResp.Topics[0].Partitions[0].ErrorCode), kerr.InvalidProducerIDMapping)

	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.Version = 3
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch, commit.Generation = "tx-owned", "g", 999999, 0, -1
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = "t"
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 1
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	kadm.NewClient(cl).FindGroupCoordinators(ctx, "g") // creates __consumer_offsets
	eventually(t, "a TxnOffsetCommit answer other than a coordinator move", 20*time.Second, func() bool {
		resp, err := commit.RequestWith(ctx, cl)
		if err != nil {
			return false
		}
		code := resp.Topics[0].Partitions[0].ErrorCode
		if code == kerr.CoordinatorLoadInProgress.Code || code == kerr.CoordinatorNotAvailable.Code || code == kerr.NotCoordinator.Code {
			return false
		}
		require.ErrorIs(t, kerr.ErrorForCode(code), kerr.InvalidProducerIDMapping)
		return true
	})
	require.NoError(t, owner.EndTransaction(ctx, kgo.TryCommit), "the owner's transaction is untouched")
}

// DescribeProducers shows a partition's producers and the start offset of
// an open transaction, as kafka-transactions.sh find-hanging reads it.
func TestDescribeProducers(t *testing.T) {
	s := startServer(t, node.Config{})
	createTopic(t, s, "t", 1)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.TransactionalID("tx-d"), kgo.DefaultProduceTopic("t"))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	require.NoError(t, cl.BeginTransaction())
	require.NoError(t, cl.ProduceSync(ctx, kgo.StringRecord("open")).FirstErr())
	startOffset := func() int64 {
		t.Helper()
		d, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"t": {0: {}}})
		require.NoError(t, err)
		p, ok := d["t"].Partitions[0]
		require.True(t, ok)
		require.NoError(t, p.Err)
		require.Len(t, p.ActiveProducers, 1)
		return p.ActiveProducers[0].CurrentTxnStartOffset
	}
	require.Equal(t, int64(0), startOffset())
	require.NoError(t, cl.EndTransaction(ctx, kgo.TryCommit))
	eventually(t, "the marker ends the transaction on the partition", 10*time.Second, func() bool { return startOffset() == -1 })
}
