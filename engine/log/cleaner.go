package log

// Log compaction (cleanup.policy=compact): Clean rewrites the sealed
// segments below the caller's bound so that only the latest record of every
// key survives, with Kafka's semantics (LogCleaner.scala, Cleaner):
//
//   - Offsets never change: removed records leave gaps. Record order, batch
//     base offsets, producer id, epoch, base sequence, leader epoch,
//     timestamps and headers are kept; CRCs are recomputed.
//   - The active segment, segments at or past FirstUncleanable, segments not
//     yet fsynced and segments newer than MinCompactionLag are never touched.
//   - A record is removed when a later record of the same key exists below
//     the map's end (the latest wins). Records without a key are kept.
//   - A tombstone (null value) is kept until its batch's delete horizon
//     (KIP-534): the first cleaning that keeps it stamps the batch with
//     horizon = Now + DeleteRetention (DeleteHorizonBit, the horizon in
//     FirstTimestamp, record timestamp deltas rebased on it); a later
//     cleaning at or past the horizon removes it.
//   - Transactional batches of aborted transactions (the .txnindex) are
//     removed. An end-transaction marker is removed once a cleaning reads
//     no batch of its transaction and its delete horizon (stamped by the
//     first cleaning that found it removable) has passed, with its
//     .txnindex entry (Kafka's CleanedTransactionMetadata rules). Other
//     control batches are kept.
//   - A batch left empty is dropped, unless it is the last batch of its
//     producer in the cleaned range, which is kept empty (header only, same
//     offsets and sequence) so producer state survives, as Kafka does.
//   - Compressed batches are decompressed, filtered and recompressed with
//     the same codec; an untouched batch is copied byte for byte.
//
// Passes: the key map has a fixed budget (MapMemory). A pass fills it from
// the first dirty offset (the cleaner checkpoint) until it is full or the
// bound is reached, then rewrites every segment from the log start up to
// that point; the checkpoint then moves to where the map ended. Clean
// repeats passes until the bound is reached.
//
// Crash safety (swap protocol, like Kafka's replaceSegments): a group of
// old segments [base, end) becomes one new segment named base.
//
//  1. <base>.log.cleaned, .index.cleaned, .timeindex.cleaned (and
//     .txnindex.cleaned when the group had aborted transactions) are written
//     and fsynced;
//  2. the manifest cleaner-swap (base, end, has-txnindex) is written
//     atomically;
//  3. under the append lock the index files are renamed .cleaned -> .swap,
//     the .log last; the directory is fsynced. The rename of the .log is the
//     commit point: from here recovery completes the swap;
//  4. readers are excluded (truncMu), the old segments' files are renamed
//     to <name>.deleted, the .swap files are renamed to their final names,
//     the directory is fsynced, the segment list is updated;
//  5. the manifest is removed; the locks are released;
//  6. the .deleted files are removed. Freeing a file's blocks and cached
//     pages costs about 0.2 ms per MiB in the call that frees it (12 ms for
//     a 64 MiB segment on the development machine): a removal, or a
//     rename over the old file, under the append lock stalled every
//     produce to the partition for that long, once per segment. (Kafka
//     too renames replaced segments to .deleted and removes them later.)
//
// Open (recoverCleanerSwap) finishes or discards: with a <base>.log.swap it
// redoes steps 4 and 5; without one it deletes every .cleaned and .swap
// file (the old segments are intact) and the manifest; in both cases it
// deletes the .deleted files. So a crash at any moment leaves the old
// segments or the new one, never a mixture.
//
// Readers hold truncMu shared while they use segments, so the swap, which
// replaces a file under the same name, waits for them and they never see a
// file from the other generation; a reader that comes after sees the new
// segment. Offsets do not move, so a fetch in progress never goes backwards.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/vfs"
)

const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
	// deletedSuffix marks the files a swap replaced, until they are removed
	// after the swap (step 6).
	deletedSuffix = ".deleted"
	// cleanerCheckpointFile holds the offset cleaned up to (the first dirty
	// offset), Kafka's cleaner-offset-checkpoint (one log per directory here).
	cleanerCheckpointFile = "cleaner-offset-checkpoint"
	// cleanerSwapFile is the manifest of a swap in progress.
	cleanerSwapFile = "cleaner-swap"
	// cleanerReadBuffer is the read-ahead of the cleaner's segment scans.
	cleanerReadBuffer = 1 << 20
	// cleanerYieldRecords is how many records of a batch are handled
	// between calls of the Yield hook (a batch may hold thousands).
	cleanerYieldRecords = 128
	// DefaultCleanerMapMemory is Kafka's log.cleaner.dedupe.buffer.size
	// (128 MiB), used when CleanOptions.MapMemory is 0.
	DefaultCleanerMapMemory = 128 << 20
	// cleanerMaxDecoded bounds a compressed batch's decoded records.
	cleanerMaxDecoded = 64 << 20
)

// CleanOptions are the inputs of one cleaning. Time is an input (Now), so
// tests and the scheduler decide what "old" means.
type CleanOptions struct {
	Now              time.Time     // the cleaning's time: delete horizons and the compaction lag
	DeleteRetention  time.Duration // delete.retention.ms: tombstones kept this long after the cleaning that reached them
	MinCompactionLag time.Duration // records newer than this are not cleaned (the head)
	// FirstUncleanable is the caller's bound, min(HW, LSO, active segment
	// base): nothing at or past it is cleaned (only whole segments below it).
	FirstUncleanable int64
	// MapMemory is the byte budget of the key -> offset map (Kafka's
	// dedupe buffer); cleaning runs in passes when the keys exceed it.
	// 0 means DefaultCleanerMapMemory.
	MapMemory int
	// IOLimit, when set, is called before reading or writing n bytes; it
	// blocks to throttle (a rate limiter) or returns an error to abort.
	IOLimit func(ctx context.Context, n int) error
	// Yield, when set, is called often: after every batch, every
	// cleanerYieldRecords records of a batch and every chunk of clearing
	// the key map. A cleaning is CPU-bound for seconds; Yield lets the
	// goroutines serving requests run (engine/cleaner's gives the
	// processor away every 100 µs of work).
	Yield func()
}

// CleanStats describe one Clean.
type CleanStats struct {
	// BytesRead are the bytes of segments read whole: the dirty part once
	// to build the key map, every cleaned segment once to rewrite it (the
	// batch headers walked to find each producer's last batch are not
	// counted). BytesWritten are the cleaned segments' bytes.
	BytesRead, BytesWritten int64
	RecordsRead             int64
	RecordsRemoved          int64
	BatchesRemoved          int64
	SegmentsCleaned         int // old segments replaced
	Passes                  int
	// MapCapacity is how many distinct keys the map holds per pass.
	MapCapacity int
	// CleanedTo is the cleaner checkpoint afterwards (first dirty offset).
	CleanedTo int64
	Duration  time.Duration
}

// cleanerCheckpoint returns the first dirty offset: the persisted offset
// cleaned up to, clamped to the log (a truncation or retention may have
// moved past it).
func (l *Log) cleanerCheckpoint() (int64, error) {
	off, ok, err := readOffsetCheckpoint(l.st.fs, l.dir, cleanerCheckpointFile)
	if err != nil {
		return 0, fmt.Errorf("read cleaner checkpoint: %w", err)
	}
	start, end := l.logStart.Load(), l.leo.Load()
	if !ok || off < start || off > end {
		off = start
	}
	return off, nil
}

// lowerCleanerCheckpoint brings the cleaner checkpoint down to a truncation
// point (Kafka's maybeTruncateCheckpoint): records appended again there are
// dirty. Caller holds appendMu.
func (l *Log) lowerCleanerCheckpoint(offset int64) error {
	off, ok, err := readOffsetCheckpoint(l.st.fs, l.dir, cleanerCheckpointFile)
	if err != nil || !ok || off <= offset {
		return nil // an unreadable checkpoint is ignored by cleanerCheckpoint too
	}
	if err := writeOffsetCheckpoint(l.st.fs, l.dir, cleanerCheckpointFile, offset); err != nil {
		return fmt.Errorf("lower cleaner checkpoint to %d: %w", offset, err)
	}
	return nil
}

// CleanedTo is the cleaner checkpoint: every offset below it has been
// cleaned at least once (the log start when never cleaned).
func (l *Log) CleanedTo() (int64, error) { return l.cleanerCheckpoint() }

// DirtyRatio is Kafka's cleanable ratio: the bytes of the sealed segments
// from the first dirty offset up to firstUncleanable, over the bytes of all
// segments below firstUncleanable. A segment counts from its base: one
// that holds the checkpoint is dirty. cleanableBytes is the numerator.
func (l *Log) DirtyRatio(firstUncleanable int64) (ratio float64, cleanableBytes int64) {
	dirty, err := l.cleanerCheckpoint()
	if err != nil {
		dirty = l.logStart.Load()
	}
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	var total int64
	for i, s := range l.segments {
		if i == len(l.segments)-1 {
			break // the active segment
		}
		if l.segments[i+1].base > firstUncleanable {
			break
		}
		size := s.size.Load()
		total += size
		if l.segments[i+1].base > dirty {
			cleanableBytes += size
		}
	}
	if total == 0 {
		return 0, 0
	}
	return float64(cleanableBytes) / float64(total), cleanableBytes
}

// Clean compacts the log's sealed segments below o.FirstUncleanable (see
// the file comment). One Clean runs at a time per log; appends, reads,
// retention and truncation go on meanwhile, excluded only while segments
// are swapped. A segment removed or truncated meanwhile aborts the group
// it is in (its cleaned files are deleted) without error.
func (l *Log) Clean(ctx context.Context, o CleanOptions) (CleanStats, error) {
	start := time.Now()
	var st CleanStats
	if l.isClosed.Load() {
		return st, ErrClosed
	}
	if o.MapMemory <= 0 {
		o.MapMemory = DefaultCleanerMapMemory
	}
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	if err := l.failure(); err != nil {
		return st, err // Heal first
	}
	m := getOffsetMap(o.MapMemory)
	defer putOffsetMap(m, o.yield)
	st.MapCapacity = m.capacity()
	defer func() { st.Duration = time.Since(start) }()
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		dirty, err := l.cleanerCheckpoint()
		if err != nil {
			return st, err
		}
		st.CleanedTo = dirty
		segs, bound := l.cleanable(o)
		if len(segs) == 0 {
			return st, nil
		}
		m.clear(o.yield)
		mapEnd := dirty
		if dirty >= bound {
			// Nothing dirty: a pass only to remove tombstones whose delete
			// horizon has passed (KIP-534), when one has.
			if h := l.nextHorizon.Load(); h != 0 && o.Now.UnixMilli() < h {
				releaseAll(segs)
				return st, nil
			}
		} else if mapEnd, err = l.buildOffsetMap(ctx, o, &st, segs, m, dirty, bound); err != nil {
			releaseAll(segs)
			return st, l.cleanErr(err)
		}
		st.Passes++
		horizon, err := l.cleanPass(ctx, o, &st, segs, m, mapEnd)
		releaseAll(segs)
		if err != nil {
			return st, l.cleanErr(err)
		}
		l.nextHorizon.Store(horizon)
		if dirty >= bound {
			return st, nil
		}
		if err := writeOffsetCheckpoint(l.st.fs, l.dir, cleanerCheckpointFile, mapEnd); err != nil {
			return st, fmt.Errorf("persist cleaner checkpoint %d: %w", mapEnd, err)
		}
		st.CleanedTo = mapEnd
		if mapEnd >= bound {
			return st, nil
		}
	}
}

// cleanErr: a segment removed under the cleaning (retention, truncation)
// ends it without error; the next Clean starts from the log as it is.
func (l *Log) cleanErr(err error) error {
	if errors.Is(err, errFileGone) {
		l.logger.Debug("cleaning stopped: a segment was removed meanwhile", "err", err)
		return nil
	}
	return err
}

// cleanable returns, each with a reference, the sealed segments that may be cleaned and
// the offset they end at (the next segment's base): below the caller's
// bound, fsynced, older than the compaction lag, free of known damage.
func (l *Log) cleanable(o CleanOptions) ([]*segment, int64) {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	durable := l.durable.Load()
	var out []*segment
	for i := 0; i+1 < len(l.segments); i++ {
		s, next := l.segments[i], l.segments[i+1].base
		if next > o.FirstUncleanable || next > durable || len(s.badRanges()) > 0 {
			break
		}
		if o.MinCompactionLag > 0 && s.maxTs.Load() > o.Now.Add(-o.MinCompactionLag).UnixMilli() {
			break
		}
		if !s.tryAcquire() {
			break
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, 0
	}
	// out is a prefix of the list: the segment after it starts the bound.
	return out, l.segments[len(out)].base
}

// yield calls the Yield hook.
func (o *CleanOptions) yield() {
	if o.Yield != nil {
		o.Yield()
	}
}

// ioLimit applies the throttle hook.
func ioLimit(ctx context.Context, o *CleanOptions, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.IOLimit == nil || n <= 0 {
		return nil
	}
	if err := o.IOLimit(ctx, n); err != nil {
		return fmt.Errorf("cleaner I/O limit: %w", err)
	}
	return nil
}

// segmentBatches calls fn with every batch of the sealed segment s, in
// order, each checked against its CRC, reading ahead cleanerReadBuffer
// bytes at a time. raw is only valid during the call.
func (l *Log) segmentBatches(ctx context.Context, o *CleanOptions, st *CleanStats, s *segment, fn func(h batch.Header, raw []byte) error) error {
	size := s.size.Load()
	return s.withLog(func(f vfs.File) error {
		bp := getCleanerBuf()
		defer putCleanerBuf(bp)
		buf := *bp
		var bufStart, pos int64
		fill := func(need int) error {
			n := int64(max(need, cleanerReadBuffer))
			n = min(n, size-pos)
			if n < int64(need) {
				return fmt.Errorf("%w: segment %s: batch at %d runs past the end (%d)", ErrCorrupt, s.name(), pos, size)
			}
			if err := ioLimit(ctx, o, int(n)); err != nil {
				return err
			}
			if int64(cap(buf)) < n {
				buf = make([]byte, n)
				*bp = buf
			}
			buf = buf[:n]
			if _, err := f.ReadAt(buf, pos); err != nil && !(errors.Is(err, io.EOF)) {
				return fmt.Errorf("read segment %s at %d: %w", s.name(), pos, err)
			}
			st.BytesRead += n
			bufStart = pos
			return nil
		}
		for pos < size {
			if pos+batch.HeaderSize > bufStart+int64(len(buf)) {
				if err := fill(batch.HeaderSize); err != nil {
					return err
				}
			}
			h, err := batch.ParseHeader(buf[pos-bufStart:])
			if err != nil {
				return fmt.Errorf("%w: segment %s at %d: %v", ErrCorrupt, s.name(), pos, err)
			}
			n := h.Size()
			if h.Length < batch.HeaderSize-batch.LengthFieldEnd || int64(n) > size-pos {
				return fmt.Errorf("%w: segment %s at %d: bad batch length %d", ErrCorrupt, s.name(), pos, h.Length)
			}
			if pos+int64(n) > bufStart+int64(len(buf)) {
				if err := fill(n); err != nil {
					return err
				}
			}
			raw := buf[pos-bufStart : pos-bufStart+int64(n)]
			if batch.Checksum(raw[batch.CRCStart:]) != h.CRC {
				return fmt.Errorf("%w: segment %s: crc mismatch in the batch at offset %d", ErrCorrupt, s.name(), h.BaseOffset)
			}
			if err := fn(h, raw); err != nil {
				return err
			}
			pos += int64(n)
			o.yield()
		}
		return nil
	})
}

// abortedSet answers whether a transactional batch belongs to an aborted
// transaction, from the aborted-transaction index.
type abortedSet map[int64][]AbortedTxn

func (l *Log) abortedIn(from, upTo int64) (abortedSet, error) {
	list, err := l.AbortedTxns(from, upTo)
	if err != nil {
		return nil, err
	}
	set := abortedSet{}
	for _, e := range list {
		set[e.ProducerID] = append(set[e.ProducerID], e)
	}
	return set, nil
}

func (a abortedSet) aborted(h batch.Header) bool {
	if !h.IsTransactional() || h.IsControl() {
		return false
	}
	for _, e := range a[h.ProducerID] {
		if h.BaseOffset >= e.FirstOffset && h.BaseOffset < e.LastOffset {
			return true
		}
	}
	return false
}

// buildOffsetMap fills m with the latest offset of every key from dirty
// up to the first record whose key no longer fits (or bound), and returns
// that end: records at or past it are not covered by the map. The end is
// past dirty (an empty map takes any first key), so every pass progresses.
func (l *Log) buildOffsetMap(ctx context.Context, o CleanOptions, st *CleanStats, segs []*segment, m *offsetMap, dirty, bound int64) (int64, error) {
	aborted, err := l.abortedIn(dirty, bound)
	if err != nil {
		return 0, err
	}
	errFull := errors.New("map full")
	end := bound
	var dec batch.RecordDecoder
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].base <= dirty {
			continue // wholly below the dirty offset
		}
		err := l.segmentBatches(ctx, &o, st, s, func(h batch.Header, raw []byte) error {
			if h.LastOffset() < dirty || h.IsControl() || aborted.aborted(h) {
				return nil
			}
			full := false
			n := 0
			err := dec.Records(raw, cleanerMaxDecoded, func(r batch.Record) bool {
				if n++; n%cleanerYieldRecords == 0 {
					o.yield()
				}
				off := h.RecordOffset(r)
				if r.Key == nil || off < dirty {
					return true
				}
				if !m.put(r.Key, off) {
					// A new key and the map is full: this pass covers
					// the offsets below this record, the next one
					// starts at it. Like Kafka's, the map may end
					// inside a batch, so a batch with more keys than
					// the map holds is cleaned in several passes.
					end, full = off, true
					return false
				}
				return true
			})
			if err == nil && full {
				err = errFull
			}
			return err
		})
		if errors.Is(err, errFull) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("build key map: %w", err)
		}
	}
	return max(end, dirty+1), nil
}

// cleanPass rewrites the segments from the log start that hold offsets below
// mapEnd, in groups that each become one segment.
//
// It returns the earliest delete horizon left in the log (math.MaxInt64
// when no tombstone waits for one).
func (l *Log) cleanPass(ctx context.Context, o CleanOptions, st *CleanStats, segs []*segment, m *offsetMap, mapEnd int64) (int64, error) {
	// The segments to rewrite: every one starting below mapEnd (all of
	// them for a tombstone-only pass).
	n := 0
	for n < len(segs) && (segs[n].base < mapEnd || mapEnd >= segs[len(segs)-1].base) {
		n++
	}
	if n == 0 {
		return math.MaxInt64, nil
	}
	segs = segs[:n]
	ends := make([]int64, n) // the next segment's base (exclusive end)
	for i := range segs {
		if i+1 < len(segs) {
			ends[i] = segs[i+1].base
		}
	}
	ends[n-1] = l.segmentEnd(segs[n-1])
	aborted, err := l.abortedIn(l.logStart.Load(), ends[n-1])
	if err != nil {
		return 0, err
	}
	// The last batch of each producer in the cleaned range is kept even if
	// emptied (Kafka keeps it for the producer's state). Only the headers
	// are needed: they are walked in small chunks (a batch of 1 MB costs
	// a 16 KiB read), not read and checked whole, which was a third full
	// read of the range (the rewrite checks every CRC).
	lastOfProducer := map[int64]int64{}
	for _, s := range segs {
		err := s.walk(0, s.base, s.size.Load(), func(h batch.Header, _ int64) bool {
			if h.ProducerID >= 0 {
				lastOfProducer[h.ProducerID] = h.LastOffset()
			}
			o.yield()
			return ctx.Err() == nil
		})
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return 0, fmt.Errorf("clean: find the last batch of each producer in segment %d: %w", s.base, err)
		}
	}
	opts := l.opts.Load()
	horizon := int64(math.MaxInt64)
	txn := &txnState{committed: map[int64]bool{}, abortedSeen: map[int64]bool{}}
	scr := &cleanScratch{}
	for i := 0; i < len(segs); {
		j, size := i+1, segs[i].size.Load()
		for j < len(segs) && size+segs[j].size.Load() <= opts.SegmentBytes &&
			ends[j]-1-segs[i].base <= maxRelativeOffset {
			size += segs[j].size.Load()
			j++
		}
		f := &filter{o: &o, m: m, scr: scr, mapEnd: mapEnd, aborted: aborted, last: lastOfProducer, st: st, horizon: math.MaxInt64,
			txn: txn, removedMarkers: map[int64]bool{}}
		if err := l.cleanGroup(ctx, &o, st, segs[i:j], ends[j-1], f); err != nil {
			return 0, err
		}
		horizon = min(horizon, f.horizon)
		i = j
	}
	return horizon, nil
}

// segmentEnd is the base of the segment after s (the log end if none).
func (l *Log) segmentEnd(s *segment) int64 {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	for i, x := range l.segments {
		if x == s && i+1 < len(l.segments) {
			return l.segments[i+1].base
		}
	}
	return l.leo.Load()
}

// filter decides what survives of each batch.
type filter struct {
	o       *CleanOptions
	m       *offsetMap
	scr     *cleanScratch // shared by the groups of a pass (made if nil)
	mapEnd  int64
	aborted abortedSet
	last    map[int64]int64
	st      *CleanStats
	recs    []batch.Record // scratch
	horizon int64          // earliest delete horizon of a kept tombstone or marker
	txn     *txnState      // shared by the groups of a pass, in offset order
	// removedMarkers are the offsets of the end-transaction markers this
	// group removed: their .txnindex entries go with them.
	removedMarkers map[int64]bool
}

// cleanScratch is the memory a pass reuses from batch to batch: the
// decoded records and the rebuilt batch.
type cleanScratch struct {
	dec   batch.RecordDecoder
	build []byte
}

// maxKeptScratch keeps an unusually large rebuilt batch's memory from being
// held for the rest of a pass.
const maxKeptScratch = 8 << 20

// cleanerBufs pools the cleaner's read and write buffers
// (cleanerReadBuffer bytes; larger ones, for a larger batch, are not kept).
var cleanerBufs = sync.Pool{New: func() any { b := make([]byte, 0, cleanerReadBuffer); return &b }}

func getCleanerBuf() *[]byte { return cleanerBufs.Get().(*[]byte) }

func putCleanerBuf(b *[]byte) {
	if cap(*b) <= 2*cleanerReadBuffer {
		*b = (*b)[:0]
		cleanerBufs.Put(b)
	}
}

// txnState follows transactions through the cleaned range in offset order,
// as Kafka's CleanedTransactionMetadata: whether a batch of each producer's
// current transaction was read since its last marker, so a marker is
// removed only once no batch of its transaction is left.
type txnState struct {
	committed   map[int64]bool // pid -> a batch of its (not aborted) transaction was read
	abortedSeen map[int64]bool // pid -> a batch of its aborted transaction was read
}

// apply returns the batch to write for h (raw itself when unchanged, nil
// when the batch goes). A rebuilt batch may be in the filter's scratch
// memory: it is valid until the next call.
func (f *filter) apply(h batch.Header, raw []byte) ([]byte, error) {
	f.st.RecordsRead += int64(h.NumRecords)
	keepEmpty := h.ProducerID >= 0 && f.last[h.ProducerID] == h.LastOffset()
	if h.IsControl() {
		return f.control(h, raw, keepEmpty)
	}
	if f.aborted.aborted(h) {
		f.txn.abortedSeen[h.ProducerID] = true
		f.st.RecordsRemoved += int64(h.NumRecords)
		return f.empty(h, keepEmpty), nil
	}
	if h.IsTransactional() {
		f.txn.committed[h.ProducerID] = true
	}
	hasHorizon := h.Attributes&batch.DeleteHorizonBit != 0
	nowMs := f.o.Now.UnixMilli()
	f.recs = f.recs[:0]
	removed, tombstones := 0, 0
	maxTs := int64(batch.NoTimestamp)
	prevDelta := int32(-1)
	var badDelta error
	if f.scr == nil {
		f.scr = &cleanScratch{}
	}
	n := 0
	err := f.scr.dec.Records(raw, cleanerMaxDecoded, func(r batch.Record) bool {
		if n++; n%cleanerYieldRecords == 0 {
			f.o.yield()
		}
		// Offsets must increase within the batch's range: the rebuilt batch
		// takes its last offset from its last record, and the map compares
		// offsets (produce validation ensures it; a replica's bytes are
		// only framing-checked).
		if r.OffsetDelta <= prevDelta || r.OffsetDelta > h.LastOffsetDelta {
			badDelta = fmt.Errorf("%w: record offset delta %d after %d in a batch of last delta %d", ErrCorrupt, r.OffsetDelta, prevDelta, h.LastOffsetDelta)
			return false
		}
		prevDelta = r.OffsetDelta
		off := h.RecordOffset(r)
		if r.Key != nil && off < f.mapEnd {
			if latest, ok := f.m.get(r.Key); ok && latest > off {
				removed++
				return true
			}
			if r.Value == nil && hasHorizon && nowMs >= h.FirstTimestamp {
				removed++ // a tombstone past its delete horizon
				return true
			}
		}
		if r.Value == nil {
			tombstones++
		}
		if ts := h.RecordTimestamp(r); ts > maxTs {
			maxTs = ts
		}
		f.recs = append(f.recs, r)
		return true
	})
	if err == nil {
		err = badDelta
	}
	if err != nil {
		return nil, fmt.Errorf("clean batch at offset %d: %w", h.BaseOffset, err)
	}
	f.st.RecordsRemoved += int64(removed)
	newHorizon := !hasHorizon && tombstones > 0
	if tombstones > 0 {
		if hasHorizon {
			f.horizon = min(f.horizon, h.FirstTimestamp)
		} else {
			f.horizon = min(f.horizon, nowMs+f.o.DeleteRetention.Milliseconds())
		}
	}
	if removed == 0 && !newHorizon {
		return raw, nil
	}
	if len(f.recs) == 0 {
		return f.empty(h, keepEmpty), nil
	}
	nh := h
	if newHorizon {
		stampHorizon(&nh, f.recs, nowMs+f.o.DeleteRetention.Milliseconds())
	}
	if !h.LogAppendTime() && maxTs != batch.NoTimestamp {
		nh.MaxTimestamp = maxTs
	}
	// Built into the scratch buffer, valid until the next apply: the
	// caller copies it out.
	out := batch.AppendBuild(f.scr.build[:0], nh, f.recs)
	if cap(out) <= maxKeptScratch {
		f.scr.build = out[:0]
	}
	if codec := h.Compression(); codec != batch.CompressionNone {
		if out, err = batch.Recompress(out, codec, defaultLevel(codec), cleanerMaxDecoded); err != nil {
			return nil, fmt.Errorf("clean batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	return out, nil
}

// control decides the fate of a control batch with Kafka's rules
// (Cleaner.shouldDiscardBatch, onControlBatchRead): an end-transaction
// marker may go once no batch of its transaction was read in this cleaning
// (an aborted one's data was removed by an earlier cleaning, a committed
// one's was superseded), and only after its delete horizon: the first
// cleaning that finds it removable stamps the horizon (KIP-534), so
// read_committed consumers behind have DeleteRetention to pass it. An
// empty control batch (already cleaned) may go too. Other control types
// stay.
func (f *filter) control(h batch.Header, raw []byte, keepEmpty bool) ([]byte, error) {
	canDiscard := h.NumRecords == 0
	if !canDiscard {
		m, err := batch.ParseEndTxnMarker(raw)
		if errors.Is(err, batch.ErrNotMarker) {
			return raw, nil
		}
		if err != nil {
			return nil, fmt.Errorf("clean control batch at offset %d: %w", h.BaseOffset, err)
		}
		if m.Commit {
			canDiscard = !f.txn.committed[h.ProducerID]
			delete(f.txn.committed, h.ProducerID)
		} else {
			canDiscard = !f.txn.abortedSeen[h.ProducerID]
			delete(f.txn.abortedSeen, h.ProducerID)
		}
	}
	if !canDiscard {
		return raw, nil
	}
	nowMs := f.o.Now.UnixMilli()
	if h.Attributes&batch.DeleteHorizonBit != 0 {
		if nowMs >= h.FirstTimestamp {
			f.st.RecordsRemoved += int64(h.NumRecords)
			f.removedMarkers[h.LastOffset()] = true
			return f.empty(h, keepEmpty), nil
		}
		f.horizon = min(f.horizon, h.FirstTimestamp)
		return raw, nil
	}
	if h.NumRecords == 0 {
		return raw, nil // nothing to stamp: goes at the next cleaning
	}
	// Stamp the horizon, records unchanged (their timestamps rebased).
	var recs []batch.Record
	if err := batch.Records(raw, func(r batch.Record) bool { recs = append(recs, r); return true }); err != nil {
		return nil, fmt.Errorf("clean control batch at offset %d: %w", h.BaseOffset, err)
	}
	for i, r := range recs {
		if r.OffsetDelta < 0 || r.OffsetDelta > h.LastOffsetDelta || (i > 0 && r.OffsetDelta <= recs[i-1].OffsetDelta) {
			return nil, fmt.Errorf("%w: control batch at offset %d: record offset delta %d outside its batch", ErrCorrupt, h.BaseOffset, r.OffsetDelta)
		}
	}
	horizon := nowMs + f.o.DeleteRetention.Milliseconds()
	nh := h
	stampHorizon(&nh, recs, horizon)
	f.horizon = min(f.horizon, horizon)
	return batch.Build(nh, recs), nil
}

// stampHorizon stamps a delete horizon on the batch of h and recs
// (KIP-534): FirstTimestamp becomes the horizon, and the records'
// timestamp deltas are rebased on it so they read the same.
func stampHorizon(h *batch.Header, recs []batch.Record, horizon int64) {
	for i := range recs {
		recs[i].TimestampDelta = h.FirstTimestamp + recs[i].TimestampDelta - horizon
	}
	h.FirstTimestamp = horizon
	h.Attributes |= batch.DeleteHorizonBit
}

// defaultLevel is Kafka's default level of codec: the cleaner does not know
// the level the producer used (Kafka's cleaner also recompresses at the
// default).
func defaultLevel(codec int8) int {
	switch codec {
	case batch.CompressionGzip:
		return batch.GzipDefaultLevel
	case batch.CompressionLZ4:
		return batch.LZ4DefaultLevel
	case batch.CompressionZstd:
		return batch.ZstdDefaultLevel
	}
	return 0
}

// empty is what stays of a batch whose records all went: nothing, or its
// header alone when it is its producer's last (same offsets, sequence).
func (f *filter) empty(h batch.Header, keep bool) []byte {
	if !keep {
		f.st.BatchesRemoved++
		return nil
	}
	nh := h
	nh.Attributes &^= batch.CompressionMask
	return batch.Build(nh, nil)
}

// cleanGroup writes the cleaned copy of segs (offsets [segs[0].base, end))
// as one segment and swaps it in.
func (l *Log) cleanGroup(ctx context.Context, o *CleanOptions, st *CleanStats, segs []*segment, end int64, f *filter) error {
	base := segs[0].base
	fsys := l.st.fs
	path := func(ext, suffix string) string { return filepath.Join(l.dir, segmentFileName(base, ext)+suffix) }
	scratch := newSegment(l.st, base)
	scratch.offIdx.mem, scratch.timeIdx.mem = []byte{}, []byte{}
	interval := l.opts.Load().IndexIntervalBytes
	// The sizes read: a truncation that cuts one of these segments in place
	// meanwhile must abort the swap (swapIn compares).
	sizes := make([]int64, len(segs))
	for i, s := range segs {
		sizes[i] = s.size.Load()
	}

	out, err := fsys.OpenFile(path(logExt, cleanedSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("clean: create %s: %w", path(logExt, cleanedSuffix), err)
	}
	abandon := func(err error) error {
		_ = out.Close()
		for _, ext := range []string{logExt, indexExt, timeIndexExt, txnIndexExt} {
			_ = fsys.Remove(path(ext, cleanedSuffix))
		}
		return err
	}
	var pos int64
	wbp := getCleanerBuf()
	wbuf := *wbp
	defer func() { *wbp = wbuf; putCleanerBuf(wbp) }()
	flush := func() error {
		if len(wbuf) == 0 {
			return nil
		}
		if err := ioLimit(ctx, o, len(wbuf)); err != nil {
			return err
		}
		if _, err := out.WriteAt(wbuf, pos-int64(len(wbuf))); err != nil {
			return fmt.Errorf("clean: write %s: %w", path(logExt, cleanedSuffix), err)
		}
		st.BytesWritten += int64(len(wbuf))
		wbuf = wbuf[:0]
		return nil
	}
	for _, s := range segs {
		err := l.segmentBatches(ctx, o, st, s, func(h batch.Header, raw []byte) error {
			b, err := f.apply(h, raw)
			if err != nil || b == nil {
				return err
			}
			nh, err := batch.ParseHeader(b)
			if err != nil {
				return err
			}
			scratch.indexBatch(nh, pos, interval)
			wbuf = append(wbuf, b...)
			pos += int64(len(b))
			if len(wbuf) >= cleanerReadBuffer {
				return flush()
			}
			return nil
		})
		if err != nil {
			return abandon(fmt.Errorf("clean segment %d: %w", s.base, err))
		}
	}
	if err := flush(); err != nil {
		return abandon(err)
	}
	if err := out.SyncData(); err != nil {
		return abandon(fmt.Errorf("clean: sync %s: %w", path(logExt, cleanedSuffix), err))
	}
	if err := out.Close(); err != nil {
		return abandon(fmt.Errorf("clean: close %s: %w", path(logExt, cleanedSuffix), err))
	}
	scratch.appendTimeEntry()
	if err := writeSynced(fsys, path(indexExt, cleanedSuffix), scratch.offIdx.mem); err != nil {
		return abandon(err)
	}
	if err := writeSynced(fsys, path(timeIndexExt, cleanedSuffix), scratch.timeIdx.mem); err != nil {
		return abandon(err)
	}
	// The aborted-transaction entries of the group: markers are kept, so
	// every entry still points at one; they move into the new segment.
	var txn []byte
	for i, s := range segs {
		b, err := vfs.ReadFile(fsys, filepath.Join(l.dir, segmentFileName(s.base, txnIndexExt)), maxTxnIndexMemory)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return abandon(fmt.Errorf("clean: read txn index: %w", err))
		}
		segEnd := end
		if i+1 < len(segs) {
			segEnd = segs[i+1].base
		}
		entries, _ := decodeTxnEntries(b, s.base, segEnd)
		for _, e := range entries {
			if !f.removedMarkers[e.LastOffset] {
				txn = encodeTxnEntry(txn, e)
			}
		}
	}
	hasTxn := len(txn) > 0
	if hasTxn {
		if err := writeSynced(fsys, path(txnIndexExt, cleanedSuffix), txn); err != nil {
			return abandon(err)
		}
	}
	if err := WriteFileAtomic(fsys, l.dir, cleanerSwapFile, fmt.Appendf(nil, "%d\n%d %d %d\n", checkpointVersion, base, end, b2i(hasTxn))); err != nil {
		return abandon(fmt.Errorf("clean: write swap manifest: %w", err))
	}
	swapped, err := l.swapIn(ctx, segs, sizes, end, hasTxn, o.yield)
	if err != nil {
		return err
	}
	if swapped {
		st.SegmentsCleaned += len(segs)
	}
	if swapped && len(f.removedMarkers) > 0 {
		l.dropTxnEntries(f.removedMarkers)
	}
	return nil
}

// dropTxnEntries removes from the in-memory aborted-transaction index the
// entries whose markers a cleaning removed (their data went before them).
func (l *Log) dropTxnEntries(markers map[int64]bool) {
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	kept := make([]AbortedTxn, 0, len(l.aborted))
	for _, e := range l.aborted {
		if !markers[e.LastOffset] {
			kept = append(kept, e)
		}
	}
	l.aborted = kept
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// swapIn commits a cleaned group (steps 3 to 6 of the protocol). swapped
// is false when the group was abandoned (its segments changed meanwhile).
func (l *Log) swapIn(ctx context.Context, segs []*segment, sizes []int64, end int64, hasTxn bool, yield func()) (swapped bool, err error) {
	swapped, replaced, err := l.swapInLocked(segs, sizes, end, hasTxn)
	// Step 6, with no lock held: appends and reads go on meanwhile. A
	// removal that fails leaves a file Open removes.
	for _, path := range replaced {
		if rerr := removeGently(ctx, l.st.fs, path, yield); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			l.logger.Warn("removing a segment file a cleaning replaced failed; the next start removes it", "file", path, "err", rerr)
		}
	}
	return swapped, err
}

// freeStep is how much of a replaced file one truncation frees, and
// freePause how long removeGently rests after each, per unit of the time
// the truncation took: freeing space stalls the filesystem's journal, and
// with it every produce's fsync, for as long as it takes (about 0.2 ms a
// MiB on the development machine's disk, which discards what is freed).
// Removed whole, a 64 MiB segment held fsyncs up for 12 ms; a cleaning
// removes its dirty log's size of segments in a few seconds, and produce
// at 5,000 records/s went from p50 1.9 ms to 4 ms. Freed 4 MiB at a time
// with three times as long between, fsyncs wait at most one step and
// meet one a quarter of the time. Where freeing is cheap, the pauses are
// too.
const (
	freeStep  = 4 << 20
	freePause = 3
)

// removeGently removes path, a file no reader uses any more (a replaced
// segment's: readers hold truncMu while they read, and the swap took it),
// shortening it freeStep at a time first. Once ctx is done (the cleaning is
// being aborted) it removes what is left at once.
func removeGently(ctx context.Context, fsys vfs.FS, path string, yield func()) error {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	size, err := f.Size()
	for err == nil && size > freeStep && ctx.Err() == nil {
		size -= freeStep
		start := time.Now()
		err = f.Truncate(size)
		took := time.Since(start)
		yield()
		pause := time.NewTimer(freePause * took)
		select {
		case <-ctx.Done():
		case <-pause.C:
		}
		pause.Stop()
	}
	_ = f.Close()
	// A truncation that failed only makes the removal free more at once.
	return fsys.Remove(path)
}

// swapInLocked is steps 3 to 5, under the flusher's lock and the append
// lock (and the readers' lock from step 4 on). It returns the paths of the
// replaced files for step 6. The flusher's lock, as retention and
// truncation take it: a fsync round may hold a replaced segment that was
// sealed but not yet synced, and must not find its files gone while the
// segment is still in the list (it would take the log offline); once the
// list no longer holds it, the round skips it.
func (l *Log) swapInLocked(segs []*segment, sizes []int64, end int64, hasTxn bool) (swapped bool, replaced []string, err error) {
	base := segs[0].base
	fsys := l.st.fs
	discard := func(why string) (bool, []string, error) {
		removeCleanerFiles(fsys, l.dir)
		_ = fsys.Remove(filepath.Join(l.dir, cleanerSwapFile))
		l.logger.Info("cleaning of a segment group abandoned", "base", base, "why", why)
		return false, nil, nil
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		_, _, _ = discard("log closed")
		return false, nil, ErrClosed
	}
	// The group must still be in the log as it was read: retention or a
	// truncation may have removed or cut a segment meanwhile.
	l.segMu.RLock()
	at := -1
	for i, s := range l.segments {
		if s == segs[0] {
			at = i
		}
	}
	ok := at >= 0 && at+len(segs) < len(l.segments) && l.segments[at+len(segs)].base == end
	for k := 0; ok && k < len(segs); k++ {
		ok = l.segments[at+k] == segs[k] && segs[k].size.Load() == sizes[k]
	}
	l.segMu.RUnlock()
	if !ok {
		return discard("segments changed meanwhile")
	}
	exts := []string{indexExt, timeIndexExt}
	if hasTxn {
		exts = append(exts, txnIndexExt)
	}
	exts = append(exts, logExt) // last: the commit point
	for _, ext := range exts {
		p := filepath.Join(l.dir, segmentFileName(base, ext))
		if err := fsys.Rename(p+cleanedSuffix, p+swapSuffix); err != nil {
			if ext != logExt {
				return discard(fmt.Sprintf("rename %s: %v", p+cleanedSuffix, err))
			}
			return false, nil, l.fail(fmt.Errorf("clean: rename %s: %w", p+cleanedSuffix, err))
		}
	}
	if err := SyncDir(fsys, l.dir); err != nil {
		return false, nil, l.fail(fmt.Errorf("clean: commit swap: %w", err))
	}
	l.truncMu.Lock()
	defer l.truncMu.Unlock()
	replaced, err = completeSwap(fsys, l.dir, base, end, hasTxn, segs)
	if err != nil {
		return false, replaced, l.fail(err)
	}
	fresh, indexesOK, err := openSegment(l.st, base)
	if err == nil && !indexesOK {
		err = fmt.Errorf("%w: cleaned segment %d has bad indexes", ErrCorrupt, base)
	}
	if err == nil {
		err = fresh.loadIndexState()
	}
	if err != nil {
		return false, replaced, l.fail(fmt.Errorf("clean: open cleaned segment: %w", err))
	}
	l.segMu.Lock()
	next := make([]*segment, 0, len(l.segments)-len(segs)+1)
	next = append(next, l.segments[:at]...)
	next = append(next, fresh)
	next = append(next, l.segments[at+len(segs):]...)
	l.segments = next
	l.segMu.Unlock()
	for _, s := range segs {
		s.release()
	}
	if err := fsys.Remove(filepath.Join(l.dir, cleanerSwapFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return true, replaced, l.fail(fmt.Errorf("clean: remove swap manifest: %w", err))
	}
	return true, replaced, nil
}

// completeSwap is step 4: the old segments of [base, end) are renamed out
// of the way (<name>.deleted, whose removal, step 6, frees their space),
// the .swap files take their final names. It returns the renamed paths.
// Idempotent, so recovery can redo it. old, when known, lets the file cache
// drop the old files' descriptors.
func completeSwap(fsys vfs.FS, dir string, base, end int64, hasTxn bool, old []*segment) (replaced []string, err error) {
	for _, s := range old {
		s.logRef.forget()
		s.offIdx.ref.forget()
		s.timeIdx.ref.forget()
	}
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("clean: list %s: %w", dir, err)
	}
	park := func(name string) error {
		path := filepath.Join(dir, name)
		if err := fsys.Rename(path, path+deletedSuffix); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("clean: set aside replaced file %s: %w", path, err)
		}
		replaced = append(replaced, path+deletedSuffix)
		return nil
	}
	// The old segments after the first: .log first, so a crash midway
	// leaves orphan indexes, which Open removes.
	for _, ext := range []string{logExt, indexExt, timeIndexExt, txnIndexExt} {
		for _, e := range entries {
			b, x, ok := parseSegmentFileName(e.Name)
			if ok && x == ext && b > base && b < end {
				if err := park(e.Name); err != nil {
					return replaced, err
				}
			}
		}
	}
	// The first segment's files, which the new ones replace under the same
	// names: set aside rather than renamed over (which would free them).
	name := func(ext string) string { return segmentFileName(base, ext) }
	p := func(ext string) string { return filepath.Join(dir, name(ext)) }
	if !hasTxn {
		if err := park(name(txnIndexExt)); err != nil {
			return replaced, err
		}
	}
	for _, ext := range []string{indexExt, timeIndexExt, txnIndexExt, logExt} {
		if _, err := fsys.Stat(p(ext) + swapSuffix); errors.Is(err, fs.ErrNotExist) {
			continue // never there, or already renamed
		}
		if err := park(name(ext)); err != nil {
			return replaced, err
		}
		if err := fsys.Rename(p(ext)+swapSuffix, p(ext)); err != nil {
			return replaced, fmt.Errorf("clean: rename %s: %w", p(ext)+swapSuffix, err)
		}
	}
	if err := SyncDir(fsys, dir); err != nil {
		return replaced, fmt.Errorf("clean: finish swap: %w", err)
	}
	return replaced, nil
}

// committedSwaps names the segment logs of dir renamed to .swap: a swap past
// its commit point.
func committedSwaps(fsys vfs.FS, dir string) []string {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name, logExt+swapSuffix) {
			out = append(out, e.Name)
		}
	}
	return out
}

// removeCleanerFiles deletes every .cleaned, .swap and .deleted file of
// dir, reporting whether it found any.
func removeCleanerFiles(fsys vfs.FS, dir string) (found bool) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name, cleanedSuffix) || strings.HasSuffix(e.Name, swapSuffix) ||
			strings.HasSuffix(e.Name, deletedSuffix) {
			_ = fsys.Remove(filepath.Join(dir, e.Name))
			found = true
		}
	}
	return found
}

// recoverCleanerSwap runs at Open before the segments are listed: it
// completes a swap whose .log reached .swap (the commit point) and
// discards any other cleaner output. A committed swap whose manifest is
// missing or cannot be read (it is written atomically before the commit
// point and removed after the swap, so only damage does that) is an error: some old segments may be gone already, and deleting
// the .swap files would lose the records only they hold.
func recoverCleanerSwap(fsys vfs.FS, dir string) error {
	lines, err := readCheckpoint(fsys, dir, cleanerSwapFile)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("read swap manifest: %w", err)
	}
	var v []int64
	if err == nil && len(lines) == 1 {
		v, err = parseInts(lines[0], 3)
	} else if err == nil && len(lines) != 0 {
		err = fmt.Errorf("%w: %d lines", ErrCorrupt, len(lines))
	}
	switch {
	case err == nil && v != nil:
		base, end, hasTxn := v[0], v[1], v[2] == 1
		logSwap := filepath.Join(dir, segmentFileName(base, logExt)+swapSuffix)
		if _, serr := fsys.Stat(logSwap); serr == nil {
			if _, err := completeSwap(fsys, dir, base, end, hasTxn, nil); err != nil {
				return err
			}
		}
	default:
		if swaps := committedSwaps(fsys, dir); len(swaps) > 0 {
			why := "missing"
			if err != nil {
				why = err.Error()
			}
			return fmt.Errorf("%w: a committed compaction swap (%s) without a readable manifest %s (%s): left in place",
				ErrCorrupt, strings.Join(swaps, ", "), cleanerSwapFile, why)
		}
	}
	changed := removeCleanerFiles(fsys, dir)
	if err := fsys.Remove(filepath.Join(dir, cleanerSwapFile)); err == nil {
		changed = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove swap manifest: %w", err)
	}
	if !changed {
		// Nothing of a cleaning was there (every Open of a log that was
		// not being cleaned): no directory fsync to pay.
		return nil
	}
	return SyncDir(fsys, dir)
}
