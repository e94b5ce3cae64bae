package meta

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func openTest(t *testing.T, dir string) *DB {
	t.Helper()
	db, err := Open(dir, quietLogger())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func mkLog(i uint64) *raft.Log {
	return &raft.Log{
		Index:      i,
		Term:       i/3 + 1,
		Type:       raft.LogCommand,
		Data:       []byte{byte(i), 1, 2, 3},
		Extensions: []byte("ext"),
		AppendedAt: time.Unix(1700000000, int64(i)).UTC(),
	}
}

func TestLogStoreBasics(t *testing.T) {
	db := openTest(t, t.TempDir())
	s := db.LogStore()

	first, err := s.FirstIndex()
	require.NoError(t, err)
	require.Zero(t, first)
	last, err := s.LastIndex()
	require.NoError(t, err)
	require.Zero(t, last)

	var got raft.Log
	require.ErrorIs(t, s.GetLog(1, &got), raft.ErrLogNotFound)

	require.NoError(t, s.StoreLog(mkLog(1)))
	var batch []*raft.Log
	for i := uint64(2); i <= 10; i++ {
		batch = append(batch, mkLog(i))
	}
	require.NoError(t, s.StoreLogs(batch))

	first, err = s.FirstIndex()
	require.NoError(t, err)
	require.EqualValues(t, 1, first)
	last, err = s.LastIndex()
	require.NoError(t, err)
	require.EqualValues(t, 10, last)

	for i := uint64(1); i <= 10; i++ {
		require.NoError(t, s.GetLog(i, &got))
		want := mkLog(i)
		require.Equal(t, want.Index, got.Index)
		require.Equal(t, want.Term, got.Term)
		require.Equal(t, want.Type, got.Type)
		require.Equal(t, want.Data, got.Data)
		require.Equal(t, want.Extensions, got.Extensions)
		require.True(t, want.AppendedAt.Equal(got.AppendedAt))
	}

	// Head truncation (compaction) and tail truncation (conflict).
	require.NoError(t, s.DeleteRange(1, 3))
	require.NoError(t, s.DeleteRange(9, 10))
	require.NoError(t, s.DeleteRange(7, 5)) // min > max: no-op
	first, err = s.FirstIndex()
	require.NoError(t, err)
	require.EqualValues(t, 4, first)
	last, err = s.LastIndex()
	require.NoError(t, err)
	require.EqualValues(t, 8, last)
	require.ErrorIs(t, s.GetLog(3, &got), raft.ErrLogNotFound)
	require.ErrorIs(t, s.GetLog(9, &got), raft.ErrLogNotFound)
	require.NoError(t, s.GetLog(6, &got))

	// Deleting to the end of the index space must not overflow.
	require.NoError(t, s.DeleteRange(5, math.MaxUint64))
	last, err = s.LastIndex()
	require.NoError(t, err)
	require.EqualValues(t, 4, last)
}

func TestLogStoreEmptyFields(t *testing.T) {
	db := openTest(t, t.TempDir())
	s := db.LogStore()
	require.NoError(t, s.StoreLog(&raft.Log{Index: 7, Term: 2, Type: raft.LogNoop}))
	var got raft.Log
	require.NoError(t, s.GetLog(7, &got))
	require.Equal(t, raft.Log{Index: 7, Term: 2, Type: raft.LogNoop}, got)
}

func TestStableStore(t *testing.T) {
	db := openTest(t, t.TempDir())
	s := db.StableStore()

	// hashicorp/raft recognises a missing key by this exact text.
	_, err := s.Get([]byte("CurrentTerm"))
	require.EqualError(t, err, "not found")
	_, err = s.GetUint64([]byte("CurrentTerm"))
	require.EqualError(t, err, "not found")

	require.NoError(t, s.Set([]byte("LastVoteCand"), []byte("node-1")))
	v, err := s.Get([]byte("LastVoteCand"))
	require.NoError(t, err)
	require.Equal(t, []byte("node-1"), v)

	require.NoError(t, s.SetUint64([]byte("CurrentTerm"), 42))
	n, err := s.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.EqualValues(t, 42, n)

	// A non-uint64 value is corruption, not a silent zero.
	_, err = s.GetUint64([]byte("LastVoteCand"))
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestPersistenceAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, quietLogger())
	require.NoError(t, err)
	require.NoError(t, db.LogStore().StoreLogs([]*raft.Log{mkLog(5), mkLog(6)}))
	require.NoError(t, db.StableStore().SetUint64([]byte("CurrentTerm"), 3))
	require.NoError(t, db.SetLocal("node_id", []byte("1")))
	b := db.NewStateBatch()
	b.Set([]byte("topic/a"), []byte("A"))
	require.NoError(t, b.Commit(6))
	require.NoError(t, db.Close())
	require.NoError(t, db.Close(), "Close is idempotent")

	db = openTest(t, dir)
	first, err := db.LogStore().FirstIndex()
	require.NoError(t, err)
	require.EqualValues(t, 5, first)
	last, err := db.LogStore().LastIndex()
	require.NoError(t, err)
	require.EqualValues(t, 6, last)
	term, err := db.StableStore().GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.EqualValues(t, 3, term)
	id, err := db.GetLocal("node_id")
	require.NoError(t, err)
	require.Equal(t, []byte("1"), id)
	applied, err := db.AppliedIndex()
	require.NoError(t, err)
	require.EqualValues(t, 6, applied)
	v, err := db.GetState([]byte("topic/a"))
	require.NoError(t, err)
	require.Equal(t, []byte("A"), v)
}

func TestClosedDBReturnsErrClosed(t *testing.T) {
	db, err := Open(t.TempDir(), quietLogger())
	require.NoError(t, err)
	ss, err := db.SnapshotState()
	require.NoError(t, err)
	require.NoError(t, db.Close())

	var l raft.Log
	require.ErrorIs(t, db.LogStore().GetLog(1, &l), ErrClosed)
	require.ErrorIs(t, db.LogStore().StoreLog(mkLog(1)), ErrClosed)
	_, err = db.LogStore().LastIndex()
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, db.LogStore().DeleteRange(1, 2), ErrClosed)
	require.ErrorIs(t, db.StableStore().Set([]byte("k"), nil), ErrClosed)
	_, err = db.StableStore().Get([]byte("k"))
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, db.NewStateBatch().Commit(1), ErrClosed)
	_, err = ss.WriteTo(io.Discard)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, ss.Close())
	_, err = db.SnapshotState()
	require.ErrorIs(t, err, ErrClosed)
	_, err = db.SnapshotStore().List()
	require.ErrorIs(t, err, ErrClosed)
}

func TestStateBatchAndScan(t *testing.T) {
	db := openTest(t, t.TempDir())
	applied, err := db.AppliedIndex()
	require.NoError(t, err)
	require.Zero(t, applied)

	b := db.NewStateBatch()
	b.Set([]byte("t/b"), []byte("2"))
	b.Set([]byte("t/a"), []byte("1"))
	b.Set([]byte("t/c"), []byte("3"))
	b.Set([]byte("pid"), []byte("9"))
	require.NoError(t, b.Commit(10))
	b.Delete([]byte("t/c"))
	require.NoError(t, b.Commit(11))

	applied, err = db.AppliedIndex()
	require.NoError(t, err)
	require.EqualValues(t, 11, applied)

	var keys, vals []string
	require.NoError(t, db.ScanState([]byte("t/"), func(k, v []byte) error {
		keys = append(keys, string(k))
		vals = append(vals, string(v))
		return nil
	}))
	require.Equal(t, []string{"a", "b"}, keys)
	require.Equal(t, []string{"1", "2"}, vals)

	_, err = db.GetState([]byte("t/c"))
	require.ErrorIs(t, err, ErrNotFound)

	stop := errors.New("stop")
	err = db.ScanState(nil, func(k, v []byte) error { return stop })
	require.ErrorIs(t, err, stop)
}

func TestStateSnapshotRestore(t *testing.T) {
	src := openTest(t, t.TempDir())
	b := src.NewStateBatch()
	b.Set([]byte("t/a"), []byte("alpha"))
	b.Set([]byte("t/b"), bytes.Repeat([]byte("x"), 3*stateChunk/2)) // forces two read chunks
	b.Set([]byte("t/c"), nil)
	require.NoError(t, b.Commit(77))

	ss, err := src.SnapshotState()
	require.NoError(t, err)
	require.EqualValues(t, 77, ss.AppliedIndex())
	// Changes after the snapshot are not in it.
	b.Set([]byte("t/z"), []byte("late"))
	require.NoError(t, b.Commit(78))
	var buf bytes.Buffer
	n, err := ss.WriteTo(&buf)
	require.NoError(t, err)
	require.EqualValues(t, buf.Len(), n)
	require.NoError(t, ss.Close())
	require.NoError(t, ss.Close())

	dst := openTest(t, t.TempDir())
	b = dst.NewStateBatch()
	b.Set([]byte("t/stale"), []byte("gone after restore"))
	require.NoError(t, b.Commit(5))
	require.NoError(t, dst.RestoreState(bytes.NewReader(buf.Bytes())))

	applied, err := dst.AppliedIndex()
	require.NoError(t, err)
	require.EqualValues(t, 77, applied)
	got := map[string]int{}
	require.NoError(t, dst.ScanState(nil, func(k, v []byte) error {
		got[string(k)] = len(v)
		return nil
	}))
	require.Equal(t, map[string]int{"t/a": 5, "t/b": 3 * stateChunk / 2, "t/c": 0}, got)
}

func TestRestoreStateRejectsDamage(t *testing.T) {
	src := openTest(t, t.TempDir())
	b := src.NewStateBatch()
	b.Set([]byte("t/a"), []byte("alpha"))
	b.Set([]byte("t/b"), []byte("beta"))
	require.NoError(t, b.Commit(3))
	ss, err := src.SnapshotState()
	require.NoError(t, err)
	var buf bytes.Buffer
	_, err = ss.WriteTo(&buf)
	require.NoError(t, err)
	require.NoError(t, ss.Close())
	stream := buf.Bytes()

	dst := openTest(t, t.TempDir())
	b = dst.NewStateBatch()
	b.Set([]byte("t/keep"), []byte("me"))
	require.NoError(t, b.Commit(1))

	// Every truncation and every single-byte flip is rejected and leaves the
	// existing state alone.
	for i := 0; i < len(stream); i++ {
		require.ErrorIs(t, dst.RestoreState(bytes.NewReader(stream[:i])), ErrCorrupt, "truncated at %d", i)
		bad := append([]byte(nil), stream...)
		bad[i] ^= 0x40
		require.Error(t, dst.RestoreState(bytes.NewReader(bad)), "flipped byte %d", i)
	}
	v, err := dst.GetState([]byte("t/keep"))
	require.NoError(t, err)
	require.Equal(t, []byte("me"), v)
	applied, err := dst.AppliedIndex()
	require.NoError(t, err)
	require.EqualValues(t, 1, applied)
}

// TestCrashKeepsSyncedWrites simulates power loss: only what was fsynced
// survives. Raft's writes are synced; FSM state is not, but a later synced
// write carries it because all writes share one WAL.
func TestCrashKeepsSyncedWrites(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db, err := OpenWithOptions(Options{Dir: "/meta", Logger: quietLogger(), FS: fs})
	require.NoError(t, err)

	b := db.NewStateBatch()
	b.Set([]byte("t/a"), []byte("A"))
	require.NoError(t, b.Commit(1)) // not synced by itself
	require.NoError(t, db.LogStore().StoreLogs([]*raft.Log{mkLog(1), mkLog(2)}))
	require.NoError(t, db.StableStore().SetUint64([]byte("CurrentTerm"), 2))
	b.Set([]byte("t/b"), []byte("B"))
	require.NoError(t, b.Commit(2)) // unsynced, nothing synced after it

	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	require.NoError(t, db.Close())

	db2, err := OpenWithOptions(Options{Dir: "/meta", Logger: quietLogger(), FS: crashed})
	require.NoError(t, err)
	defer db2.Close()
	last, err := db2.LogStore().LastIndex()
	require.NoError(t, err)
	require.EqualValues(t, 2, last)
	term, err := db2.StableStore().GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.EqualValues(t, 2, term)
	v, err := db2.GetState([]byte("t/a"))
	require.NoError(t, err)
	require.Equal(t, []byte("A"), v)
	// State and applied index move together: either both include index 2
	// or neither does.
	applied, err := db2.AppliedIndex()
	require.NoError(t, err)
	_, errB := db2.GetState([]byte("t/b"))
	if applied == 2 {
		require.NoError(t, errB)
	} else {
		require.EqualValues(t, 1, applied)
		require.ErrorIs(t, errB, ErrNotFound)
	}
}

func TestDecodeLogRejectsCorruption(t *testing.T) {
	good := encodeLog(nil, mkLog(3))
	var l raft.Log
	require.NoError(t, decodeLog(good, &l))
	for i := 0; i < len(good); i++ {
		require.ErrorIs(t, decodeLog(good[:i], &l), ErrCorrupt, "truncated at %d", i)
	}
	require.ErrorIs(t, decodeLog(append(append([]byte(nil), good...), 0), &l), ErrCorrupt)
	bad := append([]byte(nil), good...)
	bad[0] = 9
	require.ErrorIs(t, decodeLog(bad, &l), ErrCorrupt)
	// A huge declared length is rejected before any allocation.
	huge := []byte{logEncodingV1, 1, byte(raft.LogCommand), 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
	require.ErrorIs(t, decodeLog(huge, &l), ErrCorrupt)
}

func FuzzDecodeLog(f *testing.F) {
	f.Add(encodeLog(nil, mkLog(1)))
	f.Add(encodeLog(nil, &raft.Log{Type: raft.LogNoop}))
	f.Add([]byte{})
	f.Add([]byte{logEncodingV1, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := decodeLog(b, &l); err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		// Whatever decodes re-encodes to the same bytes, except for a
		// non-canonical varint, which we do not try to reject.
		l2 := l
		var l3 raft.Log
		require.NoError(t, decodeLog(encodeLog(nil, &l2), &l3))
		require.Equal(t, l.Data, l3.Data)
		require.Equal(t, l.Term, l3.Term)
	})
}

func FuzzRestoreState(f *testing.F) {
	db, err := Open(f.TempDir(), quietLogger())
	require.NoError(f, err)
	f.Cleanup(func() { _ = db.Close() })
	b := db.NewStateBatch()
	b.Set([]byte("t/a"), []byte("alpha"))
	require.NoError(f, b.Commit(4))
	ss, err := db.SnapshotState()
	require.NoError(f, err)
	var buf bytes.Buffer
	_, err = ss.WriteTo(&buf)
	require.NoError(f, err)
	require.NoError(f, ss.Close())
	f.Add(buf.Bytes())
	f.Add([]byte(stateMagic + "\x01\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte(stateMagic + "\x01\x01\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, in []byte) {
		err := db.RestoreState(bytes.NewReader(in))
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("non-corruption error for bad input: %v", err)
		}
	})
}
