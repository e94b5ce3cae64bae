package controller

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// applyTo applies recs to st as the FSM does and returns the delta's
// change names.
func applyTo(t testing.TB, st *state, recs []record) ([]string, error) {
	t.Helper()
	x, err := applyRecords(st, recs)
	if err != nil {
		return nil, err
	}
	x.mutate(st)
	return changeNames(x.changes()), nil
}

func testState(t testing.TB) state {
	st := newState()
	st.brokers[1] = metadata.Broker{ID: 1, Host: "h", Port: 9092}
	recs, err := planCreateTopic(&st, "t", uuid.NewString(), false, assign(0, 2, 1, oneBroker, 0), nil)
	require.NoError(t, err)
	_, err = applyTo(t, &st, recs)
	require.NoError(t, err)
	return st
}

// TestPlanIsPure checks that planning and dry-running never change the
// state they read: the proposer runs them on the live state under a read
// lock.
func TestPlanIsPure(t *testing.T) {
	st := testState(t)
	before := st.topics["t"].Clone()
	for name, planFn := range map[string]planFunc{
		"partitions": func(st *state) ([]record, error) {
			return planCreatePartitions(st, "t", 4, assign(2, 2, 1, oneBroker, 0))
		},
		"alter": func(st *state) ([]record, error) {
			return planAlterConfigs(st, "t", []metadata.ConfigOp{{Key: "retention.ms", Op: metadata.OpSet, Value: "5"}})
		},
		"replace": func(st *state) ([]record, error) {
			return planReplaceConfigs(st, "t", map[string]string{"retention.ms": "7"})
		},
		"delete": func(st *state) ([]record, error) { return planDeleteTopic(st, "t") },
		"pids":   func(st *state) ([]record, error) { return planProducerIDs(st, 1, 3) },
		"register": func(st *state) ([]record, error) {
			return planRegisterBroker(st, metadata.Broker{ID: 2, Port: 1}, eligibleIn(st, nil))
		},
	} {
		recs, err := planFn(&st)
		require.NoError(t, err, name)
		_, err = applyRecords(&st, recs)
		require.NoError(t, err, name)
		require.Equal(t, before, st.topics["t"].Clone(), name)
		require.Zero(t, st.nextPID, name)
		require.Len(t, st.brokers, 1, name)
	}
}

// TestRecords applies record lists to a state and checks the state and
// the delta each produces, as the FSM applies a log entry.
func TestRecords(t *testing.T) {
	id, id2 := uuid.NewString(), uuid.NewString()
	str := func(s string) *string { return &s }
	i32 := func(v int32) *int32 { return &v }
	part := func(p int32, replicas ...int32) *partitionRecord {
		return &partitionRecord{TopicID: id, Partition: p, Replicas: replicas, ISR: replicas, Leader: replicas[0]}
	}
	st := newState()
	for _, step := range []struct {
		name    string
		recs    []record
		changes []string
		err     error
		check   func(t *testing.T, st *state)
	}{
		{name: "register", recs: []record{&registerBrokerRecord{BrokerID: 1, Host: "a", Port: 9092}, &registerBrokerRecord{BrokerID: 2, Host: "b", Port: 9092, Rack: "r1"}},
			changes: []string{"BrokerRegistered:1", "BrokerRegistered:2"},
			check:   func(t *testing.T, st *state) { require.Equal(t, []int32{1, 2}, slices.Sorted(maps.Keys(st.brokers))) }},
		{name: "topic without partitions", recs: []record{&topicRecord{Name: "t", TopicID: id}}, err: metadata.ErrInvalidPartitions},
		{name: "create", recs: []record{&topicRecord{Name: "t", TopicID: id}, part(0, 1, 2), part(1, 2, 1),
			&configRecord{ResourceType: configResourceTopic, ResourceName: "t", Name: "retention.ms", Value: str("5")}},
			changes: []string{"TopicCreated:t"},
			check: func(t *testing.T, st *state) {
				top := st.topics["t"]
				require.Len(t, top.Partitions, 2)
				require.Equal(t, []int32{2, 1}, top.Partitions[1].Replicas)
				require.Equal(t, map[string]string{"retention.ms": "5"}, top.Configs)
				require.Equal(t, "t", st.byID[top.ID])
			}},
		{name: "duplicate name", recs: []record{&topicRecord{Name: "t", TopicID: uuid.NewString()}, part(0, 1)}, err: metadata.ErrTopicExists},
		{name: "colliding names in one entry", recs: []record{&topicRecord{Name: "a.b", TopicID: id2}, &topicRecord{Name: "a_b", TopicID: uuid.NewString()}}, err: metadata.ErrInvalidTopicName},
		{name: "partition out of order", recs: []record{part(3, 1, 2)}, err: metadata.ErrInvalidPartitions},
		{name: "partition of unknown topic", recs: []record{&partitionRecord{TopicID: uuid.NewString(), Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}, err: metadata.ErrUnknownTopic},
		{name: "partition with other replication", recs: []record{part(2, 1)}, err: metadata.ErrInvalidReplicationFactor},
		{name: "add partition", recs: []record{part(2, 1, 2)}, changes: []string{"PartitionChanged:t-2"}},
		{name: "leader change bumps the epoch", recs: []record{&partitionChangeRecord{TopicID: id, Partition: 0, Leader: i32(2)}},
			changes: []string{"PartitionChanged:t-0"},
			check: func(t *testing.T, st *state) {
				p := st.topics["t"].Partitions[0]
				require.EqualValues(t, 2, p.Leader)
				require.EqualValues(t, 1, p.LeaderEpoch)
				require.Equal(t, []int32{1, 2}, p.ISR)
			}},
		{name: "same leader keeps the epoch; ISR shrinks", recs: []record{&partitionChangeRecord{TopicID: id, Partition: 0, Leader: i32(2), ISR: []int32{2}}},
			changes: []string{"PartitionChanged:t-0"},
			check: func(t *testing.T, st *state) {
				p := st.topics["t"].Partitions[0]
				require.EqualValues(t, 1, p.LeaderEpoch)
				require.Equal(t, []int32{2}, p.ISR)
			}},
		{name: "leader outside the ISR", recs: []record{&partitionChangeRecord{TopicID: id, Partition: 0, Leader: i32(1)}}, err: metadata.ErrInvalidRequest},
		{name: "bad config set is rejected whole", recs: []record{
			&configRecord{ResourceType: configResourceTopic, ResourceName: "t", Name: "segment.ms", Value: str("10")},
			&configRecord{ResourceType: configResourceTopic, ResourceName: "t", Name: "retention.ms", Value: str("x")},
		}, err: metadata.ErrInvalidConfig,
			check: func(t *testing.T, st *state) { require.NotContains(t, st.topics["t"].Configs, "segment.ms") }},
		{name: "configs", recs: []record{
			&configRecord{ResourceType: configResourceTopic, ResourceName: "t", Name: "segment.ms", Value: str("10")},
			&configRecord{ResourceType: configResourceTopic, ResourceName: "t", Name: "retention.ms"},
		}, changes: []string{"ConfigsChanged:t"},
			check: func(t *testing.T, st *state) {
				require.Equal(t, map[string]string{"segment.ms": "10"}, st.topics["t"].Configs)
			}},
		{name: "producer ids", recs: []record{&producerIDsRecord{BrokerID: 1, NextProducerID: 10}},
			check: func(t *testing.T, st *state) { require.EqualValues(t, 10, st.nextPID) }},
		{name: "producer ids never go back", recs: []record{&producerIDsRecord{BrokerID: 1, NextProducerID: 10}}, err: metadata.ErrInvalidRequest},
		{name: "remove and re-create in one entry", recs: []record{&removeTopicRecord{TopicID: id},
			&topicRecord{Name: "t", TopicID: uuid.NewString()}, &partitionRecord{Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}},
			err: metadata.ErrInvalidRequest}, // the partition names no topic id
		{name: "remove", recs: []record{&removeTopicRecord{TopicID: id}}, changes: []string{"TopicDeleted:t"},
			check: func(t *testing.T, st *state) {
				require.Empty(t, st.topics)
				require.Empty(t, st.byID)
				require.Empty(t, st.collisions)
			}},
		{name: "cluster id is chosen once", recs: []record{&clusterRecord{ClusterID: "a"}, &clusterRecord{ClusterID: "b"}},
			check: func(t *testing.T, st *state) { require.Equal(t, "a", st.clusterID) }},
	} {
		got, err := applyTo(t, &st, step.recs)
		if step.err != nil {
			require.ErrorIs(t, err, step.err, step.name)
		} else {
			require.NoError(t, err, step.name)
			require.Equal(t, step.changes, got, step.name)
		}
		if step.check != nil {
			step.check(t, &st)
		}
	}
}

func TestPlanRejectsMalformedCommands(t *testing.T) {
	st := testState(t)
	id := uuid.NewString()
	for _, tc := range []struct {
		cmd  *command
		want error
	}{
		{&command{Op: "from_the_future"}, metadata.ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: "nope", Partitions: assign(0, 1, 1, oneBroker, 0)}, metadata.ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: uuid.UUID{}.String(), Partitions: assign(0, 1, 1, oneBroker, 0)}, metadata.ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id}, metadata.ErrInvalidPartitions},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionAssignment{{}}}, metadata.ErrInvalidReplicationFactor},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionAssignment{{Replicas: []int32{1, 1}, Leader: 1, ISR: []int32{1}}}}, metadata.ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionAssignment{{Replicas: []int32{1}, Leader: 2, ISR: []int32{1}}}}, metadata.ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionAssignment{{Replicas: []int32{1}, Leader: 1}}}, metadata.ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionAssignment{{Replicas: []int32{1}, Leader: 1, ISR: []int32{1, 3}}}}, metadata.ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionAssignment{{Replicas: []int32{-1}, Leader: -1, ISR: []int32{-1}}}}, metadata.ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionAssignment{
			{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}},
			{Replicas: []int32{1, 2}, Leader: 1, ISR: []int32{1}},
		}}, metadata.ErrInvalidReplicationFactor},
		// A concurrent CreatePartitions already grew the topic.
		{&command{Op: opCreatePartitions, Topic: "t", Total: 5, Partitions: assign(3, 2, 1, oneBroker, 0)}, metadata.ErrInvalidPartitions},
		{&command{Op: opCreatePartitions, Topic: "t", Total: 3, Partitions: []partitionAssignment{{Replicas: []int32{1, 2}, Leader: 1, ISR: []int32{1}}}}, metadata.ErrInvalidReplicationFactor},
	} {
		recs, err := recordsFromV1(tc.cmd, &st)
		if err == nil {
			_, err = applyRecords(&st, recs)
		}
		require.ErrorIs(t, err, tc.want, "%+v", tc.cmd)
	}
	// Once the cluster id is chosen, init_cluster changes nothing.
	st.clusterID = "c"
	recs, err := recordsFromV1(&command{Op: opInitCluster}, &st)
	require.NoError(t, err)
	require.Empty(t, recs)
	st.clusterID = ""
	_, err = recordsFromV1(&command{Op: opInitCluster}, &st)
	require.ErrorIs(t, err, metadata.ErrInvalidRequest)

	st.nextPID = 1<<63 - 2
	_, err = recordsFromV1(&command{Op: opAllocProducerIDs, Count: 2}, &st)
	require.ErrorIs(t, err, metadata.ErrProducerIDsExhausted)
	_, err = recordsFromV1(&command{Op: opAllocProducerIDs, Count: 1}, &st)
	require.NoError(t, err)
}

func TestTopicRecordRoundTrip(t *testing.T) {
	st := testState(t)
	top := st.topics["t"]
	top.Configs["retention.ms"] = "1"
	b, err := encodeTopic(top)
	require.NoError(t, err)
	got, err := decodeTopic(b)
	require.NoError(t, err)
	require.Equal(t, top.Clone(), got.Clone())

	for _, bad := range [][]byte{nil, {9}, {recordV1}, []byte("\x01{}"), []byte(`\x01{"name":"x","id":"bad","partitions":[{}]}`)} {
		_, err := decodeTopic(bad)
		require.Error(t, err, "%q", bad)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	st := testState(t)
	recs, err := planCreateTopic(&st, "x", uuid.NewString(), false, assign(0, 3, 1, oneBroker, 0), map[string]string{"retention.ms": "9"})
	require.NoError(t, err)
	recs = append(recs, &partitionChangeRecord{TopicID: "id", Leader: new(int32)}, &producerIDsRecord{NextProducerID: 5},
		&registerBrokerRecord{BrokerID: 3, Rack: "r"}, &clusterRecord{ClusterID: "c"}, &removeTopicRecord{TopicID: "id"})
	b, err := encodeRecords(recs)
	require.NoError(t, err)
	got, err := decodeEntry(b, &st)
	require.NoError(t, err)
	require.Equal(t, recs, got)

	for _, bad := range [][]byte{nil, {commandV2}, []byte("\x02{}")} {
		_, err := decodeEntry(bad, &st)
		require.ErrorIs(t, err, metadata.ErrInvalidRequest, "%q", bad)
	}
	for _, newer := range [][]byte{{9}, []byte(`` + "\x02" + `[{"type":"from_the_future","data":{}}]`)} {
		_, err := decodeEntry(newer, &st)
		require.ErrorIs(t, err, errNewerEntry, "%q", newer)
	}
}

// FuzzApplyEntry feeds arbitrary log entries to decode and apply: they
// must be rejected with an error, never panic.
func FuzzApplyEntry(f *testing.F) {
	st := testState(f)
	id := topicIDString(st.topics["t"].ID)
	for _, c := range []*command{
		{Op: opCreateTopic, Topic: "x", TopicID: uuid.NewString(), Partitions: assign(0, 2, 1, oneBroker, 0)},
		{Op: opCreatePartitions, Topic: "t", Total: 3, Partitions: assign(2, 1, 1, oneBroker, 0)},
		{Op: opAlterConfigs, Topic: "t", ConfigOps: []configOpRecord{{Key: "cleanup.policy", Op: int8(metadata.OpAppend), Value: "compact"}}},
		{Op: opReplaceConfigs, Topic: "t", Configs: map[string]string{"segment.ms": "10"}},
		{Op: opDeleteTopic, Topic: "t"},
		{Op: opAllocProducerIDs, Count: 5},
		{Op: opInitCluster, ClusterID: "abc"},
	} {
		b, err := encodeCommandV1(c)
		require.NoError(f, err)
		f.Add(b)
	}
	for _, recs := range [][]record{
		{&topicRecord{Name: "y", TopicID: uuid.NewString()}},
		{&partitionRecord{TopicID: id, Partition: 2, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}},
		{&partitionChangeRecord{TopicID: id, Partition: 1, ISR: []int32{1}}},
		{&removeTopicRecord{TopicID: id}},
	} {
		b, err := encodeRecords(recs)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{3, '{', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		st := testState(t)
		recs, err := decodeEntry(b, &st)
		if err != nil {
			return
		}
		x, err := applyRecords(&st, recs)
		if err != nil {
			return
		}
		x.mutate(&st)
		for _, top := range st.topics {
			_, err := encodeTopic(top)
			require.NoError(t, err)
			require.NotEmpty(t, top.Partitions, fmt.Sprint(top.Name))
		}
	})
}

var oneBroker = []metadata.Broker{{ID: 1}}
