package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/cluster/metadata"
)

func brokersWithRacks(racks ...string) []metadata.Broker {
	out := make([]metadata.Broker, len(racks))
	for i, r := range racks {
		out[i] = metadata.Broker{ID: int32(i + 1), Rack: r}
	}
	return out
}

func TestAssignSpreadsReplicasAndLeaders(t *testing.T) {
	for _, tc := range []struct {
		brokers    int
		rf, parts  int
		start      int
		wantLeader int // partitions each broker leads
	}{
		{brokers: 1, rf: 1, parts: 4, wantLeader: 4},
		{brokers: 3, rf: 3, parts: 6, wantLeader: 2},
		{brokers: 3, rf: 2, parts: 9, start: 7, wantLeader: 3},
		{brokers: 5, rf: 3, parts: 10, start: 2, wantLeader: 2},
	} {
		t.Run(fmt.Sprintf("%d brokers rf %d", tc.brokers, tc.rf), func(t *testing.T) {
			brokers := brokersWithRacks(make([]string, tc.brokers)...)
			got := assign(0, int32(tc.parts), tc.rf, brokers, tc.start)
			require.Len(t, got, tc.parts)
			leaders, replicas := map[int32]int{}, map[int32]int{}
			for _, p := range got {
				require.Len(t, p.Replicas, tc.rf)
				require.Equal(t, p.Replicas[0], p.Leader)
				require.Equal(t, p.Replicas, p.ISR)
				for j, r := range p.Replicas {
					require.False(t, slices.Contains(p.Replicas[:j], r), "distinct replicas: %v", p.Replicas)
					replicas[r]++
				}
				leaders[p.Leader]++
			}
			for _, b := range brokers {
				require.Equal(t, tc.wantLeader, leaders[b.ID], "leaders of broker %d: %v", b.ID, leaders)
				require.Equal(t, tc.parts*tc.rf/tc.brokers, replicas[b.ID], "replicas of broker %d: %v", b.ID, replicas)
			}
		})
	}
}

// The same inputs place the same way (the proposer plans, the records
// carry the result, but a test or a replay must not see randomness).
func TestAssignIsDeterministic(t *testing.T) {
	b := brokersWithRacks("", "", "", "")
	require.Equal(t, assign(3, 5, 3, b, 11), assign(3, 5, 3, b, 11))
	// start moves the first leader.
	require.NotEqual(t, assign(0, 1, 1, b, 0)[0].Leader, assign(0, 1, 1, b, 1)[0].Leader)
}

// With racks, every partition's replicas span as many racks as they can
// (Kafka's rack-aware assignment), balanced racks or not.
func TestAssignRackAware(t *testing.T) {
	for name, tc := range map[string]struct {
		racks []string
		rf    int
	}{
		"balanced":           {racks: []string{"a", "a", "b", "b", "c", "c"}, rf: 3},
		"unbalanced":         {racks: []string{"a", "a", "a", "b"}, rf: 2},
		"more rf than racks": {racks: []string{"a", "b", "a", "b"}, rf: 3},
		"ids not by rack":    {racks: []string{"c", "b", "a", "c", "b", "a"}, rf: 3},
	} {
		t.Run(name, func(t *testing.T) {
			brokers := brokersWithRacks(tc.racks...)
			racks := map[string]bool{}
			for _, r := range tc.racks {
				racks[r] = true
			}
			for start := range 4 {
				for _, p := range assign(0, 12, tc.rf, brokers, start) {
					seen := map[string]bool{}
					for _, r := range p.Replicas {
						seen[tc.racks[r-1]] = true
					}
					require.Len(t, seen, min(tc.rf, len(racks)), "partition replicas %v over racks %v", p.Replicas, tc.racks)
					require.Len(t, p.Replicas, tc.rf)
				}
			}
		})
	}
	require.Equal(t, []int32{3, 2, 1, 6, 5, 4}, rackAlternated(brokersWithRacks("c", "b", "a", "c", "b", "a")))
}

// A client's replica assignment is taken as given: the first eligible
// replica leads, the eligible ones are the ISR; lists of the wrong size,
// repeated or unregistered brokers and partitions with no eligible replica
// are refused.
func TestManualAssignment(t *testing.T) {
	st := new(state)
	*st = newState()
	for _, id := range []int32{1, 2, 3} {
		st.brokers[id] = metadata.Broker{ID: id}
	}
	down := func(id int32) bool { return id != 3 }
	got, err := manualAssignment(st, 4, [][]int32{{3, 1}, {2, 3}}, 2, down)
	require.NoError(t, err)
	require.Equal(t, []partitionAssignment{
		{Replicas: []int32{3, 1}, Leader: 1, ISR: []int32{1}},
		{Replicas: []int32{2, 3}, Leader: 2, ISR: []int32{2}},
	}, got)

	all := func(int32) bool { return true }
	for _, tc := range []struct {
		lists [][]int32
		rf    int
		want  string
	}{
		{[][]int32{{1, 2}, {3}}, 2, "partition 5 has 1 replicas, want 2"},
		{[][]int32{{1, 1}}, 2, "partition 4 lists broker 1 twice"},
		{[][]int32{{1, 9}}, 2, "partition 4: broker 9 is not registered"},
		{[][]int32{{}}, 0, "partition 4 has 0 replicas, want 0"},
	} {
		_, err := manualAssignment(st, 4, tc.lists, tc.rf, all)
		require.ErrorIs(t, err, metadata.ErrInvalidReplicaAssignment)
		require.ErrorContains(t, err, tc.want)
	}
	_, err = manualAssignment(st, 0, [][]int32{{3}}, 1, down)
	require.ErrorIs(t, err, metadata.ErrInvalidReplicaAssignment)
	require.ErrorContains(t, err, "none of brokers [3] is alive")
}
