package controller

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/topicconfig"
)

// fakeLiveness is the Liveness the tests set by hand; it reports an
// incarnation for the brokers given one (IncarnationLiveness).
type fakeLiveness struct {
	mu   sync.Mutex
	down map[int32]bool
	inc  map[int32]string
}

func (f *fakeLiveness) Incarnation(id int32) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	inc, ok := f.inc[id]
	return inc, ok
}

func (f *fakeLiveness) setIncarnation(id int32, inc string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inc == nil {
		f.inc = map[int32]string{}
	}
	f.inc[id] = inc
}

func (f *fakeLiveness) Alive(id int32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.down[id]
}

func (f *fakeLiveness) set(id int32, alive bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down == nil {
		f.down = map[int32]bool{}
	}
	f.down[id] = !alive
}

// testCluster is n controllers in-process, each on its own loopback TCP
// listener, sharing a fake liveness.
type testCluster struct {
	t     *testing.T
	peers []Peer
	dirs  []string
	live  *fakeLiveness
	nodes []*Controller // index id-1; nil while stopped
	mod   func(*Options)
}

func newTestCluster(t *testing.T, n int, mod func(*Options)) *testCluster {
	tc, lns := listenCluster(t, n, mod)
	for i := range n {
		tc.start(int32(i+1), lns[i])
	}
	return tc
}

// listenCluster binds the listeners of n nodes and starts none.
func listenCluster(t *testing.T, n int, mod func(*Options)) (*testCluster, []net.Listener) {
	tc := &testCluster{t: t, live: &fakeLiveness{}, nodes: make([]*Controller, n), mod: mod}
	lns := make([]net.Listener, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns[i] = ln
		tc.peers = append(tc.peers, Peer{ID: int32(i + 1), Addr: ln.Addr().String()})
		tc.dirs = append(tc.dirs, filepath.Join(t.TempDir(), "meta"))
	}
	return tc, lns
}

func (tc *testCluster) options(id int32, ln net.Listener) Options {
	o := Options{
		Dir: tc.dirs[id-1], NodeID: id, Logger: testLogger(),
		Host: "127.0.0.1", Port: 9000 + id,
		Peers: tc.peers, ClusterListener: ln, Liveness: tc.live,
		SessionTimeout: time.Second, LivenessInterval: 20 * time.Millisecond, LeaderRebalanceInterval: -1,
	}
	if tc.mod != nil {
		tc.mod(&o)
	}
	return o
}

// start opens node id; ln nil: listen on its peers address again.
func (tc *testCluster) start(id int32, ln net.Listener) {
	t := tc.t
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", tc.peers[id-1].Addr)
		require.NoError(t, err)
	}
	c, err := Open(testCtx(t), tc.options(id, ln))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	tc.nodes[id-1] = c
}

func (tc *testCluster) stop(id int32) {
	require.NoError(tc.t, tc.nodes[id-1].Close())
	tc.nodes[id-1] = nil
}

// crash stops node id the way a crash does: Raft stops without handing
// the leadership over, its connections drop.
func (tc *testCluster) crash(id int32) {
	c := tc.nodes[id-1]
	c.mux.abortRaft()
	require.NoError(tc.t, c.raft.Shutdown().Error())
	tc.stop(id)
}

func (tc *testCluster) awaitReady() {
	for _, c := range tc.nodes {
		if c == nil {
			continue
		}
		select {
		case <-c.Ready():
		case <-testCtx(tc.t).Done():
			tc.t.Fatalf("node %d not ready", c.NodeID())
		}
	}
}

// leader waits until the running nodes agree on an active controller.
func (tc *testCluster) leader() *Controller {
	var l *Controller
	require.Eventually(tc.t, func() bool {
		l = nil
		id := int32(-1)
		for _, c := range tc.nodes {
			if c == nil {
				continue
			}
			if c.ControllerID() < 0 || (id >= 0 && c.ControllerID() != id) {
				return false
			}
			id = c.ControllerID()
			if c.IsLeader() {
				l = c
			}
		}
		return l != nil
	}, 20*time.Second, 10*time.Millisecond)
	return l
}

func (tc *testCluster) follower() *Controller {
	l := tc.leader()
	for _, c := range tc.nodes {
		if c != nil && c != l {
			return c
		}
	}
	tc.t.Fatal("no follower")
	return nil
}

func TestMultiNodeForwardingFailoverAndFencing(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.awaitReady()
	for _, c := range tc.nodes {
		require.NotEmpty(t, c.ClusterID(), "a ready node knows the cluster id")
	}
	ctx := testCtx(t)
	l, f := tc.leader(), tc.follower()
	for _, c := range tc.nodes {
		require.Eventually(t, func() bool { return len(c.Brokers()) == 3 }, 10*time.Second, 5*time.Millisecond,
			"every node registered, seen from node %d", c.NodeID())
		require.Equal(t, l.ClusterID(), c.ClusterID())
		require.NotEmpty(t, c.ClusterID())
	}

	// Writes on a follower are forwarded, and the follower's own state has
	// them when the call returns.
	top, err := f.CreateTopic(ctx, "t", 6, 3, map[string]string{topicconfig.RetentionMs: "1000"}, false)
	require.NoError(t, err)
	require.Len(t, top.Partitions, 6)
	got, ok := f.Topic("t")
	require.True(t, ok)
	require.Equal(t, top, got)
	leaders := map[int32]int{}
	for _, p := range top.Partitions {
		require.Len(t, p.ISR, 3)
		leaders[p.Leader]++
	}
	require.Equal(t, map[int32]int{1: 2, 2: 2, 3: 2}, leaders, "leaders spread")

	// Errors keep their sentinels across the trip.
	_, err = f.CreateTopic(ctx, "t", 1, 1, nil, false)
	require.ErrorIs(t, err, metadata.ErrTopicExists)
	_, err = f.CreateTopic(ctx, "u", 1, 4, nil, false)
	require.ErrorIs(t, err, metadata.ErrInvalidReplicationFactor)
	_, err = f.AlterConfigs(ctx, "t", []metadata.ConfigOp{{Key: "no.such.key", Op: metadata.OpSet, Value: "1"}}, false)
	require.ErrorIs(t, err, metadata.ErrInvalidConfig)
	require.ErrorIs(t, err, topicconfig.ErrInvalid)
	_, err = f.DeleteTopic(ctx, "nope")
	require.ErrorIs(t, err, metadata.ErrUnknownTopic)
	_, err = f.CreatePartitions(ctx, "t", 8, false)
	require.NoError(t, err)
	top, _ = f.Topic("t")
	require.Len(t, top.Partitions, 8)

	a, err := f.AllocateProducerIDs(ctx, 10)
	require.NoError(t, err)
	b, err := l.AllocateProducerIDs(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, a+10, b, "one counter for the cluster")

	// AlterPartition from a follower: shrink, then a stale proposal loses.
	p0 := top.Partitions[0]
	req := metadata.AlterPartitionRequest{Topic: "t", TopicID: top.ID, Partition: 0, LeaderID: p0.Leader,
		LeaderEpoch: p0.LeaderEpoch, PartitionEpoch: p0.PartitionEpoch, NewISR: []int32{p0.Leader}}
	np, err := f.AlterPartition(ctx, req)
	require.NoError(t, err)
	require.Equal(t, []int32{p0.Leader}, np.ISR)
	require.Equal(t, p0.PartitionEpoch+1, np.PartitionEpoch)
	now, _ := f.Topic("t")
	require.Equal(t, np, now.Partitions[0], "applied on the caller when it returns")
	_, err = f.AlterPartition(ctx, req)
	require.ErrorIs(t, err, metadata.ErrInvalidUpdateVersion)
	req.PartitionEpoch, req.NewISR = np.PartitionEpoch, p0.Replicas
	np, err = f.AlterPartition(ctx, req)
	require.NoError(t, err)
	require.ElementsMatch(t, p0.Replicas, np.ISR)

	// The active controller crashes: another takes over, and once the session
	// timeout passes without it the dead broker is fenced and its
	// leaderships move with a new leader epoch.
	before, _ := f.Topic("t")
	dead := l.NodeID()
	tc.live.set(dead, false)
	killed := time.Now()
	tc.crash(dead)
	nl := tc.leader()
	require.NotEqual(t, dead, nl.NodeID())
	t.Logf("new active controller %d after %v", nl.NodeID(), time.Since(killed))
	require.Eventually(t, func() bool { return brokerOf(nl, dead).Fenced }, 20*time.Second, 10*time.Millisecond)
	t.Logf("broker %d fenced after %v (session timeout %v)", dead, time.Since(killed), nl.opts.SessionTimeout)
	for _, c := range tc.nodes {
		if c == nil {
			continue
		}
		require.Eventually(t, func() bool { return brokerOf(c, dead).Fenced }, 10*time.Second, 10*time.Millisecond)
		after, _ := c.Topic("t")
		for i, p := range after.Partitions {
			require.NotEqual(t, dead, p.Leader, "partition %d", i)
			require.NotContains(t, p.ISR, dead, "partition %d", i)
			if before.Partitions[i].Leader == dead {
				require.Equal(t, before.Partitions[i].LeaderEpoch+1, p.LeaderEpoch, "partition %d", i)
			}
			require.Greater(t, p.PartitionEpoch, before.Partitions[i].PartitionEpoch, "partition %d", i)
		}
	}

	// Writes still work, from the remaining follower too.
	f = tc.follower()
	after, err := f.CreateTopic(ctx, "after", 4, 2, nil, false)
	require.NoError(t, err)
	for _, p := range after.Partitions {
		require.NotContains(t, p.Replicas, dead, "new replicas go to live brokers only")
	}
	_, err = f.CreateTopic(ctx, "too-wide", 1, 3, nil, false)
	require.ErrorIs(t, err, metadata.ErrInvalidReplicationFactor, "two live brokers")

	// The dead node returns: it registers and is unfenced.
	tc.live.set(dead, true)
	tc.start(dead, nil)
	tc.awaitReady()
	back := tc.nodes[dead-1]
	require.False(t, brokerOf(back, dead).Fenced)
	_, ok = back.Topic("after")
	require.True(t, ok, "the returning node caught up")
}

func TestControlledShutdown(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.awaitReady()
	ctx := testCtx(t)
	f := tc.follower()
	_, err := f.CreateTopic(ctx, "t", 6, 2, nil, false)
	require.NoError(t, err)

	victim := f.NodeID()
	require.NoError(t, f.ControlledShutdown(ctx, victim))
	require.True(t, brokerOf(f, victim).Fenced, "applied on the caller when it returns")
	top, _ := f.Topic("t")
	for _, p := range top.Partitions {
		require.NotEqual(t, victim, p.Leader)
		require.NotContains(t, p.ISR, victim)
	}
	require.ErrorIs(t, f.ControlledShutdown(ctx, 42), metadata.ErrBrokerNotAvailable)

	// Still reachable while it stops: not unfenced for that. Two rounds of
	// the active controller's loop saw it alive after the shutdown (the
	// loop commits a round's changes before the next round observes).
	l := tc.leader()
	lastAlive := func() time.Time {
		l.tmu.Lock()
		defer l.tmu.Unlock()
		return l.tracker.lastAlive[victim]
	}
	t1 := time.Now()
	require.Eventually(t, func() bool { return lastAlive().After(t1) }, 10*time.Second, 5*time.Millisecond)
	t2 := lastAlive()
	require.Eventually(t, func() bool { return lastAlive().After(t2) }, 10*time.Second, 5*time.Millisecond)
	require.True(t, brokerOf(l, victim).Fenced)
	// Gone, then back: unfenced.
	unfenceAfterBlip(t, tc, l, victim)

	// Closing the active controller hands the role over.
	closed := time.Now()
	tc.stop(l.NodeID())
	nl := tc.leader()
	t.Logf("active controller moved from %d to %d in %v", l.NodeID(), nl.NodeID(), time.Since(closed))
	_, err = nl.CreateTopic(ctx, "after", 1, 1, nil, false)
	require.NoError(t, err)
}

// unfenceAfterBlip makes a broker fenced by a controlled shutdown look
// gone and then back, and waits until the active controller unfenced it.
func unfenceAfterBlip(t *testing.T, tc *testCluster, l *Controller, id int32) {
	tc.live.set(id, false)
	require.Eventually(t, func() bool {
		l.tmu.Lock()
		defer l.tmu.Unlock()
		return !l.tracker.shutdown[id]
	}, 10*time.Second, 5*time.Millisecond)
	tc.live.set(id, true)
	require.Eventually(t, func() bool { return !brokerOf(l, id).Fenced }, 10*time.Second, 10*time.Millisecond)
}

// The active controller gives preferred replicas their leaderships back
// once they are in the ISR again.
func TestPreferredLeaderRebalanceRuns(t *testing.T) {
	tc := newTestCluster(t, 2, func(o *Options) { o.LeaderRebalanceInterval = 50 * time.Millisecond })
	tc.awaitReady()
	ctx := testCtx(t)
	l := tc.leader()
	created, err := l.CreateTopic(ctx, "t", 4, 2, nil, false)
	require.NoError(t, err)
	other := tc.follower().NodeID()
	require.NoError(t, l.ControlledShutdown(ctx, other))
	top, _ := l.Topic("t")
	for _, p := range top.Partitions {
		require.Equal(t, l.NodeID(), p.Leader)
		require.Equal(t, []int32{l.NodeID()}, p.ISR)
	}
	unfenceAfterBlip(t, tc, l, other)
	// Its leader takes it back into each ISR (caught up).
	top, _ = l.Topic("t")
	for _, p := range top.Partitions {
		_, err := l.AlterPartition(ctx, metadata.AlterPartitionRequest{Topic: "t", Partition: p.ID, LeaderID: p.Leader,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: p.Replicas})
		if err != nil {
			// The rebalance may have moved it meanwhile: the ISR is full then.
			require.ErrorIs(t, err, metadata.ErrFencedLeaderEpoch)
		}
	}
	require.Eventually(t, func() bool {
		top, _ := l.Topic("t")
		for _, p := range top.Partitions {
			if p.Leader != p.Replicas[0] {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	top, _ = l.Topic("t")
	for i, p := range top.Partitions {
		require.Equal(t, created.Partitions[i].Replicas[0], p.Leader)
	}
}

func brokerOf(c *Controller, id int32) metadata.Broker {
	for _, b := range c.Brokers() {
		if b.ID == id {
			return b
		}
	}
	return metadata.Broker{}
}

func TestPeersMismatchRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	peers := []Peer{{ID: 1, Addr: ln.Addr().String()}}
	dir := filepath.Join(t.TempDir(), "meta")
	open := func(peers []Peer) (*Controller, error) {
		opts := Options{Dir: dir, NodeID: 1, Logger: testLogger(), Peers: peers}
		if len(peers) > 0 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			opts.ClusterListener = l
			t.Cleanup(func() { _ = l.Close() })
		}
		return Open(testCtx(t), opts)
	}
	c, err := Open(testCtx(t), Options{Dir: dir, NodeID: 1, Logger: testLogger(), Peers: peers, ClusterListener: ln})
	require.NoError(t, err)
	select { // a one-voter peers list is a quorum of one
	case <-c.Ready():
	case <-testCtx(t).Done():
		t.Fatal("not ready")
	}
	require.NoError(t, c.Close())

	other := []Peer{peers[0], {ID: 2, Addr: "127.0.0.1:1"}}
	_, err = open(other)
	require.ErrorIs(t, err, ErrPeersMismatch)
	require.ErrorContains(t, err, peersString(peers))
	require.ErrorContains(t, err, peersString(other))
	_, err = open(nil)
	require.ErrorIs(t, err, ErrPeersMismatch)
	require.ErrorContains(t, err, "none (a single-node cluster)")

	// A single-node directory does not open with peers.
	single := t.TempDir()
	c = openAt(t, Options{Dir: single, NodeID: 1})
	require.NoError(t, c.Close())
	dir = single
	_, err = open(peers)
	require.ErrorIs(t, err, ErrPeersMismatch)

	// Bad peers lists are refused before anything is opened.
	_, err = Open(testCtx(t), Options{Dir: t.TempDir(), NodeID: 3, Peers: peers, ClusterListener: ln})
	require.ErrorContains(t, err, "not in the peers")
	_, err = Open(testCtx(t), Options{Dir: t.TempDir(), NodeID: 1, Peers: peers})
	require.ErrorContains(t, err, "ClusterListener")
}

func TestPeersStringIsCanonical(t *testing.T) {
	ps := []Peer{{ID: 2, Addr: "127.0.0.1:9193"}, {ID: 1, Addr: "[::1]:9093"}}
	require.Equal(t, "1@[::1]:9093,2@127.0.0.1:9193", peersString(ps), "canonical: by id")
}

// Open does not wait for a quorum: a node started alone returns at once
// and is not ready; it becomes ready when a majority is up, and its
// writes, refused meanwhile only by their deadline, then go through.
func TestNodesStartInAnyOrder(t *testing.T) {
	tc, lns := listenCluster(t, 3, nil)
	start := time.Now()
	t.Cleanup(func() { t.Logf("took %v", time.Since(start)) })
	t.Cleanup(func() { _ = lns[2].Close() }) // node 3 never starts
	tc.start(2, lns[1])
	alone := tc.nodes[1]
	select {
	case <-alone.Ready():
		t.Fatal("ready without a quorum")
	default:
	}
	require.EqualValues(t, -1, alone.ControllerID())
	short, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	_, err := alone.CreateTopic(short, "t", 1, 1, nil, false)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, metadata.ErrNotController, "the last attempt said why")

	tc.start(1, lns[0])
	tc.awaitReady()
	t.Logf("ready after %v", time.Since(start))
	_, err = alone.CreateTopic(testCtx(t), "t", 1, 2, nil, false)
	require.NoError(t, err)
	t.Logf("created after %v", time.Since(start))
}

// A broker that restarts faster than the session timeout (the liveness
// check never saw it gone) registers with a new incarnation: its
// leaderships move with new epochs and it leaves the ISRs, so it never
// writes again in an epoch it led before the crash; the registration then
// unfences it. The same process registering again changes nothing.
func TestRestartedBrokerIsFencedAndUnfenced(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.awaitReady()
	ctx := testCtx(t)
	l := tc.leader()
	_, err := l.CreateTopic(ctx, "r", 6, 3, nil, false)
	require.NoError(t, err)
	victim := tc.follower().NodeID()
	before, _ := l.Topic("r")
	inc := brokerOf(l, victim).Incarnation
	require.NotEmpty(t, inc)

	// The same incarnation again (a retried registration): nothing moves.
	_, _, err = l.registerBrokerLocal(ctx, brokerOf(l, victim))
	require.NoError(t, err)
	same, _ := l.Topic("r")
	require.Equal(t, before.Partitions, same.Partitions)

	tc.crash(victim)
	tc.start(victim, nil)
	tc.awaitReady()
	l = tc.leader()
	require.Eventually(t, func() bool {
		b := brokerOf(l, victim)
		return b.Incarnation != inc && !b.Fenced
	}, 20*time.Second, 10*time.Millisecond, "registered again with a new incarnation, unfenced")
	after, _ := l.Topic("r")
	led := 0
	for i, p := range after.Partitions {
		was := before.Partitions[i]
		if was.Leader == victim {
			led++
			require.NotEqual(t, victim, p.Leader, "partition %d: its leadership moved", i)
			require.Greater(t, p.LeaderEpoch, was.LeaderEpoch, "partition %d: in a new epoch", i)
		}
		require.NotContains(t, p.ISR, victim, "partition %d: it rejoins the ISR by catching up", i)
	}
	require.Positive(t, led, "the victim led some partitions")
}

// RaftStatus tells the active controller from the others and reports the
// term and log positions; a closed controller is shut down; one voter is
// its own leader.
func TestRaftStatus(t *testing.T) {
	single, _ := openTest(t)
	st := single.RaftStatus()
	require.Equal(t, "leader", st.State)
	require.Positive(t, st.Term)
	require.Positive(t, st.CommitIndex)

	tc := newTestCluster(t, 3, nil)
	tc.awaitReady()
	l := tc.leader()
	_, err := l.CreateTopic(testCtx(t), "t", 1, 3, nil, false)
	require.NoError(t, err)
	fsm := l.AppliedIndex()
	ls := l.RaftStatus()
	require.Equal(t, "leader", ls.State)
	require.GreaterOrEqual(t, ls.LastLogIndex, ls.CommitIndex)
	require.GreaterOrEqual(t, ls.CommitIndex, ls.AppliedIndex)
	require.GreaterOrEqual(t, ls.AppliedIndex, fsm, "the FSM has at most what Raft handed it")
	for _, c := range tc.nodes {
		if c == l {
			continue
		}
		// Followers learn the commit index with the next append: poll.
		require.Eventually(t, func() bool {
			st := c.RaftStatus()
			return st.State == "follower" && st.Term == ls.Term && st.AppliedIndex >= ls.AppliedIndex
		}, 10*time.Second, 5*time.Millisecond, "node %d: %+v, leader %+v", c.NodeID(), c.RaftStatus(), ls)
	}
	f := tc.follower()
	tc.stop(f.NodeID())
	require.Equal(t, RaftStatus{State: "shutdown"}, f.RaftStatus())
}

// A fenced broker whose gossip comes back from another process than the
// one registered (it restarted and has not registered yet) is not
// unfenced for it: only its registration unfences it.
func TestNewIncarnationIsUnfencedByItsRegistrationOnly(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.awaitReady()
	l := tc.leader()
	victim := tc.follower().NodeID()
	tc.crash(victim)
	tc.live.set(victim, false)
	require.Eventually(t, func() bool { return brokerOf(l, victim).Fenced }, 20*time.Second, 10*time.Millisecond)

	// Its new process gossips before it registers.
	tc.live.setIncarnation(victim, "not-registered-yet")
	tc.live.set(victim, true)
	// Rounds of the active controller's liveness loop, counted on itself
	// (always alive; the victim is not, as the process registered).
	lastAlive := func() time.Time {
		l.tmu.Lock()
		defer l.tmu.Unlock()
		return l.tracker.lastAlive[l.NodeID()]
	}
	rounds := 0
	for at := lastAlive(); rounds < 5; rounds++ {
		require.Eventually(t, func() bool { return lastAlive() != at }, 10*time.Second, 5*time.Millisecond)
		at = lastAlive()
	}
	require.True(t, brokerOf(l, victim).Fenced, "five liveness rounds later: still fenced")

	tc.start(victim, nil)
	tc.live.setIncarnation(victim, tc.nodes[victim-1].opts.Incarnation)
	tc.awaitReady()
	require.Eventually(t, func() bool { return !brokerOf(tc.leader(), victim).Fenced }, 20*time.Second, 10*time.Millisecond)
}
