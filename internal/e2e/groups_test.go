package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/internal/testbroker"
	"github.com/moonmq/moonmq/net/client"
)

// Group tests run against a broker with short group timeouts so joins,
// leaves and crashes resolve in about a second; the clients use matching
// short session timeouts and heartbeat intervals.
var groupBrokerFlags = []string{
	"--group-min-session-timeout=100ms",
	"--group-initial-rebalance-delay=300ms",
	"--group-consumer-heartbeat-interval=200ms",
	"--group-consumer-session-timeout=4s",
}

// flavor is how a test's members join their group.
type flavor string

const (
	eager       flavor = "eager"       // classic protocol, range (eager) balancer
	cooperative flavor = "cooperative" // classic protocol, cooperative-sticky balancer
	kip848      flavor = "kip848"      // ConsumerGroupHeartbeat, server-side uniform assignor
)

func memberOpts(f flavor, addr, topic, grp string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ConsumerGroup(grp), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RetryTimeout(15 * time.Second),
		kgo.SessionTimeout(4 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.RebalanceTimeout(6 * time.Second), kgo.AutoCommitInterval(300 * time.Millisecond),
		kgo.FetchMaxWait(300 * time.Millisecond),
	}
	switch f {
	case eager:
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()))
	case cooperative:
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	case kip848:
		opts = append(opts, kgo.ServerSideBalancer())
	}
	return opts
}

// tracker records which members consumed which record values.
type tracker struct {
	mu   sync.Mutex
	seen map[string][]string
}

func newTracker() *tracker { return &tracker{seen: map[string][]string{}} }

func (tr *tracker) add(member, value string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.seen[value] = append(tr.seen[value], member)
}

// count is the number of distinct values with prefix consumed.
func (tr *tracker) count(prefix string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for v := range tr.seen {
		if strings.HasPrefix(v, prefix) {
			n++
		}
	}
	return n
}

// dups lists values with prefix consumed more than once, with their
// consumers.
func (tr *tracker) dups(prefix string) map[string][]string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[string][]string{}
	for v, ms := range tr.seen {
		if strings.HasPrefix(v, prefix) && len(ms) > 1 {
			out[v] = slices.Clone(ms)
		}
	}
	return out
}

func (tr *tracker) consumedBy(member string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, ms := range tr.seen {
		if slices.Contains(ms, member) {
			n++
		}
	}
	return n
}

// member is a group consumer in this process.
type member struct {
	name   string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startMember(t *testing.T, f flavor, addr, topic, grp, name string, tr *tracker, extra ...kgo.Opt) *member {
	t.Helper()
	cl, err := kgo.NewClient(append(memberOpts(f, addr, topic, grp), extra...)...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{name: name, cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { tr.add(name, string(r.Value)) })
		}
	}()
	t.Cleanup(m.close)
	return m
}

// close stops polling and closes the client, which commits what was
// polled and leaves the group (static members do not leave).
func (m *member) close() {
	select {
	case <-m.done:
		return
	default:
	}
	m.cancel()
	<-m.done
	m.cl.Close()
}

// processMember is a group consumer in a child process, so it can be
// SIGKILLed like a crashed application.
type processMember struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

type memberSpec struct {
	Flavor                   flavor
	Addr, Topic, Group, Name string
}

func startProcessMember(t *testing.T, spec memberSpec, tr *tracker) *processMember {
	t.Helper()
	js, err := json.Marshal(spec)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestGroupMemberProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "MOONMQ_E2E_GROUP_MEMBER="+string(js))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	pm := &processMember{name: spec.Name, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(pm.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "REC "); ok {
				tr.add(spec.Name, v)
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(pm.kill)
	return pm
}

func (pm *processMember) kill() {
	if pm.cmd.ProcessState == nil {
		_ = pm.cmd.Process.Kill()
	}
	<-pm.done
}

// TestGroupMemberProcess is the body of a processMember; it only runs in
// the child process.
func TestGroupMemberProcess(t *testing.T) {
	js := os.Getenv("MOONMQ_E2E_GROUP_MEMBER")
	if js == "" {
		t.Skip("runs only as a child of the group tests")
	}
	var spec memberSpec
	require.NoError(t, json.Unmarshal([]byte(js), &spec))
	cl, err := kgo.NewClient(memberOpts(spec.Flavor, spec.Addr, spec.Topic, spec.Group)...)
	require.NoError(t, err)
	w := bufio.NewWriter(os.Stdout)
	for { // until killed
		fs := cl.PollFetches(context.Background())
		fs.EachRecord(func(r *kgo.Record) { fmt.Fprintf(w, "REC %s\n", r.Value) })
		_ = w.Flush()
	}
}

func produceN(t *testing.T, addr, topic, prefix string, n, partitions int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(15*time.Second))
	require.NoError(t, err)
	defer cl.Close()
	ctx := ctxT(t, 30*time.Second)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i)), Partition: int32(i % partitions)}
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

func waitConsumed(t *testing.T, tr *tracker, prefix string, n int) {
	t.Helper()
	testbroker.WaitFor(t, 30*time.Second, fmt.Sprintf("%d records %s-* consumed", n, prefix), func() bool {
		return tr.count(prefix+"-") >= n
	})
	require.Equal(t, n, tr.count(prefix+"-"))
}

// groupAssignment returns member id -> assigned partitions of topic, as
// the coordinator describes the group.
func groupAssignment(ctx context.Context, adm *kadm.Client, f flavor, grp, topic string) (map[string][]int32, error) {
	out := map[string][]int32{}
	if f == kip848 {
		dgs, err := adm.DescribeConsumerGroups(ctx, grp)
		if err != nil {
			return nil, err
		}
		dg := dgs[grp]
		if dg.Err != nil {
			return nil, dg.Err
		}
		for _, m := range dg.Members {
			var ps []int32
			for p := range m.Assignment[topic] {
				ps = append(ps, p)
			}
			slices.Sort(ps)
			out[m.MemberID] = ps
		}
		return out, nil
	}
	dgs, err := adm.DescribeGroups(ctx, grp)
	if err != nil {
		return nil, err
	}
	dg := dgs[grp]
	if dg.Err != nil {
		return nil, dg.Err
	}
	if dg.State != "Stable" {
		return nil, fmt.Errorf("group is %s", dg.State)
	}
	for _, m := range dg.Members {
		ca, _ := m.Assigned.AsConsumer()
		var ps []int32
		if ca != nil {
			for _, t := range ca.Topics {
				if t.Topic == topic {
					ps = append(ps, t.Partitions...)
				}
			}
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out[m.MemberID] = ps
	}
	return out, nil
}

// waitBalanced waits until the group has members members that together
// own every one of partitions partitions exactly once, evenly.
func waitBalanced(t *testing.T, adm *kadm.Client, f flavor, grp, topic string, members, partitions int) map[string][]int32 {
	t.Helper()
	var last map[string][]int32
	var lastErr error
	testbroker.WaitFor(t, 30*time.Second, fmt.Sprintf("%d members sharing %d partitions of %s", members, partitions, topic), func() bool {
		a, err := groupAssignment(ctxT(t, 5*time.Second), adm, f, grp, topic)
		last, lastErr = a, err
		if err != nil || len(a) != members {
			return false
		}
		seen := map[int32]bool{}
		for _, ps := range a {
			if len(ps) < partitions/members || len(ps) > (partitions+members-1)/members {
				return false
			}
			for _, p := range ps {
				if seen[p] {
					return false
				}
				seen[p] = true
			}
		}
		return len(seen) == partitions
	})
	_ = lastErr
	return last
}

// TestGroupEager, TestGroupCooperative and TestGroupKIP848 run the same
// scenario with the three kinds of group consumer: three members share a
// 12-partition topic; a member leaves, one joins, one is SIGKILLed; then
// everything stops, the broker restarts, and new members resume from the
// committed offsets.
func TestGroupEager(t *testing.T)       { t.Parallel(); runGroupScenario(t, eager) }
func TestGroupCooperative(t *testing.T) { t.Parallel(); runGroupScenario(t, cooperative) }
func TestGroupKIP848(t *testing.T)      { t.Parallel(); runGroupScenario(t, kip848) }

func runGroupScenario(t *testing.T, f flavor) {
	const (
		topic      = "events"
		grp        = "scenario"
		partitions = 12
		perPhase   = 600
	)
	start := time.Now()
	phase := func(name string) { t.Logf("%6.2fs %s", time.Since(start).Seconds(), name) }
	b := testbroker.Start(t, groupBrokerFlags...)
	phase("broker started")
	_, adm := newClient(t, b.Addr)
	createTopic(t, adm, topic, partitions, nil)
	tr := newTracker()

	// Three members: every record consumed by exactly one of them.
	produceN(t, b.Addr, topic, "p1", perPhase, partitions)
	a := startMember(t, f, b.Addr, topic, grp, "a", tr)
	bm := startMember(t, f, b.Addr, topic, grp, "b", tr)
	c := startMember(t, f, b.Addr, topic, grp, "c", tr)
	waitConsumed(t, tr, "p1", perPhase)
	phase("p1 consumed")
	waitBalanced(t, adm, f, grp, topic, 3, partitions)
	require.Empty(t, tr.dups("p1-"))

	phase("three members consumed")
	// A member leaves: its partitions move, consumption continues.
	c.close()
	waitBalanced(t, adm, f, grp, topic, 2, partitions)
	produceN(t, b.Addr, topic, "p2", perPhase, partitions)
	waitConsumed(t, tr, "p2", perPhase)
	require.Empty(t, tr.dups("p2-"))

	phase("leave handled")
	// A member (in its own process) joins and gets a share.
	d := startProcessMember(t, memberSpec{Flavor: f, Addr: b.Addr, Topic: topic, Group: grp, Name: "d"}, tr)
	waitBalanced(t, adm, f, grp, topic, 3, partitions)
	produceN(t, b.Addr, topic, "p3", perPhase, partitions)
	waitConsumed(t, tr, "p3", perPhase)
	require.Empty(t, tr.dups("p3-"))
	require.Positive(t, tr.consumedBy("d"), "the joining member consumed its share")

	phase("join handled")
	// It is killed: after its session times out the others take over.
	d.kill()
	waitBalanced(t, adm, f, grp, topic, 2, partitions)
	produceN(t, b.Addr, topic, "p4", perPhase, partitions)
	waitConsumed(t, tr, "p4", perPhase)
	require.Empty(t, tr.dups("p4-"))

	phase("kill handled")
	// Commit (closing commits) and restart everything; new members resume
	// at the committed offsets: nothing earlier again, nothing skipped.
	a.close()
	bm.close()
	require.NoError(t, b.Stop())
	b.Restart()
	_, adm = newClient(t, b.Addr)
	produceN(t, b.Addr, topic, "p5", perPhase, partitions)
	before := map[string]int{"p1": tr.count("p1-"), "p2": tr.count("p2-"), "p3": tr.count("p3-"), "p4": tr.count("p4-")}
	startMember(t, f, b.Addr, topic, grp, "e", tr)
	startMember(t, f, b.Addr, topic, grp, "f", tr)
	startMember(t, f, b.Addr, topic, grp, "g", tr)
	waitConsumed(t, tr, "p5", perPhase)
	require.Empty(t, tr.dups("p5-"))
	for p, n := range before {
		require.Equal(t, n, tr.count(p+"-"))
		for v, ms := range tr.dups(p + "-") {
			for _, m := range []string{"e", "f", "g"} {
				require.NotContains(t, ms, m, "%s re-consumed %s after the restart", m, v)
			}
		}
	}
	waitBalanced(t, adm, f, grp, topic, 3, partitions)

	phase("resumed after restart")
	// Lag through net/client: everything consumed and committed -> 0.
	nc, err := client.Dial(ctxT(t, 10*time.Second), client.Options{Addr: b.Addr})
	require.NoError(t, err)
	defer nc.Close()
	testbroker.WaitFor(t, 20*time.Second, "lag 0 on every partition", func() bool {
		d, err := nc.DescribeGroup(ctxT(t, 5*time.Second), grp)
		if err != nil || len(d.Offsets) != partitions {
			return false
		}
		for _, o := range d.Offsets {
			if o.Committed != int64(5*perPhase/partitions) || o.End != o.Committed || o.Lag != 0 {
				return false
			}
		}
		return d.TotalLag == 0 && len(d.Members) == 3
	})
}

// freePort returns a loopback port that was free a moment ago, so a
// broker can restart on the same address its clients know.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// TestGroupStaticMembership: a static member restarting with the same
// group.instance.id within its session timeout gets its partitions back
// without a rebalance; the member id it replaced is fenced; and the static
// members survive a broker restart without a rebalance either.
func TestGroupStaticMembership(t *testing.T) {
	t.Parallel()
	const topic, grp, partitions = "static", "static-group", 6
	addr := freePort(t)
	b := testbroker.Start(t, append(slices.Clone(groupBrokerFlags), "--listen", addr)...)
	_, adm := newClient(t, b.Addr)
	createTopic(t, adm, topic, partitions, nil)
	tr := newTracker()

	var mu sync.Mutex
	events := map[string][]string{}
	hooks := func(name string) []kgo.Opt {
		note := func(kind string) func(context.Context, *kgo.Client, map[string][]int32) {
			return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				if len(m[topic]) == 0 {
					return
				}
				ps := slices.Clone(m[topic])
				slices.Sort(ps)
				mu.Lock()
				events[name] = append(events[name], fmt.Sprintf("%s%v", kind, ps))
				mu.Unlock()
			}
		}
		return []kgo.Opt{kgo.InstanceID(name[:1]), kgo.SessionTimeout(8 * time.Second),
			kgo.OnPartitionsAssigned(note("assigned")), kgo.OnPartitionsRevoked(note("revoked")), kgo.OnPartitionsLost(note("lost"))}
	}
	x := startMember(t, cooperative, b.Addr, topic, grp, "x1", tr, hooks("x1")...)
	y := startMember(t, cooperative, b.Addr, topic, grp, "y1", tr, hooks("y1")...)
	before := waitBalanced(t, adm, cooperative, grp, topic, 2, partitions)
	produceN(t, b.Addr, topic, "s1", 60, partitions)
	waitConsumed(t, tr, "s1", 60)
	eventsOf := func(name string) []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(events[name])
	}
	xEvents, yEvents := eventsOf("x1"), eventsOf("y1")
	require.NotEmpty(t, xEvents)
	require.NotEmpty(t, yEvents)
	xAssigned, yAssigned := xEvents[len(xEvents)-1], yEvents[len(yEvents)-1]
	oldX, gen := x.cl.GroupMetadata()
	require.Equal(t, fmt.Sprintf("assigned%v", before[oldX]), xAssigned)

	// Restart x: Close sends no LeaveGroup for a static member; the new
	// incarnation gets x's partitions in the same generation.
	x.close()
	x2 := startMember(t, cooperative, b.Addr, topic, grp, "x2", tr, hooks("x2")...)
	testbroker.WaitFor(t, 20*time.Second, "x2 assigned x1's partitions", func() bool {
		return slices.Contains(eventsOf("x2"), xAssigned)
	})
	after := waitBalanced(t, adm, cooperative, grp, topic, 2, partitions)
	newX, gen2 := x2.cl.GroupMetadata()
	require.NotEqual(t, oldX, newX, "x2 has a new member id")
	require.Contains(t, after, newX)
	require.Equal(t, gen, gen2, "no new generation")
	require.Equal(t, yEvents, eventsOf("y1"), "y saw no rebalance")

	// The replaced member id is fenced.
	raw, _ := newClient(t, b.Addr)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.InstanceID, hb.Generation = grp, oldX, kmsg.StringPtr("x"), gen
	resp, err := hb.RequestWith(ctxT(t, 10*time.Second), raw)
	require.NoError(t, err)
	require.ErrorIs(t, kerr.ErrorForCode(resp.ErrorCode), kerr.FencedInstanceID)

	// Restart everything: both applications stop (static: no leave), the
	// broker restarts on the same address, and the applications come back
	// within the session timeout. The static members were persisted, so
	// each gets its partitions back in the same generation.
	x2.close()
	y.close()
	require.NoError(t, b.Stop())
	b.Restart()
	require.Equal(t, addr, b.Addr)
	x3 := startMember(t, cooperative, b.Addr, topic, grp, "x3", tr, hooks("x3")...)
	y3 := startMember(t, cooperative, b.Addr, topic, grp, "y3", tr, hooks("y3")...)
	testbroker.WaitFor(t, 20*time.Second, "static members back with their partitions", func() bool {
		return slices.Contains(eventsOf("x3"), xAssigned) && slices.Contains(eventsOf("y3"), yAssigned)
	})
	_, gx := x3.cl.GroupMetadata()
	_, gy := y3.cl.GroupMetadata()
	require.Equal(t, []int32{gen, gen}, []int32{gx, gy}, "no rebalance across the restart")
	produceN(t, b.Addr, topic, "s2", 60, partitions)
	waitConsumed(t, tr, "s2", 60)
	require.Empty(t, tr.dups("s2-"))
}

// TestGroupCommitSurvivesSIGKILL: commits acknowledged to an admin client
// and to a group member, while another writer keeps committing, are all
// there after the broker is SIGKILLed and restarted, with their metadata
// and leader epochs.
func TestGroupCommitSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	b := testbroker.Start(t, groupBrokerFlags...)
	_, adm := newClient(t, b.Addr)
	createTopic(t, adm, "dur", 3, nil)
	produceN(t, b.Addr, "dur", "d", 300, 3)

	// A group member consumes everything and commits synchronously.
	cl, err := kgo.NewClient(append(memberOpts(eager, b.Addr, "dur", "member-commits"), kgo.DisableAutoCommit())...)
	require.NoError(t, err)
	defer cl.Close()
	ctx := ctxT(t, 60*time.Second)
	got := 0
	for got < 300 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		got += fs.NumRecords()
	}
	require.NoError(t, cl.CommitUncommittedOffsets(ctx))

	// An admin writer commits in a loop; the kill lands somewhere in it.
	var (
		mu    sync.Mutex
		acked = -1
	)
	stop := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var os kadm.Offsets
			for p := int32(0); p < 3; p++ {
				os.Add(kadm.Offset{Topic: "dur", Partition: p, At: int64(i), LeaderEpoch: 7, Metadata: fmt.Sprintf("m%d", i)})
			}
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := adm.CommitOffsets(cctx, "admin-commits", os)
			cancel()
			if err != nil || resp.Error() != nil {
				return // the broker died
			}
			mu.Lock()
			acked = i
			mu.Unlock()
		}
	}()
	testbroker.WaitFor(t, 20*time.Second, "50 acknowledged admin commits", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return acked >= 50
	})
	b.Kill()
	close(stop)
	<-writerDone
	b.Restart()

	_, adm = newClient(t, b.Addr)
	var fetched kadm.OffsetResponses
	testbroker.WaitFor(t, 20*time.Second, "offsets readable after restart", func() bool {
		fetched, err = adm.FetchOffsets(ctxT(t, 5*time.Second), "admin-commits")
		return err == nil && len(fetched["dur"]) == 3
	})
	mu.Lock()
	last := acked
	mu.Unlock()
	for p := int32(0); p < 3; p++ {
		o := fetched["dur"][p]
		require.NoError(t, o.Err)
		require.GreaterOrEqual(t, o.At, int64(last), "partition %d lost an acknowledged commit", p)
		require.Equal(t, fmt.Sprintf("m%d", o.At), o.Metadata)
		require.Equal(t, int32(7), o.LeaderEpoch)
	}
	member, err := adm.FetchOffsets(ctxT(t, 10*time.Second), "member-commits")
	require.NoError(t, err)
	var total int64
	member.Each(func(o kadm.OffsetResponse) { total += o.At })
	require.Equal(t, int64(300), total)
}

// TestGroupAdmin covers the admin side: list with a state filter,
// describe, lag, deleting offsets and groups, the Kafka errors for bad
// requests, and a deleted topic taking its offsets with it.
func TestGroupAdmin(t *testing.T) {
	t.Parallel()
	b := testbroker.Start(t, append(slices.Clone(groupBrokerFlags), "--group-max-size=2")...)
	cl, adm := newClient(t, b.Addr)
	ctx := ctxT(t, 60*time.Second)
	createTopic(t, adm, "adm", 4, nil)
	createTopic(t, adm, "gone", 2, nil)
	produceN(t, b.Addr, "adm", "a", 40, 4)

	// An offsets-only group, committed by an admin.
	var os kadm.Offsets
	os.AddOffset("adm", 0, 3, -1)
	os.AddOffset("gone", 1, 5, -1)
	r, err := adm.CommitOffsets(ctx, "simple", os)
	require.NoError(t, err)
	require.NoError(t, r.Error())

	// A live group with two members (the maximum).
	tr := newTracker()
	m1 := startMember(t, eager, b.Addr, "adm", "live", "m1", tr)
	m2 := startMember(t, eager, b.Addr, "adm", "live", "m2", tr)
	waitConsumed(t, tr, "a", 40)
	waitBalanced(t, adm, eager, "live", "adm", 2, 4)

	// A third member is refused: GROUP_MAX_SIZE_REACHED.
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "live", 2000, 2000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}}
	jr, err := join.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.ErrorIs(t, kerr.ErrorForCode(jr.ErrorCode), kerr.GroupMaxSizeReached)

	// Wrong generation and unknown member on heartbeat.
	dgs, err := adm.DescribeGroups(ctx, "live")
	require.NoError(t, err)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "live", dgs["live"].Members[0].MemberID, 999
	hr, err := hb.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.ErrorIs(t, kerr.ErrorForCode(hr.ErrorCode), kerr.IllegalGeneration)
	hb.Group = "no-such-group"
	hr, err = hb.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.ErrorIs(t, kerr.ErrorForCode(hr.ErrorCode), kerr.UnknownMemberID)

	// Oversized commit metadata.
	big := kadm.Offsets{}
	big.Add(kadm.Offset{Topic: "adm", Partition: 0, At: 1, LeaderEpoch: -1, Metadata: strings.Repeat("x", 5000)})
	r, err = adm.CommitOffsets(ctx, "simple", big)
	require.NoError(t, err)
	require.ErrorIs(t, r.Error(), kerr.OffsetMetadataTooLarge)

	// ListGroups with a state filter.
	ls, err := adm.ListGroups(ctx, "Stable")
	require.NoError(t, err)
	require.Equal(t, []string{"live"}, ls.Groups())
	ls, err = adm.ListGroups(ctx, "Empty")
	require.NoError(t, err)
	require.Equal(t, []string{"simple"}, ls.Groups())
	ls, err = adm.ListGroups(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"live", "simple"}, ls.Groups())

	// Lag of the live group through net/client.
	nc, err := client.Dial(ctxT(t, 10*time.Second), client.Options{Addr: b.Addr})
	require.NoError(t, err)
	defer nc.Close()
	testbroker.WaitFor(t, 20*time.Second, "live group committed everything", func() bool {
		d, err := nc.DescribeGroup(ctx, "live")
		return err == nil && d.TotalLag == 0 && len(d.Offsets) == 4 && d.State == "Stable" && len(d.Members) == 2
	})
	produceN(t, b.Addr, "adm", "late", 8, 4) // consumed quickly, but lag is measurable for the simple group
	sd, err := nc.DescribeGroup(ctx, "simple")
	require.NoError(t, err)
	require.Equal(t, "Empty", sd.State)
	for _, o := range sd.Offsets {
		if o.Topic == "adm" && o.Partition == 0 {
			require.Equal(t, int64(3), o.Committed)
			require.Equal(t, int64(12), o.End)
			require.Equal(t, int64(9), o.Lag)
		}
	}

	// Deleting a live group is refused; deleting offsets of a subscribed
	// topic too.
	_, err = adm.DeleteGroup(ctx, "live")
	require.ErrorIs(t, err, kerr.NonEmptyGroup)
	od, err := adm.DeleteOffsets(ctx, "live", kadm.TopicsSet{"adm": {0: {}}})
	require.NoError(t, err)
	require.ErrorIs(t, od["adm"][0], kerr.GroupSubscribedToTopic)

	// Deleting a topic removes its offsets.
	_, err = adm.DeleteTopics(ctx, "gone")
	require.NoError(t, err)
	testbroker.WaitFor(t, 10*time.Second, "offsets of the deleted topic gone", func() bool {
		f, err := adm.FetchOffsets(ctx, "simple")
		if err != nil {
			return false
		}
		_, ok := f["gone"]
		return !ok && len(f["adm"]) == 1
	})

	// OffsetDelete and DeleteGroups on the empty group.
	od, err = adm.DeleteOffsets(ctx, "simple", kadm.TopicsSet{"adm": {0: {}}})
	require.NoError(t, err)
	require.NoError(t, od.Error())
	_, err = adm.DeleteGroup(ctx, "simple")
	require.NoError(t, err)
	dgs, err = adm.DescribeGroups(ctx, "simple")
	require.NoError(t, err)
	require.ErrorIs(t, dgs["simple"].Err, kerr.GroupIDNotFound)

	// When the last member of a Stable group leaves, the group is Empty by
	// the time LeaveGroup is answered, as in Kafka: deleting it right after
	// works. A raw member makes the timing exact.
	m1.close()
	m2.close()
	join.Group, join.MemberID = "solo", ""
	jr, err = join.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.ErrorIs(t, kerr.ErrorForCode(jr.ErrorCode), kerr.MemberIDRequired)
	join.MemberID = jr.MemberID
	jr, err = join.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(jr.ErrorCode))
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "solo", jr.MemberID, jr.Generation
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}
	sr, err := sync.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(sr.ErrorCode))
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "solo"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: jr.MemberID}}
	lr, err := leave.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(lr.ErrorCode))
	require.Len(t, lr.Members, 1)
	require.NoError(t, kerr.ErrorForCode(lr.Members[0].ErrorCode))
	_, err = adm.DeleteGroup(ctx, "solo")
	require.NoError(t, err, "the group is empty once its last member has left")
}

// TestGroupKcat drives librdkafka's balanced consumer (kcat -G): a first
// run consumes everything and commits, a second run only what came after;
// kcat -L and -Q keep working with __consumer_offsets present.
func TestGroupKcat(t *testing.T) {
	t.Parallel()
	b := testbroker.Start(t, append(slices.Clone(groupBrokerFlags), "--auto-create-topics", "--default-partitions", "3")...)
	testbroker.Kcat(t, "a\nb\nc\nd\ne\nf\n", "-b", b.Addr, "-P", "-t", "kg")
	consume := func() []string {
		out := testbroker.Kcat(t, "", "-b", b.Addr, "-G", "kcat-group", "kg", "-X", "auto.offset.reset=earliest",
			"-X", "session.timeout.ms=6000", "-e", "-f", "%s\n")
		fields := strings.Fields(out)
		sort.Strings(fields)
		return fields
	}
	require.Equal(t, []string{"a", "b", "c", "d", "e", "f"}, consume())
	testbroker.Kcat(t, "g\nh\n", "-b", b.Addr, "-P", "-t", "kg")
	require.Equal(t, []string{"g", "h"}, consume())

	meta := testbroker.Kcat(t, "", "-b", b.Addr, "-L")
	require.Contains(t, meta, `topic "kg" with 3 partitions`)
	require.Contains(t, meta, `topic "__consumer_offsets"`)
	// The unkeyed records above went to random partitions; pin one to
	// partition 0 so the time query has something to find there.
	testbroker.Kcat(t, "z\n", "-b", b.Addr, "-P", "-t", "kg", "-p", "0")
	q := testbroker.Kcat(t, "", "-b", b.Addr, "-Q", "-t", "kg:0:"+strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10))
	require.Contains(t, q, "offset 0")

	_, adm := newClient(t, b.Addr)
	f, err := adm.FetchOffsets(ctxT(t, 10*time.Second), "kcat-group")
	require.NoError(t, err)
	var total int64
	f.Each(func(o kadm.OffsetResponse) { total += o.At })
	require.Equal(t, int64(8), total)
	if errors.Is(f.Error(), kerr.UnknownTopicOrPartition) {
		t.Fatal(f.Error())
	}
}

// A KIP-848 consumer whose broker-resolved regex names an internal topic
// is assigned it, as Kafka's regex resolution does (franz-go's
// Test848RegexBrokerResolves). This goes through serve's own wiring of the
// topics into the coordinator, where an internal-topic filter used to hide
// __consumer_offsets.
func TestRegexSubscriptionNamingAnInternalTopic(t *testing.T) {
	b := testbroker.Start(t)
	_, adm := newClient(t, b.Addr)
	createTopic(t, adm, "orders", 1, nil)
	createTopic(t, adm, "orders-v2", 1, nil)
	cl, _ := newClient(t, b.Addr, kgo.ConsumerGroup("regex"), kgo.ServerSideBalancer(), kgo.ConsumeRegex(),
		kgo.ConsumeTopics("orders", "__consumer_offsets"), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.DisableAutoCommit())
	testbroker.WaitFor(t, 30*time.Second, "orders and __consumer_offsets to be assigned", func() bool {
		cl.PollRecords(ctxT(t, 200*time.Millisecond), 10)
		d, err := adm.DescribeConsumerGroups(ctxT(t, 5*time.Second), "regex")
		if err != nil || d["regex"].Err != nil || len(d["regex"].Members) != 1 {
			return false
		}
		got := map[string]bool{}
		for topic := range d["regex"].Members[0].Assignment {
			got[topic] = true
		}
		return got["orders"] && got["__consumer_offsets"]
	})
}
