// Package cleaner schedules log compaction: it owns the log cleaner's
// goroutines (--log-cleaner-threads), its I/O budget
// (--log-cleaner-io-max-bytes-per-second, one Throttler shared by every
// thread, as Kafka's) and its key-map memory (--log-cleaner-dedupe-buffer-size,
// divided between the threads, as Kafka's), and decides which partition to
// clean next. The compaction itself (reading segments, the key map, writing
// and swapping cleaned segments, crash safety) is engine/log's Clean; this
// package only calls it, through the Log interface.
//
// The policy is Kafka's LogCleanerManager.grabFilthiestCompactedLog:
// among the partitions whose cleanup.policy includes compact and that are
// not paused, being cleaned or marked uncleanable, a partition is eligible
// when its dirty ratio (dirty bytes over cleanable bytes, below the first
// uncleanable offset) exceeds min.cleanable.dirty.ratio, or when its
// oldest dirty batch is older than max.compaction.lag.ms and it has
// cleanable bytes; the dirtiest eligible partition is cleaned first.
// Choose and Evaluate decide from their arguments alone (time is an
// argument), so table tests drive them without a clock.
//
// Invariants:
//   - Cleaning never runs on the append path: only the manager's own
//     goroutines call Log.Clean, and at most one of them per partition.
//   - A cleaning never reaches the active segment, the high watermark or the
//     last stable offset: FirstUncleanable is their minimum (records above
//     the high watermark may still be truncated, and an open transaction's
//     records may still be aborted).
//   - AbortAndPause returns only once no cleaning of the partition runs, and
//     none starts before its resume is called: truncation and deletion of a
//     partition never overlap a cleaning of it. Log.Clean itself leaves the
//     old or the new segments whenever it stops (engine/log's promise).
//   - Close cancels running cleanings and returns once every goroutine has
//     stopped.
//   - Memory is bounded by the partitions that exist: state of a partition
//     that leaves the Source is dropped on the next pass.
package cleaner

import (
	"context"
	"errors"

	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/topicconfig"
)

// CleanOptions are the arguments of one cleaning and CleanStats what it
// did: engine/log's, so *log.Log satisfies Log as it is.
type (
	CleanOptions = log.CleanOptions
	CleanStats   = log.CleanStats
)

// Log is the compaction core of one partition (engine/log's *Log).
type Log interface {
	// Clean compacts the log below o.FirstUncleanable. It returns ctx's
	// error, promptly, when ctx is cancelled, leaving the log as it was or
	// fully cleaned.
	Clean(ctx context.Context, o CleanOptions) (CleanStats, error)
	// DirtyRatio is Kafka's cleanable ratio: the bytes of the sealed
	// segments from the first dirty offset up to firstUncleanable
	// (cleanableBytes, the dirty bytes) over the bytes of all the sealed
	// segments below it.
	DirtyRatio(firstUncleanable int64) (ratio float64, cleanableBytes int64)
}

// checkpointer is implemented by a Log that persists where its dirty part
// starts (engine/log's CleanedTo, the cleaner checkpoint). Without it, the
// manager uses the end of the last cleaning it ran itself (the log start
// after a restart).
type checkpointer interface {
	CleanedTo() (int64, error)
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Target is one partition the Source offers for cleaning, with what the
// manager needs to decide, read when the Source is called.
type Target struct {
	TopicPartition
	Config topicconfig.Config
	// HighWatermark, LastStable and ActiveBase (the base offset of the
	// active segment) bound what may be cleaned: see FirstUncleanable.
	HighWatermark, LastStable, ActiveBase int64
	// LogStart is the log start offset.
	LogStart int64
	// FirstBatchTimestamp returns the max timestamp of the first batch at
	// or after offset from and below below (ok false: there is none), for
	// max.compaction.lag.ms. Nil: the lag is not enforced for this target.
	FirstBatchTimestamp func(from, below int64) (ts int64, ok bool)
	Log                 Log
}

// Source lists the partitions hosted here. It is called once per pass of
// each cleaner thread; it must be cheap and must not block on a cleaning.
type Source func() []Target

// FirstUncleanable is the first offset a cleaning must leave alone: the
// active segment is never cleaned, nor what is above the high watermark
// (it may be truncated) or the last stable offset (an open transaction's
// records may still be aborted), as Kafka's
// LogCleanerManager.cleanableOffsets.
func FirstUncleanable(hw, lastStable, activeBase int64) int64 {
	return min(hw, lastStable, activeBase)
}

// ErrClosed is returned by a manager that was closed.
var ErrClosed = errors.New("cleaner: closed")
