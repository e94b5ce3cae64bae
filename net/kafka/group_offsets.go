package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/group"
)

// OffsetCommit appends on the read loop (so commits from one connection
// land in order) and parks the fsync wait: a commit is acknowledged only
// once it is durable.
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
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		setCommitErrors(resp, code, true)
		return resp, nil
	}
	cr := group.CommitRequest{
		Group: req.Group, Version: req.Version, Generation: req.Generation, MemberID: req.MemberID,
		InstanceID: deref(req.InstanceID),
	}
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis > 0 {
		cr.Retention = time.Duration(req.RetentionTimeMillis) * time.Millisecond
	}
	for _, t := range req.Topics {
		ct := group.CommitTopic{Topic: t.Topic, Partitions: make([]group.CommitPartition, 0, len(t.Partitions))}
		for _, p := range t.Partitions {
			ct.Partitions = append(ct.Partitions, group.CommitPartition{
				Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, Timestamp: p.Timestamp,
			})
		}
		cr.Topics = append(cr.Topics, ct)
	}
	errs := groups.CommitOffsets(cr)
	committed := false
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			resp.Topics[i].Partitions[j].ErrorCode = c.errCode(errs[i][j])
			committed = committed || errs[i][j] == nil
		}
	}
	if !committed {
		return resp, nil
	}
	return nil, func() kmsg.Response {
		if err := c.barrier(req.Group); err != nil {
			setCommitErrors(resp, c.errCode(err), false)
		}
		return resp
	}
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
// before it on this connection) and parks only the durability barrier.
func (c *conn) handleOffsetFetch(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	groups, unavailable := c.groupsOrUnavailable()

	// fetch answers one group; code is its group-level error.
	fetch := func(fr group.FetchRequest) ([]group.FetchedTopic, int16) {
		if groups == nil {
			return nil, unavailable
		}
		topics, err := groups.FetchOffsets(fr)
		return topics, c.errCode(err)
	}
	if req.Version < 8 {
		fr := group.FetchRequest{Group: req.Group, MemberEpoch: -1}
		if req.Topics != nil || req.Version < 2 {
			fr.Topics = make([]group.FetchTopic, 0, len(req.Topics))
			for _, t := range req.Topics {
				fr.Topics = append(fr.Topics, group.FetchTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		topics, code := fetch(fr)
		fill := func(code int16) kmsg.Response {
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
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp
		}
		if code != 0 {
			return fill(code), nil
		}
		return nil, func() kmsg.Response { return fill(c.errCode(c.barrier(req.Group))) }
	}
	resp.Groups = make([]kmsg.OffsetFetchResponseGroup, 0, len(req.Groups))
	for _, rg := range req.Groups {
		fr := group.FetchRequest{Group: rg.Group, MemberID: rg.MemberID, MemberEpoch: rg.MemberEpoch}
		if rg.Topics != nil {
			fr.Topics = make([]group.FetchTopic, 0, len(rg.Topics))
			for _, t := range rg.Topics {
				fr.Topics = append(fr.Topics, group.FetchTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		topics, code := fetch(fr)
		sg := kmsg.NewOffsetFetchResponseGroup()
		sg.Group, sg.ErrorCode = rg.Group, code
		for _, t := range topics {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata = p.Partition, p.Offset, p.LeaderEpoch, kmsg.StringPtr(p.Metadata)
				st.Partitions = append(st.Partitions, sp)
			}
			sg.Topics = append(sg.Topics, st)
		}
		resp.Groups = append(resp.Groups, sg)
	}
	if groups == nil {
		return resp, nil
	}
	return nil, func() kmsg.Response {
		for i := range resp.Groups {
			sg := &resp.Groups[i]
			if sg.ErrorCode != 0 {
				continue
			}
			if code := c.errCode(c.barrier(sg.Group)); code != 0 {
				sg.ErrorCode, sg.Topics = code, nil
			}
		}
		return resp
	}
}

func (c *conn) handleOffsetDelete(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	groups, code := c.groupsOrUnavailable()
	if groups == nil {
		resp.ErrorCode = code
		return resp, nil
	}
	topics := make([]group.FetchTopic, 0, len(req.Topics))
	for _, t := range req.Topics {
		ft := group.FetchTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			ft.Partitions = append(ft.Partitions, p.Partition)
		}
		topics = append(topics, ft)
	}
	errs, err := groups.DeleteOffsets(req.Group, topics)
	if err != nil {
		resp.ErrorCode = c.errCode(err)
		return resp, nil
	}
	for i, t := range topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, c.errCode(errs[i][j])
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return nil, func() kmsg.Response {
		if err := c.barrier(req.Group); err != nil {
			resp.ErrorCode = c.errCode(err)
		}
		return resp
	}
}
