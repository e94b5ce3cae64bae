// Package cluster runs a MoonMQ cluster of real `moonmq serve` processes on
// this machine for tests (internal/testbroker builds and runs each process),
// and injects the faults the cluster tests need: SIGKILL, SIGSTOP/SIGCONT,
// SIGTERM, restarts on the same data, and cutting a node off from the
// others. It is used only from tests (internal/archtest keeps it so).
//
// Two networks (Options.Network):
//
// Proxies (the default; no privileges). Every node runs on 127.0.0.1 with
// fixed free ports for its lifetime in the cluster (a restart reuses them:
// --peers is static): a Kafka listener, an HTTP listener, a cluster (raft)
// listener and a gossip address. Links that a test may cut go through fault
// proxies (internal/faultproxy):
//   - raft and the controller RPC, one proxy per ordered pair: node i's
//     --peers entry for node j is the proxy i→j in front of j's
//     --cluster-listen (its own entry is its own listener);
//   - Kafka, one proxy per node: --advertise is the proxy in front of the
//     node's --listen, so clients and the followers that fetch from it come
//     through it. Clients built with DirectDialer reach every node's
//     listener directly, past the proxies: they keep reaching a node that
//     Isolate cut off.
//
// Isolate(i) then blackholes node i's raft links both ways and its Kafka
// proxy. Two links it cannot cut, because the addresses are the peer's own
// and not chosen per link: gossip (memberlist advertises its --gossip-listen
// address to every member, over UDP and TCP, so a per-link proxy cannot sit
// in between without a separate advertise address), and the follower
// fetches node i itself sends to the other nodes' leaders (they dial the
// leaders' advertised proxies, which other nodes share). So an isolated
// node still looks alive to memberlist.
//
// Namespaces (root and iproute2; see netns.go). Every node runs in a network
// namespace of its own on a bridge, on the contract's default ports at an
// address of its own, with no proxies. Isolate(i) adds blackhole routes
// between node i and every other node: raft, the controller RPC, gossip over
// UDP and TCP and follower fetches either way all stop, while the test's
// clients (on the host) still reach every node. This is the network the
// fault test uses when it can.
//
// Everything is bounded: starts and readiness have deadlines, every process
// is killed and every proxy, namespace and bridge removed at cleanup, and a
// failing test prints the tail of every node's log.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/internal/faultproxy"
	"github.com/moonmq/moonmq/internal/testbroker"
)

// Options configure a cluster.
type Options struct {
	// Nodes is the number of nodes (default 3); their ids are 1..Nodes.
	Nodes int
	// SessionTimeout is --broker-session-timeout (default: the node's).
	SessionTimeout time.Duration
	// Flags are extra `moonmq serve` flags for every node; NodeFlags,
	// when set, adds flags for node index i (0-based).
	Flags     []string
	NodeFlags func(i int) []string
	// ReadyTimeout bounds each wait for /readyz (default 60s).
	ReadyTimeout time.Duration
	// Network is how the nodes are wired and cut (default Proxies).
	Network Network
	// Standalone starts each node as its own one-voter cluster (no
	// --peers, --cluster-listen, --gossip-listen, --join, session
	// timeout): what a binary without the cluster flags runs, to check
	// the harness itself.
	Standalone bool
}

func (o *Options) ensureDefaults() {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 60 * time.Second
	}
}

// Cluster is a running set of nodes.
type Cluster struct {
	t    testing.TB
	opts Options
	// Nodes in id order: Nodes[i].ID == i+1.
	Nodes []*Node
	// raft[i][j] is node i's link to node j's cluster listener (nil on
	// the diagonal; none on the Namespaces network).
	raft [][]*faultproxy.Proxy
	// ns is the Namespaces network, nil on Proxies.
	ns *netns

	mu       sync.Mutex
	isolated map[int32]bool
}

// Node is one member of the cluster.
type Node struct {
	ID    int32
	Index int
	Dir   string
	// Kafka is the address clients are given (--advertise): the node's
	// Kafka proxy. Listen is its own listener, past the proxy.
	Kafka, Listen string
	// HTTP serves /readyz, /metrics, /stats.
	HTTP string
	// ClusterAddr is --cluster-listen, Gossip --gossip-listen.
	ClusterAddr, Gossip string

	kafkaProxy *faultproxy.Proxy // nil on the Namespaces network
	proc       *testbroker.Broker

	mu     sync.Mutex
	paused bool // SIGSTOPped
	starts int  // launches so far
}

// Supported reports whether the moonmq binary runs a cluster, with the
// reason when not: `serve --print-config` validates a three-peer
// configuration exactly as a start would, so a binary that lacks the flags,
// or has them but refuses --peers, says so without starting anything.
func Supported(t testing.TB) (bool, string) {
	t.Helper()
	out, err := exec.Command(testbroker.Binary(t), "serve", "--data", t.TempDir(), "--node-id", "1",
		"--peers", "1@127.0.0.1:19093,2@127.0.0.1:19193,3@127.0.0.1:19293", "--print-config").CombinedOutput()
	if err != nil {
		return false, fmt.Sprintf("moonmq serve does not run a cluster yet (%v): %s", err, strings.TrimSpace(string(out)))
	}
	return true, ""
}

// SkipUnlessSupported is the one gate of the cluster tests: it skips the
// test while the binary lacks the cluster flags.
func SkipUnlessSupported(t testing.TB) {
	t.Helper()
	if ok, why := Supported(t); !ok {
		t.Skip(why)
	}
}

// Start runs a cluster and waits until every node is ready.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c := New(t, opts)
	c.LaunchAll()
	c.WaitAllReady()
	return c
}

// New prepares a cluster (ports, proxies, data directories) without starting
// any process; it registers the cleanup that kills them and closes the
// proxies.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	opts.ensureDefaults()
	c := &Cluster{t: t, opts: opts, isolated: map[int32]bool{}}
	n := opts.Nodes
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	// After the TempDirs: cleanups run last-in first-out, so the
	// processes die before their directories go.
	t.Cleanup(c.cleanup)
	if opts.Network == Namespaces {
		ns, err := setupNetns(n)
		if err != nil {
			t.Fatalf("network namespaces: %v", err)
		}
		c.ns = ns
		for i := 0; i < n; i++ {
			ip := ns.nodeIP(i)
			// Each namespace has its own ports: the contract's
			// defaults, on the node's own address.
			c.Nodes = append(c.Nodes, &Node{ID: int32(i + 1), Index: i, Dir: dirs[i],
				Kafka: ip + ":9092", Listen: ip + ":9092", HTTP: ip + ":9090",
				ClusterAddr: ip + ":9093", Gossip: ip + ":9094"})
		}
	} else {
		free := &ports{t: t}
		defer free.release()
		for i := 0; i < n; i++ {
			nd := &Node{ID: int32(i + 1), Index: i, Dir: dirs[i],
				Listen: free.addr(false), HTTP: free.addr(false),
				ClusterAddr: free.addr(false), Gossip: free.addr(true)}
			p, err := faultproxy.New("127.0.0.1:0", nd.Listen)
			if err != nil {
				t.Fatal(err)
			}
			nd.kafkaProxy, nd.Kafka = p, p.Addr()
			c.Nodes = append(c.Nodes, nd)
		}
		c.raft = make([][]*faultproxy.Proxy, n)
		for i := range c.raft {
			c.raft[i] = make([]*faultproxy.Proxy, n)
			for j := range c.raft[i] {
				if i == j {
					continue
				}
				p, err := faultproxy.New("127.0.0.1:0", c.Nodes[j].ClusterAddr)
				if err != nil {
					t.Fatal(err)
				}
				c.raft[i][j] = p
			}
		}
	}
	for _, nd := range c.Nodes {
		nd.proc = testbroker.New(t, nd.Dir, c.flags(nd.Index)...)
		if c.ns != nil {
			nd.proc.Prefix = c.ns.exec(nd.Index)
		}
	}
	return c
}

// flags are node i's `moonmq serve` flags.
func (c *Cluster) flags(i int) []string {
	nd := c.Nodes[i]
	f := []string{"--node-id", strconv.Itoa(int(nd.ID)), "--listen", nd.Listen, "--advertise", nd.Kafka, "--http", nd.HTTP}
	if !c.opts.Standalone {
		var peers, join []string
		for j, o := range c.Nodes {
			addr := o.ClusterAddr
			if j != i {
				if c.raft != nil {
					addr = c.raft[i][j].Addr()
				}
				join = append(join, o.Gossip)
			}
			peers = append(peers, fmt.Sprintf("%d@%s", o.ID, addr))
		}
		f = append(f, "--peers", strings.Join(peers, ","), "--cluster-listen", nd.ClusterAddr,
			"--gossip-listen", nd.Gossip, "--join", strings.Join(join, ","))
		if c.opts.SessionTimeout > 0 {
			f = append(f, "--broker-session-timeout", c.opts.SessionTimeout.String())
		}
	}
	f = append(f, c.opts.Flags...)
	if c.opts.NodeFlags != nil {
		f = append(f, c.opts.NodeFlags(i)...)
	}
	return f
}

// ports hands out distinct free 127.0.0.1 ports: it holds each one bound
// until release, so two nodes never get the same. The processes bind them
// later; a port taken meanwhile fails that start loudly, not silently.
type ports struct {
	t    testing.TB
	held []io.Closer
}

// addr is a free port for TCP, and for UDP too when udp is set (memberlist
// binds both on its port).
func (p *ports) addr(udp bool) string {
	p.t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			p.t.Fatal(err)
		}
		p.held = append(p.held, ln)
		if !udp {
			return ln.Addr().String()
		}
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		if err != nil {
			continue // the UDP port is taken: keep the TCP one held, try another
		}
		p.held = append(p.held, pc)
		return ln.Addr().String()
	}
	p.t.Fatal("no free port with both TCP and UDP free")
	return ""
}

func (p *ports) release() {
	for _, c := range p.held {
		_ = c.Close()
	}
	p.held = nil
}

func (c *Cluster) cleanup() {
	for _, nd := range c.Nodes {
		if nd.proc == nil {
			continue // New failed before the processes were set up
		}
		nd.mu.Lock()
		if nd.proc.Running() {
			_ = nd.proc.Signal(syscall.SIGCONT)
			nd.proc.Kill()
		}
		nd.mu.Unlock()
	}
	for _, row := range c.raft {
		for _, p := range row {
			if p != nil {
				_ = p.Close()
			}
		}
	}
	for _, nd := range c.Nodes {
		if nd.kafkaProxy != nil {
			_ = nd.kafkaProxy.Close()
		}
	}
	if c.ns != nil {
		c.ns.close()
	}
	if c.t.Failed() || os.Getenv("MOONMQ_CLUSTER_LOGS") != "" {
		for _, nd := range c.Nodes {
			if nd.proc == nil {
				continue
			}
			c.t.Logf("node %d log (last 2000 lines):\n%s", nd.ID, nd.proc.LogTail(2000))
		}
	}
}

// Node returns the node with broker id id.
func (c *Cluster) Node(id int32) *Node {
	c.t.Helper()
	if id < 1 || int(id) > len(c.Nodes) {
		c.t.Fatalf("no node %d in a %d-node cluster", id, len(c.Nodes))
	}
	return c.Nodes[id-1]
}

// Seeds are every node's client address.
func (c *Cluster) Seeds() []string {
	s := make([]string, len(c.Nodes))
	for i, nd := range c.Nodes {
		s[i] = nd.Kafka
	}
	return s
}

// Launch starts node id's process on its data dir and ports without waiting.
func (c *Cluster) Launch(id int32) {
	c.t.Helper()
	nd := c.Node(id)
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.proc.Running() {
		c.t.Fatalf("node %d is already running", id)
	}
	nd.paused = false
	nd.starts++
	nd.proc.Launch()
}

// LaunchAll starts every node that is not running, without waiting: nodes
// of a cluster may start in any order and wait for a quorum.
func (c *Cluster) LaunchAll() {
	c.t.Helper()
	for _, nd := range c.Nodes {
		if !nd.Running() {
			c.Launch(nd.ID)
		}
	}
}

// Restart launches node id again (it must be stopped) and waits until it
// is ready.
func (c *Cluster) Restart(id int32) {
	c.t.Helper()
	c.Launch(id)
	c.WaitReady(id)
}

// Running reports whether the node's process runs (paused counts).
func (nd *Node) Running() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.proc.Running()
}

// Paused reports whether the node is SIGSTOPped.
func (nd *Node) Paused() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.paused
}

// Pid is the node's process id (0 when it is not running).
func (nd *Node) Pid() int {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if !nd.proc.Running() {
		return 0
	}
	return nd.proc.Pid()
}

// Starts is how many times the node was launched: with ID it names one
// process lifetime (what a node reports within one only moves forward).
func (nd *Node) Starts() int {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.starts
}

// Log is everything the node logged, over all its starts.
func (nd *Node) Log() string { return nd.proc.Log() }

// Kill SIGKILLs node id and waits for it to die.
func (c *Cluster) Kill(id int32) {
	nd := c.Node(id)
	nd.mu.Lock()
	defer nd.mu.Unlock()
	nd.proc.Kill()
	nd.paused = false
}

// Stop SIGSTOPs node id: it freezes with its sockets open, as a long GC
// pause or a VM stall looks to its peers.
func (c *Cluster) Stop(id int32) {
	c.t.Helper()
	c.signal(id, syscall.SIGSTOP, true)
}

// Cont SIGCONTs a stopped node.
func (c *Cluster) Cont(id int32) {
	c.t.Helper()
	c.signal(id, syscall.SIGCONT, false)
}

func (c *Cluster) signal(id int32, sig syscall.Signal, paused bool) {
	c.t.Helper()
	nd := c.Node(id)
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if err := nd.proc.Signal(sig); err != nil {
		c.t.Fatalf("node %d: %v: %v", id, sig, err)
	}
	nd.paused = paused
}

// Term sends SIGTERM to node id and waits (within timeout) for a clean exit:
// the controlled shutdown. An unclean exit or a timeout fails the test.
func (c *Cluster) Term(id int32, timeout time.Duration) {
	c.t.Helper()
	if err := c.Node(id).term(timeout); err != nil {
		c.t.Fatal(err)
	}
}

// term resumes a paused node (a stopped process cannot act on SIGTERM),
// SIGTERMs it and waits for a clean exit.
func (nd *Node) term(timeout time.Duration) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.paused {
		_ = nd.proc.Signal(syscall.SIGCONT)
		nd.paused = false
	}
	if err := nd.proc.StopWithin(timeout); err != nil {
		return fmt.Errorf("node %d: %w", nd.ID, err)
	}
	return nil
}

// TermAll SIGTERMs every running node at once, as an operator stopping the
// whole cluster does, and waits (within timeout each) for clean exits.
func (c *Cluster) TermAll(timeout time.Duration) {
	c.t.Helper()
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, nd := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = nd.term(timeout)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatal(err)
	}
}

// Isolate cuts node id off from the other nodes. On the Proxies network its
// raft links both ways and its Kafka proxy are blackholed (see the package
// comment for what stays connected; DirectDialer clients still reach it);
// on the Namespaces network every link between it and the other nodes is
// cut and the test's clients still reach it.
func (c *Cluster) Isolate(id int32) { c.setLinks(id, true) }

// Heal restores node id's links (those to isolated nodes stay cut).
func (c *Cluster) Heal(id int32) { c.setLinks(id, false) }

// HealAll restores every link.
func (c *Cluster) HealAll() {
	for _, nd := range c.Nodes {
		c.Heal(nd.ID)
	}
}

// Isolated reports whether node id is cut off.
func (c *Cluster) Isolated(id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.isolated[id]
}

func (c *Cluster) setLinks(id int32, cut bool) {
	c.t.Helper()
	i := c.Node(id).Index
	c.mu.Lock()
	defer c.mu.Unlock()
	c.isolated[id] = cut
	for j, o := range c.Nodes {
		// A link stays cut while either end is isolated.
		linkCut := cut || c.isolated[o.ID]
		if j == i {
			continue
		}
		if c.ns != nil {
			if err := c.ns.setCut(i, j, linkCut); err != nil {
				c.t.Fatal(err)
			}
			continue
		}
		m := faultproxy.Pass
		if linkCut {
			m = faultproxy.Blackhole
		}
		c.raft[i][j].SetMode(m)
		c.raft[j][i].SetMode(m)
	}
	if c.ns == nil {
		m := faultproxy.Pass
		if cut {
			m = faultproxy.Blackhole
		}
		c.Nodes[i].kafkaProxy.SetMode(m)
	}
}

// Ready reports whether node id's /readyz answers 200.
func (nd *Node) Ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nd.HTTP+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// WaitReady polls node id's /readyz until it is 200, within ReadyTimeout. A
// node that exits meanwhile fails at once, with its log.
func (c *Cluster) WaitReady(id int32) {
	c.t.Helper()
	nd := c.Node(id)
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	nd.mu.Lock()
	exited := nd.proc.Exited()
	nd.mu.Unlock()
	for !nd.Ready(ctx) {
		select {
		case <-exited:
			c.t.Fatalf("node %d exited before it was ready:\n%s", id, nd.proc.LogTail(100))
		case <-ctx.Done():
			c.t.Fatalf("node %d not ready within %v", id, c.opts.ReadyTimeout)
		case <-tick.C:
		}
	}
}

// WaitAllReady waits until every running node is ready.
func (c *Cluster) WaitAllReady() {
	c.t.Helper()
	for _, nd := range c.Nodes {
		if nd.Running() {
			c.WaitReady(nd.ID)
		}
	}
}

// DirectDialer is a kgo option that dials every node's own listener instead
// of its Kafka proxy: a client that keeps reaching nodes Isolate cut off.
func (c *Cluster) DirectDialer() kgo.Opt {
	direct := map[string]string{}
	for _, nd := range c.Nodes {
		direct[nd.Kafka] = nd.Listen
	}
	var d net.Dialer
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		if a, ok := direct[host]; ok {
			host = a
		}
		return d.DialContext(ctx, network, host)
	})
}

// Client is a franz-go client seeded with every node, closed at cleanup.
func (c *Cluster) Client(opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Seeds()...), kgo.RetryTimeout(30 * time.Second)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// PartitionState is what metadata says of one partition.
type PartitionState struct {
	Leader, LeaderEpoch int32
	Replicas, ISR       []int32
}

// Partitions asks the cluster, through cl, for topic's partitions as a
// broker describes them now. It sends a Metadata request of its own:
// kadm's Metadata answers from franz-go's cache (up to MetadataMinAge, 5 s
// by default, old), which after a fault can describe the cluster as it was.
func Partitions(ctx context.Context, cl *kgo.Client, topic string) (map[int32]PartitionState, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("metadata of %s: %d topics in the answer", topic, len(resp.Topics))
	}
	td := resp.Topics[0]
	if err := kerr.ErrorForCode(td.ErrorCode); err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	out := map[int32]PartitionState{}
	for _, pd := range td.Partitions {
		if err := kerr.ErrorForCode(pd.ErrorCode); err != nil && !errors.Is(err, kerr.LeaderNotAvailable) {
			return nil, fmt.Errorf("metadata of %s[%d]: %w", topic, pd.Partition, err)
		}
		out[pd.Partition] = PartitionState{Leader: pd.Leader, LeaderEpoch: pd.LeaderEpoch, Replicas: pd.Replicas, ISR: pd.ISR}
	}
	return out, nil
}
