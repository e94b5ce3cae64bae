package log

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/vfs"
)

// appendAborted appends a one-record batch at the log end standing for an
// abort marker, with its index entry.
func appendAborted(t *testing.T, l *Log, pid, first, lso int64) AbortedTxn {
	t.Helper()
	e := AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: l.LogEndOffset(), LastStableOffset: lso}
	if e.LastStableOffset < 0 {
		e.LastStableOffset = e.LastOffset + 1
	}
	_, err := l.AppendWith([][]byte{markerBatch(pid)}, 0, []AbortedTxn{e})
	require.NoError(t, err)
	return e
}

func appendPlain(t *testing.T, l *Log, n int) {
	t.Helper()
	for range n {
		_, err := l.Append([][]byte{makeBatch(1, 100, 1, 0)}, 0)
		require.NoError(t, err)
	}
}

func TestTxnIndexCollectAcrossSegmentsAndReopen(t *testing.T) {
	fs := vfs.NewMem()
	opts := testOptions(nil)
	opts.FS = fs
	opts.SegmentBytes = 1024 // a few batches per segment
	dir := "/p"
	l, err := Open(dir, opts)
	require.NoError(t, err)

	appendPlain(t, l, 3)                // 0..2: transaction data of producer 7 and 8
	a := appendAborted(t, l, 7, 0, 1)   // 3: producer 8's transaction (from 1) still open
	appendPlain(t, l, 10)               // 4..13
	b := appendAborted(t, l, 8, 1, -1)  // 14
	appendPlain(t, l, 10)               // 15..24
	c := appendAborted(t, l, 9, 20, -1) // 25
	require.Greater(t, len(l.SegmentBases()), 2, "the entries are in several segments")

	check := func(l *Log) {
		t.Helper()
		got, err := l.AbortedTxns(0, 30)
		require.NoError(t, err)
		require.Equal(t, []AbortedTxn{a, b, c}, got)
		got, err = l.AbortedTxns(4, 30) // a's marker is before the fetch
		require.NoError(t, err)
		require.Equal(t, []AbortedTxn{b, c}, got)
		got, err = l.AbortedTxns(0, 1) // only what started below 1; b's LSO (15) >= 1 stops the search
		require.NoError(t, err)
		require.Equal(t, []AbortedTxn{a}, got)
		got, err = l.AbortedTxns(26, 40)
		require.NoError(t, err)
		require.Empty(t, got)
	}
	check(l)
	require.NoError(t, l.Close())
	l, err = Open(dir, opts)
	require.NoError(t, err)
	check(l)
	require.Equal(t, l.LogEndOffset(), l.TxnIndexValidTo())

	// Truncation drops the entries of markers cut, on disk too.
	require.NoError(t, l.TruncateTo(c.LastOffset))
	got, err := l.AbortedTxns(0, 100)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a, b}, got)
	require.NoError(t, l.Close())
	l, err = Open(dir, opts)
	require.NoError(t, err)
	got, err = l.AbortedTxns(0, 100)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a, b}, got)

	// A new abort at the cut offset is indexed anew.
	appendPlain(t, l, 0)
	d := appendAborted(t, l, 10, 24, -1)
	got, err = l.AbortedTxns(0, 100)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a, b, d}, got)
	require.NoError(t, l.Close())
}

// Entries are durable before their markers: a crash at any point leaves
// an entry for every marker that survived, and none past the log end.
func TestTxnIndexCrash(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(nil)
	opts.FS = mem
	opts.FlushAlways = false // markers may be lost in the crash
	l, err := Open(crashDir, opts)
	require.NoError(t, err)
	appendPlain(t, l, 2)
	var entries []AbortedTxn
	for i := range 5 {
		entries = append(entries, appendAborted(t, l, int64(i), l.LogEndOffset()-1, -1))
		appendPlain(t, l, 1)
	}
	img := mem.Crash(vfs.CrashOptions{})
	_ = l.Close()
	opts.FS = img
	l, err = Open(crashDir, opts)
	require.NoError(t, err)
	defer l.Close()
	got, err := l.AbortedTxns(0, 1<<40)
	require.NoError(t, err)
	for _, e := range got {
		require.Less(t, e.LastOffset, l.LogEndOffset(), "no entry past the log end")
	}
	var want []AbortedTxn
	for _, e := range entries {
		if e.LastOffset < l.LogEndOffset() {
			want = append(want, e)
		}
	}
	require.Equal(t, want, got, "every surviving marker has its entry")
}

// A torn or garbage index file is cut at its last valid entry, never a
// failure to open.
func TestTxnIndexTornAndGarbage(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(nil)
	opts.FS = mem
	l, err := Open(crashDir, opts)
	require.NoError(t, err)
	appendPlain(t, l, 1)
	a := appendAborted(t, l, 1, 0, -1)
	appendAborted(t, l, 2, 1, -1)
	require.NoError(t, l.Close())
	path := filepath.Join(crashDir, segmentFileName(0, txnIndexExt))
	f, err := mem.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	// Tear the second entry and corrupt its version.
	_, err = f.WriteAt([]byte{0xff, 0xff}, txnEntrySize)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(txnEntrySize+20))
	require.NoError(t, f.Close())
	l, err = Open(crashDir, opts)
	require.NoError(t, err)
	defer l.Close()
	got, err := l.AbortedTxns(0, 100)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a}, got)
}

func FuzzDecodeTxnEntries(f *testing.F) {
	f.Add(encodeTxnEntry(nil, AbortedTxn{ProducerID: 1, FirstOffset: 2, LastOffset: 3, LastStableOffset: 4}), int64(0), int64(10))
	f.Add([]byte{0, 0, 1}, int64(0), int64(1))
	f.Fuzz(func(t *testing.T, b []byte, base, end int64) {
		entries, _ := decodeTxnEntries(b, base, end)
		prev := int64(-1)
		for _, e := range entries {
			if e.LastOffset < base || e.LastOffset >= end || e.LastOffset <= prev || e.FirstOffset > e.LastOffset {
				t.Fatalf("invalid entry accepted: %+v", e)
			}
			prev = e.LastOffset
		}
		if len(entries)*txnEntrySize > len(b) {
			t.Fatal("more entries than bytes")
		}
	})
}

// txnHarness drives a log with abort markers (real control batches, one
// producer id each) and remembers every entry it handed the log, by
// producer id, so a reopened log can be checked against the markers it
// still holds.
type txnHarness struct {
	t     *testing.T
	l     *Log
	truth map[int64]AbortedTxn // pid -> the entry its marker was appended with
	live  []AbortedTxn         // entries whose markers are in the log now, in order
	pid   int64
}

func newTxnHarness(t *testing.T, l *Log) *txnHarness {
	return &txnHarness{t: t, l: l, truth: map[int64]AbortedTxn{}, live: []AbortedTxn{}, pid: 1000}
}

func markerBatch(pid int64) []byte {
	return batch.BuildEndTxnMarker(pid, 0, batch.EndTxnMarker{}, 1)
}

// abort appends an abort marker (after plain batches, in the same call)
// for a transaction that started back records ago.
func (h *txnHarness) abort(plain int, back int64) AbortedTxn {
	h.t.Helper()
	h.pid++
	batches := make([][]byte, 0, plain+1)
	for range plain {
		batches = append(batches, makeBatch(1, 100, 1, 0))
	}
	batches = append(batches, markerBatch(h.pid))
	at := h.l.LogEndOffset() + int64(plain)
	e := AbortedTxn{ProducerID: h.pid, FirstOffset: max(at-back, 0), LastOffset: at, LastStableOffset: at + 1}
	res, err := h.l.AppendWith(batches, 0, []AbortedTxn{e})
	require.NoError(h.t, err)
	require.Equal(h.t, at, res.LastOffset)
	h.truth[h.pid] = e
	h.live = append(h.live, e)
	return e
}

// truncate cuts the log at offset, as a follower's truncation does.
func (h *txnHarness) truncate(offset int64) {
	h.t.Helper()
	require.NoError(h.t, h.l.TruncateTo(offset))
	i := len(h.live)
	for i > 0 && h.live[i-1].LastOffset >= offset {
		i--
	}
	h.live = h.live[:i]
}

// rebuild does what the partition does when it re-derives the index from
// from on: cut it there, then hand back the entries a replay finds.
func (h *txnHarness) rebuild(from int64) {
	h.t.Helper()
	require.NoError(h.t, h.l.TruncateAbortedTxns(from))
	var again []AbortedTxn
	for _, e := range h.live {
		if e.LastOffset >= from {
			again = append(again, e)
		}
	}
	require.NoError(h.t, h.l.AddAbortedTxns(again))
}

// checkTxnIndex checks an opened log's index against the markers it holds
// (at or after its log start): every entry names a marker that is there,
// exactly as appended, and every marker below TxnIndexValidTo has its
// entry. It returns the number of markers held.
func checkTxnIndex(t *testing.T, l *Log, truth map[int64]AbortedTxn, what string) int {
	t.Helper()
	start, leo, validTo := l.LogStartOffset(), l.LogEndOffset(), l.TxnIndexValidTo()
	require.LessOrEqual(t, validTo, leo, what)
	markers := map[int64]int64{} // offset -> pid
	require.NoError(t, l.VerifiedBatches(start, func(h batch.Header, _ []byte) bool {
		if h.IsControl() && h.BaseOffset >= start {
			markers[h.BaseOffset] = h.ProducerID
		}
		return true
	}), what)
	got, err := l.AbortedTxns(start, math.MaxInt64)
	require.NoError(t, err, what)
	have := map[int64]bool{}
	for _, e := range got {
		require.Less(t, e.LastOffset, leo, "%s: entry %+v past the log end", what, e)
		pid, ok := markers[e.LastOffset]
		if !ok && slices.ContainsFunc(l.CorruptRanges(), func(r CorruptRange) bool {
			return r.FromOffset <= e.LastOffset && e.LastOffset < r.ToOffset
		}) {
			// The marker's bytes are damaged (a crash that lost writes
			// below what the log took for flushed): unreadable, but the
			// entry keeps a read_committed consumer from taking the
			// transaction's records for committed.
			require.Equal(t, truth[e.ProducerID], e, "%s: entry changed", what)
			have[e.ProducerID] = true
			continue
		}
		require.True(t, ok, "%s: entry %+v names no marker (log [%d, %d), markers %v)", what, e, start, leo, markers)
		require.Equal(t, pid, e.ProducerID, "%s: entry %+v names another producer's marker", what, e)
		require.Equal(t, truth[pid], e, "%s: entry changed", what)
		have[pid] = true
	}
	for off, pid := range markers {
		if off < validTo {
			require.True(t, have[pid], "%s: marker at %d (pid %d) below TxnIndexValidTo %d has no entry", what, off, pid, validTo)
		}
	}
	return len(markers)
}

func txnFiles(t *testing.T, fsys vfs.FS, dir string) map[int64][]AbortedTxn {
	t.Helper()
	entries, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	out := map[int64][]AbortedTxn{}
	for _, de := range entries {
		base, ext, ok := parseSegmentFileName(de.Name)
		if !ok || ext != txnIndexExt {
			continue
		}
		b, err := vfs.ReadFile(fsys, filepath.Join(dir, de.Name), 1<<20)
		require.NoError(t, err)
		es, cut := decodeTxnEntries(b, base, math.MaxInt64)
		require.Equal(t, txnCutNone, cut, de.Name)
		out[base] = es
	}
	return out
}

func TestTxnIndexCollect(t *testing.T) {
	mem, _ := crashFS(t)
	opts := memOptions(mem)
	opts.SegmentBytes = 1024
	l, err := Open(crashDir, opts)
	require.NoError(t, err)
	appendPlain(t, l, 3)                                                                   // 0..2
	a := appendAborted(t, l, 7, 0, 1)                                                      // 3: producer 8's transaction (from 1) still open
	appendPlain(t, l, 10)                                                                  // 4..13
	b := appendAborted(t, l, 8, 1, -1)                                                     // 14, LSO 15
	appendPlain(t, l, 10)                                                                  // 15..24
	c := appendAborted(t, l, 9, 2, -1)                                                     // 25, LSO 26
	appendPlain(t, l, 14)                                                                  // 26..39
	d := appendAborted(t, l, 10, 30, -1)                                                   // 40, LSO 41
	e := AbortedTxn{ProducerID: 11, FirstOffset: 38, LastOffset: 41, LastStableOffset: 42} // same segment as d
	_, err = l.AppendWith([][]byte{markerBatch(11)}, 0, []AbortedTxn{e})
	require.NoError(t, err)
	bases := l.SegmentBases()
	segOf := func(off int64) int64 {
		return bases[sort.Search(len(bases), func(i int) bool { return bases[i] > off })-1]
	}
	require.Len(t, map[int64]bool{segOf(3): true, segOf(14): true, segOf(25): true, segOf(40): true}, 4, "one marker a segment")
	require.Equal(t, segOf(40), segOf(41))

	cases := []struct {
		name       string
		from, upTo int64
		want       []AbortedTxn
	}{
		{"everything", 0, 100, []AbortedTxn{a, b, c, d, e}},
		{"across segments from a marker", 3, 100, []AbortedTxn{a, b, c, d, e}},
		{"markers before from are left out", 4, 100, []AbortedTxn{b, c, d, e}},
		{"inside one segment", 14, 15, []AbortedTxn{b}},
		{"two entries of one segment", 40, 42, []AbortedTxn{d, e}},
		{"first offsets at or past upTo are left out", 26, 30, nil},
		{"first offset below upTo", 26, 31, []AbortedTxn{d}},
		// b's last stable offset (15) reaches 5: nothing aborted after it
		// can have started below 5, so c is not looked at (its made-up
		// first offset 2 would otherwise qualify).
		{"the last stable offset stops the search", 0, 5, []AbortedTxn{a, b}},
		{"a's LSO (1) does not stop a search to 2", 0, 2, []AbortedTxn{a, b}},
		{"past every marker", 42, 100, nil},
	}
	check := func(l *Log, when string) {
		for _, tc := range cases {
			got, err := l.AbortedTxns(tc.from, tc.upTo)
			require.NoError(t, err)
			require.Equal(t, tc.want, got, "%s: %s [%d, %d)", when, tc.name, tc.from, tc.upTo)
		}
	}
	check(l, "appended")
	files := txnFiles(t, mem, crashDir)
	require.Equal(t, map[int64][]AbortedTxn{segOf(3): {a}, segOf(14): {b}, segOf(25): {c}, segOf(40): {d, e}}, files,
		"each entry is in its marker's segment")

	require.NoError(t, l.Close())
	l, err = Open(crashDir, opts)
	require.NoError(t, err)
	check(l, "reopened after a clean close")
	require.Equal(t, l.LogEndOffset(), l.TxnIndexValidTo())

	// A power cut: appends with FlushAlways were all durable.
	img := mem.Crash(vfs.CrashOptions{})
	l.crash()
	opts.FS = img
	l, err = Open(crashDir, opts)
	require.NoError(t, err)
	defer l.Close()
	require.True(t, l.Stats().UncleanOpen)
	check(l, "reopened after a crash")
	require.Equal(t, l.LogEndOffset(), l.TxnIndexValidTo())
}

func TestTxnIndexAppendRefusesEntriesNotOfTheAppend(t *testing.T) {
	mem := vfs.NewMem()
	l, err := Open("/p", memOptions(mem))
	require.NoError(t, err)
	defer l.Close()
	appendPlain(t, l, 5)
	// The append below writes offsets 5 and 6.
	entry := func(first, last int64) AbortedTxn {
		return AbortedTxn{ProducerID: 1, FirstOffset: first, LastOffset: last, LastStableOffset: last + 1}
	}
	for _, tc := range []struct {
		name    string
		entries []AbortedTxn
	}{
		{"marker before the append", []AbortedTxn{entry(0, 4)}},
		{"marker after the append", []AbortedTxn{entry(0, 7)}},
		{"out of order", []AbortedTxn{entry(0, 6), entry(0, 5)}},
		{"twice the same marker", []AbortedTxn{entry(0, 5), entry(1, 5)}},
		{"first offset after the marker", []AbortedTxn{entry(6, 5)}},
	} {
		_, err := l.AppendWith([][]byte{makeBatch(1, 10, 1, 1), makeBatch(1, 10, 1, 2)}, 0, tc.entries)
		require.Error(t, err, tc.name)
		require.Equal(t, int64(5), l.LogEndOffset(), "%s: nothing appended", tc.name)
		require.False(t, l.Stats().Failed, tc.name)
	}
	require.Empty(t, txnFiles(t, mem, "/p"), "no index file for refused entries")

	// Two markers in one append.
	e1, e2 := entry(0, 5), entry(2, 6)
	e2.ProducerID = 2
	_, err = l.AppendWith([][]byte{makeBatch(1, 10, 1, 1), makeBatch(1, 10, 1, 2)}, 0, []AbortedTxn{e1, e2})
	require.NoError(t, err)
	got, err := l.AbortedTxns(0, 100)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{e1, e2}, got)
}

func TestTxnIndexAppendReplicatedWith(t *testing.T) {
	mem := vfs.NewMem()
	l, err := Open("/p", memOptions(mem))
	require.NoError(t, err)
	defer l.Close()
	// A follower's append: offsets given by the leader, with a gap.
	b0, b1 := makeBatch(2, 10, 1, 1), markerBatch(5)
	batch.SetBaseOffset(b0, 10)
	batch.SetBaseOffset(b1, 20)
	e := AbortedTxn{ProducerID: 5, FirstOffset: 10, LastOffset: 20, LastStableOffset: 21}
	_, err = l.AppendReplicatedWith([][]byte{b0, b1}, []AbortedTxn{{ProducerID: 5, LastOffset: 22}})
	require.Error(t, err, "a marker offset past the append")
	res, err := l.AppendReplicatedWith([][]byte{b0, b1}, []AbortedTxn{e})
	require.NoError(t, err)
	require.Equal(t, int64(20), res.LastOffset)
	got, err := l.AbortedTxns(0, 100)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{e}, got)
	require.Equal(t, map[int64][]AbortedTxn{l.SegmentBases()[0]: {e}}, txnFiles(t, mem, "/p"))
}

// A roll decided inside the append that writes a marker puts the entry in
// the new segment, with its marker, whatever rolled it.
func TestTxnIndexEntryGoesWithARolledMarker(t *testing.T) {
	for _, byAge := range []bool{false, true} {
		t.Run(map[bool]string{false: "size", true: "age"}[byAge], func(t *testing.T) {
			clk := newFakeClock()
			mem := vfs.NewMem()
			opts := testOptions(clk)
			opts.FS = mem
			opts.SegmentBytes = 1 << 20
			if !byAge {
				opts.SegmentBytes = 1024
			}
			opts.SegmentAge = time.Hour
			l, err := Open("/p", opts)
			require.NoError(t, err)
			defer l.Close()
			h := newTxnHarness(t, l)
			plain := 1
			if !byAge {
				plain = 5 // 5 x ~170 bytes: the marker's append does not fit
			} else {
				clk.Advance(2 * time.Hour)
			}
			appendPlain(t, l, plain)
			if byAge {
				clk.Advance(2 * time.Hour)
			}
			before := l.SegmentBases()
			e := h.abort(1, 2)
			bases := l.SegmentBases()
			require.Len(t, bases, len(before)+1, "the append rolled")
			require.Equal(t, map[int64][]AbortedTxn{bases[len(bases)-1]: {e}}, txnFiles(t, mem, "/p"))
			require.Equal(t, bases[len(bases)-1], e.LastOffset-1, "the new segment starts with the append")
		})
	}
}

// Retention and DeleteRecordsBefore remove the index files of the segments
// they delete; an aborted transaction that started in one of them but
// whose marker survives keeps its entry.
func TestTxnIndexRetention(t *testing.T) {
	for _, byRetention := range []bool{false, true} {
		t.Run(map[bool]string{false: "DeleteRecordsBefore", true: "EnforceRetention"}[byRetention], func(t *testing.T) {
			mem := vfs.NewMem()
			opts := memOptions(mem)
			opts.SegmentBytes = 1024
			l, err := Open("/p", opts)
			require.NoError(t, err)
			h := newTxnHarness(t, l)
			gone := h.abort(2, 1)
			appendPlain(t, l, 6)
			spanning := h.abort(0, 8) // started in the first segment
			appendPlain(t, l, 6)
			later := h.abort(0, 1)
			appendPlain(t, l, 2)
			require.NoError(t, l.WaitDurable(context.Background(), l.LogEndOffset()-1))
			bases := l.SegmentBases()
			require.Greater(t, len(bases), 3)
			require.Less(t, gone.LastOffset, bases[1])
			require.Less(t, spanning.FirstOffset, bases[1])
			require.GreaterOrEqual(t, spanning.LastOffset, bases[1])

			if byRetention {
				l.SetHighWatermark(l.LogEndOffset())
				o := *l.opts.Load()
				fi, err := mem.Stat(filepath.Join("/p", segmentFileName(bases[0], logExt)))
				require.NoError(t, err)
				o.RetentionBytes = l.Stats().Size - fi.Size // exactly the first segment must go
				require.NoError(t, l.SetOptions(o))
				n, err := l.EnforceRetention()
				require.NoError(t, err)
				require.Equal(t, 1, n)
			} else {
				_, err := l.DeleteRecordsBefore(bases[1])
				require.NoError(t, err)
			}
			require.Equal(t, bases[1:], l.SegmentBases())
			got, err := l.AbortedTxns(0, math.MaxInt64)
			require.NoError(t, err)
			require.Equal(t, []AbortedTxn{spanning, later}, got)
			files := txnFiles(t, mem, "/p")
			require.NotContains(t, files, bases[0], "the deleted segment's index went with it")
			require.Len(t, files, 2)

			require.NoError(t, l.Close())
			l, err = Open("/p", opts)
			require.NoError(t, err)
			defer l.Close()
			got, err = l.AbortedTxns(l.LogStartOffset(), math.MaxInt64)
			require.NoError(t, err)
			require.Equal(t, []AbortedTxn{spanning, later}, got)
		})
	}
}

func TestTxnIndexTruncate(t *testing.T) {
	// Markers at 2, 9, 16, 23 (segments of ~6 batches); the cases cut at
	// or around them.
	build := func(t *testing.T, mem *vfs.MemFS) (*Log, *txnHarness, Options) {
		opts := memOptions(mem)
		opts.SegmentBytes = 1024
		l, err := Open("/p", opts)
		require.NoError(t, err)
		h := newTxnHarness(t, l)
		for range 4 {
			h.abort(2, 2)
			appendPlain(t, l, 4)
		}
		return l, h, opts
	}
	for _, tc := range []struct {
		name  string
		to    int64
		keep  int // entries left
		files int // index files left
	}{
		{"after every marker", 26, 4, 4},
		{"at the last marker", 23, 3, 3},
		{"just past a marker", 17, 3, 3},
		{"at a marker inside a segment", 9, 1, 1},
		{"to the start", 0, 0, 0},
		{"into the first segment", 3, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			l, h, opts := build(t, mem)
			h.truncate(tc.to)
			require.Equal(t, tc.to, l.LogEndOffset())
			got, err := l.AbortedTxns(0, math.MaxInt64)
			require.NoError(t, err)
			require.Len(t, h.live, tc.keep)
			require.Equal(t, h.live, slices.Clip(append([]AbortedTxn{}, got...)))
			files := txnFiles(t, mem, "/p")
			onDisk, nonEmpty := []AbortedTxn{}, 0
			for _, b := range slices.Sorted(maps.Keys(files)) {
				onDisk = append(onDisk, files[b]...)
				if len(files[b]) > 0 {
					nonEmpty++
				}
			}
			require.Equal(t, h.live, onDisk, "the files are cut too")
			require.Equal(t, tc.files, nonEmpty)

			// A new abort at the cut offset is indexed anew.
			h.abort(0, 0)
			require.NoError(t, l.Close())
			l, err = Open("/p", opts)
			require.NoError(t, err)
			defer l.Close()
			got, err = l.AbortedTxns(0, math.MaxInt64)
			require.NoError(t, err)
			require.Equal(t, h.live, got)
			require.Equal(t, l.LogEndOffset(), l.TxnIndexValidTo())
		})
	}

	t.Run("fully", func(t *testing.T) {
		mem := vfs.NewMem()
		l, h, opts := build(t, mem)
		require.NoError(t, l.TruncateAbortedTxns(10)) // a rebuild due: cleared too
		require.Equal(t, int64(10), l.TxnIndexValidTo())
		require.NoError(t, l.TruncateFullyAndStartAt(100))
		got, err := l.AbortedTxns(0, math.MaxInt64)
		require.NoError(t, err)
		require.Empty(t, got)
		require.Empty(t, txnFiles(t, mem, "/p"))
		require.Equal(t, int64(100), l.TxnIndexValidTo())
		h.live = h.live[:0]
		e := h.abort(1, 1)
		require.NoError(t, l.Close())
		l, err = Open("/p", opts)
		require.NoError(t, err)
		defer l.Close()
		got, err = l.AbortedTxns(0, math.MaxInt64)
		require.NoError(t, err)
		require.Equal(t, []AbortedTxn{e}, got)
		require.Equal(t, l.LogEndOffset(), l.TxnIndexValidTo())
	})
}

// Damage Open finds: a torn tail or entries past the log end are crash
// leftovers (cut, the index stays complete); anything an append never
// writes is damage (cut, and TxnIndexValidTo drops to the segment's base
// until a rebuild), and stays so across reopens until AddAbortedTxns.
func TestTxnIndexDamageAtOpen(t *testing.T) {
	// Segment 0 holds markers at 2 and 5; the last segment one more.
	type file = []byte
	enc := func(es ...AbortedTxn) file {
		var b []byte
		for _, e := range es {
			b = encodeTxnEntry(b, e)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		// damage returns the new contents of the first (sealed) and the
		// last segment's files, given their entries (a, b and c).
		damage  func(first, last []AbortedTxn) (file, file)
		keep    []int // of a, b, c: the entries left
		lowered int   // the segment (0, 1) TxnIndexValidTo drops to the base of; -1: not lowered
	}{
		{"intact", func(f, l []AbortedTxn) (file, file) { return enc(f...), enc(l...) }, []int{0, 1, 2}, -1},
		{"torn tail", func(f, l []AbortedTxn) (file, file) {
			return enc(f...), append(enc(l...), enc(AbortedTxn{ProducerID: 9, LastOffset: 100})[:20]...)
		}, []int{0, 1, 2}, -1},
		{"entries past the log end", func(f, l []AbortedTxn) (file, file) {
			e := l[0]
			e.LastOffset += 100
			e2 := e
			e2.LastOffset++
			return enc(f...), enc(l[0], e, e2)
		}, []int{0, 1, 2}, -1},
		{"torn tail of a sealed segment", func(f, l []AbortedTxn) (file, file) { return enc(f...)[:50], enc(l...) }, []int{0, 2}, 0},
		{"bad version", func(f, l []AbortedTxn) (file, file) {
			b := enc(f...)
			b[txnEntrySize+1] = 1
			return b, enc(l...)
		}, []int{0, 2}, 0},
		{"marker below the segment base", func(f, l []AbortedTxn) (file, file) { return enc(f...), enc(f[1], l[0]) }, []int{0, 1}, 1},
		{"markers out of order", func(f, l []AbortedTxn) (file, file) { return enc(f[1], f[0]), enc(l...) }, []int{1, 2}, 0},
		{"marker past a sealed segment's end", func(f, l []AbortedTxn) (file, file) { return enc(f[0], l[0], f[1]), enc(l...) }, []int{0, 2}, 0},
		{"first offset after the marker", func(f, l []AbortedTxn) (file, file) {
			e := f[0]
			e.FirstOffset = e.LastOffset + 1
			return enc(e, f[1]), enc(l...)
		}, []int{2}, 0},
		{"garbage far larger than a segment's offsets", func(f, l []AbortedTxn) (file, file) {
			return enc(f...), append(enc(l...), bytes.Repeat([]byte{0xa5}, 1<<16)...)
		}, []int{0, 1, 2}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			opts := memOptions(mem)
			opts.SegmentBytes = 1024
			l, err := Open("/p", opts)
			require.NoError(t, err)
			h := newTxnHarness(t, l)
			a := h.abort(2, 2)
			b := h.abort(2, 1)
			appendPlain(t, l, 4)
			c := h.abort(1, 3)
			appendPlain(t, l, 1)
			bases := l.SegmentBases()
			require.Len(t, bases, 2)
			require.Less(t, b.LastOffset, bases[1])
			require.GreaterOrEqual(t, c.LastOffset, bases[1])
			require.NoError(t, l.Close())

			first, last := tc.damage([]AbortedTxn{a, b}, []AbortedTxn{c})
			for i, data := range [][]byte{first, last} {
				f, err := mem.OpenFile(filepath.Join("/p", segmentFileName(bases[i], txnIndexExt)), os.O_RDWR|os.O_TRUNC, 0)
				require.NoError(t, err)
				_, err = f.WriteAt(data, 0)
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}

			all := []AbortedTxn{a, b, c}
			want := []AbortedTxn{}
			for _, k := range tc.keep {
				want = append(want, all[k])
			}
			for i := range 2 { // the second open finds the files cut, the mark persisted
				l, err = Open("/p", opts)
				require.NoError(t, err)
				got, err := l.AbortedTxns(0, math.MaxInt64)
				require.NoError(t, err)
				require.Equal(t, want, slices.Clip(append([]AbortedTxn{}, got...)), "open %d", i)
				if tc.lowered >= 0 {
					require.Equal(t, bases[tc.lowered], l.TxnIndexValidTo(), "open %d", i)
				} else {
					require.Equal(t, l.LogEndOffset(), l.TxnIndexValidTo(), "open %d", i)
				}
				checkTxnIndex(t, l, h.truth, tc.name)
				require.NoError(t, l.Close())
			}

			// The partition's rebuild brings everything back.
			l, err = Open("/p", opts)
			require.NoError(t, err)
			h.l = l
			h.rebuild(l.TxnIndexValidTo())
			require.Equal(t, l.LogEndOffset(), l.TxnIndexValidTo())
			require.NoError(t, l.Close())
			l, err = Open("/p", opts)
			require.NoError(t, err)
			defer l.Close()
			require.Equal(t, l.LogEndOffset(), l.TxnIndexValidTo())
			got, err := l.AbortedTxns(0, math.MaxInt64)
			require.NoError(t, err)
			require.Equal(t, all, got, "rebuilt, or nothing was lost")
		})
	}
}

// TruncateAbortedTxns lowers TxnIndexValidTo until AddAbortedTxns completes
// the rebuild, persistently; AddAbortedTxns checks what it is given.
func TestTxnIndexRebuild(t *testing.T) {
	mem, _ := crashFS(t)
	opts := memOptions(mem)
	opts.SegmentBytes = 1024
	l, err := Open(crashDir, opts)
	require.NoError(t, err)
	h := newTxnHarness(t, l)
	for range 6 {
		h.abort(2, 2)
	}
	leo := l.LogEndOffset()

	require.NoError(t, l.TruncateAbortedTxns(leo), "nothing to cut")
	require.Equal(t, leo, l.TxnIndexValidTo())
	require.NoError(t, l.TruncateAbortedTxns(8))
	require.Equal(t, int64(8), l.TxnIndexValidTo())
	got, err := l.AbortedTxns(0, math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, h.live[:2], got)

	// A crash before the rebuild completes keeps it due.
	img := mem.Crash(vfs.CrashOptions{})
	l.crash()
	o := opts
	o.FS = img
	l2, err := Open(crashDir, o)
	require.NoError(t, err)
	require.Equal(t, int64(8), l2.TxnIndexValidTo())
	checkTxnIndex(t, l2, h.truth, "crashed mid-rebuild")
	require.NoError(t, l2.Close())

	l, err = Open(crashDir, opts)
	require.NoError(t, err)
	defer l.Close()
	h.l = l
	require.Equal(t, int64(8), l.TxnIndexValidTo())
	for _, tc := range []struct {
		name    string
		entries []AbortedTxn
	}{
		{"not after the index's last", h.live[1:3]},
		{"out of order", []AbortedTxn{h.live[3], h.live[2]}},
		{"past the log end", []AbortedTxn{{ProducerID: 1, FirstOffset: leo, LastOffset: leo, LastStableOffset: leo + 1}}},
	} {
		require.Error(t, l.AddAbortedTxns(tc.entries), tc.name)
		require.Equal(t, int64(8), l.TxnIndexValidTo(), tc.name)
	}
	require.NoError(t, l.AddAbortedTxns(h.live[2:]))
	require.Equal(t, leo, l.TxnIndexValidTo())
	checkTxnIndex(t, l, h.truth, "rebuilt")
	_, err = mem.Stat(filepath.Join(crashDir, txnIndexValidToFile))
	require.ErrorIs(t, err, fs.ErrNotExist)

	// An empty rebuild completes too.
	require.NoError(t, l.TruncateAbortedTxns(leo-4)) // the entry of the marker at leo-3
	require.Equal(t, leo-4, l.TxnIndexValidTo())
	h.truncate(leo - 3) // and the marker go
	require.Equal(t, leo-4, l.TxnIndexValidTo())
	require.NoError(t, l.AddAbortedTxns(nil))
	require.Equal(t, l.LogEndOffset(), l.TxnIndexValidTo())
}

// A marker whose append fails after its entry was written leaves no entry
// once the log heals.
func TestTxnIndexHealAfterFailedMarker(t *testing.T) {
	mem := vfs.NewMem()
	faults := vfs.NewFaults(mem)
	var armed atomic.Bool
	faults.SetInjector(func(op vfs.Op, path string) error {
		if armed.Load() && op == vfs.OpWrite && strings.HasSuffix(path, logExt) {
			return syscall.EIO
		}
		return nil
	})
	l, err := Open("/p", memOptions(faults))
	require.NoError(t, err)
	defer l.Close()
	h := newTxnHarness(t, l)
	a := h.abort(1, 1)
	require.NoError(t, l.WaitDurable(context.Background(), a.LastOffset))
	armed.Store(true)
	_, err = l.AppendWith([][]byte{markerBatch(77)}, 0,
		[]AbortedTxn{{ProducerID: 77, FirstOffset: 0, LastOffset: l.LogEndOffset(), LastStableOffset: l.LogEndOffset() + 1}})
	require.ErrorIs(t, err, ErrFailed)
	armed.Store(false)
	require.NoError(t, l.Heal())
	got, err := l.AbortedTxns(0, math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a}, got)
	require.Equal(t, map[int64][]AbortedTxn{0: {a}}, txnFiles(t, mem, "/p"), "the orphan entry is cut from the file")
	b := h.abort(0, 0)
	require.Equal(t, a.LastOffset+1, b.LastOffset, "the failed marker's offset is reused")
	checkTxnIndex(t, l, h.truth, "healed")
}

// TestTxnIndexCrashBeforeEveryDurabilityPoint takes the filesystem a power
// cut would leave at every moment the log is about to make something
// durable (or rename or remove a file) while it appends markers with
// their entries, rolls, truncates, moves its log start and rebuilds its
// index, both with nothing unsynced kept and with a random part of it
// kept. Every image must open with an index that names only markers it
// holds, as appended, and has an entry for every marker below
// TxnIndexValidTo.
func TestTxnIndexCrashBeforeEveryDurabilityPoint(t *testing.T) {
	for seed := uint64(0); seed < 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 14))
			mem, faults := crashFS(t)
			var (
				mu     sync.Mutex // the flusher syncs too
				images []*vfs.MemFS
				before []string
			)
			faults.SetInjector(func(op vfs.Op, path string) error {
				switch op {
				case vfs.OpSync, vfs.OpSyncDir, vfs.OpRename, vfs.OpRemove:
					mu.Lock()
					defer mu.Unlock()
					images = append(images, mem.Crash(vfs.CrashOptions{}),
						mem.Crash(vfs.CrashOptions{Rand: rand.New(rand.NewPCG(seed, uint64(len(images))))}))
					before = append(before, op.String()+" "+path, op.String()+" "+path+" (random)")
				}
				return nil
			})
			opts := memOptions(faults)
			opts.FlushAlways = seed%2 == 0
			l, err := Open(crashDir, opts)
			require.NoError(t, err)
			h := newTxnHarness(t, l)
			for i := range 50 {
				switch r := rng.IntN(10); {
				case r < 4:
					appendPlain(t, l, 1+rng.IntN(3))
				case r < 8:
					h.abort(rng.IntN(3), int64(rng.IntN(10)))
				case r == 8 && i > 10:
					h.truncate(l.LogEndOffset() - 1 - int64(rng.IntN(6)))
				case r == 9 && len(h.live) > 0:
					h.rebuild(h.live[rng.IntN(len(h.live))].LastOffset - int64(rng.IntN(2)))
				}
				if i == 30 {
					_, err := l.DeleteRecordsBefore(l.LogEndOffset() / 3)
					require.NoError(t, err)
				}
			}
			faults.SetInjector(nil)
			require.NoError(t, l.Close())

			mu.Lock()
			defer mu.Unlock()
			require.Greater(t, len(images), 100)
			markers, lowered := 0, 0
			for n, img := range images {
				what := fmt.Sprintf("image %d (before %s)", n, before[n])
				rl, err := Open(crashDir, memOptions(img))
				require.NoError(t, err, what)
				markers += checkTxnIndex(t, rl, h.truth, what)
				if rl.TxnIndexValidTo() < rl.LogEndOffset() {
					lowered++
				}
				require.NoError(t, rl.Close())
				// And once more: the open left a consistent state.
				rl, err = Open(crashDir, memOptions(img))
				require.NoError(t, err, what)
				checkTxnIndex(t, rl, h.truth, what+" reopened")
				require.NoError(t, rl.Close())
			}
			require.Positive(t, markers, "images held markers")
			require.Positive(t, lowered, "images caught a rebuild under way")
		})
	}
}

// FuzzTxnIndexOpen writes arbitrary bytes as a segment's index file: Open
// never fails or panics on it, keeps only entries that could be real, and
// a second open finds nothing more to change.
func FuzzTxnIndexOpen(f *testing.F) {
	f.Add(encodeTxnEntry(nil, AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 2, LastStableOffset: 3}), false)
	f.Add(append(encodeTxnEntry(nil, AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 2, LastStableOffset: 3}), 0, 0, 1), true)
	f.Add(bytes.Repeat([]byte{0}, 3*txnEntrySize), true)
	f.Fuzz(func(t *testing.T, data []byte, lastSegment bool) {
		mem := vfs.NewMem()
		opts := memOptions(mem)
		opts.SegmentBytes = 1024
		l, err := Open("/p", opts)
		require.NoError(t, err)
		appendPlain(t, l, 9)
		bases := l.SegmentBases()
		require.Len(t, bases, 2)
		require.NoError(t, l.Close())
		base := bases[0]
		if lastSegment {
			base = bases[1]
		}
		fl, err := mem.OpenFile(filepath.Join("/p", segmentFileName(base, txnIndexExt)), os.O_CREATE|os.O_RDWR, 0o644)
		require.NoError(t, err)
		_, err = fl.WriteAt(data, 0)
		require.NoError(t, err)
		require.NoError(t, fl.Close())

		var first []AbortedTxn
		var firstValid int64
		for i := range 2 {
			l, err := Open("/p", opts)
			require.NoError(t, err)
			got, err := l.AbortedTxns(0, math.MaxInt64)
			require.NoError(t, err)
			end := l.LogEndOffset()
			if !lastSegment {
				end = bases[1]
			}
			prev := int64(-1)
			for _, e := range got {
				require.True(t, e.LastOffset >= base && e.LastOffset < end && e.LastOffset > prev && e.FirstOffset <= e.LastOffset,
					"impossible entry kept: %+v", e)
				prev = e.LastOffset
			}
			require.LessOrEqual(t, l.TxnIndexValidTo(), l.LogEndOffset())
			if i == 0 {
				first, firstValid = got, l.TxnIndexValidTo()
			} else {
				require.Equal(t, first, got)
				require.Equal(t, firstValid, l.TxnIndexValidTo())
			}
			require.NoError(t, l.Close())
		}
	})
}
