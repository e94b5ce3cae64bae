package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
)

// OffsetsTopic is the internal topic holding commits and group metadata.
const OffsetsTopic = "__consumer_offsets"

// Storage is what the coordinator needs of the broker: the partitions of
// the internal offsets topic. BrokerStorage implements it over a node's
// partitions; tests use an in-memory one.
type Storage interface {
	// Partitions is the partition count of the offsets topic, 0 if it does
	// not exist.
	Partitions() int32
	// Create creates the offsets topic with n partitions unless it exists,
	// and returns its partition count.
	Create(ctx context.Context, n int32) (int32, error)
	// Append appends one record batch to partition p and returns the
	// offset of its last record. The batch is in the page cache only.
	Append(p int32, batch []byte) (last int64, err error)
	// WaitDurable blocks until partition p is fsynced through offset.
	WaitDurable(ctx context.Context, p int32, offset int64) error
	// Read returns whole stored batches of partition p from the one
	// containing offset, up to maxBytes but at least one batch, up to the
	// log end (what is not durable yet included).
	Read(p int32, offset int64, maxBytes int) ([]byte, error)
	// Bounds returns the log start and end offsets of partition p; the
	// end is the log end, not the durable one.
	Bounds(p int32) (start, end int64, err error)
	// Damaged says, for an offset Read refused as damaged, where the
	// damaged range of partition p ends (ok false if offset is not in one).
	Damaged(p int32, offset int64) (next int64, ok bool)
	// Generation identifies what partition p's log holds: it changes when
	// records below its end may have been removed or replaced (a heal
	// dropping what was not fsynced, a truncation, the partition opened
	// again), never on an append. An error: the partition is unavailable.
	Generation(p int32) (uint64, error)
}

type status int

const (
	statusNoTopic status = iota // ready; the offsets topic is created on first need
	statusLoading
	statusReady
	statusClosed
)

// Coordinator owns every group of this node. All state-machine calls are
// serialised by one mutex; durable writes go to Storage; a driver
// goroutine (Start) replays the offsets topic and then feeds the clock.
type Coordinator struct {
	cfg   Config
	store Storage
	log   *slog.Logger

	topics   atomic.Pointer[topicSnapshot]
	topicsMu sync.Mutex // serialises SetTopics so versions increase with content

	createMu sync.Mutex // serialises creation of the offsets topic

	mu     sync.Mutex
	status status
	nparts int32
	parts  []offsetsPartition // len nparts
	// incarnation counts offsets topics seen (it is deleted, created
	// again): a replay started for an earlier one is discarded.
	incarnation int
	groups      map[string]*Group
	deadlines   map[string]time.Time // groups with timeouts pending
	nextSweep   time.Time

	startOnce sync.Once
	// loaded is closed by markLoaded once the first replay is done (Loaded).
	loaded     chan struct{}
	loadedOnce sync.Once
	started    atomic.Bool
	closeOnce  sync.Once
	stop       chan struct{}
	done       chan struct{}
}

// offsetsPartition is the coordinator's view of one partition of the
// offsets topic. Its groups are in Coordinator.groups only while down is
// nil: a partition is replayed into a map of its own and merged when the
// replay succeeded, so no group is ever served (or written back) from half
// a partition.
type offsetsPartition struct {
	last    int64 // last offset appended or replayed by us; -1: none
	lastErr error // failure of the last append, if it failed
	down    error // why its groups are not served (not replayed); nil when served
	// failures counts replays of a down partition that failed in a row,
	// and skip the rechecks left before the next try: a partition that
	// cannot be read is retried less and less often (up to every
	// maxRecheckSkip+1 rechecks), since each try replays it from its start
	// on the driver, which also runs every group's timers.
	failures, skip int
	gen            uint64 // Storage.Generation its groups were replayed from
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
	c := &Coordinator{
		cfg: cfg, store: store, log: cfg.Logger.With("component", "group"),
		groups: map[string]*Group{}, deadlines: map[string]time.Time{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	c.topics.Store(newTopicSnapshot(0, nil))
	c.loaded = make(chan struct{})
	return c, nil
}

// Loaded is closed once the coordinator has replayed the offsets topic
// (at once after Start when there is none yet) and serves group requests.
func (c *Coordinator) Loaded() <-chan struct{} { return c.loaded }

func (c *Coordinator) markLoaded() { c.loadedOnce.Do(func() { close(c.loaded) }) }

// SetTopics replaces the coordinator's view of the cluster's topics. main
// calls it on every metadata change (before Start, then from the
// controller's change listener).
func (c *Coordinator) SetTopics(topics []TopicInfo) {
	c.topicsMu.Lock()
	defer c.topicsMu.Unlock()
	c.topics.Store(newTopicSnapshot(c.topics.Load().version+1, topics))
}

// Start replays the offsets topic, if it exists, in the background and
// then runs the driver until Close. Group requests are answered
// COORDINATOR_LOAD_IN_PROGRESS until the replay is done.
func (c *Coordinator) Start() {
	c.startOnce.Do(func() {
		c.mu.Lock()
		if n := c.store.Partitions(); n > 0 {
			c.setPartitionsLocked(n)
			c.status = statusLoading
		}
		loading := c.status == statusLoading
		c.mu.Unlock()
		if !loading {
			c.markLoaded()
		}
		c.started.Store(true)
		go c.run()
	})
}

func (c *Coordinator) setPartitionsLocked(n int32) {
	c.nparts = n
	c.parts = slices.Repeat([]offsetsPartition{{last: -1}}, int(n))
	c.incarnation++
}

func (c *Coordinator) run() {
	defer close(c.done)
	c.mu.Lock()
	loading := c.status == statusLoading
	c.mu.Unlock()
	if loading {
		start := time.Now()
		if err := c.load(); err != nil {
			return // closed during the load
		}
		c.mu.Lock()
		groups, down := len(c.groups), 0
		for _, st := range c.parts {
			if st.down != nil {
				down++
			}
		}
		c.mu.Unlock()
		// Debug when all is well (the node's start-up line is the INFO
		// one); a warning when offsets partitions could not be replayed.
		level := slog.LevelDebug
		if down > 0 {
			level = slog.LevelWarn
		}
		c.log.Log(context.Background(), level, "group coordinator loaded", "groups", groups, "partitions", c.nparts,
			"partitions_unavailable", down, "duration", time.Since(start).Round(time.Millisecond))
	}
	t := time.NewTicker(c.cfg.TickInterval)
	defer t.Stop()
	recheck := time.Now()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.Tick(c.cfg.Now())
			if time.Since(recheck) >= c.cfg.PartitionRecheckInterval {
				c.recheckPartitions()
				recheck = time.Now()
			}
		}
	}
}

// recheckPartitions replays the offsets partitions that could not be
// replayed, once their log can be read, and reloads those whose log was
// rewritten under the coordinator (its generation changed: a heal dropped
// records that were never fsynced, so nobody was told they were
// committed, but the groups in memory still show them).
func (c *Coordinator) recheckPartitions() {
	for p := int32(0); ; p++ {
		c.mu.Lock()
		if int(p) >= len(c.parts) { // also when the offsets topic went meanwhile
			c.mu.Unlock()
			return
		}
		st := c.parts[p]
		if st.down != nil && st.skip > 0 {
			c.parts[p].skip--
			c.mu.Unlock()
			continue
		}
		c.mu.Unlock()
		if st.down == nil {
			gen, err := c.store.Generation(p)
			if err == nil && gen == st.gen {
				continue
			}
			if err == nil {
				err = fmt.Errorf("its log was rewritten under the coordinator (generation %d, replayed %d)", gen, st.gen)
			}
			c.mu.Lock()
			if int(p) < len(c.parts) && c.parts[p].down == nil {
				c.unloadPartitionLocked(p, err)
			}
			c.mu.Unlock()
		}
		if err := c.loadPartition(p); err != nil {
			continue
		}
		c.log.Info("offsets partition replayed; its groups are served again", "partition", p)
	}
}

// unloadPartitionLocked forgets the groups of partition p (members are
// told to find the coordinator again) until it is replayed.
func (c *Coordinator) unloadPartitionLocked(p int32, why error) {
	for id, g := range c.groups {
		if g.partition != p {
			continue
		}
		if g.classic != nil {
			g.classic.failAll(ErrCoordinatorNotAvailable)
		}
		delete(c.groups, id)
		delete(c.deadlines, id)
	}
	c.parts[p] = offsetsPartition{last: -1, down: why}
	c.log.Warn("offsets partition unloaded to be replayed again", "partition", p, "reason", why)
}

// Close stops the driver and answers every parked request with
// COORDINATOR_NOT_AVAILABLE. Nothing is lost: every acknowledged change is
// already durable.
func (c *Coordinator) Close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		if c.started.Load() {
			<-c.done
		}
		c.mu.Lock()
		c.status = statusClosed
		c.failAllLocked()
		c.mu.Unlock()
	})
	return nil
}

func (c *Coordinator) failAllLocked() {
	for _, g := range c.groups {
		if g.classic != nil {
			g.classic.failAll(ErrCoordinatorNotAvailable)
		}
	}
}

// readyLocked reports whether group requests can be served.
func (c *Coordinator) readyLocked() error {
	switch c.status {
	case statusLoading:
		return ErrCoordinatorLoadInProgress
	case statusClosed:
		return ErrCoordinatorNotAvailable
	}
	return nil
}

// Ready is nil when group requests can be served.
func (c *Coordinator) Ready() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readyLocked()
}

// EnsureTopic creates the offsets topic if it does not exist yet; group
// state needs it. FindCoordinator calls it, so the first group client
// creates the topic.
func (c *Coordinator) EnsureTopic(ctx context.Context) error {
	c.mu.Lock()
	n, err := c.nparts, c.readyLocked()
	c.mu.Unlock()
	if n > 0 || err != nil && !errors.Is(err, ErrCoordinatorLoadInProgress) {
		return err
	}
	c.createMu.Lock()
	defer c.createMu.Unlock()
	c.mu.Lock()
	n = c.nparts
	c.mu.Unlock()
	if n > 0 {
		return nil
	}
	// Not under c.mu: creating the topic calls back into SetTopics through
	// the metadata listener.
	n, err = c.store.Create(ctx, c.cfg.OffsetsTopicPartitions)
	if err != nil {
		return fmt.Errorf("%w: creating %s: %v", ErrCoordinatorNotAvailable, OffsetsTopic, err)
	}
	// The new partitions are empty, so there is nothing to replay, but
	// their generations are what later rechecks compare against: without
	// them the first recheck would take every log for rewritten.
	gens := make([]uint64, n)
	gensErr := make([]error, n)
	for p := range n {
		gens[p], gensErr[p] = c.store.Generation(p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nparts == 0 && c.status != statusClosed {
		c.setPartitionsLocked(n)
		for p := range c.parts {
			// A partition that cannot say is replayed by the next recheck.
			c.parts[p].gen, c.parts[p].down = gens[p], gensErr[p]
		}
		c.status = statusReady
		c.log.Info("created the offsets topic", "topic", OffsetsTopic, "partitions", n)
	}
	return nil
}

// writableLocked is readyLocked plus the existence of the offsets topic
// and the availability of the group's partition of it.
func (c *Coordinator) writableLocked(group string) error {
	if err := c.readyLocked(); err != nil {
		return err
	}
	if c.nparts == 0 {
		return fmt.Errorf("%w: %s does not exist yet (FindCoordinator creates it)", ErrCoordinatorNotAvailable, OffsetsTopic)
	}
	return c.partitionDownLocked(group)
}

// partitionDownLocked says why a group's offsets partition is not served,
// or nil: one that could not be replayed (offline, or its log failed) is
// retried every partitionRecheck, while the other partitions' groups are
// served.
func (c *Coordinator) partitionDownLocked(group string) error {
	if c.nparts == 0 || group == "" {
		return nil
	}
	p := c.partitionOfLocked(group)
	if err := c.parts[p].down; err != nil {
		return fmt.Errorf("%w: %s-%d is unavailable (retrying): %v", ErrCoordinatorNotAvailable, OffsetsTopic, p, err)
	}
	return nil
}

// partitionOfLocked is the partition a group's records go to: after the
// topic grew, a replayed group keeps the partition it was found in, which
// need not be today's hash.
func (c *Coordinator) partitionOfLocked(group string) int32 {
	p := PartitionFor(group, c.nparts)
	if g, ok := c.groups[group]; ok && int(g.partition) < len(c.parts) {
		p = g.partition
	}
	return p
}

// PartitionFor is the __consumer_offsets partition of a group: Kafka's
// abs(groupId.hashCode) % partitions, with Java's String.hashCode over
// UTF-16 code units, so the layout matches a Kafka cluster's.
func PartitionFor(group string, partitions int32) int32 {
	var h int32
	for _, r := range group {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return (h & 0x7fffffff) % partitions
}

// groupLocked returns a group, creating it (classic, empty) when create.
func (c *Coordinator) groupLocked(id string, create bool) *Group {
	g := c.groups[id]
	if g == nil && create {
		g = newGroup(&c.cfg, id, PartitionFor(id, c.nparts), c.cfg.Now())
		c.groups[id] = g
	}
	return g
}

// settleLocked runs after every operation on g: it persists changed group
// metadata, tracks g's next timeout and forgets groups that hold nothing.
func (c *Coordinator) settleLocked(g *Group) {
	if g.classic != nil && g.classic.dirty {
		g.classic.dirty = false
		c.writeGroupMetadataLocked(g)
	}
	if d := g.nextDeadline(); !d.IsZero() {
		c.deadlines[g.id] = d
	} else {
		delete(c.deadlines, g.id)
	}
	// A group that never held anything (a join that failed validation)
	// is forgotten at once; one that did lingers, Empty, until the
	// retention sweep removes it, as in Kafka.
	switch {
	case !g.idle() || len(g.offsets) > 0 || g.persisted || g.consumer != nil && g.consumer.epoch > 0:
		g.established = true
	case !g.established && c.groups[g.id] == g:
		delete(c.groups, g.id)
		delete(c.deadlines, g.id)
	}
}

func (c *Coordinator) writeGroupMetadataLocked(g *Group) {
	val := g.classic.metadataValue().AppendTo(nil)
	if _, err := c.appendLocked(g.partition, []batch.Record{{Key: encodeGroupKey(g.id), Value: val}}); err != nil {
		c.log.Error("persisting group metadata failed", "group", g.id, "err", err)
		return
	}
	g.persisted = true
}

// appendLocked writes records to partition p as one batch. A partition
// that is not replayed takes nothing: what the coordinator would write
// was computed without its records.
func (c *Coordinator) appendLocked(p int32, recs []batch.Record) (int64, error) {
	st := &c.parts[p]
	if st.down != nil {
		return 0, fmt.Errorf("%w: %s-%d is unavailable: %v", ErrCoordinatorNotAvailable, OffsetsTopic, p, st.down)
	}
	b := buildBatch(c.cfg.Now().UnixMilli(), recs)
	if len(b) > c.cfg.MaxRecordBytes {
		return 0, fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidCommitOffsetSize, len(b), c.cfg.MaxRecordBytes)
	}
	last, err := c.store.Append(p, b)
	if err != nil {
		st.lastErr = err
		return 0, fmt.Errorf("%w: appending to %s-%d: %v", ErrCoordinatorNotAvailable, OffsetsTopic, p, err)
	}
	st.lastErr, st.last = nil, last
	return last, nil
}

// Barrier waits until everything appended so far to the group's offsets
// partition is durable. Handlers call it before answering, so no client
// is told about state a crash could take back.
func (c *Coordinator) Barrier(ctx context.Context, group string) error {
	c.mu.Lock()
	if c.nparts == 0 {
		c.mu.Unlock()
		return nil
	}
	p := c.partitionOfLocked(group)
	st := c.parts[p]
	off, err := st.last, st.lastErr
	if st.down != nil {
		err = st.down
	}
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: %s-%d: %v", ErrCoordinatorNotAvailable, OffsetsTopic, p, err)
	}
	if off < 0 {
		return nil
	}
	if err := c.store.WaitDurable(ctx, p, off); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("%w: syncing %s-%d: %v", ErrCoordinatorNotAvailable, OffsetsTopic, p, err)
	}
	return nil
}

// Tick applies the timeouts due at now and, when due, the offset
// retention sweep. The driver calls it; tests call it with a fake clock.
func (c *Coordinator) Tick(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status != statusReady && c.status != statusNoTopic {
		return
	}
	snap := c.topics.Load()
	for id, d := range c.deadlines {
		if now.Before(d) {
			continue
		}
		g := c.groups[id]
		if g == nil {
			delete(c.deadlines, id)
			continue
		}
		if g.consumer != nil {
			g.consumer.Tick(now, snap)
		} else {
			g.classic.Tick(now)
		}
		c.settleLocked(g)
	}
	if now.Before(c.nextSweep) {
		return
	}
	c.nextSweep = now.Add(c.cfg.RetentionCheckInterval)
	c.sweepLocked(now)
}

// sweepLocked removes expired offsets and then groups left with nothing
// (Kafka's cleanupGroupMetadata).
func (c *Coordinator) sweepLocked(now time.Time) {
	if c.nparts == 0 {
		return
	}
	removed := 0
	for _, id := range slices.Sorted(maps.Keys(c.groups)) {
		g := c.groups[id]
		expired := g.expiredOffsets(now, c.cfg.OffsetsRetention)
		var recs []batch.Record
		for _, k := range expired {
			recs = append(recs, batch.Record{Key: encodeOffsetKey(g.id, k.topic, k.part)})
		}
		deleteGroup := g.idle() && len(g.offsets) == len(expired)
		if deleteGroup && g.persisted {
			recs = append(recs, batch.Record{Key: encodeGroupKey(g.id)})
		}
		if len(recs) > 0 {
			if _, err := c.appendLocked(g.partition, recs); err != nil {
				c.log.Warn("expiring offsets failed; will retry", "group", g.id, "err", err)
				continue
			}
		}
		for _, k := range expired {
			delete(g.offsets, k)
		}
		removed += len(expired)
		if deleteGroup {
			delete(c.groups, id)
			delete(c.deadlines, id)
		}
	}
	if removed > 0 {
		c.log.Info("expired committed offsets", "offsets", removed)
	}
}

// TopicDeleted removes every group's offsets for a deleted topic. For the
// offsets topic itself, all group state is gone with it.
func (c *Coordinator) TopicDeleted(topic string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if topic == OffsetsTopic {
		c.failAllLocked()
		c.groups = map[string]*Group{}
		c.deadlines = map[string]time.Time{}
		c.nparts, c.parts = 0, nil
		c.incarnation++
		if c.status != statusClosed {
			c.status = statusNoTopic
		}
		c.log.Warn("the offsets topic was deleted; all committed offsets and group metadata are gone", "topic", OffsetsTopic)
		return
	}
	if c.nparts == 0 {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(c.groups)) {
		g := c.groups[id]
		var recs []batch.Record
		var keys []tpKey
		for _, k := range g.sortedOffsets() {
			if k.topic == topic {
				keys = append(keys, k)
				recs = append(recs, batch.Record{Key: encodeOffsetKey(g.id, k.topic, k.part)})
			}
		}
		if len(recs) == 0 {
			continue
		}
		if _, err := c.appendLocked(g.partition, recs); err != nil {
			// The offsets stay in the log, but replay drops offsets whose
			// topic id no longer exists, so they cannot come back.
			c.log.Warn("writing tombstones for a deleted topic failed", "group", g.id, "topic", topic, "err", err)
		}
		for _, k := range keys {
			delete(g.offsets, k)
		}
		c.settleLocked(g)
	}
}

// load replays every partition of the offsets topic. One that cannot be
// replayed (offline, unreadable) is marked down, and its groups are not
// served until recheckPartitions replays it; the others are. It fails only
// if the coordinator closes meanwhile.
func (c *Coordinator) load() error {
	c.mu.Lock()
	n := c.nparts
	c.mu.Unlock()
	for p := int32(0); p < n; p++ {
		_ = c.loadPartition(p) // a failure marks p down, for recheckPartitions
		select {
		case <-c.stop:
			return errors.New("closed during load")
		default:
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.markLoaded() // loaded, or overtaken (the topic deleted, recreated): done either way
	if c.status != statusLoading {
		return nil
	}
	c.nextSweep = c.cfg.Now().Add(c.cfg.RetentionCheckInterval)
	c.status = statusReady
	return nil
}

// maxRecheckSkip caps the rechecks a down offsets partition sits out
// between tries (about 30 s at the default PartitionRecheckInterval).
const maxRecheckSkip = 29

// replayChunk bounds one read of the offsets log during replay; the log
// may be long (no compaction yet), so it is streamed, never read whole.
const replayChunk = 1 << 20

// loadPartition replays partition p into a map of its own and, if the
// whole partition could be read, makes its groups the served ones: offsets
// of topics deleted meanwhile are purged and the groups settled. On a
// failure p is marked down (recheckPartitions retries it) and nothing of
// it is kept.
func (c *Coordinator) loadPartition(p int32) error {
	c.mu.Lock()
	incarnation := c.incarnation
	c.mu.Unlock()
	groups, gen, end, err := c.replayPartition(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.incarnation != incarnation || int(p) >= len(c.parts) {
		return errors.New("the offsets topic changed during the replay")
	}
	if err != nil {
		// Logged when the reason changes, not at every retry.
		if prev := c.parts[p].down; prev == nil || prev.Error() != err.Error() {
			c.log.Error("cannot replay an offsets partition; its groups are unavailable until it can be",
				"partition", p, "err", err)
		}
		c.parts[p].down = err
		c.parts[p].failures++
		c.parts[p].skip = min(1<<min(c.parts[p].failures-1, 5)-1, maxRecheckSkip)
		return err
	}
	for id, g := range groups {
		if other, ok := c.groups[id]; ok {
			// Only after the topic grew can a group have records in two
			// partitions; the one found first keeps it.
			c.log.Warn("a group has records in two offsets partitions; keeping the first",
				"group", id, "kept", other.partition, "ignored", p)
			delete(groups, id)
			continue
		}
		c.groups[id] = g
	}
	// Replayed bytes may not be fsynced yet (SIGKILL keeps the page cache):
	// answers that reveal them wait for them too.
	c.parts[p] = offsetsPartition{last: end - 1, gen: gen}
	c.purgeUnknownTopicsLocked(groups)
	for _, g := range groups {
		c.settleLocked(g)
	}
	return nil
}

// replayPartition reads partition p whole into fresh groups. It takes no
// lock: nothing else writes p until its groups are merged.
func (c *Coordinator) replayPartition(p int32) (groups map[string]*Group, gen uint64, end int64, err error) {
	// The generation first: a rewrite during the replay shows as a change
	// at the next recheck.
	if gen, err = c.store.Generation(p); err != nil {
		return nil, 0, 0, err
	}
	start, end, err := c.store.Bounds(p)
	if err != nil {
		return nil, 0, 0, err
	}
	groups = map[string]*Group{}
	skipped := 0
	off := start
	for off < end {
		data, err := c.store.Read(p, off, replayChunk)
		if err != nil {
			if next, ok := c.store.Damaged(p, off); ok && next > off {
				// The commits in a damaged range are lost; the rest of the
				// partition still holds its groups' state.
				c.log.Error("damaged records in the offsets topic: commits and group metadata in them are lost",
					"partition", p, "from_offset", off, "to_offset", next, "err", err)
				off = next
				continue
			}
			return nil, 0, 0, fmt.Errorf("replaying %s-%d: %w", OffsetsTopic, p, err)
		}
		if len(data) == 0 {
			break
		}
		next := off
		err = batch.Iterate(data, func(h batch.Header, raw []byte) bool {
			next = h.NextOffset()
			if h.IsControl() || h.IsTransactional() {
				return true // MoonMQ writes neither; transactional offsets are not supported
			}
			rerr := batch.Records(raw, func(r batch.Record) bool {
				if !c.replayRecord(groups, p, r.Key, r.Value) {
					skipped++
				}
				return true
			})
			if rerr != nil {
				skipped++
			}
			return true
		})
		if err != nil {
			return nil, 0, 0, fmt.Errorf("replaying %s-%d: %w", OffsetsTopic, p, err)
		}
		if next <= off {
			break
		}
		off = next
	}
	if skipped > 0 {
		c.log.Warn("skipped undecodable records in the offsets topic", "partition", p, "records", skipped)
	}
	return groups, gen, end, nil
}

// replayRecord applies one record to groups; false if it could not be
// decoded.
func (c *Coordinator) replayRecord(groups map[string]*Group, p int32, key, value []byte) (ok bool) {
	defer func() {
		if r := recover(); r != nil { // kmsg decoding of hostile bytes
			ok = false
		}
	}()
	r, known, err := decodeRecord(key, value)
	if err != nil {
		return false
	}
	if !known || r.group == "" {
		return true
	}
	now := c.cfg.Now()
	g := groups[r.group]
	if r.isGroup {
		if r.metadata == nil {
			if g != nil {
				g.classic, g.consumer, g.persisted = newClassic(&c.cfg, now), nil, false
				if len(g.offsets) == 0 {
					delete(groups, r.group)
				}
			}
			return true
		}
		if g == nil {
			g = newGroup(&c.cfg, r.group, p, now)
			groups[r.group] = g
		}
		g.classic, g.consumer, g.persisted = restoreClassic(&c.cfg, now, r.metadata), nil, true
		return true
	}
	if r.offset == nil {
		if g != nil {
			delete(g.offsets, tpKey{r.topic, r.partition})
			if len(g.offsets) == 0 && !g.persisted && g.members() == 0 {
				delete(groups, r.group)
			}
		}
		return true
	}
	if g == nil {
		g = newGroup(&c.cfg, r.group, p, now)
		groups[r.group] = g
	}
	g.offsets[tpKey{r.topic, r.partition}] = r.offset
	return true
}

// purgeUnknownTopicsLocked drops replayed offsets of topics that no
// longer exist (or were recreated: another topic id), writing tombstones:
// topics deleted while their groups' partition was not replayed got none.
func (c *Coordinator) purgeUnknownTopicsLocked(groups map[string]*Group) {
	snap := c.topics.Load()
	for _, id := range slices.Sorted(maps.Keys(groups)) {
		g := groups[id]
		var recs []batch.Record
		var keys []tpKey
		for _, k := range g.sortedOffsets() {
			o := g.offsets[k]
			t, ok := snap.byName[k.topic]
			if ok && (o.topicID == TopicID{} || o.topicID == t.ID) {
				continue
			}
			keys = append(keys, k)
			recs = append(recs, batch.Record{Key: encodeOffsetKey(g.id, k.topic, k.part)})
		}
		if len(keys) == 0 {
			continue
		}
		if _, err := c.appendLocked(g.partition, recs); err != nil {
			c.log.Warn("removing offsets of deleted topics failed", "group", g.id, "err", err)
		}
		for _, k := range keys {
			delete(g.offsets, k)
		}
	}
}

// ---- classic protocol ----

// JoinGroup starts a JoinGroup; the result arrives on the returned channel
// (buffered, exactly one value), possibly only after the rebalance.
func (c *Coordinator) JoinGroup(req JoinRequest) <-chan JoinResult {
	ch := make(chan JoinResult, 1)
	cb := func(r JoinResult) { ch <- r }
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writableLocked(req.Group); err != nil {
		cb(JoinResult{Err: err, MemberID: req.MemberID, Generation: -1})
		return ch
	}
	if req.Group == "" {
		cb(JoinResult{Err: ErrInvalidGroupID, MemberID: req.MemberID, Generation: -1})
		return ch
	}
	g := c.groupLocked(req.Group, true)
	if g.consumer != nil {
		if g.consumer.Len() > 0 {
			cb(JoinResult{Err: fmt.Errorf("%w: group %q uses the consumer (KIP-848) protocol", ErrInconsistentGroupProtocol, req.Group),
				MemberID: req.MemberID, Generation: -1})
			return ch
		}
		// An empty consumer group becomes a classic one; offsets stay.
		g.consumer, g.classic = nil, newClassic(&c.cfg, c.cfg.Now())
	}
	g.classic.Join(c.cfg.Now(), req, cb)
	c.settleLocked(g)
	return ch
}

// SyncGroup starts a SyncGroup; the result arrives on the returned channel
// (buffered, exactly one value), for followers once the leader assigned.
func (c *Coordinator) SyncGroup(req SyncRequest) <-chan SyncResult {
	ch := make(chan SyncResult, 1)
	cb := func(r SyncResult) { ch <- r }
	c.mu.Lock()
	defer c.mu.Unlock()
	g, err := c.classicLocked(req.Group)
	if err != nil {
		cb(SyncResult{Err: err})
		return ch
	}
	g.classic.Sync(c.cfg.Now(), req, cb)
	c.settleLocked(g)
	return ch
}

// classicLocked finds a classic group for Sync/Heartbeat/Leave; a missing
// group means the member is unknown.
func (c *Coordinator) classicLocked(id string) (*Group, error) {
	if err := c.writableLocked(id); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, ErrInvalidGroupID
	}
	g := c.groups[id]
	if g == nil || g.classic == nil {
		return nil, fmt.Errorf("%w: group %q has no such member", ErrUnknownMemberID, id)
	}
	return g, nil
}

// Heartbeat handles a classic Heartbeat.
func (c *Coordinator) Heartbeat(req HeartbeatRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, err := c.classicLocked(req.Group)
	if err != nil {
		return err
	}
	err = g.classic.Heartbeat(c.cfg.Now(), req)
	c.settleLocked(g)
	return err
}

// LeaveGroup removes members; errs has one entry per member. err is a
// group-level failure.
func (c *Coordinator) LeaveGroup(group string, members []LeaveMember) (errs []error, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writableLocked(group); err != nil {
		return nil, err
	}
	if group == "" {
		return nil, ErrInvalidGroupID
	}
	g := c.groups[group]
	errs = make([]error, len(members))
	for i, lm := range members {
		switch {
		case g == nil || g.classic == nil:
			errs[i] = ErrUnknownMemberID
		default:
			errs[i] = g.classic.Leave(c.cfg.Now(), lm)
		}
	}
	if g != nil {
		c.settleLocked(g)
	}
	return errs, nil
}

// ---- consumer (KIP-848) protocol ----

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat.
func (c *Coordinator) ConsumerHeartbeat(req ConsumerHeartbeatRequest) (ConsumerHeartbeatResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writableLocked(req.Group); err != nil {
		return ConsumerHeartbeatResult{}, err
	}
	if req.Group == "" {
		return ConsumerHeartbeatResult{}, invalid("GroupId can't be empty.")
	}
	// Validate before touching the group: a bad request must not convert
	// an empty classic group (and tombstone its metadata) on its way to
	// failing.
	if err := validateHeartbeat(&req); err != nil {
		return ConsumerHeartbeatResult{}, err
	}
	now := c.cfg.Now()
	g := c.groups[req.Group]
	if g == nil {
		if req.MemberEpoch != 0 {
			// Also what a member hears after a restart: consumer-group
			// membership is not persisted, so it rejoins.
			return ConsumerHeartbeatResult{}, fmt.Errorf("%w: group %q has no such member", ErrUnknownMemberID, req.Group)
		}
		g = c.groupLocked(req.Group, true)
	}
	if g.consumer == nil {
		if req.MemberEpoch < 0 {
			// A leave for a group that has no consumer-protocol members.
			return ConsumerHeartbeatResult{}, fmt.Errorf("%w: group %q has no such member", ErrUnknownMemberID, req.Group)
		}
		if g.classic.Len() > 0 {
			return ConsumerHeartbeatResult{}, fmt.Errorf("%w: group %q is a classic group with members", ErrGroupIDNotFound, req.Group)
		}
		if g.persisted {
			// The classic metadata no longer describes the group.
			if _, err := c.appendLocked(g.partition, []batch.Record{{Key: encodeGroupKey(g.id)}}); err != nil {
				return ConsumerHeartbeatResult{}, err
			}
			g.persisted = false
		}
		g.classic, g.consumer = nil, newConsumer(&c.cfg, now)
	}
	res, err := g.consumer.Heartbeat(now, req, c.topics.Load())
	c.settleLocked(g)
	return res, err
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

// CommitOffsets validates and appends an OffsetCommit and applies it. The
// result has one error per requested partition (nil: committed); the
// caller must Barrier before acknowledging.
func (c *Coordinator) CommitOffsets(req CommitRequest) [][]error {
	out := make([][]error, len(req.Topics))
	failAll := func(err error) [][]error {
		for i, t := range req.Topics {
			out[i] = slices.Repeat([]error{err}, len(t.Partitions))
		}
		return out
	}
	for i, t := range req.Topics {
		out[i] = make([]error, len(t.Partitions))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writableLocked(req.Group); err != nil {
		return failAll(err)
	}
	if req.Group == "" {
		return failAll(ErrInvalidGroupID)
	}
	now := c.cfg.Now()
	g := c.groups[req.Group]
	var check func(TopicID, int32) error
	switch {
	case g == nil:
		if req.Generation >= 0 {
			if req.Version >= 9 {
				return failAll(fmt.Errorf("%w: %q", ErrGroupIDNotFound, req.Group))
			}
			return failAll(ErrIllegalGeneration)
		}
	case g.consumer != nil:
		var err error
		if check, err = g.consumer.validateCommit(req.MemberID, req.Generation, req.Version); err != nil {
			return failAll(err)
		}
	default:
		if err := g.classic.validateCommit(now, req.Generation, req.MemberID, req.InstanceID); err != nil {
			c.settleLocked(g)
			return failAll(err)
		}
	}
	snap := c.topics.Load()
	type pending struct {
		i, j int
		key  tpKey
		e    *offsetEntry
	}
	var todo []pending
	var recs []batch.Record
	for i, t := range req.Topics {
		info, known := snap.byName[t.Topic]
		for j, p := range t.Partitions {
			switch {
			case !known || p.Partition < 0 || p.Partition >= info.Partitions:
				out[i][j] = fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, t.Topic, p.Partition)
				continue
			case p.Metadata != nil && len(*p.Metadata) > c.cfg.MaxMetadataBytes:
				out[i][j] = fmt.Errorf("%w: %d bytes, the limit is %d", ErrOffsetMetadataTooLarge, len(*p.Metadata), c.cfg.MaxMetadataBytes)
				continue
			}
			if check != nil {
				if err := check(info.ID, p.Partition); err != nil {
					out[i][j] = err
					continue
				}
			}
			e := &offsetEntry{offset: p.Offset, leaderEpoch: p.LeaderEpoch, commitTime: now.UnixMilli(), expireTime: -1, topicID: info.ID}
			if p.Metadata != nil {
				e.metadata = *p.Metadata
			}
			switch {
			case req.Retention > 0:
				e.expireTime = e.commitTime + req.Retention.Milliseconds()
			case p.Timestamp > 0 && req.Version == 1:
				e.expireTime = p.Timestamp + c.cfg.OffsetsRetention.Milliseconds()
			}
			todo = append(todo, pending{i, j, tpKey{t.Topic, p.Partition}, e})
			recs = append(recs, batch.Record{Key: encodeOffsetKey(req.Group, t.Topic, p.Partition), Value: encodeOffsetValue(e)})
		}
	}
	if len(todo) == 0 {
		return out
	}
	if g == nil {
		g = c.groupLocked(req.Group, true) // a group that only stores offsets
	}
	if _, err := c.appendLocked(g.partition, recs); err != nil {
		for _, t := range todo {
			out[t.i][t.j] = err
		}
		c.settleLocked(g)
		return out
	}
	for _, t := range todo {
		g.offsets[t.key] = t.e
	}
	c.settleLocked(g)
	return out
}

// FetchRequest is one group of an OffsetFetch. Topics nil means every
// committed partition.
type FetchRequest struct {
	Group       string
	MemberID    *string // v9+, consumer groups
	MemberEpoch int32
	Topics      []FetchTopic
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
}

// FetchOffsets returns committed offsets. The caller must Barrier before
// answering.
func (c *Coordinator) FetchOffsets(req FetchRequest) ([]FetchedTopic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.readyLocked(); err != nil {
		return nil, err
	}
	if req.Group == "" {
		return nil, ErrInvalidGroupID
	}
	if err := c.partitionDownLocked(req.Group); err != nil {
		return nil, err
	}
	g := c.groups[req.Group]
	if g != nil && g.consumer != nil {
		if err := g.consumer.validateFetch(req.MemberID, req.MemberEpoch); err != nil {
			return nil, err
		}
	}
	get := func(topic string, p int32) FetchedPartition {
		fp := FetchedPartition{Partition: p, Offset: -1, LeaderEpoch: -1}
		if g != nil {
			if e := g.offsets[tpKey{topic, p}]; e != nil {
				fp.Offset, fp.LeaderEpoch, fp.Metadata = e.offset, e.leaderEpoch, e.metadata
			}
		}
		return fp
	}
	var out []FetchedTopic
	if req.Topics == nil {
		if g == nil {
			return []FetchedTopic{}, nil
		}
		for _, k := range g.sortedOffsets() {
			if len(out) == 0 || out[len(out)-1].Topic != k.topic {
				out = append(out, FetchedTopic{Topic: k.topic})
			}
			t := &out[len(out)-1]
			t.Partitions = append(t.Partitions, get(k.topic, k.part))
		}
		return out, nil
	}
	out = make([]FetchedTopic, 0, len(req.Topics))
	for _, t := range req.Topics {
		ft := FetchedTopic{Topic: t.Topic, Partitions: make([]FetchedPartition, 0, len(t.Partitions))}
		for _, p := range t.Partitions {
			ft.Partitions = append(ft.Partitions, get(t.Topic, p))
		}
		out = append(out, ft)
	}
	return out, nil
}

// DeleteOffsets deletes committed offsets (OffsetDelete). Offsets of
// topics the group consumes are refused per partition.
func (c *Coordinator) DeleteOffsets(group string, topics []FetchTopic) ([][]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writableLocked(group); err != nil {
		return nil, err
	}
	if group == "" {
		return nil, ErrInvalidGroupID
	}
	g := c.groups[group]
	if g == nil {
		return nil, fmt.Errorf("%w: %q", ErrGroupIDNotFound, group)
	}
	if g.consumer == nil && g.classic.Len() > 0 && g.classic.ProtocolType() != ConsumerProtocolType {
		return nil, fmt.Errorf("%w: group %q is %s", ErrNonEmptyGroup, group, g.classic.State())
	}
	out := make([][]error, len(topics))
	var recs []batch.Record
	var keys []tpKey
	for i, t := range topics {
		out[i] = make([]error, len(t.Partitions))
		sub, _ := g.subscribed(t.Topic)
		for j, p := range t.Partitions {
			if sub && g.members() > 0 {
				out[i][j] = fmt.Errorf("%w: %s", ErrGroupSubscribedToTopic, t.Topic)
				continue
			}
			k := tpKey{t.Topic, p}
			if _, ok := g.offsets[k]; ok && !slices.Contains(keys, k) {
				keys = append(keys, k)
				recs = append(recs, batch.Record{Key: encodeOffsetKey(group, t.Topic, p)})
			}
		}
	}
	if len(recs) > 0 {
		if _, err := c.appendLocked(g.partition, recs); err != nil {
			return nil, err
		}
		for _, k := range keys {
			delete(g.offsets, k)
		}
	}
	c.settleLocked(g)
	return out, nil
}

// ---- admin ----

// GroupListing is one row of ListGroups.
type GroupListing struct {
	Group        string
	ProtocolType string
	State        State
	Type         string
}

// ListGroups lists groups, optionally filtered by state and type names
// (case-insensitive, as Kafka matches them).
func (c *Coordinator) ListGroups(states, types []string) ([]GroupListing, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.readyLocked(); err != nil {
		return nil, err
	}
	match := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	var out []GroupListing
	for _, id := range slices.Sorted(maps.Keys(c.groups)) {
		g := c.groups[id]
		l := GroupListing{Group: id, ProtocolType: g.ProtocolType(), State: g.State(), Type: g.Type()}
		if match(states, string(l.State)) && match(types, l.Type) {
			out = append(out, l)
		}
	}
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
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]GroupDescription, 0, len(ids))
	ready := c.readyLocked()
	for _, id := range ids {
		d := GroupDescription{Group: id, State: StateDead}
		g := c.groups[id]
		switch {
		case ready != nil:
			d.Err = ready
		case id == "":
			d.Err = ErrInvalidGroupID
		case c.partitionDownLocked(id) != nil:
			d.Err = c.partitionDownLocked(id)
		case g == nil:
			d.Err = fmt.Errorf("%w: %q", ErrGroupIDNotFound, id)
		case g.consumer != nil:
			d.Err = fmt.Errorf("%w: %q is a consumer group; use ConsumerGroupDescribe", ErrGroupIDNotFound, id)
		default:
			d.State, d.ProtocolType = g.classic.State(), g.classic.ProtocolType()
			d.Protocol, d.Members = g.classic.describe()
		}
		out = append(out, d)
	}
	return out
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
	c.mu.Lock()
	defer c.mu.Unlock()
	ready := c.readyLocked()
	out := make([]ConsumerGroupDescription, 0, len(ids))
	for _, id := range ids {
		d := ConsumerGroupDescription{Group: id, State: StateDead}
		g := c.groups[id]
		switch {
		case ready != nil:
			d.Err = ready
		case id == "":
			d.Err = invalid("GroupId can't be empty.")
		case c.partitionDownLocked(id) != nil:
			d.Err = c.partitionDownLocked(id)
		case g == nil:
			d.Err = fmt.Errorf("%w: %q", ErrGroupIDNotFound, id)
		case g.consumer == nil:
			d.Err = fmt.Errorf("%w: %q is not a consumer group", ErrGroupIDNotFound, id)
		default:
			cg := g.consumer
			d.State, d.Epoch, d.AssignmentEpoch, d.Assignor = cg.State(), cg.epoch, cg.targetEpoch, cg.assignorName()
			d.Members = cg.describeMembers()
		}
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

// DeleteGroups deletes groups without members, with their offsets. The
// caller must Barrier each deleted group before answering.
func (c *Coordinator) DeleteGroups(ids []string) []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]error, len(ids))
	if err := c.writableLocked(""); err != nil {
		for i := range out {
			out[i] = err
		}
		return out
	}
	for i, id := range ids {
		g := c.groups[id]
		switch {
		case id == "":
			out[i] = ErrInvalidGroupID
			continue
		case c.partitionDownLocked(id) != nil:
			out[i] = c.partitionDownLocked(id)
			continue
		case g == nil:
			out[i] = fmt.Errorf("%w: %q", ErrGroupIDNotFound, id)
			continue
		case g.members() > 0:
			out[i] = fmt.Errorf("%w: %q has %d members", ErrNonEmptyGroup, id, g.members())
			continue
		}
		var recs []batch.Record
		for _, k := range g.sortedOffsets() {
			recs = append(recs, batch.Record{Key: encodeOffsetKey(id, k.topic, k.part)})
		}
		recs = append(recs, batch.Record{Key: encodeGroupKey(id)})
		if _, err := c.appendLocked(g.partition, recs); err != nil {
			out[i] = err
			continue
		}
		delete(c.groups, id)
		delete(c.deadlines, id)
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

// Stats lists every group with its committed offsets, sorted by group,
// topic and partition. It is empty while the coordinator is loading.
func (c *Coordinator) Stats() []GroupStat {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readyLocked() != nil {
		return nil
	}
	out := make([]GroupStat, 0, len(c.groups))
	for _, id := range slices.Sorted(maps.Keys(c.groups)) {
		g := c.groups[id]
		s := GroupStat{Group: id, State: g.State(), Type: g.Type(), Members: g.members()}
		for _, k := range g.sortedOffsets() {
			s.Offsets = append(s.Offsets, OffsetStat{Topic: k.topic, Partition: k.part, Offset: g.offsets[k].offset})
		}
		out = append(out, s)
	}
	return out
}
