package tui

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/net/client"
)

// snap builds a snapshot of one user topic and one internal topic.
func snap(at time.Time, ends map[int32]int64, bytes int64, committed int64) *snapshot {
	return &snapshot{
		at:      at,
		cluster: client.ClusterHealth{ClusterInfo: client.ClusterInfo{Controller: 1, Brokers: []client.Broker{{ID: 1, Host: "h", Port: 1}}}},
		topics: []client.TopicInfo{
			{Name: "__consumer_offsets", Internal: true, Partitions: 1, Bytes: 10},
			{Name: "orders", Partitions: len(ends), Bytes: bytes},
		},
		ends: map[string]map[int32]int64{"orders": ends, "__consumer_offsets": {0: committed}},
		groups: []groupState{{summary: client.GroupSummary{Name: "g"}, desc: &client.GroupDescription{
			Offsets:  []client.GroupOffset{{Topic: "orders", Partition: 0, Committed: committed}},
			TotalLag: ends[0] - committed,
		}}},
	}
}

func TestTrackerRates(t *testing.T) {
	tr := newTracker(time.Minute, 500*time.Millisecond)
	tr.observe(snap(t0, map[int32]int64{0: 100, 1: 50}, 1000, 10))
	_, ok := tr.in("orders")
	require.False(t, ok, "one snapshot: no rate yet")
	require.False(t, tr.inKnown)

	tr.observe(snap(t0.Add(2*time.Second), map[int32]int64{0: 300, 1: 50}, 5000, 30))
	in, ok := tr.in("orders")
	require.True(t, ok)
	require.Equal(t, 100.0, in)
	require.Equal(t, 100.0, tr.totalIn, "internal topics are left out of totals")
	p0, _ := tr.partitionIn("orders", 0)
	p1, _ := tr.partitionIn("orders", 1)
	require.Equal(t, []float64{100, 0}, []float64{p0, p1})
	out, ok := tr.out("orders")
	require.True(t, ok)
	require.Equal(t, 10.0, out)
	require.Equal(t, 10.0, tr.groupCommit["g"])
	b, ok := tr.inBytes("orders")
	require.True(t, ok)
	require.Equal(t, 2000.0, b)
	require.True(t, tr.bytesKnown)

	// A snapshot right after the last one (a manual refresh) keeps the
	// rates instead of dividing by a tiny interval.
	tr.observe(snap(t0.Add(2100*time.Millisecond), map[int32]int64{0: 310, 1: 50}, 5000, 30))
	in, _ = tr.in("orders")
	require.Equal(t, 100.0, in)

	// Offsets going backwards (topic re-created, group reset) are no
	// progress, not a negative rate; unknown sizes make bytes/s unknown.
	tr.observe(snap(t0.Add(3*time.Second), map[int32]int64{0: 5, 1: 50}, -1, 0))
	in, ok = tr.in("orders")
	require.True(t, ok)
	require.Equal(t, 0.0, in)
	out, _ = tr.out("orders")
	require.Equal(t, 0.0, out)
	_, ok = tr.inBytes("orders")
	require.False(t, ok)
	require.False(t, tr.bytesKnown)

	// Without end offsets, rates are unknown rather than zero.
	s := snap(t0.Add(4*time.Second), map[int32]int64{0: 5}, -1, 0)
	s.ends = nil
	tr.observe(s)
	_, ok = tr.in("orders")
	require.False(t, ok)

	// A failed snapshot leaves a gap in the histories.
	tr.observe(&snapshot{at: t0.Add(5 * time.Second), err: errBrokerDown})
	last, _ := tr.inHist.last()
	require.True(t, math.IsNaN(last.v))
	require.False(t, tr.inKnown)

	// Lag history per group.
	require.Len(t, tr.lagHist["g"].samples, 5)
}

func TestTrackerBrokers(t *testing.T) {
	tr := newTracker(time.Minute, 0)
	s := snap(t0, map[int32]int64{0: 1}, 1, 0)
	s.cluster.Brokers = append(s.cluster.Brokers, client.Broker{ID: 2, Host: "h2", Port: 2})
	tr.observe(s)
	require.True(t, tr.brokers[2].up)
	tr.observe(snap(t0.Add(time.Second), map[int32]int64{0: 1}, 1, 0))
	require.False(t, tr.brokers[2].up)
	require.Equal(t, t0, tr.brokers[2].lastSeen)
}

func TestSeriesTrim(t *testing.T) {
	var s series
	for i := range 1000 {
		s.add(t0.Add(time.Duration(i)*time.Second), float64(i), time.Minute)
	}
	require.LessOrEqual(t, len(s.samples), 61+64, "old samples are dropped in chunks")
	last, ok := s.last()
	require.True(t, ok)
	require.Equal(t, 999.0, last.v)
}

func TestSparkline(t *testing.T) {
	var s series
	now := t0.Add(10 * time.Second)
	for i, v := range []float64{0, 1, 2, 4, 8} {
		s.add(t0.Add(time.Duration(5+i)*time.Second), v, time.Minute)
	}
	// 10 cells over 10 s: one second per cell, data in the last five.
	require.Equal(t, "     ▁▂▃▅█", sparkline(&s, now, 10*time.Second, 0, 10))
	// Refresh slower than a cell: values are held across the gap.
	var slow series
	slow.add(t0.Add(2*time.Second), 5, time.Minute)
	slow.add(t0.Add(6*time.Second), 10, time.Minute)
	require.Equal(t, "  ▅▅▅▅████", sparkline(&slow, now, 10*time.Second, 5*time.Second, 10))
	require.Equal(t, "  ▅   █   ", sparkline(&slow, now, 10*time.Second, 0, 10))
	// An outage (NaN) ends the carried value.
	slow.add(t0.Add(8*time.Second), math.NaN(), time.Minute)
	require.Equal(t, "  ▅▅▅▅██  ", sparkline(&slow, now, 10*time.Second, 5*time.Second, 10))
	// All zero is a flat line; tiny values are still above zero.
	var flat series
	flat.add(t0.Add(9*time.Second), 0, time.Minute)
	require.Equal(t, "         ▁", sparkline(&flat, now, 10*time.Second, 0, 10))
	var tiny series
	tiny.add(t0.Add(8*time.Second), 1000, time.Minute)
	tiny.add(t0.Add(9*time.Second), 1, time.Minute)
	require.Equal(t, "        █▂", sparkline(&tiny, now, 10*time.Second, 0, 10))
	require.Equal(t, "", sparkline(&tiny, now, time.Minute, 0, 0))
	require.Equal(t, "   ", sparkline(nil, now, time.Minute, 0, 3))
}
