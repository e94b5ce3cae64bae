package kafka_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/node"
)

// The leader epoch a client names in Fetch and ListOffsets reaches the
// partition, whose checks answer FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH
// at once, with no offsets; a follower fetch is refused, this node having no
// followers. (The rules themselves are tested in engine/replica.)
func TestFetchAndListOffsetsCheckTheLeaderEpoch(t *testing.T) {
	s := startServer(t, node.Config{})
	createTopic(t, s, "e", 1) // leader epoch 0
	rc := dialRaw(t, s)
	fetch := func(epoch, replica int32) kmsg.FetchResponseTopicPartition {
		req := fetchRequest("e", time.Minute) // errors answer at once, not at MaxWait
		req.ReplicaID, req.Topics[0].Partitions[0].CurrentLeaderEpoch = replica, epoch
		rc.send(req)
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = req.Version
		rc.recv(resp)
		return resp.Topics[0].Partitions[0]
	}
	listOffsets := func(epoch int32) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 4
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "e"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = -1, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		rc.send(req)
		resp := kmsg.NewPtrListOffsetsResponse()
		resp.Version = req.Version
		rc.recv(resp)
		return resp.Topics[0].Partitions[0]
	}

	for epoch, want := range map[int32]*kerr.Error{-2: kerr.FencedLeaderEpoch, 1: kerr.UnknownLeaderEpoch} {
		fp := fetch(epoch, -1)
		require.Equal(t, want.Code, fp.ErrorCode, "fetch naming epoch %d", epoch)
		require.Equal(t, int64(-1), fp.HighWatermark)
		lp := listOffsets(epoch)
		require.Equal(t, want.Code, lp.ErrorCode, "ListOffsets naming epoch %d", epoch)
		require.Equal(t, int64(-1), lp.Offset)
	}
	require.Equal(t, kerr.NotLeaderForPartition.Code, fetch(-1, 2).ErrorCode, "a follower fetch")
	require.Equal(t, kerr.UnknownLeaderEpoch.Code, fetch(0, 2).ErrorCode, "a follower fetch naming the epoch")
	lp := listOffsets(0)
	require.Zero(t, lp.ErrorCode)
	require.Equal(t, int64(0), lp.Offset)
}
