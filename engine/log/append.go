package log

import (
	"fmt"

	"github.com/moonmq/moonmq/engine/batch"
)

// Append appends the batches of one produce request atomically and
// contiguously: they get consecutive base offsets from the log end, the
// given partition leader epoch, and land in the same segment. The caller has
// validated each batch (batch.Validate) and owns the byte slices: Append
// rewrites their base offset and leader epoch fields in place.
//
// Append writes to the page cache only; call WaitDurable with
// result.LastOffset before acknowledging when the policy is FlushAlways. A
// leaderEpoch newer than any recorded is added to the leader-epoch
// checkpoint; a negative epoch is stored in the batches but not recorded.
func (l *Log) Append(batches [][]byte, leaderEpoch int32) (AppendResult, error) {
	return l.append(batches, leaderEpoch, true, nil, true)
}

// AppendDeferred is Append that starts no fsync round: under FlushAlways
// the batches become durable with the next round something else starts
// (another append, a wait for durability, Close). It is for records a crash
// may take back without harm, whose own fsync would be wasted: a
// coordinator's bookkeeping that replaying the records before them rebuilds
// (a transaction's Complete* record after its durable markers).
func (l *Log) AppendDeferred(batches [][]byte, leaderEpoch int32) (AppendResult, error) {
	return l.append(batches, leaderEpoch, true, nil, false)
}

// AppendWith is Append for batches holding abort markers: aborted are
// their aborted-transaction index entries (txnindex.go), each naming as
// LastOffset the offset the append gives its marker (the caller knows it:
// offsets are assigned from the log end it serialises appends against).
// The entries are durable before the markers are written.
func (l *Log) AppendWith(batches [][]byte, leaderEpoch int32, aborted []AbortedTxn) (AppendResult, error) {
	return l.append(batches, leaderEpoch, true, aborted, true)
}

// AppendReplicatedWith is AppendReplicated with the aborted-transaction
// index entries of the abort markers among the batches.
func (l *Log) AppendReplicatedWith(batches [][]byte, aborted []AbortedTxn) (AppendResult, error) {
	return l.append(batches, -1, false, aborted, true)
}

// AppendReplicated appends batches fetched from a partition leader, keeping
// their base offsets and leader epochs. Offsets must increase and the first
// must be at or after the log end (gaps are allowed: compaction leaves them);
// otherwise ErrOutOfOrder. Batches need not satisfy the produce-side count
// rule, only ValidateStored's.
func (l *Log) AppendReplicated(batches [][]byte) (AppendResult, error) {
	return l.append(batches, -1, false, nil, true)
}

func (l *Log) append(batches [][]byte, leaderEpoch int32, assign bool, aborted []AbortedTxn, kick bool) (AppendResult, error) {
	if len(batches) == 0 {
		return AppendResult{}, fmt.Errorf("log: append: %w: no batches", batch.ErrInvalidRecord)
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return AppendResult{}, ErrClosed
	}
	if err := l.failure(); err != nil {
		return AppendResult{}, err
	}
	opts := l.opts.Load()

	var hbuf [4]batch.Header
	hs := hbuf[:0]
	next := l.leo.Load()
	total := int64(0)
	for i, b := range batches {
		h, err := batch.ParseHeader(b)
		if err != nil {
			return AppendResult{}, fmt.Errorf("log: append batch %d: %w", i, err)
		}
		if h.Length < batch.HeaderSize-batch.LengthFieldEnd || h.Size() != len(b) || h.LastOffsetDelta < 0 {
			return AppendResult{}, fmt.Errorf("log: append batch %d: %w: length %d for %d bytes, last offset delta %d",
				i, batch.ErrCorrupt, h.Size(), len(b), h.LastOffsetDelta)
		}
		if assign {
			if len(b) > opts.MaxMessageBytes {
				return AppendResult{}, fmt.Errorf("log: append batch %d: %w: %d bytes, limit %d",
					i, batch.ErrTooLarge, len(b), opts.MaxMessageBytes)
			}
			h.BaseOffset = next
			h.PartitionLeaderEpoch = leaderEpoch
		} else if h.BaseOffset < next {
			return AppendResult{}, fmt.Errorf("%w: batch %d has base offset %d, expected at least %d",
				ErrOutOfOrder, i, h.BaseOffset, next)
		}
		next = h.NextOffset()
		total += int64(len(b))
		hs = append(hs, h)
	}
	first, last := hs[0].BaseOffset, next-1
	if err := checkTxnEntries(aborted, first, last); err != nil {
		return AppendResult{}, err
	}

	act := l.active
	rolled := false
	if l.shouldRoll(act, opts, total, first, last) {
		if err := l.roll(first); err != nil {
			return AppendResult{}, l.fail(err)
		}
		act, rolled = l.active, true
	}
	if act.size.Load() == 0 {
		act.rollStart = opts.Clock.Now()
	}

	if len(aborted) > 0 {
		// Before the markers: every marker that survives a crash has its
		// entry (one whose marker did not is cut at open).
		if err := l.writeTxnEntries(act.base, aborted); err != nil {
			return AppendResult{}, l.fail(err)
		}
	}
	start := act.size.Load()
	pos := start
	f := act.activeFile()
	for i, b := range batches {
		if assign {
			batch.SetBaseOffset(b, hs[i].BaseOffset)
			batch.SetPartitionLeaderEpoch(b, leaderEpoch)
		}
		if _, err := f.WriteAt(b, pos); err != nil {
			// Cut the partial write so the file's bytes stay exactly the
			// published batches; then stop accepting writes until Heal
			// (Kafka takes the log dir offline on any write error).
			if terr := f.Truncate(start); terr != nil {
				err = fmt.Errorf("%w (and truncating back failed: %v)", err, terr)
			}
			return AppendResult{}, l.fail(fmt.Errorf("write segment %s: %w", act.name(), err))
		}
		pos += int64(len(b))
	}

	// Publish: size first (readers may now see the bytes), then index
	// entries (which point below it), then the log end.
	act.size.Store(pos)
	p := start
	epochChanged := false
	for i := range hs {
		act.indexBatch(hs[i], p, opts.IndexIntervalBytes)
		p += int64(hs[i].Size())
		if !assign && l.epochs.assign(hs[i].PartitionLeaderEpoch, hs[i].BaseOffset) {
			epochChanged = true
		}
	}
	if assign && l.epochs.assign(leaderEpoch, first) {
		epochChanged = true
	}
	if err := act.offIdx.maybeFlush(); err != nil {
		return AppendResult{}, l.fail(err)
	}
	if err := act.timeIdx.maybeFlush(); err != nil {
		return AppendResult{}, l.fail(err)
	}
	l.leo.Store(next)
	l.publishTxnEntries(aborted)
	if epochChanged {
		// Rare (leader change). If this write is lost in a crash, recovery
		// rebuilds the entry from the batches' own epochs.
		if err := l.epochs.persist(); err != nil {
			return AppendResult{}, l.fail(err)
		}
	}

	l.appends.Add(1)
	l.appendedBatches.Add(uint64(len(batches)))
	l.appendedBytes.Add(uint64(total))
	if opts.FlushAlways {
		if kick {
			l.kickFlusher()
		}
	} else {
		l.raiseHW(next)
		if flushDue(next, l.durable.Load(), opts) {
			l.kickFlusher()
		}
	}
	return AppendResult{BaseOffset: first, LastOffset: last, LogStartOffset: l.logStart.Load(), Rolled: rolled}, nil
}

// flushDue reports whether, under the interval policy, so many offsets
// (next - durable) wait for the disk that they should not wait for the
// ticker (flush.messages; unset, it never is).
func flushDue(next, durable int64, o *Options) bool {
	return next-durable >= o.FlushMessages
}

// shouldRoll reports whether an append of total bytes covering offsets
// [first, last] must go to a new segment. Caller holds appendMu.
func (l *Log) shouldRoll(act *segment, opts *Options, total, first, last int64) bool {
	size := act.size.Load()
	if last-act.base > maxRelativeOffset {
		// Relative offsets would overflow the index; a new segment based at
		// first fixes it even when the active one is empty (replicated
		// appends after a gap).
		return first != act.base
	}
	if size == 0 {
		return false
	}
	if size+total > opts.SegmentBytes || act.indexFull(opts.MaxIndexBytes) {
		return true
	}
	return act.rollDue(opts.Clock.Now(), opts)
}

// roll seals the active segment and starts a new one at base. An empty
// active segment is replaced rather than kept. Caller holds appendMu.
func (l *Log) roll(base int64) error {
	old := l.active
	if old.size.Load() > 0 {
		if err := old.seal(); err != nil {
			return err
		}
		old.unsynced.Store(true)
		old.acquire()
		l.pendingSync = append(l.pendingSync, old)
	}
	ns, err := createSegment(l.st, base)
	if err != nil {
		return err
	}
	l.segMu.Lock()
	if old.size.Load() == 0 {
		l.segments = l.segments[:len(l.segments)-1]
	}
	l.segments = append(l.segments, ns)
	l.segMu.Unlock()
	if old.size.Load() == 0 {
		if err := old.removeFiles(); err != nil {
			l.logger.Warn("remove empty segment", "base", old.base, "err", err)
		}
		old.release()
	}
	l.active = ns
	l.dirDirty = true
	l.logger.Debug("rolled segment", "base", base, "previous", old.base)
	return nil
}
