package controller

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/meta"
)

// v1Meta is the metadata directory of a node run by the previous release
// (version 1 commands), made by node/testdata/mkfixture.go.txt: topics
// orders (2 partitions, retention.ms and segment.bytes overrides), grown
// (1 then 3 partitions), gone (created and deleted), __consumer_offsets.
const v1Meta = "../../node/testdata/v1-datadir/meta"

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "meta")
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

// TestV1LogReplaysToTheSameState replays the Raft log the previous
// release wrote, entry by entry, into an empty state with this version's
// FSM: it must reach the state that release stored.
func TestV1LogReplaysToTheSameState(t *testing.T) {
	old, err := meta.Open(copyDir(t, v1Meta), testLogger())
	require.NoError(t, err)
	defer old.Close()
	want, err := loadState(old)
	require.NoError(t, err)
	require.Len(t, want.topics, 3)
	require.Empty(t, want.brokers, "the previous release registered no brokers")

	fresh, err := meta.Open(t.TempDir(), testLogger())
	require.NoError(t, err)
	defer fresh.Close()
	c := &Controller{db: fresh, logger: testLogger(), st: newState()}
	logs := old.LogStore()
	first, err := logs.FirstIndex()
	require.NoError(t, err)
	last, err := logs.LastIndex()
	require.NoError(t, err)
	applied := 0
	for i := first; i <= last; i++ {
		var l raft.Log
		require.NoError(t, logs.GetLog(i, &l))
		if l.Type != raft.LogCommand {
			continue
		}
		require.EqualValues(t, commandV1, l.Data[0])
		res := (&fsm{c: c}).Apply(&l)
		require.NoError(t, res.(*result).err, "entry %d", i)
		applied++
	}
	require.Greater(t, applied, 8)
	got, err := loadState(fresh)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, want.topics, c.st.topics)
	require.Equal(t, want.nextPID, c.st.nextPID)
}

// TestOpenV1Directory: a metadata directory of the previous release opens
// with its topics and cluster id, registers this broker and takes changes.
func TestOpenV1Directory(t *testing.T) {
	dir := copyDir(t, v1Meta)
	c := openAt(t, Options{Dir: dir, NodeID: 1, Host: "127.0.0.1", Port: 9092})
	var names []string
	for _, top := range c.Topics() {
		names = append(names, top.Name)
	}
	require.Equal(t, []string{"__consumer_offsets", "grown", "orders"}, names)
	orders, _ := c.Topic("orders")
	require.Equal(t, map[string]string{"retention.ms": "86400000", "segment.bytes": "1048576"}, orders.Configs)
	grown, _ := c.Topic("grown")
	require.Len(t, grown.Partitions, 3)
	brokers := c.Brokers()
	require.Len(t, brokers, 1)
	require.NotEmpty(t, brokers[0].Incarnation, "registered by this start")
	brokers[0].Incarnation = ""
	require.Equal(t, []metadata.Broker{{ID: 1, Host: "127.0.0.1", Port: 9092}}, brokers)
	id := c.ClusterID()
	require.NotEmpty(t, id)

	_, err := c.CreateTopic(testCtx(t), "new", 2, 1, nil, false)
	require.NoError(t, err)
	_, err = c.DeleteTopic(testCtx(t), "orders")
	require.NoError(t, err)
	require.NoError(t, c.Close())

	c = openAt(t, Options{Dir: dir, NodeID: 1, Host: "127.0.0.1", Port: 9092})
	require.Equal(t, id, c.ClusterID())
	_, ok := c.Topic("new")
	require.True(t, ok)
	_, ok = c.Topic("orders")
	require.False(t, ok)
}

// An entry this version cannot read (a newer release wrote it: an
// unknown version or record type) is not skipped as a rejected change:
// skipping it would leave the state without what it said (a topic whose
// directory the node would then remove as an orphan). The state machine
// stops, and the directory does not open again with this version.
func TestEntryFromANewerReleaseStopsTheStateMachine(t *testing.T) {
	for name, entry := range map[string][]byte{
		"version": {3, '[', ']'},
		"record":  append([]byte{commandV2}, `[{"type":"from_the_future","data":{}}]`...),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c := openAt(t, Options{Dir: dir, NodeID: 1})
			ctx := testCtx(t)
			before := c.AppliedIndex()
			_, _, err := c.proposeEntry(ctx, "future", entry)
			require.ErrorIs(t, err, ErrStateBroken)
			require.Equal(t, before, c.AppliedIndex(), "not applied")
			_, err = c.CreateTopic(ctx, "t", 1, 1, nil, false)
			require.ErrorIs(t, err, ErrStateBroken)
			require.NoError(t, c.Close())

			_, err = Open(ctx, Options{Dir: dir, NodeID: 1, Logger: testLogger()})
			require.ErrorIs(t, err, ErrStateBroken)
		})
	}
}
