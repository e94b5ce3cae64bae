package log

import (
	"fmt"
	"math"
	"time"
)

// EnforceRetention deletes the oldest sealed segments that breach retention:
// by time (the segment's newest batch timestamp, or its file mtime if it has
// none, is older than Retention by Now) or by size (the log would still hold
// at least RetentionBytes without it). Deletion stops at the first segment
// that breaches neither, never touches the active segment, and never deletes
// data at or above the high watermark. First, a non-empty active segment
// older than SegmentAge is rolled, so low-traffic logs still age out. Readers
// holding a deleted segment finish normally. It runs on a failed log too
// (without the roll), so a full disk can be freed by retention.
func (l *Log) EnforceRetention() (deletedSegments int, err error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	opts := l.opts.Load()
	now := opts.Clock.Now()
	if act := l.active; l.failure() == nil && act.size.Load() > 0 && act.rollDue(now, opts) {
		if err := l.roll(l.leo.Load()); err != nil {
			return 0, l.fail(err)
		}
	}

	l.segMu.RLock()
	segs := append([]*segment(nil), l.segments...)
	l.segMu.RUnlock()
	var total int64
	for _, s := range segs {
		total += s.size.Load()
	}
	hw := l.HighWatermark()
	n := 0
	for i := 0; i < len(segs)-1; i++ {
		s := segs[i]
		if segs[i+1].base > hw {
			break
		}
		breach := opts.RetentionBytes >= 0 && total-s.size.Load() >= opts.RetentionBytes
		if !breach && opts.Retention >= 0 {
			var newest time.Time
			if ts := s.maxTs.Load(); ts >= 0 {
				newest = time.UnixMilli(ts)
			} else if newest, err = s.modTime(); err != nil {
				return 0, err
			}
			breach = now.Sub(newest) > opts.Retention
		}
		if !breach {
			break
		}
		total -= s.size.Load()
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if err := l.deletePrefix(n, segs[n].base); err != nil {
		return n, err
	}
	l.logger.Info("retention deleted segments", "count", n, "log_start", l.logStart.Load())
	return n, nil
}

// DeleteRecordsBefore moves the log start forward to offset (DeleteRecords),
// persisting it, and deletes the segments entirely below it. offset may equal
// the log end; beyond it is ErrOffsetOutOfRange. It returns the new log
// start, unchanged if offset is not above it. It works on a failed log too,
// so an operator can free space on a full disk this way.
func (l *Log) DeleteRecordsBefore(offset int64) (newLogStart int64, err error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	if leo := l.leo.Load(); offset > leo {
		return 0, fmt.Errorf("%w: delete records before %d, log end is %d", ErrOffsetOutOfRange, offset, leo)
	}
	if offset <= l.logStart.Load() {
		return l.logStart.Load(), nil
	}
	l.segMu.RLock()
	n := 0
	for n+1 < len(l.segments) && l.segments[n+1].base <= offset {
		n++
	}
	l.segMu.RUnlock()
	if err := l.deletePrefix(n, offset); err != nil {
		return 0, err
	}
	return offset, nil
}

// deletePrefix removes the first n segments (never the active one), then
// persists newStart as the log start and trims the epoch checkpoint.
// Deleting first frees space before anything is written, so this works on a
// full disk; a crash in between is harmless because Open never starts the
// log below its first segment. Caller holds appendMu.
func (l *Log) deletePrefix(n int, newStart int64) error {
	l.segMu.Lock()
	del := append([]*segment(nil), l.segments[:n]...)
	l.segments = append([]*segment(nil), l.segments[n:]...)
	firstBase := l.segments[0].base
	l.segMu.Unlock()
	if newStart > l.logStart.Load() {
		l.logStart.Store(newStart)
	}
	for _, s := range del {
		if err := s.removeFiles(); err != nil {
			l.logger.Warn("remove deleted segment", "base", s.base, "err", err)
		}
		s.release()
	}
	if len(del) > 0 {
		l.dropTxnEntriesBelow(firstBase)
	}
	if len(del) > 0 {
		if err := SyncDir(l.st.fs, l.dir); err != nil {
			return err
		}
	}
	if err := writeOffsetCheckpoint(l.st.fs, l.dir, logStartFile, l.logStart.Load()); err != nil {
		return fmt.Errorf("persist log start %d: %w", newStart, err)
	}
	if l.epochs.truncateFromStart(l.logStart.Load()) {
		if err := l.epochs.persist(); err != nil {
			return err
		}
	}
	return nil
}

// TruncateTo removes every batch at or after offset (follower truncation to a
// leader's epoch end offset, KIP-101). A batch straddling offset is removed
// whole. The log end becomes offset (or the straddling batch's base), and the
// high watermark and durable mark drop with it; the change is fsynced before
// returning. Reads are excluded while it runs. Offsets below the log start
// truncate everything and restart the log at offset.
func (l *Log) TruncateTo(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, offset)
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err := l.failure(); err != nil {
		return err
	}
	if offset >= l.leo.Load() {
		return nil
	}
	l.truncMu.Lock()
	defer l.truncMu.Unlock()
	if offset < l.logStart.Load() {
		return l.resetLocked(offset)
	}
	if err := l.truncateLocked(offset); err != nil {
		return l.fail(err)
	}
	if err := l.lowerCleanerCheckpoint(offset); err != nil {
		return l.fail(err)
	}
	l.changed.fire()
	l.settleWaiters() // waits for truncated offsets fail now
	return nil
}

func (l *Log) truncateLocked(offset int64) error {
	l.rewritten() // even a cut that fails half way changed the log
	opts := l.opts.Load()
	l.segMu.RLock()
	i := len(l.segments) - 1
	for i > 0 && l.segments[i].base > offset {
		i--
	}
	s := l.segments[i]
	l.segMu.RUnlock()

	// Find the cut: the first batch whose last offset reaches offset.
	newEnd := offset
	cut := s.size.Load()
	if h, pos, _, found, err := s.findBatch(offset); err != nil {
		return err
	} else if found {
		cut = pos
		newEnd = min(offset, h.BaseOffset)
	}
	// Aborted-transaction index entries of markers going away leave
	// memory first (no read_committed fetch is told of an abort whose
	// marker is gone); their files go with their segments, and the cut
	// segment's file is cut after its data (below): a crash in between
	// leaves entries past the log end, which Open cuts, never a surviving
	// marker without its entry.
	l.dropTxnEntriesFrom(newEnd)
	// What the log claims about the offsets going away drops first: a
	// crash after the files are cut but before a recovery point or
	// missing ranges above the new end were lowered would reopen with the
	// removed offsets as flushed data gone missing (ErrCorrupt), covering
	// what a follower appends there next. Lowered claims alone only make
	// recovery scan more. The recovery point goes to the base of the
	// segment cut, not to the new end: the kept data may end below it (a
	// cut in a gap compaction left), and only the scan after the cut
	// knows where.
	if l.recoveryPoint > s.base {
		if err := writeOffsetCheckpoint(l.st.fs, l.dir, recoveryPointFile, s.base); err != nil {
			return err
		}
		l.recoveryPoint = s.base
	}
	if kept, clipped := clipMissing(l.missing, 0, newEnd); clipped {
		if err := writeMissingRanges(l.st.fs, l.dir, kept); err != nil {
			return err
		}
		l.segMu.Lock()
		l.missing = kept
		l.segMu.Unlock()
	}

	l.segMu.Lock()
	del := append([]*segment(nil), l.segments[i+1:]...)
	l.segments = l.segments[:i+1]
	l.segMu.Unlock()
	for _, d := range del {
		if err := d.removeFiles(); err != nil {
			return err
		}
		d.release()
	}
	kept := l.pendingSync[:0]
	for _, p := range l.pendingSync {
		if p.base > s.base {
			p.release()
			continue
		}
		kept = append(kept, p)
	}
	l.pendingSync = kept

	if err := s.truncateFile(cut); err != nil {
		return err
	}
	// Rebuild the (now active again) segment's indexes and maxima. What
	// stays was written before and is not a tail: damage in it is recorded,
	// never cut.
	res, err := s.scan(opts.IndexIntervalBytes, nil, math.MaxInt64, -1)
	if err != nil {
		return err
	}
	for _, b := range res.bad {
		s.addBad(b)
	}
	if err := s.flushIndexes(); err != nil {
		return err
	}
	s.rollStart = time.Time{}
	if s.size.Load() > 0 {
		s.rollStart = opts.Clock.Now()
	}
	if s.pinned == nil {
		if err := s.pin(); err != nil {
			return err
		}
	}
	l.active = s
	if err := s.syncAll(); err != nil {
		return err
	}
	if err := SyncDir(l.st.fs, l.dir); err != nil {
		return err
	}
	if err := l.cutTxnIndexFiles([]int64{s.base}, newEnd); err != nil {
		return err
	}
	// The cut is durable: what is left of the segment is flushed data again.
	if res.next > l.recoveryPoint {
		if err := writeOffsetCheckpoint(l.st.fs, l.dir, recoveryPointFile, res.next); err != nil {
			return err
		}
		l.recoveryPoint = res.next
	}
	l.leo.Store(newEnd)
	l.hw.Store(min(l.hw.Load(), newEnd))
	l.clampOwnedHW(l.logStart.Load(), newEnd)
	l.durable.Store(min(l.durable.Load(), newEnd))
	if l.epochs.truncateFromEnd(newEnd) {
		if err := l.epochs.persist(); err != nil {
			return err
		}
	}
	l.logger.Info("truncated log", "offset", offset, "log_end", newEnd, "removed_segments", len(del))
	return nil
}

// TruncateFullyAndStartAt deletes every segment and restarts the log empty at
// offset, which becomes the log start and end (a follower whose fetch offset
// fell out of the leader's range). The leader-epoch checkpoint is cleared.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: start at %d", ErrOffsetOutOfRange, offset)
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err := l.failure(); err != nil {
		return err
	}
	l.truncMu.Lock()
	defer l.truncMu.Unlock()
	return l.resetLocked(offset)
}

// resetLocked implements TruncateFullyAndStartAt. Caller holds syncMu,
// appendMu and truncMu.
func (l *Log) resetLocked(offset int64) error {
	l.rewritten()
	err := func() error {
		// The missing ranges go first: a crash before the new segment
		// exists must not leave them to cover the new log's records.
		if err := writeMissingRanges(l.st.fs, l.dir, nil); err != nil {
			return err
		}
		l.segMu.Lock()
		del := l.segments
		l.segments = nil
		l.missing = nil
		l.segMu.Unlock()
		l.txnMu.Lock()
		l.aborted = nil // the index files go with the segments
		l.txnMu.Unlock()
		releaseAll(l.pendingSync)
		l.pendingSync = nil
		for _, d := range del {
			if err := d.removeFiles(); err != nil {
				return err
			}
			d.release()
		}
		ns, err := createSegment(l.st, offset)
		if err != nil {
			return err
		}
		l.segMu.Lock()
		l.segments = []*segment{ns}
		l.segMu.Unlock()
		l.active = ns
		if err := SyncDir(l.st.fs, l.dir); err != nil {
			return err
		}
		if err := writeOffsetCheckpoint(l.st.fs, l.dir, logStartFile, offset); err != nil {
			return err
		}
		if err := writeOffsetCheckpoint(l.st.fs, l.dir, recoveryPointFile, offset); err != nil {
			return err
		}
		l.recoveryPoint = offset
		// Every index file went with its segment: nothing is left to
		// rebuild (last, so a crash before keeps a rebuild due).
		if err := l.clearTxnIndexValidTo(); err != nil {
			return err
		}
		l.epochs.clear()
		return l.epochs.persist()
	}()
	if err != nil {
		return l.fail(fmt.Errorf("restart log at %d: %w", offset, err))
	}
	// Everything still waiting for an fsync was deleted unsynced: those
	// waits fail, even though the new durable mark is above them.
	dropped := l.resetWaiters(func() {
		l.logStart.Store(offset)
		l.leo.Store(offset)
		l.hw.Store(offset)
		l.durable.Store(offset)
		l.clampOwnedHW(offset, offset)
	})
	l.dirDirty = false
	l.changed.fire()
	for _, w := range dropped {
		w.fn(fmt.Errorf("%w: offset %d was deleted before it was fsynced (log restarted at %d)", ErrOffsetOutOfRange, w.offset, offset))
	}
	l.logger.Info("log restarted empty", "offset", offset)
	return nil
}
