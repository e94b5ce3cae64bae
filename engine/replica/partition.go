package replica

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/topicconfig"
	"github.com/moonmq/moonmq/engine/txn"
)

// Partition is one hosted partition: its log plus the state that must be
// updated atomically with appends.
type Partition struct {
	tp   TopicPartition
	opts Options
	log  *log.Log

	mu         sync.Mutex // serialises appends; guards producers, txnq, snapshotAt, snapshots, cfg, deleted
	producers  *txn.ProducerState
	txnq       map[int64]*txnQueue // transactional appends waiting for verification, by producer (txn.go)
	snapshotAt int64               // offset of the newest producer snapshot on disk; -1 if none
	snapshots  []int64             // offsets of the snapshot files on disk, oldest first (no directory listing on the produce path)
	cfg        topicconfig.Config
	deleted    bool
	// stable is the producer state's view of transactions, published under
	// mu after every change, read without it by lastStable.
	stable atomic.Pointer[txn.StableView]

	// leaderEpoch is the epoch this replica leads (or follows) in, stamped
	// on every batch it appends: partition state, set from the metadata by
	// MakeLeader, BecomeLeader and BecomeFollower.
	leaderEpoch atomic.Int32

	// Replication (replication.go): role is read without a lock on the
	// produce and fetch paths; repMu guards changes to it and isr and
	// leaderID, and serialises the calls into isr.
	role     atomic.Int32 // a role; roleLocal until BecomeLeader with an ISR or BecomeFollower
	repMu    sync.Mutex
	isr      ISR   // the ISR while a replicated leader
	leaderID int32 // the leader while a follower
	// leaderHW is the high watermark of the leader's last fetch answer
	// while a follower (-1: none yet from this leader in this epoch); it
	// gives the follower's lag (FollowerLag). Written under repMu.
	leaderHW atomic.Int64

	heal backoff // retries of Heal while the log is failed; owned by the healer
}

func openPartition(tp TopicPartition, dir string, cfg topicconfig.Config, opts Options) (*Partition, error) {
	l, err := log.Open(dir, logOptions(tp, cfg, opts))
	if err != nil {
		return nil, err
	}
	p := &Partition{tp: tp, opts: opts, log: l, cfg: cfg, leaderID: -1}
	p.leaderHW.Store(-1)
	if opts.Replicated || l.HighWatermarkOwned() {
		// On a cluster, or replicated when it closed (or crashed): until the
		// node says whether it leads, it must not take writes a leader
		// elected meanwhile would truncate, so it starts as a follower of
		// nobody, refusing clients (NOT_LEADER_OR_FOLLOWER: they refresh
		// their metadata).
		p.role.Store(int32(roleFollower))
	}
	if err := p.loadProducers(); err != nil {
		_ = l.Close()
		return nil, err
	}
	return p, nil
}

// close flushes the log and writes a producer snapshot at its end. Appends
// are excluded while it runs, so the snapshot matches the log end.
func (p *Partition) close() error {
	var failed []finished
	defer func() { report(failed) }() // after the lock is released
	p.mu.Lock()
	defer p.mu.Unlock()
	failed = p.failTxnQueues(fmt.Errorf("%w: %s-%d is closing", ErrNotLeader, p.tp.Topic, p.tp.Partition))
	if p.deleted {
		return nil
	}
	var err error
	if p.log.Failure() == nil && p.snapshotAt != p.log.LogEndOffset() {
		var (
			off  int64
			snap []byte
		)
		if off, snap, err = p.snapshotLocked(); err == nil {
			err = p.writeSnapshot(off, snap, true)
		}
	}
	return errors.Join(err, p.log.Close())
}

func logOptions(tp TopicPartition, cfg topicconfig.Config, opts Options) log.Options {
	retention, retentionBytes := nonZero(cfg.Retention), nonZero(cfg.RetentionBytes)
	if !cfg.CleanupDelete {
		// cleanup.policy=compact alone: Kafka never deletes such segments by
		// age or size (schema registries, connect and streams state rely on
		// it); compaction is their only cleanup.
		retention, retentionBytes = -1, -1
	}
	return log.Options{
		SegmentBytes:       cfg.SegmentBytes,
		SegmentAge:         cfg.SegmentAge,
		SegmentJitter:      cfg.SegmentJitter,
		MaxIndexBytes:      cfg.SegmentIndexBytes,
		Retention:          retention,
		RetentionBytes:     retentionBytes,
		IndexIntervalBytes: nonZero(cfg.IndexIntervalBytes),
		MaxMessageBytes:    maxBatchBytes(cfg),
		FlushAlways:        cfg.FlushAlways,
		FlushInterval:      cfg.FlushInterval,
		FlushMessages:      cfg.FlushMessages,
		GroupCommitWindow:  groupCommitWindow(tp, opts),
		FS:                 opts.FS,
		Files:              opts.Files,
		Logger:             opts.Logger.With("topic", tp.Topic, "partition", tp.Partition),
		Clock:              opts.Clock,
		OnFsync:            opts.OnFsync,
	}
}

// nonZero maps Kafka's literal 0 to 1: log.Options treats 0 as "use the
// default" (so a zero Options can never delete data), while for
// retention.ms, retention.bytes and index.interval.bytes Kafka's 0 means
// "as little as possible", which 1 gives.
func nonZero[T int | int64 | time.Duration](v T) T {
	if v == 0 {
		return 1
	}
	return v
}

// healLog retries a failed log and, once it is back, rebuilds the
// producer state: healing drops what was not fsynced, which the state may
// have recorded.
func (p *Partition) healLog() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted {
		return nil
	}
	if err := p.log.Heal(); err != nil {
		return err
	}
	return p.loadProducers()
}

func (p *Partition) setConfig(cfg topicconfig.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg = cfg
	return p.log.SetOptions(logOptions(p.tp, cfg, p.opts))
}

func (p *Partition) delete() error {
	p.mu.Lock()
	p.deleted = true
	failed := p.failTxnQueues(fmt.Errorf("%w: %s-%d was deleted", ErrUnknownPartition, p.tp.Topic, p.tp.Partition))
	p.mu.Unlock()
	report(failed)
	return p.log.Delete()
}

// enforceRetention runs retention on the log. A compact,delete log being
// cleaned is skipped this round (Kafka's LogCleanerManager.deletableLogs):
// retention and the cleaner's segment swap never work on one log at once,
// and retention does not abort a cleaning at every round.
func (p *Partition) enforceRetention() (int, error) {
	p.mu.Lock()
	compact := p.cfg.CleanupCompact && p.cfg.CleanupDelete
	p.mu.Unlock()
	if compact && p.opts.Cleaner != nil {
		resume, ok := p.opts.Cleaner.TryPause(p.tp.Topic, p.tp.Partition)
		if !ok {
			return 0, nil
		}
		defer resume()
	}
	return p.log.EnforceRetention()
}

// MakeLeader sets the epoch this replica leads in: appends are stamped
// with it from now on. It does not change the replication role (see
// BecomeLeader and BecomeFollower).
func (p *Partition) MakeLeader(epoch int32) { p.leaderEpoch.Store(max(epoch, 0)) }

// LeaderEpoch is the epoch this replica leads in.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// TopicPartition names the partition.
func (p *Partition) TopicPartition() TopicPartition { return p.tp }

// ProduceResult is the outcome of an append, in the terms of a Kafka produce response.
type ProduceResult struct {
	BaseOffset     int64
	LogAppendTime  int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset int64
	// Records and Bytes were appended by this call (0 for a deduplicated retry).
	Records, Bytes int
	lastOffset     int64
	// What the append was made as, read under the append lock: whether as
	// a replicated leader (its acks=all wait needs the ISR, whatever the
	// role is by the time the caller waits), in which leader epoch, and
	// on which generation of the log. A wait for replication refuses a
	// result whose epoch or generation is gone: the records may have been
	// truncated and other ones written at the same offsets.
	replicated bool
	epoch      int32
	gen        uint64
}

// Replicated reports whether the append was made by a replicated leader:
// an acks=all produce must wait for the ISR (WaitReplicated), not only the
// leader's fsync, even if the partition lost the leadership since.
func (r ProduceResult) Replicated() bool { return r.replicated }

// Append validates and appends the record batches of one produce request for
// this partition: plain or idempotent batches (transactional ones go through
// AppendTxn). Nothing of a request that fails validation is stored. The
// caller waits for durability with WaitDurable, or WaitReplicated for
// acks=all.
func (p *Partition) Append(records []byte) (ProduceResult, error) {
	return p.append(records, false)
}

// AppendDeferred is Append for a coordinator's own records whose loss in a
// crash replay repairs (a transaction's Complete* record): it starts no
// fsync round (log.AppendDeferred), so the next append's round, or the
// next wait for durability, covers it. The caller must not acknowledge
// anything on its durability without waiting for it (WaitDurable starts a
// round).
func (p *Partition) AppendDeferred(records []byte) (ProduceResult, error) {
	return p.append(records, true)
}

func (p *Partition) append(records []byte, deferred bool) (ProduceResult, error) {
	batches, headers, err := p.validate(records)
	if err != nil {
		return ProduceResult{}, err
	}
	hs := make([]batch.Header, len(headers))
	for i, h := range headers {
		switch {
		case h.IsControl():
			return ProduceResult{}, fmt.Errorf("%w: control batches are written by the broker, not by clients", batch.ErrInvalidRecord)
		case h.IsTransactional():
			return ProduceResult{}, fmt.Errorf("%w: a transactional batch is appended as part of its transaction", txn.ErrInvalidTxnState)
		case h.ProducerID >= 0 && len(batches) != 1:
			// A produce request carries one batch per partition in every
			// client we know; several are accepted, but idempotence is judged
			// per batch and a duplicate must be the whole request. Checking
			// every batch, not only the first, keeps an idempotent batch from
			// skipping the sequence check behind a plain one.
			return ProduceResult{}, fmt.Errorf("%w: idempotent produce must carry exactly one batch", batch.ErrInvalidRecord)
		}
		hs[i] = h.Header
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	replicated, err := p.leaderWrite() // under p.mu: no role change during the append
	if err != nil {
		return ProduceResult{}, err
	}
	appendTime := int64(-1)
	if p.cfg.LogAppendTime {
		appendTime = p.opts.Clock.Now().UnixMilli()
	}
	return p.appendLocked(batches, hs, writeSpec{origin: txn.OriginClient, appendTime: appendTime, deferred: deferred}, replicated)
}

// validate splits a produce's records into batches and applies the topic's
// rules to them: batch format and size, timestamps, compression.type.
// Validation, which decodes compressed payloads, and recompression run
// outside the append lock, so that producers to one partition do not queue
// behind each other's.
func (p *Partition) validate(records []byte) ([][]byte, []batch.Validated, error) {
	p.mu.Lock()
	deleted, cfg := p.deleted, p.cfg
	p.mu.Unlock()
	if deleted {
		return nil, nil, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, p.tp.Topic, p.tp.Partition)
	}
	maxBatch := maxBatchBytes(cfg)
	batches, headers, err := batch.Split(records, maxBatch)
	if err != nil {
		return nil, nil, err
	}
	if !cfg.LogAppendTime {
		if err := checkTimestamps(headers, p.opts.Clock.Now().UnixMilli(), cfg); err != nil {
			return nil, nil, err
		}
	}
	if cfg.CleanupCompact {
		if err := checkKeys(batches, headers, p.tp); err != nil {
			return nil, nil, err
		}
	}
	if err := recompress(batches, headers, cfg, maxBatch); err != nil {
		return nil, nil, err
	}
	return batches, headers, nil
}

// checkTimestamps applies message.timestamp.before.max.ms and
// message.timestamp.after.max.ms to every record of a CreateTime topic, as
// Kafka's LogValidator does (records without a timestamp are not checked).
func checkTimestamps(headers []batch.Validated, now int64, cfg topicconfig.Config) error {
	lo, hi := sub(now, cfg.TimestampBeforeMaxMs), add(now, cfg.TimestampAfterMaxMs)
	for i, h := range headers {
		if h.MinTimestamp == batch.NoTimestamp && h.MaxTimestamp == batch.NoTimestamp {
			continue
		}
		var ts, by, limit int64
		var key, side string
		switch {
		case ahead(now, h.MinTimestamp) > cfg.TimestampBeforeMaxMs:
			ts, by, limit = h.MinTimestamp, ahead(now, h.MinTimestamp), cfg.TimestampBeforeMaxMs
			key, side = topicconfig.MessageTimestampBeforeMaxMs, "before"
		case ahead(h.MaxTimestamp, now) > cfg.TimestampAfterMaxMs:
			ts, by, limit = h.MaxTimestamp, ahead(h.MaxTimestamp, now), cfg.TimestampAfterMaxMs
			key, side = topicconfig.MessageTimestampAfterMaxMs, "after"
		default:
			continue
		}
		return fmt.Errorf("%w: batch %d has a record with timestamp %d, %d ms %s the broker's clock (%d) where %s allows %d: "+
			"the timestamp should be within [%d, %d]", ErrInvalidTimestamp, i, ts, by, side, now, key, limit, lo, hi)
	}
	return nil
}

// ahead is how far a is ahead of b (a-b), 0 when it is not, saturating at
// math.MaxInt64 instead of overflowing for far-off timestamps.
func ahead(a, b int64) int64 {
	if a <= b {
		return 0
	}
	if d := a - b; d > 0 {
		return d
	}
	return math.MaxInt64
}

func sub(a, b int64) int64 {
	if b > 0 && a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

func add(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// maxBatchBytes is the largest batch a topic accepts, as the log enforces
// it: max.message.bytes, with 0 meaning the log's default (log.Options'
// zero values are defaults, so a zero never refuses everything). Split,
// recompression and the log all use this one value.
func maxBatchBytes(cfg topicconfig.Config) int {
	if cfg.MaxMessageBytes <= 0 {
		return log.DefaultMaxMessageBytes
	}
	return cfg.MaxMessageBytes
}

// codecs maps compression.type to the codec batches are stored with.
var codecs = map[string]int8{
	topicconfig.CompressionUncompressed: batch.CompressionNone,
	topicconfig.CompressionGzip:         batch.CompressionGzip,
	topicconfig.CompressionSnappy:       batch.CompressionSnappy,
	topicconfig.CompressionLZ4:          batch.CompressionLZ4,
	topicconfig.CompressionZstd:         batch.CompressionZstd,
}

// recompress applies compression.type: unless it is producer, every batch
// in another codec is recompressed in place of the producer's, and must
// still fit max.message.bytes (Kafka checks the size again after
// recompression too).
func recompress(batches [][]byte, headers []batch.Validated, cfg topicconfig.Config, maxBatch int) error {
	codec, ok := codecs[cfg.Compression]
	if !ok {
		return nil // producer
	}
	// The decoded records are held in memory while they are re-encoded:
	// bound them by what could still fit max.message.bytes. Uncompressed,
	// that is max.message.bytes itself; compressed, allow a 16x ratio (far
	// above what producers' batches reach) rather than the 256 MiB any
	// batch may decode to, which a few tiny hostile batches at once would
	// turn into gigabytes.
	maxDecoded := maxBatch - batch.HeaderSize
	if codec != batch.CompressionNone {
		maxDecoded = 16 * maxBatch
	}
	for i, b := range batches {
		if headers[i].Compression() == codec {
			continue
		}
		nb, err := batch.Recompress(b, codec, cfg.CompressionLevel, maxDecoded)
		if errors.Is(err, batch.ErrTooLarge) {
			return fmt.Errorf("batch %d cannot be recompressed with %s within max.message.bytes (%d): %w",
				i, cfg.Compression, maxBatch, err)
		}
		if err != nil {
			return fmt.Errorf("batch %d: %w", i, err)
		}
		if len(nb) > maxBatch {
			return fmt.Errorf("%w: batch %d is %d bytes recompressed with %s, the limit (max.message.bytes) is %d",
				batch.ErrTooLarge, i, len(nb), cfg.Compression, maxBatch)
		}
		h, err := batch.ParseHeader(nb)
		if err != nil {
			return fmt.Errorf("batch %d recompressed: %w", i, err)
		}
		batches[i], headers[i].Header = nb, h
	}
	return nil
}

// snapshotAtRoll writes the producer snapshot at offset, the log end before
// the append that rolled, without waiting for the disk (it is on the
// produce path; see writeSnapshot). Caller holds p.mu. A failure costs only
// a longer replay after a crash, so it is logged, not returned.
func (p *Partition) snapshotAtRoll(offset int64) {
	snap, err := p.producers.Snapshot(offset)
	if err == nil {
		err = p.writeSnapshot(offset, snap, false)
	}
	if err != nil {
		p.opts.Logger.Warn("producer snapshot not written; a crash replays more of the log", "topic", p.tp.Topic,
			"partition", p.tp.Partition, "offset", offset, "err", err)
		return
	}
	p.snapshotAt = offset
}

// snapshotIfRolled writes a producer snapshot at the log end when the log
// rolled on its own (segment.ms) since the last one.
func (p *Partition) snapshotIfRolled() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted || p.log.Failure() != nil {
		return
	}
	bases := p.log.SegmentBases()
	if active := bases[len(bases)-1]; p.snapshotAt >= active || p.log.LogEndOffset() == p.snapshotAt {
		return
	}
	p.snapshotAtRoll(p.log.LogEndOffset())
}

// WaitDurable blocks until the appended result is on disk (per the topic's
// flush policy).
func (p *Partition) WaitDurable(ctx context.Context, r ProduceResult) error {
	return p.log.WaitDurable(ctx, r.lastOffset)
}

// NotifyDurable calls fn once the appended result is on disk (per the
// topic's flush policy), or with the error that stops it (see
// log.NotifyDurable: fn runs on the flusher and must not block).
func (p *Partition) NotifyDurable(r ProduceResult, fn func(error)) {
	p.log.NotifyDurable(r.lastOffset, fn)
}

// Read returns stored batches from offset, bounded by maxBytes, never past
// the high watermark.
func (p *Partition) Read(offset int64, maxBytes int) ([]byte, error) {
	return p.log.Read(offset, maxBytes, p.HighWatermark())
}

// groupCommitWindow is the log's group-commit window: the node's, or none
// for a topic Options.NoGroupCommitWindow names.
func groupCommitWindow(tp TopicPartition, opts Options) time.Duration {
	if opts.NoGroupCommitWindow != nil && opts.NoGroupCommitWindow(tp.Topic) {
		return 0
	}
	return opts.GroupCommitWindow
}
