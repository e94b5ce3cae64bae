package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
)

// Open opens (creating if needed) the log in dir and recovers it.
//
// Recovery: if the clean-shutdown checkpoint matches the directory, nothing
// is scanned. Otherwise every segment at or after the recovery point (and
// always the last one) is checksummed batch by batch; at the first torn or
// corrupt batch the segment is truncated and all later segments deleted.
// Indexes of scanned segments are rebuilt; those of trusted segments get a
// cheap sanity check and are rebuilt (by a scan) if missing or stale. The
// recovered state is fsynced before Open returns, so the log end, high
// watermark and durable mark all start at the last valid batch.
func Open(dir string, opts Options) (*Log, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	l := &Log{
		dir:    dir,
		logger: opts.Logger.With("dir", dir),
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	l.opts.Store(&opts)
	start := time.Now()
	clean, err := l.recover()
	if err != nil {
		l.segMu.Lock()
		releaseAll(l.segments)
		l.segments = nil
		l.segMu.Unlock()
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l.logger.Info("log opened", "clean", clean, "segments", len(l.segments),
		"log_start", l.logStart.Load(), "log_end", l.leo.Load(), "took", time.Since(start))
	go l.runFlusher()
	return l, nil
}

// recover builds the in-memory state from the directory. It runs before the
// Log is shared, so it takes no locks.
func (l *Log) recover() (clean bool, err error) {
	opts := l.opts.Load()
	bases, err := l.listSegments()
	if err != nil {
		return false, err
	}

	forceScan := false
	if l.epochs, err = loadEpochCache(l.dir); err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return false, err
		}
		// Rebuild the epochs from every batch's own epoch field.
		l.logger.Warn("leader epoch checkpoint unreadable; rescanning all segments", "err", err)
		l.epochs = &epochCache{dir: l.dir}
		forceScan = true
	}
	logStart, _, err := readOffsetCheckpoint(l.dir, logStartFile)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return false, err
		}
		l.logger.Warn("log start checkpoint unreadable; using the first segment", "err", err)
		logStart = 0
	}
	rp, _, err := readOffsetCheckpoint(l.dir, recoveryPointFile)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return false, err
		}
		l.logger.Warn("recovery point checkpoint unreadable; rescanning all segments", "err", err)
		rp = 0
	}
	cs, hasClean, err := readCleanState(l.dir)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return false, err
	}
	if err != nil || hasClean {
		// Remove the marker durably before anything can be written: a crash
		// after this open must not trust a stale marker.
		if err := os.Remove(filepath.Join(l.dir, cleanFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("remove clean marker: %w", err)
		}
		if err := SyncDir(l.dir); err != nil {
			return false, err
		}
	}

	// Segments entirely below the log start are leftovers of a deletion that
	// a crash interrupted.
	for len(bases) > 1 && bases[1] <= logStart {
		s := &segment{base: bases[0], dir: l.dir}
		if err := s.removeFiles(); err != nil {
			return false, err
		}
		bases = bases[1:]
	}
	if len(bases) == 0 {
		return false, l.recoverEmpty(logStart)
	}
	if bases[0] > logStart {
		logStart = bases[0]
	}

	last := bases[len(bases)-1]
	if hasClean && !forceScan && cs.ActiveBase == last && cs.LogEnd >= last {
		if st, err := os.Stat(filepath.Join(l.dir, segmentFileName(last, logExt))); err == nil && st.Size() == cs.ActiveSize {
			clean = true
		}
	}
	if forceScan {
		rp = 0
	}

	var (
		scanned   []*segment
		leo       int64
		firstTs   int64 = -1
		truncated bool
	)
	for i, base := range bases {
		s, idxOK, err := openSegment(l.dir, base)
		if err != nil {
			return false, err
		}
		l.segments = append(l.segments, s)
		isLast := i == len(bases)-1
		needScan := !idxOK || (!clean && (base >= rp || isLast))
		if !needScan {
			ok, err := s.checkIndexes()
			if err != nil {
				return false, err
			}
			if !ok {
				l.logger.Warn("segment indexes stale; rebuilding", "segment", base)
				needScan = true
			}
		} else if !idxOK {
			l.logger.Warn("segment indexes missing or malformed; rebuilding", "segment", base)
		}
		if needScan {
			res, err := s.scan(opts.IndexIntervalBytes, l.epochs)
			if err != nil {
				return false, err
			}
			if size := s.size.Load(); res.validBytes < size {
				l.logger.Warn("truncating torn or corrupt tail", "segment", base,
					"valid_bytes", res.validBytes, "dropped_bytes", size-res.validBytes, "reason", res.stopReason)
				if err := s.truncateFile(res.validBytes); err != nil {
					return false, err
				}
				truncated = !isLast
			}
			if err := s.flushIndexes(); err != nil {
				return false, err
			}
			scanned = append(scanned, s)
			if isLast || truncated {
				leo, firstTs = res.next, res.firstBatchTs
			} else if err := s.seal(); err != nil {
				return false, err
			}
		} else {
			if err := s.loadIndexState(); err != nil {
				return false, err
			}
			if isLast {
				if err := s.offIdx.load(); err != nil {
					return false, err
				}
				if err := s.timeIdx.load(); err != nil {
					return false, err
				}
				leo = cs.LogEnd
				if firstTs, err = s.firstBatchTimestamp(); err != nil {
					return false, err
				}
			}
		}
		if truncated {
			for _, b := range bases[i+1:] {
				l.logger.Warn("deleting segment after corruption", "segment", b)
				if err := (&segment{base: b, dir: l.dir}).removeFiles(); err != nil {
					return false, err
				}
			}
			break
		}
	}
	l.active = l.segments[len(l.segments)-1]
	if l.active.size.Load() > 0 {
		now := opts.Now()
		l.active.rollStart = now
		if firstTs >= 0 && time.UnixMilli(firstTs).Before(now) {
			l.active.rollStart = time.UnixMilli(firstTs)
		}
	}

	// Make what was recovered durable before serving it as committed.
	for _, s := range scanned {
		if err := s.syncAll(); err != nil {
			return false, err
		}
	}
	if len(scanned) > 0 || truncated {
		if err := SyncDir(l.dir); err != nil {
			return false, err
		}
	}
	l.scannedAtOpen = len(scanned)
	l.recoveryPoint = rp
	if l.active.base != rp {
		if err := writeOffsetCheckpoint(l.dir, recoveryPointFile, l.active.base); err != nil {
			return false, err
		}
		l.recoveryPoint = l.active.base
	}

	if logStart > leo {
		// DeleteRecordsBefore(end) was persisted but a crash lost the tail
		// it covered: everything below the start is gone by definition.
		l.logger.Warn("log start beyond recovered end; restarting empty", "log_start", logStart, "log_end", leo)
		return false, l.resetLocked(logStart)
	}
	l.logStart.Store(logStart)
	l.leo.Store(leo)
	l.hw.Store(leo)
	l.durable.Store(leo)
	changed := l.epochs.truncateFromEnd(leo)
	changed = l.epochs.truncateFromStart(logStart) || changed
	if changed || len(scanned) > 0 {
		if err := l.epochs.persist(); err != nil {
			return false, err
		}
	}
	return clean, nil
}

// recoverEmpty initialises a log with no segments at start.
func (l *Log) recoverEmpty(start int64) error {
	s, err := createSegment(l.dir, start)
	if err != nil {
		return err
	}
	l.segments = []*segment{s}
	l.active = s
	if err := SyncDir(l.dir); err != nil {
		return err
	}
	l.recoveryPoint = start
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
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", l.dir, err)
	}
	logs := map[int64]bool{}
	var indexes []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if strings.HasSuffix(name, tmpSuffix) {
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
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
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
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
	if _, err := s.f.ReadAt(hdr[:], 0); err != nil {
		return -1, fmt.Errorf("read segment %s: %w", s.f.Name(), err)
	}
	h, err := batch.ParseHeader(hdr[:])
	if err != nil {
		return -1, fmt.Errorf("%w: segment %s: %v", ErrCorrupt, s.f.Name(), err)
	}
	return h.MaxTimestamp, nil
}
