package replica

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
)

// A compacted topic (compact or compact,delete) refuses a batch with a
// keyless record as a whole and names the records; a delete topic takes it.
func TestCompactedTopicRefusesKeylessRecords(t *testing.T) {
	b := open(t, t.TempDir())
	defer b.Close()
	for _, tc := range []struct {
		policy string
		refuse bool
	}{{"compact", true}, {"compact,delete", true}, {"delete,compact", true}, {"delete", false}} {
		tp := TopicPartition{Topic: "t" + tc.policy, Partition: 0}
		p, err := b.EnsurePartition(tp, map[string]string{"cleanup.policy": tc.policy})
		require.NoError(t, err)
		res, err := p.Append(producerBatch(-1, -1, -1, "x", "y"))
		if !tc.refuse {
			require.NoError(t, err, tc.policy)
			continue
		}
		require.ErrorIs(t, err, batch.ErrInvalidRecord, tc.policy)
		var refused *RecordsRefusedError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, 2, refused.Total)
		require.Equal(t, []RecordError{
			{0, "Compacted topic cannot accept message without key in topic partition " + tp.Topic + "-0"},
			{1, "Compacted topic cannot accept message without key in topic partition " + tp.Topic + "-0"},
		}, refused.Records)
		require.Zero(t, res.Records)
		require.Equal(t, int64(0), p.log.LogEndOffset(), "nothing of a refused batch is stored")
		_, err = p.Append(keyedBatch("k", "v"))
		require.NoError(t, err, tc.policy)
	}
}
