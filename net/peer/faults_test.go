package peer_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/cluster/replication"
	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/net/peer"
)

// A follower whose next offset the leader has deleted restarts empty at
// the leader's log start, then replicates from there.
func TestFollowerRestartsAtTheLeadersLogStart(t *testing.T) {
	_, a, b := pair(t)
	tp := replica.TopicPartition{Topic: "t", Partition: 0}
	partA, partB := hosted(t, a, tp), hosted(t, b, tp)
	leaderA := replication.New(1, 30*time.Second)
	require.NoError(t, leaderA.Become(time.Now(), leaderState(partA, []int32{1, 2}, []int32{1}, 1, 1, 1)))
	require.NoError(t, partA.BecomeLeader(1, leaderA))
	for range 10 {
		r := produceRaw(t, a.addr, 11, -1).Topics[0].Partitions[0]
		require.NoError(t, kerr.ErrorForCode(r.ErrorCode))
	}
	_, err := partA.DeleteRecords(8)
	require.NoError(t, err)

	require.NoError(t, partB.BecomeFollower(1, 1))
	require.NoError(t, fetcher(t, 2).Follow(tp, 1, a.addr, 1, partB))
	eventually(t, "the follower to restart at 8 and catch up", func() bool {
		start, end := partB.Bounds()
		return start == 8 && end == 10 && partB.CommittedEnd() == 10
	})
}

// proxy forwards connections to target until cut, which drops every
// connection it carries.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{ln: listen(t), target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		p.ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(u, c); u.Close() }()
		go func() { defer p.wg.Done(); _, _ = io.Copy(c, u); c.Close() }()
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A follower whose connection to the leader breaks reconnects and keeps
// replicating: acks=all goes on being answered.
func TestFollowerReconnects(t *testing.T) {
	_, a, b := pair(t)
	tp := replica.TopicPartition{Topic: "t", Partition: 0}
	partA, partB := hosted(t, a, tp), hosted(t, b, tp)
	leaderA := replication.New(1, 30*time.Second)
	require.NoError(t, leaderA.Become(time.Now(), leaderState(partA, []int32{1, 2}, []int32{1, 2}, 1, 1, 2)))
	require.NoError(t, partA.BecomeLeader(1, leaderA))
	require.NoError(t, partB.BecomeFollower(1, 1))
	px := newProxy(t, a.addr)
	f, err := peer.NewFetcher(peer.FetcherOptions{NodeID: 2, Logger: quiet(), MaxWait: 100 * time.Millisecond,
		Backoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Follow(tp, 1, px.ln.Addr().String(), 1, partB))

	cl, err := kgo.NewClient(kgo.SeedBrokers(a.addr), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer cl.Close()
	for i := range 3 {
		produce(t, cl, "before")
		px.cut()
		recs := produce(t, cl, "after")
		require.Equal(t, int64(2*i+1), recs[0].Offset)
		require.GreaterOrEqual(t, partB.CommittedEnd(), recs[0].Offset+1)
	}
	require.Equal(t, map[replica.TopicPartition]int32{tp: 1}, f.Following())
	f.Unfollow(tp)
	require.Empty(t, f.Following())
}

// KIP-279's second round: the follower's latest epoch (3) is unknown to
// the leader, whose largest epoch below it (2) the follower never had; the
// follower cuts to where its own epoch 1 ends and asks about epoch 1,
// which the leader ended earlier: it truncates there and replicates the
// leader's epoch 2, ending byte for byte like the leader.
func TestTruncationAsksAgainWithAnOlderEpoch(t *testing.T) {
	_, a, b := pair(t)
	tp := replica.TopicPartition{Topic: "t", Partition: 0}
	partA, partB := hosted(t, a, tp), hosted(t, b, tp)
	appendAs := func(epoch int32, n int) {
		require.NoError(t, partA.BecomeLeader(epoch, nil))
		for range n {
			res, err := partA.Append(recordBatch(-1, -1, "leader"))
			require.NoError(t, err)
			require.NoError(t, partA.WaitDurable(t.Context(), res))
		}
	}
	appendAs(1, 8)
	common, err := partA.ReadToEnd(0, 1<<20)
	require.NoError(t, err)
	appendAs(2, 4)

	require.NoError(t, partB.BecomeFollower(3, 1))
	stale := func(base int64, epoch int32) []byte {
		b := recordBatch(-1, -1, "stale")
		batch.SetBaseOffset(b, base)
		batch.SetPartitionLeaderEpoch(b, epoch)
		return b
	}
	var tail []byte
	for off := int64(8); off < 10; off++ {
		tail = append(tail, stale(off, 1)...)
	}
	for off := int64(10); off < 14; off++ {
		tail = append(tail, stale(off, 3)...)
	}
	res, err := partB.AppendAsFollower(append(append([]byte(nil), common...), tail...))
	require.NoError(t, err)
	require.NoError(t, partB.WaitDurable(t.Context(), res))

	leaderA := replication.New(1, 30*time.Second)
	require.NoError(t, leaderA.Become(time.Now(), leaderState(partA, []int32{1, 2}, []int32{1}, 4, 1, 1)))
	require.NoError(t, partA.BecomeLeader(4, leaderA))
	require.NoError(t, partB.BecomeFollower(4, 1))
	require.NoError(t, fetcher(t, 2).Follow(tp, 1, a.addr, 4, partB))
	want, err := partA.ReadToEnd(0, 1<<20)
	require.NoError(t, err)
	eventually(t, "the follower to match the leader", func() bool {
		got, err := partB.ReadToEnd(0, 1<<20)
		return err == nil && string(got) == string(want)
	})
	latest, ok := partB.LatestEpoch()
	require.True(t, ok)
	require.Equal(t, int32(2), latest, "the follower's epoch 3 is gone")
}
