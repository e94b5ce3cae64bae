package kafka

// OffsetForLeaderEpoch (API 23), versions 0-4 (what Kafka 3.x and 4.x
// serve): for each partition, the end offset of the largest leader epoch
// at or below the one asked, as the partition answers it
// (replica.Partition.OffsetForLeaderEpoch). Followers ask it of a new
// leader to find where their log diverged (KIP-101/279, ReplicaID = the
// follower's id in v3+); consumers ask it after a leader change to detect
// truncation (KIP-320, ReplicaID -1). v2+ carries the epoch the asker
// believes current, checked as Fetch checks it (FENCED_LEADER_EPOCH,
// UNKNOWN_LEADER_EPOCH); v0 answers without the epoch (kmsg leaves it out
// of the encoding). An unknown epoch is answered -1/-1 without an error,
// as Kafka does. The request needs no cluster action: it is answered on the
// read loop.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/replica"
)

func (c *conn) handleOffsetForLeaderEpoch(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	replicaID := req.ReplicaID
	if req.Version < 3 {
		// kmsg defaults the field to -2 (debugging) where it is absent;
		// before v3 the asker is a consumer or an old follower, both
		// answered by the leader only, as Kafka does.
		replicaID = -1
	}
	// Followers have CLUSTER_ACTION; consumers (KIP-320) need DESCRIBE
	// on each topic, as in Kafka.
	z := c.authz(r)
	var describable map[string]bool
	if !z.quietly(acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName) {
		describable = z.topics(acl.OpDescribe, namesOf(req.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic }))
	}
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, 0, len(req.Topics))
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			if describable != nil && !describable[t.Topic] {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			part, err := c.s.broker.Partition(replica.TopicPartition{Topic: t.Topic, Partition: p.Partition})
			if err == nil { // CurrentLeaderEpoch decodes as -1 (not checked) before v2
				rp.LeaderEpoch, rp.EndOffset, err = part.OffsetForLeaderEpoch(replicaID, p.CurrentLeaderEpoch, p.LeaderEpoch)
			}
			rp.ErrorCode = c.errCode(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
