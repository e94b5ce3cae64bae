// Package log owns a partition's durable, segmented log of Kafka RecordBatch
// v2 bytes: offset assignment, segment files and their sparse offset and time
// indexes, group-commit fsync, reads, retention, truncation, leader-epoch and
// log-start checkpoints, and crash recovery.
//
// One *Log serves one partition directory. Files in it:
//
//	<base>.log                 batches, exactly as validated on produce, back to back
//	<base>.index               relative offset -> file position, one entry per IndexIntervalBytes
//	<base>.timeindex           running max timestamp -> relative offset
//	leader-epoch-checkpoint    epoch -> start offset
//	log-start-offset-checkpoint  log start moved by DeleteRecordsBefore
//	high-watermark-checkpoint  the owner's high watermark (a replicated partition), when it has one
//	recovery-point-checkpoint  every batch below this offset is fsynced (and every sealed
//	                           segment below it with its indexes); written after rolls,
//	                           every RecoveryPointInterval and at Close
//	<base>.txnindex            aborted transactions whose abort marker is in the segment
//	                           (txnindex.go), created with the first one
//	txn-index-valid-to-checkpoint  present only while the .txnindex files must be
//	                           rebuilt from this offset on (TxnIndexValidTo)
//	.clean                     written by Close; Open skips recovery if it still matches
//	cleaner-offset-checkpoint  compaction: every offset below it was cleaned (cleaner.go)
//	cleaner-swap               compaction: the segment group [base, end) being swapped
//	<base>.*.cleaned, .swap    compaction output before and after its commit point;
//	                           Open completes a swap whose .log.swap exists, else
//	                           deletes them (cleaner.go)
//
// All file I/O goes through Options.FS (engine/vfs), so crash tests run on a
// filesystem that forgets what was not synced; descriptors of segment files
// come from a FileCache shared by the logs of a node, so their number is
// bounded whatever the data looks like (only each log's active .log stays
// open).
//
// Invariants:
//   - Offsets increase across segments, densely except where compaction
//     removed records (gaps, as in Kafka); a segment's name is the base
//     offset of its first batch (or of the log end when it was created), or
//     below it once compaction removed its first records.
//   - Bytes below a segment's published size are whole batches. Append writes
//     past it and publishes the new size, then the new log end, so readers
//     without locks never see a partial batch.
//   - Every offset below the durable mark has been fsynced, together with the
//     directory entries of its segment files. With FlushAlways the committed
//     end is the durable mark, so nothing readable can be lost by a crash;
//     WaitDurable returns only once its offset is below it. The high
//     watermark is the committed end until the owner sets its own
//     (SetHighWatermark: a replicated partition's), which stays within the
//     log and never rises by itself.
//   - A truncation lowers the recovery point and the missing ranges before
//     it removes or cuts a file, so a crash in the middle never reopens
//     with the removed offsets taken for flushed data gone missing.
//   - After Open, every batch past the recovery point has passed its CRC check
//     and every batch before it was fsynced whole: recovery truncates the
//     unflushed tail at its first torn or corrupt batch, so a torn batch is
//     never served. Below the recovery point nothing is ever truncated or
//     deleted by recovery: damage there is a storage fault, recorded as a
//     corrupt range whose offsets fail with ErrCorrupt (see Open).
//   - Reads check the CRC of every batch they return, so damage on disk is
//     never served, only reported.
//   - A log that failed an I/O operation (ErrFailed) accepts no appends until
//     Heal succeeds; reads, retention and DeleteRecordsBefore keep working.
//
// Locking: appendMu serialises all writers (append, roll, retention,
// truncation, close). Reads take no writer lock: they pread below published
// sizes and hold segment references, so retention can unlink files under
// them. Only truncation, which rewrites bytes in place, excludes readers
// (truncMu). One flusher goroutine per Log does the fsyncs outside appendMu;
// syncMu keeps fsync rounds and truncation apart. cleanMu serialises Clean
// and Heal; a cleaning swaps segments under appendMu and truncMu like a
// truncation. Lock order: cleanMu, syncMu, appendMu, truncMu, segMu.
package log

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/vfs"
)

// Sentinel errors. Every error returned by this package that callers branch
// on wraps one of these (or a batch sentinel for malformed batches passed to
// Append).
var (
	// ErrOffsetOutOfRange: the offset is below the log start or beyond the
	// log end (Kafka OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrClosed: the log was closed (or deleted).
	ErrClosed = errors.New("log: closed")
	// ErrCorrupt: stored data or a checkpoint failed validation. Recovery
	// repairs torn tails itself; this surfaces corruption found elsewhere
	// (Kafka KAFKA_STORAGE_ERROR / CORRUPT_MESSAGE).
	ErrCorrupt = errors.New("log: corrupt data")
	// ErrFailed: an I/O error (a failed write or fsync) took the log offline.
	// Nothing acknowledged is lost, but the log accepts no more writes until
	// Heal (or a reopen) recovers it (Kafka KAFKA_STORAGE_ERROR).
	ErrFailed = errors.New("log: storage failure, log offline")
	// ErrOutOfOrder: AppendReplicated was given batches whose offsets do not
	// increase from the log end (Kafka OFFSETS_OUT_OF_ORDER / follower bug).
	ErrOutOfOrder = errors.New("log: batch offsets out of order")
	// ErrInvalidOptions: Options.Validate failed.
	ErrInvalidOptions = errors.New("log: invalid options")
)

// Defaults applied by EnsureDefaults to zero fields. Kafka's defaults, except
// that durability is the caller's choice (FlushAlways has no zero-value
// default: MoonMQ's topic config defaults it to true).
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentAge         = 7 * 24 * time.Hour
	DefaultRetention          = 7 * 24 * time.Hour
	DefaultRetentionBytes     = -1
	DefaultIndexIntervalBytes = 4096
	DefaultMaxMessageBytes    = 1048588
	DefaultFlushInterval      = time.Second
	DefaultMaxIndexBytes      = 10 << 20 // Kafka's segment.index.bytes
	// DefaultRecoveryPointInterval is how often a log with new durable data
	// checkpoints its recovery point (Kafka's
	// log.flush.offset.checkpoint.interval.ms).
	DefaultRecoveryPointInterval = time.Minute
)

// Options configures a Log. Zero fields mean "default" (see EnsureDefaults);
// to express Kafka's literal 0 for a size or interval use the smallest
// positive value (1 byte, 1ns), which behaves identically.
type Options struct {
	// SegmentBytes and SegmentAge: roll the active segment when appending
	// would take it past SegmentBytes, or when it is older than SegmentAge.
	SegmentBytes int64
	SegmentAge   time.Duration
	// SegmentJitter rolls each segment up to this much before SegmentAge
	// (a per-segment random share of min(SegmentJitter, SegmentAge)); 0 is
	// none.
	SegmentJitter time.Duration
	// MaxIndexBytes rolls the active segment once its offset index (8 bytes
	// an entry) or time index (12 bytes an entry) holds this many bytes of
	// entries (default DefaultMaxIndexBytes).
	MaxIndexBytes int
	// Retention deletes sealed segments whose newest timestamp is older than
	// this (negative: unlimited). RetentionBytes deletes the oldest sealed
	// segments while the log stays at least this large (negative: unlimited).
	Retention      time.Duration
	RetentionBytes int64
	// IndexIntervalBytes is the spacing of offset index entries.
	IndexIntervalBytes int
	// MaxMessageBytes is the largest batch Append accepts (the caller should
	// already have rejected larger ones with batch.Validate).
	MaxMessageBytes int
	// FlushAlways: fsync (group commit) before WaitDurable returns, and keep
	// the high watermark at the durable end. Otherwise fsync every
	// FlushInterval and let the high watermark follow the log end.
	FlushAlways   bool
	FlushInterval time.Duration
	// FlushMessages, when FlushAlways is off, also starts an fsync round as
	// soon as this many offsets are appended but not yet durable (default
	// math.MaxInt64: only the interval).
	FlushMessages int64
	// GroupCommitWindow is the shortest time between the starts of two
	// fsync rounds under FlushAlways: appends arriving sooner wait for the
	// window to pass and share the next round. Zero (no window) starts a
	// round as soon as the previous one ends. At moderate rates a short
	// window costs each append at most its length in latency and saves most
	// of the fsyncs; when rounds take longer than the window (heavy load) or
	// appends are further apart (light load) it changes nothing.
	GroupCommitWindow time.Duration
	// RecoveryPointInterval is how often the flusher persists the recovery
	// point when it has moved (besides after every roll and at Close). Data
	// below it is never truncated by recovery; damage above it after a crash
	// is treated as a torn tail.
	RecoveryPointInterval time.Duration
	// FS is the filesystem (default vfs.OS); fixed at Open.
	FS vfs.FS
	// Files is the cache of open segment files, shared by every log of a
	// node to bound their descriptors (default: a small private one); fixed
	// at Open.
	Files *FileCache
	// Logger is fixed at Open; SetOptions ignores a different one.
	Logger *slog.Logger
	// Clock is the time of segment age, retention and recovery-point
	// checkpoints, and of the flusher's timers (FlushInterval and
	// GroupCommitWindow), so tests can hold them still and move them
	// (default clock.Real). Fsync durations are measured on the machine's
	// clock whatever it is. It is used from the flusher goroutine too, so
	// it must be safe for concurrent use; fixed at Open.
	Clock clock.Clock
	// OnFsync, when set, is called after every successful fsync round with
	// its duration and the number of appends it made durable (the group
	// commit size); metrics hang off it. It must not block.
	OnFsync func(d time.Duration, appends uint64)
}

// EnsureDefaults fills zero fields with defaults.
func (o *Options) EnsureDefaults() {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.SegmentAge == 0 {
		o.SegmentAge = DefaultSegmentAge
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.RetentionBytes == 0 {
		o.RetentionBytes = DefaultRetentionBytes
	}
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.FlushMessages == 0 {
		o.FlushMessages = math.MaxInt64
	}
	if o.MaxIndexBytes == 0 {
		o.MaxIndexBytes = DefaultMaxIndexBytes
	}
	if o.RecoveryPointInterval == 0 {
		o.RecoveryPointInterval = DefaultRecoveryPointInterval
	}
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.Files == nil {
		o.Files = NewFileCache(DefaultFileCacheCapacity)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
}

// Validate checks options after EnsureDefaults.
func (o Options) Validate() error {
	switch {
	case o.SegmentBytes < batch.HeaderSize || o.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("%w: SegmentBytes %d must be in [%d, %d]", ErrInvalidOptions, o.SegmentBytes, batch.HeaderSize, math.MaxInt32)
	case o.SegmentAge <= 0:
		return fmt.Errorf("%w: SegmentAge %v must be positive", ErrInvalidOptions, o.SegmentAge)
	case o.IndexIntervalBytes <= 0:
		return fmt.Errorf("%w: IndexIntervalBytes %d must be positive", ErrInvalidOptions, o.IndexIntervalBytes)
	case o.MaxMessageBytes <= 0:
		return fmt.Errorf("%w: MaxMessageBytes %d must be positive", ErrInvalidOptions, o.MaxMessageBytes)
	case o.FlushInterval <= 0:
		return fmt.Errorf("%w: FlushInterval %v must be positive", ErrInvalidOptions, o.FlushInterval)
	case o.FlushMessages <= 0:
		return fmt.Errorf("%w: FlushMessages %d must be positive", ErrInvalidOptions, o.FlushMessages)
	case o.SegmentJitter < 0:
		return fmt.Errorf("%w: SegmentJitter %v must not be negative", ErrInvalidOptions, o.SegmentJitter)
	case o.MaxIndexBytes < 0:
		return fmt.Errorf("%w: MaxIndexBytes %d must not be negative", ErrInvalidOptions, o.MaxIndexBytes)
	case o.RecoveryPointInterval <= 0:
		return fmt.Errorf("%w: RecoveryPointInterval %v must be positive", ErrInvalidOptions, o.RecoveryPointInterval)
	case o.FS == nil || o.Files == nil:
		return fmt.Errorf("%w: FS and Files are required", ErrInvalidOptions)
	case o.GroupCommitWindow < 0:
		return fmt.Errorf("%w: GroupCommitWindow %v must not be negative", ErrInvalidOptions, o.GroupCommitWindow)
	case o.Logger == nil:
		return fmt.Errorf("%w: Logger is nil", ErrInvalidOptions)
	case o.Clock == nil:
		return fmt.Errorf("%w: Clock is nil", ErrInvalidOptions)
	}
	return nil
}

// AppendResult describes a successful Append.
type AppendResult struct {
	BaseOffset     int64 // offset of the first record appended
	LastOffset     int64 // offset of the last record appended
	LogStartOffset int64 // log start at the time of the append
	// Rolled: this append started a new segment, based at BaseOffset
	// (owners of per-segment state, like producer snapshots, act on it).
	Rolled bool
}

// Stats are cumulative counters and current gauges, for metrics.
type Stats struct {
	Appends         uint64 // Append/AppendReplicated calls that wrote
	AppendedBatches uint64
	AppendedBytes   uint64
	Fsyncs          uint64 // fsync rounds (each may cover many appends)
	FsyncNanos      int64  // total time spent in fsync rounds
	Segments        int
	Size            int64
	LogStartOffset  int64
	LogEndOffset    int64
	HighWatermark   int64
	CorruptRanges   int    // damaged stretches known now
	IndexFailures   uint64 // index entries found not to match their segment
	Failed          bool   // an I/O error took the log offline; Heal brings it back
	UncleanOpen     bool   // opened after an unclean shutdown: its unflushed tail was scanned
}

// Log is one partition's log. All methods are safe for concurrent use.
type Log struct {
	dir    string
	st     *storage
	opts   atomic.Pointer[Options]
	logger *slog.Logger
	// uncleanOpen: Open found no clean-shutdown marker on an existing
	// log. Set before Open returns, never changed.
	uncleanOpen bool

	syncMu   sync.Mutex
	appendMu sync.Mutex
	// cleanMu serialises Clean (cleaner.go) and Heal; taken before syncMu.
	cleanMu sync.Mutex
	// nextHorizon is the earliest delete horizon of a tombstone the last
	// cleaning kept (unix ms; math.MaxInt64 none; 0 unknown, as after Open).
	nextHorizon atomic.Int64
	// txnMu guards aborted, the aborted-transaction index in memory
	// (txnindex.go), sorted by marker offset.
	txnMu    sync.Mutex
	aborted  []AbortedTxn
	truncMu  sync.RWMutex
	segMu    sync.RWMutex
	segments []*segment // sorted by base offset; the last one is active

	// txnValidTo is TxnIndexValidTo before the min with the log end:
	// math.MaxInt64 unless a rebuild of the aborted-transaction index is
	// due (txnindex.go). Written under appendMu (or with the log to itself).
	txnValidTo atomic.Int64

	// Guarded by appendMu.
	active      *segment
	pendingSync []*segment // sealed segments not yet fsynced (each holds a reference)
	dirDirty    bool       // segment files were created since the last fsync round
	closed      bool

	// Guarded by syncMu.
	recoveryPoint int64
	rpWritten     time.Time // when the recovery point was last persisted

	scannedAtOpen int // segments checksummed by recovery (observability, tests)
	// healFloor is, for the log a Heal recovers on the side, the durable
	// mark of the failed log: recovery treats everything below it as
	// flushed. 0 for a log Open recovers.
	healFloor int64

	// missing are offsets recovery found gone from flushed data with no
	// bytes left to mark (a segment ended short of what was on disk), kept
	// in the missing-offsets checkpoint. Set by recover; replaced (never
	// mutated) by truncations and heals under truncMu and segMu, so Read
	// (truncMu) and CorruptRanges (segMu) may read it.
	missing []CorruptRange

	epochs *epochCache

	logStart atomic.Int64
	leo      atomic.Int64
	gen      atomic.Uint64 // see Generation
	hw       atomic.Int64  // the committed end: durable end (FlushAlways) or log end
	durable  atomic.Int64  // every offset below is fsynced
	// The owner's high watermark (SetHighWatermark): when hwOwned is set,
	// HighWatermark is ownHW, kept within [log start, log end] under hwMu
	// (truncation and restarts clamp it there too), instead of hw.
	hwMu     sync.Mutex
	hwOwned  atomic.Bool
	ownHW    atomic.Int64
	hwSaved  int64 // the owner's HW last checkpointed; -1 none. Guarded by hwMu
	isClosed atomic.Bool

	failMu  sync.Mutex
	failErr error

	changed broadcaster    // high watermark advanced, truncation, close
	waiters durableWaiters // NotifyDurable callbacks; settled by the flusher

	kick chan struct{}
	// hurry cuts the flusher's group-commit wait short (Hurry).
	hurry chan struct{}
	stop  chan struct{}
	done  chan struct{}

	appends, appendedBatches, appendedBytes atomic.Uint64
	appendsFlushed                          uint64 // appends covered by the last fsync round; guarded by syncMu
	fsyncs                                  atomic.Uint64
	fsyncNanos                              atomic.Int64
}

// broadcaster hands out a channel that is closed at the next fire. A fresh
// channel is only allocated when someone took the previous one, so appends
// with no long-poll waiters cost nothing.
type broadcaster struct {
	mu    sync.Mutex
	ch    chan struct{}
	taken bool
	final bool
}

func (b *broadcaster) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	b.taken = true
	return b.ch
}

func (b *broadcaster) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.final || !b.taken {
		return
	}
	close(b.ch)
	b.ch = make(chan struct{})
	b.taken = false
}

func (b *broadcaster) finished() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.final
}

// finish closes the channel for good: every later wait returns a closed
// channel.
func (b *broadcaster) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.final {
		return
	}
	b.final = true
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	close(b.ch)
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// Options returns the current options.
func (l *Log) Options() Options { return *l.opts.Load() }

// LogStartOffset is the first offset that may be read.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LogEndOffset is the next offset to be assigned.
func (l *Log) LogEndOffset() int64 { return l.leo.Load() }

// generations numbers Logs and their rewrites process-wide, so no two Logs
// (of one directory, reopened) ever report the same Generation.
var generations atomic.Uint64

// Generation changes whenever records below the log end may have been
// removed or replaced by anything but an append or retention at the start:
// Heal (which drops what was not fsynced), TruncateTo, a reset. A reader
// that rebuilt state from the log (the group coordinator) compares it to
// know whether that state still matches; offsets alone cannot tell, since
// appends may refill a truncated range. Every Open starts a new one.
func (l *Log) Generation() uint64 { return l.gen.Load() }

func (l *Log) rewritten() { l.gen.Store(generations.Add(1)) }

// HighWatermark is the end of what readers should see: the committed end
// (CommittedEnd) until the owner sets its own with SetHighWatermark (a
// replicated partition: the ISR's watermark on a leader, the leader's on a
// follower). Retention never deletes past it.
func (l *Log) HighWatermark() int64 {
	if l.hwOwned.Load() {
		return l.ownHW.Load()
	}
	return l.hw.Load()
}

// HighWatermarkOwned reports whether the owner holds the high watermark
// (SetHighWatermark, or a checkpoint of it found at Open).
func (l *Log) HighWatermarkOwned() bool { return l.hwOwned.Load() }

// CommittedEnd is the end of what this log has made as durable as its
// flush policy promises: the durable (fsynced) end with FlushAlways,
// otherwise the log end. A replication leader reports it to its ISR and
// serves followers up to it; a follower fetches from it.
func (l *Log) CommittedEnd() int64 { return l.hw.Load() }

// SetHighWatermark makes the high watermark the owner's: from now on it is
// hw, clamped to [log start, log end], and no longer follows CommittedEnd.
// Long polls (Changed) are woken when it moves. Truncation lowers it with
// the log end; it never rises on its own.
func (l *Log) SetHighWatermark(hw int64) {
	l.hwMu.Lock()
	hw = min(max(hw, l.logStart.Load()), l.leo.Load())
	moved := !l.hwOwned.Load() || l.ownHW.Load() != hw
	l.ownHW.Store(hw)
	l.hwOwned.Store(true)
	l.hwMu.Unlock()
	if moved {
		l.changed.fire()
	}
}

// ReleaseHighWatermark hands the high watermark back to the log: it is
// CommittedEnd again, as for a partition alone on its node, and the
// checkpoint of the owner's is removed so the next Open starts that way.
func (l *Log) ReleaseHighWatermark() error {
	l.hwMu.Lock()
	was := l.hwOwned.Swap(false)
	var err error
	if was || l.hwSaved >= 0 {
		if err = l.st.fs.Remove(filepath.Join(l.dir, highWatermarkFile)); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		if err == nil {
			l.hwSaved = -1
		}
	}
	l.hwMu.Unlock()
	if was {
		l.changed.fire()
	}
	if err != nil {
		return fmt.Errorf("log %s: remove the high watermark checkpoint: %w", l.dir, err)
	}
	return nil
}

// CheckpointHighWatermark persists the owner's high watermark when it
// moved since the last checkpoint (Kafka's replication-offset-checkpoint):
// a replica that restarts starts from it rather than from its own end,
// which may hold records not yet replicated, so it never shows consumers a
// record the cluster could still lose. The owner calls it when it takes
// the high watermark and then periodically; Close calls it too. A stale
// checkpoint is only lower, which delays reads, never exposes one.
func (l *Log) CheckpointHighWatermark() error {
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	if !l.hwOwned.Load() || l.ownHW.Load() == l.hwSaved {
		return nil
	}
	hw := l.ownHW.Load()
	if err := writeOffsetCheckpoint(l.st.fs, l.dir, highWatermarkFile, hw); err != nil {
		return fmt.Errorf("log %s: checkpoint the high watermark: %w", l.dir, err)
	}
	l.hwSaved = hw
	return nil
}

// loadHighWatermark restores the owner's high watermark from its
// checkpoint at Open (clamped to the recovered log): a log that was
// replicated reopens with it owned, so reads stay below what was known to
// be committed until the owner says more.
func (l *Log) loadHighWatermark() error {
	l.hwSaved = -1
	hw, ok, err := readOffsetCheckpoint(l.st.fs, l.dir, highWatermarkFile)
	if err != nil || !ok {
		return err
	}
	l.hwSaved = hw
	l.ownHW.Store(min(max(hw, l.logStart.Load()), l.leo.Load()))
	l.hwOwned.Store(true)
	return nil
}

// clampOwnedHW keeps the owner's high watermark within [start, end] after
// the log end moved back or the log restarted. Caller holds appendMu.
func (l *Log) clampOwnedHW(start, end int64) {
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	l.ownHW.Store(min(max(l.ownHW.Load(), start), end))
}

// Closed reports whether the log was closed (or deleted): a waiter on
// Changed stops then, since the channel stays closed for good.
func (l *Log) Closed() bool { return l.isClosed.Load() }

// Wake wakes every long poll waiting on Changed, for an owner whose own
// state (a role, an ISR) changed what a waiter should see.
func (l *Log) Wake() { l.changed.fire() }

// DurableOffset is the end of the fsynced prefix: every offset below it
// survives a crash.
func (l *Log) DurableOffset() int64 { return l.durable.Load() }

// Changed returns a channel closed (and then replaced) whenever the high
// watermark advances or the log is truncated, failed or closed. Long-poll
// fetch takes it, rechecks its condition, then waits on it.
func (l *Log) Changed() <-chan struct{} { return l.changed.wait() }

// Size is the total bytes of all segments.
func (l *Log) Size() int64 {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	var n int64
	for _, s := range l.segments {
		n += s.size.Load()
	}
	return n
}

// SegmentCount is the number of segments, including the active one.
func (l *Log) SegmentCount() int {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	return len(l.segments)
}

// SegmentBases returns the base offset of every segment, oldest first; the
// last is the active segment's.
func (l *Log) SegmentBases() []int64 {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	out := make([]int64, len(l.segments))
	for i, s := range l.segments {
		out[i] = s.base
	}
	return out
}

// Stats returns counters and gauges.
func (l *Log) Stats() Stats {
	l.segMu.RLock()
	n := len(l.segments)
	var size int64
	for _, s := range l.segments {
		size += s.size.Load()
	}
	l.segMu.RUnlock()
	return Stats{
		Appends:         l.appends.Load(),
		AppendedBatches: l.appendedBatches.Load(),
		AppendedBytes:   l.appendedBytes.Load(),
		Fsyncs:          l.fsyncs.Load(),
		FsyncNanos:      l.fsyncNanos.Load(),
		Segments:        n,
		Size:            size,
		LogStartOffset:  l.logStart.Load(),
		LogEndOffset:    l.leo.Load(),
		HighWatermark:   l.HighWatermark(),
		CorruptRanges:   len(l.CorruptRanges()),
		UncleanOpen:     l.uncleanOpen,
		IndexFailures:   l.st.health.indexFailures.Load(),
		Failed:          l.failure() != nil,
	}
}

// LeaderEpochs returns the leader-epoch checkpoint entries, oldest first.
func (l *Log) LeaderEpochs() []EpochEntry { return l.epochs.snapshot() }

// LatestEpoch returns the newest leader epoch recorded in the log.
func (l *Log) LatestEpoch() (int32, bool) {
	e, ok := l.epochs.latest()
	return e.Epoch, ok
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch (KIP-101/KIP-320) like
// Kafka: the largest known epoch <= epoch and the offset where the next epoch
// starts, the log end for the latest epoch, or (-1, -1) when the epoch is
// unknown (negative, newer than any recorded, or no epochs recorded).
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return l.epochs.endOffsetFor(epoch, l.leo.Load())
}

// SetOptions applies a dynamic configuration change. Segment size and age
// apply from the next append; switching FlushAlways off releases durable
// waiters and lets the high watermark follow the log end.
func (l *Log) SetOptions(opts Options) error {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	opts.Clock = l.opts.Load().Clock // the flusher's timers run on it
	l.opts.Store(&opts)              // the logger stays the one given to Open
	if !opts.FlushAlways {
		l.raiseHW(l.leo.Load())
		l.settleWaiters()
	}
	l.kickFlusher() // re-arms the interval timer
	return nil
}

// raiseHW moves the high watermark up to hw (never down) and notifies.
func (l *Log) raiseHW(hw int64) {
	for {
		cur := l.hw.Load()
		if hw <= cur {
			return
		}
		if l.hw.CompareAndSwap(cur, hw) {
			l.changed.fire()
			return
		}
	}
}

// failure returns the sticky I/O failure, if any.
func (l *Log) failure() error {
	l.failMu.Lock()
	defer l.failMu.Unlock()
	return l.failErr
}

// fail takes the log offline after an I/O error that may have left the
// files or durability in an unknown state (a failed fsync cannot be retried
// safely: the kernel may have dropped the dirty pages). Reopening recovers.
func (l *Log) fail(err error) error {
	l.failMu.Lock()
	first := l.failErr == nil
	if first {
		l.failErr = fmt.Errorf("%w: %w", ErrFailed, err)
	}
	ferr := l.failErr
	l.failMu.Unlock()
	if first {
		l.logger.Error("log offline after I/O error", "err", err)
		l.settleWaiters()
		l.changed.fire()
	}
	return ferr
}

// snapshot returns the segments, each with a reference the caller releases,
// starting with the one that contains offset (the first segment if offset is
// below it). ok is false if the log is closed.
func (l *Log) snapshot(offset int64) ([]*segment, bool) {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	if len(l.segments) == 0 {
		return nil, false
	}
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].base > offset }) - 1
	if i < 0 {
		i = 0
	}
	out := make([]*segment, 0, len(l.segments)-i)
	for _, s := range l.segments[i:] {
		if !s.tryAcquire() {
			releaseAll(out)
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func releaseAll(segs []*segment) {
	for _, s := range segs {
		s.release()
	}
}

// Sync fsyncs everything appended so far, whatever the flush policy.
func (l *Log) Sync() error {
	if l.isClosed.Load() {
		return ErrClosed
	}
	return l.flushOnce()
}

// releaseLocked drops the log's references to its segments (files close
// when the last reader is done). syncMu and appendMu are held.
func (l *Log) releaseLocked() {
	releaseAll(l.pendingSync)
	l.pendingSync = nil
	l.segMu.Lock()
	segs := l.segments
	l.segments = nil
	l.segMu.Unlock()
	releaseAll(segs)
}

// finishWaiters settles every durability waiter and wakes every change
// waiter for good.
func (l *Log) finishWaiters() {
	l.closeWaiters()
	l.changed.finish()
}

// Close flushes and fsyncs everything, writes the clean-shutdown checkpoint
// and closes the files (readers in flight finish first). Idempotent.
func (l *Log) Close() error {
	l.appendMu.Lock()
	if l.closed {
		l.appendMu.Unlock()
		return nil
	}
	l.closed = true
	l.isClosed.Store(true)
	l.appendMu.Unlock()

	close(l.stop)
	<-l.done

	err := l.flushOnce()
	if err == nil {
		err = l.CheckpointHighWatermark()
	}
	l.syncMu.Lock()
	l.appendMu.Lock()
	if err == nil {
		err = l.failure()
	}
	act := l.active
	if err == nil {
		// Seal-like finish of the active indexes so a clean reopen can trust
		// them: pending entries written, final time entry, all fsynced.
		act.appendTimeEntry()
		err = act.flushIndexes()
		if err == nil {
			err = act.syncAll()
		}
		if err == nil && l.leo.Load() != l.recoveryPoint {
			err = writeOffsetCheckpoint(l.st.fs, l.dir, recoveryPointFile, l.leo.Load())
		}
		if err == nil {
			err = writeCleanState(l.st.fs, l.dir, cleanState{
				ActiveBase: act.base, ActiveSize: act.size.Load(), LogEnd: l.leo.Load(),
			})
		}
	}
	l.releaseLocked()
	l.appendMu.Unlock()
	l.syncMu.Unlock()
	l.finishWaiters()
	if err != nil {
		return fmt.Errorf("close log %s: %w", l.dir, err)
	}
	return nil
}

// Delete closes the log and removes its directory (topic deletion). Readers
// in flight keep their open files until they finish.
func (l *Log) Delete() error {
	cerr := l.Close()
	if err := l.st.fs.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("delete log %s: %w", l.dir, err)
	}
	if cerr != nil && !errors.Is(cerr, ErrFailed) {
		return cerr
	}
	return nil
}

// Hurry starts the next fsync round without waiting out the group-commit
// window: for an append whose durability something waits on serially (a
// transaction's end markers, which hold back the producer's next
// transaction), where sharing the round with appends arriving a little
// later gains nothing. A Hurry that finds no round to cut short leaves its
// token: the next window then goes unwaited once, which only costs that
// round its sharing.
func (l *Log) Hurry() {
	select {
	case l.hurry <- struct{}{}:
	default:
	}
	l.kickFlusher()
}

func (l *Log) kickFlusher() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// runFlusher is the per-Log flusher goroutine: an fsync round on every kick
// (FlushAlways: after each append and for each waiter) and, with an interval
// policy, on a ticker. Appends that land while a round is in progress, or
// while it waits out the group-commit window, are covered by the next round,
// which is how many producers share one fsync.
func (l *Log) runFlusher() {
	defer close(l.done)
	clk := l.opts.Load().Clock // fixed at Open
	var (
		ticker    clock.Ticker
		tickC     <-chan time.Time
		interval  time.Duration
		window    = clk.NewTimer(time.Hour)
		lastRound time.Time
	)
	window.Stop()
	arm := func() {
		o := l.opts.Load()
		if o.FlushAlways {
			if ticker != nil {
				ticker.Stop()
				ticker, tickC, interval = nil, nil, 0
			}
			return
		}
		if ticker == nil || interval != o.FlushInterval {
			if ticker != nil {
				ticker.Stop()
			}
			interval = o.FlushInterval
			ticker = clk.NewTicker(interval)
			tickC = ticker.C()
		}
	}
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
		window.Stop()
	}()
	for {
		arm()
		select {
		case <-l.stop:
			return
		case <-l.kick:
		case <-tickC:
		}
		if l.failure() != nil {
			continue
		}
		// A kick left over from appends the last round already covered
		// has nothing to wait for.
		pending := l.durable.Load() < l.leo.Load()
		if o := l.opts.Load(); pending && o.FlushAlways && o.GroupCommitWindow > 0 {
			if wait := o.GroupCommitWindow - clk.Now().Sub(lastRound); wait > 0 {
				window.Reset(wait)
				select {
				case <-l.stop:
					return // Close does the final round itself
				case <-window.C():
				case <-l.hurry:
					window.Stop()
				}
			}
		}
		start, rounds := clk.Now(), l.fsyncs.Load()
		_ = l.flushOnce() // failures are sticky and logged by fail
		if l.fsyncs.Load() != rounds {
			lastRound = start
		}
	}
}

// holds reports whether s is still one of the log's segments.
func (l *Log) holds(s *segment) bool {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	return slices.Contains(l.segments, s)
}

// flushOnce is one fsync round: it snapshots the log end, fsyncs sealed
// segments awaiting it, the directory if segment files were created, and the
// active segment, then advances the durable mark to the snapshot. Appends
// continue while it runs.
func (l *Log) flushOnce() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()

	l.appendMu.Lock()
	if err := l.failure(); err != nil {
		l.appendMu.Unlock()
		return err
	}
	if l.active == nil || len(l.segments) == 0 { // closed
		l.appendMu.Unlock()
		return nil
	}
	target := l.leo.Load()
	appendsAtTarget := l.appends.Load()
	sealed := l.pendingSync
	l.pendingSync = nil
	dirDirty := l.dirDirty
	l.dirDirty = false
	act := l.active
	act.acquire()
	l.appendMu.Unlock()
	defer act.release()
	defer releaseAll(sealed)

	if target <= l.durable.Load() && len(sealed) == 0 && !dirDirty {
		return nil
	}
	start := time.Now()
	err := func() error {
		for _, s := range sealed {
			if err := s.syncAll(); err != nil {
				if errors.Is(err, errFileGone) && !l.holds(s) {
					// Retention or DeleteRecords removed the segment
					// since it was sealed: nothing is left to sync.
					continue
				}
				return err
			}
			s.unsynced.Store(false)
		}
		if dirDirty {
			if err := SyncDir(l.st.fs, l.dir); err != nil {
				return err
			}
		}
		return act.syncData()
	}()
	took := time.Since(start)
	l.fsyncs.Add(1)
	l.fsyncNanos.Add(int64(took))
	if err != nil {
		return l.fail(err)
	}
	if cb := l.opts.Load().OnFsync; cb != nil {
		cb(took, appendsAtTarget-l.appendsFlushed)
	}
	l.appendsFlushed = appendsAtTarget
	// The high watermark first: a waiter registering now sees the durable
	// mark and returns at once, and must find its records readable.
	opts := l.opts.Load()
	if opts.FlushAlways {
		l.raiseHW(target)
	}
	for {
		cur := l.durable.Load()
		if target <= cur || l.durable.CompareAndSwap(cur, target) {
			break
		}
	}
	l.settleWaiters()
	// Persist the recovery point after a roll (every sealed segment is now
	// on disk with its indexes) and otherwise every RecoveryPointInterval:
	// recovery never cuts below it. Written after the waiters are answered,
	// so acknowledgements do not wait for it.
	if target > l.recoveryPoint && (len(sealed) > 0 || opts.Clock.Now().Sub(l.rpWritten) >= opts.RecoveryPointInterval) {
		if err := writeOffsetCheckpoint(l.st.fs, l.dir, recoveryPointFile, target); err != nil {
			return l.fail(err)
		}
		l.recoveryPoint, l.rpWritten = target, opts.Clock.Now()
	}
	return nil
}
