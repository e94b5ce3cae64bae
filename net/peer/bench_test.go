package peer_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/cluster/replication"
	"github.com/moonmq/moonmq/engine/replica"
)

// BenchmarkReplicatedProduce is acks=all produce of 1 KiB records to a
// partition replicated on two in-process brokers (min.insync.replicas 2):
// every acknowledgement waits for the leader's fsync, the follower's
// fetch, its fsync and its next fetch. Both logs share this machine's disk
// and cores, so it measures the data path, not a cluster.
func BenchmarkReplicatedProduce(b *testing.B) {
	_, a, f := pair(b)
	tp := replica.TopicPartition{Topic: "t", Partition: 0}
	partA, partF := hosted(b, a, tp), hosted(b, f, tp)
	leader := replication.New(1, 30*time.Second)
	if err := leader.Become(time.Now(), leaderState(partA, []int32{1, 2}, []int32{1, 2}, 1, 1, 2)); err != nil {
		b.Fatal(err)
	}
	if err := partA.BecomeLeader(1, leader); err != nil {
		b.Fatal(err)
	}
	if err := partF.BecomeFollower(1, 1); err != nil {
		b.Fatal(err)
	}
	if err := fetcher(b, 2).Follow(tp, 1, a.addr, 1, partF); err != nil {
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.addr), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("t"),
		kgo.MaxBufferedRecords(1<<16))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 1024)
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	errs := make(chan error, 1)
	for range b.N {
		cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	if end := partF.CommittedEnd(); end < int64(b.N) {
		b.Fatalf("%d records acknowledged, the follower has %d on disk", b.N, end)
	}
}
