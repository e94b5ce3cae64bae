package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/group"
)

// groupOperations is the authorized-operations bitfield reported when a
// client asks: without ACLs every group operation is allowed (READ,
// DELETE, DESCRIBE; bit i is ACL operation i).
const groupOperations = 1<<3 | 1<<6 | 1<<8

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
	for _, l := range ls {
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.Group, l.ProtocolType, string(l.State), l.Type
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func (c *conn) handleDescribeGroups(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		for _, id := range req.Groups {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode = id, code
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	}
	for _, d := range groups.DescribeGroups(req.Groups) {
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
			g.AuthorizedOperations = groupOperations
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
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		for _, id := range req.Groups {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = id, code
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	}
	replies := groups.DeleteGroups(req.Groups)
	return nil, func() kmsg.Response {
		for i, id := range req.Groups {
			derr, err := replies[i].Wait(c.ctx)
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = id, c.errCode(firstErr(derr, err))
			resp.Groups = append(resp.Groups, g)
		}
		return resp
	}
}
