// Package controller owns the cluster metadata: topics, their partition
// assignments and config overrides, the producer id counter and the cluster
// id. It is a hashicorp/raft state machine whose log, stable store,
// snapshots and materialised state live in one pebble DB (engine/meta). A
// single node is a one-voter Raft cluster, so the same code path serves 1 to
// N nodes; this version runs single-node only (see Options.Transport).
//
// Invariants:
//   - Every change goes through the Raft log; the FSM is the only writer of
//     the state, and it applies commands deterministically (anything random,
//     such as topic IDs, is chosen by the proposer and carried in the
//     command). Proposers validate with the same plan function the FSM runs,
//     so a rejected request never reaches the log, and a request that races
//     another is still rejected consistently by the FSM.
//   - The FSM persists its state and the applied index in one pebble batch.
//     A restart loads that state directly and Raft replays only the entries
//     after the applied index: restart cost does not grow with history.
//     Raft snapshots exist for log compaction and for future followers; they
//     are not restored at start (NoSnapshotRestoreOnStart), because the
//     pebble state is at least as new as any snapshot.
//   - Reads (Topic, Topics, ClusterID) serve an in-memory copy under a
//     read lock and return deep copies.
//   - OnChange listeners run synchronously on the apply path, after the
//     in-memory state changed: when a write method returns, listeners have
//     seen its event.
package controller

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/moonmq/moonmq/engine/meta"
)

// Options configures Open.
type Options struct {
	// Dir is the metadata directory, conventionally <data>/meta. Required.
	Dir string
	// NodeID is this broker's id (Kafka broker.id), >= 0. It is recorded in
	// Dir at first start; opening the directory with another id fails with
	// ErrNodeIDMismatch, because Raft would never elect a node that is not
	// in its stored configuration.
	NodeID int32
	// Logger receives controller and (at RaftLogLevel and above) Raft logs.
	// Default: slog.Default().
	Logger *slog.Logger
	// RaftLogLevel filters hashicorp/raft's logs (a *slog.LevelVar changes it
	// at run time). Default (nil): slog.LevelWarn.
	RaftLogLevel slog.Leveler

	// Transport carries Raft RPCs. Default: an in-memory transport with the
	// address "moonmq-node-<NodeID>", which is all a one-voter cluster needs
	// (it sends no RPCs). Multi-node support will pass a TCP transport here;
	// the address stored in the Raft configuration then has to be updated
	// (AddVoter with the same ID) once, on the first start with it.
	Transport raft.Transport

	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout are Raft's
	// timers. The defaults (50ms each) are tuned for a single voter: a fresh
	// or restarted node becomes leader within 50-100ms. Multi-node
	// deployments need larger values (Raft's defaults are 1s/1s/500ms).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// SnapshotThreshold, SnapshotInterval and TrailingLogs control log
	// compaction; zero means Raft's defaults (8192 entries, 120s, 10240).
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64

	// ApplyTimeout bounds a write (and Open's wait for leadership) when the
	// context has no deadline. Default: 10s.
	ApplyTimeout time.Duration

	// DefaultPartitions is used when CreateTopic is asked for -1
	// partitions (Kafka's "broker default", num.partitions). Default: 1.
	DefaultPartitions int32
	// DefaultReplicationFactor is used for a replication factor of -1
	// (default.replication.factor). Default: 1.
	DefaultReplicationFactor int16

	// FS overrides the filesystem of the metadata DB (crash tests).
	FS vfs.FS
}

// EnsureDefaults fills unset optional fields.
func (o *Options) EnsureDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RaftLogLevel == nil {
		o.RaftLogLevel = slog.LevelWarn
	}
	if o.HeartbeatTimeout == 0 {
		o.HeartbeatTimeout = 50 * time.Millisecond
	}
	if o.ElectionTimeout == 0 {
		o.ElectionTimeout = 50 * time.Millisecond
	}
	if o.LeaderLeaseTimeout == 0 {
		o.LeaderLeaseTimeout = 50 * time.Millisecond
	}
	if o.ApplyTimeout == 0 {
		o.ApplyTimeout = 10 * time.Second
	}
	if o.DefaultPartitions == 0 {
		o.DefaultPartitions = 1
	}
	if o.DefaultReplicationFactor == 0 {
		o.DefaultReplicationFactor = 1
	}
}

// Validate reports an invalid option.
func (o *Options) Validate() error {
	switch {
	case o.Dir == "":
		return errors.New("controller: Options.Dir is required")
	case o.NodeID < 0:
		return fmt.Errorf("controller: Options.NodeID %d must be >= 0", o.NodeID)
	case o.DefaultPartitions < 1 || o.DefaultPartitions > MaxPartitions:
		return fmt.Errorf("controller: Options.DefaultPartitions %d must be 1..%d", o.DefaultPartitions, MaxPartitions)
	case o.DefaultReplicationFactor < 1:
		return fmt.Errorf("controller: Options.DefaultReplicationFactor %d must be >= 1", o.DefaultReplicationFactor)
	}
	return nil
}

// Controller is the replicated metadata service of one node.
type Controller struct {
	opts   Options
	logger *slog.Logger
	db     *meta.DB
	raft   *raft.Raft

	// mu guards st. The FSM goroutine is its only writer.
	mu sync.RWMutex
	st state

	// lmu serialises event delivery with listener registration, so a new
	// listener's replay of existing topics and live events neither overlap
	// nor leave a gap.
	lmu       sync.Mutex
	listeners []func(Event)

	// applied is the last index folded into st and the DB; FSM goroutine only
	// (and Open, before Raft starts).
	applied uint64
	// broken is set when persisting an applied command failed.
	broken atomic.Pointer[error]

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

const localKeyNodeID = "node_id"

// Open starts the controller: it opens the metadata DB, bootstraps a
// one-voter cluster on a fresh directory (or restarts from the stored
// state), and returns once this node is leader and the state has caught up
// with the log. On a fresh directory it also chooses the cluster id.
func Open(ctx context.Context, opts Options) (_ *Controller, retErr error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	logger := opts.Logger.With("component", "controller", "node", opts.NodeID)
	db, err := meta.OpenWithOptions(meta.Options{Dir: opts.Dir, Logger: opts.Logger, FS: opts.FS})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	c := &Controller{opts: opts, logger: logger, db: db}
	defer func() {
		if retErr != nil {
			_ = c.Close()
		}
	}()

	if err := c.checkNodeID(); err != nil {
		return nil, err
	}
	st, applied, err := loadState(db)
	if err != nil {
		return nil, fmt.Errorf("controller: load state from %s: %w", opts.Dir, err)
	}
	c.st, c.applied = st, applied

	trans := opts.Transport
	if trans == nil {
		_, trans = raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("moonmq-node-%d", opts.NodeID)))
	}
	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(strconv.FormatInt(int64(opts.NodeID), 10))
	conf.HeartbeatTimeout = opts.HeartbeatTimeout
	conf.ElectionTimeout = opts.ElectionTimeout
	conf.LeaderLeaseTimeout = opts.LeaderLeaseTimeout
	if opts.SnapshotThreshold > 0 {
		conf.SnapshotThreshold = opts.SnapshotThreshold
	}
	if opts.SnapshotInterval > 0 {
		conf.SnapshotInterval = opts.SnapshotInterval
	}
	if opts.TrailingLogs > 0 {
		conf.TrailingLogs = opts.TrailingLogs
	}
	conf.NoSnapshotRestoreOnStart = true
	conf.Logger = newHCLogger(opts.Logger.With("component", "raft"), opts.RaftLogLevel)

	// The cache spares pebble reads when Raft re-reads recent entries (to
	// apply them right after storing them).
	logs, err := raft.NewLogCache(512, db.LogStore())
	if err != nil {
		return nil, fmt.Errorf("controller: log cache: %w", err)
	}
	stable, snaps := db.StableStore(), db.SnapshotStore()

	existing, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return nil, fmt.Errorf("controller: inspect raft state in %s: %w", opts.Dir, err)
	}
	if !existing {
		boot := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: conf.LocalID, Address: trans.LocalAddr(),
		}}}
		if err := raft.BootstrapCluster(conf, logs, stable, snaps, trans, boot); err != nil {
			return nil, fmt.Errorf("controller: bootstrap: %w", err)
		}
		logger.Info("bootstrapped a new single-voter metadata cluster", "dir", opts.Dir)
	}
	r, err := raft.NewRaft(conf, &fsm{c: c}, logs, stable, snaps, trans)
	if err != nil {
		return nil, fmt.Errorf("controller: start raft: %w", err)
	}
	c.raft = r

	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if err := c.awaitLeadership(ctx); err != nil {
		return nil, err
	}
	if err := r.Barrier(timeoutOf(ctx)).Error(); err != nil {
		return nil, fmt.Errorf("controller: catch up with the log: %w", err)
	}
	if c.ClusterID() == "" {
		if _, err := c.propose(ctx, &command{Op: opInitCluster, ClusterID: newClusterID()}); err != nil {
			return nil, fmt.Errorf("controller: choose cluster id: %w", err)
		}
	}
	// Debug: the node's start-up line (moonmq serving) carries the cluster id.
	logger.Debug("controller ready", "cluster_id", c.ClusterID(), "topics", len(c.Topics()), "applied_index", r.AppliedIndex())
	return c, nil
}

// checkNodeID records the node id on first use and rejects a different one
// later.
func (c *Controller) checkNodeID() error {
	want := strconv.FormatInt(int64(c.opts.NodeID), 10)
	v, err := c.db.GetLocal(localKeyNodeID)
	switch {
	case errors.Is(err, meta.ErrNotFound):
		if err := c.db.SetLocal(localKeyNodeID, []byte(want)); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("controller: %w", err)
	case string(v) != want:
		return fmt.Errorf("%w: %s belongs to node %s, not %s; use that node id or another directory", ErrNodeIDMismatch, c.opts.Dir, v, want)
	}
	return nil
}

// awaitLeadership waits until this node is the Raft leader.
func (c *Controller) awaitLeadership(ctx context.Context) error {
	for c.raft.State() != raft.Leader {
		select {
		case <-c.raft.LeaderCh():
			// LeaderCh keeps only the latest transition; re-check the state.
		case <-ctx.Done():
			return fmt.Errorf("controller: no leadership after waiting: %w (is %s used by another node id or cluster?)", ctx.Err(), c.opts.Dir)
		}
	}
	return nil
}

// newClusterID returns a Kafka-style cluster id: a random UUID in unpadded
// URL-safe base64 (22 characters).
func newClusterID() string {
	id := uuid.New()
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// Close stops Raft and closes the metadata DB. It is idempotent.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		var errs []error
		if c.raft != nil {
			if err := c.raft.Shutdown().Error(); err != nil {
				errs = append(errs, fmt.Errorf("controller: stop raft: %w", err))
			}
		}
		if err := c.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("controller: %w", err))
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// NodeID returns this node's id.
func (c *Controller) NodeID() int32 { return c.opts.NodeID }

// ClusterID returns the id chosen when the cluster was bootstrapped.
func (c *Controller) ClusterID() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.st.clusterID
}

// IsLeader reports whether this node is the active controller.
func (c *Controller) IsLeader() bool {
	return !c.closed.Load() && c.raft != nil && c.raft.State() == raft.Leader
}

// Topic returns a copy of the named topic.
func (c *Controller) Topic(name string) (Topic, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.st.topics[name]
	if !ok {
		return Topic{}, false
	}
	return t.Clone(), true
}

// Topics returns copies of all topics, sorted by name.
func (c *Controller) Topics() []Topic {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Topic, 0, len(c.st.topics))
	for _, name := range sortedNames(c.st.topics) {
		out = append(out, c.st.topics[name].Clone())
	}
	return out
}

func sortedNames(m map[string]*Topic) []string {
	names := slices.Collect(maps.Keys(m))
	sort.Strings(names)
	return names
}

// OnChange registers fn and immediately calls it with a TopicCreated event
// for every existing topic (in name order), then with every later change.
// Registration is atomic with respect to applies: fn sees each change
// exactly once and in log order, with no gap between the replay and live
// events. fn runs on the Raft apply path: it must be quick, may call the
// read methods (Topic, Topics, ClusterID), and must not call write methods
// or OnChange (that would deadlock).
func (c *Controller) OnChange(fn func(ev Event)) {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	c.listeners = append(c.listeners, fn)
	for _, t := range c.Topics() {
		fn(Event{Kind: TopicCreated, Topic: t})
	}
}

// publish changes the in-memory state with change (under the write lock)
// and delivers the events it returns to every listener (after releasing it,
// so listeners can read).
func (c *Controller) publish(change func(st *state) []Event) {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	c.mu.Lock()
	evs := change(&c.st)
	c.mu.Unlock()
	for _, ev := range evs {
		for _, fn := range c.listeners {
			fn(Event{Kind: ev.Kind, Topic: ev.Topic.Clone(), Prev: ev.Prev.Clone()})
		}
	}
}

func (c *Controller) setBroken(err error) {
	c.broken.Store(&err)
	c.logger.Error("metadata state machine stopped; restart the node to recover", "error", err)
}

// brokers returns the ids of the brokers replicas may be placed on. Single
// node for now; a later version reads registered brokers from the state.
func (c *Controller) brokers() []int32 { return []int32{c.opts.NodeID} }

// assign places rf replicas for partitions first..first+count-1 round-robin
// over brokers, Kafka-style: partition p starts at broker p mod n, so
// leadership spreads evenly. Every replica starts in the ISR.
func assign(first, count int32, rf int, brokers []int32) []partitionRecord {
	out := make([]partitionRecord, count)
	n := len(brokers)
	for i := range out {
		p := int(first) + i
		replicas := make([]int32, rf)
		for j := range replicas {
			replicas[j] = brokers[(p+j)%n]
		}
		out[i] = partitionRecord{Replicas: replicas, Leader: replicas[0], ISR: slices.Clone(replicas)}
	}
	return out
}

// CreateTopic creates a topic with partitions partitions (-1: the default)
// and replicationFactor replicas each (-1: the default). configs are
// overrides, validated by topicconfig. With validateOnly it returns the
// topic that would be created and changes nothing.
func (c *Controller) CreateTopic(ctx context.Context, name string, partitions int32, replicationFactor int16,
	configs map[string]string, validateOnly bool,
) (Topic, error) {
	// Check the name first, as Kafka does: a bad name is the error reported
	// even if the counts are bad too.
	if err := ValidateTopicName(name); err != nil {
		return Topic{}, err
	}
	if partitions == -1 {
		partitions = c.opts.DefaultPartitions
	}
	if partitions < 1 || partitions > MaxPartitions {
		return Topic{}, fmt.Errorf("%w: %d partitions; use 1 to %d (or -1 for the default)", ErrInvalidPartitions, partitions, MaxPartitions)
	}
	if replicationFactor == -1 {
		replicationFactor = c.opts.DefaultReplicationFactor
	}
	brokers := c.brokers()
	if replicationFactor < 1 || int(replicationFactor) > len(brokers) {
		return Topic{}, fmt.Errorf("%w: %d, but there are %d brokers", ErrInvalidReplicationFactor, replicationFactor, len(brokers))
	}
	configs = maps.Clone(configs)
	if IsInternalTopic(name) {
		if configs == nil {
			configs = map[string]string{}
		}
		maps.Copy(configs, InternalTopicConfigs) // created the way it must stay
	}
	return c.change(ctx, &command{
		Op:         opCreateTopic,
		Topic:      name,
		TopicID:    uuid.New().String(),
		Internal:   IsInternalTopic(name),
		Partitions: assign(0, partitions, int(replicationFactor), brokers),
		Configs:    configs,
	}, validateOnly)
}

// Repair is one setting RepairTopicConfigs changed.
type Repair struct {
	Topic, Key, Was, Now string
}

// RepairTopicConfigs makes a topic's config overrides exactly want, if they
// are not, and returns what it changed. Owners of internal topics call it
// when they load: clients cannot change those settings, so a difference
// was left by an older release that let them (retention on committed
// offsets, say).
func (c *Controller) RepairTopicConfigs(ctx context.Context, name string, want map[string]string) ([]Repair, error) {
	t, ok := c.Topic(name)
	if !ok || maps.Equal(t.Configs, want) {
		return nil, nil
	}
	var repairs []Repair
	for k, v := range want {
		if t.Configs[k] != v {
			repairs = append(repairs, Repair{Topic: name, Key: k, Was: t.Configs[k], Now: v})
		}
	}
	for k, v := range t.Configs {
		if _, keep := want[k]; !keep {
			repairs = append(repairs, Repair{Topic: name, Key: k, Was: v, Now: "(default)"})
		}
	}
	sort.Slice(repairs, func(i, j int) bool { return repairs[i].Key < repairs[j].Key })
	if _, err := c.ReplaceConfigs(ctx, name, want, false); err != nil {
		return nil, fmt.Errorf("repair configs of %s: %w", name, err)
	}
	return repairs, nil
}

// DeleteTopic deletes a topic and returns it as it was.
func (c *Controller) DeleteTopic(ctx context.Context, name string) (Topic, error) {
	return c.change(ctx, &command{Op: opDeleteTopic, Topic: name}, false)
}

// CreatePartitions grows a topic to total partitions; total must exceed the
// current count.
func (c *Controller) CreatePartitions(ctx context.Context, name string, total int32, validateOnly bool) (Topic, error) {
	t, ok := c.Topic(name)
	if !ok {
		return Topic{}, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	cur := int32(len(t.Partitions))
	if total <= cur || total > MaxPartitions {
		return Topic{}, fmt.Errorf("%w: topic %q has %d partitions; the new total must be %d to %d", ErrInvalidPartitions, name, cur, cur+1, MaxPartitions)
	}
	rf := len(t.Partitions[0].Replicas)
	brokers := c.brokers()
	if rf > len(brokers) {
		return Topic{}, fmt.Errorf("%w: topic %q has %d replicas per partition, but there are %d brokers", ErrInvalidReplicationFactor, name, rf, len(brokers))
	}
	return c.change(ctx, &command{
		Op:         opCreatePartitions,
		Topic:      name,
		Total:      total,
		Partitions: assign(cur, total-cur, rf, brokers),
	}, validateOnly)
}

// AlterConfigs applies IncrementalAlterConfigs operations to a topic's
// overrides. The resulting set is validated as a whole.
func (c *Controller) AlterConfigs(ctx context.Context, name string, ops []ConfigOp, validateOnly bool) (Topic, error) {
	recs := make([]configOpRecord, len(ops))
	for i, op := range ops {
		recs[i] = configOpRecord{Key: op.Key, Op: int8(op.Op), Value: op.Value}
	}
	return c.change(ctx, &command{Op: opAlterConfigs, Topic: name, ConfigOps: recs}, validateOnly)
}

// ReplaceConfigs replaces all of a topic's overrides (legacy AlterConfigs:
// keys not given revert to their defaults).
func (c *Controller) ReplaceConfigs(ctx context.Context, name string, configs map[string]string, validateOnly bool) (Topic, error) {
	if configs == nil {
		configs = map[string]string{}
	}
	return c.change(ctx, &command{Op: opReplaceConfigs, Topic: name, Configs: maps.Clone(configs)}, validateOnly)
}

// AllocateProducerIDs reserves n consecutive producer ids and returns the
// first. The counter is replicated, so ids are unique across restarts and
// (later) across nodes.
func (c *Controller) AllocateProducerIDs(ctx context.Context, n int64) (int64, error) {
	cmd := &command{Op: opAllocProducerIDs, Count: n}
	if _, err := c.check(cmd); err != nil {
		return 0, err
	}
	res, err := c.propose(ctx, cmd)
	if err != nil {
		return 0, err
	}
	return res.firstPID, nil
}

// change validates cmd against the current state, then (unless
// validateOnly) commits it, and returns the resulting topic.
func (c *Controller) change(ctx context.Context, cmd *command, validateOnly bool) (Topic, error) {
	e, err := c.check(cmd)
	if err != nil {
		return Topic{}, err
	}
	if t := e.result.topic; t != nil && cmd.Op != opDeleteTopic {
		// A proposer-side rule, not an FSM one: entries already in the log
		// replay as they were; new changes cannot make them unsafe. (A
		// delete is the way out of an unsafe one, so it is not checked.)
		if err := checkInternalTopic(t); err != nil {
			return Topic{}, err
		}
	}
	if validateOnly {
		return e.result.topic.Clone(), nil
	}
	res, err := c.propose(ctx, cmd)
	if err != nil {
		return Topic{}, err
	}
	return res.topic.Clone(), nil
}

// check runs the FSM's plan on the current state without changing it.
// Only the leader validates: a follower's state may be behind.
func (c *Controller) check(cmd *command) (effect, error) {
	if err := c.writable(); err != nil {
		return effect{}, err
	}
	c.mu.RLock()
	e := plan(cmd, &c.st)
	c.mu.RUnlock()
	return e, e.result.err
}

func (c *Controller) writable() error {
	if c.closed.Load() {
		return ErrClosed
	}
	if err := c.broken.Load(); err != nil {
		return *err
	}
	if c.raft.State() != raft.Leader {
		return ErrNotController
	}
	return nil
}

// propose appends cmd to the Raft log and waits until it is applied. If ctx
// ends first the error says so, but the command may still be applied.
func (c *Controller) propose(ctx context.Context, cmd *command) (*result, error) {
	data, err := encodeCommand(cmd)
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("controller: %s: %w", cmd.Op, err)
	}
	f := c.raft.Apply(data, timeoutOf(ctx))
	done := make(chan error, 1)
	go func() { done <- f.Error() }() // ends when raft responds, at the latest on shutdown
	select {
	case err = <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("controller: %s: %w (the change may still be applied)", cmd.Op, ctx.Err())
	}
	if err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
			errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return nil, fmt.Errorf("%w: %s: %v", ErrNotController, cmd.Op, err)
		case errors.Is(err, raft.ErrRaftShutdown):
			return nil, fmt.Errorf("%w: %s", ErrClosed, cmd.Op)
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return nil, fmt.Errorf("controller: %s: %w", cmd.Op, context.DeadlineExceeded)
		}
		return nil, fmt.Errorf("controller: %s: %w", cmd.Op, err)
	}
	res, ok := f.Response().(*result)
	if !ok || res == nil {
		return nil, fmt.Errorf("controller: %s: no result from the state machine", cmd.Op)
	}
	if res.err != nil {
		return nil, res.err
	}
	return res, nil
}

// withTimeout bounds ctx by ApplyTimeout if it has no deadline.
func (c *Controller) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.opts.ApplyTimeout)
}

// timeoutOf converts ctx's deadline to the duration Raft's API takes.
func timeoutOf(ctx context.Context) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(time.Until(dl), time.Millisecond)
}
