package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// TestLivenessTracker drives the tracker with time as input, step by
// step: what liveness says at each instant, and what the active
// controller must do.
func TestLivenessTracker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newLivenessTracker(6 * time.Second)
	brokers := []metadata.Broker{{ID: 1}, {ID: 2}, {ID: 3}}
	setFenced := func(id int32, f bool) {
		for i := range brokers {
			if brokers[i].ID == id {
				brokers[i].Fenced = f
			}
		}
	}
	for _, step := range []struct {
		name          string
		at            time.Duration
		down          []int32
		do            func()
		fence, unfenc []int32
	}{
		{name: "all alive", at: 0},
		{name: "2 goes", at: time.Second, down: []int32{2}},
		{name: "not yet the session timeout since last seen (0s)", at: 5900 * time.Millisecond, down: []int32{2}},
		{name: "session timeout since last seen", at: 6 * time.Second, down: []int32{2}, fence: []int32{2}},
		{name: "fenced in the log; nothing more to do", at: 8 * time.Second, down: []int32{2}, do: func() { setFenced(2, true) }},
		{name: "2 returns", at: 9 * time.Second, unfenc: []int32{2}},
		{name: "unfenced", at: 10 * time.Second, do: func() { setFenced(2, false) }},
		{name: "a blip shorter than the timeout", at: 12 * time.Second, down: []int32{3}},
		{name: "back in time", at: 13 * time.Second},
		{name: "3 down again: its clock restarted", at: 14 * time.Second, down: []int32{3}},
		{name: "still inside (last seen at 13s)", at: 18900 * time.Millisecond, down: []int32{3}},
		{name: "out", at: 19 * time.Second, down: []int32{3}, fence: []int32{3}},
	} {
		if step.do != nil {
			step.do()
		}
		fence, unfence := tr.observe(t0.Add(step.at), brokers, func(id int32) bool {
			for _, d := range step.down {
				if d == id {
					return false
				}
			}
			return true
		}, nil)
		require.Equal(t, step.fence, fence, step.name)
		require.Equal(t, step.unfenc, unfence, step.name)
	}
}

// A new active controller has not seen anyone: every broker gets a full
// session from its first observation, even one that is down already.
func TestLivenessTrackerGraceOnNewController(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newLivenessTracker(time.Second)
	brokers := []metadata.Broker{{ID: 1}, {ID: 2}}
	down := func(id int32) bool { return id != 2 }
	f, _ := tr.observe(t0, brokers, down, nil)
	require.Empty(t, f)
	f, _ = tr.observe(t0.Add(999*time.Millisecond), brokers, down, nil)
	require.Empty(t, f)
	f, _ = tr.observe(t0.Add(time.Second), brokers, down, nil)
	require.Equal(t, []int32{2}, f)
	// A broker that disappears from the registrations is forgotten.
	tr.observe(t0.Add(2*time.Second), brokers[:1], down, nil)
	require.NotContains(t, tr.lastAlive, int32(2))
}

// A broker fenced by a controlled shutdown is still reachable while it
// stops: it is not unfenced for that, only once it was seen gone and
// returns (or registers again).
func TestLivenessTrackerControlledShutdown(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newLivenessTracker(time.Second)
	brokers := []metadata.Broker{{ID: 1}, {ID: 2, Fenced: true}}
	tr.shutDown(2)
	alive := func(int32) bool { return true }
	_, u := tr.observe(t0, brokers, alive, nil)
	require.Empty(t, u)
	_, u = tr.observe(t0.Add(time.Second), brokers, func(id int32) bool { return id != 2 }, nil)
	require.Empty(t, u)
	_, u = tr.observe(t0.Add(5*time.Second), brokers, alive, nil)
	require.Equal(t, []int32{2}, u, "back after it was gone")
}

// With the last contact known, the session counts from it: gossip called
// the broker alive for a while after it died, and a new active controller
// knows when it was last heard from. A broker reported alive is never
// fenced, however old its last contact (gossip reached it indirectly).
func TestLivenessTrackerCountsFromLastContact(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newLivenessTracker(6 * time.Second)
	brokers := []metadata.Broker{{ID: 1}, {ID: 2}, {ID: 3}}
	contacts := map[int32]time.Time{2: t0, 3: t0}
	contact := func(id int32) (time.Time, bool) { c, ok := contacts[id]; return c, ok }
	down := func(id int32) bool { return id != 2 }

	// t0+2s: gossip declares 2 dead; it was last heard from at t0.
	f, _ := tr.observe(t0.Add(2*time.Second), brokers, down, contact)
	require.Empty(t, f)
	f, _ = tr.observe(t0.Add(5900*time.Millisecond), brokers, down, contact)
	require.Empty(t, f)
	f, _ = tr.observe(t0.Add(6*time.Second), brokers, down, contact)
	require.Equal(t, []int32{2}, f, "six seconds after the last contact, not after the first observation")
	// 3's last contact is as old, but gossip says it is alive.
	f, _ = tr.observe(t0.Add(20*time.Second), []metadata.Broker{{ID: 3}}, down, contact)
	require.Empty(t, f)
}
