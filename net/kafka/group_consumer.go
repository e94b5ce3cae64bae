package kafka

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/group"
)

// KIP-848 consumer groups: the broker assigns, so a heartbeat never waits
// for other members and is answered on the read loop.

func (c *conn) handleConsumerGroupHeartbeat(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if !c.authz(r).allowed(acl.OpRead, acl.ResourceGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	// DESCRIBE on every subscribed topic name (Kafka 4): a member must not
	// learn through its subscription which topics it may not see exist.
	z := c.authz(r)
	var denied []string
	for _, name := range req.SubscribedTopicNames {
		if !z.quietly(acl.OpDescribe, acl.ResourceTopic, name) {
			denied = append(denied, name)
		}
	}
	if len(denied) > 0 {
		resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("not authorized to describe the subscribed topics %v", denied))
		return resp, nil
	}
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		resp.ErrorCode = code
		return resp, nil
	}
	hr := group.ConsumerHeartbeatRequest{
		Group: req.Group, Version: req.Version, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		InstanceID: req.InstanceID, RackID: req.RackID, RebalanceTimeout: -1,
		SubscribedTopicNames: req.SubscribedTopicNames, SubscribedTopicRegex: req.SubscribedTopicRegex,
		ServerAssignor: req.ServerAssignor, ClientID: r.clientID, ClientHost: c.clientHost(),
	}
	if req.RebalanceTimeoutMillis >= 0 {
		hr.RebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.Topics != nil {
		hr.Owned = make([]group.TopicPartitions, 0, len(req.Topics))
		for _, t := range req.Topics {
			hr.Owned = append(hr.Owned, group.TopicPartitions{ID: t.TopicID, Partitions: t.Partitions})
		}
	}
	return answer(c, groups.ConsumerHeartbeat(hr), func(res group.ConsumerHeartbeatResult, err error) kmsg.Response {
		return c.consumerHeartbeatResponse(resp, res, err)
	})
}

func (c *conn) consumerHeartbeatResponse(resp *kmsg.ConsumerGroupHeartbeatResponse, res group.ConsumerHeartbeatResult, err error) kmsg.Response {
	if err = firstErr(res.Err, err); err != nil {
		resp.ErrorCode = c.errCode(err)
		resp.ErrorMessage = errMessage(err)
		return resp
	}
	resp.MemberID = kmsg.StringPtr(res.MemberID)
	resp.MemberEpoch = res.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval.Milliseconds())
	if res.HasAssignment {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, t := range res.Assignment {
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = t.ID, t.Partitions
			a.Topics = append(a.Topics, at)
		}
		if a.Topics == nil {
			a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		}
		resp.Assignment = &a
	}
	return resp
}

func (c *conn) handleConsumerGroupDescribe(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	// DESCRIBE on each group (Kafka).
	z := c.authz(r)
	var allowed []string
	for _, id := range req.Groups {
		if z.allowed(acl.OpDescribe, acl.ResourceGroup, id) {
			allowed = append(allowed, id)
			continue
		}
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, g)
	}
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		for _, id := range allowed {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = id, code
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	}
	toAssignment := func(tps []group.TopicPartitions) kmsg.Assignment {
		a := kmsg.NewAssignment()
		for _, t := range tps {
			at := kmsg.NewAssignmentTopicPartition()
			at.TopicID, at.Topic, at.Partitions = t.ID, groups.TopicName(t.ID), t.Partitions
			a.TopicPartitions = append(a.TopicPartitions, at)
		}
		return a
	}
	for _, d := range groups.ConsumerGroupDescribe(allowed) {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group = d.Group
		if d.Err != nil {
			g.ErrorCode, g.ErrorMessage = c.errCode(d.Err), errMessage(d.Err)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if hidden := undescribable(z, groups, d); len(hidden) > 0 {
			// Kafka 4: a group whose members subscribe to or are assigned
			// topics the requester may not describe is not described.
			g.ErrorCode = kerr.TopicAuthorizationFailed.Code
			g.ErrorMessage = kmsg.StringPtr("the group's members use topics you are not authorized to describe")
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = string(d.State), d.Epoch, d.AssignmentEpoch, d.Assignor
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = z.operations(acl.ResourceGroup, d.Group)
		}
		for _, m := range d.Members {
			gm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			gm.MemberID, gm.MemberEpoch, gm.ClientID, gm.ClientHost = m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost
			if m.InstanceID != "" {
				gm.InstanceID = kmsg.StringPtr(m.InstanceID)
			}
			if m.RackID != "" {
				gm.RackID = kmsg.StringPtr(m.RackID)
			}
			gm.SubscribedTopics = m.SubscribedTopics
			if gm.SubscribedTopics == nil {
				gm.SubscribedTopics = []string{}
			}
			if m.SubscribedTopicRegex != "" {
				gm.SubscribedTopicRegex = kmsg.StringPtr(m.SubscribedTopicRegex)
			}
			gm.Assignment, gm.TargetAssignment = toAssignment(m.Assignment), toAssignment(m.TargetAssignment)
			gm.MemberType = 1 // a consumer-protocol member
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

// undescribable lists the topics of a described group (its members'
// subscriptions and assignments) that z may not describe; each topic is
// judged once however many members use it.
func undescribable(z authz, groups *group.Coordinator, d group.ConsumerGroupDescription) []string {
	if z.a == nil {
		return nil
	}
	judged := map[string]bool{}
	var out []string
	check := func(name string) {
		if _, done := judged[name]; done || name == "" {
			return
		}
		ok := z.quietly(acl.OpDescribe, acl.ResourceTopic, name)
		judged[name] = ok
		if !ok {
			out = append(out, name)
		}
	}
	for _, m := range d.Members {
		for _, t := range m.SubscribedTopics {
			check(t)
		}
		for _, tps := range [][]group.TopicPartitions{m.Assignment, m.TargetAssignment} {
			for _, t := range tps {
				check(groups.TopicName(t.ID))
			}
		}
	}
	return out
}
