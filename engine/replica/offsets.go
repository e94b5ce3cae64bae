package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/topicconfig"
)

// The offsets a reader is told and the reads it makes go through the
// partition, which owns them: the high watermark and the last stable offset
// are partition state (a replicated partition will set them from its
// followers, a transactional one hold the LSO back), not the log's. So are
// the rules Kafka's Partition.fetchRecords and fetchOffsetForTimestamp
// apply: which bound an isolation level reads to, and whether the leader
// epoch a client believes in is the partition's.

// Errors of the read and offset operations.
var (
	// ErrInvalidListOffset is a ListOffsets timestamp that is neither a
	// time nor one of the special values (Latest, Earliest, ...).
	ErrInvalidListOffset = errors.New("invalid ListOffsets timestamp")
	// ErrFencedLeaderEpoch: the client's leader epoch is older than the
	// partition's (Kafka FENCED_LEADER_EPOCH): it refreshes its metadata.
	ErrFencedLeaderEpoch = errors.New("fenced leader epoch")
	// ErrUnknownLeaderEpoch: the client's leader epoch is newer than the
	// partition's (Kafka UNKNOWN_LEADER_EPOCH): this replica has not heard
	// of it yet, and the client retries.
	ErrUnknownLeaderEpoch = errors.New("unknown leader epoch")
	// ErrNotReplica: a follower fetch from a broker that is not one of the
	// partition's replicas (Kafka NOT_LEADER_OR_FOLLOWER).
	ErrNotReplica = errors.New("not a replica of the partition")
)

// Special ListOffsets timestamps, as Kafka defines them.
const (
	ListLatest        int64 = -1 // the last offset the isolation level reads to
	ListEarliest      int64 = -2 // the log start
	ListMaxTimestamp  int64 = -3 // the record with the largest timestamp
	ListEarliestLocal int64 = -4 // the local log start (no tiered storage: the log start)
)

// NoLeaderEpoch is the CurrentLeaderEpoch of a request that does not check
// it (older versions, clients without metadata epochs).
const NoLeaderEpoch int32 = -1

// IsolationLevel is what a consumer may read, with Kafka's wire values.
type IsolationLevel int8

const (
	// ReadUncommitted reads up to the high watermark.
	ReadUncommitted IsolationLevel = 0
	// ReadCommitted reads up to the last stable offset: no record of a
	// transaction still open.
	ReadCommitted IsolationLevel = 1
)

// FetchParams is one partition of a Fetch request.
type FetchParams struct {
	Offset int64
	// MaxBytes bounds the batches returned, but the first one comes whole
	// whatever its size, so a consumer passes a batch larger than its
	// limit. Room, when set, is used instead.
	MaxBytes int
	// Room is asked, once and only when there is something to read, where
	// to read to and how much: the batches are appended to buf, bounded
	// by maxBytes as MaxBytes bounds them; ok false reads nothing. A reader
	// whose room comes from shared budgets takes it here, so a fetch at the
	// end of the log holds none.
	Room      func() (buf []byte, maxBytes int, ok bool)
	Isolation IsolationLevel
	// ReplicaID is the fetching broker for a follower fetch, negative for
	// a consumer.
	ReplicaID int32
	// CurrentLeaderEpoch is the epoch the client believes the partition's
	// leader is in, or NoLeaderEpoch.
	CurrentLeaderEpoch int32
}

// AbortedTxn is an aborted transaction whose records a read_committed
// fetch returned, for the consumer to skip.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// FetchResult is what a fetch read and the offsets it read against, all
// taken before the read, so the batches never end past the bounds reported.
type FetchResult struct {
	Batches       []byte
	HighWatermark int64
	// LastStable is the last stable offset: the first offset of the
	// earliest transaction not yet decided below the high watermark, else
	// the high watermark.
	LastStable int64
	LogStart   int64
	// Aborted are, for a ReadCommitted fetch, the aborted transactions
	// whose records the batches may hold (never nil then, possibly
	// empty); nil for ReadUncommitted, as Kafka answers.
	Aborted []AbortedTxn
	// Changed is closed at the next append, truncation or deletion, for
	// long polls; it was taken before the offsets, so a change after them
	// closes it.
	Changed <-chan struct{}
}

// Fetch reads for one partition of a Fetch request. A consumer reads up to
// the high watermark, or the last stable offset with ReadCommitted; an
// offset at or past that bound, up to the log end, reads nothing, and one
// outside the log is log.ErrOffsetOutOfRange (with the offsets still in
// the result). A client's leader epoch older or newer than the partition's
// is ErrFencedLeaderEpoch or ErrUnknownLeaderEpoch, as Kafka checks it.
//
// A follower fetch (ReplicaID >= 0) on a replicated leader reads to the
// committed end and reports the follower's progress to the ISR (see
// replicaFetch). Alone on its node the partition replicates to nobody, so,
// as Kafka answers a broker that is not among the replicas, it refuses one:
// ErrUnknownLeaderEpoch when the request carries an epoch (the follower
// retries), ErrNotReplica otherwise. A follower refuses every fetch with
// ErrNotLeader. A refused fetch reports -1 offsets, as Kafka's do.
func (p *Partition) Fetch(fp FetchParams) (FetchResult, error) {
	refused := FetchResult{HighWatermark: -1, LastStable: -1, LogStart: -1}
	r := p.currentRole()
	if r == roleFollower {
		return refused, p.notLeader()
	}
	if err := p.checkLeaderEpoch(fp.CurrentLeaderEpoch); err != nil {
		return refused, err
	}
	if fp.ReplicaID >= 0 {
		if r == roleLeader {
			return p.replicaFetch(fp)
		}
		err := ErrNotReplica
		if fp.CurrentLeaderEpoch != NoLeaderEpoch {
			err = ErrUnknownLeaderEpoch
		}
		return refused, fmt.Errorf("%w: broker %d fetching %s-%d, which has no followers",
			err, fp.ReplicaID, p.tp.Topic, p.tp.Partition)
	}
	res := FetchResult{Changed: p.log.Changed()} // before the offsets: a change after them closes it
	res.HighWatermark, res.LogStart = p.HighWatermark(), p.log.LogStartOffset()
	res.LastStable = p.lastStable(res.HighWatermark, res.LogStart)
	res, next, err := p.read(res, fp, readBound(fp.Isolation, res.HighWatermark, res.LastStable))
	if fp.Isolation == ReadCommitted && err == nil {
		// The transactions aborted in what was returned: those whose
		// records may lie in [fp.Offset, next), next being the offset after
		// the last batch returned.
		res.Aborted, err = p.abortedIn(fp.Offset, next)
	}
	return res, err
}

// read reads fp's batches below upTo into res, and returns the offset
// after the last whole batch read (fp.Offset when none was).
func (p *Partition) read(res FetchResult, fp FetchParams, upTo int64) (FetchResult, int64, error) {
	if fp.Offset >= upTo || fp.Offset < res.LogStart {
		// Nothing to read: only the answer for the offset (none up to the
		// log end, OFFSET_OUT_OF_RANGE outside the log), and no room taken.
		_, err := p.log.ReadAppend(nil, fp.Offset, 0, upTo)
		return res, fp.Offset, err
	}
	buf, maxBytes, ok := []byte(nil), fp.MaxBytes, true
	if fp.Room != nil {
		buf, maxBytes, ok = fp.Room()
	}
	if !ok {
		return res, fp.Offset, nil
	}
	data, err := p.log.ReadAppend(buf, fp.Offset, maxBytes, upTo)
	if err != nil {
		return res, fp.Offset, err
	}
	res.Batches = data
	next := fp.Offset
	if fp.Isolation == ReadCommitted {
		_ = batch.Iterate(data[len(buf):], func(h batch.Header, _ []byte) bool {
			next = h.LastOffset() + 1
			return true
		})
	}
	return res, next, nil
}

// readBound is the offset a consumer at isolation reads up to.
func readBound(isolation IsolationLevel, hw, lastStable int64) int64 {
	if isolation == ReadCommitted {
		return lastStable
	}
	return hw
}

// checkLeaderEpoch is Kafka's Partition.checkCurrentLeaderEpoch: a request
// naming an epoch must name the partition's.
func (p *Partition) checkLeaderEpoch(current int32) error {
	if current == NoLeaderEpoch {
		return nil
	}
	switch epoch := p.LeaderEpoch(); {
	case current < epoch:
		return fmt.Errorf("%w: %s-%d is in leader epoch %d, the request names %d", ErrFencedLeaderEpoch,
			p.tp.Topic, p.tp.Partition, epoch, current)
	case current > epoch:
		return fmt.Errorf("%w: %s-%d is in leader epoch %d, the request names %d", ErrUnknownLeaderEpoch,
			p.tp.Topic, p.tp.Partition, epoch, current)
	}
	return nil
}

// HighWatermark is the offset below which records are readable. Alone on
// its node the partition's is its log's (the fsynced end under
// flush.policy=always, the log end otherwise); every rule reads it here, so
// a replicated partition holds its own, moved by its followers.
func (p *Partition) HighWatermark() int64 { return p.log.HighWatermark() }

// lastStable is the last stable offset for the high watermark hw and log
// start logStart just read (see txn.StableView.LastStable): never above hw
// nor below logStart.
func (p *Partition) lastStable(hw, logStart int64) int64 {
	v := p.stable.Load()
	if v == nil {
		return hw
	}
	return v.LastStable(hw, logStart)
}

// Stats is the partition's log statistics, with the high watermark the
// partition holds (what readers are told), for /stats and /metrics.
func (p *Partition) Stats() log.Stats {
	st := p.log.Stats()
	st.HighWatermark = p.HighWatermark()
	return st
}

// Failure is why the partition's log is offline (an I/O error), or nil.
func (p *Partition) Failure() error { return p.log.Failure() }

// ListOffsetParams is one partition of a ListOffsets request.
type ListOffsetParams struct {
	// Timestamp is a time in Unix milliseconds or one of the List
	// constants.
	Timestamp          int64
	Isolation          IsolationLevel
	CurrentLeaderEpoch int32 // NoLeaderEpoch: not checked
}

// ListOffsetResult is the answer for one partition of ListOffsets.
type ListOffsetResult struct {
	Offset int64
	// Timestamp is that of the record found, for a time or
	// ListMaxTimestamp; -1 otherwise.
	Timestamp   int64
	LeaderEpoch int32
}

// ListOffset answers ListOffsets for one partition as Kafka's
// fetchOffsetForTimestamp does: ListLatest is the offset the isolation
// level reads to (the last stable offset for ReadCommitted, the high
// watermark otherwise), and a record found for a time or ListMaxTimestamp
// at or past it is not reported (-1, -1), since the consumer could not
// read it yet. The client's leader epoch is checked as Fetch checks it.
func (p *Partition) ListOffset(lp ListOffsetParams) (ListOffsetResult, error) {
	if p.IsFollower() {
		return ListOffsetResult{Offset: -1, Timestamp: -1, LeaderEpoch: -1}, p.notLeader()
	}
	if err := p.checkLeaderEpoch(lp.CurrentLeaderEpoch); err != nil {
		return ListOffsetResult{Offset: -1, Timestamp: -1, LeaderEpoch: -1}, err
	}
	res := ListOffsetResult{Offset: -1, Timestamp: -1, LeaderEpoch: p.LeaderEpoch()}
	hw := p.HighWatermark()
	upTo := readBound(lp.Isolation, hw, p.lastStable(hw, p.log.LogStartOffset()))
	var (
		off, ts int64
		ok      bool
		err     error
	)
	switch lp.Timestamp {
	case ListLatest:
		res.Offset = upTo
		return res, nil
	case ListEarliest, ListEarliestLocal:
		res.Offset = p.log.LogStartOffset()
		return res, nil
	case ListMaxTimestamp:
		off, ts = p.log.MaxTimestamp()
		ok = off >= 0
	default:
		if lp.Timestamp < 0 {
			return res, fmt.Errorf("%w: %d", ErrInvalidListOffset, lp.Timestamp)
		}
		if off, ts, ok, err = p.log.OffsetForTimestamp(lp.Timestamp); err != nil {
			return res, err
		}
	}
	if ok && off < upTo {
		res.Offset, res.Timestamp = off, ts
	}
	return res, nil
}

// DeleteRecords moves the log start to before (-1: the high watermark), as
// Kafka's DeleteRecords does, and returns the new log start. An offset
// below the log start changes nothing; one past the high watermark is
// log.ErrOffsetOutOfRange. Appends and deletion of the topic are excluded
// while it runs.
func (p *Partition) DeleteRecords(before int64) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted {
		return -1, fmt.Errorf("%w: %s-%d was deleted", ErrUnknownPartition, p.tp.Topic, p.tp.Partition)
	}
	if p.IsFollower() {
		return -1, p.notLeader()
	}
	hw := p.HighWatermark()
	if before == -1 {
		before = hw
	}
	if before < 0 || before > hw {
		return -1, fmt.Errorf("%w: delete records before %d, the high watermark is %d", log.ErrOffsetOutOfRange, before, hw)
	}
	return p.log.DeleteRecordsBefore(before)
}

// The group coordinator is the only writer of its internal partitions and
// waits for durability before it answers, so it reads them to the log end
// rather than the high watermark; these serve it.

// WaitOffsetDurable blocks until every record up to offset is on disk.
func (p *Partition) WaitOffsetDurable(ctx context.Context, offset int64) error {
	return p.log.WaitDurable(ctx, offset)
}

// ReadToEnd reads stored batches from offset up to the log end, bounded by
// maxBytes: for the partition's single writer, which has waited for what it
// wrote to be durable.
func (p *Partition) ReadToEnd(offset int64, maxBytes int) ([]byte, error) {
	return p.log.Read(offset, maxBytes, p.log.LogEndOffset())
}

// Bounds returns the log start and the log end.
func (p *Partition) Bounds() (start, end int64) {
	return p.log.LogStartOffset(), p.log.LogEndOffset()
}

// DamagedEnd returns the end of the damaged range holding offset, if it is
// in one (see log.Log.DamagedEnd).
func (p *Partition) DamagedEnd(offset int64) (int64, bool) { return p.log.DamagedEnd(offset) }

// Generation changes whenever the log was rewritten under its readers
// (truncated, healed, restarted empty), so they know to replay.
func (p *Partition) Generation() uint64 { return p.log.Generation() }

// CleanerView is what the log cleaner reads of a partition at each pass.
type CleanerView struct {
	Config topicconfig.Config
	// HighWatermark, LastStable and ActiveBase (the active segment's base
	// offset) bound what a cleaning may reach; LogStart is the log start.
	HighWatermark, LastStable, ActiveBase, LogStart int64
}

// CleanerView returns the partition's configuration and offsets for the
// log cleaner (engine/cleaner), read without the append lock.
func (p *Partition) CleanerView() CleanerView {
	p.mu.Lock()
	cfg := p.cfg
	p.mu.Unlock()
	lso, _ := p.TxnState()
	v := CleanerView{Config: cfg, HighWatermark: p.HighWatermark(), LastStable: lso, LogStart: p.log.LogStartOffset()}
	if bases := p.log.SegmentBases(); len(bases) > 0 {
		v.ActiveBase = bases[len(bases)-1]
	}
	return v
}

// FirstBatchTimestamp is the max timestamp of the first batch that holds
// an offset at or after from and starts below below (ok false: none), for
// the cleaner's max.compaction.lag.ms.
func (p *Partition) FirstBatchTimestamp(from, below int64) (ts int64, ok bool) {
	err := p.log.Batches(from, func(h batch.Header) bool {
		if h.LastOffset() < from {
			return true
		}
		if h.BaseOffset < below {
			ts, ok = h.MaxTimestamp, true
		}
		return false
	})
	if err != nil {
		return 0, false
	}
	return ts, ok
}

// Log is the partition's log, for the log cleaner, which calls its
// compaction (engine/log's Clean) from its own goroutines.
func (p *Partition) Log() *log.Log { return p.log }
