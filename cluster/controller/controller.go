// Package controller owns the cluster metadata: topics, their partition
// assignments and config overrides, the registered brokers, the producer id
// counter, the cluster id, and the security metadata (ACL bindings, SCRAM
// credentials, client quotas: security.go). It is a hashicorp/raft state machine whose
// log, stable store, snapshots and materialised state live in one pebble DB
// (engine/meta). Without Options.Peers a node is a one-voter Raft cluster
// on an in-memory transport; with them the static voters talk Raft over
// TCP on the cluster listener, which also serves the controller RPC
// (transport.go, rpc.go). The Raft leader is the active controller: it
// alone plans changes; every write method on any node is routed to it
// (cluster.go) and answers once the caller's own state has the change.
// The active controller also fences brokers its Liveness reports gone for
// the session timeout, moving their leaderships (liveness.go,
// partitions.go), moves leaderships off replicas whose broker reports their
// storage failed, and moves leaderships back to preferred replicas.
// Readers see the metadata through cluster/metadata's types.
//
// Invariants:
//   - Every change goes through the Raft log as an ordered list of typed
//     records (records.go: a topic creation is a topic record, a partition
//     record per partition and a config record per override, as KRaft
//     writes them); the FSM is the only writer of the state and applies an
//     entry's records all or none, deterministically (anything random, such
//     as topic IDs, is chosen by the proposer and carried in the records).
//     Proposers plan records with the same checks the FSM applies, one
//     change at a time, so a rejected request never reaches the log, and
//     one that races another is still rejected consistently by the FSM.
//     Entries written by older releases (version 1 commands) are converted
//     to records when they replay, to the same state. An entry of a version
//     or record type this release does not know (a newer release wrote it)
//     stops the state machine (ErrStateBroken) rather than being skipped
//     as a rejected change, which would lose what it said.
//   - The FSM persists its state and the applied index in one pebble batch.
//     A restart loads that state directly and Raft replays only the entries
//     after the applied index: restart cost does not grow with history.
//     Raft snapshots exist for log compaction and for future followers; they
//     are not restored at start (NoSnapshotRestoreOnStart), because the
//     pebble state is at least as new as any snapshot.
//   - Reads (Topic, Topics, Brokers, ClusterID) serve an in-memory copy
//     under a read lock and return deep copies. On a follower they may lag
//     the active controller; a write returns only after the caller's node
//     applied it, so a node reads its own writes.
//   - Leadership and ISR changes follow Kafka's rules: every change of a
//     partition's leader, ISR or replicas bumps its PartitionEpoch, every
//     leader change its LeaderEpoch; an ISR is never empty; only ISR
//     members are elected (unclean election is off), so a partition whose
//     last ISR member is fenced is offline (Leader -1) until it returns.
//     A replica its broker reported offline (its storage failed:
//     ReportReplicaStorage) is listed in the partition's Offline, leaves
//     the ISR unless it is the last member, never leads and is never
//     elected or added to an ISR until its broker reports it online.
//   - A new active controller plans nothing until it has applied the whole
//     log of its term (a Barrier), and gives every broker a full session
//     timeout before fencing it.
//   - The apply path does no work for the rest of the node: it queues one
//     delta per applied entry (its index and typed changes) on every
//     Subscription, never blocking and never dropping (a subscriber that
//     falls far behind gets its pending deltas folded into one image).
//     Subscribers (the node's reconciler) host partitions in their own
//     goroutines and report how far they got; topic changes answer once an
//     awaiting subscriber reached their entry (bounded by the request's
//     deadline).
package controller

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/moonmq/moonmq/cluster/metadata"
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

	// Peers are the static controller voters (--peers), this node among
	// them. Empty: a one-voter cluster on an in-memory transport with the
	// address "moonmq-node-<NodeID>" (it sends no RPCs), as before peers
	// existed. The set is recorded in Dir at first start; a later start
	// with another set fails with ErrPeersMismatch.
	Peers []Peer
	// ClusterListener is bound by the caller on --cluster-listen; with
	// Peers, the controller serves Raft and the controller RPC on it and
	// closes it on Close. Required with Peers.
	ClusterListener net.Listener
	// ClusterDial connects to a peer's cluster port (default: TCP). The
	// node passes a TLS dialer, with ClusterListener a TLS listener, when
	// the cluster is secured: Raft and the controller RPC run inside.
	ClusterDial func(ctx context.Context, addr string) (net.Conn, error)
	// Liveness says which brokers are reachable (cluster/membership). nil:
	// every broker is, so none is fenced for being unreachable.
	Liveness Liveness
	// Incarnation names this start of the broker's process in its
	// registration (NewIncarnation; one is made when empty). The node gives
	// its gossip the same, so the active controller can tell a restarted
	// broker from the process it registered (IncarnationLiveness).
	Incarnation string
	// SessionTimeout is how long a broker may be unreachable before the
	// active controller fences it. Default: 6s.
	SessionTimeout time.Duration
	// LivenessInterval is how often the active controller checks
	// liveness. Default: 200ms.
	LivenessInterval time.Duration
	// LeaderRebalanceInterval is how often the active controller moves
	// leaderships back to preferred replicas. 0: 30s; negative: never.
	LeaderRebalanceInterval time.Duration

	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout are Raft's
	// timers. Without Peers the defaults (50ms each) are tuned for a single
	// voter: a fresh or restarted node becomes leader within 50-100ms. With
	// Peers they are 500ms/500ms/250ms: a dead leader is replaced in about
	// a second, well inside the broker session timeout, and a loaded
	// machine does not call elections for nothing.
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

	// Host, Port and Rack are this broker's registration: the address
	// clients reach it at (its advertised listener) and its rack (empty:
	// none). Open registers them when they differ from the stored ones.
	Host string
	Port int32
	Rack string

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
	hb, el, lease := 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	if len(o.Peers) > 0 {
		hb, el, lease = 500*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
	}
	if o.HeartbeatTimeout == 0 {
		o.HeartbeatTimeout = hb
	}
	if o.ElectionTimeout == 0 {
		o.ElectionTimeout = el
	}
	if o.LeaderLeaseTimeout == 0 {
		o.LeaderLeaseTimeout = lease
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 6 * time.Second
	}
	if o.LivenessInterval == 0 {
		o.LivenessInterval = 200 * time.Millisecond
	}
	if o.LeaderRebalanceInterval == 0 {
		o.LeaderRebalanceInterval = 30 * time.Second
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
	case o.DefaultPartitions < 1 || o.DefaultPartitions > metadata.MaxPartitions:
		return fmt.Errorf("controller: Options.DefaultPartitions %d must be 1..%d", o.DefaultPartitions, metadata.MaxPartitions)
	case o.DefaultReplicationFactor < 1:
		return fmt.Errorf("controller: Options.DefaultReplicationFactor %d must be >= 1", o.DefaultReplicationFactor)
	case o.SessionTimeout < 0 || o.LivenessInterval < 0:
		return errors.New("controller: Options.SessionTimeout and LivenessInterval must not be negative")
	}
	if len(o.Peers) > 0 {
		if o.ClusterListener == nil {
			return errors.New("controller: Options.ClusterListener is required with Peers")
		}
		return validatePeers(o.NodeID, o.Peers)
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

	// sec is what ACLs and ClientQuotas answer, replaced (never
	// modified) whenever the FSM changes them: readers on every request
	// take no lock.
	sec atomic.Pointer[securityView]

	// lmu serialises delta delivery with subscribing, so a new
	// subscription's image and the live deltas neither overlap nor leave a
	// gap. Order: lmu, then mu.
	lmu  sync.Mutex
	subs []*Subscription

	// wmu serialises changes from planning to commit: a change is planned
	// against the state every earlier change is in, as KRaft's single
	// controller thread does.
	wmu sync.Mutex

	// applied is the last index folded into st and the DB; FSM goroutine only
	// (and Open, before Raft starts).
	applied uint64
	// broken is set when persisting an applied command failed.
	broken atomic.Pointer[error]

	// appliedCh is closed and replaced (under mu) whenever st.applied
	// advances, to wake awaitApplied.
	appliedCh chan struct{}
	// ready is closed once this broker is registered (Ready).
	ready chan struct{}

	// Multi-node only: the mux on the cluster listener; readyTerm is the
	// Raft term in which this node, as leader, caught up with the log
	// (writes are planned here only then); tracker decides fencing on the
	// active controller (tmu guards it).
	mux       *mux
	netTrans  *raft.NetworkTransport
	readyTerm atomic.Uint64
	tmu       sync.Mutex
	tracker   *livenessTracker

	// stop is closed by Close; stopCtx is cancelled with it. wg counts the
	// goroutines Close waits for.
	stop    chan struct{}
	stopCtx context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

const localKeyNodeID = "node_id"

// Open starts the controller: it opens the metadata DB, bootstraps the
// voter set on a fresh directory (or restarts from the stored state), and
// starts Raft.
//
// Without Peers (one voter) it returns once this node is leader, the state
// caught up with the log and this broker is registered, as before peers
// existed; on a fresh directory it also chooses the cluster id.
//
// With Peers it returns as soon as Raft runs: nodes start in any order and
// the cluster forms when a majority is up. Ready is closed once this
// broker's registration is committed and applied here; the first active
// controller chooses the cluster id.
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
	stopCtx, cancel := context.WithCancel(context.Background())
	c := &Controller{opts: opts, logger: logger, db: db, appliedCh: make(chan struct{}), ready: make(chan struct{}),
		stop: make(chan struct{}), stopCtx: stopCtx, cancel: cancel}
	defer func() {
		if retErr != nil {
			_ = c.Close()
		}
	}()

	if err := c.checkNodeID(); err != nil {
		return nil, err
	}
	st, err := loadState(db)
	if err != nil {
		return nil, fmt.Errorf("controller: load state from %s: %w", opts.Dir, err)
	}
	c.st, c.applied = st, st.applied
	c.publishSecurity(&c.st.sec)

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
	if err := c.checkPeers(!existing); err != nil {
		return nil, err
	}
	var trans raft.Transport
	if c.multi() {
		c.mux = newMux(opts.ClusterListener, opts.ClusterDial, logger)
		self := c.peerAddr(opts.NodeID)
		c.netTrans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: &streamLayer{m: c.mux, addr: peerAddr(self)}, MaxPool: 3, Timeout: 10 * time.Second,
			Logger: newHCLogger(opts.Logger.With("component", "raft-transport"), opts.RaftLogLevel),
		})
		trans = c.netTrans
	} else {
		_, trans = raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("moonmq-node-%d", opts.NodeID)))
	}
	if !existing {
		boot := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: conf.LocalID, Address: trans.LocalAddr(),
		}}}
		if c.multi() {
			boot = bootstrapConfiguration(opts.Peers)
		}
		if err := raft.BootstrapCluster(conf, logs, stable, snaps, trans, boot); err != nil {
			return nil, fmt.Errorf("controller: bootstrap: %w", err)
		}
		logger.Info("bootstrapped a new metadata cluster", "dir", opts.Dir, "voters", len(boot.Servers))
	}
	r, err := raft.NewRaft(conf, &fsm{c: c}, logs, stable, snaps, trans)
	if err != nil {
		return nil, fmt.Errorf("controller: start raft: %w", err)
	}
	c.raft = r
	self := metadata.Broker{ID: opts.NodeID, Host: opts.Host, Port: opts.Port, Rack: opts.Rack, Incarnation: opts.Incarnation}
	if self.Incarnation == "" {
		self.Incarnation = NewIncarnation()
	}

	if c.multi() {
		c.mux.start(c.serveRPC)
		c.wg.Add(2)
		go c.leaderLoop()
		go c.registerLoop(self)
		logger.Debug("controller started", "peers", peersString(opts.Peers), "applied_index", c.AppliedIndex())
		return c, nil
	}

	ctx, cancelOpen := c.withTimeout(ctx)
	defer cancelOpen()
	if err := c.awaitLeadership(ctx); err != nil {
		return nil, err
	}
	if err := r.Barrier(timeoutOf(ctx)).Error(); err != nil {
		return nil, fmt.Errorf("controller: catch up with the log: %w", err)
	}
	if _, _, err := c.commit(ctx, "choose cluster id", func(st *state) ([]record, error) {
		return planInitCluster(st, newClusterID())
	}); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	if _, _, err := c.commit(ctx, "register broker", func(st *state) ([]record, error) {
		return planRegisterBroker(st, self, eligibleIn(st, nil))
	}); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	close(c.ready)
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
// NewIncarnation names a start of the broker's process
// (Options.Incarnation).
func NewIncarnation() string { return uuid.NewString() }

func newClusterID() string {
	id := uuid.New()
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// Close stops Raft, the cluster listener and the controller's goroutines
// and closes the metadata DB. It is idempotent.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.lmu.Lock()
		subs := c.subs
		c.subs = nil
		c.lmu.Unlock()
		for _, s := range subs {
			s.close()
		}
		close(c.stop)
		c.cancel()
		var errs []error
		if c.mux != nil {
			if c.raft != nil && c.raft.State() == raft.Leader {
				// Hand the active controller over rather than leave the
				// others an election timeout without one (a stop, as
				// after a controlled shutdown). Bounded by Raft (an
				// election timeout); a failure only costs that wait.
				if err := c.raft.LeadershipTransfer().Error(); err != nil {
					c.logger.Debug("leadership transfer on close failed", "err", err)
				}
			}
			c.mux.abortRaft() // a silent peer must not hold the shutdown
		}
		if c.raft != nil {
			// Shutdown closes the transport, and with it the mux.
			if err := c.raft.Shutdown().Error(); err != nil {
				errs = append(errs, fmt.Errorf("controller: stop raft: %w", err))
			}
		}
		if c.raft == nil && c.netTrans != nil {
			// Open failed before Raft took the transport over: its accept
			// goroutine runs until the transport is closed.
			_ = c.netTrans.Close()
		}
		if c.mux != nil {
			if err := c.mux.Close(); err != nil {
				errs = append(errs, fmt.Errorf("controller: %w", err))
			}
		}
		c.wg.Wait()
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

// ControllerID is the node id of the active controller (the Raft leader),
// or -1 while there is none.
func (c *Controller) ControllerID() int32 {
	if c.closed.Load() || c.raft == nil {
		return -1
	}
	_, id := c.raft.LeaderWithID()
	if id == "" {
		return -1
	}
	n, err := strconv.ParseInt(string(id), 10, 32)
	if err != nil {
		return -1
	}
	return int32(n)
}

// RaftStatus is this node's Raft state, for metrics and /stats: its role,
// term and log positions.
type RaftStatus struct {
	// State is "follower", "candidate", "leader" or "shutdown" (closed).
	State string
	// Term is the current term; LastLogIndex the last entry in the log
	// (or snapshot), CommitIndex the last one known committed, and
	// AppliedIndex the last one handed to the state machine.
	Term, LastLogIndex, CommitIndex, AppliedIndex uint64
}

// RaftStatus reads Raft's counters without a round trip through its main
// loop (unlike raft.Stats, which asks it for the configuration), so it
// never waits on a busy or stuck Raft: a scrape must not.
func (c *Controller) RaftStatus() RaftStatus {
	if c.closed.Load() || c.raft == nil {
		return RaftStatus{State: "shutdown"}
	}
	return RaftStatus{
		State: strings.ToLower(c.raft.State().String()), Term: c.raft.CurrentTerm(),
		LastLogIndex: c.raft.LastIndex(), CommitIndex: c.raft.CommitIndex(), AppliedIndex: c.raft.AppliedIndex(),
	}
}

// AppliedIndex is the last log index the state includes. A subscriber
// that reconciled it has seen every change so far.
func (c *Controller) AppliedIndex() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.st.applied
}

// Topic returns a copy of the named topic.
func (c *Controller) Topic(name string) (metadata.Topic, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.st.topics[name]
	if !ok {
		return metadata.Topic{}, false
	}
	return t.Clone(), true
}

// Topics returns copies of all topics, sorted by name.
func (c *Controller) Topics() []metadata.Topic {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]metadata.Topic, 0, len(c.st.topics))
	for _, name := range sortedNames(c.st.topics) {
		out = append(out, c.st.topics[name].Clone())
	}
	return out
}

// Brokers returns the registered brokers, sorted by id.
func (c *Controller) Brokers() []metadata.Broker {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]metadata.Broker, 0, len(c.st.brokers))
	for _, id := range slices.Sorted(maps.Keys(c.st.brokers)) {
		out = append(out, c.st.brokers[id])
	}
	return out
}

func (c *Controller) setBroken(err error) {
	c.broken.Store(&err)
	c.logger.Error("metadata state machine stopped; restart the node to recover", "error", err)
}

// placementBrokers are the brokers new replicas may be placed on: the
// eligible ones (registered, unfenced, live). The caller holds c.mu.
func (c *Controller) placementBrokers(st *state) []metadata.Broker {
	eligible := eligibleIn(st, c.liveIn(st))
	var out []metadata.Broker
	for _, id := range slices.Sorted(maps.Keys(st.brokers)) {
		if eligible(id) {
			out = append(out, st.brokers[id])
		}
	}
	return out
}

// The arguments of the write operations, as the controller RPC carries
// them to the active controller.
type (
	createTopicArgs struct {
		Name              string            `json:"name"`
		Partitions        int32             `json:"partitions"`
		ReplicationFactor int16             `json:"replication_factor"`
		Configs           map[string]string `json:"configs,omitempty"`
		ValidateOnly      bool              `json:"validate_only,omitempty"`
		// Assignment, when set, is each partition's replicas as the
		// client chose them (Partitions and ReplicationFactor follow
		// from it).
		Assignment [][]int32 `json:"assignment,omitempty"`
	}
	topicArgs struct {
		Name         string              `json:"name"`
		Total        int32               `json:"total,omitempty"`
		Ops          []metadata.ConfigOp `json:"ops,omitempty"`
		Configs      map[string]string   `json:"configs,omitempty"`
		ValidateOnly bool                `json:"validate_only,omitempty"`
		Assignment   [][]int32           `json:"assignment,omitempty"` // new partitions' replicas, when chosen
	}
	producerIDArgs struct {
		Broker int32 `json:"broker"`
		Count  int64 `json:"count"`
	}
	brokerArgs struct {
		ID int32 `json:"id"`
	}
	// replicaStorageArgs is a broker's report on its replica of a
	// partition (ReportReplicaStorage).
	replicaStorageArgs struct {
		Broker    int32    `json:"broker"`
		Topic     string   `json:"topic"`
		TopicID   [16]byte `json:"topic_id"`
		Partition int32    `json:"partition"`
		Offline   bool     `json:"offline"`
	}
	// none is the result of operations that return nothing but an index.
	none struct{}
)

// CreateTopic creates a topic with partitions partitions (-1: the default)
// and replicationFactor replicas each (-1: the default), placed on the
// live brokers (placement.go). configs are overrides, validated by
// topicconfig. With validateOnly it returns the topic that would be
// created and changes nothing.
func (c *Controller) CreateTopic(ctx context.Context, name string, partitions int32, replicationFactor int16,
	configs map[string]string, validateOnly bool,
) (metadata.Topic, error) {
	// Check the name first, as Kafka does: a bad name is the error reported
	// even if the counts are bad too.
	if err := ValidateTopicName(name); err != nil {
		return metadata.Topic{}, err
	}
	if partitions == -1 {
		partitions = c.opts.DefaultPartitions
	}
	if partitions < 1 || partitions > metadata.MaxPartitions {
		return metadata.Topic{}, fmt.Errorf("%w: %d partitions; use 1 to %d (or -1 for the default)", metadata.ErrInvalidPartitions, partitions, metadata.MaxPartitions)
	}
	if replicationFactor == -1 {
		replicationFactor = c.opts.DefaultReplicationFactor
	}
	configs = maps.Clone(configs)
	if metadata.IsInternalTopic(name) {
		if configs == nil {
			configs = map[string]string{}
		}
		maps.Copy(configs, InternalTopicConfigs) // created the way it must stay
	}
	a := createTopicArgs{Name: name, Partitions: partitions, ReplicationFactor: replicationFactor, Configs: configs, ValidateOnly: validateOnly}
	return c.createTopic(ctx, a)
}

// CreateTopicAssigned creates a topic whose partitions have the replicas
// assignment names (partition i's in assignment[i], its first replica the
// preferred leader), as CreateTopics with a manual replica assignment asks.
// Every broker named must be registered and at least one replica of each
// partition eligible (unfenced and live): it leads, and the eligible ones
// form the ISR. Otherwise metadata.ErrInvalidReplicaAssignment.
func (c *Controller) CreateTopicAssigned(ctx context.Context, name string, assignment [][]int32,
	configs map[string]string, validateOnly bool,
) (metadata.Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return metadata.Topic{}, err
	}
	if len(assignment) < 1 || len(assignment) > metadata.MaxPartitions {
		return metadata.Topic{}, fmt.Errorf("%w: %d partitions; use 1 to %d", metadata.ErrInvalidPartitions, len(assignment), metadata.MaxPartitions)
	}
	if metadata.IsInternalTopic(name) {
		return metadata.Topic{}, fmt.Errorf("%w: internal topic %s is created by its owner", metadata.ErrInvalidRequest, name)
	}
	a := createTopicArgs{Name: name, Partitions: int32(len(assignment)), ReplicationFactor: int16(len(assignment[0])),
		Configs: maps.Clone(configs), ValidateOnly: validateOnly, Assignment: assignment}
	return c.createTopic(ctx, a)
}

func (c *Controller) createTopic(ctx context.Context, a createTopicArgs) (metadata.Topic, error) {
	t, index, err := route(c, ctx, rpcCreateTopic, a, (*Controller).createTopicLocal)
	c.afterChange(ctx, "create topic", index, true)
	return t, err
}

func (c *Controller) createTopicLocal(ctx context.Context, a createTopicArgs) (metadata.Topic, uint64, error) {
	id := uuid.New().String()
	start := rand.IntN(1 << 20) // the first leader: topics start on different brokers
	return c.changeLocked(ctx, "create topic", a.Name, func(st *state) ([]record, error) {
		if _, exists := st.topics[a.Name]; exists {
			// Kafka's order: an existing topic is TOPIC_ALREADY_EXISTS,
			// whatever else is wrong with the request (a creator racing
			// another, while a broker is down, must see that it exists).
			return nil, fmt.Errorf("%w: %q", metadata.ErrTopicExists, a.Name)
		}
		var parts []partitionAssignment
		if a.Assignment != nil {
			var err error
			if parts, err = manualAssignment(st, 0, a.Assignment, len(a.Assignment[0]), eligibleIn(st, c.liveIn(st))); err != nil {
				return nil, err
			}
		} else {
			brokers := c.placementBrokers(st)
			if a.ReplicationFactor < 1 || int(a.ReplicationFactor) > len(brokers) {
				return nil, fmt.Errorf("%w: %d, but there are %d live brokers", metadata.ErrInvalidReplicationFactor, a.ReplicationFactor, len(brokers))
			}
			parts = assign(0, a.Partitions, int(a.ReplicationFactor), brokers, start)
		}
		return planCreateTopic(st, a.Name, id, metadata.IsInternalTopic(a.Name), parts, a.Configs)
	}, a.ValidateOnly)
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
func (c *Controller) DeleteTopic(ctx context.Context, name string) (metadata.Topic, error) {
	return c.topicChange(ctx, rpcDeleteTopic, "delete topic", topicArgs{Name: name}, (*Controller).deleteTopicLocal)
}

func (c *Controller) deleteTopicLocal(ctx context.Context, a topicArgs) (metadata.Topic, uint64, error) {
	return c.changeLocked(ctx, "delete topic", a.Name, func(st *state) ([]record, error) {
		return planDeleteTopic(st, a.Name)
	}, false)
}

// CreatePartitions grows a topic to total partitions; total must exceed the
// current count. The new replicas are placed on the live brokers.
func (c *Controller) CreatePartitions(ctx context.Context, name string, total int32, validateOnly bool) (metadata.Topic, error) {
	return c.topicChange(ctx, rpcCreatePartitions, "create partitions", topicArgs{Name: name, Total: total, ValidateOnly: validateOnly},
		(*Controller).createPartitionsLocal)
}

// CreatePartitionsAssigned is CreatePartitions with the new partitions'
// replicas chosen by the client (assignment[i] for partition current+i),
// checked as CreateTopicAssigned checks them; each must have the topic's
// replication factor.
func (c *Controller) CreatePartitionsAssigned(ctx context.Context, name string, total int32, assignment [][]int32, validateOnly bool) (metadata.Topic, error) {
	if len(assignment) == 0 {
		return metadata.Topic{}, fmt.Errorf("%w: an empty assignment", metadata.ErrInvalidReplicaAssignment)
	}
	return c.topicChange(ctx, rpcCreatePartitions, "create partitions",
		topicArgs{Name: name, Total: total, ValidateOnly: validateOnly, Assignment: assignment}, (*Controller).createPartitionsLocal)
}

func (c *Controller) createPartitionsLocal(ctx context.Context, a topicArgs) (metadata.Topic, uint64, error) {
	start := rand.IntN(1 << 20)
	return c.changeLocked(ctx, "create partitions", a.Name, func(st *state) ([]record, error) {
		t, ok := st.topics[a.Name]
		if !ok {
			return nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, a.Name)
		}
		cur := int32(len(t.Partitions))
		if a.Total <= cur || a.Total > metadata.MaxPartitions {
			return nil, fmt.Errorf("%w: topic %q has %d partitions; the new total must be %d to %d", metadata.ErrInvalidPartitions, a.Name, cur, cur+1, metadata.MaxPartitions)
		}
		rf := len(t.Partitions[0].Replicas)
		if a.Assignment != nil {
			if int32(len(a.Assignment)) != a.Total-cur {
				return nil, fmt.Errorf("%w: %d replica lists for %d new partitions", metadata.ErrInvalidReplicaAssignment, len(a.Assignment), a.Total-cur)
			}
			parts, err := manualAssignment(st, cur, a.Assignment, rf, eligibleIn(st, c.liveIn(st)))
			if err != nil {
				return nil, err
			}
			return planCreatePartitions(st, a.Name, a.Total, parts)
		}
		brokers := c.placementBrokers(st)
		if rf > len(brokers) {
			return nil, fmt.Errorf("%w: topic %q has %d replicas per partition, but there are %d live brokers", metadata.ErrInvalidReplicationFactor, a.Name, rf, len(brokers))
		}
		return planCreatePartitions(st, a.Name, a.Total, assign(cur, a.Total-cur, rf, brokers, start))
	}, a.ValidateOnly)
}

// AlterConfigs applies IncrementalAlterConfigs operations to a topic's
// overrides. The resulting set is validated as a whole.
func (c *Controller) AlterConfigs(ctx context.Context, name string, ops []metadata.ConfigOp, validateOnly bool) (metadata.Topic, error) {
	return c.topicChange(ctx, rpcAlterConfigs, "alter configs", topicArgs{Name: name, Ops: ops, ValidateOnly: validateOnly},
		(*Controller).alterConfigsLocal)
}

func (c *Controller) alterConfigsLocal(ctx context.Context, a topicArgs) (metadata.Topic, uint64, error) {
	return c.changeLocked(ctx, "alter configs", a.Name, func(st *state) ([]record, error) {
		return planAlterConfigs(st, a.Name, a.Ops)
	}, a.ValidateOnly)
}

// ReplaceConfigs replaces all of a topic's overrides (legacy AlterConfigs:
// keys not given revert to their defaults).
func (c *Controller) ReplaceConfigs(ctx context.Context, name string, configs map[string]string, validateOnly bool) (metadata.Topic, error) {
	return c.topicChange(ctx, rpcReplaceConfigs, "replace configs", topicArgs{Name: name, Configs: maps.Clone(configs), ValidateOnly: validateOnly},
		(*Controller).replaceConfigsLocal)
}

func (c *Controller) replaceConfigsLocal(ctx context.Context, a topicArgs) (metadata.Topic, uint64, error) {
	return c.changeLocked(ctx, "replace configs", a.Name, func(st *state) ([]record, error) {
		return planReplaceConfigs(st, a.Name, a.Configs)
	}, a.ValidateOnly)
}

// topicChange routes a topic change to the active controller and waits
// until this node applied it and its awaiting subscribers hosted it.
func (c *Controller) topicChange(ctx context.Context, rpcOp, op string, a topicArgs,
	local func(*Controller, context.Context, topicArgs) (metadata.Topic, uint64, error),
) (metadata.Topic, error) {
	t, index, err := route(c, ctx, rpcOp, a, local)
	// Not under wmu: a slow reconciler delays this answer, not the next
	// change (or a producer id block).
	c.afterChange(ctx, op, index, true)
	return t, err
}

// AllocateProducerIDs reserves n consecutive producer ids and returns the
// first. The counter is replicated, so ids are unique across restarts and
// across nodes.
func (c *Controller) AllocateProducerIDs(ctx context.Context, n int64) (int64, error) {
	first, _, err := route(c, ctx, rpcAllocProducerIDs, producerIDArgs{Broker: c.opts.NodeID, Count: n},
		(*Controller).allocateProducerIDsLocal)
	return first, err
}

func (c *Controller) allocateProducerIDsLocal(ctx context.Context, a producerIDArgs) (int64, uint64, error) {
	res, index, err := c.commit(ctx, "allocate producer ids", func(st *state) ([]record, error) {
		return planProducerIDs(st, a.Broker, a.Count)
	})
	if err != nil {
		return 0, 0, err
	}
	return res.firstPID, index, nil
}

// registerBrokerLocal registers (or re-registers, unfencing) a broker. The
// index answered is at least the active controller's applied index, so
// the registering node, once it applied it, has caught up.
func (c *Controller) registerBrokerLocal(ctx context.Context, b metadata.Broker) (none, uint64, error) {
	if c.multi() {
		// A restart the liveness check did not notice (shorter than the
		// session timeout) is a fence, then the registration below.
		_, _, err := c.commit(ctx, "fence restarted broker", func(st *state) ([]record, error) {
			if !restarted(st, b) {
				return nil, nil
			}
			c.logger.Info("fencing a broker that restarted: its leaderships move and it rejoins the ISRs by catching up",
				"broker", b.ID)
			return planFenceBroker(st, b.ID, eligibleIn(st, c.liveIn(st)))
		})
		if err != nil {
			return none{}, 0, err
		}
	}
	clusterID := newClusterID()
	_, index, err := c.commit(ctx, "register broker", func(st *state) ([]record, error) {
		// With the cluster id if the active controller has not chosen it
		// yet, so a ready node always knows it.
		recs, err := planInitCluster(st, clusterID)
		if err != nil {
			return nil, err
		}
		reg, err := planRegisterBroker(st, b, eligibleIn(st, c.liveIn(st)))
		return append(recs, reg...), err
	})
	if err != nil {
		return none{}, 0, err
	}
	return none{}, max(index, c.AppliedIndex()), nil
}

// AlterPartition commits a partition leader's new ISR, with Kafka's
// AlterPartition semantics (planAlterPartition): it is refused with
// metadata.ErrFencedLeaderEpoch, ErrInvalidUpdateVersion,
// ErrIneligibleReplica or ErrUnknownTopic, else the partition as
// committed (its PartitionEpoch one higher) is returned once this node
// applied it. An ISR already as asked is returned as it is.
func (c *Controller) AlterPartition(ctx context.Context, req metadata.AlterPartitionRequest) (metadata.Partition, error) {
	p, index, err := route(c, ctx, rpcAlterPartition, req, (*Controller).alterPartitionLocal)
	// Not awaiting subscribers: the caller is the partition's leader,
	// which may be what a subscriber waits on.
	c.afterChange(ctx, "alter partition", index, false)
	return p, err
}

func (c *Controller) alterPartitionLocal(ctx context.Context, req metadata.AlterPartitionRequest) (metadata.Partition, uint64, error) {
	return c.commitPartition(ctx, "alter partition", req.Partition, func(st *state, eligible func(int32) bool) ([]record, metadata.Partition, error) {
		return planAlterPartition(st, req, eligible)
	})
}

// commitPartition commits the change plan makes to one partition (given
// the brokers eligible for its ISR and leadership) and returns the
// partition as committed, with the index to await; a plan that changes
// nothing returns the partition as it is, with index 0.
func (c *Controller) commitPartition(ctx context.Context, what string, partition int32,
	plan func(st *state, eligible func(int32) bool) ([]record, metadata.Partition, error)) (metadata.Partition, uint64, error) {
	var cur metadata.Partition
	res, index, err := c.commit(ctx, what, func(st *state) ([]record, error) {
		recs, p, err := plan(st, eligibleIn(st, c.liveIn(st)))
		cur = p
		return recs, err
	})
	if err != nil {
		return metadata.Partition{}, 0, err
	}
	if index == 0 || res == nil || res.topic == nil {
		return cur, 0, nil
	}
	return res.topic.Partitions[partition].Clone(), index, nil
}

// ReportReplicaStorage records what broker says of the storage of its
// replica of a partition (the topic with topicID, when not zero): offline
// (its log failed a write or an fsync, or cannot be opened) or online
// again, as a Kafka broker reports its offline log directories. An offline
// replica leaves the ISR (unless it is the last member), gives up its
// leadership to another ISR member (a new leader epoch; none left: the
// partition has no leader) and is neither elected nor added to an ISR
// until it is reported online (planReplicaStorage). The partition as
// committed is returned once this node applied it; a report the metadata
// already agrees with changes nothing. Refused with
// metadata.ErrUnknownTopic, ErrBrokerNotAvailable or ErrInvalidRequest.
func (c *Controller) ReportReplicaStorage(ctx context.Context, broker int32, topic string, topicID [16]byte, partition int32, offline bool) (metadata.Partition, error) {
	a := replicaStorageArgs{Broker: broker, Topic: topic, TopicID: topicID, Partition: partition, Offline: offline}
	p, index, err := route(c, ctx, rpcReportReplicaStorage, a, (*Controller).reportReplicaStorageLocal)
	// Not awaiting subscribers: the caller is the node's replicator, which
	// a subscriber may be waiting on.
	c.afterChange(ctx, "report replica storage", index, false)
	return p, err
}

func (c *Controller) reportReplicaStorageLocal(ctx context.Context, a replicaStorageArgs) (metadata.Partition, uint64, error) {
	return c.commitPartition(ctx, "report replica storage", a.Partition, func(st *state, eligible func(int32) bool) ([]record, metadata.Partition, error) {
		return planReplicaStorage(st, a, eligible)
	})
}

// ControlledShutdown moves every leadership of broker id to another ISR
// member (a new leader epoch), takes it out of every ISR (the last member
// of an ISR stays; that partition goes offline) and fences it, and returns
// once this node applied that. The broker is unfenced when it registers
// again; it is not unfenced for still being reachable while it stops.
func (c *Controller) ControlledShutdown(ctx context.Context, id int32) error {
	_, index, err := route(c, ctx, rpcControlledShutdown, brokerArgs{ID: id}, (*Controller).controlledShutdownLocal)
	c.afterChange(ctx, "controlled shutdown", index, false)
	return err
}

func (c *Controller) controlledShutdownLocal(ctx context.Context, a brokerArgs) (none, uint64, error) {
	// Noted before the fence commits: the liveness loop, seeing the broker
	// fenced and still reachable, must not unfence it in between.
	c.tmu.Lock()
	tr := c.tracker
	noted := tr != nil && !tr.shutdown[a.ID]
	if noted {
		tr.shutDown(a.ID)
	}
	c.tmu.Unlock()
	_, index, err := c.commit(ctx, "controlled shutdown", func(st *state) ([]record, error) {
		return planFenceBroker(st, a.ID, eligibleIn(st, c.liveIn(st)))
	})
	if err != nil && noted {
		c.tmu.Lock()
		delete(tr.shutdown, a.ID)
		c.tmu.Unlock()
	}
	return none{}, index, err
}

// planFunc plans a change against the current state.
type planFunc func(st *state) ([]record, error)

// changeLocked plans and commits a topic change; index is 0 when nothing
// was committed (validateOnly, or nothing to change).
func (c *Controller) changeLocked(ctx context.Context, op, name string, planFn planFunc, validateOnly bool) (metadata.Topic, uint64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	recs, x, err := c.plan(planFn)
	if err != nil {
		return metadata.Topic{}, 0, err
	}
	t := x.res.topic
	if t == nil { // no records: the topic is already as asked
		c.mu.RLock()
		t = c.st.topics[name]
		c.mu.RUnlock()
		if t == nil {
			return metadata.Topic{}, 0, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
		}
	}
	if after, touched := x.topics[t.Name]; !touched || after != nil { // not for a delete
		// A proposer-side rule, not an FSM one: entries already in the log
		// replay as they were; new changes cannot make them unsafe. (A
		// delete is the way out of an unsafe one, so it is not checked.)
		if err := checkInternalTopic(t); err != nil {
			return metadata.Topic{}, 0, err
		}
	}
	if validateOnly || len(recs) == 0 { // len 0: already so, nothing to commit
		return t.Clone(), 0, nil
	}
	res, index, err := c.propose(ctx, op, recs)
	if err != nil {
		return metadata.Topic{}, 0, err
	}
	return res.topic.Clone(), index, nil
}

// commit plans and commits a change and returns its result and index. No
// records: nothing to do (index 0).
func (c *Controller) commit(ctx context.Context, op string, planFn planFunc) (*result, uint64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	recs, x, err := c.plan(planFn)
	if err != nil || len(recs) == 0 {
		if x != nil {
			return &x.res, 0, err
		}
		return nil, 0, err
	}
	return c.propose(ctx, op, recs)
}

// plan runs planFn on the current state and dry-runs its records as the
// FSM will apply them. Only the leader plans: a follower's state may be
// behind.
func (c *Controller) plan(planFn planFunc) ([]record, *txn, error) {
	if err := c.writable(); err != nil {
		return nil, nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	recs, err := planFn(&c.st)
	if err != nil {
		return nil, nil, err
	}
	x, err := applyRecords(&c.st, recs)
	if err != nil {
		return nil, nil, err
	}
	return recs, x, nil
}

func (c *Controller) writable() error {
	if c.closed.Load() {
		return metadata.ErrClosed
	}
	if err := c.broken.Load(); err != nil {
		return *err
	}
	if c.raft.State() != raft.Leader {
		return metadata.ErrNotController
	}
	if c.multi() && c.readyTerm.Load() != c.raft.CurrentTerm() {
		// A new leader plans only once its state caught up with the log.
		return fmt.Errorf("%w: this node just became the active controller and is catching up", metadata.ErrNotController)
	}
	return nil
}

// propose appends recs to the Raft log and waits until they are applied,
// returning the entry's result and index. If ctx ends first the error
// says so, but the change may still be applied.
func (c *Controller) propose(ctx context.Context, op string, recs []record) (*result, uint64, error) {
	data, err := encodeRecords(recs)
	if err != nil {
		return nil, 0, fmt.Errorf("controller: %w", err)
	}
	return c.proposeEntry(ctx, op, data)
}

func (c *Controller) proposeEntry(ctx context.Context, op string, data []byte) (*result, uint64, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("controller: %s: %w", op, err)
	}
	f := c.raft.Apply(data, timeoutOf(ctx))
	done := make(chan error, 1)
	go func() { done <- f.Error() }() // ends when raft responds, at the latest on shutdown
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("controller: %s: %w (the change may still be applied)", op, ctx.Err())
	}
	if err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
			errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return nil, 0, fmt.Errorf("%w: %s: %v", metadata.ErrNotController, op, err)
		case errors.Is(err, raft.ErrRaftShutdown):
			return nil, 0, fmt.Errorf("%w: %s", metadata.ErrClosed, op)
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return nil, 0, fmt.Errorf("controller: %s: %w", op, context.DeadlineExceeded)
		}
		return nil, 0, fmt.Errorf("controller: %s: %w", op, err)
	}
	res, ok := f.Response().(*result)
	if !ok || res == nil {
		return nil, 0, fmt.Errorf("controller: %s: no result from the state machine", op)
	}
	if res.err != nil {
		return nil, 0, res.err
	}
	return res, f.Index(), nil
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
