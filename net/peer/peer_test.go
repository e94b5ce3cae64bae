package peer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/cluster/replication"
	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/net/kafka"
	"github.com/moonmq/moonmq/net/peer"
)

// The ISR seam: the replication state machine is what a replicated
// partition takes, without an adapter (engine cannot import cluster).
var _ replica.ISR = (*replication.Leader)(nil)

// cluster is the metadata two hand-wired brokers share: the brokers and
// one topic whose leader the test moves. The controller is not involved:
// the test sets the roles itself, as the node's reconciler will.
type cluster struct {
	// The security metadata is not used by these tests (no ACL, SCRAM or
	// quota request is made): calling it panics.
	kafka.SecurityMetadata

	mu      sync.Mutex
	brokers []metadata.Broker
	topic   metadata.Topic
	pids    int64
}

func (c *cluster) Topic(name string) (metadata.Topic, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if name != c.topic.Name {
		return metadata.Topic{}, false
	}
	t := c.topic
	t.Partitions = slices.Clone(t.Partitions)
	return t, true
}

func (c *cluster) Topics() []metadata.Topic {
	t, _ := c.Topic(c.topic.Name)
	return []metadata.Topic{t}
}

func (c *cluster) Brokers() []metadata.Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.brokers)
}

func (c *cluster) setLeader(leader, epoch int32, isr ...int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &c.topic.Partitions[0]
	p.Leader, p.LeaderEpoch, p.ISR = leader, epoch, isr
	p.PartitionEpoch++
}

var errNotHere = errors.New("not in this test")

func (c *cluster) CreateTopic(context.Context, string, int32, int16, map[string]string, bool) (metadata.Topic, error) {
	return metadata.Topic{}, errNotHere
}
func (c *cluster) DeleteTopic(context.Context, string) (metadata.Topic, error) {
	return metadata.Topic{}, errNotHere
}
func (c *cluster) CreatePartitions(context.Context, string, int32, bool) (metadata.Topic, error) {
	return metadata.Topic{}, errNotHere
}
func (c *cluster) CreateTopicAssigned(context.Context, string, [][]int32, map[string]string, bool) (metadata.Topic, error) {
	return metadata.Topic{}, errNotHere
}
func (c *cluster) CreatePartitionsAssigned(context.Context, string, int32, [][]int32, bool) (metadata.Topic, error) {
	return metadata.Topic{}, errNotHere
}
func (c *cluster) AlterConfigs(context.Context, string, []metadata.ConfigOp, bool) (metadata.Topic, error) {
	return metadata.Topic{}, errNotHere
}
func (c *cluster) ReplaceConfigs(context.Context, string, map[string]string, bool) (metadata.Topic, error) {
	return metadata.Topic{}, errNotHere
}

// AllocateProducerIDs hands out blocks, so the producers of both brokers
// get distinct ids.
func (c *cluster) AllocateProducerIDs(_ context.Context, n int64) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := 1000 + c.pids
	c.pids += n
	return start, nil
}
func (c *cluster) ClusterID() string   { return "peer-test" }
func (c *cluster) ControllerID() int32 { return 1 }

// broker is one hand-wired broker: a replica manager and its Kafka
// listener.
type broker struct {
	id    int32
	parts *replica.Manager
	srv   *kafka.Server
	addr  string
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startBroker(t testing.TB, id int32, meta *cluster, ln net.Listener) *broker {
	t.Helper()
	m, err := replica.Open(replica.Options{DataDir: t.TempDir(), Logger: quiet()})
	require.NoError(t, err)
	srv, err := kafka.Listen(kafka.Options{Listener: ln, NodeID: id, Logger: quiet()}, meta, m)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.NoError(t, <-done)
		require.NoError(t, m.Close())
	})
	return &broker{id: id, parts: m, srv: srv, addr: ln.Addr().String()}
}

func listen(t testing.TB) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

func hostPort(t testing.TB, addr string) (string, int32) {
	h, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return h, int32(n)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

func fetcher(t testing.TB, node int32) *peer.Fetcher {
	t.Helper()
	f, err := peer.NewFetcher(peer.FetcherOptions{NodeID: node, Logger: quiet(), MaxWait: 100 * time.Millisecond,
		Backoff: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Close()) })
	return f
}

func leaderState(p *replica.Partition, replicas, isr []int32, leaderEpoch, partitionEpoch int32, minISR int) replication.LeaderState {
	return replication.LeaderState{Replicas: replicas, ISR: isr, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch,
		MinISR: minISR, LogEnd: p.CommittedEnd(), HighWatermark: p.HighWatermark()}
}

func produce(t *testing.T, cl *kgo.Client, values ...string) []*kgo.Record {
	t.Helper()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: "t", Value: []byte(v)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	return recs
}

// TestReplication runs two brokers with a follower fetcher: acks=all is
// answered only once the follower has the records on disk; a follower
// refuses consumers with the leader named; an ISR below
// min.insync.replicas refuses acks=all; after a leader change the old
// leader's divergent tail is truncated through OffsetForLeaderEpoch and it
// catches up byte for byte.
func TestReplication(t *testing.T) {
	meta, a, b := pair(t)
	tp := replica.TopicPartition{Topic: "t", Partition: 0}
	partA, partB := hosted(t, a, tp), hosted(t, b, tp)
	_, pA := hostPort(t, a.addr)

	// Epoch 1: A leads with ISR {1, 2}, min.insync.replicas 2; B follows.
	leaderA := replication.New(1, 30*time.Second)
	require.NoError(t, leaderA.Become(time.Now(), leaderState(partA, []int32{1, 2}, []int32{1, 2}, 1, 1, 2)))
	require.NoError(t, partA.BecomeLeader(1, leaderA))
	require.NoError(t, partB.BecomeFollower(1, 1))
	fB := fetcher(t, 2)
	require.NoError(t, fB.Follow(tp, 1, a.addr, 1, partB))

	cl, err := kgo.NewClient(kgo.SeedBrokers(a.addr), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.RecordRetries(3))
	require.NoError(t, err)
	defer cl.Close()
	for i := range 20 {
		recs := produce(t, cl, "v"+strconv.Itoa(i))
		require.GreaterOrEqual(t, partB.CommittedEnd(), recs[0].Offset+1,
			"record %d acknowledged before the follower had it on disk", recs[0].Offset)
	}
	eventually(t, "the follower to learn the HW", func() bool { return partB.HighWatermark() == 20 })

	// An idempotent batch, replicated: after the failover below, its
	// retry to the new leader is recognised.
	idem := produceBatch(t, a.addr, 11, -1, recordBatch(77, 0, "idem")).Topics[0].Partitions[0]
	require.NoError(t, kerr.ErrorForCode(idem.ErrorCode))
	require.Equal(t, int64(20), idem.BaseOffset)
	eventually(t, "the follower to learn the HW", func() bool { return partB.HighWatermark() == 21 })

	// A follower refuses consumers and names the leader (Fetch v12).
	fr := fetchRaw(t, b.addr, 12, -1, 0, -1)
	require.Equal(t, kerr.NotLeaderForPartition.Code, fr.ErrorCode)
	require.Equal(t, int32(1), fr.CurrentLeader.LeaderID)
	require.Equal(t, int32(1), fr.CurrentLeader.LeaderEpoch)
	// A broker the ISR does not know is refused as Kafka does.
	require.Equal(t, kerr.NotLeaderForPartition.Code, fetchRaw(t, a.addr, 12, 9, 0, 1).ErrorCode)
	require.Equal(t, kerr.FencedLeaderEpoch.Code, fetchRaw(t, a.addr, 12, 2, 0, 0).ErrorCode)

	// B stops fetching; A's lag check drops it (the controller accepting
	// the shrink is played by the test), and acks=all is refused.
	fB.Unfollow(tp)
	acks1, err := kgo.NewClient(kgo.SeedBrokers(a.addr), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer acks1.Close()
	produce(t, acks1, "lag-1") // acks=1: the leader's fsync is enough
	partA.UpdateISR(func() {
		require.NoError(t, leaderA.Tick(time.Now().Add(time.Minute)))
		change, ok := leaderA.Pending()
		require.True(t, ok, "the lag check proposes a shrink")
		require.Equal(t, []int32{1}, change.ISR)
		require.NoError(t, leaderA.AlterPartitionResult(replication.Result{Accepted: true, ISR: change.ISR,
			LeaderEpoch: 1, PartitionEpoch: 2}))
	})
	meta.setLeader(1, 1, 1)
	require.Equal(t, kerr.NotEnoughReplicas.Code, produceRaw(t, a.addr, 11, -1).Topics[0].Partitions[0].ErrorCode)
	// A follower refuses produces and names the leader (Produce v10+).
	presp := produceRaw(t, b.addr, 11, -1)
	pr := presp.Topics[0].Partitions[0]
	require.Equal(t, kerr.NotLeaderForPartition.Code, pr.ErrorCode)
	require.Equal(t, int32(1), pr.CurrentLeader.LeaderID)
	require.Len(t, presp.Brokers, 1, "NodeEndpoints names the leader")
	require.Equal(t, pA, presp.Brokers[0].Port)

	// A takes writes alone (min.insync.replicas 1): a tail B never gets.
	partA.UpdateISR(func() {
		require.NoError(t, leaderA.Become(time.Now(), leaderState(partA, []int32{1, 2}, []int32{1}, 1, 3, 1)))
	})
	produce(t, cl, "lost-1", "lost-2", "lost-3")
	_, endA := partA.Bounds()
	require.Equal(t, int64(25), endA)
	_, endB := partB.Bounds()
	require.Equal(t, int64(21), endB)

	// Epoch 2: B leads (its ISR {2}), A follows and must cut its tail.
	leaderB := replication.New(2, 30*time.Second)
	require.NoError(t, leaderB.Become(time.Now(), leaderState(partB, []int32{1, 2}, []int32{2}, 2, 4, 1)))
	require.NoError(t, partB.BecomeLeader(2, leaderB))
	require.NoError(t, partA.BecomeFollower(2, 2))
	partA.UpdateISR(func() { leaderA.Resign() })
	meta.setLeader(2, 2, 2)
	epoch, end := offsetForEpoch(t, b.addr, 1, 2)
	require.Equal(t, int32(1), epoch)
	require.Equal(t, int64(21), end, "the new leader's epoch 1 ends where its log did")
	retry := produceBatch(t, b.addr, 11, -1, recordBatch(77, 0, "idem")).Topics[0].Partitions[0]
	require.NoError(t, kerr.ErrorForCode(retry.ErrorCode))
	require.Equal(t, int64(20), retry.BaseOffset, "a producer retrying against the new leader is deduplicated")

	fA := fetcher(t, 1)
	require.NoError(t, fA.Follow(tp, 2, b.addr, 2, partA))
	clB, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer clB.Close()
	produce(t, clB, "after-1", "after-2")
	eventually(t, "the old leader to truncate and catch up", func() bool {
		_, e := partA.Bounds()
		return partA.CommittedEnd() == 23 && e == 23
	})
	logA, err := partA.ReadToEnd(0, 1<<20)
	require.NoError(t, err)
	logB, err := partB.ReadToEnd(0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, logB, logA, "the follower's log is the leader's, byte for byte")
	require.NotContains(t, string(logA), "lost-", "the divergent tail is gone")
	require.NotContains(t, string(logA), "lag-", "the divergent tail is gone")

	// Caught up, A is proposed back into the ISR.
	eventually(t, "A to be proposed for the ISR", func() bool {
		var ok bool
		partB.UpdateISR(func() {
			var c replication.Change
			if c, ok = leaderB.Pending(); ok {
				require.Equal(t, []int32{1, 2}, c.ISR)
			}
		})
		return ok
	})
}

// pair starts brokers 1 (A) and 2 (B) sharing the metadata of topic t,
// one partition with replicas {1, 2}, led by 1 in epoch 1.
func pair(t testing.TB) (*cluster, *broker, *broker) {
	t.Helper()
	lnA, lnB := listen(t), listen(t)
	hA, pA := hostPort(t, lnA.Addr().String())
	hB, pB := hostPort(t, lnB.Addr().String())
	meta := &cluster{
		brokers: []metadata.Broker{{ID: 1, Host: hA, Port: pA}, {ID: 2, Host: hB, Port: pB}},
		topic: metadata.Topic{Name: "t", ID: [16]byte{1}, Partitions: []metadata.Partition{
			{ID: 0, Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2}, PartitionEpoch: 1}}},
	}
	return meta, startBroker(t, 1, meta, lnA), startBroker(t, 2, meta, lnB)
}

func hosted(t testing.TB, b *broker, tp replica.TopicPartition) *replica.Partition {
	t.Helper()
	p, err := b.parts.EnsurePartition(tp, nil)
	require.NoError(t, err)
	return p
}

// produceRaw sends one record with acks and returns the answer.
func produceRaw(t *testing.T, addr string, version int16, acks int16) *kmsg.ProduceResponse {
	t.Helper()
	return produceBatch(t, addr, version, acks, recordBatch(-1, -1, "raw"))
}

func produceBatch(t *testing.T, addr string, version int16, acks int16, records []byte) *kmsg.ProduceResponse {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return raw(t, addr, req).(*kmsg.ProduceResponse)
}

// recordBatch encodes one record in a v2 batch, as a producer does
// (idempotent with pid >= 0).
func recordBatch(pid int64, seq int32, v string) []byte {
	epoch := int16(-1)
	if pid >= 0 {
		epoch = 0
	}
	now := time.Now().UnixMilli()
	return batch.Build(batch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, FirstTimestamp: now,
		MaxTimestamp: now}, []batch.Record{{Value: []byte(v)}})
}

// raw sends one request to addr and returns the answer.
func raw(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := cl.Broker(int(seedID(0))).Request(ctx, req)
	require.NoError(t, err)
	return resp
}

// seedID is the id kgo gives its first seed broker.
func seedID(i int32) int32 { return -2147483648 + i }

func fetchRaw(t *testing.T, addr string, version int16, replicaID int32, offset int64, epoch int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxBytes = version, replicaID, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = offset, 1<<20, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := raw(t, addr, req).(*kmsg.FetchResponse)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0]
}

func offsetForEpoch(t *testing.T, addr string, epoch, current int32) (int32, int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version, req.ReplicaID = 4, -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.LeaderEpoch, rp.CurrentLeaderEpoch = epoch, current
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := raw(t, addr, req).(*kmsg.OffsetForLeaderEpochResponse)
	p := resp.Topics[0].Partitions[0]
	require.NoError(t, kerr.ErrorForCode(p.ErrorCode))
	return p.LeaderEpoch, p.EndOffset
}
