package node

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/cluster/controller"
	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/net/kafka"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// reconcilerFixture is a controller and a replica manager with a
// reconciler between them, not started.
func reconcilerFixture(t *testing.T) (*controller.Controller, *replica.Manager, *reconciler) {
	t.Helper()
	dir := t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	b, err := replica.Open(replica.Options{DataDir: dir, Logger: logger})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	ctrl, err := controller.Open(testCtx(t), controller.Options{Dir: filepath.Join(dir, "meta"), NodeID: 1, Logger: logger})
	require.NoError(t, err)
	t.Cleanup(func() { ctrl.Close() })
	r := newReconciler(ctrl, b, kafka.NewMetrics(prometheus.NewRegistry()), logger)
	t.Cleanup(r.close)
	return ctrl, b, r
}

func hosted(b *replica.Manager, topic string, p int32) bool {
	_, err := b.Partition(replica.TopicPartition{Topic: topic, Partition: p})
	return err == nil
}

// gate blocks the reconciler before each delta it is armed for, and says
// when it is blocked there.
type gate struct {
	blocked chan metadata.Delta
	release chan struct{}
}

func newGate() *gate {
	return &gate{blocked: make(chan metadata.Delta, 1), release: make(chan struct{})}
}

func (g *gate) hold(d metadata.Delta) {
	select {
	case g.blocked <- d: // the first one blocked is what the test looks at
	default:
	}
	<-g.release
}

// A slow reconciler (a slow disk) never holds up the metadata log: changes
// are applied and answered (after the request's deadline at the latest)
// while it is stuck, and it catches up, in order, when it can.
func TestSlowReconcilerDoesNotBlockApply(t *testing.T) {
	ctrl, b, r := reconcilerFixture(t)
	ctx := testCtx(t)
	g := newGate()
	r.beforeApply = func(d metadata.Delta) {
		if !d.Snapshot {
			g.hold(d)
		}
	}
	r.start()
	require.NoError(t, r.wait(ctx, ctrl.AppliedIndex()))

	short, cancel := context.WithTimeout(ctx, commitBound)
	defer cancel()
	_, err := ctrl.CreateTopic(short, "t", 2, 1, nil, false)
	require.NoError(t, err, "committed; the answer waited at most until the deadline")
	stuck := <-g.blocked
	for range 3 {
		_, err := ctrl.AllocateProducerIDs(ctx, 1) // Raft keeps applying
		require.NoError(t, err)
	}
	require.Greater(t, ctrl.AppliedIndex(), stuck.Index)
	require.Less(t, r.reconciled(), stuck.Index)
	require.False(t, hosted(b, "t", 0), "not hosted before the reconciler applied it")

	close(g.release) // from now on every hold passes
	require.NoError(t, r.wait(ctx, ctrl.AppliedIndex()))
	require.True(t, hosted(b, "t", 0))
	require.True(t, hosted(b, "t", 1))
}

// /readyz says the node is not ready until it reconciled the index the
// metadata had at start. (Open waits for that before it starts
// closeWhenLoaded.)
func TestReadyWaitsForReconciliation(t *testing.T) {
	ctrl, b, r := reconcilerFixture(t)
	ctx := testCtx(t)
	// The reconciler is not running: the answer waits until it reconciled
	// the create; the change is committed before that.
	created := make(chan error, 1)
	go func() {
		_, err := ctrl.CreateTopic(ctx, "t", 1, 1, nil, false)
		created <- err
	}()
	require.Eventually(t, func() bool { _, ok := ctrl.Topic("t"); return ok }, 30*time.Second, time.Millisecond)
	g := newGate()
	r.beforeApply = g.hold
	r.start()
	image := <-g.blocked
	require.True(t, image.Snapshot)
	start := ctrl.AppliedIndex()
	require.Less(t, image.Index, start, "subscribed before the create: the image, then its delta")

	n := &Node{rec: r, startIndex: start}
	ok, why := readiness(false, n.reconcileErr(), nil, nil, nil)
	require.False(t, ok)
	require.Contains(t, why, "metadata not applied yet")

	close(g.release)
	require.NoError(t, r.wait(ctx, start))
	require.True(t, hosted(b, "t", 0))
	ok, _ = readiness(false, n.reconcileErr(), nil, nil, nil)
	require.True(t, ok)
	require.NoError(t, <-created)
}

// Ready is closed once the group coordinator loaded, not before.
func TestReadyWaitsForGroupsLoaded(t *testing.T) {
	ctx := testCtx(t)
	loaded := make(chan struct{})
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		closeWhenLoaded(ctx, ready, loaded)
	}()
	select {
	case <-ready:
		t.Fatal("ready before the coordinator loaded")
	default:
	}
	close(loaded)
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatal("never ready")
	}
	<-done
}

// The reconciler applies each kind of change, and an image (after a Raft
// snapshot restore) makes what is hosted exactly what it names.
func TestReconcilerAppliesDeltas(t *testing.T) {
	ctrl, b, r := reconcilerFixture(t)
	ctx := testCtx(t)
	r.start()
	require.NoError(t, r.wait(ctx, ctrl.AppliedIndex()))

	_, err := ctrl.CreateTopic(ctx, "a", 1, 1, nil, false)
	require.NoError(t, err)
	require.True(t, hosted(b, "a", 0), "hosted when CreateTopic returns")
	_, err = ctrl.CreatePartitions(ctx, "a", 3, false)
	require.NoError(t, err)
	require.True(t, hosted(b, "a", 2))
	_, err = ctrl.CreateTopic(ctx, "b", 1, 1, nil, false)
	require.NoError(t, err)
	_, err = ctrl.DeleteTopic(ctx, "b")
	require.NoError(t, err)
	require.False(t, hosted(b, "b", 0))
	require.NoError(t, r.wait(ctx, ctrl.AppliedIndex()))
	r.close() // the rest feeds deltas by hand

	a, _ := ctrl.Topic("a")
	p := a.Partitions[1]
	p.LeaderEpoch = 4 // a leader change, as a PartitionChangeRecord makes it
	r.apply(metadata.Delta{Index: 100, Changes: []metadata.Change{
		&metadata.PartitionChanged{Topic: "a", TopicID: a.ID, Partition: p, Configs: a.Configs},
	}})
	part, err := b.Partition(replica.TopicPartition{Topic: "a", Partition: 1})
	require.NoError(t, err)
	require.EqualValues(t, 4, part.LeaderEpoch())

	// An image without "a" but with "c" (and "a" re-created under another
	// id would be the same): "a" goes, "c" comes.
	c := metadata.Topic{Name: "c", ID: [16]byte{9}, Configs: map[string]string{},
		Partitions: []metadata.Partition{{ID: 0, Replicas: []int32{1}, Leader: 1, LeaderEpoch: 2, ISR: []int32{1}}}}
	r.apply(metadata.Delta{Index: 101, Snapshot: true, Changes: []metadata.Change{&metadata.TopicCreated{Topic: c}}})
	require.False(t, hosted(b, "a", 0))
	part, err = b.Partition(replica.TopicPartition{Topic: "c", Partition: 0})
	require.NoError(t, err)
	require.EqualValues(t, 2, part.LeaderEpoch())
	_, err = os.Stat(b.Dir(replica.TopicPartition{Topic: "a", Partition: 0}))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestOpenPreviousReleaseDataDir: the data directory of a node the
// previous release ran (its metadata log of version 1 commands, made by
// testdata/mkfixture.go.txt) opens and serves its topics, records and
// committed offsets, and takes new changes.
func TestOpenPreviousReleaseDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.CopyFS(dir, os.DirFS("testdata/v1-datadir")))
	ctx := testCtx(t)
	n, err := Open(ctx, testConfig(t, dir))
	require.NoError(t, err)
	defer n.Close()
	select {
	case <-n.Ready():
	case <-ctx.Done():
		t.Fatal("never ready")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"orders", "grown"}, topics.Names())
	require.Len(t, topics["grown"].Partitions, 3)
	cfgs, err := adm.DescribeTopicConfigs(ctx, "orders")
	require.NoError(t, err)
	rc, err := cfgs.On("orders", nil)
	require.NoError(t, err)
	var retention string
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			retention = c.MaybeValue()
		}
	}
	require.Equal(t, "86400000", retention)

	var got []string
	for len(got) < 10 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err())
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	require.Len(t, got, 10)
	fetched, err := adm.FetchOffsets(ctx, "billing")
	require.NoError(t, err)
	o, ok := fetched.Lookup("orders", 0)
	require.True(t, ok)
	require.EqualValues(t, 3, o.At)

	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("after the upgrade")}).FirstErr())
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "new")
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "new", Value: []byte("x")}).FirstErr(),
		"a produce right after CreateTopics finds the partition")
}

// A topic deleted and created again under the same name while the node
// was down (or before its reconciler got to the delete: a shutdown drops
// pending deltas) must not reopen the old topic's directory as the new
// topic's partition at the next start: the first image only says the
// name exists, with a new id.
func TestRecreatedTopicDoesNotReuseOldDirectoryAfterRestart(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	ctx := testCtx(t)
	b, err := replica.Open(replica.Options{DataDir: dir, Logger: logger})
	require.NoError(t, err)
	ctrl, err := controller.Open(ctx, controller.Options{Dir: filepath.Join(dir, "meta"), NodeID: 1, Logger: logger})
	require.NoError(t, err)
	defer ctrl.Close()
	r := newReconciler(ctrl, b, kafka.NewMetrics(prometheus.NewRegistry()), logger)
	r.start()
	_, err = ctrl.CreateTopic(ctx, "x", 1, 1, nil, false)
	require.NoError(t, err)
	tp := replica.TopicPartition{Topic: "x", Partition: 0}
	require.True(t, hosted(b, "x", 0))
	old := filepath.Join(b.Dir(tp), "old-incarnation")
	require.NoError(t, os.WriteFile(old, nil, 0o644))
	r.close()
	require.NoError(t, b.Close())

	// Committed while nothing reconciles them.
	_, err = ctrl.DeleteTopic(ctx, "x")
	require.NoError(t, err)
	_, err = ctrl.CreateTopic(ctx, "x", 1, 1, nil, false)
	require.NoError(t, err)

	b2, err := replica.Open(replica.Options{DataDir: dir, Logger: logger})
	require.NoError(t, err)
	defer b2.Close()
	r2 := newReconciler(ctrl, b2, kafka.NewMetrics(prometheus.NewRegistry()), logger)
	defer r2.close()
	r2.start()
	require.NoError(t, r2.wait(ctx, ctrl.AppliedIndex()))
	require.True(t, hosted(b2, "x", 0))
	_, err = os.Stat(old)
	require.ErrorIs(t, err, os.ErrNotExist, "the new x must not be the old x's directory")
}

// An image naming a topic under another id than the one hosted (it was
// deleted and created again in deltas folded into the image) replaces the
// hosted partitions: nothing of the old topic is served as the new one.
func TestImageWithRecreatedTopicReplacesIt(t *testing.T) {
	ctrl, b, r := reconcilerFixture(t)
	ctx := testCtx(t)
	r.start()
	_, err := ctrl.CreateTopic(ctx, "a", 1, 1, nil, false)
	require.NoError(t, err)
	tp := replica.TopicPartition{Topic: "a", Partition: 0}
	old := filepath.Join(b.Dir(tp), "old-incarnation")
	require.NoError(t, os.WriteFile(old, nil, 0o644))
	require.NoError(t, r.wait(ctx, ctrl.AppliedIndex()))
	r.close()

	a, _ := ctrl.Topic("a")
	a.ID = [16]byte{7}
	r.apply(metadata.Delta{Index: 100, Snapshot: true, Changes: []metadata.Change{&metadata.TopicCreated{Topic: a}}})
	require.True(t, hosted(b, "a", 0))
	_, err = os.Stat(old)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Equal(t, a.ID, r.topics["a"].ID)
}

// commitBound is a deadline that ends a wait for a stuck subscriber but
// never the raft commit before it, which takes milliseconds even on a
// loaded machine: the tests that use it assert outcomes, not durations.
const commitBound = 2 * time.Second
