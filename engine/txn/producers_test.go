package txn

import (
	"fmt"
	"hash/crc32"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProducerStateSequences(t *testing.T) {
	s := NewProducerState()
	const pid = 7
	info := func(first, count int32, base int64) BatchInfo {
		return BatchInfo{FirstSeq: first, LastSeq: LastSeq(first, count), BaseOffset: base, LastOffset: base + int64(count) - 1}
	}

	// Unknown producer: any sequence is accepted.
	dup, err := s.Check(pid, 0, 0, 3)
	require.NoError(t, err)
	require.Nil(t, dup)
	s.Record(pid, 0, info(0, 3, 100))

	// In order.
	dup, err = s.Check(pid, 0, 3, 2)
	require.NoError(t, err)
	require.Nil(t, dup)
	s.Record(pid, 0, info(3, 2, 103))

	// A retry of an earlier batch returns the original offsets.
	dup, err = s.Check(pid, 0, 0, 3)
	require.NoError(t, err)
	require.NotNil(t, dup)
	require.Equal(t, int64(100), dup.BaseOffset)

	// A gap is out of order.
	_, err = s.Check(pid, 0, 9, 1)
	require.ErrorIs(t, err, ErrOutOfOrderSequence)

	// A stale epoch is fenced.
	s.Record(pid, 2, info(0, 1, 105))
	_, err = s.Check(pid, 1, 5, 1)
	require.ErrorIs(t, err, ErrInvalidEpoch)

	// A new epoch must start at 0.
	_, err = s.Check(pid, 3, 4, 1)
	require.ErrorIs(t, err, ErrOutOfOrderSequence)
	_, err = s.Check(pid, 3, 0, 1)
	require.NoError(t, err)

	// Negative sequences are invalid; non-idempotent batches pass.
	_, err = s.Check(pid, 2, -5, 1)
	require.ErrorIs(t, err, ErrInvalidSequence)
	dup, err = s.Check(-1, -1, -1, 10)
	require.NoError(t, err)
	require.Nil(t, dup)
}

func TestProducerStateKeepsLastFive(t *testing.T) {
	s := NewProducerState()
	for i := int32(0); i < 8; i++ {
		s.Record(1, 0, BatchInfo{FirstSeq: i, LastSeq: i, BaseOffset: int64(i), LastOffset: int64(i)})
	}
	// Batches 3..7 are cached; 2 is too old to be recognised and is out of order.
	dup, err := s.Check(1, 0, 3, 1)
	require.NoError(t, err)
	require.Equal(t, int64(3), dup.BaseOffset)
	_, err = s.Check(1, 0, 2, 1)
	require.ErrorIs(t, err, ErrOutOfOrderSequence)
	dup, err = s.Check(1, 0, 8, 1)
	require.NoError(t, err)
	require.Nil(t, dup)
}

func TestSequenceWraps(t *testing.T) {
	require.Equal(t, int32(math.MaxInt32), LastSeq(math.MaxInt32-1, 2))
	require.Equal(t, int32(0), LastSeq(math.MaxInt32, 2))
	require.Equal(t, int32(1), LastSeq(math.MaxInt32, 3))
	s := NewProducerState()
	s.Record(1, 0, BatchInfo{FirstSeq: math.MaxInt32 - 1, LastSeq: math.MaxInt32})
	_, err := s.Check(1, 0, 0, 1)
	require.NoError(t, err)
}

func TestExpire(t *testing.T) {
	s := NewProducerState()
	s.Record(1, 0, BatchInfo{Timestamp: 1_000})
	s.Record(2, 0, BatchInfo{Timestamp: 9_000})
	require.Equal(t, 1, s.Expire(10_000, 5_000))
	require.Equal(t, 1, s.Len())
	dup, err := s.Check(1, 0, 7, 1) // forgotten: any sequence is accepted again
	require.NoError(t, err)
	require.Nil(t, dup)
}

func FuzzLoadSnapshot(f *testing.F) {
	s := NewProducerState()
	s.Record(7, 1, BatchInfo{FirstSeq: 0, LastSeq: 4, BaseOffset: 10, LastOffset: 14, Timestamp: 99})
	good, err := s.Snapshot(15)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"version":1,"offset":3,"producers":{"1":{"epoch":0,"batches":[]}}}`))
	f.Add([]byte("00000000\n{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, off, err := LoadSnapshot(b)
		if err != nil {
			return
		}
		again, err := st.Snapshot(off)
		if err != nil {
			t.Fatal(err)
		}
		if _, off2, err := LoadSnapshot(again); err != nil || off2 != off {
			t.Fatalf("a loaded snapshot does not round-trip: %v (offset %d, %d)", err, off, off2)
		}
	})
}

func TestSnapshotChecksum(t *testing.T) {
	s := NewProducerState()
	s.Record(7, 1, BatchInfo{FirstSeq: 0, LastSeq: 4, BaseOffset: 10, LastOffset: 14, Timestamp: 99})
	b, err := s.Snapshot(15)
	if err != nil {
		t.Fatal(err)
	}
	if _, off, err := LoadSnapshot(b); err != nil || off != 15 {
		t.Fatalf("round trip: %v %d", err, off)
	}
	b[len(b)-5] ^= 1
	if _, _, err := LoadSnapshot(b); err == nil {
		t.Fatal("a damaged snapshot was loaded")
	}
}

// A snapshot written before transactions (version 2) loads with no
// transaction open, no marker seen, and its producers aged by their last
// batch.
func TestSnapshotV2Loads(t *testing.T) {
	body := []byte(`{"version":2,"offset":40,"producers":{"7":{"epoch":3,"batches":[{"FirstSeq":0,"LastSeq":1,"BaseOffset":38,"LastOffset":39,"Timestamp":1234}]}}}`)
	b := append(fmt.Appendf(nil, "%08x\n", crc32.Checksum(body, castagnoli)), body...)
	s, off, err := LoadSnapshot(b)
	require.NoError(t, err)
	require.Equal(t, int64(40), off)
	p := s.producers[7]
	require.Equal(t, int16(3), p.epoch)
	require.Equal(t, int64(-1), p.txnFirst)
	require.Equal(t, int32(-1), p.coordinatorEpoch)
	require.Equal(t, int64(1234), p.lastTimestamp)
	require.True(t, s.NeedsVerification(7, 3))
	require.Equal(t, int64(50), s.Stable().LastStable(50, 0))
}
