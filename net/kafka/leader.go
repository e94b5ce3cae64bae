package kafka

// NOT_LEADER_OR_FOLLOWER answers (KIP-951): where the version has the
// tagged fields, a partition refused because this broker does not lead it
// names the leader the metadata knows (CurrentLeader: id and epoch) and the
// response lists that leader's endpoint (NodeEndpoints), so a client
// redirects without a Metadata round trip. Produce has them from v10,
// Fetch has CurrentLeader from v12 and NodeEndpoints from v16 (beyond
// what this broker serves). Without a known leader both stay at their
// defaults (-1), which clients read as "refresh the metadata".

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// leaderHint is the leader of a partition as the metadata knows it.
type leaderHint struct {
	id, epoch int32
	ok        bool
}

// currentLeader looks up the metadata's leader of topic/partition for a
// refusal with code; only NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH
// carry one, as in Kafka.
func (c *conn) currentLeader(code int16, topic string, partition int32) leaderHint {
	if code != kerr.NotLeaderForPartition.Code && code != kerr.FencedLeaderEpoch.Code {
		return leaderHint{}
	}
	t, ok := c.s.meta.Topic(topic)
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return leaderHint{}
	}
	p := t.Partitions[partition]
	if p.Leader == metadata.NoLeader {
		return leaderHint{}
	}
	return leaderHint{id: p.Leader, epoch: p.LeaderEpoch, ok: true}
}

// leaderEndpoints are the live brokers among ids (each once), for
// NodeEndpoints.
func (c *conn) leaderEndpoints(ids map[int32]bool) []metadata.Broker {
	if len(ids) == 0 {
		return nil
	}
	var out []metadata.Broker
	for _, b := range c.s.liveBrokers() {
		if ids[b.ID] {
			out = append(out, b)
		}
	}
	return out
}

// rackOf is a broker's rack as the nullable field of the responses that
// list brokers (null when unset).
func rackOf(b metadata.Broker) *string {
	if b.Rack == "" {
		return nil
	}
	rack := b.Rack
	return &rack
}
