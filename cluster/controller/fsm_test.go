package controller

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func testState(t testing.TB) state {
	st := newState()
	e := plan(&command{
		Op: opCreateTopic, Topic: "t", TopicID: uuid.NewString(),
		Partitions: assign(0, 2, 1, []int32{1}),
	}, &st)
	require.NoError(t, e.result.err)
	e.mutate(&st)
	return st
}

// TestPlanIsPure checks that planning never changes the state it reads:
// the proposer runs plan on the live state under a read lock.
func TestPlanIsPure(t *testing.T) {
	st := testState(t)
	before := st.topics["t"].Clone()
	for _, cmd := range []*command{
		{Op: opCreatePartitions, Topic: "t", Total: 4, Partitions: assign(2, 2, 1, []int32{1})},
		{Op: opAlterConfigs, Topic: "t", ConfigOps: []configOpRecord{{Key: "retention.ms", Op: int8(OpSet), Value: "5"}}},
		{Op: opReplaceConfigs, Topic: "t", Configs: map[string]string{"retention.ms": "7"}},
		{Op: opDeleteTopic, Topic: "t"},
		{Op: opAllocProducerIDs, Count: 3},
	} {
		e := plan(cmd, &st)
		require.NoError(t, e.result.err, cmd.Op)
		require.Equal(t, before, st.topics["t"].Clone(), cmd.Op)
		require.Zero(t, st.nextPID)
	}
}

func TestPlanRejectsMalformedCommands(t *testing.T) {
	st := testState(t)
	id := uuid.NewString()
	for _, tc := range []struct {
		cmd  *command
		want error
	}{
		{&command{Op: "from_the_future"}, ErrInvalidRequest},
		{&command{Op: opInitCluster}, ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: "nope", Partitions: assign(0, 1, 1, []int32{1})}, ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: uuid.UUID{}.String(), Partitions: assign(0, 1, 1, []int32{1})}, ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id}, ErrInvalidPartitions},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionRecord{{}}}, ErrInvalidReplicationFactor},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionRecord{{Replicas: []int32{1, 1}, Leader: 1, ISR: []int32{1}}}}, ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionRecord{{Replicas: []int32{1}, Leader: 2, ISR: []int32{1}}}}, ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionRecord{{Replicas: []int32{1}, Leader: 1}}}, ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionRecord{{Replicas: []int32{1}, Leader: 1, ISR: []int32{1, 3}}}}, ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionRecord{{Replicas: []int32{-1}, Leader: -1, ISR: []int32{-1}}}}, ErrInvalidRequest},
		{&command{Op: opCreateTopic, Topic: "x", TopicID: id, Partitions: []partitionRecord{
			{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}},
			{Replicas: []int32{1, 2}, Leader: 1, ISR: []int32{1}},
		}}, ErrInvalidReplicationFactor},
		// A concurrent CreatePartitions already grew the topic.
		{&command{Op: opCreatePartitions, Topic: "t", Total: 5, Partitions: assign(3, 2, 1, []int32{1})}, ErrInvalidPartitions},
		{&command{Op: opCreatePartitions, Topic: "t", Total: 3, Partitions: []partitionRecord{{Replicas: []int32{1, 2}, Leader: 1, ISR: []int32{1}}}}, ErrInvalidReplicationFactor},
	} {
		e := plan(tc.cmd, &st)
		require.ErrorIs(t, e.result.err, tc.want, "%+v", tc.cmd)
		require.Nil(t, e.put)
	}

	st.nextPID = 1<<63 - 2
	e := plan(&command{Op: opAllocProducerIDs, Count: 2}, &st)
	require.ErrorIs(t, e.result.err, ErrProducerIDsExhausted)
	e = plan(&command{Op: opAllocProducerIDs, Count: 1}, &st)
	require.NoError(t, e.result.err)
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

// FuzzApplyCommand feeds arbitrary log entries to decode and plan: they
// must be rejected with an error, never panic.
func FuzzApplyCommand(f *testing.F) {
	for _, c := range []*command{
		{Op: opCreateTopic, Topic: "x", TopicID: uuid.NewString(), Partitions: assign(0, 2, 1, []int32{1})},
		{Op: opCreatePartitions, Topic: "t", Total: 3, Partitions: assign(2, 1, 1, []int32{1})},
		{Op: opAlterConfigs, Topic: "t", ConfigOps: []configOpRecord{{Key: "cleanup.policy", Op: int8(OpAppend), Value: "compact"}}},
		{Op: opReplaceConfigs, Topic: "t", Configs: map[string]string{"segment.ms": "10"}},
		{Op: opDeleteTopic, Topic: "t"},
		{Op: opAllocProducerIDs, Count: 5},
		{Op: opInitCluster, ClusterID: "abc"},
	} {
		b, err := encodeCommand(c)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{2, '{', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		st := testState(t)
		cmd, err := decodeCommand(b)
		if err != nil {
			return
		}
		e := plan(cmd, &st)
		if e.result.err == nil {
			e.mutate(&st)
			if e.put != nil {
				_, err := encodeTopic(e.put)
				require.NoError(t, err)
			}
		}
	})
}
