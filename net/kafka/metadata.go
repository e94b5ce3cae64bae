package kafka

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/group"
)

func (c *conn) handleMetadata(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.MetadataRequest)
	z := c.authz(r)
	if c.createsOffsetsTopic(req) && z.mayCreateTopic(group.OffsetsTopic) {
		// Kafka creates its internal topics when a client asks for them,
		// whatever auto.create.topics.enable says: lag monitors such as
		// Burrow read __consumer_offsets before any group exists and give
		// up when it is missing. The coordinator creates it with its own
		// settings, through the metadata log: park.
		return nil, func() kmsg.Response {
			ctx, cancel := context.WithTimeout(c.ctx, groupWait)
			defer cancel()
			if err := c.s.opts.Groups.EnsureTopic(ctx); err != nil {
				c.s.log.Warn("could not create the offsets topic a Metadata request named",
					"peer", c.peer, "topic", group.OffsetsTopic, "err", err)
			}
			return c.metadata(req, z)
		}
	}
	return c.metadata(req, z), nil
}

// mayCreateTopic: DESCRIBE on the topic and CREATE on the cluster or the
// topic, what Kafka asks of a Metadata request that creates a topic.
func (z authz) mayCreateTopic(name string) bool {
	return z.allowed(acl.OpDescribe, acl.ResourceTopic, name) &&
		(z.quietly(acl.OpCreate, acl.ResourceCluster, acl.ClusterName) || z.allowed(acl.OpCreate, acl.ResourceTopic, name))
}

// createsOffsetsTopic reports whether req names __consumer_offsets, which
// does not exist yet, and allows creating topics (v4+ says so explicitly).
func (c *conn) createsOffsetsTopic(req *kmsg.MetadataRequest) bool {
	if c.s.opts.Groups == nil || req.Version >= 4 && !req.AllowAutoTopicCreation {
		return false
	}
	for _, rt := range req.Topics {
		if rt.Topic != nil && *rt.Topic == group.OffsetsTopic {
			_, exists := c.s.meta.Topic(group.OffsetsTopic)
			return !exists
		}
	}
	return false
}

// metadata answers with the topics the principal may DESCRIBE (Kafka's
// handleTopicMetadataRequest): a listing of all topics leaves the others
// out; a topic named but not describable is TOPIC_AUTHORIZATION_FAILED
// whether or not it exists, so its existence is not disclosed; a topic
// that would be auto-created also needs CREATE.
func (c *conn) metadata(req *kmsg.MetadataRequest, z authz) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	s := c.s
	for _, b := range s.liveBrokers() {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = b.ID, b.Host, b.Port
		mb.Rack = rackOf(b)
		resp.Brokers = append(resp.Brokers, mb)
	}
	clusterID := s.meta.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = s.meta.ControllerID()

	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if z.allowed(acl.OpDescribe, acl.ResourceCluster, acl.ClusterName) {
			resp.AuthorizedOperations = z.operations(acl.ResourceCluster, acl.ClusterName)
		}
	}
	withOps := func(mt kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
		if req.Version >= 8 && req.IncludeTopicAuthorizedOperations && mt.Topic != nil {
			mt.AuthorizedOperations = z.operations(acl.ResourceTopic, *mt.Topic)
		}
		return mt
	}

	down := s.downBrokers()
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range s.meta.Topics() {
			if z.quietly(acl.OpDescribe, acl.ResourceTopic, t.Name) {
				resp.Topics = append(resp.Topics, withOps(c.metadataTopic(t, down)))
			}
		}
		return resp
	}
	for _, rt := range req.Topics {
		var (
			t  metadata.Topic
			ok bool
		)
		switch {
		case rt.Topic != nil:
			if !z.allowed(acl.OpDescribe, acl.ResourceTopic, *rt.Topic) {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic, mt.ErrorCode = rt.Topic, kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			t, ok = s.meta.Topic(*rt.Topic)
			if !ok && c.mayAutoCreate(*rt.Topic) && (req.Version < 4 || req.AllowAutoTopicCreation) {
				if !z.quietly(acl.OpCreate, acl.ResourceCluster, acl.ClusterName) && !z.allowed(acl.OpCreate, acl.ResourceTopic, *rt.Topic) {
					mt := kmsg.NewMetadataResponseTopic()
					mt.Topic, mt.ErrorCode = rt.Topic, kerr.TopicAuthorizationFailed.Code
					resp.Topics = append(resp.Topics, mt)
					continue
				}
				var err error
				if t, ok, err = c.autoCreate(*rt.Topic); err != nil {
					mt := kmsg.NewMetadataResponseTopic()
					mt.Topic, mt.ErrorCode = rt.Topic, c.errCode(err)
					resp.Topics = append(resp.Topics, mt)
					continue
				}
			}
		default:
			t, ok = topicByID(s.meta, rt.TopicID)
			if ok && !z.allowed(acl.OpDescribe, acl.ResourceTopic, t.Name) {
				// Topic ids are not secret (Kafka answers them), names are.
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID, mt.ErrorCode = rt.TopicID, kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		if !ok {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID, mt.ErrorCode = rt.Topic, rt.TopicID, kerr.UnknownTopicOrPartition.Code
			if rt.Topic == nil {
				mt.ErrorCode = kerr.UnknownTopicID.Code
			}
			resp.Topics = append(resp.Topics, withOps(mt))
			continue
		}
		resp.Topics = append(resp.Topics, withOps(c.metadataTopic(t, down)))
	}
	return resp
}

// mayAutoCreate: auto-creation is off by default and never makes internal
// topics, which their owners create with their own settings.
func (c *conn) mayAutoCreate(name string) bool {
	return c.s.opts.AutoCreateTopics && !metadata.IsInternalTopic(name)
}

// autoCreate creates a topic with the broker defaults. Two clients racing
// to create the same topic both get it: losing the race is not an error.
func (c *conn) autoCreate(name string) (metadata.Topic, bool, error) {
	if err := c.checkCapacity(c.s.opts.DefaultPartitions); err != nil {
		return metadata.Topic{}, false, err
	}
	t, err := c.s.meta.CreateTopic(c.ctx, name, c.s.opts.DefaultPartitions, -1, nil, false)
	if errors.Is(err, metadata.ErrTopicExists) {
		t, ok := c.s.meta.Topic(name)
		return t, ok, nil
	}
	return t, err == nil, err
}

// metadataTopic describes a topic's partitions. On a cluster each one is
// as the controller has it: its leader, and as offline replicas those its
// brokers reported offline (their storage failed) and those on brokers
// that are down (fenced: down holds them), as Kafka lists them, whichever
// node answers. A single node answers from its own replica of each
// partition, the only one there is.
func (c *conn) metadataTopic(t metadata.Topic, down map[int32]bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.ID
		mp.Leader = p.Leader
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = p.Replicas
		mp.ISR = p.ISR
		mp.OfflineReplicas = []int32{}
		if c.s.opts.Clustered {
			mp.OfflineReplicas = offlineReplicas(p, down)
			if p.Leader == metadata.NoLeader {
				// No ISR member can lead: Kafka's answer for an offline
				// partition, so clients retry rather than dial -1.
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			mt.Partitions = append(mt.Partitions, mp)
			continue
		}
		switch c.s.replicaState(t.Name, p.ID) {
		case replicaUnopened:
			// As Kafka answers for a replica on a failed log directory with
			// no other replica to lead: no leader, this broker offline.
			mp.ErrorCode, mp.Leader = kerr.LeaderNotAvailable.Code, -1
			mp.OfflineReplicas = []int32{c.s.opts.NodeID}
		case replicaFailed:
			// Its log takes no appends (KAFKA_STORAGE_ERROR) but still
			// serves reads, DeleteRecords and retention, so clients keep
			// the leader to reach it; the replica is listed offline.
			mp.OfflineReplicas = []int32{c.s.opts.NodeID}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// offlineReplicas are p's replicas that cannot serve, in replica order:
// reported offline, or on a broker that is down.
func offlineReplicas(p metadata.Partition, down map[int32]bool) []int32 {
	out := []int32{}
	for _, r := range p.Replicas {
		if down[r] || slices.Contains(p.Offline, r) {
			out = append(out, r)
		}
	}
	return out
}

// downBrokers are, on a cluster, the registered brokers that are fenced
// (nil alone). This node is never among them: it answers.
func (s *Server) downBrokers() map[int32]bool {
	if !s.opts.Clustered {
		return nil
	}
	down := map[int32]bool{}
	for _, b := range s.meta.Brokers() {
		if b.Fenced && b.ID != s.opts.NodeID {
			down[b.ID] = true
		}
	}
	return down
}

func topicByID(meta Metadata, id [16]byte) (metadata.Topic, bool) {
	if id == ([16]byte{}) {
		return metadata.Topic{}, false
	}
	for _, t := range meta.Topics() {
		if t.ID == id {
			return t, true
		}
	}
	return metadata.Topic{}, false
}

func (c *conn) handleDescribeCluster(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.EndpointType != 1 { // 1 = brokers; 2 (controllers) is KRaft-only
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return resp, nil
	}
	resp.EndpointType = req.EndpointType
	// Kafka checks nothing to describe the cluster; DESCRIBE on it only
	// decides whether the authorized operations are told (AuthHelper.
	// computeDescribeClusterResponse).
	if req.IncludeClusterAuthorizedOperations {
		z := c.authz(r)
		resp.ClusterAuthorizedOperations = 0
		if z.allowed(acl.OpDescribe, acl.ResourceCluster, acl.ClusterName) {
			resp.ClusterAuthorizedOperations = z.operations(acl.ResourceCluster, acl.ClusterName)
		}
	}
	resp.ClusterID = c.s.meta.ClusterID()
	resp.ControllerID = c.s.meta.ControllerID()
	for _, b := range c.s.liveBrokers() {
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port = b.ID, b.Host, b.Port
		db.Rack = rackOf(b)
		resp.Brokers = append(resp.Brokers, db)
	}
	return resp, nil
}

// liveBrokers are the registered brokers that are not fenced, which
// clients may connect to. This node is always among them, at its own
// advertised address, even before its registration is applied (a client
// that reached it must be able to find it again).
func (s *Server) liveBrokers() []metadata.Broker {
	var out []metadata.Broker
	self := false
	for _, b := range s.meta.Brokers() {
		if b.ID == s.opts.NodeID {
			self = true
			b.Host, b.Port, b.Fenced = s.advHost, s.advPort, false
		}
		if !b.Fenced {
			out = append(out, b)
		}
	}
	if !self {
		out = append(out, metadata.Broker{ID: s.opts.NodeID, Host: s.advHost, Port: s.advPort})
		slices.SortFunc(out, func(a, b metadata.Broker) int { return cmp.Compare(a.ID, b.ID) })
	}
	return out
}
