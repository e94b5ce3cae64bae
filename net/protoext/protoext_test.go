package protoext

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPartitionHealthRoundTrip(t *testing.T) {
	for _, h := range []PartitionHealth{
		{},
		{Offline: true, Error: "open log: input/output error"},
		{Corrupt: []CorruptRange{{FromOffset: 100, ToOffset: 130, Reason: "crc mismatch"}, {FromOffset: 900, ToOffset: -1, Reason: "torn"}}},
	} {
		got, err := ParsePartitionHealth(h.Append(nil))
		require.NoError(t, err)
		require.Equal(t, h, got)
	}
}

func FuzzParsePartitionHealth(f *testing.F) {
	f.Add(PartitionHealth{Corrupt: []CorruptRange{{1, 2, "x"}}}.Append(nil))
	f.Add([]byte{0, 0, 1, 255, 255, 255, 255, 15})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParsePartitionHealth(b)
		if err == nil {
			got, err := ParsePartitionHealth(h.Append(nil))
			require.NoError(t, err)
			require.Equal(t, h, got)
		}
	})
}

func TestPartitionCompactionRoundTrip(t *testing.T) {
	for _, c := range []PartitionCompaction{
		{LastCleanedMs: -1},
		{DirtyRatio: 0.4375, DirtyBytes: 1 << 30, CompactionDelayMs: 1500, Cleanings: 7,
			LastCleanedMs: 1_767_225_600_000, LastDurationMs: 84, Cleaning: true},
		{DirtyRatio: 1, LastCleanedMs: -1, Uncleanable: "clean: segment 00000000000000000042.log: crc mismatch"},
	} {
		got, err := ParsePartitionCompaction(c.Append(nil))
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
}

// What a parser refuses: the tool then shows the state as unknown
// instead of a wrong one.
func TestParsePartitionCompactionRefuses(t *testing.T) {
	good := PartitionCompaction{DirtyRatio: 0.5, LastCleanedMs: -1}.Append(nil)
	for name, b := range map[string][]byte{
		"empty":         nil,
		"newer version": append([]byte{1}, good[1:]...),
		"unknown flag":  append([]byte{0, 2}, good[2:]...),
		"truncated":     good[:len(good)-1],
		"trailing":      append(append([]byte(nil), good...), 0),
		"ratio above 1": PartitionCompaction{DirtyRatio: 1.5, LastCleanedMs: -1}.Append(nil),
		"negative":      PartitionCompaction{DirtyBytes: -1, LastCleanedMs: -1}.Append(nil),
		"before -1":     PartitionCompaction{LastCleanedMs: -2}.Append(nil),
		"NaN ratio":     PartitionCompaction{DirtyRatio: math.NaN(), LastCleanedMs: -1}.Append(nil),
		"null reason":   append(append([]byte(nil), good[:len(good)-1]...), 0),
		// A reason claiming 2^32 bytes in a 60-byte value is refused
		// before anything is allocated for it.
		"huge reason": append(append([]byte(nil), good[:len(good)-1]...), 0xff, 0xff, 0xff, 0xff, 0x0f),
	} {
		_, err := ParsePartitionCompaction(b)
		require.ErrorIs(t, err, ErrMalformedCompaction, name)
	}
}

func FuzzParsePartitionCompaction(f *testing.F) {
	f.Add(PartitionCompaction{DirtyRatio: 0.25, DirtyBytes: 4096, Cleanings: 2, LastCleanedMs: 1000, LastDurationMs: 3, Cleaning: true,
		Uncleanable: "x"}.Append(nil))
	f.Add(PartitionCompaction{LastCleanedMs: -1}.Append(nil))
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParsePartitionCompaction(b)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformedCompaction)
			return
		}
		// What parses is valid and survives a round trip (the bytes may
		// differ: a varint length has several encodings).
		got, err := ParsePartitionCompaction(c.Append(nil))
		require.NoError(t, err)
		require.Equal(t, c, got)
	})
}
