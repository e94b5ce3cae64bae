package meta

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

var testConf = raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "1", Address: "node-1"}}}

func writeSnap(t *testing.T, s raft.SnapshotStore, index, term uint64, data []byte) string {
	t.Helper()
	sink, err := s.Create(1, index, term, testConf, 1, nil)
	require.NoError(t, err)
	// Write in odd-sized pieces to exercise chunk boundaries.
	for p := data; len(p) > 0; {
		n := min(len(p), 333_333)
		_, err := sink.Write(p[:n])
		require.NoError(t, err)
		p = p[n:]
	}
	require.NoError(t, sink.Close())
	require.NoError(t, sink.Close(), "raft closes the sink again after Persist")
	require.NoError(t, sink.Cancel(), "cancel after close is a no-op")
	return sink.ID()
}

func readSnap(t *testing.T, s raft.SnapshotStore, id string) (*raft.SnapshotMeta, []byte) {
	t.Helper()
	m, rc, err := s.Open(id)
	require.NoError(t, err)
	defer rc.Close()
	data, err := io.ReadAll(rc)
	require.NoError(t, err)
	return m, data
}

func TestSnapshotStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, quietLogger())
	require.NoError(t, err)
	s := db.SnapshotStore()

	list, err := s.List()
	require.NoError(t, err)
	require.Empty(t, list)

	_, err = s.Create(0, 1, 1, testConf, 1, nil)
	require.Error(t, err, "only snapshot version 1 is supported")

	big := make([]byte, 2*snapChunkSize+12345)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	id := writeSnap(t, s, 100, 3, big)
	m, data := readSnap(t, s, id)
	require.Equal(t, big, data)
	require.EqualValues(t, 100, m.Index)
	require.EqualValues(t, 3, m.Term)
	require.EqualValues(t, len(big), m.Size)
	require.Equal(t, testConf, m.Configuration)

	empty := writeSnap(t, s, 101, 3, nil)
	_, data = readSnap(t, s, empty)
	require.Empty(t, data)

	// Survives a restart.
	require.NoError(t, db.Close())
	db = openTest(t, dir)
	s = db.SnapshotStore()
	list, err = s.List()
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, empty, list[0].ID, "newest first")
	require.Equal(t, id, list[1].ID)
	_, data = readSnap(t, s, id)
	require.Equal(t, big, data)

	_, _, err = s.Open("no-such-snapshot")
	require.Error(t, err)
	_, _, err = s.Open("../escape/m")
	require.Error(t, err)
}

func TestSnapshotStoreRetainAndReap(t *testing.T) {
	db := openTest(t, t.TempDir())
	s := db.SnapshotStore()

	// A crashed write: chunks but no metadata record.
	orphan, err := s.Create(1, 1, 1, testConf, 1, nil)
	require.NoError(t, err)
	_, err = orphan.Write(bytes.Repeat([]byte("o"), snapChunkSize+1))
	require.NoError(t, err)
	db.snapStore.done(orphan.ID()) // forget it, as a restart would

	// A cancelled write leaves nothing behind.
	cancelled, err := s.Create(1, 2, 1, testConf, 1, nil)
	require.NoError(t, err)
	_, err = cancelled.Write(bytes.Repeat([]byte("c"), snapChunkSize+1))
	require.NoError(t, err)
	require.NoError(t, cancelled.Cancel())

	// An in-progress write must survive reaping by others.
	inflight, err := s.Create(1, 50, 3, testConf, 1, nil)
	require.NoError(t, err)
	_, err = inflight.Write([]byte("partial"))
	require.NoError(t, err)

	var ids []string
	for i := uint64(10); i < 14; i++ {
		ids = append(ids, writeSnap(t, s, i, 2, []byte{byte(i)}))
	}
	list, err := s.List()
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, ids[3], list[0].ID)
	require.Equal(t, ids[2], list[1].ID)

	_, _, err = s.Open(ids[0])
	require.Error(t, err, "reaped")

	require.NoError(t, inflight.Close())
	_, data := readSnap(t, s, inflight.ID())
	require.Equal(t, []byte("partial"), data)

	// Only the retained snapshots' keys remain.
	prefixes := map[string]bool{}
	require.NoError(t, db.use(func(p *pebble.DB) error {
		it, err := p.NewIter(&pebble.IterOptions{LowerBound: prefixSnap, UpperBound: prefixEnd(prefixSnap)})
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			rest := it.Key()[len(prefixSnap):]
			prefixes[string(rest[:bytes.IndexByte(rest, '/')])] = true
		}
		return it.Close()
	}))
	list, err = s.List()
	require.NoError(t, err)
	want := map[string]bool{}
	for _, m := range list {
		want[m.ID] = true
	}
	require.Equal(t, want, prefixes)
}

func TestSnapshotReaderDetectsCorruption(t *testing.T) {
	db := openTest(t, t.TempDir())
	s := db.SnapshotStore()
	id := writeSnap(t, s, 5, 1, bytes.Repeat([]byte("d"), 1000))
	require.NoError(t, db.use(func(p *pebble.DB) error {
		return p.Set(snapChunkKey(id, 0), bytes.Repeat([]byte("e"), 1000), pebble.Sync)
	}))
	_, rc, err := s.Open(id)
	require.NoError(t, err)
	defer rc.Close()
	_, err = io.ReadAll(rc)
	require.ErrorIs(t, err, ErrCorrupt)

	require.NoError(t, db.use(func(p *pebble.DB) error {
		return p.Delete(snapChunkKey(id, 0), pebble.Sync)
	}))
	_, rc2, err := s.Open(id)
	require.NoError(t, err)
	defer rc2.Close()
	_, err = io.ReadAll(rc2)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestSnapshotReaderIsolatedFromReap(t *testing.T) {
	db := openTest(t, t.TempDir())
	s := db.SnapshotStore()
	first := writeSnap(t, s, 1, 1, []byte("first"))
	_, rc, err := s.Open(first)
	require.NoError(t, err)
	defer rc.Close()
	writeSnap(t, s, 2, 1, []byte("second"))
	writeSnap(t, s, 3, 1, []byte("third")) // reaps "first"
	data, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.Equal(t, []byte("first"), data)
}
