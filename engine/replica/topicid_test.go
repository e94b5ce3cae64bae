package replica

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A partition directory belongs to one topic id: reopening it for that id
// keeps its records, a directory of an older release (no id recorded) is
// adopted, and one left by an earlier topic of the same name (a delete
// this node never applied) is emptied before the new topic uses it.
func TestPartitionDirectoryRecordsTopicID(t *testing.T) {
	dir := t.TempDir()
	tp := TopicPartition{Topic: "x", Partition: 0}
	first, second := TopicID{1}, TopicID{2}

	b := open(t, dir)
	p, err := b.EnsurePartition(tp, nil) // as an older release made it: no id
	require.NoError(t, err)
	_, err = p.Append(producerBatch(-1, -1, -1, "a"))
	require.NoError(t, err)
	require.NoError(t, b.Close())
	_, err = os.Stat(filepath.Join(b.Dir(tp), topicIDFile))
	require.ErrorIs(t, err, os.ErrNotExist)

	for _, id := range []TopicID{first, first} { // adopted, then kept
		b = open(t, dir)
		p, err = b.EnsureLeader(tp, id, nil, 0)
		require.NoError(t, err)
		require.EqualValues(t, 1, p.Stats().LogEndOffset, "the records stay")
		require.NoError(t, b.Close())
	}

	b = open(t, dir)
	defer b.Close()
	p, err = b.EnsureFollower(tp, second, nil)
	require.NoError(t, err)
	require.EqualValues(t, 0, p.Stats().LogEndOffset, "nothing of the earlier topic")
	v, err := os.ReadFile(filepath.Join(b.Dir(tp), topicIDFile))
	require.NoError(t, err)
	got, err := decodeTopicIDFile(v)
	require.NoError(t, err)
	require.Equal(t, second, got)
}
