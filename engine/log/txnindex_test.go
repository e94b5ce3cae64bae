package log

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

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
	_, err := l.AppendWith([][]byte{makeBatch(1, 100, 1, int(pid))}, 0, []AbortedTxn{e})
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
	l, err := Open("/p", opts)
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
	l, err = Open("/p", opts)
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
	l, err := Open("/p", opts)
	require.NoError(t, err)
	appendPlain(t, l, 1)
	a := appendAborted(t, l, 1, 0, -1)
	appendAborted(t, l, 2, 1, -1)
	require.NoError(t, l.Close())
	path := filepath.Join("/p", segmentFileName(0, txnIndexExt))
	f, err := mem.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	// Tear the second entry and corrupt its version.
	_, err = f.WriteAt([]byte{0xff, 0xff}, txnEntrySize)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(txnEntrySize+20))
	require.NoError(t, f.Close())
	l, err = Open("/p", opts)
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
