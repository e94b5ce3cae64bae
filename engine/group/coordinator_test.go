package group

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/coord/coordtest"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/vfs"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

var testTopics = []TopicInfo{{Name: "t", ID: tid("t"), Partitions: 3}, {Name: "u", ID: tid("u"), Partitions: 1}}

// startCoordinator starts a coordinator over store with a fake clock and
// waits until it has loaded.
func startCoordinator(t *testing.T, store *coordtest.MemLog, clk *clock, topics []TopicInfo) *Coordinator {
	t.Helper()
	cfg := testConfig()
	cfg.Now = clk.Now
	cfg.OffsetsTopicPartitions = 4
	cfg.OffsetsRetention = time.Hour
	cfg.RetentionCheckInterval = time.Minute
	cfg.TickInterval = time.Hour // the test ticks by hand
	c, err := New(cfg, store)
	require.NoError(t, err)
	c.SetTopics(topics)
	c.Start()
	t.Cleanup(func() { _ = c.Close() })
	require.Eventually(t, func() bool { return c.Ready() == nil }, 10*time.Second, time.Millisecond)
	return c
}

// get waits for a reply as a handler does; a failed wait fails the test.
func get[T any](t testing.TB, r *Reply[T]) T {
	t.Helper()
	return coordtest.MustWait(t, r)
}

// commitErrs answers a commit as the OffsetCommit handler does: a failed
// wait for durability is the error of every partition that had succeeded.
func commitErrs(r *Reply[[][]error]) [][]error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs, err := r.Wait(ctx)
	for _, row := range errs {
		for j := range row {
			if row[j] == nil {
				row[j] = err
			}
		}
	}
	return errs
}

func commitReq(group string, gen int32, member string, offsets map[int32]int64) CommitRequest {
	ct := CommitTopic{Topic: "t"}
	for p, o := range offsets {
		md := "meta"
		ct.Partitions = append(ct.Partitions, CommitPartition{Partition: p, Offset: o, LeaderEpoch: 4, Metadata: &md, Timestamp: -1})
	}
	return CommitRequest{Group: group, Version: 8, Generation: gen, MemberID: member, Topics: []CommitTopic{ct}}
}

func commit(c *Coordinator, group string, gen int32, member string, offsets map[int32]int64) [][]error {
	return commitErrs(c.CommitOffsets(commitReq(group, gen, member, offsets)))
}

// fetch is an OffsetFetch of one group, waited for.
func fetch(c *Coordinator, req FetchRequest) ([]FetchedTopic, error) {
	res, err := c.FetchOffsets(req).Wait(context.Background())
	if err != nil {
		return nil, err
	}
	return res.Topics, res.Err
}

// deleteGroups answers a DeleteGroups as the handler does.
func deleteGroups(t testing.TB, c *Coordinator, ids ...string) []error {
	var out []error
	for _, r := range c.DeleteGroups(ids) {
		out = append(out, get(t, r))
	}
	return out
}

// groupOf is the group's state in its shard (nil: none, or not served).
func groupOf(c *Coordinator, id string) (g *Group) {
	_ = c.do(id, func(s *shard, _ time.Time) { g = s.groups[id] })
	return g
}

func fetched(t *testing.T, c *Coordinator, group string) map[string]FetchedPartition {
	t.Helper()
	ts, err := fetch(c, FetchRequest{Group: group, MemberEpoch: -1})
	require.NoError(t, err)
	out := map[string]FetchedPartition{}
	for _, ft := range ts {
		for _, p := range ft.Partitions {
			out[ft.Topic+"/"+string(rune('0'+p.Partition))] = p
		}
	}
	return out
}

func TestCoordinatorCommitsAreDurableAndReplayed(t *testing.T) {
	store := coordtest.NewMemLog()
	clk := &clock{now: time.Unix(1_000_000, 0)}
	c := startCoordinator(t, store, clk, testTopics)

	// No offsets topic yet: writes say so until FindCoordinator creates it.
	errs := commit(c, "g", -1, "", map[int32]int64{0: 1})
	require.ErrorIs(t, errs[0][0], ErrCoordinatorNotAvailable)
	require.NoError(t, c.EnsureTopic(context.Background()))
	require.Equal(t, int32(4), store.Partitions())

	store.SetAutoSync(false)
	reply := c.CommitOffsets(commitReq("g", -1, "", map[int32]int64{0: 5, 1: 7}))
	// Not acknowledged before it is durable.
	_, ready := reply.Ready()
	require.False(t, ready)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err := reply.Wait(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	cancel()
	store.Sync()
	errs = get(t, reply)
	require.NoError(t, errs[0][0])
	require.NoError(t, errs[0][1])
	store.SetAutoSync(true)

	// Per-partition refusals.
	big := string(make([]byte, 5000))
	res := commitErrs(c.CommitOffsets(CommitRequest{Group: "g", Generation: -1, Topics: []CommitTopic{
		{Topic: "t", Partitions: []CommitPartition{{Partition: 9, Offset: 1}, {Partition: 2, Offset: 1, Metadata: &big}}},
		{Topic: "nope", Partitions: []CommitPartition{{Partition: 0, Offset: 1}}},
	}}))
	require.ErrorIs(t, res[0][0], ErrUnknownTopicOrPartition)
	require.ErrorIs(t, res[0][1], ErrOffsetMetadataTooLarge)
	require.ErrorIs(t, res[1][0], ErrUnknownTopicOrPartition)
	// A member commit to a group that does not exist.
	require.ErrorIs(t, commit(c, "other", 3, "m", map[int32]int64{0: 1})[0][0], ErrIllegalGeneration)

	want := map[string]FetchedPartition{
		"t/0": {Partition: 0, Offset: 5, LeaderEpoch: 4, Metadata: "meta"},
		"t/1": {Partition: 1, Offset: 7, LeaderEpoch: 4, Metadata: "meta"},
	}
	require.Equal(t, want, fetched(t, c, "g"))
	ts, err := fetch(c, FetchRequest{Group: "g", Topics: []FetchTopic{{Topic: "t", Partitions: []int32{0, 2}}}})
	require.NoError(t, err)
	require.Equal(t, []FetchedTopic{{Topic: "t", Partitions: []FetchedPartition{
		{Partition: 0, Offset: 5, LeaderEpoch: 4, Metadata: "meta"}, {Partition: 2, Offset: -1, LeaderEpoch: -1}}}}, ts)

	// A restart replays the log.
	require.NoError(t, c.Close())
	c2 := startCoordinator(t, store, clk, testTopics)
	require.Equal(t, want, fetched(t, c2, "g"))
	ls, err := c2.ListGroups(nil, nil)
	require.NoError(t, err)
	require.Equal(t, []GroupListing{{Group: "g", ProtocolType: "", State: StateEmpty, Type: "classic"}}, ls)

	// Deleting the group writes tombstones: gone after the next restart.
	require.Equal(t, []error{nil}, deleteGroups(t, c2, "g"))
	require.ErrorIs(t, deleteGroups(t, c2, "g")[0], ErrGroupIDNotFound)
	require.NoError(t, c2.Close())
	c3 := startCoordinator(t, store, clk, testTopics)
	require.Empty(t, fetched(t, c3, "g"))
	ls, err = c3.ListGroups(nil, nil)
	require.NoError(t, err)
	require.Empty(t, ls)
}

func TestCoordinatorLoadInProgress(t *testing.T) {
	store := coordtest.NewMemLog()
	clk := &clock{now: time.Unix(1_000_000, 0)}
	// A commit to replay: an empty partition is never read, so the gate
	// would not hold the load.
	first := startCoordinator(t, store, clk, testTopics)
	require.NoError(t, first.EnsureTopic(t.Context()))
	require.NoError(t, commit(first, "other", -1, "", map[int32]int64{0: 1})[0][0])
	require.NoError(t, first.Close())
	release := store.GateReads()
	cfg := testConfig()
	cfg.Now = clk.Now
	c, err := New(cfg, store)
	require.NoError(t, err)
	c.Start()
	defer c.Close()
	require.ErrorIs(t, c.Ready(), ErrCoordinatorLoadInProgress)
	res := get(t, c.JoinGroup(joinReq("", "m")))
	require.ErrorIs(t, res.Err, ErrCoordinatorLoadInProgress)
	_, err = fetch(c, FetchRequest{Group: "g"})
	require.ErrorIs(t, err, ErrCoordinatorLoadInProgress)
	release()
	require.Eventually(t, func() bool { return c.Ready() == nil }, 10*time.Second, time.Millisecond)
}

// groupsOnTwoPartitions returns two group ids whose records go to
// different partitions of an n-partition offsets topic.
func groupsOnTwoPartitions(n int32) (string, string) {
	a := "ga"
	for i := 0; ; i++ {
		if b := fmt.Sprintf("g%d", i); PartitionFor(b, n) != PartitionFor(a, n) {
			return a, b
		}
	}
}

// committedOnTwoPartitions starts a coordinator on a 4-partition offsets
// topic and commits offset 7 for group a and 9 for group b, whose records
// go to different partitions.
func committedOnTwoPartitions(t *testing.T) (*coordtest.MemLog, *clock, *Coordinator, string, string) {
	t.Helper()
	store := coordtest.NewMemLog()
	clk := &clock{now: time.Unix(1_000_000, 0)}
	c := startCoordinator(t, store, clk, testTopics)
	require.NoError(t, c.EnsureTopic(t.Context()))
	a, b := groupsOnTwoPartitions(4)
	require.NoError(t, commit(c, a, -1, "", map[int32]int64{0: 7})[0][0])
	require.NoError(t, commit(c, b, -1, "", map[int32]int64{0: 9})[0][0])
	return store, clk, c, a, b
}

// A partition that cannot be replayed makes only its own groups
// unavailable, and is replayed once it can be read (issue 10 finding 7: one
// offline offsets partition used to disable every group until a restart).
func TestCoordinatorFailedReplayIsRetried(t *testing.T) {
	store, clk, c, a, b := committedOnTwoPartitions(t)
	require.NoError(t, c.Close())

	store.FailReads(PartitionFor(b, 4), errors.New("bad sector"))
	cfg := testConfig()
	cfg.Now, cfg.OffsetsTopicPartitions, cfg.TickInterval = clk.Now, 4, 10*time.Millisecond
	cfg.PartitionRecheckInterval = 10 * time.Millisecond
	c2, err := New(cfg, store)
	require.NoError(t, err)
	c2.SetTopics(testTopics)
	c2.Start()
	defer c2.Close()
	require.Eventually(t, func() bool { return c2.Ready() == nil }, 10*time.Second, time.Millisecond)
	require.EqualValues(t, 7, fetched(t, c2, a)["t/0"].Offset, "the other partitions' groups are served")
	_, err = fetch(c2, FetchRequest{Group: b, MemberEpoch: -1})
	require.ErrorIs(t, err, ErrCoordinatorNotAvailable)
	require.ErrorContains(t, err, "bad sector")
	require.ErrorIs(t, commit(c2, b, -1, "", map[int32]int64{0: 10})[0][0], ErrCoordinatorNotAvailable, "nor written")

	store.FailReads(-1, nil)
	require.Eventually(t, func() bool {
		ts, err := fetch(c2, FetchRequest{Group: b, MemberEpoch: -1})
		return err == nil && len(ts) == 1 && ts[0].Partitions[0].Offset == 9
	}, 10*time.Second, 10*time.Millisecond, "replayed once readable")
}

// restartWithAnUnreadablePartition commits offset 0 of t for group g,
// stops the coordinator, makes g's offsets partition unreadable and
// starts a new coordinator over store (mem or a wrapper of it) whose
// rechecks and ticks the test drives; it returns once that one is loaded.
func restartWithAnUnreadablePartition(t *testing.T, mem *coordtest.MemLog, store Storage, g string, offset int64) *Coordinator {
	t.Helper()
	clk := &clock{now: time.Unix(1_000_000, 0)}
	c := startCoordinator(t, mem, clk, testTopics)
	require.NoError(t, c.EnsureTopic(t.Context()))
	require.NoError(t, commit(c, g, -1, "", map[int32]int64{0: offset})[0][0])
	require.NoError(t, c.Close())

	mem.FailReads(PartitionFor(g, 4), errors.New("bad sector"))
	cfg := testConfig()
	cfg.Now, cfg.OffsetsTopicPartitions, cfg.TickInterval, cfg.PartitionRecheckInterval = clk.Now, 4, time.Hour, time.Hour
	c2, err := New(cfg, store)
	require.NoError(t, err)
	c2.SetTopics(testTopics)
	c2.Start()
	t.Cleanup(func() { _ = c2.Close() })
	require.Eventually(t, func() bool { return c2.Ready() == nil }, 5*time.Second, time.Millisecond)
	return c2
}

// countingReads counts the reads of one partition.
type countingReads struct {
	*coordtest.MemLog
	part  int32
	reads atomic.Int64
}

func (s *countingReads) Read(p int32, offset int64, maxBytes int) ([]byte, error) {
	if p == s.part {
		s.reads.Add(1)
	}
	return s.MemLog.Read(p, offset, maxBytes)
}

// A partition that keeps failing its replay is retried less and less
// often (each try replays it from the start on the driver, which also
// runs every group's timers), and still comes back once it can be read.
func TestFailingReplayBacksOff(t *testing.T) {
	mem := coordtest.NewMemLog()
	store := &countingReads{MemLog: mem, part: PartitionFor("g", 4)}
	c2 := restartWithAnUnreadablePartition(t, mem, store, "g", 7)
	require.EqualValues(t, 1, store.reads.Load(), "the load tried once")

	var tries []int
	for i := 1; i <= 40; i++ {
		before := store.reads.Load()
		c2.rt.Recheck()
		if store.reads.Load() > before {
			tries = append(tries, i)
		}
	}
	require.Equal(t, []int{1, 3, 7, 15, 31}, tries, "rechecks that retried the replay")

	mem.FailReads(-1, nil)
	for range 30 { // the longest a down partition waits between tries
		c2.rt.Recheck()
	}
	require.EqualValues(t, 7, fetched(t, c2, "g")["t/0"].Offset, "replayed once readable")
}

// After the log failed (a full disk) and healed, dropping what was never
// fsynced, the partition is reloaded from it: waits for durability work
// again, and state the log lost is not served.
func TestCoordinatorReloadsAPartitionThatHealed(t *testing.T) {
	store := coordtest.NewMemLog()
	clk := &clock{now: time.Unix(1_000_000, 0)}
	cfg := testConfig()
	cfg.Now, cfg.OffsetsTopicPartitions, cfg.TickInterval = clk.Now, 4, 10*time.Millisecond
	cfg.PartitionRecheckInterval = 10 * time.Millisecond
	c, err := New(cfg, store)
	require.NoError(t, err)
	c.SetTopics(testTopics)
	c.Start()
	defer c.Close()
	require.NoError(t, c.EnsureTopic(context.Background()))
	require.NoError(t, commit(c, "g", -1, "", map[int32]int64{0: 5})[0][0])

	store.SetAutoSync(false)
	pending := c.CommitOffsets(commitReq("g", -1, "", map[int32]int64{0: 6})) // appended, not fsynced
	store.FailWith(errors.New("no space left on device"))                     // the fsync fails
	require.ErrorIs(t, commitErrs(pending)[0][0], ErrCoordinatorNotAvailable)
	require.ErrorIs(t, commit(c, "g", -1, "", map[int32]int64{0: 7})[0][0], ErrCoordinatorNotAvailable)

	store.Heal(PartitionFor("g", 4))
	require.Eventually(t, func() bool {
		ts, err := fetch(c, FetchRequest{Group: "g", MemberEpoch: -1})
		return err == nil && len(ts) == 1 && ts[0].Partitions[0].Offset == 5
	}, 10*time.Second, 10*time.Millisecond, "reloaded: the commit the heal dropped is not served")
}

// A commit whose fsync is still pending (the log's high watermark is
// below it) is not mistaken for a rewrite of the log: the recheck keeps
// the partition (its members, the commit).
func TestCoordinatorRecheckKeepsPendingAppends(t *testing.T) {
	store := coordtest.NewMemLog()
	store.SetAutoSync(false)
	store.SetHWBounds(true)
	clk := &clock{now: time.Unix(1_000_000, 0)}
	c := startCoordinator(t, store, clk, testTopics)
	require.NoError(t, c.EnsureTopic(t.Context()))
	first := c.CommitOffsets(commitReq("g", -1, "", map[int32]int64{0: 5}))
	store.Sync()
	require.NoError(t, commitErrs(first)[0][0])

	pending := c.CommitOffsets(commitReq("g", -1, "", map[int32]int64{0: 6})) // fsync pending
	before := groupOf(c, "g")
	c.rt.Recheck()
	store.Sync()
	require.NoError(t, commitErrs(pending)[0][0])
	require.EqualValues(t, 6, fetched(t, c, "g")["t/0"].Offset)
	require.Same(t, before, groupOf(c, "g"), "the group was not unloaded")
}

// The same over a real broker log (flush.policy=always, where the high
// watermark waits for the fsync): a recheck right after each commit never
// unloads the partition or loses the commit.
func TestCoordinatorRecheckKeepsPendingAppendsRealLog(t *testing.T) {
	b, err := replica.Open(replica.Options{DataDir: "/data", FS: vfs.NewMem()})
	require.NoError(t, err)
	defer b.Close()
	c := brokerCoordinator(t, b)
	p := PartitionFor("g", 4)
	var first *Group
	for i := 0; i < 100; i++ {
		require.NoError(t, commit(c, "g", -1, "", map[int32]int64{0: int64(i)})[0][0])
		if first == nil { // before the first recheck, which must not unload it either
			first = groupOf(c, "g")
			require.NotNil(t, first)
		}
		c.rt.Recheck()
		g := groupOf(c, "g")
		require.Same(t, first, g, "recheck %d unloaded the group", i)
		require.NoError(t, c.rt.Status(p))
		require.EqualValues(t, i, fetched(t, c, "g")["t/0"].Offset)
	}
}

// A real log that fails an fsync and heals: the coordinator reloads the
// partition, so the commit that was never durable is not served.
func TestCoordinatorReloadsAfterTheLogHealed(t *testing.T) {
	faults := vfs.NewFaults(vfs.NewMem())
	b, err := replica.Open(replica.Options{DataDir: "/data", FS: faults, HealInterval: time.Hour})
	require.NoError(t, err)
	defer b.Close()
	c := brokerCoordinator(t, b)
	require.NoError(t, commit(c, "g", -1, "", map[int32]int64{0: 5})[0][0])

	dir := fmt.Sprintf("/%s-%d/", OffsetsTopic, PartitionFor("g", 4))
	var failing atomic.Bool
	failing.Store(true)
	faults.SetInjector(func(op vfs.Op, path string) error {
		if failing.Load() && op == vfs.OpSync && strings.Contains(path, dir) {
			return syscall.EIO
		}
		return nil
	})
	require.Error(t, commit(c, "g", -1, "", map[int32]int64{0: 6})[0][0], "the fsync failed")
	failing.Store(false)
	require.Zero(t, b.HealNow())
	c.rt.Recheck()
	require.EqualValues(t, 5, fetched(t, c, "g")["t/0"].Offset, "the commit that was never durable is gone")
}

// brokerCoordinator runs a coordinator over a real broker's offsets topic
// (4 partitions); the test drives rechecks and ticks itself.
func brokerCoordinator(t *testing.T, b *replica.Manager) *Coordinator {
	t.Helper()
	var n atomic.Int32
	store := &BrokerStorage{Broker: b,
		PartitionCount: n.Load,
		CreateTopic: func(_ context.Context, parts int32, configs map[string]string) error {
			for i := int32(0); i < parts; i++ {
				if _, err := b.EnsurePartition(replica.TopicPartition{Topic: OffsetsTopic, Partition: i}, configs); err != nil {
					return err
				}
			}
			n.Store(parts)
			return nil
		}}
	cfg := testConfig()
	cfg.Now = (&clock{now: time.Unix(1_000_000, 0)}).Now
	cfg.OffsetsTopicPartitions, cfg.TickInterval, cfg.PartitionRecheckInterval = 4, time.Hour, time.Hour
	c, err := New(cfg, store)
	require.NoError(t, err)
	c.SetTopics(testTopics)
	c.Start()
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.EnsureTopic(t.Context()))
	return c
}

// halfReadable serves partition part only up to upTo while broken.
type halfReadable struct {
	*coordtest.MemLog
	part   int32
	upTo   int64
	broken atomic.Bool
}

func (h *halfReadable) Read(p int32, offset int64, maxBytes int) ([]byte, error) {
	if h.broken.Load() && p == h.part {
		if offset < h.upTo {
			return h.MemLog.Read(p, offset, 1) // one batch at a time
		}
		return nil, errors.New("input/output error")
	}
	return h.MemLog.Read(p, offset, maxBytes)
}

// A partition that could be replayed only in part keeps nothing of it:
// its groups, rebuilt from the readable prefix, would be stale, and the
// sweep would write tombstones from them over the newer records. Here the
// prefix holds an old Empty group and a commit 8 days old; the unreadable
// rest the group active again and a commit an hour old.
func TestPartialReplayServesAndWritesNothing(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprint("broken=", broken), func(t *testing.T) {
			store := coordtest.NewMemLog()
			_, _ = store.Create(t.Context(), 4)
			now := time.Unix(1_000_000_000, 0)
			day := 24 * time.Hour
			p := PartitionFor("g", 4)
			meta := func(gen int32, since time.Time, members int) []byte {
				v := kmsg.NewGroupMetadataValue()
				v.Version, v.ProtocolType, v.Generation, v.CurrentStateTimestamp = 3, "consumer", gen, since.UnixMilli()
				proto := "range"
				v.Protocol = &proto
				for i := 0; i < members; i++ {
					m := kmsg.NewGroupMetadataValueMember()
					m.MemberID, m.ClientID, m.ClientHost = "m1", "c", "/h"
					m.SessionTimeoutMillis, m.RebalanceTimeoutMillis = 45000, 60000
					v.Members = append(v.Members, m)
				}
				return v.AppendTo(nil)
			}
			off := func(o int64, at time.Time) []byte {
				return encodeOffsetValue(&offsetEntry{offset: o, commitTime: at.UnixMilli(), expireTime: -1})
			}
			for _, r := range []batch.Record{
				{Key: encodeGroupKey("g"), Value: meta(3, now.Add(-30*day), 0)},
				{Key: encodeOffsetKey("g", "t", 0), Value: off(5, now.Add(-8*day))},
				{Key: encodeGroupKey("g"), Value: meta(4, now.Add(-time.Hour), 1)},
				{Key: encodeOffsetKey("g", "t", 0), Value: off(900, now.Add(-time.Hour))},
			} {
				_, err := store.Append(p, testBatch(now, r))
				require.NoError(t, err)
			}
			h := &halfReadable{MemLog: store, part: p, upTo: 2}
			h.broken.Store(broken)
			clk := &clock{now: now}
			cfg := testConfig()
			cfg.Now, cfg.OffsetsTopicPartitions, cfg.TickInterval, cfg.PartitionRecheckInterval = clk.Now, 4, time.Hour, time.Hour
			cfg.OffsetsRetention, cfg.RetentionCheckInterval = 7*day, time.Minute
			c, err := New(cfg, h)
			require.NoError(t, err)
			c.SetTopics(testTopics)
			c.Start()
			defer c.Close()
			require.Eventually(t, func() bool { return c.Ready() == nil }, 5*time.Second, time.Millisecond)
			groups, err := c.ListGroups(nil, nil)
			require.NoError(t, err)
			require.Len(t, groups, map[bool]int{false: 1, true: 0}[broken], "a group of a partition not replayed is not listed")
			c.Tick(clk.add(2 * time.Minute)) // the first retention sweep
			h.broken.Store(false)
			c.rt.Recheck()
			require.EqualValues(t, 900, fetched(t, c, "g")["t/0"].Offset, "the group's newest commit survives")
		})
	}
}

// Offsets of a topic deleted (and created again) while their offsets
// partition could not be replayed are purged when it is: they must not be
// served for the new topic of that name.
func TestRecheckPurgesOffsetsOfDeletedTopics(t *testing.T) {
	store := coordtest.NewMemLog()
	c2 := restartWithAnUnreadablePartition(t, store, store, "g", 77)
	c2.TopicDeleted("t")
	c2.SetTopics([]TopicInfo{{Name: "t", ID: tid("t-new"), Partitions: 3}, {Name: "u", ID: tid("u"), Partitions: 1}})
	store.FailReads(-1, nil)
	c2.rt.Recheck()
	_, ok := fetched(t, c2, "g")["t/0"]
	require.False(t, ok, "the deleted topic's offset is not served for the new topic")
}

func TestCoordinatorDeletedTopicsLoseTheirOffsets(t *testing.T) {
	store := coordtest.NewMemLog()
	clk := &clock{now: time.Unix(1_000_000, 0)}
	c := startCoordinator(t, store, clk, testTopics)
	require.NoError(t, c.EnsureTopic(context.Background()))
	require.NoError(t, commit(c, "g", -1, "", map[int32]int64{0: 1})[0][0])
	u := commitErrs(c.CommitOffsets(CommitRequest{Group: "g", Generation: -1, Topics: []CommitTopic{{Topic: "u", Partitions: []CommitPartition{{Partition: 0, Offset: 9}}}}}))
	require.NoError(t, u[0][0])
	c.SetTopics(testTopics[:1])
	c.TopicDeleted("u")
	require.Len(t, fetched(t, c, "g"), 1)
	require.NoError(t, c.Close())

	// "t" is deleted and recreated (new id) while the coordinator is down:
	// replay drops the stale offsets.
	recreated := []TopicInfo{{Name: "t", ID: tid("t2"), Partitions: 3}}
	c2 := startCoordinator(t, store, clk, recreated)
	require.Empty(t, fetched(t, c2, "g"))
	require.NoError(t, c2.Close())
	c3 := startCoordinator(t, store, clk, recreated)
	require.Empty(t, fetched(t, c3, "g"), "the purge wrote tombstones")
}

func TestCoordinatorOneProtocolPerGroup(t *testing.T) {
	store := coordtest.NewMemLog()
	clk := &clock{now: time.Unix(1_000_000, 0)}
	c := startCoordinator(t, store, clk, testTopics)
	require.NoError(t, c.EnsureTopic(context.Background()))

	// A consumer (KIP-848) group refuses classic joins while it has members.
	hb := ConsumerHeartbeatRequest{Group: "cg", Version: 1, MemberID: "m1", RebalanceTimeout: time.Second,
		SubscribedTopicNames: []string{"t"}, Owned: []TopicPartitions{}}
	res := get(t, c.ConsumerHeartbeat(hb))
	require.NoError(t, res.Err)
	require.Equal(t, int32(1), res.MemberEpoch)
	jr := joinReq("", "m")
	jr.Group = "cg"
	require.ErrorIs(t, get(t, c.JoinGroup(jr)).Err, ErrInconsistentGroupProtocol)
	ls, err := c.ListGroups([]string{"stable"}, []string{"CONSUMER"})
	require.NoError(t, err)
	require.Equal(t, []GroupListing{{Group: "cg", ProtocolType: "consumer", State: StateStable, Type: "consumer"}}, ls)
	cd := c.ConsumerGroupDescribe([]string{"cg"})
	require.NoError(t, cd[0].Err)
	require.Equal(t, AssignorUniform, cd[0].Assignor)
	require.Len(t, cd[0].Members[0].Assignment, 1)
	require.ErrorIs(t, c.DescribeGroups([]string{"cg"})[0].Err, ErrGroupIDNotFound)
	require.ErrorIs(t, deleteGroups(t, c, "cg")[0], ErrNonEmptyGroup)

	// Commits from the member; offsets of a subscribed topic cannot be deleted.
	r := commitErrs(c.CommitOffsets(CommitRequest{Group: "cg", Version: 9, Generation: 1, MemberID: "m1",
		Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Partition: 0, Offset: 3}}}}}))
	require.NoError(t, r[0][0])
	dres := get(t, c.DeleteOffsets("cg", []FetchTopic{{Topic: "t", Partitions: []int32{0}}}))
	require.NoError(t, dres.Err)
	require.ErrorIs(t, dres.Partitions[0][0], ErrGroupSubscribedToTopic)

	// Once empty, it can become a classic group, keeping its offsets.
	hb.MemberEpoch = -1
	require.NoError(t, get(t, c.ConsumerHeartbeat(hb)).Err)
	require.ErrorIs(t, get(t, c.JoinGroup(jr)).Err, ErrMemberIDRequired)
	require.Equal(t, int64(3), fetched(t, c, "cg")["t/0"].Offset)

	// And a classic group with members refuses consumer heartbeats.
	hb2 := hb
	hb2.Group, hb2.MemberEpoch = "cg", 0
	jr.MemberID = ""
	jr.Version = 3 // no MEMBER_ID_REQUIRED round
	c.JoinGroup(jr)
	require.ErrorIs(t, get(t, c.ConsumerHeartbeat(hb2)).Err, ErrGroupIDNotFound)
	// A regular heartbeat to a group that does not exist: the member is
	// unknown (e.g. after a coordinator restart) and must rejoin.
	hb3 := hb
	hb3.Group, hb3.MemberEpoch = "nope", 4
	require.ErrorIs(t, get(t, c.ConsumerHeartbeat(hb3)).Err, ErrUnknownMemberID)
}

func TestCoordinatorStorageFailure(t *testing.T) {
	store := coordtest.NewMemLog()
	clk := &clock{now: time.Unix(1_000_000, 0)}
	c := startCoordinator(t, store, clk, testTopics)
	require.NoError(t, c.EnsureTopic(context.Background()))
	store.FailWith(errors.New("disk on fire"))
	errs := commit(c, "g", -1, "", map[int32]int64{0: 1})
	require.ErrorIs(t, errs[0][0], ErrCoordinatorNotAvailable)
	_, err := c.Heartbeat(HeartbeatRequest{Group: "g"}).Wait(t.Context())
	require.ErrorIs(t, err, ErrCoordinatorNotAvailable, "no reply is released while the last append failed")
	res, err := c.FetchOffsets(FetchRequest{Group: "g", MemberEpoch: -1}).Wait(t.Context())
	require.ErrorIs(t, err, ErrCoordinatorNotAvailable)
	require.Empty(t, res.Topics, "a failed commit is not applied")

	// The log works again, but the shard's state may be ahead of it (a
	// rebalance is applied before its metadata is appended): it serves
	// again only once replayed.
	store.FailWith(nil)
	require.ErrorIs(t, commit(c, "g", -1, "", map[int32]int64{0: 2})[0][0], ErrCoordinatorNotAvailable)
	c.rt.Recheck()
	require.NoError(t, commit(c, "g", -1, "", map[int32]int64{0: 3})[0][0])
	require.EqualValues(t, 3, fetched(t, c, "g")["t/0"].Offset)
}

func TestCoordinatorCloseAnswersParkedRequests(t *testing.T) {
	store := coordtest.NewMemLog()
	clk := &clock{now: time.Unix(1_000_000, 0)}
	c := startCoordinator(t, store, clk, testTopics)
	require.NoError(t, c.EnsureTopic(context.Background()))
	req := joinReq("", "m")
	req.Version = 3
	ch := c.JoinGroup(req)
	require.NoError(t, c.Close())
	require.ErrorIs(t, get(t, ch).Err, ErrCoordinatorNotAvailable)
	require.ErrorIs(t, c.Ready(), ErrCoordinatorNotAvailable)
}

// FuzzReplayRecord feeds arbitrary record keys and values to replay: bad
// bytes in the offsets topic are skipped, never a panic.
func FuzzReplayRecord(f *testing.F) {
	f.Add(encodeOffsetKey("g", "t", 0), encodeOffsetValue(&offsetEntry{offset: 5, leaderEpoch: 1, metadata: "m", expireTime: -1}))
	f.Add(encodeGroupKey("g"), newClassic(&Config{}, time.Unix(0, 0)).metadataValue().AppendTo(nil))
	f.Add(encodeGroupKey("g"), []byte(nil))
	f.Add([]byte{0, 9, 0, 1, 'g'}, []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		cfg := testConfig()
		s := &shard{cfg: &cfg, groups: map[string]*Group{}, txnOffsets: map[int64]map[string]map[tpKey]*offsetEntry{}}
		s.replayRecord(time.Unix(0, 0), key, value, 0, -1)
		s.replayRecord(time.Unix(0, 0), key, value, 1, 7) // as a transactional commit
		s.endTxnOffsets(time.Unix(0, 0), 7, true)
		_, _, _ = decodeRecord(key, value)
	})
}

// testBatch wraps records in a batch as the runtime writes them.
func testBatch(now time.Time, recs ...batch.Record) []byte {
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
	}
	return batch.Build(batch.Header{FirstTimestamp: now.UnixMilli(), MaxTimestamp: now.UnixMilli(),
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1}, recs)
}

// Leadership of an offsets partition moves away and back: its groups are
// answered NOT_COORDINATOR (a parked join too) while another node
// coordinates them, and replayed from the log when it comes back.
func TestCoordinatorPartitionMovesAndComesBack(t *testing.T) {
	_, _, c, a, b := committedOnTwoPartitions(t)
	req := joinReq("", "m")
	req.Group, req.Version = a, 3
	parked := c.JoinGroup(req)

	c.UnloadPartition(PartitionFor(a, 4))
	require.ErrorIs(t, get(t, parked).Err, ErrNotCoordinator)
	_, err := fetch(c, FetchRequest{Group: a, MemberEpoch: -1})
	require.ErrorIs(t, err, ErrNotCoordinator)
	require.EqualValues(t, 9, fetched(t, c, b)["t/0"].Offset, "the other partitions are served")
	ls, err := c.ListGroups(nil, nil)
	require.NoError(t, err)
	require.Equal(t, []GroupListing{{Group: b, State: StateEmpty, Type: "classic"}}, ls)

	require.NoError(t, c.LoadPartition(PartitionFor(a, 4)))
	require.EqualValues(t, 7, fetched(t, c, a)["t/0"].Offset)
}

// gatedPartition holds the replay of one partition until released.
type gatedPartition struct {
	*coordtest.MemLog
	part int32
	gate chan struct{}
}

func (s *gatedPartition) Read(p int32, offset int64, maxBytes int) ([]byte, error) {
	if p == s.part {
		<-s.gate
	}
	return s.MemLog.Read(p, offset, maxBytes)
}

// grownTopic returns a coordinator whose offsets topic grew from 3 to 4
// partitions, and a group g whose offset (t-0 at 7) is in partition 2, its
// hash partition with 3, not with 4. The replay of partition 2 waits
// for release.
func grownTopic(t *testing.T) (c *Coordinator, g string, mem *coordtest.MemLog, release func()) {
	g = "ga"
	for i := 0; PartitionFor(g, 3) != 2 || PartitionFor(g, 4) >= 2; i++ {
		g = fmt.Sprintf("g%d", i)
	}
	now := time.Unix(1_000_000, 0)
	mem = coordtest.NewMemLog()
	_, _ = mem.Create(t.Context(), 4)
	e := &offsetEntry{offset: 7, leaderEpoch: -1, commitTime: now.UnixMilli(), expireTime: -1, topicID: tid("t")}
	_, err := mem.Append(2, testBatch(now, batch.Record{Key: encodeOffsetKey(g, "t", 0), Value: encodeOffsetValue(e)}))
	require.NoError(t, err)

	store := &gatedPartition{MemLog: mem, part: 2, gate: make(chan struct{})}
	cfg := testConfig()
	cfg.Now, cfg.TickInterval = func() time.Time { return now }, time.Hour
	c, err = New(cfg, store)
	require.NoError(t, err)
	c.SetTopics(testTopics)
	c.Start()
	t.Cleanup(func() { _ = c.Close() })
	var once sync.Once
	release = func() { once.Do(func() { close(store.gate) }) }
	t.Cleanup(release) // before Close, which waits for the replay
	return c, g, mem, release
}

// After the offsets topic grew, a group's records may live in a partition
// other than its hash one. While that partition is still replaying, the
// group must not be served from its (already replayed) hash partition: a
// commit acknowledged there would be hidden once the old partition's copy
// is routed to.
func TestGroupOutsideItsHashPartitionWaitsForItsReplay(t *testing.T) {
	c, g, mem, release := grownTopic(t)
	// Partitions 0 and 1 are replayed (both empty) before 2, which holds.
	require.Eventually(t, func() bool { return c.rt.Status(PartitionFor(g, 4)) == nil }, 10*time.Second, time.Millisecond)
	require.ErrorIs(t, commit(c, g, -1, "", map[int32]int64{0: 9})[0][0], ErrCoordinatorLoadInProgress)
	_, err := fetch(c, FetchRequest{Group: g, MemberEpoch: -1})
	require.ErrorIs(t, err, ErrCoordinatorLoadInProgress)

	release()
	<-c.Loaded()
	require.EqualValues(t, 7, fetched(t, c, g)["t/0"].Offset)
	require.NoError(t, commit(c, g, -1, "", map[int32]int64{0: 9})[0][0])
	require.EqualValues(t, 9, fetched(t, c, g)["t/0"].Offset)
	_, n := mem.Batches(2, 0)
	require.Equal(t, 2, n, "the commit went to the partition holding the group")
}

// The same while the partition holding the group is unloaded (it moved,
// or the runtime reloads it after a heal or a failed append): the group
// stays routed there, not to its hash partition.
func TestGroupOutsideItsHashPartitionKeepsItsHomeWhileUnloaded(t *testing.T) {
	c, g, _, release := grownTopic(t)
	release()
	<-c.Loaded()
	c.UnloadPartition(2)
	require.ErrorIs(t, commit(c, g, -1, "", map[int32]int64{0: 9})[0][0], ErrNotCoordinator)
	require.NoError(t, c.LoadPartition(2))
	require.EqualValues(t, 7, fetched(t, c, g)["t/0"].Offset)
}
