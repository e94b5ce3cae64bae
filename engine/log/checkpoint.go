package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/moonmq/moonmq/engine/vfs"
)

// Small checkpoint files kept next to the segments. Each is replaced
// atomically (write a temporary file, fsync it, rename it over the old one,
// fsync the directory) so a crash leaves either the old or the new contents.
const (
	logStartFile      = "log-start-offset-checkpoint"
	recoveryPointFile = "recovery-point-checkpoint"
	highWatermarkFile = "high-watermark-checkpoint"
	epochFile         = "leader-epoch-checkpoint"
	missingFile       = "missing-offsets-checkpoint"
	cleanFile         = ".clean"
	tmpSuffix         = ".tmp"

	checkpointVersion = 0
	// maxCheckpointSize bounds what is read from a checkpoint file; real ones
	// are a few hundred bytes.
	maxCheckpointSize = 1 << 20
)

// WriteFileAtomic durably replaces dir/name with data: temp file, fsync,
// rename, fsync of the directory.
func WriteFileAtomic(fsys vfs.FS, dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + tmpSuffix
	if err := writeSynced(fsys, tmp, data); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return SyncDir(fsys, dir)
}

// writeSynced creates (or replaces the contents of) path with data and
// fsyncs it; its name is not made durable.
func writeSynced(fsys vfs.FS, path string, data []byte) error {
	f, err := fsys.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.SyncData(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// SyncDir makes directory entries (created, renamed or removed files) durable.
func SyncDir(fsys vfs.FS, dir string) error {
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// readCheckpoint reads a checkpoint's lines after checking its version line.
// A missing file returns (nil, nil).
func readCheckpoint(fsys vfs.FS, dir, name string) ([]string, error) {
	path := filepath.Join(dir, name)
	data, err := vfs.ReadFile(fsys, path, maxCheckpointSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		if info, serr := fsys.Stat(path); serr == nil && info.Size > maxCheckpointSize {
			return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrCorrupt, path, maxCheckpointSize)
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 || lines[0] != strconv.Itoa(checkpointVersion) {
		return nil, fmt.Errorf("%w: %s: unknown or missing version line", ErrCorrupt, path)
	}
	return lines[1:], nil
}

// parseInts parses a line of space-separated integers, requiring exactly n.
func parseInts(line string, n int) ([]int64, error) {
	fields := strings.Fields(line)
	if len(fields) != n {
		return nil, fmt.Errorf("%w: checkpoint line %q: want %d fields", ErrCorrupt, line, n)
	}
	out := make([]int64, n)
	for i, f := range fields {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: checkpoint line %q: %v", ErrCorrupt, line, err)
		}
		out[i] = v
	}
	return out, nil
}

// readOffsetCheckpoint reads a single-offset checkpoint; ok is false when the
// file does not exist.
func readOffsetCheckpoint(fsys vfs.FS, dir, name string) (off int64, ok bool, err error) {
	lines, err := readCheckpoint(fsys, dir, name)
	if err != nil || lines == nil {
		return 0, false, err
	}
	if len(lines) != 1 {
		return 0, false, fmt.Errorf("%w: %s: want one offset line, have %d", ErrCorrupt, name, len(lines))
	}
	v, err := parseInts(lines[0], 1)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", name, err)
	}
	if v[0] < 0 {
		return 0, false, fmt.Errorf("%w: %s: negative offset %d", ErrCorrupt, name, v[0])
	}
	return v[0], true, nil
}

func writeOffsetCheckpoint(fsys vfs.FS, dir, name string, off int64) error {
	return WriteFileAtomic(fsys, dir, name, fmt.Appendf(nil, "%d\n%d\n", checkpointVersion, off))
}

// cleanState is the clean-shutdown marker's content: the active segment as
// Close left it. Open trusts the log without scanning only if the directory
// still matches it exactly.
type cleanState struct {
	ActiveBase int64
	ActiveSize int64
	LogEnd     int64
}

func readCleanState(fsys vfs.FS, dir string) (cleanState, bool, error) {
	lines, err := readCheckpoint(fsys, dir, cleanFile)
	if err != nil || lines == nil {
		return cleanState{}, false, err
	}
	if len(lines) != 1 {
		return cleanState{}, false, fmt.Errorf("%w: %s: want one line", ErrCorrupt, cleanFile)
	}
	v, err := parseInts(lines[0], 3)
	if err != nil {
		return cleanState{}, false, err
	}
	return cleanState{ActiveBase: v[0], ActiveSize: v[1], LogEnd: v[2]}, true, nil
}

func writeCleanState(fsys vfs.FS, dir string, c cleanState) error {
	return WriteFileAtomic(fsys, dir, cleanFile,
		fmt.Appendf(nil, "%d\n%d %d %d\n", checkpointVersion, c.ActiveBase, c.ActiveSize, c.LogEnd))
}

// EpochEntry records that leader epoch Epoch wrote its first batch at
// StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache is the leader-epoch checkpoint in memory: entries strictly
// increasing in both epoch and start offset. Writers hold Log.appendMu; the
// mutex only lets readers (OffsetForLeaderEpoch) look concurrently.
type epochCache struct {
	fs      vfs.FS
	dir     string
	loaded  bool // read from an existing checkpoint file
	mu      sync.RWMutex
	entries []EpochEntry
}

func loadEpochCache(fsys vfs.FS, dir string) (*epochCache, error) {
	c := &epochCache{fs: fsys, dir: dir}
	lines, err := readCheckpoint(fsys, dir, epochFile)
	if err != nil || lines == nil {
		return c, err
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%w: %s has no entry count", ErrCorrupt, epochFile)
	}
	n, err := parseInts(lines[0], 1)
	if err != nil {
		return nil, err
	}
	if n[0] != int64(len(lines)-1) {
		return nil, fmt.Errorf("%w: %s declares %d entries, has %d", ErrCorrupt, epochFile, n[0], len(lines)-1)
	}
	for _, l := range lines[1:] {
		v, err := parseInts(l, 2)
		if err != nil {
			return nil, err
		}
		e := EpochEntry{Epoch: int32(v[0]), StartOffset: v[1]}
		if v[0] < 0 || v[0] > 1<<31-1 || v[1] < 0 {
			return nil, fmt.Errorf("%w: %s: bad entry %q", ErrCorrupt, epochFile, l)
		}
		if k := len(c.entries); k > 0 && (e.Epoch <= c.entries[k-1].Epoch || e.StartOffset < c.entries[k-1].StartOffset) {
			return nil, fmt.Errorf("%w: %s: entries out of order at %q", ErrCorrupt, epochFile, l)
		}
		c.entries = append(c.entries, e)
	}
	c.loaded = true
	return c, nil
}

func (c *epochCache) persist() error {
	c.mu.RLock()
	buf := fmt.Appendf(nil, "%d\n%d\n", checkpointVersion, len(c.entries))
	for _, e := range c.entries {
		buf = fmt.Appendf(buf, "%d %d\n", e.Epoch, e.StartOffset)
	}
	c.mu.RUnlock()
	if err := WriteFileAtomic(c.fs, c.dir, epochFile, buf); err != nil {
		return fmt.Errorf("write leader epoch checkpoint: %w", err)
	}
	return nil
}

func (c *epochCache) snapshot() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]EpochEntry(nil), c.entries...)
}

func (c *epochCache) latest() (EpochEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// assign records that epoch starts at start, if epoch is newer than the
// latest known one. Entries at or after start belong to a divergent history
// and are dropped first (as Kafka does). Negative epochs are ignored.
func (c *epochCache) assign(epoch int32, start int64) bool {
	if epoch < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := len(c.entries); k > 0 && epoch <= c.entries[k-1].Epoch {
		return false
	}
	for len(c.entries) > 0 && c.entries[len(c.entries)-1].StartOffset >= start {
		c.entries = c.entries[:len(c.entries)-1]
	}
	c.entries = append(c.entries, EpochEntry{Epoch: epoch, StartOffset: start})
	return true
}

// truncateFromEnd drops entries starting at or after end (the new log end).
func (c *epochCache) truncateFromEnd(end int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := len(c.entries)
	for k > 0 && c.entries[k-1].StartOffset >= end {
		k--
	}
	changed := k != len(c.entries)
	c.entries = c.entries[:k]
	return changed
}

// truncateFromStart drops entries wholly below start, keeping the one that
// covers start and moving its start offset up to it.
func (c *epochCache) truncateFromStart(start int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= start {
		i++
	}
	changed := i > 0
	c.entries = c.entries[i:]
	if len(c.entries) > 0 && c.entries[0].StartOffset < start {
		c.entries[0].StartOffset = start
		changed = true
	}
	return changed
}

// replace sets the entries (a healed log takes those it recovered).
func (c *epochCache) replace(entries []EpochEntry) {
	c.mu.Lock()
	c.entries = entries
	c.mu.Unlock()
}

func (c *epochCache) clear() {
	c.mu.Lock()
	c.entries = nil
	c.mu.Unlock()
}

// endOffsetFor answers OffsetForLeaderEpoch exactly as Kafka's
// LeaderEpochFileCache.endOffsetFor: the largest epoch <= requested and the
// start offset of the epoch after it (logEnd for the latest epoch), or
// (-1, -1) when unknown.
func (c *epochCache) endOffsetFor(requested int32, logEnd int64) (int32, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	if requested < 0 || n == 0 {
		return -1, -1
	}
	if c.entries[n-1].Epoch == requested {
		return requested, logEnd
	}
	// First entry with a larger epoch.
	hi := 0
	for hi < n && c.entries[hi].Epoch <= requested {
		hi++
	}
	if hi == n {
		return -1, -1
	}
	if hi == 0 {
		return requested, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

// The missing-offsets checkpoint keeps the ranges recovery found gone from
// flushed data (see Log.missing): nothing else on disk remembers them, and
// without it the next open would serve an empty answer for offsets that
// were acknowledged. One line per range: from, to, segment. An empty list
// removes the file.
func readMissingRanges(fsys vfs.FS, dir string) ([]CorruptRange, error) {
	lines, err := readCheckpoint(fsys, dir, missingFile)
	if err != nil || lines == nil {
		return nil, err
	}
	out := make([]CorruptRange, 0, len(lines))
	for _, line := range lines {
		v, err := parseInts(line, 3)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", missingFile, err)
		}
		if v[0] < 0 || v[1] <= v[0] || v[2] < 0 {
			return nil, fmt.Errorf("%w: %s: bad range %q", ErrCorrupt, missingFile, line)
		}
		out = append(out, missingRange(v[2], v[0], v[1]))
	}
	return out, nil
}

func writeMissingRanges(fsys vfs.FS, dir string, ranges []CorruptRange) error {
	if len(ranges) == 0 {
		err := fsys.Remove(filepath.Join(dir, missingFile))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("remove %s: %w", missingFile, err)
		}
		return SyncDir(fsys, dir)
	}
	b := fmt.Appendf(nil, "%d\n", checkpointVersion)
	for _, m := range ranges {
		b = fmt.Appendf(b, "%d %d %d\n", m.FromOffset, m.ToOffset, m.Segment)
	}
	return WriteFileAtomic(fsys, dir, missingFile, b)
}
