package controller

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// Reports on a replica's storage (planReplicaStorage): a table of
// partitions, each report planned against it, and what the partition is
// after the records are applied.
func TestPlanReplicaStorage(t *testing.T) {
	type want struct {
		leader      int32
		leaderEpoch int32
		isr         []int32
		offline     []int32
		unchanged   bool // no records at all
	}
	for _, tc := range []struct {
		name     string
		replicas []int32
		isr      []int32 // leader: its first member
		offline  []int32 // reported offline before the report under test
		live     func(int32) bool
		broker   int32
		off      bool
		want     want
	}{
		{name: "a follower fails: out of the ISR, leader stays",
			replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, broker: 2, off: true,
			want: want{leader: 1, isr: []int32{1, 3}, offline: []int32{2}}},
		{name: "the leader fails: the next ISR member leads in a new epoch",
			replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, broker: 1, off: true,
			want: want{leader: 2, leaderEpoch: 1, isr: []int32{2, 3}, offline: []int32{1}}},
		{name: "the leader fails: an ISR member that is not live is passed over",
			replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, live: func(id int32) bool { return id != 2 }, broker: 1, off: true,
			want: want{leader: 3, leaderEpoch: 1, isr: []int32{2, 3}, offline: []int32{1}}},
		{name: "the leader fails: an ISR member whose own replica is offline is passed over",
			replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, offline: []int32{2}, broker: 1, off: true,
			want: want{leader: 3, leaderEpoch: 1, isr: []int32{2, 3}, offline: []int32{1, 2}}},
		{name: "the leader fails with no other eligible ISR member: no leader, still in the ISR",
			replicas: []int32{1, 2, 3}, isr: []int32{1, 2}, live: func(id int32) bool { return id != 2 }, broker: 1, off: true,
			want: want{leader: metadata.NoLeader, leaderEpoch: 1, isr: []int32{2}, offline: []int32{1}}},
		{name: "the last ISR member fails: it stays in the ISR, the partition has no leader",
			replicas: []int32{1, 2}, isr: []int32{1}, broker: 1, off: true,
			want: want{leader: metadata.NoLeader, leaderEpoch: 1, isr: []int32{1}, offline: []int32{1}}},
		{name: "a replica outside the ISR fails: only listed",
			replicas: []int32{1, 2, 3}, isr: []int32{1, 2}, broker: 3, off: true,
			want: want{leader: 1, isr: []int32{1, 2}, offline: []int32{3}}},
		{name: "offline again: nothing to do",
			replicas: []int32{1, 2, 3}, isr: []int32{1, 3}, offline: []int32{2}, broker: 2, off: true,
			want: want{leader: 1, isr: []int32{1, 3}, offline: []int32{2}, unchanged: true}},
		{name: "online: only unlisted; it rejoins the ISR by catching up",
			replicas: []int32{1, 2, 3}, isr: []int32{1, 3}, offline: []int32{2}, broker: 2,
			want: want{leader: 1, isr: []int32{1, 3}}},
		{name: "online while another stays offline",
			replicas: []int32{1, 2, 3}, isr: []int32{1}, offline: []int32{2, 3}, broker: 3,
			want: want{leader: 1, isr: []int32{1}, offline: []int32{2}}},
		{name: "online again: nothing to do",
			replicas: []int32{1, 2, 3}, isr: []int32{1, 2, 3}, broker: 2,
			want: want{leader: 1, isr: []int32{1, 2, 3}, unchanged: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := clusterState(t, 3, [2][]int32{tc.replicas, tc.isr})
			setPartition(t, st, func(p *metadata.Partition) { p.Offline = tc.offline })
			args := replicaStorageArgs{Broker: tc.broker, Topic: "t", TopicID: st.topics["t"].ID, Offline: tc.off}
			recs, cur, err := planReplicaStorage(st, args, eligibleIn(st, tc.live))
			require.NoError(t, err)
			require.Equal(t, part(st, 0), cur, "the partition as it was")
			if tc.want.unchanged {
				require.Empty(t, recs)
				return
			}
			_, err = applyTo(t, st, recs)
			require.NoError(t, err)
			p := part(st, 0)
			require.Equal(t, tc.want.leader, p.Leader)
			require.Equal(t, tc.want.leaderEpoch, p.LeaderEpoch)
			require.Equal(t, tc.want.isr, p.ISR)
			require.Equal(t, tc.want.offline, p.Offline)
			require.EqualValues(t, 1, p.PartitionEpoch)
		})
	}
}

// setPartition changes partition 0 of topic t in place, as a test set-up.
func setPartition(t *testing.T, st *state, fn func(p *metadata.Partition)) {
	t.Helper()
	top := st.topics["t"].Clone()
	fn(&top.Partitions[0])
	st.topics["t"] = &top
}

// A partition without a leader elects when its replica is reported
// online: the one it was offline for, when it is the last ISR member.
func TestOnlineReportElects(t *testing.T) {
	st := clusterState(t, 2, [2][]int32{{1, 2}, {1}})
	id := st.topics["t"].ID
	report := func(off bool) []string {
		return planAndApply(t, st, func(st *state) ([]record, error) {
			recs, _, err := planReplicaStorage(st, replicaStorageArgs{Broker: 1, Topic: "t", TopicID: id, Offline: off}, allEligible(st))
			return recs, err
		})
	}
	require.Equal(t, []string{"PartitionChanged:t-0"}, report(true))
	p := part(st, 0)
	require.Equal(t, metadata.NoLeader, p.Leader)
	require.Empty(t, planOfflineLeaders(st, allEligible(st)), "an offline replica is not elected")

	require.Equal(t, []string{"PartitionChanged:t-0"}, report(false))
	p = part(st, 0)
	require.EqualValues(t, 1, p.Leader)
	require.EqualValues(t, 2, p.LeaderEpoch)
	require.Nil(t, p.Offline)
	require.Equal(t, []int32{1}, p.ISR)
}

func TestPlanReplicaStorageRefusals(t *testing.T) {
	st := clusterState(t, 3, [2][]int32{{1, 2}, {1, 2}})
	id := st.topics["t"].ID
	for _, tc := range []struct {
		name string
		a    replicaStorageArgs
		err  error
	}{
		{"unknown topic", replicaStorageArgs{Broker: 1, Topic: "nope", Offline: true}, metadata.ErrUnknownTopic},
		{"other topic id", replicaStorageArgs{Broker: 1, Topic: "t", TopicID: uuid.New(), Offline: true}, metadata.ErrUnknownTopic},
		{"unknown partition", replicaStorageArgs{Broker: 1, Topic: "t", TopicID: id, Partition: 1, Offline: true}, metadata.ErrUnknownTopic},
		{"unregistered broker", replicaStorageArgs{Broker: 9, Topic: "t", TopicID: id, Offline: true}, metadata.ErrBrokerNotAvailable},
		{"not a replica", replicaStorageArgs{Broker: 3, Topic: "t", TopicID: id, Offline: true}, metadata.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := planReplicaStorage(st, tc.a, allEligible(st))
			require.ErrorIs(t, err, tc.err)
		})
	}
}

// An offline replica is not eligible anywhere a leader or an ISR member
// is chosen: failover of a fenced leader, offline partitions, unfencing,
// the preferred-leader rebalance and a leader's ISR expansion.
func TestOfflineReplicaIsNeverChosen(t *testing.T) {
	t.Run("fenced leader", func(t *testing.T) {
		st := clusterState(t, 3, [2][]int32{{1, 2, 3}, {1, 2, 3}})
		setPartition(t, st, func(p *metadata.Partition) { p.Offline = []int32{2} })
		planAndApply(t, st, func(st *state) ([]record, error) { return planFenceBroker(st, 1, allEligible(st)) })
		require.EqualValues(t, 3, part(st, 0).Leader, "2 is in the ISR but offline")
	})
	t.Run("controlled shutdown of the last eligible member", func(t *testing.T) {
		st := clusterState(t, 2, [2][]int32{{1, 2}, {1, 2}})
		setPartition(t, st, func(p *metadata.Partition) { p.Offline = []int32{2} })
		planAndApply(t, st, func(st *state) ([]record, error) { return planFenceBroker(st, 1, allEligible(st)) })
		p := part(st, 0)
		require.Equal(t, metadata.NoLeader, p.Leader)
		require.Equal(t, []int32{2}, p.ISR)
	})
	t.Run("offline partitions and unfencing", func(t *testing.T) {
		st := clusterState(t, 2, [2][]int32{{1, 2}, {1}})
		setPartition(t, st, func(p *metadata.Partition) { p.Leader, p.Offline = metadata.NoLeader, []int32{1} })
		require.Empty(t, planOfflineLeaders(st, allEligible(st)))
		recs, err := planUnfenceBroker(st, 1, allEligible(st))
		require.NoError(t, err)
		require.Empty(t, recs, "1 is not fenced, and its replica is offline")
		b := st.brokers[1]
		b.Incarnation = "new"
		recs, err = planRegisterBroker(st, b, allEligible(st))
		require.NoError(t, err)
		require.Len(t, recs, 1, "the registration only")
	})
	t.Run("preferred leader", func(t *testing.T) {
		st := clusterState(t, 2, [2][]int32{{1, 2}, {2, 1}})
		setPartition(t, st, func(p *metadata.Partition) { p.Offline = []int32{1} })
		require.Empty(t, planPreferredLeaders(st, allEligible(st)))
	})
	t.Run("ISR expansion", func(t *testing.T) {
		st := clusterState(t, 3, [2][]int32{{1, 2, 3}, {1, 2}})
		setPartition(t, st, func(p *metadata.Partition) { p.Offline = []int32{3} })
		req := metadata.AlterPartitionRequest{Topic: "t", Partition: 0, LeaderID: 1, NewISR: []int32{1, 2, 3}}
		_, _, err := planAlterPartition(st, req, allEligible(st))
		require.ErrorIs(t, err, metadata.ErrIneligibleReplica)
		req.NewISR = []int32{1}
		recs, _, err := planAlterPartition(st, req, allEligible(st))
		require.NoError(t, err, "a shrink is not an expansion")
		require.Len(t, recs, 1)
	})
}

// The offline set goes through the records and the stored state: a change
// record without it leaves it as it is (every record written before it
// existed), one with an empty list clears it, and the FSM refuses a set
// that is not the partition's replicas or holds the leader.
func TestOfflineRecordsAndState(t *testing.T) {
	st := clusterState(t, 3, [2][]int32{{1, 2, 3}, {1, 2}})
	id := topicIDString(st.topics["t"].ID)
	set := func(rs ...int32) *[]int32 { s := append([]int32{}, rs...); return &s }

	// Encoded and decoded as the log carries them.
	recs := []record{
		&partitionChangeRecord{TopicID: id, Offline: set(3)},
		&partitionChangeRecord{TopicID: id, Offline: set()},
		&partitionChangeRecord{TopicID: id, ISR: []int32{1}},
	}
	b, err := encodeRecords(recs)
	require.NoError(t, err)
	require.Contains(t, string(b), `"offline":[3]`)
	require.Contains(t, string(b), `"offline":[]`)
	got, err := decodeEntry(b, st)
	require.NoError(t, err)
	require.Equal(t, recs, got)
	require.Nil(t, got[2].(*partitionChangeRecord).Offline, "absent: unchanged")

	// A record of an older release (no offline field) decodes as unchanged.
	var old partitionChangeRecord
	require.NoError(t, json.Unmarshal([]byte(`{"topic_id":"`+id+`","partition":0,"isr":[1,2]}`), &old))
	require.Nil(t, old.Offline)

	_, err = applyTo(t, st, []record{&partitionChangeRecord{TopicID: id, Offline: set(3)}})
	require.NoError(t, err)
	require.Equal(t, []int32{3}, part(st, 0).Offline)
	_, err = applyTo(t, st, []record{&partitionChangeRecord{TopicID: id, ISR: []int32{1}}})
	require.NoError(t, err)
	require.Equal(t, []int32{3}, part(st, 0).Offline, "unchanged")

	// Stored with the topic, and read back the same.
	enc, err := encodeTopic(st.topics["t"])
	require.NoError(t, err)
	require.Contains(t, string(enc), `"offline":[3]`)
	dec, err := decodeTopic(enc)
	require.NoError(t, err)
	require.Equal(t, st.topics["t"].Partitions, dec.Partitions)

	for name, bad := range map[string]*[]int32{"not a replica": set(4), "twice": set(3, 3), "the leader": set(1)} {
		_, err := applyTo(t, st, []record{&partitionChangeRecord{TopicID: id, Offline: bad}})
		require.ErrorIs(t, err, metadata.ErrInvalidRequest, name)
	}

	// Cleared: nil in the state, absent from the stored topic.
	_, err = applyTo(t, st, []record{&partitionChangeRecord{TopicID: id, Offline: set()}})
	require.NoError(t, err)
	require.Nil(t, part(st, 0).Offline)
	enc, err = encodeTopic(st.topics["t"])
	require.NoError(t, err)
	require.NotContains(t, string(enc), `"offline"`)
	dec, err = decodeTopic(enc)
	require.NoError(t, err)
	require.Equal(t, st.topics["t"].Partitions, dec.Partitions)
}

// A report from any node goes to the active controller, like an
// AlterPartition, and the caller's state has it when the call returns; its
// refusals keep their sentinels across the trip, and a report sent again
// changes nothing.
func TestReportReplicaStorageIsForwarded(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.awaitReady()
	ctx := testCtx(t)
	f := tc.follower()
	require.Eventually(t, func() bool { return len(f.Brokers()) == 3 }, 10*time.Second, 5*time.Millisecond)
	top, err := f.CreateTopic(ctx, "t", 1, 3, nil, false)
	require.NoError(t, err)
	p0 := top.Partitions[0]
	leader := p0.Leader

	np, err := f.ReportReplicaStorage(ctx, leader, "t", top.ID, 0, true)
	require.NoError(t, err)
	require.Equal(t, []int32{leader}, np.Offline)
	require.NotEqual(t, leader, np.Leader)
	require.NotEqual(t, metadata.NoLeader, np.Leader)
	require.Equal(t, p0.LeaderEpoch+1, np.LeaderEpoch)
	require.NotContains(t, np.ISR, leader)
	now, _ := f.Topic("t")
	require.Equal(t, np, now.Partitions[0], "applied on the caller when it returns")

	again, err := f.ReportReplicaStorage(ctx, leader, "t", top.ID, 0, true)
	require.NoError(t, err)
	require.Equal(t, np, again, "already so")

	_, err = f.ReportReplicaStorage(ctx, leader, "t", uuid.New(), 0, true)
	require.ErrorIs(t, err, metadata.ErrUnknownTopic)
	_, err = f.ReportReplicaStorage(ctx, 9, "t", top.ID, 0, true)
	require.ErrorIs(t, err, metadata.ErrBrokerNotAvailable)

	np, err = f.ReportReplicaStorage(ctx, leader, "t", top.ID, 0, false)
	require.NoError(t, err)
	require.Nil(t, np.Offline)
	require.NotContains(t, np.ISR, leader, "it rejoins by catching up")
}
