package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/cluster"
	"github.com/moonmq/moonmq/internal/history"
	"github.com/moonmq/moonmq/internal/testbroker"
)

// fault is one thing the nemesis does to the leader of a partition; it
// returns once the fault is over (the node back, the link healed).
type fault struct {
	name string
	do   func(t *testing.T, c *cluster.Cluster, leader int32)
}

// TestFaultsKeepAcknowledgedWrites is the Jepsen-style test of issue 13:
// producers write acks=all to several partitions of a replication-factor-3
// topic while a nemesis, cycle after cycle, picks the leader of a partition
// and SIGKILLs it (and restarts it), SIGSTOPs it for longer than the session
// timeout, cuts it off from the other nodes, or SIGTERMs it (controlled
// shutdown) and restarts it; or SIGKILLs every node at once, or the leader
// with a follower (a majority: the partition waits for them), cuts a
// follower off until it leaves the ISR, or pauses the active controller.
// The faults come in a random order (seeded, logged). Between faults the
// cluster must heal: every
// node ready, every partition led with a full ISR, writes acknowledged
// again. At the end the history checker holds the clients' history against
// the final log: every acknowledged record there exactly once at its
// offset, per-producer order, no duplicates, nothing read later lost, leader
// epochs only growing. MOONMQ_SOAK sets the length (see the package doc).
func TestFaultsKeepAcknowledgedWrites(t *testing.T) {
	cluster.SkipUnlessSupported(t)
	budget, cycles := soakBudget(t)
	seed := soakSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed))
	const session = 3 * time.Second
	const topic, partitions = "jepsen", 4
	// A namespace per node where the test may (root) cuts gossip too;
	// elsewhere the proxies cut what they can (see internal/cluster).
	network := cluster.Namespaces
	if err := cluster.NamespacesAvailable(); err != nil {
		network = cluster.Proxies
		t.Logf("isolating through proxies (gossip stays connected): %v", err)
	}
	c := cluster.Start(t, cluster.Options{Nodes: 3, SessionTimeout: session, Network: network})
	cl, _ := c.Client()
	createTopic(t, cl, topic, partitions, 3, nil)
	nc := newNodeClients(t, c)

	h := &history.History{}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	// Producers: two dial every node directly, so they keep reaching a
	// node cut off from the others (the nasty case: an isolated leader
	// must not acknowledge what it cannot replicate); one goes through
	// the proxies (on the Proxies network), as a client on the other side
	// of the partition.
	var prods []*producer
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("p%d", i)
		if i < 2 {
			prods = append(prods, newProducer(t, c, h, name, topic, c.DirectDialer()))
		} else {
			prods = append(prods, newProducer(t, c, h, name, topic))
		}
	}
	// Each producer is paced to perProducerRate: the history keeps
	// every record (a few hundred bytes each, with the checker's maps), so
	// an unpaced soak of half an hour would fill the machine's memory
	// (58 million records did). Paced, many batches are still in flight at
	// every fault.
	const perProducerRate, tick = 3000, 10 * time.Millisecond
	var wg sync.WaitGroup
	for _, pr := range prods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pace := time.NewTicker(tick)
			defer pace.Stop()
			for i := 0; ctx.Err() == nil; {
				for range perProducerRate * tick / time.Second {
					pr.produce(ctx, int32(i%partitions)) // blocks while its buffer is full
					i++
				}
				select {
				case <-pace.C:
				case <-ctx.Done():
				}
			}
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); reader(ctx, c, h, "reader", topic, partitions, c.DirectDialer()) }()

	ackedNow := func() int { a, _, _ := h.Counts(); return a }
	// progress waits until more writes are acknowledged than before.
	progress := func(what string) {
		t.Helper()
		before := ackedNow()
		testbroker.WaitFor(t, 60*time.Second, "acknowledged writes "+what, func() bool { return ackedNow() > before+50 })
	}
	progress("before the first fault")

	faults := []fault{
		{"SIGKILL the leader, restart it once another leads", func(t *testing.T, c *cluster.Cluster, leader int32) {
			c.Kill(leader)
			leaderOf(t, cl, topic, 0, leader, session+30*time.Second)
			c.Restart(leader)
		}},
		{"SIGSTOP the leader until another leads (past the session timeout), then SIGCONT", func(t *testing.T, c *cluster.Cluster, leader int32) {
			c.Stop(leader)
			leaderOf(t, cl, topic, 0, leader, session+30*time.Second)
			c.Cont(leader)
		}},
		{"cut the leader off from the other nodes until another leads, then heal", func(t *testing.T, c *cluster.Cluster, leader int32) {
			c.Isolate(leader)
			if network == cluster.Namespaces {
				leaderOf(t, cl, topic, 0, leader, session+30*time.Second)
			} else {
				// Gossip still reaches a node the proxies cut off,
				// so it may stay leader (and stall) until healed.
				pause(ctx, 2*session)
			}
			c.Heal(leader)
		}},
		{"SIGTERM the leader (controlled shutdown), restart it", func(t *testing.T, c *cluster.Cluster, leader int32) {
			c.Term(leader, 30*time.Second)
			c.Restart(leader)
		}},
		{"SIGKILL every node at once, restart them all", func(t *testing.T, c *cluster.Cluster, leader int32) {
			for _, nd := range c.Nodes {
				c.Kill(nd.ID)
			}
			c.LaunchAll()
			c.WaitAllReady()
		}},
		{"SIGKILL the leader and a follower (a majority), restart the follower, then the leader", func(t *testing.T, c *cluster.Cluster, leader int32) {
			follower := others(c, leader)[rng.IntN(len(c.Nodes)-1)]
			c.Kill(leader)
			c.Kill(follower)
			c.Restart(follower)
			c.Restart(leader)
		}},
		{"cut a follower off until it leaves the ISR, then heal", func(t *testing.T, c *cluster.Cluster, leader int32) {
			follower := others(c, leader)[rng.IntN(len(c.Nodes)-1)]
			c.Isolate(follower)
			if network == cluster.Namespaces {
				outOfISR(t, cl, topic, 0, follower, session+30*time.Second)
			} else {
				pause(ctx, 2*session)
			}
			c.Heal(follower)
		}},
		{"SIGSTOP the active controller past the session timeout, then SIGCONT", func(t *testing.T, c *cluster.Cluster, leader int32) {
			ctrl := controllerOf(t, c, nc, -1, 30*time.Second)
			c.Stop(ctrl)
			controllerOf(t, c, nc, ctrl, session+30*time.Second)
			c.Cont(ctrl)
		}},
	}

	// Every fault once in a random order, then again in another: a short
	// run meets different ones each time (the seed is logged, and
	// MOONMQ_SOAK_SEED replays an order).
	var order []int
	start := time.Now()
	done := 0
	for cycle := 0; ; cycle++ {
		if cycles > 0 && cycle >= cycles || cycles == 0 && time.Since(start) >= budget {
			break
		}
		if len(order) == 0 {
			order = rng.Perm(len(faults))
		}
		f := faults[order[0]]
		order = order[1:]
		// The faults hit partition 0's leader: leaderOf polls one
		// partition, and moving it is what the fault is for; the other
		// partitions' leaders are hit whenever they share the node.
		leader, epoch := leaderOf(t, cl, topic, 0, -1, 30*time.Second)
		t.Logf("cycle %d: %s (node %d, partition 0 at leader epoch %d); %d acknowledged so far", cycle, f.name, leader, epoch, ackedNow())
		observeEpochs(ctx, c, nc, h, topic)
		f.do(t, c, leader)
		observeEpochs(ctx, c, nc, h, topic)
		c.WaitAllReady()
		waitHealthy(t, cl, topic, partitions, 3, 60*time.Second)
		waitConverged(t, c, 60*time.Second)
		progress(fmt.Sprintf("after cycle %d (%s)", cycle, f.name))
		observeEpochs(ctx, c, nc, h, topic)
		done++
	}

	// Stop the clients: what is still buffered fails (unknown outcome);
	// the delivery timeout bounds what is in flight.
	stop()
	wg.Wait()
	for _, pr := range prods {
		pr.wait()
	}
	acked, unknown, reads := h.Counts()
	res := h.Check(finalLog(t, c, topic, partitions))
	t.Logf("%d nemesis cycles in %v: %d acknowledged, %d unknown (%d of them stored), %d stored, %d reads",
		done, time.Since(start).Round(time.Second), acked, unknown, res.UnknownStored, res.Stored, reads)
	require.True(t, res.OK(), res.Error(30))
	require.GreaterOrEqual(t, done, 1, "the nemesis ran")
}

// pause waits d, the length of a fault (not a wait for state), or until ctx
// ends.
func pause(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}
