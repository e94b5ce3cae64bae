package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
// the first entry. Entries are fsynced before the marker's bytes are
// written, so after any crash every marker that survived has its entry;
// an entry whose marker did not survive (at or past the log end after
// recovery) is cut at open, as are torn or invalid tails. Abort markers
// are rare, so an fsync each costs nothing that matters; it makes the
// index complete at every open (TxnIndexValidTo is the log end).
//
// The entries of the whole log are also kept in memory, sorted by marker
// offset (34 bytes each, one per aborted transaction still in the log).

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
func decodeTxnEntries(b []byte, base, end int64) (entries []AbortedTxn, cut bool) {
	last := int64(-1)
	for len(b) >= txnEntrySize {
		e := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
		}
		if binary.BigEndian.Uint16(b) != txnEntryVersion || e.LastOffset < base || e.LastOffset >= end ||
			e.LastOffset <= last || e.FirstOffset > e.LastOffset {
			return entries, true
		}
		entries = append(entries, e)
		last = e.LastOffset
		b = b[txnEntrySize:]
	}
	return entries, len(b) > 0
}

func (l *Log) txnIndexPath(base int64) string {
	return filepath.Join(l.dir, segmentFileName(base, txnIndexExt))
}

// loadTxnIndex reads the index files of the log's segments into memory,
// cutting what is invalid or past the log end. Called by Open and Heal,
// with the log to itself.
func (l *Log) loadTxnIndex() error {
	l.segMu.RLock()
	bases := make([]int64, len(l.segments))
	for i, s := range l.segments {
		bases[i] = s.base
	}
	l.segMu.RUnlock()
	leo := l.leo.Load()
	var all []AbortedTxn
	for i, base := range bases {
		end := leo
		if i+1 < len(bases) {
			end = min(end, bases[i+1])
		}
		path := l.txnIndexPath(base)
		f, err := l.st.fs.OpenFile(path, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		entries, err := readTxnIndex(f, base, end)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("load %s: %w", path, err)
		}
		all = append(all, entries...)
	}
	l.txnMu.Lock()
	l.aborted = all
	l.txnMu.Unlock()
	return nil
}

// readTxnIndex reads f's valid entries and cuts the file after them.
func readTxnIndex(f interface {
	ReadAt([]byte, int64) (int, error)
	Size() (int64, error)
	Truncate(int64) error
	SyncData() error
}, base, end int64) ([]AbortedTxn, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > maxTxnIndexMemory {
		size = maxTxnIndexMemory
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); err != nil && n != len(b) {
		return nil, err
	}
	entries, cut := decodeTxnEntries(b, base, end)
	if cut {
		if err := f.Truncate(int64(len(entries)) * txnEntrySize); err != nil {
			return nil, err
		}
		if err := f.SyncData(); err != nil {
			return nil, err
		}
	}
	return entries, nil
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
		err = l.st.fs.SyncDir(l.dir)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
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
	i := sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= from })
	var out []AbortedTxn
	for _, e := range l.aborted[i:] {
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
// in memory and on disk (a follower's truncation, a replay that re-derives
// them).
func (l *Log) TruncateAbortedTxns(from int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.truncateTxnIndexLocked(from)
}

// truncateTxnIndexLocked is TruncateAbortedTxns; caller holds appendMu
// (or has the log to itself).
func (l *Log) truncateTxnIndexLocked(from int64) error {
	l.txnMu.Lock()
	i := sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= from })
	cut := l.aborted[i:]
	l.aborted = l.aborted[:i:i]
	l.txnMu.Unlock()
	if len(cut) == 0 {
		return nil
	}
	// Rewrite the files that held cut entries: each keeps its entries
	// below from.
	files := map[int64]bool{}
	for _, e := range cut {
		files[l.segmentBaseOf(e.LastOffset)] = true
	}
	for base := range files {
		if err := l.cutTxnIndexFile(base, from); err != nil {
			return err
		}
	}
	return nil
}

// segmentBaseOf is the base of the segment holding offset (or that held
// it, for an offset the caller is cutting: the last base at or below it).
func (l *Log) segmentBaseOf(offset int64) int64 {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	base := int64(0)
	for _, s := range l.segments {
		if s.base > offset {
			break
		}
		base = s.base
	}
	return base
}

// cutTxnIndexFile keeps the entries of segment base's index below from.
func (l *Log) cutTxnIndexFile(base, from int64) error {
	path := l.txnIndexPath(base)
	f, err := l.st.fs.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	_, err = readTxnIndex(f, base, from)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cut %s: %w", path, err)
	}
	return nil
}

// AddAbortedTxns adds entries a replay re-derived (each in the segment of
// its marker), after those the index has.
func (l *Log) AddAbortedTxns(entries []AbortedTxn) error {
	if len(entries) == 0 {
		return nil
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.txnMu.Lock()
	after := int64(-1)
	if n := len(l.aborted); n > 0 {
		after = l.aborted[n-1].LastOffset
	}
	l.txnMu.Unlock()
	for i := 0; i < len(entries); {
		if entries[i].LastOffset <= after {
			return fmt.Errorf("log: re-derived aborted transaction entry %+v is not after the index's last (%d)", entries[i], after)
		}
		base := l.segmentBaseOf(entries[i].LastOffset)
		j := i + 1
		for j < len(entries) && l.segmentBaseOf(entries[j].LastOffset) == base {
			j++
		}
		if err := l.writeTxnEntries(base, entries[i:j]); err != nil {
			return l.fail(err)
		}
		l.publishTxnEntries(entries[i:j])
		after = entries[j-1].LastOffset
		i = j
	}
	return nil
}

// TxnIndexValidTo is the offset below which the index is complete: the
// log end, since entries are durable before their markers (see above).
func (l *Log) TxnIndexValidTo() int64 { return l.leo.Load() }

// dropTxnEntriesBelow forgets, in memory, the entries of segments retention
// removed (their files go with the segments).
func (l *Log) dropTxnEntriesBelow(base int64) {
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	i := sort.Search(len(l.aborted), func(i int) bool { return l.aborted[i].LastOffset >= base })
	if i > 0 {
		l.aborted = append([]AbortedTxn(nil), l.aborted[i:]...)
	}
}
