package cleaner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/log"
)

// Options configure a Manager. The zero value, after EnsureDefaults, is
// Kafka's defaults.
type Options struct {
	// Threads is --log-cleaner-threads (Kafka's log.cleaner.threads,
	// default 1). 0 runs no cleaner at all: compacted topics then only
	// grow, as with Kafka's log.cleaner.enable=false.
	Threads int
	// DedupeBufferSize is --log-cleaner-dedupe-buffer-size (Kafka's
	// log.cleaner.dedupe.buffer.size, default 128 MiB): the key map memory
	// of all the threads together; each thread gets an equal share, at most
	// math.MaxInt32 bytes, as in Kafka.
	DedupeBufferSize int64
	// IOMaxBytesPerSecond is --log-cleaner-io-max-bytes-per-second (Kafka's
	// log.cleaner.io.max.bytes.per.second): the read plus write rate of
	// all the threads together; 0 is unlimited (the zero value, and
	// Kafka's default; the broker's is DefaultIOMaxBytesPerSecond).
	IOMaxBytesPerSecond float64
	// Backoff is how long a thread that found nothing to clean sleeps
	// before looking again, unless woken (Kafka's log.cleaner.backoff.ms,
	// default 15 s).
	Backoff time.Duration
	Clock   clock.Clock
	Logger  *slog.Logger
}

// Kafka's defaults.
const (
	DefaultThreads          = 1
	DefaultDedupeBufferSize = 128 << 20
	DefaultBackoff          = 15 * time.Second
)

// DefaultIOMaxBytesPerSecond is the broker's cleaner I/O limit when none is
// set (Kafka's is unlimited). Unlimited, a cleaning of a large dirty
// backlog read and wrote over 1 GB/s; its writes, fsyncs and freed
// segments tripled the p99 of produce at 5,000 records/s (4 -> 12 ms on
// the development machine, broker pinned to one core), at 400 MB/s it
// more than doubled it, at 200 MB/s (and 100) it stayed within the
// unloaded one. 200 MB/s cleans about 100 MB of dirty log a second,
// more than most brokers write to compacted topics; raise it (or 0) on
// disks with room to spare.
const DefaultIOMaxBytesPerSecond = 200_000_000

// EnsureDefaults fills unset fields (Threads is left alone: 0 is a choice).
func (o *Options) EnsureDefaults() {
	if o.DedupeBufferSize == 0 {
		o.DedupeBufferSize = DefaultDedupeBufferSize
	}
	if o.Backoff == 0 {
		o.Backoff = DefaultBackoff
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate checks the options, naming the flag at fault.
func (o Options) Validate() error {
	switch {
	case o.Threads < 0:
		return fmt.Errorf("cleaner: --log-cleaner-threads must be at least 0 (0 disables compaction), got %d", o.Threads)
	case o.Threads > 64:
		return fmt.Errorf("cleaner: --log-cleaner-threads must be at most 64, got %d", o.Threads)
	case o.DedupeBufferSize < 0:
		return fmt.Errorf("cleaner: --log-cleaner-dedupe-buffer-size must be positive, got %d", o.DedupeBufferSize)
	case o.Threads > 0 && o.DedupeBufferSize/int64(o.Threads) < minMapMemory:
		return fmt.Errorf("cleaner: --log-cleaner-dedupe-buffer-size of %d bytes leaves less than %d bytes of key map to each of %d threads",
			o.DedupeBufferSize, minMapMemory, o.Threads)
	case o.IOMaxBytesPerSecond < 0 || math.IsNaN(o.IOMaxBytesPerSecond) || o.IOMaxBytesPerSecond > 0 && o.IOMaxBytesPerSecond < 1:
		// Below a byte a second the throttler's wait for one read
		// overflows a Duration (and would throttle nothing).
		return fmt.Errorf("cleaner: --log-cleaner-io-max-bytes-per-second must be 0 (unlimited) or at least 1, got %g", o.IOMaxBytesPerSecond)
	case o.Backoff < 0:
		return fmt.Errorf("cleaner: --log-cleaner-backoff must not be negative, got %s", o.Backoff)
	}
	return nil
}

// minMapMemory is the smallest key map a thread may get: one with room
// for a few thousand keys, so that a cleaning makes progress in passes.
const minMapMemory = 64 << 10

// PartitionStats is the cleaner's view of one compacted partition, as of
// its last evaluation and its last cleaning.
type PartitionStats struct {
	TopicPartition
	// DirtyRatio and DirtyBytes are Log.DirtyRatio at FirstUncleanable,
	// as of the last pass: DirtyBytes (Kafka's cleanableBytes) is the
	// cleaning not done yet, the cleaner's lag on this partition in bytes.
	DirtyRatio       float64
	DirtyBytes       int64
	FirstUncleanable int64
	// CompactionDelay is how far past max.compaction.lag.ms its oldest
	// dirty record is (0: within it, or the lag is not set).
	CompactionDelay time.Duration
	// Totals of the cleanings of this partition since start.
	Cleanings                               int64
	BytesRead, BytesWritten, RecordsRemoved int64
	// LastCleaned is when the last successful cleaning ended (zero: none
	// yet) and LastDuration how long it took.
	LastCleaned  time.Time
	LastDuration time.Duration
	Cleaning     bool   // a cleaning of it runs now
	Paused       bool   // truncation, deletion or retention holds it
	Uncleanable  string // why cleaning it failed; it is not retried until it is truncated or re-created
}

// Stats are the cleaner's totals since start (Kafka's LogCleaner metrics).
type Stats struct {
	Threads int
	// Cleanings ended well, Aborted by truncation, deletion or Close,
	// Failed (the partition is then uncleanable).
	Cleanings, Aborted, Failed int64
	// Passes over the dirty part of logs (a log with more keys than a
	// thread's key map holds takes several).
	Passes                                  int64
	BytesRead, BytesWritten, RecordsRemoved int64
	TimeSpent                               time.Duration
	// LastRun is when the last cleaning ended (zero: none yet).
	LastRun time.Time
	// MaxDirtyRatio and MaxCompactionDelay are the largest over the
	// compacted partitions at the last pass (Kafka's max-dirty-percent and
	// max-compaction-delay-secs); Uncleanable counts partitions marked so.
	MaxDirtyRatio      float64
	MaxCompactionDelay time.Duration
	Uncleanable        int
}

type partState struct {
	inProgress bool
	cancel     context.CancelFunc
	paused     int
	// cleanedTo is where the last cleaning this manager ran ended (-1:
	// none since start or since a truncation), the start of the dirty part
	// when the Log cannot say (dirtyOffsetter).
	cleanedTo int64
	// gen counts pauses: a pass that read a target before a pause began
	// must not clean it after the pause ended (the log may have been
	// truncated or re-created since the target was read).
	gen uint64
	// retryAt: a cleaning of it that ended well made no progress (what is
	// dirty is younger than min.compaction.lag.ms, or not yet flushed), so
	// it is not a candidate again before this time, rather than being
	// cleaned in a loop.
	retryAt     time.Time
	uncleanable error
	present     bool // in the Source at the last pass
	stats       PartitionStats
}

// Manager runs the log cleaner threads.
type Manager struct {
	opts      Options
	throttler *Throttler
	mapMemory int

	mu      sync.Mutex
	idle    *sync.Cond // signalled when a cleaning ends
	parts   map[TopicPartition]*partState
	totals  Stats
	wake    chan struct{}
	src     Source // given to Start
	started bool
	closed  bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a manager with its options checked; its threads start with
// Start. A manager exists before the partitions it cleans (their
// truncation and deletion call AbortAndPause), so they are given to Start.
func New(opts Options) (*Manager, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{
		opts:      opts,
		throttler: NewThrottler(opts.Clock, opts.IOMaxBytesPerSecond),
		parts:     make(map[TopicPartition]*partState),
		wake:      make(chan struct{}),
	}
	if opts.Threads > 0 {
		m.mapMemory = int(min(opts.DedupeBufferSize/int64(opts.Threads), math.MaxInt32))
	}
	m.idle = sync.NewCond(&m.mu)
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.totals.Threads = opts.Threads
	return m, nil
}

// MapMemory is the key map budget each thread passes to Log.Clean.
func (m *Manager) MapMemory() int { return m.mapMemory }

// Start runs the cleaner threads over the partitions src lists. It may be
// called once; a closed manager starts nothing.
func (m *Manager) Start(src Source) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return ErrClosed
	case m.started:
		return errors.New("cleaner: already started")
	}
	m.started, m.src = true, src
	for i := 0; i < m.opts.Threads; i++ {
		m.wg.Add(1)
		go m.thread(src)
	}
	return nil
}

// Wake makes idle threads look for work now (a topic became compacted,
// a pause ended) instead of at the end of their backoff.
func (m *Manager) Wake() {
	m.mu.Lock()
	defer m.mu.Unlock()
	close(m.wake)
	m.wake = make(chan struct{})
}

// Close cancels the running cleanings (engine/log leaves each log whole)
// and returns once every thread has stopped.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	return nil
}

func (m *Manager) thread(src Source) {
	defer m.wg.Done()
	timer := m.opts.Clock.NewTimer(m.opts.Backoff)
	defer timer.Stop()
	for {
		m.mu.Lock()
		wake := m.wake // taken before the pass: a Wake during it is not lost
		m.mu.Unlock()
		cleaned := m.CleanOnce(m.ctx, src)
		if m.ctx.Err() != nil {
			return
		}
		if cleaned {
			continue // more may be dirty: look again at once, as Kafka's threads do
		}
		timer.Stop()
		timer.Reset(m.opts.Backoff)
		select {
		case <-m.ctx.Done():
			return
		case <-timer.C():
		case <-wake:
		}
	}
}

// state returns tp's state, creating it. Caller holds m.mu.
func (m *Manager) state(tp TopicPartition) *partState {
	st := m.parts[tp]
	if st == nil {
		st = &partState{cleanedTo: -1}
		st.stats.TopicPartition = tp
		m.parts[tp] = st
	}
	return st
}

// evaluated is a target with what the pass learned of it.
type evaluated struct {
	t  Target
	c  Candidate
	fu int64
	// checkpoint is where the dirty part started at evaluation (-1:
	// unknown), to tell whether a cleaning moved it.
	checkpoint int64
}

// CleanOnce is one pass of a cleaner thread: it evaluates every compacted
// partition src lists, picks the dirtiest eligible one and cleans it,
// reporting whether the cleaning made progress (cleaned segments, removed
// records or moved the checkpoint). The threads call it in a loop; tests call it
// directly to run the policy step by step.
func (m *Manager) CleanOnce(ctx context.Context, src Source) bool {
	now := m.opts.Clock.Now()
	evs, gens := m.evaluate(src(), now)

	m.mu.Lock()
	for _, st := range m.parts {
		st.present = false
	}
	cands := make([]Candidate, 0, len(evs))
	idx := make([]int, 0, len(evs))
	for i := range evs {
		e := &evs[i]
		st := m.state(e.t.TopicPartition)
		st.present = true
		e.record(now, st)
		if st.inProgress || st.paused > 0 || st.uncleanable != nil || st.gen != gens[i] || now.Before(st.retryAt) {
			continue
		}
		cands = append(cands, e.c)
		idx = append(idx, i)
	}
	// Forget partitions that left (deleted, moved away, no longer
	// compacted) unless a cleaning or a pause still refers to them.
	m.totals.MaxDirtyRatio, m.totals.MaxCompactionDelay, m.totals.Uncleanable = 0, 0, 0
	for tp, st := range m.parts {
		if !st.present && !st.inProgress && st.paused == 0 {
			delete(m.parts, tp)
			continue
		}
		m.totals.MaxDirtyRatio = max(m.totals.MaxDirtyRatio, st.stats.DirtyRatio)
		m.totals.MaxCompactionDelay = max(m.totals.MaxCompactionDelay, st.stats.CompactionDelay)
		if st.uncleanable != nil {
			m.totals.Uncleanable++
		}
	}
	i, _, ok := Choose(now, cands)
	if !ok || m.closed || ctx.Err() != nil {
		m.mu.Unlock()
		return false
	}
	e := evs[idx[i]]
	st := m.state(e.t.TopicPartition)
	cctx, cancel := context.WithCancel(ctx)
	st.inProgress, st.cancel = true, cancel
	st.stats.Cleaning = true
	m.mu.Unlock()

	y := newYielder(yieldQuantum)
	stats, err := e.t.Log.Clean(cctx, CleanOptions{
		Now:              now,
		DeleteRetention:  e.t.Config.DeleteRetention,
		MinCompactionLag: e.t.Config.MinCompactionLag,
		FirstUncleanable: e.fu,
		MapMemory:        m.mapMemory,
		IOLimit:          m.throttler.Wait,
		Yield:            y.Yield,
	})
	y.Close()
	aborted := cctx.Err() != nil
	cancel()
	end := m.opts.Clock.Now()
	if stats.Duration == 0 {
		stats.Duration = end.Sub(now)
	}

	m.mu.Lock()
	st.inProgress, st.cancel, st.stats.Cleaning = false, nil, false
	m.totals.Passes += int64(stats.Passes)
	m.totals.BytesRead += stats.BytesRead
	m.totals.BytesWritten += stats.BytesWritten
	m.totals.RecordsRemoved += stats.RecordsRemoved
	m.totals.TimeSpent += stats.Duration
	st.stats.BytesRead += stats.BytesRead
	st.stats.BytesWritten += stats.BytesWritten
	st.stats.RecordsRemoved += stats.RecordsRemoved
	progress := err == nil && (stats.SegmentsCleaned > 0 || stats.RecordsRemoved > 0 || stats.BatchesRemoved > 0 ||
		stats.CleanedTo > 0 && stats.CleanedTo != e.checkpoint)
	switch {
	case err == nil:
		if !progress {
			st.retryAt = end.Add(m.opts.Backoff)
		}
		m.totals.Cleanings++
		m.totals.LastRun = end
		st.stats.Cleanings++
		st.stats.LastCleaned, st.stats.LastDuration = end, stats.Duration
		st.cleanedTo = e.fu
		if stats.CleanedTo > 0 {
			st.cleanedTo = stats.CleanedTo
		}
	case aborted || errors.Is(err, log.ErrClosed):
		// Truncation, deletion or Close stopped it: the log is whole
		// (old or new segments) and the partition is cleaned again
		// when it is resumed, if it still exists.
		m.totals.Aborted++
	case errors.Is(err, log.ErrFailed):
		// The log is offline after an I/O error (this cleaning's or
		// another writer's): it refuses cleanings until the broker heals
		// it, and is cleaned again after that, so it is not marked
		// uncleanable.
		m.totals.Failed++
	default:
		m.totals.Failed++
		st.uncleanable = err
		st.stats.Uncleanable = err.Error()
	}
	m.idle.Broadcast()
	m.mu.Unlock()

	tp := e.t.TopicPartition
	switch {
	case err == nil:
		m.opts.Logger.Debug("cleaned log", "topic", tp.Topic, "partition", tp.Partition, "dirty_ratio", e.c.Ratio,
			"first_uncleanable", e.fu, "read", stats.BytesRead, "written", stats.BytesWritten,
			"removed_records", stats.RecordsRemoved, "segments", stats.SegmentsCleaned, "passes", stats.Passes,
			"cleaned_to", stats.CleanedTo, "progress", progress, "took", stats.Duration)
	case aborted || errors.Is(err, log.ErrClosed):
		m.opts.Logger.Debug("cleaning aborted", "topic", tp.Topic, "partition", tp.Partition, "err", err)
	case errors.Is(err, log.ErrFailed):
		m.opts.Logger.Warn("cleaning failed on an offline log; it is cleaned again once the log is healed",
			"topic", tp.Topic, "partition", tp.Partition, "err", err)
	default:
		m.opts.Logger.Error("cleaning failed; the partition is not cleaned again until it is truncated, re-created or the broker restarts",
			"topic", tp.Topic, "partition", tp.Partition, "err", err)
	}
	// A thread looks again at once only after a cleaning that did
	// something: one that found nothing it could clean waits.
	return progress
}

// checkpointOf is where t's dirty part starts as far as the manager
// knows: the log's cleaner checkpoint when it keeps one, else the end of
// this manager's last cleaning of it (cleanedTo, -1: unknown).
func checkpointOf(t Target, cleanedTo int64) int64 {
	if c, ok := t.Log.(checkpointer); ok {
		if off, err := c.CleanedTo(); err == nil {
			return off
		}
	}
	return cleanedTo
}

// evaluate reads what the policy needs of each compacted target: its
// dirty ratio below its first uncleanable offset, where its dirty part
// starts and the timestamp of its first dirty batch. It reads the logs
// without m.mu (each costs a read or two); gens are the targets' pause
// generations as they were before.
func (m *Manager) evaluate(targets []Target, now time.Time) (evs []evaluated, gens []uint64) {
	evs = make([]evaluated, 0, len(targets))
	for _, t := range targets {
		if !t.Config.CleanupCompact || t.Log == nil {
			continue
		}
		fu := FirstUncleanable(t.HighWatermark, t.LastStable, t.ActiveBase)
		ratio, cleanable := t.Log.DirtyRatio(fu)
		evs = append(evs, evaluated{t: t, fu: fu, c: Candidate{
			TopicPartition: t.TopicPartition, Ratio: ratio, CleanableBytes: cleanable,
			MinRatio: t.Config.MinCleanableDirtyRatio, MaxLag: t.Config.MaxCompactionLag,
			FirstDirtyTimestamp: NoTimestamp,
		}})
	}
	m.mu.Lock()
	cleanedTo := make([]int64, len(evs))
	gens = make([]uint64, len(evs))
	for i := range evs {
		st := m.state(evs[i].t.TopicPartition)
		cleanedTo[i], gens[i] = st.cleanedTo, st.gen
	}
	m.mu.Unlock()
	for i := range evs {
		evs[i].checkpoint = checkpointOf(evs[i].t, cleanedTo[i])
		evs[i].c.FirstDirtyTimestamp = firstDirtyTimestamp(evs[i].t, evs[i].checkpoint, evs[i].fu)
	}
	return evs, gens
}

// record keeps what e found in st's stats. Caller holds m.mu.
func (e *evaluated) record(now time.Time, st *partState) {
	v := Evaluate(now, e.c)
	st.stats.DirtyRatio, st.stats.DirtyBytes = e.c.Ratio, e.c.CleanableBytes
	st.stats.FirstUncleanable, st.stats.CompactionDelay = e.fu, v.CompactionDelay
}

// firstDirtyTimestamp is the max timestamp of the first dirty batch below
// fu, for max.compaction.lag.ms, or NoTimestamp when the lag is not set or
// it cannot be known. checkpoint is checkpointOf's answer (-1: unknown,
// the dirty part starts at the log start): it is not read again here.
func firstDirtyTimestamp(t Target, checkpoint, fu int64) int64 {
	if t.Config.MaxCompactionLag >= math.MaxInt64 || t.FirstBatchTimestamp == nil {
		return NoTimestamp
	}
	from := max(checkpoint, t.LogStart) // engine/log's checkpoint is never below its log start
	if from >= fu {
		return NoTimestamp
	}
	ts, ok := t.FirstBatchTimestamp(from, fu)
	if !ok {
		return NoTimestamp
	}
	return ts
}

// lookAtNewPartitions evaluates the compacted partitions of the Source
// that no pass has seen yet (a topic created or altered to compact a
// moment ago), so their state is reported at once rather than after the
// threads' next pass. It cleans nothing.
func (m *Manager) lookAtNewPartitions() {
	m.mu.Lock()
	src := m.src
	m.mu.Unlock()
	if src == nil || m.opts.Threads == 0 {
		return // compaction is off: there is no cleaner state to report
	}
	targets := src() // not under m.mu: it reads the partitions
	var fresh []Target
	m.mu.Lock()
	for _, t := range targets {
		if st, known := m.parts[t.TopicPartition]; !known || !st.present {
			fresh = append(fresh, t)
		}
	}
	m.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	now := m.opts.Clock.Now()
	evs, _ := m.evaluate(fresh, now)
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range evs {
		if st := m.state(evs[i].t.TopicPartition); !st.present {
			st.present = true
			evs[i].record(now, st)
		}
	}
}

// AbortAndPause stops any cleaning of tp and keeps the partition from
// being cleaned until resume is called (Kafka's abortAndPauseCleaning):
// truncation and deletion call it first. It returns once no cleaning of tp
// runs. Pauses nest; resume is idempotent.
func (m *Manager) AbortAndPause(topic string, partition int32) (resume func()) {
	tp := TopicPartition{topic, partition}
	m.mu.Lock()
	st := m.state(tp)
	st.paused++
	st.gen++
	st.stats.Paused = true
	if st.cancel != nil {
		st.cancel()
	}
	for st.inProgress {
		m.idle.Wait()
	}
	m.mu.Unlock()
	return m.resumer(st, true)
}

// TryPause pauses tp unless a cleaning of it runs (ok false): retention of a
// compact,delete topic skips a partition being cleaned, as Kafka's
// deletableLogs does, rather than aborting a cleaning at every round.
func (m *Manager) TryPause(topic string, partition int32) (resume func(), ok bool) {
	tp := TopicPartition{topic, partition}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.state(tp)
	if st.inProgress {
		return nil, false
	}
	st.paused++
	st.stats.Paused = true
	return m.resumer(st, false), true
}

// resumer returns the idempotent end of a pause. After a truncation or a
// deletion (changed), what this manager knew of the log no longer holds.
func (m *Manager) resumer(st *partState, changed bool) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			st.paused--
			st.stats.Paused = st.paused > 0
			if changed {
				st.cleanedTo, st.uncleanable, st.stats.Uncleanable = -1, nil, ""
			}
			m.mu.Unlock()
			m.Wake()
		})
	}
}

// Stats returns the cleaner's totals.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.totals
}

// PartitionStats returns the state of every compacted partition seen at
// the last pass, sorted by topic and partition.
func (m *Manager) PartitionStats() []PartitionStats {
	m.lookAtNewPartitions()
	m.mu.Lock()
	out := make([]PartitionStats, 0, len(m.parts))
	for _, st := range m.parts {
		if st.present {
			out = append(out, st.stats)
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
