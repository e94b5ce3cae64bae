package meta

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

const (
	// defaultSnapshotRetain is how many complete snapshots are kept, like
	// raft.FileSnapshotStore's retain: the newest, plus one in case the
	// newest is being sent to a follower when the next is taken.
	defaultSnapshotRetain = 2
	// snapChunkSize splits snapshot data into pebble values of bounded size.
	snapChunkSize = 1 << 20
	// snapMetaV1 is the version byte of a stored snapshot record.
	snapMetaV1 = 1
	// maxSnapIDLen bounds IDs accepted by Open (ours are 50 bytes).
	maxSnapIDLen = 128
)

// SnapshotStore implements raft.SnapshotStore inside the DB, so the whole
// metadata directory is one pebble DB and one consistency domain. Data is
// written in chunks as it streams in; the metadata record, written last and
// synced, is what makes a snapshot exist. Chunks without a record (a crash
// mid-write, or Cancel) are garbage collected by the next successful Close.
type SnapshotStore struct {
	db     *DB
	retain int

	mu         sync.Mutex
	inProgress map[string]struct{}
	seq        uint64
}

var _ raft.SnapshotStore = (*SnapshotStore)(nil)

// SnapshotStore returns the Raft snapshot store backed by db.
func (db *DB) SnapshotStore() raft.SnapshotStore { return db.snapStore }

// snapRecord is the stored metadata of a complete snapshot.
type snapRecord struct {
	Meta   raft.SnapshotMeta `json:"meta"`
	Chunks uint32            `json:"chunks"`
	CRC    uint32            `json:"crc32c"`
}

func snapPrefix(id string) []byte  { return concat(prefixSnap, []byte(id+"/")) }
func snapMetaKey(id string) []byte { return concat(snapPrefix(id), []byte("m")) }
func snapChunkKey(id string, n uint32) []byte {
	return binary.BigEndian.AppendUint32(concat(snapPrefix(id), []byte("d/")), n)
}

// Create starts a new snapshot. Only version 1 (the current raft format) is
// accepted, as in raft.FileSnapshotStore.
func (s *SnapshotStore) Create(version raft.SnapshotVersion, index, term uint64,
	configuration raft.Configuration, configurationIndex uint64, _ raft.Transport,
) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("meta: unsupported snapshot version %d", version)
	}
	s.mu.Lock()
	s.seq++
	// Fixed-width hex sorts lexically in (term, index, time) order, the
	// order List must return.
	id := fmt.Sprintf("%016x-%016x-%016x", term, index, uint64(time.Now().UnixNano())+s.seq)
	if s.inProgress == nil {
		s.inProgress = make(map[string]struct{})
	}
	s.inProgress[id] = struct{}{}
	s.mu.Unlock()
	return &snapSink{
		store: s,
		id:    id,
		meta: raft.SnapshotMeta{
			Version:            version,
			ID:                 id,
			Index:              index,
			Term:               term,
			Configuration:      configuration,
			ConfigurationIndex: configurationIndex,
		},
		crc: crc32.New(crcTable),
	}, nil
}

// List returns the retained complete snapshots, newest first.
func (s *SnapshotStore) List() ([]*raft.SnapshotMeta, error) {
	recs, err := s.records()
	if err != nil {
		return nil, err
	}
	out := make([]*raft.SnapshotMeta, 0, len(recs))
	for _, r := range recs {
		m := r.Meta
		out = append(out, &m)
		if len(out) == s.retain {
			break
		}
	}
	return out, nil
}

// records returns every complete snapshot record, newest first.
func (s *SnapshotStore) records() ([]snapRecord, error) {
	var recs []snapRecord
	err := s.db.use(func(p *pebble.DB) error {
		it, err := p.NewIter(&pebble.IterOptions{LowerBound: prefixSnap, UpperBound: prefixEnd(prefixSnap)})
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			if !bytes.HasSuffix(it.Key(), []byte("/m")) {
				continue
			}
			v, err := it.ValueAndErr()
			if err != nil {
				_ = it.Close()
				return err
			}
			r, err := decodeSnapRecord(v)
			if err != nil {
				_ = it.Close()
				return fmt.Errorf("snapshot record %q: %w", it.Key(), err)
			}
			recs = append(recs, r)
		}
		return it.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("meta: list snapshots: %w", err)
	}
	sort.Slice(recs, func(i, j int) bool {
		a, b := recs[i].Meta, recs[j].Meta
		if a.Term != b.Term {
			return a.Term > b.Term
		}
		if a.Index != b.Index {
			return a.Index > b.Index
		}
		return a.ID > b.ID
	})
	return recs, nil
}

func decodeSnapRecord(v []byte) (snapRecord, error) {
	var r snapRecord
	if len(v) == 0 || v[0] != snapMetaV1 {
		return r, fmt.Errorf("%w: unknown snapshot record version", ErrCorrupt)
	}
	if err := json.Unmarshal(v[1:], &r); err != nil {
		return r, fmt.Errorf("%w: snapshot record: %v", ErrCorrupt, err)
	}
	return r, nil
}

// Open returns a snapshot's metadata and a reader of its data. The reader
// sees a consistent view even if the snapshot is reaped meanwhile, and
// returns ErrCorrupt at the end if the data does not match its checksum.
func (s *SnapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if id == "" || len(id) > maxSnapIDLen || bytes.ContainsRune([]byte(id), '/') {
		return nil, nil, fmt.Errorf("meta: invalid snapshot id %q", id)
	}
	snap, err := s.db.newSnapshot()
	if err != nil {
		return nil, nil, fmt.Errorf("meta: open snapshot %s: %w", id, err)
	}
	var rec snapRecord
	err = s.db.useSnap(snap, func(ps *pebble.Snapshot) error {
		v, closer, err := ps.Get(snapMetaKey(id))
		if errors.Is(err, pebble.ErrNotFound) {
			return fmt.Errorf("snapshot %s does not exist", id)
		}
		if err != nil {
			return err
		}
		defer closer.Close()
		rec, err = decodeSnapRecord(v)
		return err
	})
	if err != nil {
		_ = s.db.releaseSnapshot(snap)
		return nil, nil, fmt.Errorf("meta: open snapshot %s: %w", id, err)
	}
	m := rec.Meta
	return &m, &snapReader{db: s.db, snap: snap, rec: rec, crc: crc32.New(crcTable)}, nil
}

// reap deletes every snapshot but the newest retain complete ones, including
// chunks left by cancelled or crashed writes, but never one in progress.
func (s *SnapshotStore) reap() error {
	recs, err := s.records()
	if err != nil {
		return err
	}
	keep := make(map[string]bool, s.retain)
	for i := 0; i < len(recs) && i < s.retain; i++ {
		keep[recs[i].Meta.ID] = true
	}
	s.mu.Lock()
	for id := range s.inProgress {
		keep[id] = true
	}
	s.mu.Unlock()

	var drop []string
	err = s.db.use(func(p *pebble.DB) error {
		it, err := p.NewIter(&pebble.IterOptions{LowerBound: prefixSnap, UpperBound: prefixEnd(prefixSnap)})
		if err != nil {
			return err
		}
		for ok := it.First(); ok; {
			rest := it.Key()[len(prefixSnap):]
			i := bytes.IndexByte(rest, '/')
			if i < 0 {
				// Not ours to interpret; skip it rather than loop.
				ok = it.Next()
				continue
			}
			id := string(rest[:i])
			if !keep[id] {
				drop = append(drop, id)
			}
			ok = it.SeekGE(prefixEnd(snapPrefix(id)))
		}
		return it.Close()
	})
	if err != nil {
		return fmt.Errorf("meta: reap snapshots: %w", err)
	}
	for _, id := range drop {
		if err := s.deleteSnapshot(id); err != nil {
			return err
		}
	}
	return nil
}

func (s *SnapshotStore) deleteSnapshot(id string) error {
	p := snapPrefix(id)
	err := s.db.use(func(pdb *pebble.DB) error {
		return pdb.DeleteRange(p, prefixEnd(p), pebble.NoSync)
	})
	if err != nil {
		return fmt.Errorf("meta: delete snapshot %s: %w", id, err)
	}
	return nil
}

func (s *SnapshotStore) done(id string) {
	s.mu.Lock()
	delete(s.inProgress, id)
	s.mu.Unlock()
}

// snapSink streams a snapshot into chunks.
type snapSink struct {
	store  *SnapshotStore
	id     string
	meta   raft.SnapshotMeta
	buf    []byte
	chunks uint32
	crc    hash.Hash32
	closed bool
	// closeErr is the result of the first Close.
	closeErr error
}

func (k *snapSink) ID() string { return k.id }

func (k *snapSink) Write(p []byte) (int, error) {
	if k.closed {
		return 0, fmt.Errorf("meta: write to finished snapshot %s", k.id)
	}
	n := len(p)
	_, _ = k.crc.Write(p)
	k.meta.Size += int64(n)
	for len(p) > 0 {
		take := min(snapChunkSize-len(k.buf), len(p))
		k.buf = append(k.buf, p[:take]...)
		p = p[take:]
		if len(k.buf) == snapChunkSize {
			if err := k.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// flush writes the buffered chunk. Chunks are not synced individually: the
// synced metadata write in Close comes later in the same WAL.
func (k *snapSink) flush() error {
	if len(k.buf) == 0 {
		return nil
	}
	err := k.store.db.use(func(p *pebble.DB) error {
		return p.Set(snapChunkKey(k.id, k.chunks), k.buf, pebble.NoSync)
	})
	if err != nil {
		return fmt.Errorf("meta: write snapshot %s chunk %d: %w", k.id, k.chunks, err)
	}
	k.chunks++
	k.buf = k.buf[:0]
	return nil
}

// Close completes the snapshot durably and reaps older ones. Raft closes
// the sink after FSMSnapshot.Persist, which is also documented to close it,
// so a repeated Close returns the first one's result.
func (k *snapSink) Close() error {
	if k.closed {
		return k.closeErr
	}
	k.closed = true
	k.closeErr = k.finish()
	return k.closeErr
}

func (k *snapSink) finish() error {
	defer k.store.done(k.id)
	if err := k.flush(); err != nil {
		_ = k.store.deleteSnapshot(k.id)
		return err
	}
	rec := snapRecord{Meta: k.meta, Chunks: k.chunks, CRC: k.crc.Sum32()}
	js, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("meta: encode snapshot %s: %w", k.id, err)
	}
	err = k.store.db.use(func(p *pebble.DB) error {
		return p.Set(snapMetaKey(k.id), append([]byte{snapMetaV1}, js...), pebble.Sync)
	})
	if err != nil {
		_ = k.store.deleteSnapshot(k.id)
		return fmt.Errorf("meta: finish snapshot %s: %w", k.id, err)
	}
	k.store.done(k.id)
	if err := k.store.reap(); err != nil {
		// The new snapshot is complete; failing to drop old ones only costs
		// space, and the next Close retries.
		k.store.db.logger.Warn("reaping old raft snapshots failed", "error", err)
	}
	return nil
}

// Cancel abandons the snapshot and deletes what was written.
func (k *snapSink) Cancel() error {
	if k.closed {
		return nil // finished or already cancelled
	}
	k.closed = true
	k.closeErr = errors.New("meta: snapshot cancelled")
	defer k.store.done(k.id)
	return k.store.deleteSnapshot(k.id)
}

// snapReader reads a snapshot's chunks from a pebble snapshot.
type snapReader struct {
	db   *DB
	snap *pebble.Snapshot
	rec  snapRecord
	next uint32 // next chunk to load
	cur  []byte
	read int64
	crc  hash.Hash32
}

func (r *snapReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.next == r.rec.Chunks {
			if r.read != r.rec.Meta.Size || r.crc.Sum32() != r.rec.CRC {
				return 0, fmt.Errorf("%w: snapshot %s fails its checksum", ErrCorrupt, r.rec.Meta.ID)
			}
			return 0, io.EOF
		}
		err := r.db.useSnap(r.snap, func(ps *pebble.Snapshot) error {
			v, closer, err := ps.Get(snapChunkKey(r.rec.Meta.ID, r.next))
			if errors.Is(err, pebble.ErrNotFound) {
				return fmt.Errorf("%w: snapshot %s misses chunk %d", ErrCorrupt, r.rec.Meta.ID, r.next)
			}
			if err != nil {
				return err
			}
			r.cur = append(r.cur[:0], v...)
			return closer.Close()
		})
		if err != nil {
			return 0, fmt.Errorf("meta: read snapshot: %w", err)
		}
		r.next++
		_, _ = r.crc.Write(r.cur)
		r.read += int64(len(r.cur))
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

func (r *snapReader) Close() error {
	if r.snap == nil {
		return nil
	}
	err := r.db.releaseSnapshot(r.snap)
	r.snap = nil
	return err
}
