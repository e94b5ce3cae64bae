package txncoord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonmq/moonmq/engine/coord"
)

// Topic is the internal topic of the transaction coordinator.
const Topic = "__transaction_state"

// DefaultSegmentBytes is MoonMQ's transaction.state.log.segment.bytes
// default, 4 MiB where Kafka's is 100 MiB, for the reason
// group.DefaultOffsetsTopicSegmentBytes gives: the active segment is never
// compacted, so its size bounds the history replayed beyond live ids.
const DefaultSegmentBytes = 4 << 20

// TopicConfigs are the configs __transaction_state is created with, its
// segment.bytes segmentBytes (transaction.state.log.segment.bytes; 0:
// DefaultSegmentBytes), as Kafka's
// TransactionStateManager.transactionTopicConfigs sets them: compacted, so
// a replay reads about one record per transactional id (the active
// segment, which the cleaner never touches, aside) rather than every state
// change ever written. retention.ms=-1 dates from before compaction, which
// alone turns retention off.
func TopicConfigs(segmentBytes int) map[string]string {
	if segmentBytes == 0 {
		segmentBytes = DefaultSegmentBytes
	}
	return map[string]string{
		"cleanup.policy":   "compact",
		"retention.ms":     "-1",
		"segment.bytes":    strconv.Itoa(segmentBytes),
		"compression.type": "uncompressed",
	}
}

// Storage is what the coordinator needs of the broker: the partitions of
// __transaction_state (BrokerStorage over a node's partitions; an
// in-memory log in tests).
type Storage interface {
	coord.Storage
	// Partitions is the partition count of the topic, 0 if it does not
	// exist.
	Partitions() int32
	// Create creates the topic with n partitions unless it exists, and
	// returns its partition count.
	Create(ctx context.Context, n int32) (int32, error)
	// LeaderEpoch is the leader epoch of partition p here: the
	// coordinator epoch markers carry.
	LeaderEpoch(p int32) int32
}

// ProducerIDs hands out producer ids (the controller's blocks).
type ProducerIDs interface {
	Next(ctx context.Context) (int64, error)
}

// MarkerWrite asks the leader of TP to write one end-transaction marker.
type MarkerWrite struct {
	TP                 TP
	TransactionalID    string
	ProducerID         int64
	ProducerEpoch      int16
	Commit             bool
	CoordinatorEpoch   int32
	TransactionVersion int16
	coordinator        int32 // the __transaction_state partition that sent it
}

// MarkerOutcome classifies a partition's answer to a marker.
type MarkerOutcome int

const (
	// MarkerDone: written (or the partition no longer exists, or will
	// never take it for a reason retrying cannot change).
	MarkerDone MarkerOutcome = iota
	// MarkerRetry: not now (no leader, not enough replicas, a timeout):
	// sent again after a backoff.
	MarkerRetry
	// MarkerFenced: a newer producer or coordinator epoch owns the
	// transaction: no more markers for it.
	MarkerFenced
	// MarkerFailed: an answer that should not happen; logged and retried.
	MarkerFailed
)

// MarkerResult is the answer to one MarkerWrite.
type MarkerResult struct {
	Write   MarkerWrite
	Outcome MarkerOutcome
	Err     error // what was answered, for logs
}

// MarkerWriter writes markers to the partitions' leaders; the node
// implements it. It returns one result per write.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, writes []MarkerWrite) []MarkerResult
}

// Coordinator is the node's transaction coordinator. It routes each
// transactional id to the shard of its __transaction_state partition
// (coord.PartitionFor), which a coord.Runtime loads, serialises, ticks and
// makes durable, and sends the markers its shards make ready.
type Coordinator struct {
	cfg     Config
	store   Storage
	pids    ProducerIDs
	writer  MarkerWriter
	log     *slog.Logger
	rt      *coord.Runtime[*shard]
	metrics metrics

	mu     sync.Mutex // guards nparts, epochs and closed; never held during an operation
	nparts int32
	epochs map[int32]int32 // coordinator epoch each loaded partition was loaded at
	closed bool

	createMu  sync.Mutex
	spare     atomic.Int64 // a producer id kept for timeouts that need one; -1 none
	refilling atomic.Bool

	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// manual: markers go out only through PollMarkers (tests).
	manual bool
}

type metrics struct{ committed, aborted, timedOut atomic.Int64 }

// New returns a coordinator; Start loads what this node leads and starts
// the driver and the marker sender. writer nil: markers are only sent
// through PollMarkers and MarkersWritten (tests).
func New(cfg Config, store Storage, pids ProducerIDs, writer MarkerWriter) (*Coordinator, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil || pids == nil {
		return nil, errors.New("txncoord: storage and producer ids are required")
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: cfg, store: store, pids: pids, writer: writer, manual: writer == nil,
		log: cfg.Logger.With("component", "txn"), epochs: map[int32]int32{}, kick: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel}
	c.spare.Store(-1)
	c.rt = coord.New(coord.Config{
		Topic: Topic, MaxBatchBytes: cfg.MaxRecordBytes,
		TickInterval: cfg.TickInterval, RecheckInterval: cfg.PartitionRecheckInterval,
		Now: cfg.Now, Logger: c.log,
	}, store, c.newShard)
	return c, nil
}

// Start replays the partitions given (those this node leads), in the
// background, and starts the driver and the marker sender until Close.
func (c *Coordinator) Start(partitions []int32) {
	c.mu.Lock()
	c.nparts = c.store.Partitions()
	c.mu.Unlock()
	c.rt.Start(partitions)
	if !c.manual {
		c.wg.Add(1)
		go c.sendLoop()
	}
}

// Loaded is closed once the partitions given to Start were replayed.
func (c *Coordinator) Loaded() <-chan struct{} { return c.rt.Loaded() }

// Close stops the sender and the driver and unloads every shard.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.rt.Close()
}

// SetPartitions tells the coordinator how many partitions
// __transaction_state has (another node may have created it).
func (c *Coordinator) SetPartitions(n int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nparts == 0 && n > 0 {
		c.nparts = n
	}
}

// EnsureTopic creates __transaction_state unless it exists (the first
// transactional client's FindCoordinator does), and returns its partition
// count.
func (c *Coordinator) EnsureTopic(ctx context.Context) (int32, error) {
	if n := c.partitions(); n > 0 {
		return n, nil
	}
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if n := c.partitions(); n > 0 {
		return n, nil
	}
	n, err := c.store.Create(ctx, c.cfg.Partitions)
	if err != nil {
		// Retriable for the client (COORDINATOR_NOT_AVAILABLE): the
		// controller may be failing over, and the topic may even exist.
		return 0, fmt.Errorf("%w: create %s: %v", ErrUnavailable, Topic, err)
	}
	c.SetPartitions(n)
	return n, nil
}

func (c *Coordinator) partitions() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nparts
}

// PartitionFor is the __transaction_state partition of transactional id
// id, or an error when the topic does not exist yet.
func (c *Coordinator) PartitionFor(id string) (int32, error) {
	n := c.partitions()
	if n <= 0 {
		return 0, fmt.Errorf("%w: %s does not exist yet", ErrUnavailable, Topic)
	}
	return coord.PartitionFor(id, n), nil
}

// LoadPartition serves partition p, this node now leading it in leader
// epoch epoch (the coordinator epoch): it replays the partition, and a
// shard serving at another epoch is replaced, so markers never go out
// with a stale coordinator epoch. It blocks for the replay.
func (c *Coordinator) LoadPartition(p, epoch int32) error {
	c.mu.Lock()
	prev, loaded := c.epochs[p]
	if loaded && epoch < prev {
		// A load for an older leadership, finishing after a newer one's:
		// its markers would carry a fenced coordinator epoch.
		c.mu.Unlock()
		return nil
	}
	c.epochs[p] = epoch
	c.mu.Unlock()
	if loaded && prev != epoch {
		c.rt.Unload(p, fmt.Errorf("%w: %s-%d leadership moved to epoch %d", ErrNotCoordinator, Topic, p, epoch))
	}
	return c.rt.Load(p)
}

// UnloadPartition stops serving partition p (another node leads it).
func (c *Coordinator) UnloadPartition(p int32) {
	c.mu.Lock()
	delete(c.epochs, p)
	c.mu.Unlock()
	c.rt.Unload(p, fmt.Errorf("%w: this node no longer leads %s-%d", ErrNotCoordinator, Topic, p))
}

// leaderEpoch is the coordinator epoch of partition p: the epoch it was
// loaded at, else the storage's.
func (c *Coordinator) leaderEpoch(p int32) int32 {
	c.mu.Lock()
	e, ok := c.epochs[p]
	c.mu.Unlock()
	if ok {
		return e
	}
	return c.store.LeaderEpoch(p)
}

// Loading reports whether a partition this node leads is still replaying.
func (c *Coordinator) Loading() bool { return c.rt.Loading() }

// Tick feeds now to every shard's timers (the driver calls it; tests too).
func (c *Coordinator) Tick(now time.Time) {
	c.rt.Tick(now)
	c.wake()
}

// Reply is an operation's answer: Wait returns it once every record it
// depends on is durable.
type Reply[T any] = coord.Future[T]

// do runs op on id's shard; fail makes the answer of a request the
// shard cannot take (not hosted, loading, down).
func do[T any](c *Coordinator, id string, fail func(error) T, op func(s *shard, reply *Reply[T])) *Reply[T] {
	reply := coord.NewFuture[T]()
	p, err := c.PartitionFor(id)
	if err == nil {
		err = c.rt.Do(p, func(s *shard) { op(s, reply) })
	}
	if err != nil {
		return coord.Resolved(fail(err))
	}
	return reply
}
