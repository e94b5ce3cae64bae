package protoext

import (
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
