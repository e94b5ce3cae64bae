package log

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/moonmq/moonmq/engine/vfs"
)

// Failure returns the I/O error that took the log offline (it wraps
// ErrFailed), or nil while the log accepts appends.
func (l *Log) Failure() error { return l.failure() }

// Heal brings a failed log back online, for when the cause (a full disk,
// too many open files, a transient EIO) has passed. It recovers the
// directory as Open would, on the side, and only if that succeeds swaps the
// result in; otherwise the log stays failed, keeps serving reads, and Heal
// returns what still stops it, so callers retry with a backoff.
//
// What was appended after the last successful fsync is dropped: after a
// failed write or fsync the kernel may have discarded those pages while
// still showing them, so they cannot be trusted to be on disk. Under
// FlushAlways nothing in them was acknowledged; under an interval policy
// they were as exposed as they are to a crash. Readers are excluded while
// the state is swapped. Heal on a log that has not failed does nothing.
func (l *Log) Heal() error {
	// A cleaning's files must not be swept up by the recovery below
	// (recoverCleanerSwap) while it runs.
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	cause := l.failure()
	if cause == nil {
		return nil
	}
	l.truncMu.Lock()
	defer l.truncMu.Unlock()

	// First a cheap check that the cause has passed: recovery rewrites
	// index files and checkpoints in place, so it should only start when
	// it can finish.
	if err := probeWritable(l.st.fs, l.dir); err != nil {
		return fmt.Errorf("heal log %s: the directory still cannot be written: %w", l.dir, err)
	}
	start := time.Now()
	durable := l.durable.Load()
	fresh := &Log{dir: l.dir, st: l.st, logger: l.logger, healFloor: durable}
	fresh.opts.Store(l.opts.Load())
	if _, _, err := fresh.recover(); err != nil {
		fresh.dropSegments(true)
		// Recovery may have rewritten index files under the live segments:
		// stop trusting them (lookups scan) until they are rebuilt.
		l.segMu.RLock()
		for _, s := range l.segments {
			s.indexBad.Store(true)
		}
		l.segMu.RUnlock()
		return fmt.Errorf("heal log %s: %w", l.dir, err)
	}

	// Swap the recovered state in. The old segments' files are the same
	// files, so they stay in the cache for the new ones.
	releaseAll(l.pendingSync)
	l.pendingSync = nil
	l.segMu.Lock()
	old := l.segments
	l.segments, l.missing = fresh.segments, fresh.missing
	l.segMu.Unlock()
	for _, s := range old {
		s.keepFiles.Store(true)
		s.release()
	}
	l.active = fresh.active
	l.dirDirty = false
	l.epochs.replace(fresh.epochs.snapshot())
	l.recoveryPoint, l.rpWritten = fresh.recoveryPoint, fresh.rpWritten
	// Marks no higher than the last good fsync until the cut below: what
	// is above it is not trusted.
	l.logStart.Store(fresh.logStart.Load())
	l.leo.Store(fresh.leo.Load())
	l.hw.Store(min(fresh.hw.Load(), max(durable, fresh.logStart.Load())))
	l.durable.Store(min(fresh.durable.Load(), max(durable, fresh.logStart.Load())))
	l.clampOwnedHW(l.logStart.Load(), l.leo.Load())

	dropped := int64(0)
	if leo := l.leo.Load(); leo > durable && durable >= l.logStart.Load() {
		if err := l.truncateLocked(durable); err != nil {
			return fmt.Errorf("heal log %s: drop what was not fsynced: %w", l.dir, err)
		}
		dropped = leo - l.leo.Load()
	}
	if err := l.loadTxnIndex(false); err != nil {
		return fmt.Errorf("heal log %s: %w", l.dir, err)
	}
	l.rewritten()
	l.failMu.Lock()
	l.failErr = nil
	l.failMu.Unlock()
	l.changed.fire()
	l.logger.Info("log back online", "after", cause, "log_end", l.leo.Load(),
		"dropped_unsynced_offsets", dropped, "took", time.Since(start))
	return nil
}

// probeWritable writes, fsyncs and removes a small file in dir: whether the
// directory can take writes again (a full disk, a failing device).
func probeWritable(fsys vfs.FS, dir string) error {
	path := filepath.Join(dir, ".heal-probe"+tmpSuffix)
	err := writeSynced(fsys, path, make([]byte, 4096))
	if rerr := fsys.Remove(path); err == nil && rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = rerr
	}
	return err
}
