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
