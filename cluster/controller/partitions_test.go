package controller

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// clusterState is a state with brokers 1..n and topic "t" whose
// partitions are given as {replicas, isr} (leader: the first ISR member).
func clusterState(t *testing.T, n int32, parts ...[2][]int32) *state {
	t.Helper()
	st := newState()
	for id := int32(1); id <= n; id++ {
		st.brokers[id] = metadata.Broker{ID: id, Host: "h", Port: 9000 + id}
	}
	pa := make([]partitionAssignment, len(parts))
	for i, p := range parts {
		pa[i] = partitionAssignment{Replicas: p[0], ISR: p[1], Leader: p[1][0]}
	}
	recs, err := planCreateTopic(&st, "t", uuid.NewString(), false, pa, nil)
	require.NoError(t, err)
	_, err = applyTo(t, &st, recs)
	require.NoError(t, err)
	return &st
}

func part(st *state, p int) metadata.Partition { return st.topics["t"].Partitions[p] }

// planAndApply plans with fn and applies the records, as the active
// controller commits them.
func planAndApply(t *testing.T, st *state, fn planFunc) []string {
	t.Helper()
	recs, err := fn(st)
	require.NoError(t, err)
	changes, err := applyTo(t, st, recs)
	require.NoError(t, err)
	return changes
}

func allEligible(st *state) func(int32) bool { return eligibleIn(st, nil) }

func TestFenceMovesLeadershipAndShrinksISRs(t *testing.T) {
	st := clusterState(t, 3,
		[2][]int32{{1, 2, 3}, {1, 2, 3}}, // leader 1: moves to 2
		[2][]int32{{2, 1, 3}, {2, 1}},    // follower 1: leaves the ISR
		[2][]int32{{1, 3, 2}, {1}},       // 1 is the last ISR member: stays, offline
		[2][]int32{{3, 2, 1}, {3, 2}},    // not in the ISR: untouched
	)
	live := func(id int32) bool { return id != 1 }
	changes := planAndApply(t, st, func(st *state) ([]record, error) { return planFenceBroker(st, 1, eligibleIn(st, live)) })
	require.Equal(t, []string{"BrokerRegistered:1", "PartitionChanged:t-0", "PartitionChanged:t-1", "PartitionChanged:t-2"}, changes)
	require.True(t, st.brokers[1].Fenced)

	p0 := part(st, 0)
	require.EqualValues(t, 2, p0.Leader)
	require.EqualValues(t, 1, p0.LeaderEpoch)
	require.EqualValues(t, 1, p0.PartitionEpoch)
	require.Equal(t, []int32{2, 3}, p0.ISR)

	p1 := part(st, 1)
	require.EqualValues(t, 2, p1.Leader)
	require.EqualValues(t, 0, p1.LeaderEpoch, "same leader, same epoch")
	require.EqualValues(t, 1, p1.PartitionEpoch)
	require.Equal(t, []int32{2}, p1.ISR)

	p2 := part(st, 2)
	require.Equal(t, metadata.NoLeader, p2.Leader)
	require.EqualValues(t, 1, p2.LeaderEpoch)
	require.Equal(t, []int32{1}, p2.ISR, "an ISR is never left empty")

	require.Zero(t, part(st, 3).PartitionEpoch)

	// Fencing again changes nothing.
	recs, err := planFenceBroker(st, 1, eligibleIn(st, live))
	require.NoError(t, err)
	require.Empty(t, recs)

	// The fenced broker comes back: unfenced, and it leads the partition
	// it was the last ISR member of; the others stay as they are.
	changes = planAndApply(t, st, func(st *state) ([]record, error) { return planUnfenceBroker(st, 1, allEligible(st)) })
	require.Equal(t, []string{"BrokerRegistered:1", "PartitionChanged:t-2"}, changes)
	require.False(t, st.brokers[1].Fenced)
	p2 = part(st, 2)
	require.EqualValues(t, 1, p2.Leader)
	require.EqualValues(t, 2, p2.LeaderEpoch)
	require.EqualValues(t, 2, p2.PartitionEpoch)
	require.EqualValues(t, 2, part(st, 0).Leader, "leadership is not moved back by unfencing")

	_, err = planFenceBroker(st, 9, allEligible(st))
	require.ErrorIs(t, err, metadata.ErrBrokerNotAvailable)
}

// No eligible ISR member: the leader goes, the partition is offline, and
// it comes back when an ISR member becomes eligible (not only by
// unfencing: one that was merely unreachable for a moment).
func TestOfflinePartitionElectsWhenAnISRMemberReturns(t *testing.T) {
	st := clusterState(t, 3, [2][]int32{{1, 2, 3}, {1, 2}})
	down := map[int32]bool{1: true, 2: true}
	live := func(id int32) bool { return !down[id] }
	planAndApply(t, st, func(st *state) ([]record, error) { return planFenceBroker(st, 1, eligibleIn(st, live)) })
	p := part(st, 0)
	require.Equal(t, metadata.NoLeader, p.Leader)
	require.Equal(t, []int32{2}, p.ISR)
	require.Empty(t, planOfflineLeaders(st, eligibleIn(st, live)), "nobody eligible yet")

	delete(down, 2)
	planAndApply(t, st, func(st *state) ([]record, error) { return planOfflineLeaders(st, eligibleIn(st, live)), nil })
	p = part(st, 0)
	require.EqualValues(t, 2, p.Leader)
	require.EqualValues(t, 2, p.LeaderEpoch)
	require.EqualValues(t, 2, p.PartitionEpoch)
}

func TestRegistrationUnfences(t *testing.T) {
	st := clusterState(t, 2, [2][]int32{{1, 2}, {1}})
	planAndApply(t, st, func(st *state) ([]record, error) { return planFenceBroker(st, 1, allEligible(st)) })
	require.Equal(t, metadata.NoLeader, part(st, 0).Leader)
	b := st.brokers[1]
	b.Fenced = false
	changes := planAndApply(t, st, func(st *state) ([]record, error) { return planRegisterBroker(st, b, allEligible(st)) })
	require.Equal(t, []string{"BrokerRegistered:1", "PartitionChanged:t-0"}, changes)
	require.False(t, st.brokers[1].Fenced)
	require.EqualValues(t, 1, part(st, 0).Leader)
	recs, err := planRegisterBroker(st, b, allEligible(st))
	require.NoError(t, err)
	require.Empty(t, recs, "the same registration again changes nothing")
}

func TestAlterPartition(t *testing.T) {
	st := clusterState(t, 4, [2][]int32{{1, 2, 3}, {1, 2, 3}})
	id := st.topics["t"].ID
	req := func(mod func(r *metadata.AlterPartitionRequest)) metadata.AlterPartitionRequest {
		r := metadata.AlterPartitionRequest{Topic: "t", TopicID: id, Partition: 0, LeaderID: 1, LeaderEpoch: 0, PartitionEpoch: 0, NewISR: []int32{1, 2}}
		if mod != nil {
			mod(&r)
		}
		return r
	}
	st.brokers[3] = metadata.Broker{ID: 3, Host: "h", Port: 1, Fenced: true}
	for _, tc := range []struct {
		name string
		req  metadata.AlterPartitionRequest
		err  error
	}{
		{"unknown topic", req(func(r *metadata.AlterPartitionRequest) { r.Topic = "nope" }), metadata.ErrUnknownTopic},
		{"wrong topic id", req(func(r *metadata.AlterPartitionRequest) { r.TopicID = uuid.New() }), metadata.ErrUnknownTopic},
		{"unknown partition", req(func(r *metadata.AlterPartitionRequest) { r.Partition = 1 }), metadata.ErrUnknownTopic},
		{"not the leader", req(func(r *metadata.AlterPartitionRequest) { r.LeaderID = 2; r.NewISR = []int32{2} }), metadata.ErrFencedLeaderEpoch},
		{"stale leader epoch", req(func(r *metadata.AlterPartitionRequest) { r.LeaderEpoch = -1 }), metadata.ErrFencedLeaderEpoch},
		{"future leader epoch", req(func(r *metadata.AlterPartitionRequest) { r.LeaderEpoch = 5 }), metadata.ErrFencedLeaderEpoch},
		{"stale partition epoch", req(func(r *metadata.AlterPartitionRequest) { r.PartitionEpoch = 3 }), metadata.ErrInvalidUpdateVersion},
		{"without the leader", req(func(r *metadata.AlterPartitionRequest) { r.NewISR = []int32{2} }), metadata.ErrInvalidRequest},
		{"duplicate", req(func(r *metadata.AlterPartitionRequest) { r.NewISR = []int32{1, 2, 2} }), metadata.ErrInvalidRequest},
		{"not a replica", req(func(r *metadata.AlterPartitionRequest) { r.NewISR = []int32{1, 4} }), metadata.ErrIneligibleReplica},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := planAlterPartition(st, tc.req, allEligible(st))
			require.ErrorIs(t, err, tc.err)
		})
	}

	// Shrink to {1,2}: committed with the next partition epoch.
	changes := planAndApply(t, st, func(st *state) ([]record, error) {
		recs, cur, err := planAlterPartition(st, req(nil), allEligible(st))
		require.EqualValues(t, 0, cur.PartitionEpoch)
		return recs, err
	})
	require.Equal(t, []string{"PartitionChanged:t-0"}, changes)
	p := part(st, 0)
	require.Equal(t, []int32{1, 2}, p.ISR)
	require.EqualValues(t, 1, p.PartitionEpoch)
	require.EqualValues(t, 0, p.LeaderEpoch)

	// The same proposal again is now stale.
	_, _, err := planAlterPartition(st, req(nil), allEligible(st))
	require.ErrorIs(t, err, metadata.ErrInvalidUpdateVersion)
	// Adding the fenced broker 3 back is refused (KIP-841).
	_, _, err = planAlterPartition(st, req(func(r *metadata.AlterPartitionRequest) { r.PartitionEpoch = 1; r.NewISR = []int32{3, 1, 2} }), allEligible(st))
	require.ErrorIs(t, err, metadata.ErrIneligibleReplica)
	// Once unfenced it may join; the ISR is kept in replica order.
	st.brokers[3] = metadata.Broker{ID: 3, Host: "h", Port: 1}
	planAndApply(t, st, func(st *state) ([]record, error) {
		recs, _, err := planAlterPartition(st, req(func(r *metadata.AlterPartitionRequest) { r.PartitionEpoch = 1; r.NewISR = []int32{3, 1, 2} }), allEligible(st))
		return recs, err
	})
	require.Equal(t, []int32{1, 2, 3}, part(st, 0).ISR)
	require.EqualValues(t, 2, part(st, 0).PartitionEpoch)
	// An ISR already as asked: nothing to commit.
	recs, cur, err := planAlterPartition(st, req(func(r *metadata.AlterPartitionRequest) { r.PartitionEpoch = 2; r.NewISR = []int32{2, 3, 1} }), allEligible(st))
	require.NoError(t, err)
	require.Empty(t, recs)
	require.EqualValues(t, 2, cur.PartitionEpoch)
}

func TestPreferredLeaderRebalance(t *testing.T) {
	st := clusterState(t, 3,
		[2][]int32{{1, 2, 3}, {2, 1, 3}}, // 1 preferred, in the ISR: moves back
		[2][]int32{{3, 1, 2}, {1, 2}},    // 3 preferred, not in the ISR: stays
		[2][]int32{{2, 3, 1}, {2, 3}},    // already the preferred leader
		[2][]int32{{3, 2, 1}, {2, 3}},    // 3 preferred but not live: stays
	)
	live := func(id int32) bool { return id != 3 }
	changes := planAndApply(t, st, func(st *state) ([]record, error) { return planPreferredLeaders(st, eligibleIn(st, live)), nil })
	require.Equal(t, []string{"PartitionChanged:t-0"}, changes)
	require.EqualValues(t, 1, part(st, 0).Leader)
	require.EqualValues(t, 1, part(st, 0).LeaderEpoch)
	require.EqualValues(t, 1, part(st, 1).Leader)
	require.EqualValues(t, 2, part(st, 3).Leader)
}

// The partition epoch survives a restart (it is stored with the topic).
func TestPartitionEpochIsStored(t *testing.T) {
	st := clusterState(t, 2, [2][]int32{{1, 2}, {1, 2}})
	planAndApply(t, st, func(st *state) ([]record, error) { return planFenceBroker(st, 2, allEligible(st)) })
	top := st.topics["t"]
	b, err := encodeTopic(top)
	require.NoError(t, err)
	got, err := decodeTopic(b)
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Partitions[0].PartitionEpoch)
	require.Equal(t, top.Partitions, got.Partitions)
}
