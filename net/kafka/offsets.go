package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/replica"
)

func (c *conn) handleListOffsets(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	describable := c.authz(r).topics(acl.OpDescribe, namesOf(req.Topics, func(t *kmsg.ListOffsetsRequestTopic) string { return t.Topic }))
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			if !describable[t.Topic] {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			part, err := c.s.broker.Partition(replica.TopicPartition{Topic: t.Topic, Partition: p.Partition})
			if err != nil {
				rp.ErrorCode = c.errCode(err)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			res, err := part.ListOffset(replica.ListOffsetParams{Timestamp: p.Timestamp,
				Isolation: replica.IsolationLevel(req.IsolationLevel), CurrentLeaderEpoch: p.CurrentLeaderEpoch})
			rp.Offset, rp.Timestamp, rp.LeaderEpoch = res.Offset, res.Timestamp, res.LeaderEpoch
			rp.ErrorCode = c.errCode(err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (c *conn) handleDeleteRecords(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	deletable := c.authz(r).topics(acl.OpDelete, namesOf(req.Topics, func(t *kmsg.DeleteRecordsRequestTopic) string { return t.Topic }))
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LowWatermark = -1
			if !deletable[t.Topic] {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			if metadata.IsInternalTopic(t.Topic) {
				rp.ErrorCode = kerr.InvalidTopicException.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			part, err := c.s.broker.Partition(replica.TopicPartition{Topic: t.Topic, Partition: p.Partition})
			if err != nil {
				rp.ErrorCode = c.errCode(err)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			if low, err := part.DeleteRecords(p.Offset); err != nil {
				rp.ErrorCode = c.errCode(err)
			} else {
				rp.LowWatermark = low
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (c *conn) handleInitProducerID(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	// Kafka: WRITE on the transactional id; an idempotent producer needs
	// IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
	z := c.authz(r)
	switch {
	case req.TransactionalID != nil:
		if !z.allowed(acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionalID) {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return resp, nil
		}
	case !z.quietly(acl.OpIdempotentWrite, acl.ResourceCluster, acl.ClusterName) && !z.byResourceType(acl.OpWrite, acl.ResourceTopic):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if req.TransactionalID != nil && c.s.opts.Txns != nil {
		return c.initTransactional(req, resp)
	}
	if req.TransactionalID != nil {
		// No transaction coordinator: refuse instead of handing
		// out an id that cannot commit. UNSUPPORTED_VERSION is the code
		// clients present as "not supported" (KafkaJS, librdkafka and
		// franz-go all turn TRANSACTIONAL_ID_AUTHORIZATION_FAILED into a
		// permissions problem, which sends users to their ACLs).
		c.refuseTransactions("InitProducerId", *req.TransactionalID)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp, nil
	}
	// An idempotent (non-transactional) producer always gets a fresh id, as
	// Kafka does: its sequence state lives in the partitions, keyed by id.
	return nil, func() kmsg.Response {
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		defer cancel()
		id, err := c.s.pids.Next(ctx)
		if err != nil {
			resp.ErrorCode = c.errCode(err)
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
		return resp
	}
}
