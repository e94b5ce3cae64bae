package txncoord

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err)
	return b
}

// The records are Kafka's bytes: TransactionLogKey v0, TransactionLogValue
// v0 and v1 (flexible, with tagged fields only where not default).
func TestRecordBytes(t *testing.T) {
	require.Equal(t, unhex(t, "0000 0004 74782d31"), encodeKey("tx-1"))

	const ts = 1700000000000
	ongoing := Metadata{ID: "tx-1", ProducerID: 1000, PrevProducerID: -1, NextProducerID: -1, Epoch: 3, LastEpoch: -1,
		TimeoutMs: 60000, State: StateOngoing, Partitions: map[TP]struct{}{{"t", 2}: {}, {"t", 0}: {}},
		StartMs: ts, LastUpdateMs: ts}
	require.Equal(t, unhex(t, "0000 00000000000003e8 0003 0000ea60 01 00000001 0001 74 00000002 00000000 00000002 "+
		"0000018bcfe56800 0000018bcfe56800"), encodeValue(ongoing, 0))
	ongoing.ClientTV = 2
	require.Equal(t, unhex(t, "0001 00000000000003e8 0003 0000ea60 01 02 0274 03 00000000 00000002 00 "+
		"0000018bcfe56800 0000018bcfe56800 01 02 02 0002"), encodeValue(ongoing, 2))

	empty := Metadata{ID: "tx-1", ProducerID: 1000, PrevProducerID: -1, NextProducerID: -1, Epoch: 0, LastEpoch: -1,
		TimeoutMs: 60000, State: StateEmpty, Partitions: map[TP]struct{}{}, StartMs: -1, LastUpdateMs: ts}
	require.Equal(t, unhex(t, "0001 00000000000003e8 0000 0000ea60 00 00 0000018bcfe56800 ffffffffffffffff 00"),
		encodeValue(empty, 2))

	for _, m := range []Metadata{ongoing, empty} {
		for _, tv := range []int16{0, 2} {
			d, known, err := decodeRecord(encodeKey(m.ID), encodeValue(m, tv))
			require.NoError(t, err)
			require.True(t, known)
			want := m
			if tv == 0 {
				want.ClientTV = 0 // not in version 0
			}
			require.Equal(t, want, d.m)
		}
	}
	d, known, err := decodeRecord(encodeKey("gone"), nil)
	require.NoError(t, err)
	require.True(t, known)
	require.True(t, d.deleted)
	require.Equal(t, "gone", d.id)
}

// A key of another version is skipped; garbage is an error, not a panic.
func TestDecodeRecordRejects(t *testing.T) {
	_, known, err := decodeRecord(unhex(t, "0001 0004 74782d31"), nil)
	require.NoError(t, err)
	require.False(t, known)
	for name, kv := range map[string][2][]byte{
		"short key":   {{0}, nil},
		"bad state":   {encodeKey("x"), unhex(t, "0000 00000000000003e8 0003 0000ea60 09 ffffffff 0000018bcfe56800 0000018bcfe56800")},
		"short value": {encodeKey("x"), unhex(t, "0000 0000")},
		"huge array":  {encodeKey("x"), unhex(t, "0000 00000000000003e8 0003 0000ea60 01 7fffffff")},
		"version 9":   {encodeKey("x"), unhex(t, "0009 00000000000003e8 0003 0000ea60 00 ffffffff 0000018bcfe56800 0000018bcfe56800")},
	} {
		_, _, err := decodeRecord(kv[0], kv[1])
		require.Error(t, err, name)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeKey("tx"), encodeValue(Metadata{ID: "tx", State: StateOngoing, Partitions: map[TP]struct{}{{"a", 1}: {}}}, 2))
	f.Add(encodeKey("tx"), []byte(nil))
	f.Add([]byte{0, 1, 0, 0}, []byte{0, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		d, known, err := decodeRecord(key, value)
		if err != nil || !known || d.deleted {
			return
		}
		again, _, err := decodeRecord(encodeKey(d.id), encodeValue(d.m, 2))
		if err != nil {
			t.Fatalf("a decoded record does not encode back: %v", err)
		}
		if d.m.State != StateEmpty && len(again.m.Partitions) != len(d.m.Partitions) {
			t.Fatalf("partitions %v became %v", d.m.Partitions, again.m.Partitions)
		}
	})
}
