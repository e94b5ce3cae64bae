package replica

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/txn"
	"github.com/moonmq/moonmq/engine/vfs"
)

// Producer state snapshots, as Kafka keeps them: <offset>.snapshot in the
// partition directory holds the idempotent-producer state covering exactly
// the batches below offset. One is written whenever the log starts a new
// segment and at a clean close; at open the newest one at or below the log
// end is loaded and the batches after it are replayed, so after any crash
// the last batches of every producer are known again, whatever the segment
// size, and replay costs at most about a segment.
const (
	snapshotExt = ".snapshot"
	// keepSnapshots is how many snapshots are kept: the newest is enough,
	// older ones are a fallback when it is damaged or a truncation (healing)
	// went below it.
	keepSnapshots = 3
	// maxSnapshotBytes bounds what is read from a snapshot file.
	maxSnapshotBytes = 64 << 20
	// legacySnapshotFile is the clean-shutdown snapshot of older releases.
	legacySnapshotFile = "producer-state.json"
)

func snapshotName(offset int64) string { return fmt.Sprintf("%020d%s", offset, snapshotExt) }

// listSnapshots returns the offsets of the snapshot files in dir, oldest first.
func listSnapshots(fsys vfs.FS, dir string) ([]int64, error) {
	es, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []int64
	for _, e := range es {
		base, ok := strings.CutSuffix(e.Name, snapshotExt)
		if !ok || e.IsDir || len(base) != 20 {
			continue
		}
		if off, err := strconv.ParseInt(base, 10, 64); err == nil && off >= 0 {
			out = append(out, off)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// writeSnapshot stores data as the snapshot at offset and prunes the
// oldest beyond keepSnapshots. With durable (a clean close) it is fsynced
// and its name made durable; otherwise (at a roll, on the produce path) it
// is only written and renamed into place: a power cut may lose or tear it,
// which costs a longer replay, never wrong state (its checksum is checked
// at load, and an older snapshot or the log is used instead).
func (p *Partition) writeSnapshot(offset int64, data []byte, durable bool) error {
	dir, fsys := p.log.Dir(), p.opts.FS
	name := snapshotName(offset)
	if durable {
		if err := log.WriteFileAtomic(fsys, dir, name, data); err != nil {
			return fmt.Errorf("write producer snapshot: %w", err)
		}
	} else if err := writeFileNoSync(fsys, filepath.Join(dir, name), data); err != nil {
		return fmt.Errorf("write producer snapshot: %w", err)
	}
	if i, found := slices.BinarySearch(p.snapshots, offset); !found {
		p.snapshots = slices.Insert(p.snapshots, i, offset)
	}
	for len(p.snapshots) > keepSnapshots {
		if err := fsys.Remove(filepath.Join(dir, snapshotName(p.snapshots[0]))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove old producer snapshot: %w", err)
		}
		p.snapshots = p.snapshots[1:]
	}
	return nil
}

// writeFileNoSync writes path through a temporary file and a rename, so a
// reader never sees it half written, without waiting for the disk.
func writeFileNoSync(fsys vfs.FS, path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.Rename(tmp, path)
}

// snapshotLocked takes a snapshot of the producer state as of the log end.
// Caller holds p.mu, so no append moves the log end meanwhile.
func (p *Partition) snapshotLocked() (offset int64, data []byte, err error) {
	offset = p.log.LogEndOffset()
	data, err = p.producers.Snapshot(offset)
	return offset, data, err
}

// loadProducers restores producer state and the aborted-transaction index
// behind it: the newest valid snapshot S at or below the point up to which
// the index is known complete (log.TxnIndexValidTo: the log end after a
// clean close, the recovery point after a crash), then the batches after
// it, through the same producer-state rules a follower applies. Index
// entries at or past that point are cut and re-derived by the replay, which
// is deterministic, so none is lost or doubled. Snapshots past the log end
// (left by a truncation) and damaged ones are deleted. Without any, the
// whole log is replayed. Caller holds p.mu (or has the partition to
// itself).
func (p *Partition) loadProducers() error {
	fsys, dir := p.opts.FS, p.log.Dir()
	leo, start := p.log.LogEndOffset(), p.log.LogStartOffset()
	valid := min(leo, p.log.TxnIndexValidTo())
	p.producers, p.snapshotAt = txn.NewProducerState(), -1
	from := start

	// Older releases wrote one JSON snapshot at a clean shutdown.
	legacy := filepath.Join(dir, legacySnapshotFile)
	if b, err := vfs.ReadFile(fsys, legacy, maxSnapshotBytes); err == nil {
		if st, off, err := txn.LoadSnapshot(b); err == nil && off == leo && off <= valid {
			p.producers, p.snapshotAt, from = st, off, leo
		}
		if err := fsys.Remove(legacy); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", legacy, err)
		}
	}

	offs, err := listSnapshots(fsys, dir)
	if err != nil {
		return err
	}
	p.snapshots = offs
	for i := len(offs) - 1; i >= 0 && p.snapshotAt < 0; i-- {
		off := offs[i]
		if off > valid && off <= leo {
			continue // sound, but the index entries after it must be replayed from further back
		}
		path := filepath.Join(dir, snapshotName(off))
		reason := ""
		if off > leo {
			reason = "beyond the log end"
		} else if b, err := vfs.ReadFile(fsys, path, maxSnapshotBytes); err != nil {
			reason = err.Error()
		} else if st, soff, err := txn.LoadSnapshot(b); err != nil {
			reason = err.Error()
		} else if soff != off {
			reason = fmt.Sprintf("it says offset %d", soff)
		} else {
			p.producers, p.snapshotAt, from = st, off, max(off, start)
			break
		}
		p.opts.Logger.Warn("deleting unusable producer snapshot", "topic", p.tp.Topic, "partition", p.tp.Partition,
			"snapshot", snapshotName(off), "reason", reason)
		if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove producer snapshot: %w", err)
		}
		p.snapshots = slices.Delete(p.snapshots, i, i+1)
	}
	if err := p.log.TruncateAbortedTxns(valid); err != nil {
		return err
	}
	var lost []txn.AbortedTxn
	if from < leo {
		u := p.producers.Begin(txn.OriginReplication)
		err := p.log.VerifiedBatches(from, func(h batch.Header, raw []byte) bool {
			p.stageStored(u, h, raw)
			return true
		})
		if err != nil {
			return err
		}
		for _, a := range u.Aborted() {
			if a.LastOffset >= valid {
				lost = append(lost, a)
			}
		}
		p.producers.Apply(u)
	}
	// Always, even with nothing replayed: it completes the rebuild the
	// truncation above began, so the next open trusts the index again.
	if err := p.log.AddAbortedTxns(toLogAborted(lost)); err != nil {
		return err
	}
	p.publishStable()
	return nil
}
