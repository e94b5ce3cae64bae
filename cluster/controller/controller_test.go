package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/meta"
	"github.com/moonmq/moonmq/engine/topicconfig"
)

func testLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openAt(t testing.TB, opts Options) *Controller {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	start := time.Now()
	c, err := Open(testCtx(t), opts)
	require.NoError(t, err)
	t.Logf("Open(%s) took %v", opts.Dir, time.Since(start))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func openTest(t testing.TB) (*Controller, string) {
	dir := t.TempDir()
	return openAt(t, Options{Dir: dir, NodeID: 1}), dir
}

func TestOpenFreshAndRestart(t *testing.T) {
	dir := t.TempDir()
	c := openAt(t, Options{Dir: dir, NodeID: 3})
	require.True(t, c.IsLeader())
	require.EqualValues(t, 3, c.NodeID())
	id := c.ClusterID()
	require.Len(t, id, 22)
	require.Empty(t, c.Topics())
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")
	require.False(t, c.IsLeader())
	_, err := c.CreateTopic(testCtx(t), "t", 1, 1, nil, false)
	require.ErrorIs(t, err, metadata.ErrClosed)

	c = openAt(t, Options{Dir: dir, NodeID: 3})
	require.Equal(t, id, c.ClusterID(), "cluster id is stable across restarts")
	require.NoError(t, c.Close())

	_, err = Open(testCtx(t), Options{Dir: dir, NodeID: 4, Logger: testLogger()})
	require.ErrorIs(t, err, ErrNodeIDMismatch)

	_, err = Open(testCtx(t), Options{NodeID: 1})
	require.Error(t, err)
	_, err = Open(testCtx(t), Options{Dir: dir, NodeID: -1})
	require.Error(t, err)
}

func TestCreateTopic(t *testing.T) {
	c, _ := openTest(t)
	ctx := testCtx(t)

	top, err := c.CreateTopic(ctx, "orders", 3, 1, map[string]string{topicconfig.RetentionMs: "1000"}, false)
	require.NoError(t, err)
	require.Equal(t, "orders", top.Name)
	require.NotEqual(t, [16]byte{}, top.ID)
	require.False(t, top.Internal)
	require.Equal(t, map[string]string{topicconfig.RetentionMs: "1000"}, top.Configs)
	require.Len(t, top.Partitions, 3)
	for i, p := range top.Partitions {
		require.Equal(t, metadata.Partition{ID: int32(i), Replicas: []int32{1}, Leader: 1, LeaderEpoch: 0, ISR: []int32{1}}, p)
	}
	got, ok := c.Topic("orders")
	require.True(t, ok)
	require.Equal(t, top, got)

	// Defaults: -1 partitions and -1 replication factor.
	def, err := c.CreateTopic(ctx, "defaults", -1, -1, nil, false)
	require.NoError(t, err)
	require.Len(t, def.Partitions, 1)
	require.Equal(t, map[string]string{}, def.Configs)

	internal, err := c.CreateTopic(ctx, metadata.ConsumerOffsetsTopic, 2, 1, nil, false)
	require.NoError(t, err)
	require.True(t, internal.Internal)

	// validateOnly returns the would-be topic and changes nothing.
	v, err := c.CreateTopic(ctx, "dry", 2, 1, nil, true)
	require.NoError(t, err)
	require.Len(t, v.Partitions, 2)
	_, ok = c.Topic("dry")
	require.False(t, ok)

	names := []string{}
	for _, t := range c.Topics() {
		names = append(names, t.Name)
	}
	require.Equal(t, []string{metadata.ConsumerOffsetsTopic, "defaults", "orders"}, names)

	// Returned topics are copies.
	got.Partitions[0].Replicas[0] = 99
	got.Configs["x"] = "y"
	again, _ := c.Topic("orders")
	require.Equal(t, top, again)
}

func TestCreateTopicErrors(t *testing.T) {
	c, _ := openTest(t)
	ctx := testCtx(t)
	_, err := c.CreateTopic(ctx, "a.b", 1, 1, nil, false)
	require.NoError(t, err)

	long := make([]byte, MaxTopicNameLen+1)
	for i := range long {
		long[i] = 'x'
	}
	for _, tc := range []struct {
		name       string
		partitions int32
		rf         int16
		configs    map[string]string
		want       error
	}{
		{"a.b", 1, 1, nil, metadata.ErrTopicExists},
		{"a_b", 1, 1, nil, metadata.ErrInvalidTopicName}, // collides with a.b
		{"", 1, 1, nil, metadata.ErrInvalidTopicName},
		{".", 1, 1, nil, metadata.ErrInvalidTopicName},
		{"..", 1, 1, nil, metadata.ErrInvalidTopicName},
		{"has space", 1, 1, nil, metadata.ErrInvalidTopicName},
		{"slash/y", 1, 1, nil, metadata.ErrInvalidTopicName},
		{"ünïcode", 1, 1, nil, metadata.ErrInvalidTopicName},
		{string(long), 1, 1, nil, metadata.ErrInvalidTopicName},
		{"bad name", 0, 0, nil, metadata.ErrInvalidTopicName}, // the name is reported first
		{"p0", 0, 1, nil, metadata.ErrInvalidPartitions},
		{"pneg", -2, 1, nil, metadata.ErrInvalidPartitions},
		{"pbig", metadata.MaxPartitions + 1, 1, nil, metadata.ErrInvalidPartitions},
		{"rf0", 1, 0, nil, metadata.ErrInvalidReplicationFactor},
		{"rf2", 1, 2, nil, metadata.ErrInvalidReplicationFactor}, // one broker
		{"rfneg", 1, -3, nil, metadata.ErrInvalidReplicationFactor},
		{"cfg", 1, 1, map[string]string{"no.such.key": "1"}, metadata.ErrInvalidConfig},
		{"cfg2", 1, 1, map[string]string{topicconfig.RetentionMs: "soon"}, metadata.ErrInvalidConfig},
	} {
		for _, validateOnly := range []bool{false, true} {
			_, err := c.CreateTopic(ctx, tc.name, tc.partitions, tc.rf, tc.configs, validateOnly)
			require.ErrorIs(t, err, tc.want, "%q %d %d %v", tc.name, tc.partitions, tc.rf, tc.configs)
		}
	}
	_, err = c.CreateTopic(ctx, "cfg3", 1, 1, map[string]string{topicconfig.CleanupPolicy: "shred"}, false)
	require.ErrorIs(t, err, topicconfig.ErrInvalid, "config errors also match topicconfig.ErrInvalid")
	require.Contains(t, err.Error(), "cleanup.policy")

	// Exactly 249 characters and every allowed character class are fine.
	_, err = c.CreateTopic(ctx, string(long[:MaxTopicNameLen]), 1, 1, nil, false)
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, "Az09._-", 1, 1, nil, false)
	require.NoError(t, err)
	require.Len(t, c.Topics(), 3)
}

func TestDeleteTopic(t *testing.T) {
	c, _ := openTest(t)
	ctx := testCtx(t)
	created, err := c.CreateTopic(ctx, "gone", 2, 1, nil, false)
	require.NoError(t, err)
	deleted, err := c.DeleteTopic(ctx, "gone")
	require.NoError(t, err)
	require.Equal(t, created, deleted)
	_, ok := c.Topic("gone")
	require.False(t, ok)
	_, err = c.DeleteTopic(ctx, "gone")
	require.ErrorIs(t, err, metadata.ErrUnknownTopic)

	// The name (and a colliding one) can be reused, with a new id.
	again, err := c.CreateTopic(ctx, "gone", 1, 1, nil, false)
	require.NoError(t, err)
	require.NotEqual(t, created.ID, again.ID)
}

func TestCreatePartitions(t *testing.T) {
	c, _ := openTest(t)
	ctx := testCtx(t)
	_, err := c.CreateTopic(ctx, "grow", 2, 1, nil, false)
	require.NoError(t, err)

	dry, err := c.CreatePartitions(ctx, "grow", 4, true)
	require.NoError(t, err)
	require.Len(t, dry.Partitions, 4)
	cur, _ := c.Topic("grow")
	require.Len(t, cur.Partitions, 2)

	top, err := c.CreatePartitions(ctx, "grow", 5, false)
	require.NoError(t, err)
	require.Len(t, top.Partitions, 5)
	for i, p := range top.Partitions {
		require.EqualValues(t, i, p.ID)
		require.Equal(t, []int32{1}, p.Replicas)
		require.EqualValues(t, 1, p.Leader)
	}

	for _, total := range []int32{5, 4, 0, -1, metadata.MaxPartitions + 1} {
		_, err = c.CreatePartitions(ctx, "grow", total, false)
		require.ErrorIs(t, err, metadata.ErrInvalidPartitions, "total %d", total)
	}
	_, err = c.CreatePartitions(ctx, "nope", 3, false)
	require.ErrorIs(t, err, metadata.ErrUnknownTopic)
}

func TestAlterConfigs(t *testing.T) {
	c, _ := openTest(t)
	ctx := testCtx(t)
	_, err := c.CreateTopic(ctx, "cfg", 1, 1, map[string]string{topicconfig.RetentionMs: "1000"}, false)
	require.NoError(t, err)

	top, err := c.AlterConfigs(ctx, "cfg", []metadata.ConfigOp{
		{Key: topicconfig.SegmentBytes, Op: metadata.OpSet, Value: "2048"},
		{Key: topicconfig.RetentionMs, Op: metadata.OpDelete},
		{Key: topicconfig.CleanupPolicy, Op: metadata.OpAppend, Value: "compact"}, // appends to the default "delete"
	}, false)
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		topicconfig.SegmentBytes:  "2048",
		topicconfig.CleanupPolicy: "delete,compact",
	}, top.Configs)

	top, err = c.AlterConfigs(ctx, "cfg", []metadata.ConfigOp{
		{Key: topicconfig.CleanupPolicy, Op: metadata.OpSubtract, Value: "delete"},
	}, false)
	require.NoError(t, err)
	require.Equal(t, "compact", top.Configs[topicconfig.CleanupPolicy])

	// validateOnly changes nothing.
	dry, err := c.AlterConfigs(ctx, "cfg", []metadata.ConfigOp{{Key: topicconfig.SegmentBytes, Op: metadata.OpSet, Value: "4096"}}, true)
	require.NoError(t, err)
	require.Equal(t, "4096", dry.Configs[topicconfig.SegmentBytes])
	cur, _ := c.Topic("cfg")
	require.Equal(t, "2048", cur.Configs[topicconfig.SegmentBytes])

	for _, tc := range []struct {
		ops  []metadata.ConfigOp
		want error
	}{
		{[]metadata.ConfigOp{{Key: "no.such", Op: metadata.OpSet, Value: "1"}}, metadata.ErrInvalidConfig},
		{[]metadata.ConfigOp{{Key: "no.such", Op: metadata.OpDelete}}, metadata.ErrInvalidConfig},
		{[]metadata.ConfigOp{{Key: topicconfig.SegmentBytes, Op: metadata.OpSet, Value: "1"}}, metadata.ErrInvalidConfig}, // below minimum
		{[]metadata.ConfigOp{{Key: topicconfig.SegmentBytes, Op: metadata.OpAppend, Value: "1"}}, metadata.ErrInvalidConfig},
		{[]metadata.ConfigOp{{Key: topicconfig.CleanupPolicy, Op: metadata.OpSubtract, Value: "compact"}}, metadata.ErrInvalidConfig}, // empty list
		{[]metadata.ConfigOp{
			{Key: topicconfig.SegmentBytes, Op: metadata.OpSet, Value: "4096"},
			{Key: topicconfig.SegmentBytes, Op: metadata.OpDelete},
		}, metadata.ErrInvalidConfig},
		{[]metadata.ConfigOp{{Key: topicconfig.SegmentBytes, Op: metadata.OpType(9), Value: "4096"}}, metadata.ErrInvalidRequest},
	} {
		_, err := c.AlterConfigs(ctx, "cfg", tc.ops, false)
		require.ErrorIs(t, err, tc.want, "%+v", tc.ops)
	}
	cur, _ = c.Topic("cfg")
	require.Equal(t, map[string]string{topicconfig.SegmentBytes: "2048", topicconfig.CleanupPolicy: "compact"}, cur.Configs)

	_, err = c.AlterConfigs(ctx, "nope", nil, false)
	require.ErrorIs(t, err, metadata.ErrUnknownTopic)

	// Legacy AlterConfigs replaces the whole set.
	top, err = c.ReplaceConfigs(ctx, "cfg", map[string]string{topicconfig.MaxMessageBytes: "100"}, false)
	require.NoError(t, err)
	require.Equal(t, map[string]string{topicconfig.MaxMessageBytes: "100"}, top.Configs)
	_, err = c.ReplaceConfigs(ctx, "cfg", map[string]string{topicconfig.MaxMessageBytes: "x"}, false)
	require.ErrorIs(t, err, metadata.ErrInvalidConfig)
	top, err = c.ReplaceConfigs(ctx, "cfg", nil, false)
	require.NoError(t, err)
	require.Empty(t, top.Configs)
	_, err = c.ReplaceConfigs(ctx, "nope", nil, false)
	require.ErrorIs(t, err, metadata.ErrUnknownTopic)
}

func TestAllocateProducerIDs(t *testing.T) {
	dir := t.TempDir()
	c := openAt(t, Options{Dir: dir, NodeID: 1})
	ctx := testCtx(t)
	first, err := c.AllocateProducerIDs(ctx, 10)
	require.NoError(t, err)
	require.EqualValues(t, 0, first)
	second, err := c.AllocateProducerIDs(ctx, 1)
	require.NoError(t, err)
	require.EqualValues(t, 10, second)
	for _, n := range []int64{0, -1, MaxProducerIDBlock + 1} {
		_, err = c.AllocateProducerIDs(ctx, n)
		require.ErrorIs(t, err, metadata.ErrInvalidRequest)
	}
	require.NoError(t, c.Close())

	c = openAt(t, Options{Dir: dir, NodeID: 1})
	third, err := c.AllocateProducerIDs(ctx, 5)
	require.NoError(t, err)
	require.EqualValues(t, 11, third, "the counter survives a restart")
}

func TestPersistenceAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	c := openAt(t, Options{Dir: dir, NodeID: 2})
	ctx := testCtx(t)
	a, err := c.CreateTopic(ctx, "a", 3, 1, map[string]string{topicconfig.RetentionMs: "5"}, false)
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, "b", 1, 1, nil, false)
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, "c", 1, 1, nil, false)
	require.NoError(t, err)
	_, err = c.DeleteTopic(ctx, "b")
	require.NoError(t, err)
	a, err = c.CreatePartitions(ctx, "a", 4, false)
	require.NoError(t, err)
	a, err = c.AlterConfigs(ctx, "a", []metadata.ConfigOp{{Key: topicconfig.FlushPolicy, Op: metadata.OpSet, Value: "interval"}}, false)
	require.NoError(t, err)
	before := c.Topics()
	cluster := c.ClusterID()
	require.NoError(t, c.Close())

	c = openAt(t, Options{Dir: dir, NodeID: 2})
	require.Equal(t, before, c.Topics())
	require.Equal(t, cluster, c.ClusterID())
	got, ok := c.Topic("a")
	require.True(t, ok)
	require.Equal(t, a, got)
	_, err = c.CreateTopic(ctx, "b", 1, 1, nil, false)
	require.NoError(t, err, "deleted name is free after restart")
}

// TestRestartAfterSnapshotAndCompaction makes Raft snapshot and truncate its
// log, then checks a restart still has every change, including those made
// after the snapshot (which are replayed from the log).
func TestRestartAfterSnapshotAndCompaction(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, NodeID: 1, TrailingLogs: 2}
	c := openAt(t, opts)
	ctx := testCtx(t)
	for i := range 10 {
		_, err := c.CreateTopic(ctx, fmt.Sprintf("t%02d", i), 1, 1, nil, false)
		require.NoError(t, err)
	}
	require.NoError(t, c.raft.Snapshot().Error())
	for i := 10; i < 13; i++ {
		_, err := c.CreateTopic(ctx, fmt.Sprintf("t%02d", i), 1, 1, nil, false)
		require.NoError(t, err)
	}
	_, err := c.DeleteTopic(ctx, "t00")
	require.NoError(t, err)
	first, err := c.db.LogStore().FirstIndex()
	require.NoError(t, err)
	require.Greater(t, first, uint64(1), "log was compacted")
	before := c.Topics()
	require.NoError(t, c.Close())

	c = openAt(t, opts)
	require.Equal(t, before, c.Topics())
	_, err = c.CreateTopic(ctx, "after", 1, 1, nil, false)
	require.NoError(t, err)
}

// TestRestoreFromSnapshot exercises the follower path: a snapshot from one
// controller restored into another replaces its state and reports the
// difference to listeners.
func TestRestoreFromSnapshot(t *testing.T) {
	src, _ := openTest(t)
	ctx := testCtx(t)
	_, err := src.CreateTopic(ctx, "keep", 1, 1, nil, false)
	require.NoError(t, err)
	_, err = src.CreateTopic(ctx, "grow", 1, 1, nil, false)
	require.NoError(t, err)
	_, err = src.CreatePartitions(ctx, "grow", 3, false)
	require.NoError(t, err)
	_, err = src.CreateTopic(ctx, "new", 1, 1, nil, false)
	require.NoError(t, err)
	pid, err := src.AllocateProducerIDs(ctx, 7)
	require.NoError(t, err)
	require.NoError(t, src.raft.Snapshot().Error())
	snaps, err := src.db.SnapshotStore().List()
	require.NoError(t, err)
	require.NotEmpty(t, snaps)
	_, rc, err := src.db.SnapshotStore().Open(snaps[0].ID)
	require.NoError(t, err)

	dst, _ := openTest(t)
	keep, _ := src.Topic("keep")
	_, err = dst.CreateTopic(ctx, "stale", 1, 1, nil, false)
	require.NoError(t, err)
	_, err = dst.CreateTopic(ctx, "grow", 1, 1, nil, false) // different id: replaced
	require.NoError(t, err)
	sub := dst.Subscribe(SubscribeOptions{})
	defer sub.Close()
	first, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Len(t, first, 1)
	require.True(t, first[0].Snapshot)

	require.NoError(t, (&fsm{c: dst}).Restore(rc))
	require.Equal(t, src.Topics(), dst.Topics())
	require.Equal(t, src.ClusterID(), dst.ClusterID())
	got, _ := dst.Topic("keep")
	require.Equal(t, keep, got)
	// Subscribers get the new image, which they reconcile against what
	// they hold.
	ds, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.True(t, ds[0].Snapshot)
	require.Equal(t, dst.AppliedIndex(), ds[0].Index)
	require.Equal(t, []string{"TopicCreated:grow", "TopicCreated:keep", "TopicCreated:new", "BrokerRegistered:1"}, changeNames(ds[0].Changes))
	dst.mu.RLock()
	require.EqualValues(t, pid+7, dst.st.nextPID)
	dst.mu.RUnlock()
}

func TestSubscribe(t *testing.T) {
	c, _ := openTest(t)
	ctx := testCtx(t)
	_, err := c.CreateTopic(ctx, "zeta", 1, 1, nil, false)
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, "alpha", 1, 1, nil, false)
	require.NoError(t, err)

	sub := c.Subscribe(SubscribeOptions{})
	defer sub.Close()
	next := func() []metadata.Delta {
		t.Helper()
		ds, err := sub.Next(ctx)
		require.NoError(t, err)
		return ds
	}
	// First the image, in name order, at the applied index.
	ds := next()
	require.Len(t, ds, 1)
	require.True(t, ds[0].Snapshot)
	require.Equal(t, c.AppliedIndex(), ds[0].Index)
	require.Equal(t, []string{"TopicCreated:alpha", "TopicCreated:zeta", "BrokerRegistered:1"}, changeNames(ds[0].Changes))
	last := ds[0].Index

	// Then one delta per entry, in log order, each at its index.
	_, err = c.CreateTopic(ctx, "beta", 1, 1, map[string]string{topicconfig.RetentionMs: "5"}, false)
	require.NoError(t, err)
	_, err = c.CreatePartitions(ctx, "beta", 3, false)
	require.NoError(t, err)
	_, err = c.AlterConfigs(ctx, "beta", []metadata.ConfigOp{{Key: topicconfig.RetentionMs, Op: metadata.OpSet, Value: "1"}}, false)
	require.NoError(t, err)
	// A no-op config change commits nothing.
	_, err = c.AlterConfigs(ctx, "beta", []metadata.ConfigOp{{Key: topicconfig.RetentionMs, Op: metadata.OpSet, Value: "1"}}, false)
	require.NoError(t, err)
	_, err = c.AllocateProducerIDs(ctx, 3)
	require.NoError(t, err)
	_, err = c.DeleteTopic(ctx, "beta")
	require.NoError(t, err)
	// Failed and validate-only writes commit nothing.
	_, err = c.CreateTopic(ctx, "alpha", 1, 1, nil, false)
	require.ErrorIs(t, err, metadata.ErrTopicExists)
	_, err = c.CreateTopic(ctx, "dry", 1, 1, nil, true)
	require.NoError(t, err)

	ds = next()
	var got [][]string
	for _, d := range ds {
		require.False(t, d.Snapshot)
		require.Greater(t, d.Index, last)
		last = d.Index
		got = append(got, changeNames(d.Changes))
	}
	require.Equal(t, [][]string{
		{"TopicCreated:beta"},
		{"PartitionChanged:beta-1", "PartitionChanged:beta-2"},
		{"ConfigsChanged:beta"},
		nil, // the producer id block: nothing to host, but the index advances
		{"TopicDeleted:beta"},
	}, got)
	require.Equal(t, c.AppliedIndex(), last)
	created := ds[0].Changes[0].(*metadata.TopicCreated).Topic
	require.Equal(t, map[string]string{topicconfig.RetentionMs: "5"}, created.Configs, "a created topic comes with its configs")
	added := ds[1].Changes[0].(*metadata.PartitionChanged)
	require.True(t, added.Added)
	require.Equal(t, "5", added.Configs[topicconfig.RetentionMs])
	require.Equal(t, map[string]string{topicconfig.RetentionMs: "1"}, ds[2].Changes[0].(*metadata.ConfigsChanged).Configs)

	// Deltas carry copies.
	created.Partitions[0].Leader = 42
	a, _ := c.Topic("alpha")
	require.EqualValues(t, 1, a.Partitions[0].Leader)

	sub.Close()
	_, err = sub.Next(ctx)
	require.ErrorIs(t, err, metadata.ErrClosed)
}

// TestSlowSubscriberNeverBlocksApply: a subscriber that does not read
// never holds up Raft's apply, and when it falls more than
// maxPendingDeltas behind its deltas fold into one image: nothing lost,
// memory bounded.
func TestSlowSubscriberNeverBlocksApply(t *testing.T) {
	c, _ := openTest(t)
	ctx := testCtx(t)
	sub := c.Subscribe(SubscribeOptions{})
	defer sub.Close()
	_, err := c.CreateTopic(ctx, "t", 1, 1, nil, false)
	require.NoError(t, err)
	for range maxPendingDeltas + 5 {
		_, err := c.AllocateProducerIDs(ctx, 1)
		require.NoError(t, err)
	}
	ds, err := sub.Next(ctx)
	require.NoError(t, err)
	// The image, the create and 1029 blocks: folded into an image at
	// 1025, then the 6 later deltas.
	require.Len(t, ds, 7)
	require.True(t, ds[0].Snapshot)
	require.Equal(t, []string{"TopicCreated:t", "BrokerRegistered:1"}, changeNames(ds[0].Changes))
	require.Equal(t, c.AppliedIndex(), ds[len(ds)-1].Index)
	sub.mu.Lock()
	require.Equal(t, 1, sub.folds)
	sub.mu.Unlock()
}

// TestChangesAwaitReconciliation: a topic change answers once an awaiting
// subscriber reconciled its entry, and only waits until its deadline for
// one that does not (the change is committed either way).
func TestChangesAwaitReconciliation(t *testing.T) {
	c, _ := openTest(t)
	ctx := testCtx(t)
	sub := c.Subscribe(SubscribeOptions{Await: true})
	defer sub.Close()
	hosted := make(chan string, 1)
	go func() {
		for {
			ds, err := sub.Next(ctx)
			if err != nil {
				return
			}
			for _, d := range ds {
				for _, ch := range d.Changes {
					if tc, ok := ch.(*metadata.TopicCreated); ok && !d.Snapshot {
						hosted <- tc.Topic.Name
					}
				}
				sub.Done(d.Index)
			}
		}
	}()
	_, err := c.CreateTopic(ctx, "t", 1, 1, nil, false)
	require.NoError(t, err)
	select {
	case name := <-hosted:
		require.Equal(t, "t", name, "reconciled before CreateTopic returned")
	default:
		t.Fatal("CreateTopic returned before the subscriber reconciled it")
	}
	require.Equal(t, c.AppliedIndex(), sub.Reconciled())

	stuck := c.Subscribe(SubscribeOptions{Await: true}) // never reads
	defer stuck.Close()
	short, cancel := context.WithTimeout(ctx, commitBound)
	defer cancel()
	_, err = c.CreateTopic(short, "u", 1, 1, nil, false)
	require.NoError(t, err, "committed; the wait is bounded by the deadline")
	_, ok := c.Topic("u")
	require.True(t, ok)
}

func changeNames(cs []metadata.Change) []string {
	var out []string
	for _, ch := range cs {
		switch ch := ch.(type) {
		case *metadata.TopicCreated:
			out = append(out, "TopicCreated:"+ch.Topic.Name)
		case *metadata.PartitionChanged:
			out = append(out, fmt.Sprintf("PartitionChanged:%s-%d", ch.Topic, ch.Partition.ID))
		case *metadata.ConfigsChanged:
			out = append(out, "ConfigsChanged:"+ch.Topic)
		case *metadata.TopicDeleted:
			out = append(out, "TopicDeleted:"+ch.Topic.Name)
		case *metadata.BrokerRegistered:
			out = append(out, fmt.Sprintf("BrokerRegistered:%d", ch.Broker.ID))
		}
	}
	return out
}

// TestConcurrentReadsDuringWrites runs readers against a stream of writes;
// with -race it checks the locking, and it checks readers never see a torn
// topic.
func TestConcurrentReadsDuringWrites(t *testing.T) {
	c, _ := openTest(t)
	ctx := testCtx(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, top := range c.Topics() {
					for i, p := range top.Partitions {
						if p.ID != int32(i) || len(p.Replicas) != 1 {
							t.Errorf("torn topic %+v", top)
							return
						}
					}
				}
				c.Topic("w5")
				c.ClusterID()
				c.IsLeader()
			}
		}()
	}
	// Concurrent writers, racing for the same names too.
	var wwg sync.WaitGroup
	errs := make(chan error, 100)
	for w := range 2 {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for i := range 10 {
				name := fmt.Sprintf("w%d", i)
				if _, err := c.CreateTopic(ctx, name, 2, 1, nil, false); err != nil && !errors.Is(err, metadata.ErrTopicExists) {
					errs <- err
				}
				if _, err := c.CreatePartitions(ctx, name, int32(3+w), false); err != nil && !errors.Is(err, metadata.ErrInvalidPartitions) {
					errs <- err
				}
			}
		}()
	}
	wwg.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, c.Topics(), 10)
}

func TestContextAndLeadership(t *testing.T) {
	c, _ := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.CreateTopic(ctx, "x", 1, 1, nil, false)
	require.ErrorIs(t, err, context.Canceled)
	_, ok := c.Topic("x")
	require.False(t, ok)

	// Open gives up when leadership never comes: here the stored Raft
	// configuration names another voter.
	dir := t.TempDir()
	db, err := meta.Open(dir, testLogger())
	require.NoError(t, err)
	conf := raft.DefaultConfig()
	conf.LocalID = "7"
	_, trans := raft.NewInmemTransport("")
	require.NoError(t, raft.BootstrapCluster(conf, db.LogStore(), db.StableStore(), db.SnapshotStore(), trans,
		raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "7", Address: trans.LocalAddr()}}}))
	require.NoError(t, db.Close())
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	_, err = Open(short, Options{Dir: dir, NodeID: 1, Logger: testLogger()})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestCrashRecovery simulates power loss (only fsynced bytes survive, plus a
// random part of the rest) right after a series of acknowledged changes:
// all of them must be there after the restart.
func TestCrashRecovery(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			opts := Options{Dir: "/data/meta", NodeID: 1, FS: fs}
			c := openAt(t, opts)
			ctx := testCtx(t)
			for i := range 5 {
				_, err := c.CreateTopic(ctx, fmt.Sprintf("t%d", i), int32(i+1), 1, nil, false)
				require.NoError(t, err)
			}
			_, err := c.AlterConfigs(ctx, "t1", []metadata.ConfigOp{{Key: topicconfig.RetentionMs, Op: metadata.OpSet, Value: "9"}}, false)
			require.NoError(t, err)
			_, err = c.DeleteTopic(ctx, "t2")
			require.NoError(t, err)
			pid, err := c.AllocateProducerIDs(ctx, 3)
			require.NoError(t, err)
			before, cluster := c.Topics(), c.ClusterID()

			cfg := vfs.CrashCloneCfg{}
			if seed > 0 {
				cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(seed, seed))}
			}
			crashed := fs.CrashClone(cfg)
			require.NoError(t, c.Close())

			opts.FS = crashed
			c = openAt(t, opts)
			require.Equal(t, before, c.Topics())
			require.Equal(t, cluster, c.ClusterID())
			next, err := c.AllocateProducerIDs(ctx, 1)
			require.NoError(t, err)
			require.Equal(t, pid+3, next)
		})
	}
}

func BenchmarkCreateTopic(b *testing.B) {
	c := openAt(b, Options{Dir: b.TempDir(), NodeID: 1})
	ctx := testCtx(b)
	b.ResetTimer()
	for i := range b.N {
		if _, err := c.CreateTopic(ctx, fmt.Sprintf("bench-%d", i), 3, 1, nil, false); err != nil {
			b.Fatal(err)
		}
	}
}

// Internal topics keep the settings that protect their data: a change that
// would let retention delete committed offsets is refused, and a topic that
// lost them (an older release allowed it) is repaired.
func TestInternalTopicsKeepCompaction(t *testing.T) {
	c, _ := openTest(t)
	ctx := context.Background()
	top, err := c.CreateTopic(ctx, metadata.ConsumerOffsetsTopic, 2, 1, map[string]string{"segment.bytes": "1048576"}, false)
	require.NoError(t, err)
	require.Equal(t, "compact", top.Configs["cleanup.policy"], "created the way it must stay")

	for _, policy := range []string{"delete", "compact,delete"} {
		_, err = c.AlterConfigs(ctx, metadata.ConsumerOffsetsTopic, []metadata.ConfigOp{{Key: "cleanup.policy", Op: metadata.OpSet, Value: policy}}, false)
		require.ErrorIs(t, err, metadata.ErrInvalidConfig, policy)
		require.Contains(t, err.Error(), "must stay")
	}
	_, err = c.ReplaceConfigs(ctx, metadata.ConsumerOffsetsTopic, map[string]string{"retention.ms": "1000"}, false)
	require.ErrorIs(t, err, metadata.ErrInvalidConfig, "dropping cleanup.policy falls back to delete")
	_, err = c.AlterConfigs(ctx, metadata.ConsumerOffsetsTopic, []metadata.ConfigOp{{Key: "segment.bytes", Op: metadata.OpSet, Value: "2097152"}}, false)
	require.NoError(t, err, "other settings may change")

	// The state an older release could leave: retention on the offsets.
	_, err = c.proposeV1(ctx, &command{Op: opReplaceConfigs, Topic: metadata.ConsumerOffsetsTopic,
		Configs: map[string]string{"cleanup.policy": "delete", "retention.ms": "1000"}})
	require.NoError(t, err)
	want := map[string]string{"cleanup.policy": "compact", "segment.bytes": "104857600"}
	repairs, err := c.RepairTopicConfigs(ctx, metadata.ConsumerOffsetsTopic, want)
	require.NoError(t, err)
	require.Equal(t, []Repair{
		{Topic: metadata.ConsumerOffsetsTopic, Key: "cleanup.policy", Was: "delete", Now: "compact"},
		{Topic: metadata.ConsumerOffsetsTopic, Key: "retention.ms", Was: "1000", Now: "(default)"},
		{Topic: metadata.ConsumerOffsetsTopic, Key: "segment.bytes", Was: "", Now: "104857600"},
	}, repairs)
	top, _ = c.Topic(metadata.ConsumerOffsetsTopic)
	require.Equal(t, want, top.Configs)
	repairs, err = c.RepairTopicConfigs(ctx, metadata.ConsumerOffsetsTopic, want)
	require.NoError(t, err)
	require.Empty(t, repairs, "nothing left to repair")

	// An unsafe internal topic can always be deleted (--reset-offsets-topic).
	_, err = c.proposeV1(ctx, &command{Op: opReplaceConfigs, Topic: metadata.ConsumerOffsetsTopic,
		Configs: map[string]string{"cleanup.policy": "delete"}})
	require.NoError(t, err)
	_, err = c.DeleteTopic(ctx, metadata.ConsumerOffsetsTopic)
	require.NoError(t, err)
}

// commitBound is a deadline that ends a wait for a stuck subscriber but
// never the raft commit before it, which takes milliseconds even on a
// loaded machine: the tests that use it assert outcomes, not durations.
const commitBound = 2 * time.Second
