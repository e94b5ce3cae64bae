package log

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
)

// Open opens (creating if needed) the log in dir and recovers it.
//
// Recovery cuts only the unflushed tail, as Kafka does. The recovery point
// (recovery-point-checkpoint) is an offset below which every batch was
// fsynced; a clean shutdown (the .clean marker, if it still matches the
// directory) means everything was. Segments are scanned batch by batch
// (framing, offsets, CRC) when they may hold unflushed data (not clean, and
// at or past the recovery point, or the last segment) or when one of their
// indexes is missing, malformed or fails its sanity check; the scan rebuilds
// their indexes. What a scan finds wrong is handled by where it is:
//
//   - at or past the recovery point, it is a torn or unfinished write: the
//     segment is truncated there and later segments are deleted, so a torn
//     batch is never served and the log end is the last whole batch;
//   - below the recovery point, it is damage to data that was on disk: a
//     storage fault, never a tail. Nothing is deleted: the damaged bytes are
//     recorded (CorruptRanges), reported at ERROR, and skipped; reads of
//     their offsets fail with ErrCorrupt and every other offset is served.
//
// Derived files are rebuilt from the data and never cause a truncation: a
// missing or malformed index from its own segment, a missing or malformed
// leader-epoch checkpoint from the epochs in every batch header, a missing
// recovery point is taken as "every sealed segment was flushed" (sealed
// segments are fsynced right after each roll). The recovered state is
// fsynced before Open returns, so the log end, high watermark and durable
// mark all start at the last valid batch.
func Open(dir string, opts Options) (*Log, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := opts.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	l := &Log{
		dir:    dir,
		logger: opts.Logger.With("dir", dir),
		kick:   make(chan struct{}, 1),
		hurry:  make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	l.st = &storage{dir: dir, fs: opts.FS, cache: opts.Files, health: &health{logger: l.logger}, opts: l.opts.Load}
	l.opts.Store(&opts)
	l.rewritten()
	start := time.Now()
	clean, created, err := l.recover()
	if err != nil {
		l.dropSegments(false)
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l.uncleanOpen = !clean && !created
	if err := l.loadHighWatermark(); err != nil {
		l.dropSegments(false)
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	if err := l.loadTxnIndex(l.uncleanOpen); err != nil {
		l.dropSegments(false)
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	if created {
		// Not "clean": false, which would read as a crash to recover from.
		l.logger.Debug("log created", "log_start", l.logStart.Load(), "took", time.Since(start))
	} else {
		l.logger.Debug("log opened", "clean", clean, "segments", len(l.segments),
			"log_start", l.logStart.Load(), "log_end", l.leo.Load(), "took", time.Since(start))
	}
	go l.runFlusher()
	return l, nil
}

// dropSegments releases every segment after a failed recovery; keepFiles
// leaves their files in the cache (another state uses them).
func (l *Log) dropSegments(keepFiles bool) {
	l.segMu.Lock()
	for _, s := range l.segments {
		s.keepFiles.Store(keepFiles)
		s.release()
	}
	l.segments = nil
	l.segMu.Unlock()
	l.active = nil
}

// recover builds the in-memory state from the directory. It runs before the
// Log is shared (or, when healing, with every lock held).
func (l *Log) recover() (clean, created bool, err error) {
	opts := l.opts.Load()
	// A cleaning interrupted by a crash: finish its swap or discard it
	// before the segments are listed (cleaner.go).
	if err := recoverCleanerSwap(opts.FS, l.dir); err != nil {
		return false, false, err
	}
	bases, err := l.listSegments()
	if err != nil {
		return false, false, err
	}
	fsys := opts.FS

	epochsTrusted := true
	if l.epochs, err = loadEpochCache(fsys, l.dir); err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return false, false, err
		}
		l.logger.Warn("leader epoch checkpoint unreadable; rebuilding it from the batches", "err", err)
		l.epochs = &epochCache{fs: fsys, dir: l.dir}
		epochsTrusted = false
	} else if !l.epochs.loaded && len(bases) > 0 {
		epochsTrusted = false // missing: rebuilt below if the log has batches
	}
	logStart, _, err := readOffsetCheckpoint(fsys, l.dir, logStartFile)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return false, false, err
		}
		l.logger.Warn("log start checkpoint unreadable; using the first segment", "err", err)
		logStart = 0
	}
	rp, rpOK, err := readOffsetCheckpoint(fsys, l.dir, recoveryPointFile)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return false, false, err
		}
		l.logger.Warn("recovery point checkpoint unreadable", "err", err)
		rpOK = false
	}
	missing, err := readMissingRanges(fsys, l.dir)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return false, false, err
		}
		l.logger.Error("missing-offsets checkpoint unreadable: offsets an earlier recovery found gone may read as empty", "err", err)
		missing = nil
	}
	persistedMissing := len(missing)
	for _, m := range missing {
		l.logger.Error("flushed data missing from the log since an earlier recovery: these offsets are not served",
			"segment", m.Segment, "from_offset", m.FromOffset, "to_offset", m.ToOffset)
	}
	cs, hasClean, err := readCleanState(fsys, l.dir)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return false, false, err
	}
	if err != nil || hasClean {
		// Remove the marker durably before anything can be written: a crash
		// after this open must not trust a stale marker.
		if err := fsys.Remove(filepath.Join(l.dir, cleanFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, false, fmt.Errorf("remove clean marker: %w", err)
		}
		if err := fsys.SyncDir(l.dir); err != nil {
			return false, false, fmt.Errorf("sync dir %s: %w", l.dir, err)
		}
	}

	// Segments entirely below the log start are leftovers of a deletion that
	// a crash interrupted.
	for len(bases) > 1 && bases[1] <= logStart {
		if err := newSegment(l.st, bases[0]).removeFiles(); err != nil {
			return false, false, err
		}
		bases = bases[1:]
	}
	if len(bases) == 0 {
		if persistedMissing > 0 {
			// Nothing is left that they could be missing from; new
			// records get those offsets.
			if err := writeMissingRanges(fsys, l.dir, nil); err != nil {
				return false, false, err
			}
		}
		return false, true, l.recoverEmpty(logStart)
	}
	if bases[0] > logStart {
		logStart = bases[0]
	}

	last := bases[len(bases)-1]
	if hasClean && cs.ActiveBase == last && cs.LogEnd >= last {
		if info, err := fsys.Stat(filepath.Join(l.dir, segmentFileName(last, logExt))); err == nil && info.Size == cs.ActiveSize {
			clean = true
		}
	}
	// knownEnd is the end of what is known to have been on disk: the log
	// end a clean close recorded, else the recovery point. Offsets below it
	// were handed out (and maybe read); they are never given again.
	knownEnd := rp
	switch {
	case clean:
		rp, knownEnd = math.MaxInt64, cs.LogEnd // everything was flushed at close
	case !rpOK:
		// Without the checkpoint, trust what was sealed (it is fsynced in the
		// round right after each roll) and treat only the last segment as a
		// possible tail: a missing derived file must not cost flushed data.
		rp, knownEnd = last, last
		l.logger.Warn("recovery point checkpoint missing; treating sealed segments as flushed", "recovery_point", rp)
	}
	if hasClean {
		// A marker that no longer matches the files still says where the
		// log ended at the close: everything below had been handed out.
		knownEnd = max(knownEnd, cs.LogEnd)
	}
	if l.healFloor > 0 {
		// A heal knows more than the checkpoint: everything below the
		// last good fsync is on disk, acknowledged, and no tail to cut.
		rp, knownEnd = max(rp, l.healFloor), max(knownEnd, l.healFloor)
	}

	var (
		scanned   []*segment
		leo       int64
		firstTs   int64 = -1
		truncated bool
		lastBad   *badRange // the last segment ends in damage: appends go to a new segment
	)
	for i, base := range bases {
		s, idxOK, err := openSegment(l.st, base)
		if err != nil {
			return false, false, err
		}
		l.segments = append(l.segments, s)
		isLast := i == len(bases)-1
		mayHoldTail := !clean && (isLast || bases[i+1] > rp)
		needScan := !idxOK || mayHoldTail
		if !needScan {
			ok, err := s.checkIndexes()
			if err != nil {
				return false, false, err
			}
			if !ok {
				l.logger.Warn("segment indexes stale; rebuilding", "segment", base)
				needScan = true
			}
		} else if !idxOK {
			l.logger.Warn("segment indexes missing or malformed; rebuilding", "segment", base)
		}
		if !needScan {
			if err := s.loadIndexState(); err != nil {
				return false, false, err
			}
			if isLast {
				if err := s.offIdx.load(); err != nil {
					return false, false, err
				}
				if err := s.timeIdx.load(); err != nil {
					return false, false, err
				}
				leo = cs.LogEnd
				if firstTs, err = s.firstBatchTimestamp(); err != nil {
					return false, false, err
				}
			}
			continue
		}

		scanEpochs := l.epochs
		if !epochsTrusted {
			scanEpochs = nil // rebuilt from every segment below
		}
		segEnd := int64(-1)
		if !isLast {
			segEnd = bases[i+1]
		}
		res, err := s.scan(opts.IndexIntervalBytes, scanEpochs, rp, segEnd)
		if err != nil {
			return false, false, err
		}
		if cut, ok := straddlesFloor(res.bad, l.healFloor); ok {
			// A heal: damage runs from fsynced data past the last good
			// fsync. What follows it was never acknowledged, and no batch
			// boundary at the floor is left to cut at, so this segment ends
			// with the damage (appends continue in a new one at the floor)
			// and any later ones go.
			l.logger.Warn("dropping what follows damage that runs past the last good fsync", "segment", base,
				"heal_floor", l.healFloor, "dropped_bytes", s.size.Load()-cut)
			if err := s.truncateFile(cut); err != nil {
				return false, false, err
			}
			for _, b := range bases[i+1:] {
				if err := newSegment(l.st, b).removeFiles(); err != nil {
					return false, false, err
				}
			}
			isLast, segEnd = true, -1
			if res, err = s.scan(opts.IndexIntervalBytes, scanEpochs, rp, segEnd); err != nil {
				return false, false, err
			}
		}
		if n := len(res.bad); isLast && n > 0 && res.bad[n-1].toOffset < 0 {
			// The damage runs to the end of the last segment, so nothing can
			// be appended after it there. It is kept (sealed, reported) and
			// the log continues in a new segment after the last offset known
			// to be flushed.
			b := &res.bad[n-1]
			b.toOffset = max(b.fromOffset, knownEnd, base+1) // a new segment above this one's base
			lastBad = b
		}
		for _, b := range res.bad {
			s.addBad(b)
		}
		if res.tail {
			// Only a tail if nothing after it is below the recovery point
			// (always true unless the checkpoint disagrees with the files).
			later := bases[i+1:]
			if len(later) > 0 && later[0] < rp {
				b := badRange{fromPos: res.validBytes, toPos: s.size.Load(), fromOffset: res.next, toOffset: later[0],
					reason: res.stopReason + " (before segments below the recovery point: not a tail)"}
				s.addBad(b)
				res.tail = false
			} else if size := s.size.Load(); res.validBytes < size {
				l.logger.Warn("truncating torn or unfinished tail", "segment", base,
					"valid_bytes", res.validBytes, "dropped_bytes", size-res.validBytes, "reason", res.stopReason)
				if err := s.truncateFile(res.validBytes); err != nil {
					return false, false, err
				}
				truncated = !isLast
			}
		}
		if err := s.flushIndexes(); err != nil {
			return false, false, err
		}
		scanned = append(scanned, s)
		if isLast || truncated {
			leo, firstTs = res.next, res.firstBatchTs
		}
		if truncated {
			for _, b := range bases[i+1:] {
				l.logger.Warn("deleting segment after the torn tail", "segment", b)
				if err := newSegment(l.st, b).removeFiles(); err != nil {
					return false, false, err
				}
			}
			break
		}
		if isLast {
			break // (also when segments after it were dropped)
		}
		if err := s.seal(); err != nil {
			return false, false, err
		}
	}
	l.active = l.segments[len(l.segments)-1]
	if lastBad == nil && leo < knownEnd && !truncated {
		// The log ends cleanly but short of what was on disk: flushed
		// batches are gone (a device or someone cut the file at a batch
		// boundary). Their offsets are not given again: reads of them
		// answer ErrCorrupt, and appends continue after them.
		if !slices.ContainsFunc(missing, func(m CorruptRange) bool { return m.FromOffset == leo && m.ToOffset == knownEnd }) {
			// (Already known when a crash came before the recovery point moved.)
			missing = append(missing, missingRange(l.active.base, leo, knownEnd))
		}
		l.st.health.missingFound(l.active, leo, knownEnd)
		if err := l.reopenAfterDamage(knownEnd, "flushed batches are missing at its end"); err != nil {
			return false, false, err
		}
		leo, firstTs = knownEnd, -1
	} else if lastBad != nil {
		if err := l.reopenAfterDamage(lastBad.toOffset, "it ends in damaged data"); err != nil {
			return false, false, err
		}
		leo, firstTs = lastBad.toOffset, -1
	} else if err := l.active.pin(); err != nil {
		return false, false, err
	}
	if l.active.size.Load() > 0 {
		now := opts.Clock.Now()
		l.active.rollStart = now
		if firstTs >= 0 && time.UnixMilli(firstTs).Before(now) {
			l.active.rollStart = time.UnixMilli(firstTs)
		}
	}

	// Make what was recovered durable before serving it as committed.
	for _, s := range scanned {
		if err := s.syncAll(); err != nil {
			return false, false, err
		}
	}
	// Ranges found gone now or by an earlier recovery, still in the log;
	// persisted before anything is appended after them, since then
	// nothing else shows they were ever there.
	kept, clipped := clipMissing(missing, logStart, leo)
	if clipped || len(missing) > persistedMissing {
		if err := writeMissingRanges(fsys, l.dir, kept); err != nil {
			return false, false, err
		}
	}
	l.missing = kept
	if len(scanned) > 0 || truncated || lastBad != nil || l.missing != nil {
		if err := fsys.SyncDir(l.dir); err != nil {
			return false, false, fmt.Errorf("sync dir %s: %w", l.dir, err)
		}
	}
	l.scannedAtOpen = len(scanned)

	if logStart > leo {
		// DeleteRecordsBefore(end) was persisted but a crash lost the tail
		// it covered: everything below the start is gone by definition.
		l.logger.Warn("log start beyond recovered end; restarting empty", "log_start", logStart, "log_end", leo)
		return false, false, l.resetLocked(logStart)
	}
	// Everything up to the recovered end is on disk now. A heal cuts what
	// is above its floor next; should it fail, that must not count as
	// flushed meanwhile.
	newRP := leo
	if l.healFloor > 0 {
		newRP = min(leo, l.healFloor)
	}
	if !rpOK || rp != newRP {
		if err := writeOffsetCheckpoint(fsys, l.dir, recoveryPointFile, newRP); err != nil {
			return false, false, err
		}
	}
	l.recoveryPoint = newRP
	l.rpWritten = opts.Clock.Now()
	l.logStart.Store(logStart)
	l.leo.Store(leo)
	l.hw.Store(leo)
	l.durable.Store(leo)
	changed := false
	if !epochsTrusted {
		if err := l.rebuildEpochs(); err != nil {
			return false, false, err
		}
		changed = true
	}
	changed = l.epochs.truncateFromEnd(leo) || changed
	changed = l.epochs.truncateFromStart(logStart) || changed
	if changed || len(scanned) > 0 {
		if err := l.epochs.persist(); err != nil {
			return false, false, err
		}
	}
	return clean, false, nil
}

// straddlesFloor finds damage that starts below a heal's floor (fsynced)
// and ends past it, and returns where its bytes end.
func straddlesFloor(bad []badRange, floor int64) (cut int64, ok bool) {
	if floor <= 0 {
		return 0, false
	}
	for _, b := range bad {
		if b.fromOffset < floor && b.toOffset > floor {
			return b.toPos, true
		}
	}
	return 0, false
}

// reopenAfterDamage seals the last segment, which cannot take appends
// (why), and starts the active segment at base.
func (l *Log) reopenAfterDamage(base int64, why string) error {
	old := l.active
	if err := old.seal(); err != nil {
		return err
	}
	ns, err := createSegment(l.st, base)
	if err != nil {
		return err
	}
	l.segments = append(l.segments, ns)
	l.active = ns
	l.logger.Error("appending continues in a new segment: the last one cannot take appends, "+why,
		"damaged_segment", old.base, "new_segment", base)
	return nil
}

// rebuildEpochs recomputes the leader-epoch cache from the epochs stored in
// the batch headers. Epochs never decrease along a log, so a segment whose
// first and last batches carry the same epoch contributes one entry and
// only segments where the epoch changes are walked batch by batch.
func (l *Log) rebuildEpochs() error {
	l.epochs.clear()
	for _, s := range l.segments {
		first, last, ok, err := s.edgeEpochs()
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if first.PartitionLeaderEpoch == last.PartitionLeaderEpoch {
			l.epochs.assign(first.PartitionLeaderEpoch, first.BaseOffset)
			continue
		}
		if err := s.walk(0, s.base, s.size.Load(), func(h batch.Header, _ int64) bool {
			l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
			return true
		}); err != nil {
			return err
		}
	}
	// An empty log has never written a checkpoint: nothing was lost, so
	// that rebuild is not worth an operator's attention.
	level := slog.LevelInfo
	if len(l.epochs.snapshot()) == 0 {
		level = slog.LevelDebug
	}
	l.logger.Log(context.Background(), level, "leader epoch checkpoint rebuilt from the batches", "entries", len(l.epochs.snapshot()))
	return nil
}

// edgeEpochs returns the headers of the segment's first and last batches.
func (s *segment) edgeEpochs() (first, last batch.Header, ok bool, err error) {
	size := s.size.Load()
	if size < batch.HeaderSize {
		return first, last, false, nil
	}
	start, expect := int64(0), s.base
	if _, pos, ok, err := s.offIdx.last(); err != nil {
		return first, last, false, err
	} else if ok && pos < size {
		start = pos
		expect = -1 // unknown; the walk trusts the header there
	}
	haveFirst := false
	err = s.walk(0, s.base, size, func(h batch.Header, _ int64) bool {
		first, haveFirst = h, true
		return false
	})
	if err != nil || !haveFirst {
		return first, last, false, err
	}
	last = first
	if err := s.walk(start, expect, size, func(h batch.Header, _ int64) bool {
		last = h
		return true
	}); err != nil {
		return first, last, false, err
	}
	return first, last, true, nil
}

// recoverEmpty initialises a log with no segments at start.
func (l *Log) recoverEmpty(start int64) error {
	s, err := createSegment(l.st, start)
	if err != nil {
		return err
	}
	l.segments = []*segment{s}
	l.active = s
	if err := l.st.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", l.dir, err)
	}
	l.recoveryPoint = start
	l.rpWritten = l.opts.Load().Clock.Now()
	l.logStart.Store(start)
	l.leo.Store(start)
	l.hw.Store(start)
	l.durable.Store(start)
	if l.epochs.truncateFromEnd(start) {
		return l.epochs.persist()
	}
	return nil
}

// listSegments returns the base offsets of the .log files in the directory,
// sorted, after deleting temporary files and orphan indexes.
func (l *Log) listSegments() ([]int64, error) {
	fsys := l.st.fs
	entries, err := fsys.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", l.dir, err)
	}
	logs := map[int64]bool{}
	var indexes []string
	for _, e := range entries {
		name := e.Name
		if e.IsDir {
			continue
		}
		if strings.HasSuffix(name, tmpSuffix) {
			if err := fsys.Remove(filepath.Join(l.dir, name)); err != nil {
				return nil, fmt.Errorf("remove temporary file: %w", err)
			}
			continue
		}
		base, ext, ok := parseSegmentFileName(name)
		if !ok {
			continue
		}
		if ext == logExt {
			logs[base] = true
		} else {
			indexes = append(indexes, name)
		}
	}
	for _, name := range indexes {
		base, _, _ := parseSegmentFileName(name)
		if !logs[base] {
			if err := fsys.Remove(filepath.Join(l.dir, name)); err != nil {
				return nil, fmt.Errorf("remove orphan index: %w", err)
			}
		}
	}
	bases := make([]int64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// firstBatchTimestamp is the MaxTimestamp of the segment's first batch, or -1.
func (s *segment) firstBatchTimestamp() (int64, error) {
	if s.size.Load() < batch.HeaderSize {
		return -1, nil
	}
	var hdr [batch.HeaderSize]byte
	if err := s.readAt(hdr[:], 0); err != nil {
		return -1, err
	}
	h, err := batch.ParseHeader(hdr[:])
	if err != nil {
		return -1, nil // damaged first batch: age from the clock instead
	}
	return h.MaxTimestamp, nil
}

// scanResult describes a segment after scan.
type scanResult struct {
	validBytes   int64      // where the scan stopped: the end of the last valid batch before a tail
	next         int64      // offset after the last valid batch; base when empty
	firstBatchTs int64      // MaxTimestamp of the first batch; -1 when empty
	tail         bool       // stopped at a torn or unfinished write past the recovery point
	stopReason   string     // why it stopped
	bad          []badRange // damage below the recovery point, skipped
}

// checkBatch validates the header of the batch at pos against what must
// come next: framing, counts, offsets in order and within the segment.
// It returns "" for a well-formed header.
func (s *segment) checkBatch(h batch.Header, pos, fileSize, next int64) string {
	size := int64(batch.LengthFieldEnd) + int64(h.Length)
	switch {
	case h.Length < batch.HeaderSize-batch.LengthFieldEnd:
		return fmt.Sprintf("batch length %d too small", h.Length)
	case size > fileSize-pos:
		return fmt.Sprintf("torn batch: %d bytes declared, %d present", size, fileSize-pos)
	case h.LastOffsetDelta < 0 || h.NumRecords < 0 || int64(h.NumRecords) > int64(h.LastOffsetDelta)+1:
		return fmt.Sprintf("bad counts: %d records, last offset delta %d", h.NumRecords, h.LastOffsetDelta)
	case h.BaseOffset < next:
		return fmt.Sprintf("base offset %d below expected %d", h.BaseOffset, next)
	case h.LastOffset()-s.base > maxRelativeOffset:
		return fmt.Sprintf("offset %d too far from segment base", h.LastOffset())
	}
	return ""
}

// scan checksums the segment batch by batch from the start, rebuilding both
// indexes and the running maxima, and recording leader epochs (when epochs
// is not nil). A bad batch (torn, failing its CRC, or out of offset order)
// whose expected offset is at or past rp is the tail: the scan stops there
// for the caller to truncate. One below rp is damage to flushed data: the
// scan records it, resumes at the next valid batch (or the end of the
// segment, whose successor starts at segEnd; -1 for the last segment) and
// goes on. I/O errors are returned as errors, corruption is not. Caller has
// exclusive access (open, or under the append and truncate locks).
func (s *segment) scan(indexInterval int, epochs *epochCache, rp, segEnd int64) (scanResult, error) {
	res := scanResult{next: s.base, firstBatchTs: -1}
	cf, err := s.logRef.open()
	if err != nil {
		return res, err
	}
	defer s.logRef.release(cf)
	f := cf.f
	fileSize, err := f.Size()
	if err != nil {
		return res, fmt.Errorf("stat segment %s: %w", s.name(), err)
	}
	s.size.Store(fileSize)
	if err := s.offIdx.reset(nil, true); err != nil {
		return res, err
	}
	if err := s.timeIdx.reset(nil, true); err != nil {
		return res, err
	}
	s.maxTs.Store(-1)
	s.maxTsOffset, s.lastTimeEntry, s.bytesSinceIndex = -1, -1, 0

	pos := int64(0)
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, fileSize), scanBufferSize)
	var hdr [batch.HeaderSize]byte
	for pos < fileSize {
		var reason string
		var h batch.Header
		if fileSize-pos < batch.HeaderSize {
			reason = fmt.Sprintf("torn batch header: %d bytes", fileSize-pos)
		} else if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return res, fmt.Errorf("read segment %s at %d: %w", s.name(), pos, err)
		} else if h, err = batch.ParseHeader(hdr[:]); err != nil {
			reason = err.Error()
		} else {
			reason = s.checkBatch(h, pos, fileSize, res.next)
		}
		if reason == "" {
			size := int64(h.Size())
			crc := batch.UpdateChecksum(0, hdr[batch.CRCStart:])
			for rem := size - batch.HeaderSize; rem > 0; {
				n := min(rem, int64(br.Size()))
				p, err := br.Peek(int(n))
				if err != nil {
					return res, fmt.Errorf("read segment %s at %d: %w", s.name(), pos, err)
				}
				crc = batch.UpdateChecksum(crc, p)
				_, _ = br.Discard(int(n))
				rem -= n
			}
			if crc != h.CRC {
				reason = fmt.Sprintf("crc mismatch in the batch at offset %d", h.BaseOffset)
			}
		}
		if reason != "" {
			if res.next >= rp {
				res.tail, res.stopReason = true, reason
				break
			}
			// Flushed data is damaged: skip to the next valid batch.
			claimEnd := int64(-1)
			if fileSize-pos >= batch.HeaderSize {
				claimEnd = rawExtent(hdr[:], pos, fileSize)
			}
			to, toOffset, err := s.resync(f, pos+1, fileSize, res.next, segEnd, claimEnd)
			if err != nil {
				return res, err
			}
			if to < 0 {
				to, toOffset = fileSize, segEnd
			}
			res.bad = append(res.bad, badRange{fromPos: pos, toPos: to, fromOffset: res.next, toOffset: toOffset, reason: reason})
			pos = to
			br.Reset(io.NewSectionReader(f, pos, fileSize-pos))
			if toOffset >= 0 {
				res.next = toOffset
			}
			continue
		}
		if res.firstBatchTs < 0 && pos == 0 {
			res.firstBatchTs = h.MaxTimestamp
		}
		s.indexBatch(h, pos, indexInterval)
		if epochs != nil {
			epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
		}
		pos += int64(h.Size())
		res.next = h.NextOffset()
	}
	res.validBytes = pos
	return res, nil
}

// resync looks for the next valid batch at or after from (and before
// limit) whose base offset is at least minOffset and, when maxOffset >= 0,
// whose offsets stay below it (the next segment's base): a well-formed
// header, sane counts and a matching CRC, so a false match is as unlikely
// as a CRC collision, unless a record's value itself holds a batch (a
// mirroring tool's payload). Such an embedded batch lies inside the
// damaged one, so where the damaged batch's length field still gives its
// extent (claimEnd, the position after it; -1 when unknown), a candidate
// inside it is taken only if it chains on (another well-formed header, or
// the end, follows it; one that does not is never taken, even when nothing
// else is found), and the first candidate at or past claimEnd is taken as
// it is. With the extent unknown, a candidate that chains on is
// preferred over the first one found. Serving an embedded batch would be
// wrong data; marking an intact batch damaged only makes it unavailable.
// It returns the position and base offset, or -1 when there is none.
// Damage to flushed data is rare, so a byte-by-byte search is fine.
func (s *segment) resync(f io.ReaderAt, from, limit, minOffset, maxOffset, claimEnd int64) (pos, base int64, err error) {
	const window = 1 << 20
	buf := make([]byte, window+batch.HeaderSize)
	fallbackPos, fallbackBase := int64(-1), int64(-1)
	var next [batch.HeaderSize]byte
	for start := from; start+batch.HeaderSize <= limit; start += window {
		n := min(int64(len(buf)), limit-start)
		m, err := f.ReadAt(buf[:n], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return -1, -1, fmt.Errorf("read segment %s at %d: %w", s.name(), start, err)
		}
		chunk := buf[:m]
		for i := 0; i+batch.HeaderSize <= len(chunk) && int64(i) < window; i++ {
			if chunk[i+batch.MagicOffset] != batch.Magic {
				continue
			}
			h, err := batch.ParseHeader(chunk[i:])
			p := start + int64(i)
			if err != nil || s.checkBatch(h, p, limit, minOffset) != "" || (maxOffset >= 0 && h.LastOffset() >= maxOffset) {
				continue
			}
			raw := make([]byte, h.Size())
			if _, err := f.ReadAt(raw, p); err != nil {
				continue
			}
			if batch.Checksum(raw[batch.CRCStart:]) != h.CRC {
				continue
			}
			if claimEnd >= 0 && p >= claimEnd {
				return p, h.BaseOffset, nil // past the damaged batch: a real one
			}
			end := p + int64(h.Size())
			chains := end == limit
			if !chains && end+batch.HeaderSize <= limit {
				if _, err := f.ReadAt(next[:], end); err == nil {
					nh, err := batch.ParseHeader(next[:])
					chains = err == nil && s.checkBatch(nh, end, limit, h.NextOffset()) == ""
				}
			}
			if chains {
				return p, h.BaseOffset, nil
			}
			if fallbackPos < 0 && claimEnd < 0 {
				// Only with the extent unknown: inside a known one, a
				// candidate that does not chain on is data of the
				// damaged batch, never taken.
				fallbackPos, fallbackBase = p, h.BaseOffset
			}
		}
		if fallbackPos >= 0 && start+window > fallbackPos+resyncLookahead {
			break // no chained candidate close by: the first one it is
		}
	}
	return fallbackPos, fallbackBase, nil
}

// rawExtent is where the batch whose header bytes are hdr (at pos) ends by
// its length field alone, if that is sane (at least a header, within
// limit): the field is outside the CRC, so it may still hold when the
// rest of the header is damaged. -1 otherwise.
func rawExtent(hdr []byte, pos, limit int64) int64 {
	if len(hdr) < batch.LengthFieldEnd {
		return -1
	}
	size := int64(batch.LengthFieldEnd) + int64(int32(binary.BigEndian.Uint32(hdr[batch.LengthFieldEnd-4:])))
	if size < batch.HeaderSize || size > limit-pos {
		return -1
	}
	return pos + size
}

// resyncLookahead is how far past a first, unchained candidate resync looks
// for one that chains: about the largest batch (an embedded one lies inside
// the damaged batch), so real batches further on are not skipped.
const resyncLookahead = DefaultMaxMessageBytes
