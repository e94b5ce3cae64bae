package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/group"
)

// JoinGroup and SyncGroup take effect on the read loop, in request order,
// and park the wait for the rebalance (or the leader's assignment) so the
// connection keeps serving other requests. Every classic group request
// needs READ on the group (Kafka).

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (c *conn) handleJoinGroup(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.MemberID = req.MemberID
	if !c.authz(r).allowed(acl.OpRead, acl.ResourceGroup, req.Group) {
		resp.ErrorCode, resp.MemberID, resp.Generation = kerr.GroupAuthorizationFailed.Code, "", -1
		return resp, nil
	}
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		resp.ErrorCode = code
		return resp, nil
	}
	jr := group.JoinRequest{
		Group: req.Group, Version: req.Version, MemberID: req.MemberID, InstanceID: deref(req.InstanceID),
		ClientID: r.clientID, ClientHost: c.clientHost(),
		SessionTimeout:   time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout: time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		ProtocolType:     req.ProtocolType,
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	return answer(c, groups.JoinGroup(jr), func(res group.JoinResult, err error) kmsg.Response {
		res.Err = firstErr(res.Err, err) // what the join changed did not become durable
		resp.MemberID = res.MemberID
		resp.Generation = res.Generation
		if res.Err != nil {
			resp.ErrorCode = c.errCode(res.Err)
			resp.Generation = -1
			return resp
		}
		resp.ProtocolType = kmsg.StringPtr(res.ProtocolType)
		if res.Protocol != "" {
			resp.Protocol = kmsg.StringPtr(res.Protocol)
		}
		resp.LeaderID = res.Leader
		resp.SkipAssignment = res.SkipAssignment
		for _, m := range res.Members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.ProtocolMetadata = m.MemberID, m.Metadata
			if m.InstanceID != "" {
				rm.InstanceID = kmsg.StringPtr(m.InstanceID)
			}
			resp.Members = append(resp.Members, rm)
		}
		return resp
	})
}

func (c *conn) handleSyncGroup(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if !c.authz(r).allowed(acl.OpRead, acl.ResourceGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		resp.ErrorCode = code
		return resp, nil
	}
	sr := group.SyncRequest{
		Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: deref(req.InstanceID),
		ProtocolType: req.ProtocolType, Protocol: req.Protocol,
	}
	if len(req.GroupAssignment) > 0 {
		sr.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sr.Assignments[a.MemberID] = a.MemberAssignment
		}
	}
	return answer(c, groups.SyncGroup(sr), func(res group.SyncResult, err error) kmsg.Response {
		if err = firstErr(res.Err, err); err != nil {
			resp.ErrorCode = c.errCode(err)
			return resp
		}
		resp.ProtocolType, resp.Protocol = kmsg.StringPtr(res.ProtocolType), kmsg.StringPtr(res.Protocol)
		resp.MemberAssignment = res.Assignment
		return resp
	})
}

func (c *conn) handleHeartbeat(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if !c.authz(r).allowed(acl.OpRead, acl.ResourceGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		resp.ErrorCode = code
		return resp, nil
	}
	hb := groups.Heartbeat(group.HeartbeatRequest{
		Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: deref(req.InstanceID),
	})
	return answer(c, hb, func(herr, err error) kmsg.Response {
		resp.ErrorCode = c.errCode(firstErr(herr, err))
		return resp
	})
}

func (c *conn) handleLeaveGroup(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if !c.authz(r).allowed(acl.OpRead, acl.ResourceGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		resp.ErrorCode = code
		return resp, nil
	}
	var members []group.LeaveMember
	if req.Version < 3 {
		members = []group.LeaveMember{{MemberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			members = append(members, group.LeaveMember{MemberID: m.MemberID, InstanceID: deref(m.InstanceID)})
		}
	}
	return answer(c, groups.LeaveGroup(req.Group, members), func(res group.LeaveResult, err error) kmsg.Response {
		if err = firstErr(res.Err, err); err != nil {
			resp.ErrorCode = c.errCode(err)
			return resp
		}
		if req.Version < 3 {
			resp.ErrorCode = c.errCode(res.Members[0])
			return resp
		}
		for i, m := range req.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, c.errCode(res.Members[i])
			resp.Members = append(resp.Members, rm)
		}
		return resp
	})
}
