package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
)

// Errors of the runtime; every error it returns wraps one of them.
// Coordinators reuse them as their own sentinels (the group coordinator's
// ErrCoordinatorLoadInProgress is ErrLoading), so callers map one set.
var (
	// ErrLoading: the shard is replaying its partition
	// (COORDINATOR_LOAD_IN_PROGRESS).
	ErrLoading = errors.New("coordinator is loading")
	// ErrUnavailable: the partition cannot be read or written, or the
	// runtime is closed (COORDINATOR_NOT_AVAILABLE).
	ErrUnavailable = errors.New("coordinator is not available")
	// ErrNotCoordinator: this node hosts no shard for the partition
	// (NOT_COORDINATOR): the client looks the coordinator up again.
	ErrNotCoordinator = errors.New("not the coordinator")
	// ErrBatchTooLarge: an operation's records exceed Config.MaxBatchBytes.
	ErrBatchTooLarge = errors.New("records too large for one batch")
	// ErrRefused wraps a transactional write its partition refused
	// before writing anything (TxnStorage): the shard stays as it is.
	ErrRefused = errors.New("write refused by the partition")
)

// Storage is the internal topic's partitions, as the runtime needs them.
type Storage interface {
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
	// records below its end may have been removed or replaced (a heal, a
	// truncation, the partition opened again), never on an append. An
	// error: the partition is unavailable.
	Generation(p int32) (uint64, error)
}

// Record is one record of an internal partition as replay hands it over:
// the record, its offset, and the producer of its batch (a coordinator's
// own records have none, -1; a transactional offset commit has the
// transaction's producer).
type Record struct {
	batch.Record
	Offset        int64
	ProducerID    int64
	ProducerEpoch int16
	Transactional bool
}

// MarkerReplayer is a State that follows transactions in its partition:
// replay hands it every end-transaction marker, in log order with the
// records.
type MarkerReplayer interface {
	ReplayMarker(now time.Time, offset, pid int64, epoch int16, commit bool)
}

// State is one shard's state machine. The runtime calls it only under its
// shard's lock; Replay before the shard serves, the others as operations.
type State interface {
	// Replay applies one record of the partition, in log order, while the
	// shard loads; false if the record could not be decoded (it is
	// skipped and counted). now is the time the replay began, one for
	// the whole replay.
	Replay(now time.Time, r Record) bool
	// Activate runs once the replay is complete, as the shard's first
	// operation (it may append, e.g. to purge what replay found stale).
	Activate(now time.Time)
	// Tick applies the timers due at now.
	Tick(now time.Time)
	// Unload answers what the state has parked with err: the shard stops
	// serving (leadership moved, the log was rewritten, shutdown). The
	// replies it completes wait for nothing: they reveal no state.
	Unload(err error)
}

// Config tunes a Runtime.
type Config struct {
	// Topic names the internal topic in errors and logs.
	Topic string
	// MaxBatchBytes bounds one batch an operation appends.
	MaxBatchBytes int
	// TickInterval is how often the driver ticks every shard.
	TickInterval time.Duration
	// RecheckInterval is how often the driver rechecks the shards (Recheck).
	RecheckInterval time.Duration
	// SyncTimeout bounds a reply's wait for durability.
	SyncTimeout time.Duration
	// Now is the driver's clock.
	Now    func() time.Time
	Logger *slog.Logger
}

func (c *Config) ensureDefaults() {
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = 1000012
	}
	if c.TickInterval == 0 {
		c.TickInterval = 50 * time.Millisecond
	}
	if c.RecheckInterval == 0 {
		c.RecheckInterval = time.Second
	}
	if c.SyncTimeout == 0 {
		c.SyncTimeout = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Runtime owns the shards of one internal topic on this node. The
// node-wide coordinator built on it only routes requests to shards.
type Runtime[S State] struct {
	cfg      Config
	store    Storage
	newState func(*Shard) S
	log      *slog.Logger

	mu     sync.Mutex // guards shards and closed, never held during I/O or an operation
	shards map[int32]*slot[S]
	closed bool

	// replayedRecords and replayedBytes count what every replay read,
	// for the start-up summary.
	replayedRecords, replayedBytes atomic.Int64

	startOnce  sync.Once
	loaded     chan struct{}
	loadedOnce sync.Once
	closeOnce  sync.Once
	stop       chan struct{}
	done       chan struct{}
	running    bool
}

// slot is a shard and its state; a partition loaded again gets a new slot.
type slot[S State] struct {
	*Shard
	state S
}

// New returns a runtime over store; newState builds the empty state of a
// shard (its handle says which partition).
func New[S State](cfg Config, store Storage, newState func(*Shard) S) *Runtime[S] {
	cfg.ensureDefaults()
	return &Runtime[S]{
		cfg: cfg, store: store, newState: newState, log: cfg.Logger,
		shards: map[int32]*slot[S]{},
		loaded: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// Loaded is closed once the partitions given to Start have been loaded
// (or failed to and are retried).
func (r *Runtime[S]) Loaded() <-chan struct{} { return r.loaded }

// Start hosts the partitions (answering ErrLoading for them at once),
// loads them one by one in the background and then runs the driver, which
// ticks the shards and rechecks them, until Close.
func (r *Runtime[S]) Start(partitions []int32) {
	r.startOnce.Do(func() {
		r.mu.Lock()
		for _, p := range partitions {
			if r.shards[p] == nil {
				r.shards[p] = r.newSlot(p)
			}
		}
		r.running = !r.closed
		r.mu.Unlock()
		if !r.running || len(partitions) == 0 {
			// Nothing to load: loaded at once, not once the driver runs.
			r.loadedOnce.Do(func() { close(r.loaded) })
		}
		if r.running {
			go r.run(partitions)
		}
	})
}

func (r *Runtime[S]) run(partitions []int32) {
	defer close(r.done)
	start, down := time.Now(), 0
	records0, bytes0 := r.replayedRecords.Load(), r.replayedBytes.Load()
	for _, p := range partitions {
		select {
		case <-r.stop:
			return
		default:
		}
		// Only partitions still hosted: the topic may have gone (UnloadAll)
		// during the load.
		if s := r.slot(p); s != nil && r.replay(s) != nil {
			down++
		}
	}
	r.loadedOnce.Do(func() { close(r.loaded) })
	if len(partitions) > 0 {
		// Debug when all is well (the node's start-up line is the INFO
		// one); a warning when partitions could not be replayed.
		level := slog.LevelDebug
		if down > 0 {
			level = slog.LevelWarn
		}
		r.log.Log(context.Background(), level, "coordinator loaded", "topic", r.cfg.Topic, "partitions", len(partitions),
			"partitions_unavailable", down, "records", r.replayedRecords.Load()-records0,
			"bytes", r.replayedBytes.Load()-bytes0, "duration", time.Since(start).Round(time.Millisecond))
	}
	t := time.NewTicker(r.cfg.TickInterval)
	defer t.Stop()
	recheck := time.Now()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.Tick(r.cfg.Now())
			if time.Since(recheck) >= r.cfg.RecheckInterval {
				r.Recheck()
				recheck = time.Now()
			}
		}
	}
}

// Close stops the driver and unloads every shard with ErrUnavailable.
// Nothing is lost: every acknowledged change is already durable.
func (r *Runtime[S]) Close() {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		running := r.running
		r.mu.Unlock()
		close(r.stop)
		if running {
			<-r.done
		}
		r.UnloadAll(fmt.Errorf("%w: shutting down", ErrUnavailable))
		r.loadedOnce.Do(func() { close(r.loaded) })
	})
}

func (r *Runtime[S]) newSlot(p int32) *slot[S] {
	sh := &Shard{p: p, store: r.store, cfg: &r.cfg, status: statusLoading, last: -1}
	sh.durable.Store(-1)
	return &slot[S]{Shard: sh, state: r.newState(sh)}
}

func (r *Runtime[S]) slot(p int32) *slot[S] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.shards[p]
}

// Load hosts partition p, if it is not yet, and replays it; it returns
// once the shard serves or is down (the error: why). A shard already
// serving is left alone. Leadership listeners call it when this node
// becomes the partition's leader; it blocks for the replay.
func (r *Runtime[S]) Load(p int32) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return fmt.Errorf("%w: closed", ErrUnavailable)
	}
	s := r.shards[p]
	if s == nil {
		s = r.newSlot(p)
		r.shards[p] = s
	}
	r.mu.Unlock()
	s.mu.Lock()
	serving := s.status == statusActive
	s.mu.Unlock()
	if serving {
		return nil
	}
	return r.replay(s)
}

// maxRecheckSkip caps the rechecks a down partition sits out between
// tries (about 30 s at the default RecheckInterval).
const maxRecheckSkip = 29

// recheckBackoff is the rechecks to sit out after the n+1th failure in a
// row: 0, 1, 3, 7, ... up to maxRecheckSkip.
func recheckBackoff(n int) int { return min(1<<min(n, 5)-1, maxRecheckSkip) }

// replay loads s's partition into a fresh state and, if the whole
// partition could be read, serves it; otherwise s is marked down.
func (r *Runtime[S]) replay(s *slot[S]) error {
	state, now := r.newState(s.Shard), r.cfg.Now()
	var markers func(offset, pid int64, epoch int16, commit bool)
	if mr, ok := any(state).(MarkerReplayer); ok {
		markers = func(offset, pid int64, epoch int16, commit bool) { mr.ReplayMarker(now, offset, pid, epoch, commit) }
	}
	gen, end, st, err := replayInto(r.store, s.p, r.cfg.Topic, r.log,
		func(rec Record) bool { return state.Replay(now, rec) }, markers)
	if st.skipped > 0 {
		r.log.Warn("skipped undecodable records", "topic", r.cfg.Topic, "partition", s.p, "records", st.skipped)
	}
	r.replayedRecords.Add(st.records)
	r.replayedBytes.Add(st.bytes)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.status == statusGone || r.slot(s.p) != s:
		return fmt.Errorf("%w: %s-%d was unloaded during its replay", ErrNotCoordinator, r.cfg.Topic, s.p)
	case s.status == statusActive:
		// Another replay (a Load racing a Recheck) won; its state may
		// have served operations since, which this one lacks.
		return nil
	}
	if err != nil {
		// Logged when the reason changes, not at every retry.
		if prev := s.down; prev == nil || prev.Error() != err.Error() {
			r.log.Error("cannot replay a coordinator partition; it is unavailable until it can be",
				"topic", r.cfg.Topic, "partition", s.p, "err", err)
		}
		s.status, s.down = statusDown, err
		s.failures++
		s.skip = recheckBackoff(s.failures - 1)
		return err
	}
	// Replayed bytes may not be fsynced yet (SIGKILL keeps the page
	// cache): replies that reveal them wait for them too.
	s.state, s.status, s.down, s.failures, s.skip = state, statusActive, nil, 0, 0
	s.gen, s.last, s.lastErr = gen, end-1, nil
	s.begin()
	state.Activate(r.cfg.Now())
	s.finish()
	return nil
}

// Unload stops serving partition p: the state's parked requests are
// answered with err and the shard forgotten. A load of p under way is
// discarded.
func (r *Runtime[S]) Unload(p int32, err error) {
	r.mu.Lock()
	s := r.shards[p]
	delete(r.shards, p)
	r.mu.Unlock()
	if s != nil {
		r.unloadSlot(s, err)
	}
}

// UnloadAll unloads every shard (the internal topic was deleted, or the
// runtime closes).
func (r *Runtime[S]) UnloadAll(err error) {
	r.mu.Lock()
	all := r.shards
	r.shards = map[int32]*slot[S]{}
	r.mu.Unlock()
	for _, p := range slices.Sorted(maps.Keys(all)) {
		r.unloadSlot(all[p], err)
	}
}

func (r *Runtime[S]) unloadSlot(s *slot[S], err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == statusActive {
		s.begin()
		s.state.Unload(err)
		s.finishUnload()
	}
	s.status = statusGone
}

// Do runs op on partition p's state as one operation, under the shard's
// lock; it fails without running op if p is not served (ErrLoading,
// ErrUnavailable, ErrNotCoordinator). Futures op completes are released
// once what the shard appended by op's end is durable.
func (r *Runtime[S]) Do(p int32, op func(S)) error {
	s := r.slot(p)
	if s == nil {
		return r.notHosted(p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.servingLocked(r.cfg.Topic); err != nil {
		return err
	}
	s.begin()
	defer s.finish()
	op(s.state)
	return nil
}

func (r *Runtime[S]) notHosted(p int32) error {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: shutting down", ErrUnavailable)
	}
	return fmt.Errorf("%w: this node does not coordinate %s-%d", ErrNotCoordinator, r.cfg.Topic, p)
}

// Status is nil when partition p is served, else the error Do would
// return.
func (r *Runtime[S]) Status(p int32) error {
	s := r.slot(p)
	if s == nil {
		return r.notHosted(p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.servingLocked(r.cfg.Topic)
}

// Loading reports whether some hosted shard is still replaying.
func (r *Runtime[S]) Loading() bool {
	for _, s := range r.slots() {
		s.mu.Lock()
		loading := s.status == statusLoading
		s.mu.Unlock()
		if loading {
			return true
		}
	}
	return false
}

// Each runs op on every served shard, in partition order, one shard at a
// time (each as one operation).
func (r *Runtime[S]) Each(op func(p int32, s S)) {
	for _, s := range r.slots() {
		s.mu.Lock()
		if s.status == statusActive {
			s.begin()
			op(s.p, s.state)
			s.finish()
		}
		s.mu.Unlock()
	}
}

// Tick feeds now to every served shard's timers. The driver calls it;
// tests call it with a fake clock.
func (r *Runtime[S]) Tick(now time.Time) {
	r.Each(func(_ int32, s S) { s.Tick(now) })
}

// slots returns the hosted shards in partition order.
func (r *Runtime[S]) slots() []*slot[S] {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*slot[S], 0, len(r.shards))
	for _, p := range slices.Sorted(maps.Keys(r.shards)) {
		out = append(out, r.shards[p])
	}
	return out
}

// Recheck replays the partitions that could not be replayed, once their
// log can be read (a partition that keeps failing, to replay or to
// append, is tried less and less often: each try replays it from its
// start), and reloads those whose log
// was rewritten under the shard (its generation changed: a heal dropped
// records that were never fsynced, so nobody was told about them, but the
// state in memory still shows them) or whose append failed (the state may
// hold what the log lacks).
func (r *Runtime[S]) Recheck() {
	for _, s := range r.slots() {
		s.mu.Lock()
		status, gen, failed, reloads := s.status, s.gen, s.lastErr, s.reloads
		if (status == statusDown || failed != nil) && s.skip > 0 {
			s.skip--
			s.mu.Unlock()
			continue
		}
		s.mu.Unlock()
		switch status {
		case statusActive:
			now, err := r.store.Generation(s.p)
			if err == nil && now == gen && failed == nil {
				continue
			}
			switch {
			case err == nil && now != gen:
				err = fmt.Errorf("its log was rewritten under the coordinator (generation %d, replayed %d)", now, gen)
			case err == nil:
				err = fmt.Errorf("an append failed, so its state may hold what the log lacks: %w", failed)
			}
			if failed != nil {
				reloads++
			}
			s = r.reopen(s, err, reloads)
			if s == nil {
				continue
			}
		case statusDown:
		default:
			continue
		}
		if r.replay(s) == nil {
			r.log.Info("coordinator partition replayed; it is served again", "topic", r.cfg.Topic, "partition", s.p)
		}
	}
}

// reopen unloads a served shard to replay it again: it is replaced by a
// loading one (nil if s was unloaded meanwhile), which inherits reloads.
func (r *Runtime[S]) reopen(s *slot[S], why error, reloads int) *slot[S] {
	r.mu.Lock()
	if r.shards[s.p] != s {
		r.mu.Unlock()
		return nil
	}
	fresh := r.newSlot(s.p)
	r.shards[s.p] = fresh
	r.mu.Unlock()
	r.log.Warn("coordinator partition unloaded to be replayed again", "topic", r.cfg.Topic, "partition", s.p, "reason", why)
	r.unloadSlot(s, fmt.Errorf("%w: %s-%d is reloading: %v", ErrUnavailable, r.cfg.Topic, s.p, why))
	fresh.mu.Lock()
	fresh.status, fresh.down, fresh.reloads = statusDown, why, reloads
	fresh.mu.Unlock()
	return fresh
}

// PartitionFor is the internal partition of key (a group or transactional
// id) among partitions, as Kafka computes it: Java's String.hashCode (over
// UTF-16 code units) with the sign bit cleared, modulo the count, so a
// key's coordinator is the same partition on MoonMQ and Kafka.
func PartitionFor(key string, partitions int32) int32 {
	var h int32
	for _, r := range key {
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
