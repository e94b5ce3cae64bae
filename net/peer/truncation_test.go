package peer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecideTruncation(t *testing.T) {
	// The follower: epoch 1 from 0, epoch 3 from 10, log end 14, HW 6;
	// its EndOffsetForEpoch for the epochs asked below.
	follower := func(epoch int32) (int32, int64) {
		switch epoch {
		case 1, 2:
			return 1, 10
		case 3:
			return 3, 14
		}
		return -1, -1
	}
	for _, tc := range []struct {
		name        string
		leaderEpoch int32
		leaderEnd   int64
		want        truncation
	}{
		{"the leader knows no such epoch: the HW", -1, -1, truncation{to: 6, askEpoch: -1}},
		{"the same epoch, the leader ended it first", 3, 12, truncation{to: 12, askEpoch: -1}},
		{"the same epoch, the follower ended it first", 1, 11, truncation{to: 10, askEpoch: -1}},
		{"the same epoch, the leader has more", 3, 40, truncation{to: 14, askEpoch: -1}},
		{"an epoch the follower lacks: cut and ask about its own below", 2, 12, truncation{to: 10, askEpoch: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, decideTruncation(tc.leaderEpoch, tc.leaderEnd, follower, 14, 6))
		})
	}
	empty := func(int32) (int32, int64) { return -1, -1 }
	require.Equal(t, truncation{to: 5, askEpoch: -1}, decideTruncation(2, 5, empty, 9, 0),
		"nothing at or below the leader's epoch: keep what the leader has")
}
