package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/moonmq/moonmq/internal/testbroker"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFlagsFollowTheContract: the flags a cluster node gets are the ones
// issue 13 specifies, its --peers entries for the others going through the
// per-link raft proxies and its --advertise through its Kafka proxy.
func TestFlagsFollowTheContract(t *testing.T) {
	c := New(t, Options{Nodes: 3, SessionTimeout: 3 * time.Second, Flags: []string{"--auto-create-topics"},
		NodeFlags: func(i int) []string { return []string{"--rack", fmt.Sprintf("r%d", i%2)} }})
	for i, nd := range c.Nodes {
		f := flagMap(c.flags(i))
		require.Equal(t, fmt.Sprint(nd.ID), f["--node-id"])
		require.Equal(t, nd.Listen, f["--listen"])
		require.Equal(t, nd.Kafka, f["--advertise"])
		require.NotEqual(t, nd.Listen, nd.Kafka)
		require.Equal(t, nd.HTTP, f["--http"])
		require.Equal(t, nd.ClusterAddr, f["--cluster-listen"])
		require.Equal(t, nd.Gossip, f["--gossip-listen"])
		require.Equal(t, "3s", f["--broker-session-timeout"])
		require.Equal(t, fmt.Sprintf("r%d", i%2), f["--rack"])
		require.Contains(t, c.flags(i), "--auto-create-topics")

		var wantPeers, wantJoin []string
		for j, o := range c.Nodes {
			if j == i {
				wantPeers = append(wantPeers, fmt.Sprintf("%d@%s", o.ID, o.ClusterAddr))
				continue
			}
			p := c.raft[i][j]
			require.Equal(t, o.ClusterAddr, p.Target())
			wantPeers = append(wantPeers, fmt.Sprintf("%d@%s", o.ID, p.Addr()))
			wantJoin = append(wantJoin, o.Gossip)
		}
		require.Equal(t, strings.Join(wantPeers, ","), f["--peers"])
		require.Equal(t, strings.Join(wantJoin, ","), f["--join"])
	}

	s := New(t, Options{Nodes: 2, Standalone: true})
	for i := range s.Nodes {
		f := flagMap(s.flags(i))
		for _, k := range []string{"--peers", "--cluster-listen", "--gossip-listen", "--join", "--broker-session-timeout"} {
			require.NotContains(t, f, k, "a standalone node has no cluster flags")
		}
	}
}

func flagMap(args []string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(args); i++ {
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			m[args[i]] = args[i+1]
			i++
		} else {
			m[args[i]] = ""
		}
	}
	return m
}

// produceOne writes one record through cl and returns its offset.
func produceOne(ctx context.Context, cl *kgo.Client, topic, value string) (int64, error) {
	r := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)})
	rec, err := r.First()
	if err != nil {
		return 0, err
	}
	return rec.Offset, nil
}

// TestProcessControlOnStandaloneNodes checks the harness on what today's
// binary runs: three one-voter nodes (no cluster flags), each reached
// through its Kafka proxy; isolation, SIGSTOP/SIGCONT, SIGKILL, SIGTERM and
// restarts on the same data.
func TestProcessControlOnStandaloneNodes(t *testing.T) {
	c := Start(t, Options{Nodes: 3, Standalone: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Every node is its own cluster: talk to each alone.
	proxied := map[int32]*kgo.Client{}
	for _, nd := range c.Nodes {
		cl, err := kgo.NewClient(kgo.SeedBrokers(nd.Kafka), kgo.RetryTimeout(30*time.Second))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		proxied[nd.ID] = cl
		_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "t")
		require.NoError(t, err)
		off, err := produceOne(ctx, cl, "t", "before")
		require.NoError(t, err)
		require.Equal(t, int64(0), off)
	}

	// The advertised address is the proxy: metadata says so.
	m, err := kadm.NewClient(proxied[1]).BrokerMetadata(ctx)
	require.NoError(t, err)
	require.Len(t, m.Brokers, 1)
	require.Equal(t, c.Nodes[0].Kafka, fmt.Sprintf("%s:%d", m.Brokers[0].Host, m.Brokers[0].Port))

	// Isolate node 1: the proxied client gets nothing (its request runs
	// into the blackhole until its deadline), a direct one still works.
	c.Isolate(1)
	require.True(t, c.Isolated(1))
	cut, err := kgo.NewClient(kgo.SeedBrokers(c.Nodes[0].Kafka), kgo.RecordDeliveryTimeout(2*time.Second))
	require.NoError(t, err)
	_, err = produceOne(ctx, cut, "t", "cut")
	cut.Close()
	require.Error(t, err, "a produce through an isolated node's proxy cannot succeed")
	direct, err := kgo.NewClient(kgo.SeedBrokers(c.Nodes[0].Kafka), c.DirectDialer(), kgo.RetryTimeout(30*time.Second))
	require.NoError(t, err)
	defer direct.Close()
	_, err = produceOne(ctx, direct, "t", "direct")
	require.NoError(t, err)
	c.Heal(1)
	require.False(t, c.Isolated(1))
	_, err = produceOne(ctx, proxied[1], "t", "healed")
	require.NoError(t, err)

	// SIGSTOP: /readyz stops answering; SIGCONT: it answers again.
	c.Stop(2)
	require.True(t, c.Node(2).Paused())
	// kill(2) returns once the stop is queued; a request racing it may
	// still be answered, so wait for the first one that is not.
	testbroker.WaitFor(t, 10*time.Second, "node 2 stops answering /readyz", func() bool { return !c.Node(2).Ready(ctx) })
	c.Cont(2)
	c.WaitReady(2)

	// SIGKILL and restart on the same data and ports.
	pid := c.Node(3).Pid()
	c.Kill(3)
	require.False(t, c.Node(3).Running())
	require.Zero(t, c.Node(3).Pid())
	c.Restart(3)
	require.NotEqual(t, pid, c.Node(3).Pid())
	off, err := produceOne(ctx, proxied[3], "t", "after restart")
	require.NoError(t, err)
	require.Equal(t, int64(1), off, "the restarted node kept its log")

	// A stopped node is killed by SIGKILL too, and SIGTERM of a paused
	// node resumes it first so it can shut down cleanly.
	c.Stop(3)
	c.Kill(3)
	c.Restart(3)
	c.Stop(1)
	c.Term(1, 20*time.Second)
	require.False(t, c.Node(1).Running())
	require.Contains(t, c.Node(1).Log(), "shutdown complete")

	// Restart everything at once, as a full-cluster restart does.
	c.Restart(1)
	c.TermAll(20 * time.Second)
	for _, nd := range c.Nodes {
		require.False(t, nd.Running())
	}
	c.LaunchAll()
	c.WaitAllReady()
	for _, nd := range c.Nodes {
		require.True(t, nd.Running())
	}
}

// kcatMetadata asks addr for metadata with kcat run in node from's network
// namespace (or on the host when from is 0), reporting kcat's error.
func kcatMetadata(c *Cluster, from int32, addr string) error {
	args := []string{"kcat", "-b", addr, "-L", "-m", "3"}
	if from > 0 {
		args = append(c.ns.exec(c.Node(from).Index), args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// TestNamespacesCutEveryLink checks the Namespaces network on standalone
// nodes: each node in its own namespace is reachable from the host and from
// the other nodes; Isolate cuts it off from the other nodes (any protocol:
// a route, not a proxy) but not from the host; Heal restores it; signals
// reach the process itself through `ip netns exec`.
func TestNamespacesCutEveryLink(t *testing.T) {
	if err := NamespacesAvailable(); err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not installed (make deps installs it)")
	}
	c := Start(t, Options{Nodes: 3, Standalone: true, Network: Namespaces})
	n1 := c.Node(1).Kafka
	require.NoError(t, kcatMetadata(c, 0, n1), "the host reaches node 1")
	require.NoError(t, kcatMetadata(c, 2, n1), "node 2 reaches node 1")

	c.Isolate(1)
	require.True(t, c.Isolated(1))
	require.Error(t, kcatMetadata(c, 2, n1), "node 2 no longer reaches node 1")
	require.Error(t, kcatMetadata(c, 1, c.Node(3).Kafka), "node 1 no longer reaches node 3")
	require.NoError(t, kcatMetadata(c, 2, c.Node(3).Kafka), "nodes 2 and 3 still talk")
	require.NoError(t, kcatMetadata(c, 0, n1), "the host still reaches node 1")

	// Isolating node 2 as well and healing node 1 keeps the 1-2 link cut.
	c.Isolate(2)
	c.Heal(1)
	require.NoError(t, kcatMetadata(c, 1, c.Node(3).Kafka), "node 1 reaches node 3 again")
	require.Error(t, kcatMetadata(c, 1, c.Node(2).Kafka), "node 2 is still isolated")
	c.HealAll()
	require.NoError(t, kcatMetadata(c, 2, n1))

	ctx := context.Background()
	c.Stop(3)
	// A signal is delivered asynchronously: a /readyz the process was
	// already answering may still get its reply.
	require.Eventually(t, func() bool { return !c.Node(3).Ready(ctx) }, 10*time.Second, 50*time.Millisecond,
		"SIGSTOP reached the process in its namespace")
	c.Cont(3)
	c.WaitReady(3)
	c.Kill(3)
	c.Restart(3)
	require.NoError(t, kcatMetadata(c, 0, c.Node(3).Kafka))
}
