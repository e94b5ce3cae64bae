package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStallTrackerPerPartition(t *testing.T) {
	s := newStallTracker()
	require.Nil(t, s.longest())
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	// Partition 1 keeps acknowledging while partition 0 stalls for 3s: the
	// stall is partition 0's, not hidden by partition 1.
	s.acked(0, t0)
	for i := range 40 {
		s.acked(1, t0.Add(time.Duration(i)*100*time.Millisecond))
	}
	s.acked(0, t0.Add(3*time.Second))
	s.acked(0, t0.Add(3100*time.Millisecond))
	got := s.longest()
	require.NotNil(t, got)
	require.Equal(t, int32(0), got.Partition)
	require.InDelta(t, 3.0, got.Seconds, 1e-9)
	require.Equal(t, t0, got.From)
	require.Equal(t, t0.Add(3*time.Second), got.To)
	// An acknowledgement that reports an earlier time (promises race) does
	// not move the partition's last acknowledgement back.
	s.acked(1, t0.Add(time.Second))
	require.Equal(t, t0.Add(3900*time.Millisecond), s.lastAck[1])
}
