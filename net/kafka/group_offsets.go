package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/group"
)

// OffsetCommit appends on the read loop (so commits from one connection
// land in order) and parks the fsync wait: the coordinator releases the
// reply only once the commit is durable.
func (c *conn) handleOffsetCommit(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		*rt = kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rt.Partitions[j] = kmsg.NewOffsetCommitResponseTopicPartition()
			rt.Partitions[j].Partition = p.Partition
		}
	}
	// Kafka: READ on the group, then READ on each topic; the partitions
	// of a refused topic are answered TOPIC_AUTHORIZATION_FAILED and the
	// others committed.
	z := c.authz(r)
	if !z.allowed(acl.OpRead, acl.ResourceGroup, req.Group) {
		setCommitErrors(resp, kerr.GroupAuthorizationFailed.Code, true)
		return resp, nil
	}
	readable := z.topics(acl.OpRead, namesOf(req.Topics, func(t *kmsg.OffsetCommitRequestTopic) string { return t.Topic }))
	var committed []int // the indexes in req.Topics of the topics committed
	for i, t := range req.Topics {
		if readable[t.Topic] {
			committed = append(committed, i)
			continue
		}
		for j := range resp.Topics[i].Partitions {
			resp.Topics[i].Partitions[j].ErrorCode = kerr.TopicAuthorizationFailed.Code
		}
	}
	if len(committed) == 0 {
		return resp, nil
	}
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		setCommitErrors(resp, code, false)
		return resp, nil
	}
	cr := group.CommitRequest{
		Group: req.Group, Version: req.Version, Generation: req.Generation, MemberID: req.MemberID,
		InstanceID: deref(req.InstanceID),
	}
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis > 0 {
		cr.Retention = time.Duration(req.RetentionTimeMillis) * time.Millisecond
	}
	for _, i := range committed {
		t := req.Topics[i]
		ct := group.CommitTopic{Topic: t.Topic, Partitions: make([]group.CommitPartition, 0, len(t.Partitions))}
		for _, p := range t.Partitions {
			ct.Partitions = append(ct.Partitions, group.CommitPartition{
				Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, Timestamp: p.Timestamp,
			})
		}
		cr.Topics = append(cr.Topics, ct)
	}
	return answer(c, groups.CommitOffsets(cr), func(errs [][]error, err error) kmsg.Response {
		if errs == nil { // the connection is gone: never written
			setCommitErrors(resp, c.errCode(err), false)
			return resp
		}
		for k, i := range committed {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = c.errCode(errs[k][j])
			}
		}
		if err != nil {
			setCommitErrors(resp, c.errCode(err), false)
		}
		return resp
	})
}

// setCommitErrors sets code on every partition (all) or on every partition
// that had succeeded.
func setCommitErrors(resp *kmsg.OffsetCommitResponse, code int16, all bool) {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if p := &resp.Topics[i].Partitions[j]; all || p.ErrorCode == 0 {
				p.ErrorCode = code
			}
		}
	}
}

// OffsetFetch reads the offsets on the read loop (after any commit sent
// before it on this connection) and parks only the wait for what they
// show to be durable.
func (c *conn) handleOffsetFetch(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	groups, unavailable := c.groupsOrUnavailable()
	// Kafka: DESCRIBE on each group; offsets only of topics the principal
	// may DESCRIBE: a topic asked for by name is answered
	// TOPIC_AUTHORIZATION_FAILED, one listed because the request asked for
	// all is left out.
	z := c.authz(r)
	describable := map[string]bool{}
	mayDescribe := func(topic string) bool {
		ok, seen := describable[topic]
		if !seen {
			ok = z.allowed(acl.OpDescribe, acl.ResourceTopic, topic)
			describable[topic] = ok
		}
		return ok
	}
	// visible filters a group's offsets as above.
	visible := func(topics []group.FetchedTopic, named bool) []group.FetchedTopic {
		out := make([]group.FetchedTopic, 0, len(topics))
		for _, t := range topics {
			switch {
			case mayDescribe(t.Topic):
			case !named:
				continue
			default:
				hidden := group.FetchedTopic{Topic: t.Topic, Partitions: make([]group.FetchedPartition, len(t.Partitions))}
				for i, p := range t.Partitions {
					hidden.Partitions[i] = group.FetchedPartition{Partition: p.Partition, Offset: -1, LeaderEpoch: -1, Err: kerr.TopicAuthorizationFailed}
				}
				t = hidden
			}
			out = append(out, t)
		}
		return out
	}
	if req.Version < 8 {
		groupDenied := !z.allowed(acl.OpDescribe, acl.ResourceGroup, req.Group)
		fr := group.FetchRequest{Group: req.Group, MemberEpoch: -1, RequireStable: req.Version >= 7 && req.RequireStable}
		if req.Topics != nil || req.Version < 2 {
			fr.Topics = make([]group.FetchTopic, 0, len(req.Topics))
			for _, t := range req.Topics {
				fr.Topics = append(fr.Topics, group.FetchTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		fill := func(topics []group.FetchedTopic, code int16) kmsg.Response {
			if code != 0 && req.Version >= 2 {
				resp.ErrorCode = code
			}
			if code != 0 && req.Version < 2 {
				// v0-v1 have no group-level error: report it per partition.
				topics = nil
				for _, t := range fr.Topics {
					ft := group.FetchedTopic{Topic: t.Topic}
					for _, p := range t.Partitions {
						ft.Partitions = append(ft.Partitions, group.FetchedPartition{Partition: p, Offset: -1, LeaderEpoch: -1})
					}
					topics = append(topics, ft)
				}
			}
			for _, t := range topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p.Partition, p.Offset, p.LeaderEpoch, kmsg.StringPtr(p.Metadata)
					if req.Version < 2 {
						rp.ErrorCode = code
					}
					if p.Err != nil {
						rp.ErrorCode = c.errCode(p.Err) // UNSTABLE_OFFSET_COMMIT, TOPIC_AUTHORIZATION_FAILED
					}
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp
		}
		switch {
		case groupDenied:
			return fill(nil, kerr.GroupAuthorizationFailed.Code), nil
		case groups == nil:
			return fill(nil, unavailable), nil
		}
		return answer(c, groups.FetchOffsets(fr), func(res group.FetchResult, err error) kmsg.Response {
			return fill(visible(res.Topics, fr.Topics != nil), c.errCode(firstErr(res.Err, err)))
		})
	}
	resp.Groups = make([]kmsg.OffsetFetchResponseGroup, 0, len(req.Groups))
	groupDenied := make([]bool, len(req.Groups))
	for i, rg := range req.Groups {
		groupDenied[i] = !z.allowed(acl.OpDescribe, acl.ResourceGroup, rg.Group)
	}
	if groups == nil {
		for i, rg := range req.Groups {
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group, sg.ErrorCode = rg.Group, unavailable
			if groupDenied[i] {
				sg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return resp, nil
	}
	replies := make([]*group.Reply[group.FetchResult], 0, len(req.Groups))
	for i, rg := range req.Groups {
		if groupDenied[i] {
			replies = append(replies, nil)
			continue
		}
		fr := group.FetchRequest{Group: rg.Group, MemberID: rg.MemberID, MemberEpoch: rg.MemberEpoch, RequireStable: req.RequireStable}
		if rg.Topics != nil {
			fr.Topics = make([]group.FetchTopic, 0, len(rg.Topics))
			for _, t := range rg.Topics {
				fr.Topics = append(fr.Topics, group.FetchTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		replies = append(replies, groups.FetchOffsets(fr))
	}
	// fill answers group i from its reply.
	fill := func(i int, res group.FetchResult, err error) {
		sg := kmsg.NewOffsetFetchResponseGroup()
		sg.Group, sg.ErrorCode = req.Groups[i].Group, c.errCode(firstErr(res.Err, err))
		if groupDenied[i] {
			sg.ErrorCode = kerr.GroupAuthorizationFailed.Code
		}
		if sg.ErrorCode != 0 {
			resp.Groups = append(resp.Groups, sg)
			return
		}
		for _, t := range visible(res.Topics, req.Groups[i].Topics != nil) {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata = p.Partition, p.Offset, p.LeaderEpoch, kmsg.StringPtr(p.Metadata)
				if p.Err != nil {
					sp.ErrorCode = c.errCode(p.Err) // UNSTABLE_OFFSET_COMMIT, TOPIC_AUTHORIZATION_FAILED
				}
				st.Partitions = append(st.Partitions, sp)
			}
			sg.Topics = append(sg.Topics, st)
		}
		resp.Groups = append(resp.Groups, sg)
	}
	ready := true
	for _, r := range replies {
		if r != nil {
			_, ok := r.Ready()
			ready = ready && ok
		}
	}
	if ready {
		for i, r := range replies {
			var res group.FetchResult
			if r != nil {
				res, _ = r.Ready()
			}
			fill(i, res, nil)
		}
		return resp, nil
	}
	return nil, func() kmsg.Response {
		for i, r := range replies {
			var (
				res group.FetchResult
				err error
			)
			if r != nil {
				res, err = r.Wait(c.ctx)
			}
			fill(i, res, err)
		}
		return resp
	}
}

func (c *conn) handleOffsetDelete(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	// Kafka: DELETE on the group, READ on each topic; a refused topic's
	// partitions are answered TOPIC_AUTHORIZATION_FAILED.
	z := c.authz(r)
	if !z.allowed(acl.OpDelete, acl.ResourceGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	readable := z.topics(acl.OpRead, namesOf(req.Topics, func(t *kmsg.OffsetDeleteRequestTopic) string { return t.Topic }))
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		resp.ErrorCode = code
		return resp, nil
	}
	for _, t := range req.Topics {
		if readable[t.Topic] {
			continue
		}
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	topics := make([]group.FetchTopic, 0, len(req.Topics))
	for _, t := range req.Topics {
		if !readable[t.Topic] {
			continue
		}
		ft := group.FetchTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			ft.Partitions = append(ft.Partitions, p.Partition)
		}
		topics = append(topics, ft)
	}
	return answer(c, groups.DeleteOffsets(req.Group, topics), func(res group.DeleteOffsetsResult, err error) kmsg.Response {
		if res.Err != nil || res.Partitions == nil { // refused, or the connection is gone
			resp.ErrorCode = c.errCode(firstErr(res.Err, err))
			return resp
		}
		for i, t := range topics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, c.errCode(res.Partitions[i][j])
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		if err != nil {
			resp.ErrorCode = c.errCode(err)
		}
		return resp
	})
}
