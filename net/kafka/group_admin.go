package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/group"
)

func (c *conn) handleListGroups(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		resp.ErrorCode = code
		return resp, nil
	}
	ls, err := groups.ListGroups(req.StatesFilter, req.TypesFilter)
	if err != nil {
		resp.ErrorCode = c.errCode(err)
		return resp, nil
	}
	// Kafka: DESCRIBE on the cluster lists every group, else the groups
	// the principal may DESCRIBE.
	z := c.authz(r)
	all := z.quietly(acl.OpDescribe, acl.ResourceCluster, acl.ClusterName)
	for _, l := range ls {
		if !all && !z.quietly(acl.OpDescribe, acl.ResourceGroup, l.Group) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.Group, l.ProtocolType, string(l.State), l.Type
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func (c *conn) handleDescribeGroups(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	// DESCRIBE on each group (Kafka); refused groups are answered in
	// request order with GROUP_AUTHORIZATION_FAILED.
	z := c.authz(r)
	var allowed []string
	denied := map[string]bool{}
	for _, id := range req.Groups {
		if z.allowed(acl.OpDescribe, acl.ResourceGroup, id) {
			allowed = append(allowed, id)
		} else {
			denied[id] = true
		}
	}
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		for _, id := range req.Groups {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = id, code
			if denied[id] {
				g.ErrorCode = kerr.GroupAuthorizationFailed.Code
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	}
	for _, id := range req.Groups { // request order, not the map's
		if denied[id] {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
		}
	}
	for _, d := range groups.DescribeGroups(allowed) {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.State, g.ProtocolType, g.Protocol = d.Group, string(d.State), d.ProtocolType, d.Protocol
		if d.Err != nil {
			// Before v6 Kafka describes an unknown group as Dead without
			// an error.
			if req.Version >= 6 || !errors.Is(d.Err, group.ErrGroupIDNotFound) {
				g.ErrorCode = c.errCode(d.Err)
				if req.Version >= 6 {
					g.ErrorMessage = errMessage(d.Err)
				}
			}
		}
		if req.IncludeAuthorizedOperations && d.Err == nil {
			g.AuthorizedOperations = z.operations(acl.ResourceGroup, d.Group)
		}
		for _, m := range d.Members {
			gm := kmsg.NewDescribeGroupsResponseGroupMember()
			gm.MemberID, gm.ClientID, gm.ClientHost = m.MemberID, m.ClientID, m.ClientHost
			gm.ProtocolMetadata, gm.MemberAssignment = m.Metadata, m.Assignment
			if m.InstanceID != "" {
				gm.InstanceID = kmsg.StringPtr(m.InstanceID)
			}
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func (c *conn) handleDeleteGroups(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	// DELETE on each group (Kafka).
	z := c.authz(r)
	var allowed, denied []string
	for _, id := range req.Groups {
		if z.allowed(acl.OpDelete, acl.ResourceGroup, id) {
			allowed = append(allowed, id)
		} else {
			denied = append(denied, id)
		}
	}
	for _, id := range denied {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, g)
	}
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		for _, id := range allowed {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = id, code
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	}
	if len(allowed) == 0 {
		return resp, nil
	}
	replies := groups.DeleteGroups(allowed)
	return nil, func() kmsg.Response {
		for i, id := range allowed {
			derr, err := replies[i].Wait(c.ctx)
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = id, c.errCode(firstErr(derr, err))
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
}
