package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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

	mu        sync.Mutex // serialises appends; guards producers, cfg, deleted
	producers *txn.ProducerState
	cfg       topicconfig.Config
	deleted   bool
}

func openPartition(tp TopicPartition, dir string, cfg topicconfig.Config, opts Options) (*Partition, error) {
	l, err := log.Open(dir, logOptions(tp, cfg, opts))
	if err != nil {
		return nil, err
	}
	p := &Partition{tp: tp, opts: opts, log: l, cfg: cfg}
	if err := p.loadProducers(); err != nil {
		_ = l.Close()
		return nil, err
	}
	return p, nil
}

// producerSnapshotFile holds the idempotent-producer state written at a
// clean close, valid only while the log end is where it was then.
const producerSnapshotFile = "producer-state.json"

// loadProducers restores producer state from the clean-shutdown snapshot
// when it matches the log, and otherwise rebuilds it from the log tail. The
// snapshot is removed once read, so a later crash can never reuse it.
func (p *Partition) loadProducers() error {
	path := filepath.Join(p.log.Dir(), producerSnapshotFile)
	if b, err := os.ReadFile(path); err == nil {
		_ = os.Remove(path)
		st, offset, err := txn.LoadSnapshot(b)
		if err == nil && offset == p.log.LogEndOffset() {
			p.producers = st
			return nil
		}
		p.opts.Logger.Warn("ignoring producer state snapshot", "topic", p.tp.Topic, "partition", p.tp.Partition,
			"snapshot_offset", offset, "log_end", p.log.LogEndOffset(), "err", err)
	}
	p.producers = txn.NewProducerState()
	return p.rebuildProducers()
}

// close flushes the log and writes the producer state snapshot. Appends
// are excluded while it runs, so the snapshot matches the log end.
func (p *Partition) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted {
		return nil
	}
	snap, err := p.producers.Snapshot(p.log.LogEndOffset())
	if err == nil {
		err = log.WriteFileAtomic(p.opts.FS, p.log.Dir(), producerSnapshotFile, snap)
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
		Retention:          retention,
		RetentionBytes:     retentionBytes,
		IndexIntervalBytes: nonZero(cfg.IndexIntervalBytes),
		MaxMessageBytes:    cfg.MaxMessageBytes,
		FlushAlways:        cfg.FlushAlways,
		FlushInterval:      cfg.FlushInterval,
		GroupCommitWindow:  opts.GroupCommitWindow,
		FS:                 opts.FS,
		Files:              opts.Files,
		Logger:             opts.Logger.With("topic", tp.Topic, "partition", tp.Partition),
		Now:                opts.Now,
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

// rebuildProducers replays batch headers so retries that straddle a restart
// are still recognised as duplicates. Only the last two segments are read:
// a producer retries within seconds, so its last batches are there, and
// opening stays proportional to a segment, not to the whole log. A
// producer whose batches all lie further back is unknown after a restart
// and, as in Kafka since KIP-360, may continue at any sequence.
func (p *Partition) rebuildProducers() error {
	from := p.log.LogStartOffset()
	if bases := p.log.SegmentBases(); len(bases) > 2 {
		from = max(from, bases[len(bases)-2])
	}
	return p.log.Batches(from, func(h batch.Header) bool {
		if h.ProducerID >= 0 && !h.IsControl() {
			p.producers.Record(h.ProducerID, h.ProducerEpoch, txn.BatchInfo{
				FirstSeq: h.BaseSequence, LastSeq: txn.LastSeq(h.BaseSequence, h.NumRecords),
				BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), Timestamp: h.MaxTimestamp,
			})
		}
		return true
	})
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
	p.mu.Unlock()
	return p.log.Delete()
}

// TopicPartition names the partition.
func (p *Partition) TopicPartition() TopicPartition { return p.tp }

// Log exposes the partition's log for reads and offsets.
func (p *Partition) Log() *log.Log { return p.log }

// ProduceResult is the outcome of an append, in the terms of a Kafka produce response.
type ProduceResult struct {
	BaseOffset     int64
	LogAppendTime  int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset int64
	// Records and Bytes were appended by this call (0 for a deduplicated retry).
	Records, Bytes int
	lastOffset     int64
}

// Append validates and appends the record batches of one produce request for
// this partition. Nothing of a request that fails validation is stored. The
// caller waits for durability with WaitDurable when the producer asked for an
// acknowledgement.
func (p *Partition) Append(records []byte, leaderEpoch int32) (ProduceResult, error) {
	// Validation, which decodes compressed payloads, runs outside the lock
	// so that producers to one partition do not queue behind each other's.
	p.mu.Lock()
	deleted, maxBytes := p.deleted, p.cfg.MaxMessageBytes
	p.mu.Unlock()
	if deleted {
		return ProduceResult{}, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, p.tp.Topic, p.tp.Partition)
	}
	batches, headers, err := batch.Split(records, maxBytes)
	if err != nil {
		return ProduceResult{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted {
		return ProduceResult{}, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, p.tp.Topic, p.tp.Partition)
	}
	for _, h := range headers {
		switch {
		case h.IsControl():
			return ProduceResult{}, fmt.Errorf("%w: control batches are written by the broker, not by clients", batch.ErrInvalidRecord)
		case h.IsTransactional():
			return ProduceResult{}, fmt.Errorf("%w: transactional batches need a transactional producer", ErrTransactionsUnsupported)
		case h.ProducerID >= 0 && len(batches) != 1:
			// A produce request carries one batch per partition in every
			// client we know; several are accepted, but idempotence is judged
			// per batch and a duplicate must be the whole request. Checking
			// every batch, not only the first, keeps an idempotent batch from
			// skipping the sequence check behind a plain one.
			return ProduceResult{}, fmt.Errorf("%w: idempotent produce must carry exactly one batch", batch.ErrInvalidRecord)
		}
	}
	first := headers[0]
	if first.ProducerID >= 0 {
		dup, err := p.producers.Check(first.ProducerID, first.ProducerEpoch, first.BaseSequence, first.NumRecords)
		if err != nil {
			return ProduceResult{}, err
		}
		if dup != nil {
			appendTime := int64(-1)
			if p.cfg.LogAppendTime {
				appendTime = dup.Timestamp // the broker's stamp, recorded below
			}
			return ProduceResult{BaseOffset: dup.BaseOffset, LogAppendTime: appendTime,
				LogStartOffset: p.log.LogStartOffset(), lastOffset: dup.LastOffset}, nil
		}
	}
	appendTime := int64(-1)
	if p.cfg.LogAppendTime {
		appendTime = p.opts.Now().UnixMilli()
		for _, b := range batches {
			batch.SetLogAppendTime(b, appendTime)
		}
	}
	res, err := p.log.Append(batches, leaderEpoch)
	if err != nil {
		return ProduceResult{}, err
	}
	if first.ProducerID >= 0 {
		ts := first.MaxTimestamp
		if appendTime >= 0 {
			ts = appendTime
		}
		p.producers.Record(first.ProducerID, first.ProducerEpoch, txn.BatchInfo{
			FirstSeq: first.BaseSequence, LastSeq: txn.LastSeq(first.BaseSequence, first.NumRecords),
			BaseOffset: res.BaseOffset, LastOffset: res.LastOffset, Timestamp: ts,
		})
	}
	out := ProduceResult{BaseOffset: res.BaseOffset, LogAppendTime: appendTime,
		LogStartOffset: res.LogStartOffset, lastOffset: res.LastOffset}
	for i, h := range headers {
		out.Records += int(h.NumRecords)
		out.Bytes += len(batches[i])
	}
	return out, nil
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
	return p.log.Read(offset, maxBytes, p.log.HighWatermark())
}
