package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonmq/moonmq/engine/coord"
)

// OffsetsTopic is the internal topic holding commits and group metadata.
const OffsetsTopic = "__consumer_offsets"

// Storage is what the coordinator needs of the broker: the partitions of
// the internal offsets topic. BrokerStorage implements it over a node's
// partitions; tests use an in-memory one.
type Storage interface {
	coord.Storage
	// Partitions is the partition count of the offsets topic, 0 if it does
	// not exist.
	Partitions() int32
	// Create creates the offsets topic with n partitions unless it exists,
	// and returns its partition count.
	Create(ctx context.Context, n int32) (int32, error)
}

// Reply is a group request's answer: Wait returns it once every record
// its answer depends on is durable (see engine/coord). Handlers that must
// not block try Ready first.
type Reply[T any] = coord.Future[T]

// Coordinator is the node's group coordinator. It only routes: each
// group lives in the shard of its __consumer_offsets partition
// (PartitionFor), which a coord.Runtime loads, serialises, ticks and makes
// durable.
type Coordinator struct {
	cfg   Config
	store Storage
	log   *slog.Logger
	rt    *coord.Runtime[*shard]

	topics   atomic.Pointer[topicSnapshot]
	topicsMu sync.Mutex // serialises SetTopics so versions increase with content

	createMu sync.Mutex // serialises creation of the offsets topic

	mu     sync.Mutex // guards the fields below; never held during an operation
	nparts int32      // partitions of the offsets topic; 0: none yet
	// homes routes groups whose records live outside their hash partition
	// (the topic grew since they were written), per partition.
	homes  map[string]int32
	closed bool

	startOnce sync.Once
}

// New returns a coordinator; Start loads it and starts the driver.
func New(cfg Config, store Storage) (*Coordinator, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("group: storage is required")
	}
	c := &Coordinator{cfg: cfg, store: store, log: cfg.Logger.With("component", "group"), homes: map[string]int32{}}
	c.topics.Store(newTopicSnapshot(0, nil))
	c.rt = coord.New(coord.Config{
		Topic: OffsetsTopic, MaxBatchBytes: cfg.MaxRecordBytes,
		TickInterval: cfg.TickInterval, RecheckInterval: cfg.PartitionRecheckInterval,
		Now: cfg.Now, Logger: c.log,
	}, store, c.newShard)
	return c, nil
}

// Loaded is closed once the coordinator has replayed the offsets topic
// (at once after Start when there is none yet) and serves group requests.
func (c *Coordinator) Loaded() <-chan struct{} { return c.rt.Loaded() }

// SetTopics replaces the coordinator's view of the cluster's topics. main
// calls it on every metadata change (before Start, then from the
// controller's change listener).
func (c *Coordinator) SetTopics(topics []TopicInfo) {
	c.topicsMu.Lock()
	c.topics.Store(newTopicSnapshot(c.topics.Load().version+1, topics))
	c.topicsMu.Unlock()
	// On a cluster another node may have created the offsets topic: from
	// here on groups route to its partitions (and answer NOT_COORDINATOR
	// where this node does not lead them), as they would had this node
	// created it.
	for _, t := range topics {
		if t.Name == OffsetsTopic && t.Partitions > 0 {
			c.mu.Lock()
			if c.nparts == 0 && !c.closed {
				c.nparts = t.Partitions
			}
			c.mu.Unlock()
		}
	}
}

// Start replays the offsets topic, if it exists, in the background (a
// shard per partition) and then runs the driver until Close. Group
// requests are answered COORDINATOR_LOAD_IN_PROGRESS until every
// partition found here is replayed (or failed to be): a group's records
// need not be in its hash partition after the topic grew (route).
func (c *Coordinator) Start() {
	c.startOnce.Do(func() {
		n := c.store.Partitions()
		c.mu.Lock()
		c.nparts = n
		c.mu.Unlock()
		c.rt.Start(c.owned(partitionRange(n)))
	})
}

// owned are the partitions of ps this node coordinates (Config.Owns).
func (c *Coordinator) owned(ps []int32) []int32 {
	if c.cfg.Owns == nil {
		return ps
	}
	var out []int32
	for _, p := range ps {
		if c.cfg.Owns(p) {
			out = append(out, p)
		}
	}
	return out
}

func partitionRange(n int32) []int32 {
	ps := make([]int32, n)
	for p := range n {
		ps[p] = p
	}
	return ps
}

// LoadPartition makes this node coordinate the groups of offsets
// partition p (it became the partition's leader): the partition is
// replayed, its groups answered COORDINATOR_LOAD_IN_PROGRESS meanwhile. It
// returns once they are served, or why not (the replay is then retried).
// Start loads every partition; a leadership listener calls this.
func (c *Coordinator) LoadPartition(p int32) error { return c.rt.Load(p) }

// UnloadPartition stops coordinating the groups of offsets partition p
// (this node no longer leads it): their parked requests, and later ones,
// are answered NOT_COORDINATOR, so clients find the new coordinator.
func (c *Coordinator) UnloadPartition(p int32) {
	c.rt.Unload(p, fmt.Errorf("%w: %s-%d moved to another node", ErrNotCoordinator, OffsetsTopic, p))
}

// Close stops the driver and answers every parked request with
// COORDINATOR_NOT_AVAILABLE. Nothing is lost: every acknowledged change is
// already durable.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.rt.Close()
	return nil
}

// Ready is nil when group requests can be served: not closed, and no
// offsets partition still loading.
func (c *Coordinator) Ready() error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("%w: shutting down", ErrCoordinatorNotAvailable)
	case !c.loaded() || c.rt.Loading():
		return fmt.Errorf("%w: replaying %s", ErrCoordinatorLoadInProgress, OffsetsTopic)
	}
	return nil
}

// loaded reports whether the partitions Start found have been replayed
// (or failed to and are retried).
func (c *Coordinator) loaded() bool {
	select {
	case <-c.rt.Loaded():
		return true
	default:
		return false
	}
}

// EnsureTopic creates the offsets topic if it does not exist yet; group
// state needs it. FindCoordinator calls it, so the first group client
// creates the topic.
func (c *Coordinator) EnsureTopic(ctx context.Context) error {
	if n, err := c.partitions(); n > 0 || err != nil {
		return err
	}
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if n, err := c.partitions(); n > 0 || err != nil {
		return err
	}
	// Not under c.mu: creating the topic calls back into SetTopics through
	// the metadata listener.
	n, err := c.store.Create(ctx, c.cfg.OffsetsTopicPartitions)
	if err != nil {
		return fmt.Errorf("%w: creating %s: %v", ErrCoordinatorNotAvailable, OffsetsTopic, err)
	}
	// The new partitions are empty, so loading them replays nothing, but
	// records their generations, which later rechecks compare against. A
	// partition that cannot say is down, and retried by the rechecks.
	for _, p := range c.owned(partitionRange(n)) {
		_ = c.rt.Load(p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nparts == 0 && !c.closed {
		c.nparts = n
		c.log.Info("created the offsets topic", "topic", OffsetsTopic, "partitions", n)
	}
	return nil
}

// partitions is the offsets topic's partition count, or why no group can
// be served.
func (c *Coordinator) partitions() (int32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, fmt.Errorf("%w: shutting down", ErrCoordinatorNotAvailable)
	}
	return c.nparts, nil
}

// PartitionFor is the __consumer_offsets partition of a group: Kafka's
// abs(groupId.hashCode) % partitions, with Java's String.hashCode over
// UTF-16 code units, so the layout matches a Kafka cluster's.
func PartitionFor(group string, partitions int32) int32 { return coord.PartitionFor(group, partitions) }

// route is the partition holding group's records: its hash partition,
// unless a replay found it in another one (the topic grew). It fails when
// there is no offsets topic yet, or the coordinator closed.
func (c *Coordinator) route(group string) (int32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return 0, fmt.Errorf("%w: shutting down", ErrCoordinatorNotAvailable)
	case c.nparts == 0:
		return 0, fmt.Errorf("%w: %s does not exist yet (FindCoordinator creates it)", ErrCoordinatorNotAvailable, OffsetsTopic)
	}
	if p, ok := c.homes[group]; ok {
		return p, nil
	}
	if !c.loaded() {
		// After the topic grew, a group's records may be in another
		// partition than its hash one, which is only known once that one
		// is replayed (setHome): serving the group from its hash partition
		// meanwhile would hide, once it is, what was acknowledged there.
		return 0, fmt.Errorf("%w: replaying %s", ErrCoordinatorLoadInProgress, OffsetsTopic)
	}
	return PartitionFor(group, c.nparts), nil
}

// OffsetsPartition is the __consumer_offsets partition that holds group's
// records (and takes its transactional offset commits), or why it is not
// known now (the coordinator's errors: not available, loading).
func (c *Coordinator) OffsetsPartition(group string) (int32, error) { return c.route(group) }

// setHome records that partition p's replay found group (shard.Activate):
// false if another partition's copy is routed already.
func (c *Coordinator) setHome(group string, p int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if q, ok := c.homes[group]; ok {
		return q == p
	}
	if c.nparts > 0 && PartitionFor(group, c.nparts) != p {
		c.homes[group] = p
	}
	return true
}

// do runs op on group's shard; the error says why it did not run.
func (c *Coordinator) do(group string, op func(s *shard, now time.Time)) error {
	p, err := c.route(group)
	if err != nil {
		return err
	}
	return c.rt.Do(p, func(s *shard) { op(s, c.cfg.Now()) })
}

// Tick applies the timeouts due at now and, when due, the offset
// retention sweep, in every shard. The driver calls it; tests call it with
// a fake clock.
func (c *Coordinator) Tick(now time.Time) { c.rt.Tick(now) }

// TopicDeleted removes every group's offsets for a deleted topic. For the
// offsets topic itself, all group state is gone with it.
func (c *Coordinator) TopicDeleted(topic string) {
	if topic == OffsetsTopic {
		c.mu.Lock()
		c.nparts = 0
		clear(c.homes) // a topic created again starts with empty partitions
		c.mu.Unlock()
		c.rt.UnloadAll(fmt.Errorf("%w: %s was deleted", ErrCoordinatorNotAvailable, OffsetsTopic))
		c.log.Warn("the offsets topic was deleted; all committed offsets and group metadata are gone", "topic", OffsetsTopic)
		return
	}
	c.rt.Each(func(_ int32, s *shard) { s.topicDeleted(c.cfg.Now(), topic) })
}

// ---- classic protocol ----

// JoinGroup starts a JoinGroup; the reply may complete only after the
// rebalance.
func (c *Coordinator) JoinGroup(req JoinRequest) *Reply[JoinResult] {
	return start(c, req.Group, ErrInvalidGroupID,
		func(err error) JoinResult { return JoinResult{Err: err, MemberID: req.MemberID, Generation: -1} },
		func(s *shard, now time.Time, r *Reply[JoinResult]) { s.join(now, req, r) })
}

// SyncGroup starts a SyncGroup; for followers the reply completes once
// the leader assigned.
func (c *Coordinator) SyncGroup(req SyncRequest) *Reply[SyncResult] {
	return start(c, req.Group, ErrInvalidGroupID, func(err error) SyncResult { return SyncResult{Err: err} },
		func(s *shard, now time.Time, r *Reply[SyncResult]) { s.sync(now, req, r) })
}

// start runs op on group's shard; op completes r, now or in a later
// operation (a parked request). fail is the reply to a request refused
// before it reached the shard, for an empty group id (empty), the
// coordinator's state or the shard's.
func start[T any](c *Coordinator, group string, empty error, fail func(error) T, op func(s *shard, now time.Time, r *Reply[T])) *Reply[T] {
	r := coord.NewFuture[T]()
	if err := c.checkGroup(group, empty); err != nil {
		r.Resolve(fail(err))
		return r
	}
	if err := c.do(group, func(s *shard, now time.Time) { op(s, now, r) }); err != nil {
		r.Resolve(fail(err))
	}
	return r
}

// reply is start for an operation whose result is its reply.
func reply[T any](c *Coordinator, group string, empty error, fail func(error) T, op func(s *shard, now time.Time) T) *Reply[T] {
	return start(c, group, empty, fail, func(s *shard, now time.Time, r *Reply[T]) { r.Complete(s.sh, op(s, now)) })
}

// itself is the reply of an operation whose reply is its error.
func itself(err error) error { return err }

// checkGroup refuses an empty group id with empty, after the
// coordinator's own availability (Kafka's order).
func (c *Coordinator) checkGroup(group string, empty error) error {
	if group != "" {
		return nil
	}
	if err := c.Ready(); err != nil {
		return err
	}
	if _, err := c.route(""); err != nil {
		return err
	}
	return empty
}

// Heartbeat handles a classic Heartbeat.
func (c *Coordinator) Heartbeat(req HeartbeatRequest) *Reply[error] {
	return reply(c, req.Group, ErrInvalidGroupID, itself, func(s *shard, now time.Time) error { return s.heartbeat(now, req) })
}

// LeaveResult answers a LeaveGroup: one error per member, or Err for the
// whole group.
type LeaveResult struct {
	Members []error
	Err     error
}

// LeaveGroup removes members.
func (c *Coordinator) LeaveGroup(group string, members []LeaveMember) *Reply[LeaveResult] {
	return reply(c, group, ErrInvalidGroupID, func(err error) LeaveResult { return LeaveResult{Err: err} },
		func(s *shard, now time.Time) LeaveResult { return LeaveResult{Members: s.leave(now, group, members)} })
}

// ---- consumer (KIP-848) protocol ----

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat; the result's Err is
// its error.
func (c *Coordinator) ConsumerHeartbeat(req ConsumerHeartbeatRequest) *Reply[ConsumerHeartbeatResult] {
	return reply(c, req.Group, invalid("GroupId can't be empty."),
		func(err error) ConsumerHeartbeatResult { return ConsumerHeartbeatResult{Err: err} },
		func(s *shard, now time.Time) ConsumerHeartbeatResult {
			res, err := s.consumerHeartbeat(now, req)
			res.Err = err
			return res
		})
}

// ---- offsets ----

// CommitRequest is an OffsetCommit. For consumer groups Generation is the
// member epoch.
type CommitRequest struct {
	Group      string
	Version    int16
	Generation int32
	MemberID   string
	InstanceID string
	// Retention is the v2-v4 retention time (<= 0: none).
	Retention time.Duration
	Topics    []CommitTopic
	// Producer is set for a TxnOffsetCommit: the offsets are written in
	// the producer's transaction and become visible when it commits.
	Producer *TxnProducer
}

// TxnProducer is the transaction a TxnOffsetCommit writes in: its
// producer id and epoch, and the guard its offsets partition handed out
// when the transaction coordinator verified the partition (KIP-890; nil:
// none was needed).
type TxnProducer struct {
	ID    int64
	Epoch int16
	Guard any
}

// CommitTopic is one topic of an OffsetCommit.
type CommitTopic struct {
	Topic      string
	Partitions []CommitPartition
}

// CommitPartition is one partition of an OffsetCommit.
type CommitPartition struct {
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
	// Timestamp is the v1 commit timestamp (-1: none), which set the
	// expiry.
	Timestamp int64
}

// CommitOffsets validates, appends and applies an OffsetCommit. The reply
// has one error per requested partition (nil: committed); it is released
// once the commit is durable (a failed fsync is Wait's error).
func (c *Coordinator) CommitOffsets(req CommitRequest) *Reply[[][]error] {
	failAll := func(err error) [][]error {
		out := make([][]error, len(req.Topics))
		for i, t := range req.Topics {
			out[i] = slices.Repeat([]error{err}, len(t.Partitions))
		}
		return out
	}
	snap := c.topics.Load()
	return reply(c, req.Group, ErrInvalidGroupID, failAll, func(s *shard, now time.Time) [][]error { return s.commit(now, req, snap) })
}

// CompleteTransaction writes the end-transaction marker m to offsets
// partition p (WriteTxnMarkers) and applies it: committed, the
// transaction's offsets become visible, unless a plain commit written after
// them replaced them; aborted, they are dropped. The reply is released
// once the marker is durable.
func (c *Coordinator) CompleteTransaction(p int32, m coord.Marker) *Reply[error] {
	r := coord.NewFuture[error]()
	if err := c.rt.Do(p, func(s *shard) { r.Complete(s.sh, s.completeTxn(c.cfg.Now(), m)) }); err != nil {
		r.Resolve(err)
	}
	return r
}

// FetchRequest is one group of an OffsetFetch. Topics nil means every
// committed partition.
type FetchRequest struct {
	Group       string
	MemberID    *string // v9+, consumer groups
	MemberEpoch int32
	Topics      []FetchTopic
	// RequireStable (v7+): a partition with a transactional offset
	// pending answers ErrUnstableOffsetCommit instead of its offset.
	RequireStable bool
}

// FetchTopic is a topic of an OffsetFetch.
type FetchTopic struct {
	Topic      string
	Partitions []int32
}

// FetchedTopic is a topic's committed offsets.
type FetchedTopic struct {
	Topic      string
	Partitions []FetchedPartition
}

// FetchedPartition is one committed offset; Offset is -1 without a commit.
type FetchedPartition struct {
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	Err         error // ErrUnstableOffsetCommit
}

// FetchResult answers one group of an OffsetFetch.
type FetchResult struct {
	Topics []FetchedTopic
	Err    error
}

// FetchOffsets returns committed offsets.
func (c *Coordinator) FetchOffsets(req FetchRequest) *Reply[FetchResult] {
	r := coord.NewFuture[FetchResult]()
	if req.Group == "" {
		if err := c.Ready(); err != nil {
			r.Resolve(FetchResult{Err: err})
			return r
		}
		r.Resolve(FetchResult{Err: ErrInvalidGroupID})
		return r
	}
	if n, err := c.partitions(); err != nil || n == 0 {
		// Nothing was ever committed: every partition is unknown.
		r.Resolve(FetchResult{Topics: fetchOf(nil, req, nil), Err: err})
		return r
	}
	if err := c.do(req.Group, func(s *shard, _ time.Time) {
		g := s.groups[req.Group]
		var res FetchResult
		if g != nil {
			res.Err = g.kind.checkFetch(req.MemberID, req.MemberEpoch)
		}
		if res.Err == nil {
			var unstable func(tpKey) bool
			if req.RequireStable {
				unstable = func(k tpKey) bool { return s.hasTxnOffsets(req.Group, k) }
			}
			res.Topics = fetchOf(g, req, unstable)
		}
		r.Complete(s.sh, res)
	}); err != nil {
		r.Resolve(FetchResult{Err: err})
	}
	return r
}

// fetchOf answers req from g (nil: a group without offsets); unstable,
// when set, says which partitions have a transactional offset pending.
func fetchOf(g *Group, req FetchRequest, unstable func(tpKey) bool) []FetchedTopic {
	get := func(topic string, p int32) FetchedPartition {
		fp := FetchedPartition{Partition: p, Offset: -1, LeaderEpoch: -1}
		if unstable != nil && unstable(tpKey{topic, p}) {
			fp.Err = fmt.Errorf("%w: %s-%d of group %q", ErrUnstableOffsetCommit, topic, p, req.Group)
			return fp
		}
		if g != nil {
			if e := g.offsets[tpKey{topic, p}]; e != nil {
				fp.Offset, fp.LeaderEpoch, fp.Metadata = e.offset, e.leaderEpoch, e.metadata
			}
		}
		return fp
	}
	if req.Topics == nil {
		out := []FetchedTopic{}
		if g == nil {
			return out
		}
		for _, k := range g.sortedOffsets() {
			if len(out) == 0 || out[len(out)-1].Topic != k.topic {
				out = append(out, FetchedTopic{Topic: k.topic})
			}
			t := &out[len(out)-1]
			t.Partitions = append(t.Partitions, get(k.topic, k.part))
		}
		return out
	}
	out := make([]FetchedTopic, 0, len(req.Topics))
	for _, t := range req.Topics {
		ft := FetchedTopic{Topic: t.Topic, Partitions: make([]FetchedPartition, 0, len(t.Partitions))}
		for _, p := range t.Partitions {
			ft.Partitions = append(ft.Partitions, get(t.Topic, p))
		}
		out = append(out, ft)
	}
	return out
}

// DeleteOffsetsResult answers an OffsetDelete: one error per partition,
// or Err for the whole group.
type DeleteOffsetsResult struct {
	Partitions [][]error
	Err        error
}

// DeleteOffsets deletes committed offsets (OffsetDelete). Offsets of
// topics the group consumes are refused per partition.
func (c *Coordinator) DeleteOffsets(group string, topics []FetchTopic) *Reply[DeleteOffsetsResult] {
	return reply(c, group, ErrInvalidGroupID, func(err error) DeleteOffsetsResult { return DeleteOffsetsResult{Err: err} },
		func(s *shard, now time.Time) DeleteOffsetsResult {
			errs, err := s.deleteOffsets(now, group, topics)
			return DeleteOffsetsResult{Partitions: errs, Err: err}
		})
}

// ---- admin ----

// GroupListing is one row of ListGroups.
type GroupListing struct {
	Group        string
	ProtocolType string
	State        State
	Type         string
}

// ListGroups lists the groups of every served shard, optionally filtered
// by state and type names (case-insensitive, as Kafka matches them).
func (c *Coordinator) ListGroups(states, types []string) ([]GroupListing, error) {
	if err := c.Ready(); err != nil {
		return nil, err
	}
	match := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	var out []GroupListing
	c.rt.Each(func(_ int32, s *shard) {
		for _, g := range s.groups {
			l := GroupListing{Group: g.id, ProtocolType: g.ProtocolType(), State: g.State(), Type: g.Type()}
			if match(states, string(l.State)) && match(types, l.Type) {
				out = append(out, l)
			}
		}
	})
	slices.SortFunc(out, func(a, b GroupListing) int { return strings.Compare(a.Group, b.Group) })
	return out, nil
}

// GroupDescription is one group of DescribeGroups.
type GroupDescription struct {
	Group        string
	Err          error
	State        State
	ProtocolType string
	Protocol     string
	Members      []MemberDescription
}

// DescribeGroups describes classic groups. A group that does not exist, or
// is a consumer group, is reported Dead with ErrGroupIDNotFound; the
// caller decides per version whether that is an error (v6+) or just Dead.
func (c *Coordinator) DescribeGroups(ids []string) []GroupDescription {
	out := make([]GroupDescription, 0, len(ids))
	for _, id := range ids {
		d := GroupDescription{Group: id, State: StateDead}
		d.Err = c.describe(id, ErrInvalidGroupID, func(g *Group) error {
			cl, ok := g.kind.(*Classic)
			if !ok {
				return fmt.Errorf("%w: %q is a %s group; use ConsumerGroupDescribe", ErrGroupIDNotFound, id, g.Type())
			}
			d.State, d.ProtocolType = cl.State(), cl.ProtocolType()
			d.Protocol, d.Members = cl.describe()
			return nil
		})
		out = append(out, d)
	}
	return out
}

// describe runs fill on group id under its shard's lock; the error is
// why it could not (empty is the error for an empty id). A shard still
// loading answers for its own groups only.
func (c *Coordinator) describe(id string, empty error, fill func(*Group) error) error {
	if id == "" {
		if err := c.Ready(); err != nil {
			return err
		}
		return empty
	}
	if n, err := c.partitions(); err != nil || n == 0 {
		if err == nil {
			err = fmt.Errorf("%w: %q", ErrGroupIDNotFound, id)
		}
		return err
	}
	var ferr error
	if err := c.do(id, func(s *shard, _ time.Time) {
		g := s.groups[id]
		if g == nil {
			ferr = fmt.Errorf("%w: %q", ErrGroupIDNotFound, id)
			return
		}
		ferr = fill(g)
	}); err != nil {
		return err
	}
	return ferr
}

// ConsumerGroupDescription is one group of ConsumerGroupDescribe.
type ConsumerGroupDescription struct {
	Group           string
	Err             error
	State           State
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ConsumerMemberDescription
}

// ConsumerGroupDescribe describes consumer (KIP-848) groups.
func (c *Coordinator) ConsumerGroupDescribe(ids []string) []ConsumerGroupDescription {
	out := make([]ConsumerGroupDescription, 0, len(ids))
	for _, id := range ids {
		d := ConsumerGroupDescription{Group: id, State: StateDead}
		d.Err = c.describe(id, invalid("GroupId can't be empty."), func(g *Group) error {
			cg, ok := g.kind.(*Consumer)
			if !ok {
				return fmt.Errorf("%w: %q is not a consumer group", ErrGroupIDNotFound, id)
			}
			d.State, d.Epoch, d.AssignmentEpoch, d.Assignor = cg.State(), cg.epoch, cg.targetEpoch, cg.assignorName()
			d.Members = cg.describeMembers()
			return nil
		})
		out = append(out, d)
	}
	return out
}

// TopicName resolves a topic id (for KIP-848 descriptions); "" if unknown.
func (c *Coordinator) TopicName(id TopicID) string {
	return c.topics.Load().byID[id].Name
}

// TopicID resolves a topic name; ok is false for an unknown topic.
func (c *Coordinator) TopicID(name string) (TopicID, bool) {
	t, ok := c.topics.Load().byName[name]
	return t.ID, ok
}

// DeleteGroups deletes groups without members, with their offsets: one
// reply per group.
func (c *Coordinator) DeleteGroups(ids []string) []*Reply[error] {
	out := make([]*Reply[error], len(ids))
	for i, id := range ids {
		out[i] = reply(c, id, ErrInvalidGroupID, itself, func(s *shard, now time.Time) error { return s.deleteGroup(now, id) })
	}
	return out
}

// GroupStat summarises a group for monitoring (/stats, the dashboard).
type GroupStat struct {
	Group   string
	State   State
	Type    string
	Members int
	Offsets []OffsetStat
}

// OffsetStat is one committed offset.
type OffsetStat struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Stats lists every group of the served shards with its committed
// offsets, sorted by group, topic and partition. It is empty while the
// coordinator is loading.
func (c *Coordinator) Stats() []GroupStat {
	if c.Ready() != nil {
		return nil
	}
	out := []GroupStat{}
	c.rt.Each(func(_ int32, s *shard) {
		for _, g := range s.groups {
			st := GroupStat{Group: g.id, State: g.State(), Type: g.Type(), Members: g.members()}
			for _, k := range g.sortedOffsets() {
				st.Offsets = append(st.Offsets, OffsetStat{Topic: k.topic, Partition: k.part, Offset: g.offsets[k].offset})
			}
			out = append(out, st)
		}
	})
	slices.SortFunc(out, func(a, b GroupStat) int { return strings.Compare(a.Group, b.Group) })
	return out
}
