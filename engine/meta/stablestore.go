package meta

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// StableStore implements raft.StableStore (current term, last vote) over the
// DB. Every Set is synced: Raft relies on a vote being durable before it
// answers the vote request.
type StableStore struct{ db *DB }

var _ raft.StableStore = (*StableStore)(nil)

// StableStore returns the Raft stable store backed by db.
func (db *DB) StableStore() raft.StableStore { return &StableStore{db: db} }

func stableKey(k []byte) []byte { return concat(prefixStable, k) }

// Set durably stores val under key.
func (s *StableStore) Set(key, val []byte) error {
	err := s.db.use(func(p *pebble.DB) error {
		return p.Set(stableKey(key), val, pebble.Sync)
	})
	if err != nil {
		return fmt.Errorf("meta: stable set %q: %w", key, err)
	}
	return nil
}

// Get returns the value at key, or ErrNotFound (unwrapped, see ErrNotFound).
func (s *StableStore) Get(key []byte) ([]byte, error) {
	v, err := s.db.get(stableKey(key))
	if errors.Is(err, ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("meta: stable get %q: %w", key, err)
	}
	return v, nil
}

// SetUint64 durably stores val (8 bytes, big-endian) under key.
func (s *StableStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the value at key, or 0 and ErrNotFound.
func (s *StableStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stable key %q holds %d bytes, want 8", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
