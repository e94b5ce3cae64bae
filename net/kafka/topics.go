package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/acl"
)

// adminCtx bounds an admin request by the client's timeout.
func (c *conn) adminCtx(timeoutMillis int32) (context.Context, context.CancelFunc) {
	if timeoutMillis <= 0 {
		timeoutMillis = 30_000
	}
	return context.WithTimeout(c.ctx, time.Duration(timeoutMillis)*time.Millisecond)
}

func (c *conn) handleCreateTopics(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	ctx, cancel := c.adminCtx(req.TimeoutMillis)
	defer cancel()
	// Kafka: CREATE on the cluster, or else on each topic; the configs of
	// a created topic are told only with DESCRIBE_CONFIGS on it.
	z := c.authz(r)
	clusterCreate := z.quietly(acl.OpCreate, acl.ResourceCluster, acl.ClusterName)
	for _, t := range req.Topics {
		if seen[t.Topic] > 1 {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, kerr.InvalidRequest.Code
			rt.ErrorMessage = errMessage(fmt.Errorf("topic %q appears more than once in the request", t.Topic))
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if !clusterCreate && !z.allowed(acl.OpCreate, acl.ResourceTopic, t.Topic) {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, kerr.TopicAuthorizationFailed.Code
			rt.ErrorMessage = errMessage(fmt.Errorf("not authorized to create topic %s", t.Topic))
			rt.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt := c.createTopic(ctx, t, req.ValidateOnly)
		if !z.quietly(acl.OpDescribeConfigs, acl.ResourceTopic, t.Topic) {
			rt.Configs, rt.ConfigErrorCode = nil, kerr.TopicAuthorizationFailed.Code
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (c *conn) createTopic(ctx context.Context, t kmsg.CreateTopicsRequestTopic, validateOnly bool) kmsg.CreateTopicsResponseTopic {
	rt := kmsg.NewCreateTopicsResponseTopic()
	rt.Topic = t.Topic
	fail := func(code int16, msg string) kmsg.CreateTopicsResponseTopic {
		rt.ErrorCode, rt.ErrorMessage = code, &msg
		return rt
	}
	partitions, rf := t.NumPartitions, t.ReplicationFactor
	var assignment [][]int32
	if len(t.ReplicaAssignment) > 0 {
		if partitions != -1 || rf != -1 {
			return fail(kerr.InvalidRequest.Code, "both replica assignment and partitions/replication factor were given")
		}
		var msg string
		if assignment, msg = topicAssignment(t.ReplicaAssignment); msg != "" {
			return fail(kerr.InvalidReplicaAssignment.Code, msg)
		}
		partitions = int32(len(assignment))
	}
	if partitions == -1 {
		partitions = c.s.opts.DefaultPartitions
	}
	if metadata.IsInternalTopic(t.Topic) {
		// Kafka refuses its own metadata topic this way; MoonMQ refuses
		// every internal topic, so nobody can create one with settings that
		// lose data (retention on committed offsets) before its owner does.
		return fail(kerr.InvalidRequest.Code, fmt.Sprintf("creation of internal topic %s is prohibited: "+
			"the broker creates it itself, with the settings it needs", t.Topic))
	}
	configs := make(map[string]string, len(t.Configs))
	for _, kv := range t.Configs {
		if kv.Value == nil {
			return fail(kerr.InvalidConfig.Code, fmt.Sprintf("config %q has a null value", kv.Name))
		}
		configs[kv.Name] = *kv.Value
	}
	if err := c.checkCapacity(partitions); err != nil {
		return fail(c.errCode(err), err.Error())
	}
	var topic metadata.Topic
	var err error
	if assignment != nil {
		topic, err = c.s.meta.CreateTopicAssigned(ctx, t.Topic, assignment, configs, validateOnly)
	} else {
		topic, err = c.s.meta.CreateTopic(ctx, t.Topic, partitions, rf, configs, validateOnly)
	}
	if err != nil {
		return fail(c.errCode(err), err.Error())
	}
	rt.TopicID = topic.ID
	rt.NumPartitions = int32(len(topic.Partitions))
	if len(topic.Partitions) > 0 {
		rt.ReplicationFactor = int16(topic.ReplicationFactor())
	}
	rt.Configs = createTopicConfigs(topic.Configs, topic.ReplicationFactor())
	return rt
}

// checkCapacity refuses partitions this node has no file descriptors for,
// before anything is applied. Counts the controller will refuse anyway
// (not positive, over its limit) are left to it.
func (c *conn) checkCapacity(partitions int32) error {
	if partitions <= 0 || partitions > metadata.MaxPartitions {
		return nil
	}
	return c.s.broker.CheckCapacity(int(partitions))
}

// topicAssignment orders a CreateTopics replica assignment by partition:
// the partitions must be exactly 0..n-1, each listed once. Whether the
// brokers exist and are alive is the controller's to check.
func topicAssignment(as []kmsg.CreateTopicsRequestTopicReplicaAssignment) ([][]int32, string) {
	out := make([][]int32, len(as))
	for _, a := range as {
		if a.Partition < 0 || int(a.Partition) >= len(as) || out[a.Partition] != nil {
			return nil, fmt.Sprintf("the assignment must list partitions 0 to %d once each (partition %d)", len(as)-1, a.Partition)
		}
		if len(a.Replicas) == 0 {
			return nil, fmt.Sprintf("partition %d has no replicas", a.Partition)
		}
		out[a.Partition] = a.Replicas
	}
	return out, ""
}

func createTopicConfigs(overrides map[string]string, replicationFactor int) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, e := range describeTopicConfigEntries(overrides, replicationFactor, nil, false, false) {
		out = append(out, kmsg.CreateTopicsResponseTopicConfig{
			Name: e.Name, Value: e.Value, ReadOnly: e.ReadOnly, Source: int8(e.Source), IsSensitive: e.IsSensitive,
		})
	}
	return out
}

func (c *conn) handleDeleteTopics(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	ctx, cancel := c.adminCtx(req.TimeoutMillis)
	defer cancel()
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	for _, n := range req.TopicNames { // v0-v5
		targets = append(targets, target{name: &n})
	}
	for _, t := range req.Topics { // v6+
		targets = append(targets, target{name: t.Topic, id: t.TopicID})
	}
	z := c.authz(r)
	for _, t := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = t.name, t.id
		name := ""
		if t.name != nil {
			name = *t.name
		} else if topic, ok := topicByID(c.s.meta, t.id); ok {
			name = topic.Name
			rt.Topic = &topic.Name
			if !z.allowed(acl.OpDescribe, acl.ResourceTopic, name) {
				// As Kafka: the id is not secret, the name is.
				rt.Topic, rt.ErrorCode = nil, kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, rt)
				continue
			}
		} else {
			rt.ErrorCode = kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if !z.allowed(acl.OpDelete, acl.ResourceTopic, name) {
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if metadata.IsInternalTopic(name) {
			rt.ErrorCode = kerr.InvalidTopicException.Code
			rt.ErrorMessage = errMessage(fmt.Errorf("internal topic %s cannot be deleted", name))
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		topic, err := c.s.meta.DeleteTopic(ctx, name)
		if err != nil {
			rt.ErrorCode, rt.ErrorMessage = c.errCode(err), errMessage(err)
		} else {
			rt.TopicID = topic.ID
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (c *conn) handleCreatePartitions(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	ctx, cancel := c.adminCtx(req.TimeoutMillis)
	defer cancel()
	z := c.authz(r)
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		var assignment [][]int32
		for _, a := range t.Assignment {
			assignment = append(assignment, a.Replicas) // checked by the controller
		}
		if !z.allowed(acl.OpAlter, acl.ResourceTopic, t.Topic) {
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			rt.ErrorMessage = errMessage(fmt.Errorf("not authorized to alter topic %s", t.Topic))
		} else if metadata.IsInternalTopic(t.Topic) {
			// The group coordinator hashes groups over the partitions it
			// found; growing the topic would move groups.
			rt.ErrorCode = kerr.InvalidTopicException.Code
			rt.ErrorMessage = errMessage(fmt.Errorf("internal topic %s cannot get more partitions", t.Topic))
		}
		if rt.ErrorCode == 0 {
			if topic, ok := c.s.meta.Topic(t.Topic); ok {
				if err := c.checkCapacity(t.Count - int32(len(topic.Partitions))); err != nil {
					rt.ErrorCode, rt.ErrorMessage = c.errCode(err), errMessage(err)
				}
			}
		}
		if rt.ErrorCode == 0 {
			var err error
			if assignment != nil {
				_, err = c.s.meta.CreatePartitionsAssigned(ctx, t.Topic, t.Count, assignment, req.ValidateOnly)
			} else {
				_, err = c.s.meta.CreatePartitions(ctx, t.Topic, t.Count, req.ValidateOnly)
			}
			if err != nil {
				rt.ErrorCode, rt.ErrorMessage = c.errCode(err), errMessage(err)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
