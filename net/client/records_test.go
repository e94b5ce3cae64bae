package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// seedTopic creates topic with n partitions and produces per records to each
// partition, with values "p<partition>-<i>" and timestamps base+i seconds.
func seedTopic(t *testing.T, cl *Client, topic string, partitions int32, per int, base time.Time) {
	t.Helper()
	ctx := testCtx(t)
	require.NoError(t, cl.CreateTopic(ctx, topic, partitions, 1, nil))
	var recs []Record
	for p := range partitions {
		for i := range per {
			recs = append(recs, Record{
				Partition: p,
				Key:       []byte(fmt.Sprintf("k%d", i)),
				Value:     []byte(fmt.Sprintf("p%d-%d", p, i)),
				Timestamp: base.Add(time.Duration(i) * time.Second),
			})
		}
	}
	out, err := cl.Produce(ctx, topic, recs)
	require.NoError(t, err)
	require.Len(t, out, len(recs))
}

func values(rs []Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value)
	}
	return out
}

func TestProduceResults(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	topic := uniqueTopic(t, "produce")
	require.NoError(t, cl.CreateTopic(ctx, topic, 4, 1, nil))

	ts := time.UnixMilli(1_700_000_000_000)
	recs := []Record{
		{Partition: 2, Key: []byte("a"), Value: []byte("v0"), Timestamp: ts,
			Headers: []Header{{Key: "h", Value: []byte("x")}}},
		{Partition: 2, Value: []byte("v1")},
		{Partition: AnyPartition, Key: []byte("same"), Value: []byte("v2")},
		{Partition: AnyPartition, Key: []byte("same"), Value: []byte("v3")},
	}
	out, err := cl.Produce(ctx, topic, recs)
	require.NoError(t, err)
	require.Len(t, out, 4)
	require.Equal(t, Produced{Partition: 2, Offset: 0, Timestamp: ts}, out[0])
	require.Equal(t, int32(2), out[1].Partition)
	require.Equal(t, int64(1), out[1].Offset)
	// Same key, same partition, and the one Kafka's default partitioner
	// (murmur2) picks, so Java and librdkafka producers agree.
	require.Equal(t, out[2].Partition, out[3].Partition)
	want := kgo.StickyKeyPartitioner(nil).ForTopic(topic).Partition(&kgo.Record{Key: []byte("same")}, 4)
	require.Equal(t, int32(want), out[2].Partition)
	require.Equal(t, out[2].Offset+1, out[3].Offset)

	got, err := cl.Read(ctx, ReadRequest{Topic: topic, Partitions: []int32{2}})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, topic, got[0].Topic)
	require.Equal(t, []byte("a"), got[0].Key)
	require.Equal(t, ts, got[0].Timestamp)
	require.Equal(t, []Header{{Key: "h", Value: []byte("x")}}, got[0].Headers)
	require.Nil(t, got[1].Key)

	// Keyless records are spread over partitions.
	var many []Record
	for i := range 40 {
		many = append(many, Record{Partition: AnyPartition, Value: []byte{byte(i)}})
	}
	out, err = cl.Produce(ctx, topic, many)
	require.NoError(t, err)
	seen := map[int32]bool{}
	for _, o := range out {
		seen[o.Partition] = true
	}
	require.Len(t, seen, 4)

	// Bad partitions are rejected with a clear error, nothing is written.
	_, err = cl.Produce(ctx, topic, []Record{{Partition: 9, Value: []byte("x")}})
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, fmt.Sprintf("partition 9 of topic '%s' does not exist", topic), Explain(err))
	_, err = cl.Produce(ctx, topic, []Record{{Partition: -2}})
	require.ErrorIs(t, err, ErrInvalidArgument)

	out, err = cl.Produce(ctx, topic, nil)
	require.NoError(t, err)
	require.Empty(t, out)
}

func TestProduceUnknownTopic(t *testing.T) {
	cl := newTestClient(t)
	_, err := cl.Produce(testCtx(t), "missing-topic", []Record{{Partition: AnyPartition, Value: []byte("x")}})
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, "topic 'missing-topic' does not exist", Explain(err))
}

func TestReadVariants(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	topic := uniqueTopic(t, "read")
	base := time.UnixMilli(1_700_000_000_000)
	seedTopic(t, cl, topic, 2, 5, base) // p0: 0..4, p1: 0..4

	all, err := cl.Read(ctx, ReadRequest{Topic: topic})
	require.NoError(t, err)
	require.Len(t, all, 10)
	// Ordered by timestamp, then partition, then offset.
	require.Equal(t, []string{"p0-0", "p1-0", "p0-1", "p1-1", "p0-2", "p1-2", "p0-3", "p1-3", "p0-4", "p1-4"}, values(all))
	for _, r := range all {
		require.Equal(t, topic, r.Topic)
	}

	for _, tc := range []struct {
		name string
		req  ReadRequest
		want []string
	}{
		{"limit", ReadRequest{Limit: 3}, []string{"p0-0", "p1-0", "p0-1"}},
		{"one partition", ReadRequest{Partitions: []int32{1}}, []string{"p1-0", "p1-1", "p1-2", "p1-3", "p1-4"}},
		{"offset", ReadRequest{Partitions: []int32{0}, Start: Offset(3)}, []string{"p0-3", "p0-4"}},
		{"offset past end", ReadRequest{Start: Offset(99)}, []string{}},
		{"latest reads nothing", ReadRequest{Start: Latest()}, []string{}},
		{"from end", ReadRequest{Start: FromEnd(1)}, []string{"p0-4", "p1-4"}},
		{"from end beyond start", ReadRequest{Partitions: []int32{0}, Start: FromEnd(50)}, []string{"p0-0", "p0-1", "p0-2", "p0-3", "p0-4"}},
		{"timestamp", ReadRequest{Partitions: []int32{1}, Start: Timestamp(base.Add(3 * time.Second))}, []string{"p1-3", "p1-4"}},
		{"timestamp after all", ReadRequest{Start: Timestamp(base.Add(time.Hour))}, []string{}},
		{"filter", ReadRequest{Filter: func(r Record) bool { return bytes.HasSuffix(r.Value, []byte("-2")) }}, []string{"p0-2", "p1-2"}},
		{"filter with limit", ReadRequest{Limit: 1, Filter: func(r Record) bool { return r.Partition == 1 }}, []string{"p1-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Topic = topic
			got, err := cl.Read(ctx, req)
			require.NoError(t, err)
			require.Equal(t, tc.want, values(got))
		})
	}

	_, err = cl.Read(ctx, ReadRequest{Topic: topic, Partitions: []int32{7}})
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, "partition 7 of topic '"+topic+"' does not exist", err.Error())
	_, err = cl.Read(ctx, ReadRequest{Topic: topic, Limit: -1})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// A Read on an empty or fully consumed topic must return, not wait for
// records that never come.
func TestReadQuietTopicReturns(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	topic := uniqueTopic(t, "quiet")
	require.NoError(t, cl.CreateTopic(ctx, topic, 3, 1, nil))

	got, err := cl.Read(ctx, ReadRequest{Topic: topic})
	require.NoError(t, err)
	require.Empty(t, got)
	require.NotNil(t, got)

	_, err = cl.Produce(ctx, topic, []Record{{Partition: 1, Value: []byte("only")}})
	require.NoError(t, err)
	// Limit larger than the log, two partitions empty: ends at the
	// snapshot, well within the test context.
	got, err = cl.Read(ctx, ReadRequest{Topic: topic, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, []string{"only"}, values(got))
}

func TestReadCanceled(t *testing.T) {
	cl := newTestClient(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	_, err := cl.Read(ctx, ReadRequest{Topic: "x"})
	require.ErrorIs(t, err, context.Canceled)
}

func TestConsumeWithoutGroup(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	topic := uniqueTopic(t, "consume")
	seedTopic(t, cl, topic, 2, 3, time.Now())

	got := collect(t, cl, topic, "", Earliest(), 6)
	require.Len(t, got, 6)

	// Latest sees only records produced after it started.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recs := make(chan Record, 10)
	done := make(chan error, 1)
	go func() {
		done <- cl.Consume(cctx, topic, "", Latest(), func(r Record) error {
			recs <- r
			return nil
		})
	}()
	// Keep producing until the consumer (which may not have started
	// yet) sees a record; everything it sees must be new.
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var first Record
wait:
	for {
		select {
		case first = <-recs:
			break wait
		case <-tick.C:
			_, err := cl.Produce(ctx, topic, []Record{{Partition: 0, Value: []byte("new")}})
			require.NoError(t, err)
		case <-deadline:
			t.Fatal("consumer saw no new record")
		}
	}
	require.Equal(t, "new", string(first.Value))
	cancel()
	require.NoError(t, <-done, "cancellation is a normal stop")
}

func TestConsumeCallbackError(t *testing.T) {
	cl := newTestClient(t)
	topic := uniqueTopic(t, "cberr")
	seedTopic(t, cl, topic, 1, 2, time.Now())
	boom := errors.New("boom")
	err := cl.Consume(testCtx(t), topic, "", Earliest(), func(Record) error { return boom })
	require.ErrorIs(t, err, boom)

	err = cl.Consume(testCtx(t), "missing", "", Earliest(), func(Record) error { return nil })
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, cl.Consume(testCtx(t), topic, "", Earliest(), nil), ErrInvalidArgument)
}

// collect consumes until n records arrived, then stops the consumer.
func collect(t *testing.T, cl *Client, topic, group string, from Position, n int) []Record {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var (
		mu  sync.Mutex
		got []Record
	)
	enough := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- cl.Consume(ctx, topic, group, from, func(r Record) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, r)
			if len(got) == n {
				close(enough)
			}
			return nil
		})
	}()
	select {
	case <-enough:
	case err := <-done:
		t.Fatalf("consume ended early: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatalf("consumed %d of %d records", len(got), n)
	}
	cancel()
	require.NoError(t, <-done)
	mu.Lock()
	defer mu.Unlock()
	return append([]Record(nil), got...)
}

// A partition whose last offset is a transaction marker (a control record,
// never returned as a record) must still complete at its snapshot end
// rather than wait for the idle backstop.
func TestReadEndsAtTransactionMarker(t *testing.T) {
	addr := os.Getenv(testAddrEnv)
	if addr == "" {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		require.NoError(t, err)
		t.Cleanup(c.Close)
		addr = c.ListenAddrs()[0]
	}
	// The idle backstop is RequestTimeout (60s); the context is far
	// shorter, so falling back on it would fail the test.
	cl, err := Dial(testCtx(t), Options{Addr: addr, RequestTimeout: 60 * time.Second})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	topic := uniqueTopic(t, "txn")
	require.NoError(t, cl.CreateTopic(ctx, topic, 1, 1, nil))

	tx, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("tx-"+topic), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer tx.Close()
	for i, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		require.NoError(t, tx.BeginTransaction())
		require.NoError(t, tx.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("tx%d", i))}).FirstErr())
		require.NoError(t, tx.EndTransaction(ctx, commit))
	}

	offs, err := cl.ListOffsets(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, int64(4), offs[0].End, "two records, two markers")
	got, err := cl.Read(ctx, ReadRequest{Topic: topic})
	require.NoError(t, err)
	// Read is read-uncommitted: the aborted record is included.
	require.Equal(t, []string{"tx0", "tx1"}, values(got))
}
