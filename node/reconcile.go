package node

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/moonmq/moonmq/cluster/controller"
	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/txncoord"
	"github.com/moonmq/moonmq/net/kafka"
)

// reconciler keeps what this node hosts in step with the metadata: it
// consumes the controller's deltas in its own goroutine (never on Raft's
// apply path, so a slow disk creating partition directories delays only
// this node's hosting, not the metadata log) and applies them to the
// partition replicas (engine/replica) and the group coordinator's view of
// the topics, then reports the entry's index as reconciled. Topic changes
// answer their caller once it did (controller.SubscribeOptions.Await).
//
// A partition that fails to open does not stop it: the replica manager
// keeps it offline (reported in /readyz, /stats and /metrics) and retries
// it, with the leader epoch given here. On a cluster the replicator still
// tracks it, and reports it offline to the controller, which moves its
// leadership elsewhere until it is back.
type reconciler struct {
	sub     *controller.Subscription
	b       *replica.Manager
	metrics *kafka.Metrics
	log     *slog.Logger
	nodeID  int32
	// repl gives replicas their leader or follower role on a clustered
	// node; nil alone, where every partition leads by itself.
	repl *replicator
	// configsChanged, if set, is called after a delta that hosted
	// partitions or changed a topic's configs (a topic created or altered,
	// and the first image, at start): the log cleaner looks at once at a
	// topic that became compacted (or dirtier to its new
	// min.cleanable.dirty.ratio), so its state is reported (DescribeLogDirs,
	// /stats) from the start and it is cleaned, not one cleaner backoff
	// (15 s) later. Before the first image no partition has its configs, so
	// a broker restarted on dirty compacted logs cleaned none of them for
	// that long.
	configsChanged func()

	// mu is held while a delta is applied and while the coordinator is
	// attached, so the coordinator sees every topic change exactly once.
	mu     sync.Mutex
	topics map[string]metadata.Topic // as reconciled
	// view is a copy of topics published after each delta, for /stats and
	// /metrics to read without waiting for a delta being applied (which
	// may be slow: creating partition directories). The values are
	// shared, not copied: a reconciled Topic is never modified in place
	// (apply replaces it), and neither are the deltas' values it holds.
	view   atomic.Pointer[map[string]metadata.Topic]
	groups *group.Coordinator
	txns   *txncoord.Coordinator // the transaction coordinator (attachTxns)
	// first is set until the first image is applied: only then are
	// directories no topic names removed. firstErr is what that removal
	// failed with; Open refuses to start then.
	first    bool
	firstErr error
	closed   bool // rehost does nothing once set

	// beforeApply, if set, runs before each delta is applied (a test
	// seam: a slow reconciler).
	beforeApply func(metadata.Delta)

	cancel context.CancelFunc
	done   chan struct{}
	loads  sync.WaitGroup // coordinate's partition loads
}

func newReconciler(ctrl *controller.Controller, b *replica.Manager, m *kafka.Metrics, logger *slog.Logger) *reconciler {
	return &reconciler{
		sub: ctrl.Subscribe(controller.SubscribeOptions{Await: true}),
		b:   b, metrics: m, log: logger, nodeID: ctrl.NodeID(),
		topics: map[string]metadata.Topic{}, first: true, done: make(chan struct{}),
	}
}

// start runs the reconciler until close.
func (r *reconciler) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.run(ctx)
}

func (r *reconciler) run(ctx context.Context) {
	defer close(r.done)
	for {
		ds, err := r.sub.Next(ctx)
		if err != nil {
			return // closed
		}
		for _, d := range ds {
			if r.beforeApply != nil {
				r.beforeApply(d)
			}
			r.apply(d)
			r.sub.Done(d.Index)
		}
	}
}

// close stops the goroutine; waiters on reconciliation return.
func (r *reconciler) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.sub.Close()
	if r.cancel != nil {
		r.cancel()
		<-r.done
	}
	r.loads.Wait()
}

// startErr is why applying the first image failed, if it did.
func (r *reconciler) startErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstErr
}

// reconciled is the last index applied.
func (r *reconciler) reconciled() uint64 { return r.sub.Reconciled() }

// wait waits until index is reconciled.
func (r *reconciler) wait(ctx context.Context, index uint64) error {
	return r.sub.WaitReconciled(ctx, index)
}

// attachGroups gives the coordinator the reconciled topics now and every
// change from here on.
func (r *reconciler) attachGroups(coord *group.Coordinator) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups = coord
	coord.SetTopics(r.topicInfos())
}

func (r *reconciler) apply(d metadata.Delta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var deleted []string
	// changed: the groups' view of the topics must be refreshed (a broker
	// registration alone leaves it as it is).
	changed := d.Snapshot
	wakeCleaner := d.Snapshot
	if d.Snapshot {
		deleted = r.applyImage(d)
	}
	for _, ch := range d.Changes {
		if d.Snapshot {
			break
		}
		if _, broker := ch.(*metadata.BrokerRegistered); !broker {
			changed = true
		}
		switch ch := ch.(type) {
		case *metadata.TopicCreated:
			r.hostTopic(ch.Topic)
			wakeCleaner = true
		case *metadata.PartitionChanged:
			t := r.topics[ch.Topic]
			t.Name, t.ID = ch.Topic, ch.TopicID
			// t's partitions may be an earlier delta's, which every
			// subscription shares: copy before writing.
			t.Partitions = slices.Clone(t.Partitions)
			for len(t.Partitions) <= int(ch.Partition.ID) {
				t.Partitions = append(t.Partitions, metadata.Partition{ID: int32(len(t.Partitions))})
			}
			t.Partitions[ch.Partition.ID] = ch.Partition
			t.Configs = ch.Configs
			r.topics[ch.Topic] = t
			r.hostPartition(ch.Topic, ch.TopicID, ch.Configs, ch.Partition)
			wakeCleaner = true
		case *metadata.ConfigsChanged:
			t := r.topics[ch.Topic]
			t.Configs = ch.Configs
			r.topics[ch.Topic] = t
			r.report(ch.Topic, "update configs", r.b.UpdateConfigs(ch.Topic, ch.Configs))
			wakeCleaner = true
		case *metadata.TopicDeleted:
			r.removeTopic(ch.Topic.Name)
			deleted = append(deleted, ch.Topic.Name)
		case *metadata.BrokerRegistered:
			if r.repl != nil {
				r.repl.brokerChanged(ch.Broker)
			}
		}
	}
	if wakeCleaner && r.configsChanged != nil {
		r.configsChanged()
	}
	// Published after every delta, whatever it changed: a clone of the
	// map, its values shared.
	view := maps.Clone(r.topics)
	r.view.Store(&view)
	if changed && r.groups != nil {
		r.groups.SetTopics(r.topicInfos())
		for _, name := range deleted {
			r.groups.TopicDeleted(name)
		}
	}
}

// applyImage makes what is hosted exactly what the image names: topics it
// lacks (or that it names with another id: deleted and created again) are
// deleted first, then every partition it names is hosted. It returns the
// deleted topics.
func (r *reconciler) applyImage(d metadata.Delta) []string {
	image := map[string]metadata.Topic{}
	for _, ch := range d.Changes {
		if tc, ok := ch.(*metadata.TopicCreated); ok {
			image[tc.Topic.Name] = tc.Topic
		}
	}
	var deleted []string
	for _, name := range sortedKeys(r.topics) {
		if t, ok := image[name]; !ok || t.ID != r.topics[name].ID {
			r.removeTopic(name)
			deleted = append(deleted, name)
		}
	}
	// Brokers first: followers need their leaders' addresses.
	for _, ch := range d.Changes {
		if br, ok := ch.(*metadata.BrokerRegistered); ok && r.repl != nil {
			r.repl.brokerChanged(br.Broker)
		}
	}
	for _, name := range sortedKeys(image) {
		r.hostTopic(image[name])
	}
	if r.first {
		r.first = false
		// Directories of topics deleted while this node was down.
		err := r.b.RemoveOrphans(func(tp replica.TopicPartition) bool {
			t, ok := image[tp.Topic]
			return ok && int(tp.Partition) < len(t.Partitions)
		})
		r.report("", "remove orphaned partitions", err)
		r.firstErr = err
	}
	return deleted
}

// reconciledTopics is the metadata as last reconciled, by topic name (nil
// before the first delta). The caller must not modify it.
func (r *reconciler) reconciledTopics() map[string]metadata.Topic {
	if v := r.view.Load(); v != nil {
		return *v
	}
	return nil
}

// rehost gives a partition that was offline, and is serving again, the
// role the reconciled metadata names for it (hostPartition skipped it while
// it was offline).
func (r *reconciler) rehost(tp replica.TopicPartition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.topics[tp.Topic]
	if r.closed || !ok || int(tp.Partition) >= len(t.Partitions) {
		return // closing, or deleted meanwhile
	}
	r.hostPartition(t.Name, t.ID, t.Configs, t.Partitions[tp.Partition])
}

func (r *reconciler) hostTopic(t metadata.Topic) {
	r.topics[t.Name] = t
	for _, p := range t.Partitions {
		r.hostPartition(t.Name, t.ID, t.Configs, p)
	}
}

// hostPartition opens a partition this node has a replica of, as its
// leader in the partition's epoch if it leads it, in a directory of the
// topic's id (an earlier topic's of the same name is removed: its delete
// was never applied here), and gives it its role on a cluster (followers
// take their leader's epoch there). The replicator tracks the replica
// first, so its storage is reported even while it cannot be opened.
func (r *reconciler) hostPartition(topic string, id [16]byte, configs map[string]string, p metadata.Partition) {
	tp := replica.TopicPartition{Topic: topic, Partition: p.ID}
	if !slices.Contains(p.Replicas, r.nodeID) {
		if r.repl != nil {
			r.repl.forget(tp)
		}
		return
	}
	if r.repl != nil {
		r.repl.track(tp, id, p)
	}
	var (
		part *replica.Partition
		err  error
	)
	if p.Leader == r.nodeID {
		part, err = r.b.EnsureLeader(tp, id, configs, p.LeaderEpoch)
	} else {
		part, err = r.b.EnsureFollower(tp, id, configs)
	}
	if errors.Is(err, replica.ErrPartitionOffline) {
		return // the replica manager reports and retries it
	}
	if err == nil && r.repl != nil {
		err = r.repl.setRole(tp, id, configs, p, part)
		if err == nil && topic == group.OffsetsTopic {
			r.coordinate(p.ID, p.Leader == r.nodeID)
		}
	}
	if err == nil && topic == txncoord.Topic {
		r.coordinateTxns(p.ID, p.Leader == r.nodeID, p.LeaderEpoch)
	}
	r.report(topic, "host partition", err)
}

// attachTxns gives the reconciler the transaction coordinator and starts
// it with the __transaction_state partitions this node leads now; the
// reconciler loads and unloads them from then on (coordinateTxns).
func (r *reconciler) attachTxns(txns *txncoord.Coordinator) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.txns = txns
	t := r.topics[txncoord.Topic]
	txns.SetPartitions(int32(len(t.Partitions)))
	txns.Start(nil)
	for _, p := range t.Partitions {
		if p.Leader == r.nodeID {
			r.coordinateTxns(p.ID, true, p.LeaderEpoch)
		}
	}
}

// coordinateTxns makes the transaction coordinator serve the transactional
// ids of __transaction_state partition p where this node leads it, in the
// partition's leader epoch (the coordinator epoch its markers carry), and
// answer NOT_COORDINATOR for them where it no longer does. Loading replays
// the partition (and finishes what was prepared), so it runs off the
// reconciler's goroutine; a load that finishes after the leadership moved
// on is undone.
func (r *reconciler) coordinateTxns(p int32, leads bool, epoch int32) {
	txns := r.txns
	if txns == nil {
		return // attachTxns starts it with the partitions led then
	}
	txns.SetPartitions(int32(len(r.topics[txncoord.Topic].Partitions)))
	if !leads {
		txns.UnloadPartition(p)
		return
	}
	r.loadWhileLeading(replica.TopicPartition{Topic: txncoord.Topic, Partition: p}, "transactions",
		func() error { return txns.LoadPartition(p, epoch) }, func() { txns.UnloadPartition(p) })
}

// loadWhileLeading runs a coordinator's load of partition tp (its replay)
// off the reconciler's goroutine, and undoes it with unload if this node
// no longer leads tp when it finishes (what names the coordinator's state
// in the log). Alone, a node leads everything.
func (r *reconciler) loadWhileLeading(tp replica.TopicPartition, what string, load func() error, unload func()) {
	r.loads.Add(1)
	go func() {
		defer r.loads.Done()
		if err := load(); err != nil {
			r.log.Warn("loading the "+what+" of a partition this node leads", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		}
		if r.repl != nil && !r.repl.leads(tp) {
			unload()
		}
	}()
}

// coordinate makes the group coordinator serve the groups of offsets
// partition p where this node leads it, and answer NOT_COORDINATOR for
// them where it no longer does. Loading replays the partition, so it runs
// off the reconciler's goroutine; a load that finishes after the
// leadership moved on is undone.
func (r *reconciler) coordinate(p int32, leads bool) {
	coord := r.groups
	if coord == nil {
		return // attachGroups starts it with the partitions led then
	}
	if !leads {
		coord.UnloadPartition(p)
		return
	}
	r.loadWhileLeading(replica.TopicPartition{Topic: group.OffsetsTopic, Partition: p}, "groups",
		func() error { return coord.LoadPartition(p) }, func() { coord.UnloadPartition(p) })
}

func (r *reconciler) removeTopic(name string) {
	if r.repl != nil {
		for _, p := range r.topics[name].Partitions {
			r.repl.forget(replica.TopicPartition{Topic: name, Partition: p.ID})
		}
	}
	delete(r.topics, name)
	r.report(name, "delete topic", r.b.DeleteTopic(name))
	r.metrics.DeleteTopic(name)
}

func (r *reconciler) report(topic, what string, err error) {
	if err != nil {
		r.log.Error("applying metadata change", "topic", topic, "change", what, "err", err)
	}
}

func (r *reconciler) topicInfos() []group.TopicInfo {
	out := make([]group.TopicInfo, 0, len(r.topics))
	for _, name := range sortedKeys(r.topics) {
		t := r.topics[name]
		out = append(out, group.TopicInfo{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))})
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
