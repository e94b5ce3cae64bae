package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/moonmq/moonmq/engine/batch"
	"sort"
)

// The aborted-transaction index (Kafka's .txnindex, issue 14): for every
// abort marker in a segment, an entry naming the aborted transaction's
// producer, its first offset (possibly in an earlier segment), the
// marker's offset, and the last stable offset when the marker was written.
// A read_committed fetch gets the aborted transactions of the range it
// returns from it (AbortedTxns) without scanning the log.
//
// The log cannot derive the entries (they need producer state): its owner
// passes them with the append that writes the markers (AppendWith,
// AppendReplicatedWith). Each is stored in <base>.txnindex of the segment
// holding its marker, 34 bytes big-endian as Kafka's AbortedTxn, created on
// the first entry; marker offsets strictly increase within a file.
//
// Entries are fsynced before the marker's bytes are written, so after any
// crash every marker that survived has its entry; an entry whose marker
// did not survive (at or past the log end after recovery) is cut at open,
// as is a torn tail. Abort markers are rare, so an fsync each costs
// nothing that matters, and the index is complete at every open, clean or
// not: TxnIndexValidTo is the log end.
//
// It is lower only while a rebuild is due, a state persisted in
// txn-index-valid-to-checkpoint so a crash cannot hide it: when Open or
// Heal finds an entry no append writes (a version other than 0, a marker
// below the segment's base, out of order, or past a sealed segment's end),
// the file is cut there and TxnIndexValidTo lowered to the segment's base
// (persisted before the cut); TruncateAbortedTxns(from) lowers it to from
// (persisted before the files are cut). The owner then re-derives the
// entries from there by replaying the log through its producer state and
// hands them to AddAbortedTxns, which completes the rebuild.
//
// Truncation (TruncateTo) drops entries of markers cut from memory first,
// and cuts the files after the data, so a crash leaves at worst entries
// past the log end; retention and TruncateFullyAndStartAt remove the files
// with their segments.
//
// The entries of the whole log are also kept in memory, sorted by marker
// offset (32 bytes each, one per aborted transaction still in the log),
// loaded at Open and Heal.

// AbortedTxn is an entry of the aborted-transaction index.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64 // the abort marker's offset
	LastStableOffset int64
}

const (
	txnIndexExt       = ".txnindex"
	txnEntrySize      = 34
	txnEntryVersion   = 0
	maxTxnIndexMemory = 1 << 30 // sanity bound on what one file may hold

	// txnIndexValidToFile, when present, holds TxnIndexValidTo below the
	// log end: a rebuild is due or under way.
	txnIndexValidToFile = "txn-index-valid-to-checkpoint"
)

func encodeTxnEntry(dst []byte, e AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, txnEntryVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(e.LastStableOffset))
}

// decodeTxnEntries reads a segment's index file: the valid prefix of
// entries (version 0, marker offsets strictly increasing within
// [base, end)), and whether anything after it had to be dropped.
// txnCut says why decodeTxnEntries stopped before the end of its input.
type txnCut int

const (
	txnCutNone txnCut = iota
	// txnCutTorn: fewer than an entry's bytes are left (a write a crash
	// tore; its marker was never written, as entries are fsynced first).
	txnCutTorn
	// txnCutPastEnd: an entry, valid otherwise, names a marker at or past
	// end: in the last segment, a marker a crash or a truncation took
	// away (its entry, durable first, survived); what follows it was
	// written after it, so is past the end too.
	txnCutPastEnd
	// txnCutInvalid: an entry that no append writes (a version other than
	// 0, a marker below the segment's base or not after the previous
	// one, a first offset after its marker) or, in a sealed segment, one
	// past its end: damage, after which later entries of the segment may
	// be missing.
	txnCutInvalid
)

// decodeTxnEntries reads a segment's index file: the valid prefix of
// entries (version 0, marker offsets strictly increasing within
// [base, end)), and why the rest, if any, is not.
func decodeTxnEntries(b []byte, base, end int64) (entries []AbortedTxn, cut txnCut) {
	last := int64(-1)
	for len(b) >= txnEntrySize {
		e := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
		}
		if binary.BigEndian.Uint16(b) != txnEntryVersion || e.LastOffset < base || e.LastOffset <= last ||
			e.FirstOffset > e.LastOffset {
			return entries, txnCutInvalid
		}
		if e.LastOffset >= end {
			return entries, txnCutPastEnd
		}
		entries = append(entries, e)
		last = e.LastOffset
		b = b[txnEntrySize:]
	}
	if len(b) > 0 {
		return entries, txnCutTorn
	}
	return entries, txnCutNone
}

func (l *Log) txnIndexPath(base int64) string {
	return filepath.Join(l.dir, segmentFileName(base, txnIndexExt))
}

// txnIndexReadLimit bounds what is read of a segment's index file of size
// bytes, entries' markers in [base, end) of a segment of logBytes: one
// entry more than the range can hold markers (each an offset and a batch
// of at least a header; enough to tell why the decoder stops), never more
// than the file holds nor maxTxnIndexMemory.
func txnIndexReadLimit(size, base, end, logBytes int64) int64 {
	n := min(max(end-base, 0), logBytes/batch.HeaderSize)
	limit := int64(maxTxnIndexMemory)
	if n < limit/txnEntrySize-1 {
		limit = (n + 1) * txnEntrySize
	}
	return min(size, limit)
}

// txnIndexFile is what loadTxnIndex found in one segment's index file.
type txnIndexFile struct {
	base    int64
	entries []AbortedTxn
	cut     bool // the file holds more than entries: cut it there
}

// loadTxnIndex reads the index files of the log's segments into memory,
// cutting what is invalid or past the log end, and sets how far the index
// is complete (TxnIndexValidTo): the persisted mark of an unfinished
// rebuild, lowered to the base of any segment whose file failed
// validation. A lowered mark is persisted before any file is cut, so a
// crash in between cannot make the cut entries look complete. With
// verify (an unclean open), each entry's marker is looked up too.
// Called by Open and Heal, with the log to itself (or every writer lock
// held).
func (l *Log) loadTxnIndex(verify bool) error {
	l.segMu.RLock()
	segs := append([]*segment(nil), l.segments...)
	l.segMu.RUnlock()
	bases := make([]int64, len(segs))
	for i, s := range segs {
		bases[i] = s.base
	}
	fsys := l.st.fs

	validTo := int64(math.MaxInt64)
	persisted, ok, err := readOffsetCheckpoint(fsys, l.dir, txnIndexValidToFile)
	switch {
	case errors.Is(err, ErrCorrupt):
		l.logger.Warn("aborted-transaction index checkpoint unreadable; the index is to be rebuilt", "err", err)
		validTo, persisted, ok = 0, math.MaxInt64, true // persisted anew below
	case err != nil:
		return err
	case ok:
		validTo = persisted
	default:
		persisted = math.MaxInt64
	}

	leo := l.leo.Load()
	var files []txnIndexFile
	for i, base := range bases {
		end, sealed := leo, false
		if i+1 < len(bases) && bases[i+1] < leo {
			end, sealed = bases[i+1], true
		}
		f, cut, err := l.readTxnIndexFile(base, end)
		if err != nil {
			return err
		}
		if verify && len(f.entries) > 0 {
			n, damaged, err := verifyTxnMarkers(segs[i], f.entries)
			if err != nil {
				return err
			}
			if n < len(f.entries) {
				f.entries, f.cut = f.entries[:n], true
				if damaged {
					cut = txnCutInvalid
				}
			}
		}
		if cut == txnCutInvalid || (cut != txnCutNone && sealed) {
			// A torn tail or an entry past the end is a crash's leftover
			// only in the last segment (entries are written, before their
			// markers, only to the active one).
			l.logger.Warn("aborted-transaction index damaged; entries from its segment on are to be rebuilt",
				"segment", segmentFileName(base, txnIndexExt), "kept_entries", len(f.entries))
			validTo = min(validTo, base)
		}
		if f.cut || len(f.entries) > 0 {
			files = append(files, f)
		}
	}
	if validTo < persisted {
		if err := writeOffsetCheckpoint(fsys, l.dir, txnIndexValidToFile, validTo); err != nil {
			return fmt.Errorf("persist aborted-transaction index valid-to %d: %w", validTo, err)
		}
	}
	var all []AbortedTxn
	for _, f := range files {
		if f.cut {
			if err := l.cutTxnIndexFileAt(f.base, int64(len(f.entries))*txnEntrySize); err != nil {
				return err
			}
		}
		all = append(all, f.entries...)
	}
	l.txnMu.Lock()
	l.aborted = all
	l.txnMu.Unlock()
	l.txnValidTo.Store(validTo)
	return nil
}

// verifyTxnMarkers checks that the markers entries name are in s, after an
// unclean shutdown: an entry is fsynced before its marker is written, but
// a crash may still lose the marker with the log end past it (a later
// segment's name made durable while this one's data was not: the log
// takes the lost bytes for a gap). It returns how many entries lead that
// name their marker (a control batch of their producer at LastOffset); if
// the next names a batch that is there but is not its marker, damaged.
func verifyTxnMarkers(s *segment, entries []AbortedTxn) (n int, damaged bool, err error) {
	for n < len(entries) {
		e := entries[n]
		h, _, _, found, err := s.findBatch(e.LastOffset)
		switch {
		case errors.Is(err, ErrCorrupt):
			// The marker's bytes are damaged (a corrupt range no read
			// serves): nothing to check it against.
		case err != nil:
			return n, false, fmt.Errorf("check aborted transaction %+v: %w", e, err)
		case !found || h.BaseOffset > e.LastOffset:
			return n, false, nil // no batch holds the offset: the marker was lost
		case h.BaseOffset != e.LastOffset || !h.IsControl() || h.ProducerID != e.ProducerID:
			return n, true, nil
		}
		n++
	}
	return n, false, nil
}

// readTxnIndexFile reads the valid entries of segment base's index file
// (markers in [base, end)) without changing it.
func (l *Log) readTxnIndexFile(base, end int64) (txnIndexFile, txnCut, error) {
	out := txnIndexFile{base: base}
	path := l.txnIndexPath(base)
	f, err := l.st.fs.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return out, txnCutNone, nil
	}
	if err != nil {
		return out, txnCutNone, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return out, txnCutNone, fmt.Errorf("load %s: %w", path, err)
	}
	logBytes := int64(math.MaxInt64) // the segment is gone: the offsets bound it alone
	if fi, err := l.st.fs.Stat(filepath.Join(l.dir, segmentFileName(base, logExt))); err == nil {
		logBytes = fi.Size
	}
	b := make([]byte, txnIndexReadLimit(size, base, end, logBytes))
	if n, err := f.ReadAt(b, 0); err != nil && n != len(b) {
		return out, txnCutNone, fmt.Errorf("load %s: %w", path, err)
	}
	entries, cut := decodeTxnEntries(b, base, end)
	if cut == txnCutNone && int64(len(b)) < size {
		cut = txnCutInvalid // more entries than a segment can hold
	}
	out.entries, out.cut = entries, cut != txnCutNone
	return out, cut, nil
}

// cutTxnIndexFileAt truncates segment base's index file to size bytes, if
// it is longer, and fsyncs it.
func (l *Log) cutTxnIndexFileAt(base, size int64) error {
	path := l.txnIndexPath(base)
	f, err := l.st.fs.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	cur, err := f.Size()
	if err == nil && cur > size {
		if err = f.Truncate(size); err == nil {
			err = f.SyncData()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cut %s: %w", path, err)
	}
	return nil
}

// checkTxnEntries checks the entries an append passes: sorted, each
// marker offset among those [first, last] the append writes.
func checkTxnEntries(entries []AbortedTxn, first, last int64) error {
	prev := int64(-1)
	for _, e := range entries {
		if e.LastOffset < first || e.LastOffset > last || e.LastOffset <= prev || e.FirstOffset > e.LastOffset {
			return fmt.Errorf("log: aborted transaction entry %+v is not a marker of this append [%d, %d] in order", e, first, last)
		}
		prev = e.LastOffset
	}
	return nil
}

// writeTxnEntries appends entries to the index of segment base and
// fsyncs them (and the file's name, when the file is new), before the
// markers they describe are written. Caller holds appendMu.
func (l *Log) writeTxnEntries(base int64, entries []AbortedTxn) error {
	path := l.txnIndexPath(base)
	_, statErr := l.st.fs.Stat(path)
	f, err := l.st.fs.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	size, err := f.Size()
	if err == nil {
		size -= size % txnEntrySize // a torn tail is overwritten
		buf := make([]byte, 0, len(entries)*txnEntrySize)
		for _, e := range entries {
			buf = encodeTxnEntry(buf, e)
		}
		_, err = f.WriteAt(buf, size)
	}
	if err == nil {
		err = f.SyncData()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && statErr != nil {
		// The new file's name must be durable before the markers are
		// written. Syncing the directory also makes durable the names of
		// segments rolled since the flusher last synced it, which it only
		// does after their predecessors' data: do the same, or a crash
		// could keep a segment's name while an earlier one's data is lost.
		if err = l.syncSealed(); err == nil {
			err = SyncDir(l.st.fs, l.dir)
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// syncSealed fsyncs the sealed segments a roll left unsynced (the
// flusher may be syncing them too: harmless). Caller holds appendMu.
func (l *Log) syncSealed() error {
	l.segMu.RLock()
	segs := append([]*segment(nil), l.segments...)
	l.segMu.RUnlock()
	for _, s := range segs {
		if s == l.active || !s.unsynced.Load() {
			continue
		}
		if err := s.syncAll(); err != nil {
			return err
		}
		s.unsynced.Store(false)
	}
	return nil
}

// publishTxnEntries adds appended entries to the in-memory index.
func (l *Log) publishTxnEntries(entries []AbortedTxn) {
	if len(entries) == 0 {
		return
	}
	l.txnMu.Lock()
	l.aborted = append(l.aborted, entries...)
	l.txnMu.Unlock()
}

// AbortedTxns returns the aborted transactions a read_committed fetch of
// [from, upTo) must know: those whose marker is at or after from and whose
// first offset is below upTo, in marker order. As Kafka's
// collectAbortedTxns, it stops at the first entry whose last stable offset
// reaches upTo: every transaction aborted later that started below upTo
// was open when that marker was written, which would have held its last
// stable offset below upTo.
func (l *Log) AbortedTxns(from, upTo int64) ([]AbortedTxn, error) {
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	var out []AbortedTxn
	for _, e := range l.aborted[l.txnIndexFrom(from):] {
		if e.FirstOffset < upTo {
			out = append(out, e)
		}
		if e.LastStableOffset >= upTo {
			break
		}
	}
	return out, nil
}

// TruncateAbortedTxns drops the entries whose marker is at or after from,
// in memory and on disk, so that a replay can re-derive them
// (AddAbortedTxns). Until AddAbortedTxns completes that rebuild,
// TxnIndexValidTo is at most from, across a crash too: the lowered mark is
// persisted before any file is cut. Nothing to drop changes nothing.
func (l *Log) TruncateAbortedTxns(from int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.txnMu.Lock()
	n := len(l.aborted) - l.txnIndexFrom(from)
	l.txnMu.Unlock()
	if n == 0 {
		return nil
	}
	if from < l.txnValidTo.Load() {
		if err := writeOffsetCheckpoint(l.st.fs, l.dir, txnIndexValidToFile, max(from, 0)); err != nil {
			return l.fail(fmt.Errorf("persist aborted-transaction index valid-to %d: %w", from, err))
		}
		l.txnValidTo.Store(max(from, 0))
	}
	if err := l.cutTxnIndexFiles(l.dropTxnEntriesFrom(from), from); err != nil {
		return l.fail(err)
	}
	return nil
}

// txnIndexFrom is the position in l.aborted of the first entry whose
// marker is at or after offset. Caller holds txnMu.
func (l *Log) txnIndexFrom(offset int64) int {
	return sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= offset })
}

// dropTxnEntriesFrom forgets, in memory, the entries whose marker is at or
// after from, and returns the bases of the segments whose files held them
// (files of segments since removed map to the last base below them, a
// harmless extra cut). Caller holds appendMu.
func (l *Log) dropTxnEntriesFrom(from int64) []int64 {
	l.txnMu.Lock()
	i := l.txnIndexFrom(from)
	cut := l.aborted[i:]
	l.aborted = l.aborted[:i:i] // a later append reallocates: readers keep their copies
	l.txnMu.Unlock()
	var bases []int64
	for _, e := range cut {
		if b := l.segmentBaseOf(e.LastOffset); len(bases) == 0 || bases[len(bases)-1] != b {
			bases = append(bases, b)
		}
	}
	return bases
}

// cutTxnIndexFiles keeps, in the index files of the segments at bases,
// the entries whose marker is below from. Caller holds appendMu.
func (l *Log) cutTxnIndexFiles(bases []int64, from int64) error {
	for _, base := range bases {
		f, _, err := l.readTxnIndexFile(base, from)
		if err != nil {
			return err
		}
		if f.cut {
			if err := l.cutTxnIndexFileAt(base, int64(len(f.entries))*txnEntrySize); err != nil {
				return err
			}
		}
	}
	return nil
}

// segmentBaseOf is the base of the segment holding offset (or that held
// it, for an offset the caller is cutting: the last base at or below it);
// -1 when offset is below the first segment.
func (l *Log) segmentBaseOf(offset int64) int64 {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	base := int64(-1)
	for _, s := range l.segments {
		if s.base > offset {
			break
		}
		base = s.base
	}
	return base
}

// AddAbortedTxns adds entries a replay re-derived, each to the index file
// of the segment holding its marker, after those the index has; entries
// are sorted by marker, each marker below the log end and in a segment of
// the log. It completes the rebuild TruncateAbortedTxns began (even with
// no entries): the index is complete to the log end again
// (TxnIndexValidTo), persistently once it returns.
func (l *Log) AddAbortedTxns(entries []AbortedTxn) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err := l.failure(); err != nil {
		return err
	}
	l.txnMu.Lock()
	after := int64(-1)
	if n := len(l.aborted); n > 0 {
		after = l.aborted[n-1].LastOffset
	}
	l.txnMu.Unlock()
	leo := l.leo.Load()
	for _, e := range entries {
		if e.LastOffset <= after || e.LastOffset >= leo || e.FirstOffset > e.LastOffset {
			return fmt.Errorf("log: re-derived aborted transaction entry %+v is not after the index's last (%d) and below the log end (%d) in order",
				e, after, leo)
		}
		after = e.LastOffset
	}
	for i := 0; i < len(entries); {
		base := l.segmentBaseOf(entries[i].LastOffset)
		j := i + 1
		for j < len(entries) && l.segmentBaseOf(entries[j].LastOffset) == base {
			j++
		}
		if base >= 0 { // else its segment is gone (retention): nothing reads it
			if err := l.writeTxnEntries(base, entries[i:j]); err != nil {
				return l.fail(err)
			}
			l.publishTxnEntries(entries[i:j])
		}
		i = j
	}
	if l.txnValidTo.Load() != math.MaxInt64 {
		if err := l.clearTxnIndexValidTo(); err != nil {
			return l.fail(err)
		}
	}
	return nil
}

// clearTxnIndexValidTo durably forgets a rebuild in progress: the index is
// complete. Caller holds appendMu (or has the log to itself).
func (l *Log) clearTxnIndexValidTo() error {
	err := l.st.fs.Remove(filepath.Join(l.dir, txnIndexValidToFile))
	if err == nil {
		err = SyncDir(l.st.fs, l.dir)
	} else if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", txnIndexValidToFile, err)
	}
	l.txnValidTo.Store(math.MaxInt64)
	return nil
}

// TxnIndexValidTo is the offset below which the index is known complete:
// every abort marker below it has its entry. Entries are durable before
// their markers, so after a clean close and after a crash alike it is the
// log end; it is lower only while a rebuild is due or under way: after
// TruncateAbortedTxns(from) until AddAbortedTxns (from), or when Open or
// Heal found a segment's index damaged (that segment's base). Either is
// persisted, so a crash keeps it.
func (l *Log) TxnIndexValidTo() int64 { return min(l.txnValidTo.Load(), l.leo.Load()) }

// dropTxnEntriesBelow forgets, in memory, the entries of segments retention
// removed (their files go with the segments).
func (l *Log) dropTxnEntriesBelow(base int64) {
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	if i := l.txnIndexFrom(base); i > 0 {
		l.aborted = append([]AbortedTxn(nil), l.aborted[i:]...)
	}
}
