// Package meta owns the node-local metadata database: one pebble DB under
// <data>/meta that holds the Raft log, Raft's stable store (term, vote), Raft
// snapshots, the controller's materialised FSM state and small node-local
// records. It knows nothing about what the FSM state means; it stores bytes
// under disjoint key prefixes:
//
//	raft/log/<be uint64 index>     one encoded raft.Log per index
//	raft/stable/<key>              raft.StableStore values
//	raft/snap/<id>/m               snapshot metadata (JSON)
//	raft/snap/<id>/d/<be uint32>   snapshot data, in chunks
//	fsm/applied                    last Raft index folded into the FSM state
//	fsm/k/<key>                    FSM state, written by the controller
//	local/<key>                    node-local records (never replicated)
//
// Invariants:
//   - Everything Raft requires to be durable before it acts (StoreLogs,
//     stable Set, a finished snapshot) is committed with pebble.Sync.
//   - FSM state and the applied index are written in one pebble batch, so the
//     state on disk always corresponds exactly to "every entry up to applied".
//     Those batches are not synced: all writes share one pebble WAL, so a
//     later synced write (the next StoreLogs) makes them durable, and if they
//     are lost in a crash the applied index regresses with them and Raft
//     replays the entries from its (synced) log.
//   - After Close every method returns ErrClosed; none panics.
package meta

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

var (
	// ErrNotFound is returned by the stable store for a missing key. Its text
	// is exactly "not found" and it is returned unwrapped, because
	// hashicorp/raft recognises a missing key by comparing err.Error() with
	// that string.
	ErrNotFound = errors.New("not found")
	// ErrClosed is returned by every operation after Close.
	ErrClosed = errors.New("meta: database closed")
	// ErrCorrupt marks stored bytes that do not decode. Callers branch on it
	// (errors.Is) to tell corruption from I/O failure.
	ErrCorrupt = errors.New("meta: corrupt data")
)

// Key prefixes. The byte after each prefix's final '/' is where the variable
// part starts; prefixEnd computes exclusive upper bounds for range scans.
var (
	prefixLog     = []byte("raft/log/")
	prefixStable  = []byte("raft/stable/")
	prefixSnap    = []byte("raft/snap/")
	prefixFSM     = []byte("fsm/")
	keyApplied    = []byte("fsm/applied")
	prefixFSMData = []byte("fsm/k/")
	prefixLocal   = []byte("local/")
)

// Options configures Open. Dir is required.
type Options struct {
	// Dir is the pebble directory, conventionally <data>/meta.
	Dir string
	// Logger receives pebble's messages and store errors. Default: slog.Default().
	Logger *slog.Logger
	// FS overrides the filesystem; tests use vfs.NewCrashableMem to simulate
	// power loss. Default: the OS filesystem.
	FS vfs.FS
}

// EnsureDefaults fills unset optional fields.
func (o *Options) EnsureDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
}

// Validate reports a missing or invalid field.
func (o *Options) Validate() error {
	if o.Dir == "" {
		return errors.New("meta: Options.Dir is required")
	}
	return nil
}

// DB is the metadata database. It is safe for concurrent use.
type DB struct {
	logger *slog.Logger

	// mu guards pdb against Close: operations hold it shared, Close holds it
	// exclusively, so no operation ever reaches a closed pebble DB (which
	// panics rather than returning an error).
	mu     sync.RWMutex
	pdb    *pebble.DB
	closed bool
	// snaps are pebble snapshots handed out to readers (state snapshots,
	// snapshot-store readers); Close releases any still open.
	snaps map[*pebble.Snapshot]struct{}

	snapStore *SnapshotStore
}

// Open opens (creating if needed) the metadata DB in dir on the OS filesystem.
func Open(dir string, logger *slog.Logger) (*DB, error) {
	return OpenWithOptions(Options{Dir: dir, Logger: logger})
}

// OpenWithOptions is Open with every option exposed.
func OpenWithOptions(opts Options) (*DB, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	// pebble.Open creates Dir and fsyncs the parents it created, so a crash
	// cannot lose the directory entry. Creating it here first would defeat
	// that (pebble only syncs parents of directories it had to create).
	logger := opts.Logger.With("component", "meta")
	popts := &pebble.Options{
		FS:     opts.FS,
		Logger: pebbleLogger{logger},
		// Metadata is small; the defaults (64 MiB memtables and cache) are
		// sized for bulk data and would be wasted memory here.
		MemTableSize:       4 << 20,
		CacheSize:          8 << 20,
		FormatMajorVersion: pebble.FormatNewest,
	}
	pdb, err := pebble.Open(opts.Dir, popts)
	if err != nil {
		return nil, fmt.Errorf("meta: open pebble at %s: %w", opts.Dir, err)
	}
	db := &DB{
		logger: logger,
		pdb:    pdb,
		snaps:  make(map[*pebble.Snapshot]struct{}),
	}
	db.snapStore = &SnapshotStore{db: db, retain: defaultSnapshotRetain}
	return db, nil
}

// Close releases open snapshots and closes pebble. It is idempotent.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	var errs []error
	for s := range db.snaps {
		errs = append(errs, s.Close())
	}
	db.snaps = nil
	if err := db.pdb.Close(); err != nil {
		errs = append(errs, fmt.Errorf("meta: close pebble: %w", err))
	}
	return errors.Join(errs...)
}

// use runs fn with the DB open, or returns ErrClosed.
func (db *DB) use(fn func(p *pebble.DB) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	return fn(db.pdb)
}

// get returns a copy of the value at key, or ErrNotFound.
func (db *DB) get(key []byte) ([]byte, error) {
	var out []byte
	err := db.use(func(p *pebble.DB) error {
		v, closer, err := p.Get(key)
		if errors.Is(err, pebble.ErrNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		out = append([]byte(nil), v...)
		return closer.Close()
	})
	return out, err
}

// newSnapshot returns a tracked pebble snapshot; release it with
// releaseSnapshot. The DB read lock must not be held by the caller.
func (db *DB) newSnapshot() (*pebble.Snapshot, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil, ErrClosed
	}
	s := db.pdb.NewSnapshot()
	db.snaps[s] = struct{}{}
	return s, nil
}

// releaseSnapshot closes s unless Close already did.
func (db *DB) releaseSnapshot(s *pebble.Snapshot) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if _, ok := db.snaps[s]; !ok {
		return nil
	}
	delete(db.snaps, s)
	return s.Close()
}

// GetLocal returns a node-local record (never replicated), or ErrNotFound.
func (db *DB) GetLocal(key string) ([]byte, error) {
	v, err := db.get(concat(prefixLocal, []byte(key)))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("meta: get local %q: %w", key, err)
	}
	return v, err
}

// SetLocal durably stores a node-local record.
func (db *DB) SetLocal(key string, value []byte) error {
	err := db.use(func(p *pebble.DB) error {
		return p.Set(concat(prefixLocal, []byte(key)), value, pebble.Sync)
	})
	if err != nil {
		return fmt.Errorf("meta: set local %q: %w", key, err)
	}
	return nil
}

// concat returns a fresh slice holding a followed by b.
func concat(a, b []byte) []byte {
	out := make([]byte, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// pebbleLogger routes pebble's printf-style logging to slog. Pebble's info
// messages are operational detail, so they go to Debug.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
}

// Fatalf is called by pebble when it cannot continue (e.g. its WAL commit
// pipeline failed); pebble requires it not to return, like its default
// logger, which exits the process.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error("fatal pebble error", "error", fmt.Sprintf(format, args...))
	os.Exit(1)
}
