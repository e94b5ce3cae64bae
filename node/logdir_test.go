package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/vfs"
	"github.com/moonmq/moonmq/internal/syncbuf"
	"github.com/moonmq/moonmq/net/peer"
)

// freeAddrs returns n distinct free 127.0.0.1 ports, free for UDP too
// (memberlist binds both on its port). They are held until all are
// chosen, so none is handed out twice; the nodes bind them right after.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var held []io.Closer
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	var out []string
	for len(out) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		held = append(held, ln)
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		if err != nil {
			continue // the UDP port is taken: keep the TCP one held, try another
		}
		held = append(held, pc)
		out = append(out, ln.Addr().String())
	}
	return out
}

// startPair opens two clustered nodes in-process (ids 1 and 2, each a
// raft voter), node 1's partition logs on fs, and waits until both are
// ready. Their logs are shown if the test fails.
func startPair(t *testing.T, fs vfs.FS) [2]*Node {
	t.Helper()
	addrs := freeAddrs(t, 4) // raft 1, raft 2, gossip 1, gossip 2
	peers := []Peer{{1, addrs[0]}, {2, addrs[1]}}
	var nodes [2]*Node
	for i := range nodes {
		id := int32(i + 1)
		logs := &syncbuf.Buffer{}
		cfg := testConfig(t, t.TempDir())
		cfg.NodeID = id
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		cfg.Cluster = ClusterConfig{Peers: peers, GossipListen: addrs[2+i], Join: []string{addrs[2+(1-i)]}}
		if id == 1 {
			cfg.partitionFS = fs
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := Open(ctx, cfg)
		cancel()
		require.NoError(t, err)
		nodes[i] = n
		t.Cleanup(func() {
			n.Close()
			if t.Failed() {
				t.Logf("node %d log:\n%s", id, logs.Tail(60))
			}
		})
	}
	for i, n := range nodes {
		select {
		case <-n.Ready():
		case <-time.After(30 * time.Second):
			t.Fatalf("node %d not ready", i+1)
		}
	}
	return nodes
}

// partitionView is one partition as a node's Metadata answer has it.
type partitionView struct {
	leader, epoch    int32
	isr, offline     []int32
	errorCode        int16
	unknownPartition bool
}

func (v partitionView) String() string {
	return fmt.Sprintf("leader %d (epoch %d), isr %v, offline %v, error %d", v.leader, v.epoch, v.isr, v.offline, v.errorCode)
}

// metadataOf asks node id (through cl) for partition 0 of topic.
func metadataOf(ctx context.Context, cl *kgo.Client, id int32, topic string) (partitionView, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return partitionView{}, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return partitionView{unknownPartition: true}, nil
	}
	p := resp.Topics[0].Partitions[0]
	isr, offline := slices.Clone(p.ISR), slices.Clone(p.OfflineReplicas)
	slices.Sort(isr)
	slices.Sort(offline)
	return partitionView{leader: p.Leader, epoch: p.LeaderEpoch, isr: isr, offline: offline, errorCode: p.ErrorCode}, nil
}

// waitFor polls cond until it holds or the deadline passes; cond says
// what it saw, for the failure message.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, seen := cond()
		if ok {
			return
		}
		last = seen
		select {
		case <-time.After(20 * time.Millisecond): // the polling interval, not a wait for state
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		}
	}
	t.Fatalf("%s: not within %v; last seen: %s", what, timeout, last)
}

// A disk error on one replica takes that replica out, never the
// partition: when the leader's log fails (topic failed), or its replica
// cannot even be opened (topic unopened), its node reports the replica
// offline, the controller moves the leadership to the other ISR member
// and takes it out of the ISR, every node's Metadata says so (the failed
// node too: it names the new leader), and writes go on. Once the disk
// works again the replica heals (or opens), is reported online, catches
// up from the new leader and rejoins the ISR with every acknowledged
// record.
func TestReplicaStorageFailureMovesLeadership(t *testing.T) {
	const failed, unopened = "failed", "unopened"
	faults := vfs.NewFaults(vfs.OS)
	var broken atomic.Bool
	faults.SetInjector(func(_ vfs.Op, path string) error {
		if broken.Load() && (strings.Contains(path, "/"+failed+"-0") || strings.Contains(path, "/"+unopened+"-0")) {
			return syscall.EIO
		}
		return nil
	})
	nodes := startPair(t, faults)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	configs := map[string]string{"min.insync.replicas": "1"}
	_, err := nodes[0].ctrl.CreateTopicAssigned(ctx, failed, [][]int32{{1, 2}}, configs, false)
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[0].Addr().String(), nodes[1].Addr().String()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	require.NoError(t, err)
	defer cl.Close()
	produced := map[string]int{}
	produce := func(topic, what string, n int) {
		t.Helper()
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", what, i)}
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr(), "%s: %s", topic, what)
		produced[topic] += n
	}
	// seen is partition 0 of topic as both nodes' Metadata answer it, when
	// they agree.
	seen := func(topic string) (partitionView, string) {
		var views [2]partitionView
		for i := range views {
			v, err := metadataOf(ctx, cl, int32(i+1), topic)
			if err != nil {
				return partitionView{}, fmt.Sprintf("node %d: %v", i+1, err)
			}
			views[i] = v
		}
		if views[0].String() != views[1].String() {
			return partitionView{}, fmt.Sprintf("node 1: %s; node 2: %s", views[0], views[1])
		}
		return views[0], views[0].String()
	}
	waitFor(t, 20*time.Second, "leader 1 with both replicas in sync", func() (bool, string) {
		v, s := seen(failed)
		return v.leader == 1 && slices.Equal(v.isr, []int32{1, 2}), s
	})
	produce(failed, "before", 5)
	v, _ := seen(failed)
	epochs := map[string]int32{failed: v.epoch, unopened: 0} // before the failure

	// Node 1's disk fails: the next append to its log fails, and the
	// producer's retries find the new leader. A topic created meanwhile
	// cannot be opened on node 1, which the metadata makes its leader.
	broken.Store(true)
	produce(failed, "during", 5)
	_, err = nodes[1].ctrl.CreateTopicAssigned(ctx, unopened, [][]int32{{1, 2}}, configs, false)
	require.NoError(t, err)
	for _, topic := range []string{failed, unopened} {
		waitFor(t, 20*time.Second, topic+": leadership on 2, replica 1 offline and out of the ISR, on both nodes", func() (bool, string) {
			v, s := seen(topic)
			return v.leader == 2 && v.epoch > epochs[topic] && slices.Equal(v.isr, []int32{2}) && slices.Equal(v.offline, []int32{1}) &&
				v.errorCode == 0, s
		})
		mt, _ := nodes[1].ctrl.Topic(topic)
		require.Equal(t, []int32{1}, mt.Partitions[0].Offline, topic)
		require.Error(t, nodes[0].broker.StorageFailure(replica.TopicPartition{Topic: topic}), "%s: node 1's replica still fails", topic)
		produce(topic, "failed-over", 5)
	}

	// The disk works again: the healer brings the replicas back, they are
	// reported online, catch up and rejoin the ISR.
	broken.Store(false)
	for _, topic := range []string{failed, unopened} {
		waitFor(t, 30*time.Second, topic+": replica 1 online, caught up and back in the ISR", func() (bool, string) {
			v, s := seen(topic)
			if !slices.Equal(v.isr, []int32{1, 2}) || len(v.offline) != 0 || v.leader < 0 {
				return false, s
			}
			ends := [2]int64{}
			for i, n := range nodes {
				p, err := n.broker.Partition(replica.TopicPartition{Topic: topic})
				if err != nil {
					return false, fmt.Sprintf("%s; node %d: %v", s, i+1, err)
				}
				_, ends[i] = p.Bounds()
			}
			return ends[0] == int64(produced[topic]) && ends[1] == int64(produced[topic]), fmt.Sprintf("%s; log ends %v of %d", s, ends, produced[topic])
		})
		mt, _ := nodes[1].ctrl.Topic(topic)
		require.Nil(t, mt.Partitions[0].Offline, topic)
		require.NoError(t, nodes[0].broker.StorageFailure(replica.TopicPartition{Topic: topic}), topic)
		produce(topic, "after", 3)
	}
}

// fakeStorage is the replica manager's storage state, as a test sets it.
type fakeStorage struct {
	mu     sync.Mutex
	failed map[replica.TopicPartition]error
}

func (f *fakeStorage) StorageFailure(tp replica.TopicPartition) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed[tp]
}

func (f *fakeStorage) set(tp replica.TopicPartition, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed[tp] = err
}

// storageReport is one ReportReplicaStorage call the fake controller took;
// the test answers it.
type storageReport struct {
	offline bool
	answer  chan reportAnswer
}

type reportAnswer struct {
	p   metadata.Partition
	err error
}

type fakeReporter struct {
	fakeAlterer
	calls chan storageReport
}

func (f *fakeReporter) ReportReplicaStorage(ctx context.Context, _ int32, _ string, _ [16]byte, _ int32, offline bool) (metadata.Partition, error) {
	r := storageReport{offline: offline, answer: make(chan reportAnswer, 1)}
	f.calls <- r
	select {
	case a := <-r.answer:
		return a.p, a.err
	case <-ctx.Done():
		return metadata.Partition{}, ctx.Err()
	}
}

// The replicator reports a replica's storage when it differs from what
// the metadata says, one report at a time, sends it again after a failure,
// does not send it again once the controller answered (while the
// reconciler has not applied the change yet), and reports it online once
// it serves again.
func TestReplicatorReportsStorage(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	fetcher, err := peer.NewFetcher(peer.FetcherOptions{NodeID: 1, Logger: logger})
	require.NoError(t, err)
	ctrl := &fakeReporter{calls: make(chan storageReport, 4)}
	storage := &fakeStorage{failed: map[replica.TopicPartition]error{}}
	r := newReplicator(1, ctrl, storage, fetcher, nil, logger)
	t.Cleanup(r.close)
	tp := replica.TopicPartition{Topic: "t", Partition: 0}
	mp := metadata.Partition{Replicas: []int32{1, 2}, Leader: 2, LeaderEpoch: 3, ISR: []int32{1, 2}, PartitionEpoch: 5}
	r.track(tp, [16]byte{1}, mp)
	none := func(what string) {
		t.Helper()
		r.checkStorage()
		r.mu.Lock()
		h := r.hosted[tp]
		reporting := h != nil && h.reporting
		r.mu.Unlock()
		require.False(t, reporting, what)
		select {
		case c := <-ctrl.calls:
			t.Fatalf("%s: a report was sent (offline %v)", what, c.offline)
		default:
		}
	}
	next := func() storageReport {
		t.Helper()
		r.checkStorage()
		select {
		case c := <-ctrl.calls:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no report sent")
			return storageReport{}
		}
	}
	answer := func(c storageReport, a reportAnswer) {
		c.answer <- a
		r.wg.Wait() // the report's goroutine took the answer
	}

	none("healthy, and the metadata agrees")

	storage.set(tp, errors.New("EIO"))
	c := next()
	require.True(t, c.offline)
	r.checkStorage() // one in flight: no other
	select {
	case <-ctrl.calls:
		t.Fatal("a second report while one is out")
	default:
	}
	answer(c, reportAnswer{err: metadata.ErrNotController})
	c = next()
	require.True(t, c.offline, "sent again after a failure")
	offline := mp.Clone()
	offline.Offline, offline.ISR, offline.PartitionEpoch = []int32{1}, []int32{2}, 6
	answer(c, reportAnswer{p: offline})
	none("the answer says offline")
	r.track(tp, [16]byte{1}, mp)
	none("an older state from a reconciler that is behind")
	r.track(tp, [16]byte{1}, offline)
	none("the reconciler caught up")

	storage.set(tp, nil)
	c = next()
	require.False(t, c.offline)
	online := offline.Clone()
	online.Offline, online.PartitionEpoch = nil, 7
	answer(c, reportAnswer{p: online})
	none("online, and the metadata agrees")

	r.forget(tp)
	storage.set(tp, errors.New("EIO"))
	none("no longer hosted here")
}
