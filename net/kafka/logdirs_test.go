package kafka

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/cleaner"
	"github.com/moonmq/moonmq/net/protoext"
)

// The wire form keeps the tag's promises whatever the cleaner holds, so
// a client never refuses the state of a partition: the ratio in [0, 1], no
// negative counts, a reason cut to the parser's bound on a character
// boundary, -1 for no cleaning yet.
func TestCompactionStateIsAlwaysParseable(t *testing.T) {
	long := strings.Repeat("é", protoext.MaxUncleanable) // 2 bytes each
	for _, cs := range []cleaner.PartitionStats{
		{},
		{DirtyRatio: math.NaN()},
		{DirtyRatio: 1.5, DirtyBytes: -1, CompactionDelay: -time.Second},
		{DirtyRatio: 0.3, LastCleaned: time.UnixMilli(1_767_225_600_000), LastDuration: 5 * time.Millisecond, Cleanings: 2, Uncleanable: long},
	} {
		pc := compactionState(cs)
		got, err := protoext.ParsePartitionCompaction(pc.Append(nil))
		require.NoError(t, err, "%+v", cs)
		require.Equal(t, pc, got)
		if cs.LastCleaned.IsZero() {
			require.Equal(t, int64(-1), got.LastCleanedMs)
		} else {
			require.Equal(t, cs.LastCleaned.UnixMilli(), got.LastCleanedMs)
		}
		require.LessOrEqual(t, len(got.Uncleanable), protoext.MaxUncleanable)
		require.True(t, strings.HasPrefix(cs.Uncleanable, got.Uncleanable))
	}
	require.Equal(t, 1.0, compactionState(cleaner.PartitionStats{DirtyRatio: 1.5}).DirtyRatio)
}
