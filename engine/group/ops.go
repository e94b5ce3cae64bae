package group

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/coord"
)

// The group requests as shard operations: each runs under the shard's
// lock with the time as input, appends what it changes and completes its
// reply, which the runtime releases once that is durable.

// join runs a JoinGroup; r completes now or when the join phase does
// (from a later operation: another member's join, a tick).
func (s *shard) join(now time.Time, req JoinRequest, r *Reply[JoinResult]) {
	cb := func(res JoinResult) { r.Complete(s.sh, res) }
	g := s.group(now, req.Group, true)
	if cg, ok := g.kind.(*Consumer); ok {
		if cg.Len() > 0 {
			cb(JoinResult{Err: fmt.Errorf("%w: group %q uses the consumer (KIP-848) protocol", ErrInconsistentGroupProtocol, req.Group),
				MemberID: req.MemberID, Generation: -1})
			return
		}
		// An empty consumer group becomes a classic one; offsets stay.
		g.kind = newClassic(s.cfg, now)
	}
	g.kind.(*Classic).Join(now, req, cb)
	s.settle(now, g)
}

// classic finds a classic group for Sync/Heartbeat/Leave; a missing group
// means the member is unknown.
func (s *shard) classic(id string) (*Group, *Classic, error) {
	if g := s.groups[id]; g != nil {
		if cl, ok := g.kind.(*Classic); ok {
			return g, cl, nil
		}
	}
	return nil, nil, fmt.Errorf("%w: group %q has no such member", ErrUnknownMemberID, id)
}

// sync runs a SyncGroup; for followers r completes once the leader
// assigned.
func (s *shard) sync(now time.Time, req SyncRequest, r *Reply[SyncResult]) {
	g, cl, err := s.classic(req.Group)
	if err != nil {
		r.Complete(s.sh, SyncResult{Err: err})
		return
	}
	cl.Sync(now, req, func(res SyncResult) { r.Complete(s.sh, res) })
	s.settle(now, g)
}

func (s *shard) heartbeat(now time.Time, req HeartbeatRequest) error {
	g, cl, err := s.classic(req.Group)
	if err != nil {
		return err
	}
	err = cl.Heartbeat(now, req)
	s.settle(now, g)
	return err
}

func (s *shard) leave(now time.Time, group string, members []LeaveMember) []error {
	g := s.groups[group]
	cl, _ := g.kindOrNil().(*Classic)
	errs := make([]error, len(members))
	for i, lm := range members {
		if cl == nil {
			errs[i] = ErrUnknownMemberID
			continue
		}
		errs[i] = cl.Leave(now, lm)
	}
	if g != nil {
		s.settle(now, g)
	}
	return errs
}

// kindOrNil is g's kind, nil for no group.
func (g *Group) kindOrNil() kind {
	if g == nil {
		return nil
	}
	return g.kind
}

func (s *shard) consumerHeartbeat(now time.Time, req ConsumerHeartbeatRequest) (ConsumerHeartbeatResult, error) {
	// Validate before touching the group: a bad request must not convert
	// an empty classic group (and tombstone its metadata) on its way to
	// failing.
	if err := validateHeartbeat(&req); err != nil {
		return ConsumerHeartbeatResult{}, err
	}
	g := s.groups[req.Group]
	if g == nil {
		if req.MemberEpoch != 0 {
			// Also what a member hears after a restart: consumer-group
			// membership is not persisted, so it rejoins.
			return ConsumerHeartbeatResult{}, fmt.Errorf("%w: group %q has no such member", ErrUnknownMemberID, req.Group)
		}
		g = s.group(now, req.Group, true)
	}
	cg, ok := g.kind.(*Consumer)
	if !ok {
		if req.MemberEpoch < 0 {
			// A leave for a group that has no consumer-protocol members.
			return ConsumerHeartbeatResult{}, fmt.Errorf("%w: group %q has no such member", ErrUnknownMemberID, req.Group)
		}
		if g.kind.Len() > 0 {
			return ConsumerHeartbeatResult{}, fmt.Errorf("%w: group %q is a %s group with members", ErrGroupIDNotFound, req.Group, g.Type())
		}
		if g.persisted {
			// The classic metadata no longer describes the group.
			if err := s.append(now, []batch.Record{{Key: encodeGroupKey(g.id)}}); err != nil {
				return ConsumerHeartbeatResult{}, err
			}
			g.persisted = false
		}
		cg = newConsumer(s.cfg, now)
		g.kind = cg
	}
	res, err := cg.Heartbeat(now, req, s.topics())
	s.settle(now, g)
	return res, err
}

// commit validates, appends and applies an OffsetCommit: one error per
// requested partition.
func (s *shard) commit(now time.Time, req CommitRequest, snap *topicSnapshot) [][]error {
	out := make([][]error, len(req.Topics))
	for i, t := range req.Topics {
		out[i] = make([]error, len(t.Partitions))
	}
	failAll := func(err error) [][]error {
		for i := range out {
			for j := range out[i] {
				out[i][j] = err
			}
		}
		return out
	}
	g := s.groups[req.Group]
	var check func(TopicID, int32) error
	if g == nil {
		if req.Generation >= 0 {
			if req.Version >= 9 {
				return failAll(fmt.Errorf("%w: %q", ErrGroupIDNotFound, req.Group))
			}
			return failAll(ErrIllegalGeneration)
		}
	} else {
		var err error
		check, err = g.kind.checkCommit(now, &req)
		if err != nil {
			s.settle(now, g)
			return failAll(err)
		}
	}
	type pending struct {
		i, j int
		key  tpKey
		e    *offsetEntry
	}
	var todo []pending
	var recs []batch.Record
	for i, t := range req.Topics {
		info, known := snap.byName[t.Topic]
		for j, p := range t.Partitions {
			switch {
			case !known || p.Partition < 0 || p.Partition >= info.Partitions:
				out[i][j] = fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, t.Topic, p.Partition)
				continue
			case p.Metadata != nil && len(*p.Metadata) > s.cfg.MaxMetadataBytes:
				out[i][j] = fmt.Errorf("%w: %d bytes, the limit is %d", ErrOffsetMetadataTooLarge, len(*p.Metadata), s.cfg.MaxMetadataBytes)
				continue
			}
			if check != nil {
				if err := check(info.ID, p.Partition); err != nil {
					out[i][j] = err
					continue
				}
			}
			e := &offsetEntry{offset: p.Offset, leaderEpoch: p.LeaderEpoch, commitTime: now.UnixMilli(), expireTime: -1, topicID: info.ID}
			if p.Metadata != nil {
				e.metadata = *p.Metadata
			}
			switch {
			case req.Retention > 0:
				e.expireTime = e.commitTime + req.Retention.Milliseconds()
			case p.Timestamp > 0 && req.Version == 1:
				e.expireTime = p.Timestamp + s.cfg.OffsetsRetention.Milliseconds()
			}
			todo = append(todo, pending{i, j, tpKey{t.Topic, p.Partition}, e})
			recs = append(recs, batch.Record{Key: encodeOffsetKey(req.Group, t.Topic, p.Partition), Value: encodeOffsetValue(e)})
		}
	}
	if len(todo) == 0 {
		return out
	}
	if g == nil {
		g = s.group(now, req.Group, true) // a group that only stores offsets
	}
	var first int64
	var err error
	if req.Producer != nil {
		first, _, err = s.sh.AppendTxn(now, req.Producer.ID, req.Producer.Epoch, recs, req.Producer.Guard)
		if errors.Is(err, coord.ErrBatchTooLarge) {
			err = fmt.Errorf("%w: %v", ErrInvalidCommitOffsetSize, err)
		}
	} else {
		first, err = s.appendAt(now, recs)
	}
	if err != nil {
		for _, t := range todo {
			out[t.i][t.j] = err
		}
		s.settle(now, g)
		return out
	}
	for i, t := range todo {
		t.e.recordOffset = first + int64(i)
		if req.Producer != nil {
			s.addTxnOffset(req.Producer.ID, req.Group, t.key, t.e)
		} else {
			g.offsets[t.key] = t.e
		}
	}
	s.settle(now, g)
	return out
}

// completeTxn writes the end-transaction marker of producer pid to the
// shard's partition and applies it to the offsets the transaction
// committed (WriteTxnMarkers for an offsets partition).
func (s *shard) completeTxn(now time.Time, m coord.Marker) error {
	if _, err := s.sh.AppendMarker(m); err != nil {
		return err
	}
	groups := slices.Sorted(maps.Keys(s.txnOffsets[m.ProducerID]))
	s.endTxnOffsets(now, m.ProducerID, m.Commit)
	for _, id := range groups {
		if g := s.groups[id]; g != nil {
			s.settle(now, g)
		}
	}
	return nil
}

func (s *shard) deleteOffsets(now time.Time, group string, topics []FetchTopic) ([][]error, error) {
	g := s.groups[group]
	if g == nil {
		return nil, fmt.Errorf("%w: %q", ErrGroupIDNotFound, group)
	}
	if _, ok := g.kind.(*Classic); ok && g.members() > 0 && g.ProtocolType() != ConsumerProtocolType {
		return nil, fmt.Errorf("%w: group %q is %s", ErrNonEmptyGroup, group, g.State())
	}
	out := make([][]error, len(topics))
	var recs []batch.Record
	var keys []tpKey
	for i, t := range topics {
		out[i] = make([]error, len(t.Partitions))
		sub, _ := g.kind.subscribes(t.Topic)
		for j, p := range t.Partitions {
			if sub && g.members() > 0 {
				out[i][j] = fmt.Errorf("%w: %s", ErrGroupSubscribedToTopic, t.Topic)
				continue
			}
			k := tpKey{t.Topic, p}
			if _, ok := g.offsets[k]; ok && !slices.Contains(keys, k) {
				keys = append(keys, k)
				recs = append(recs, batch.Record{Key: encodeOffsetKey(group, t.Topic, p)})
			}
		}
	}
	if len(recs) > 0 {
		if err := s.append(now, recs); err != nil {
			return nil, err
		}
		// Pending transactional offsets of these partitions go too, as
		// replay applies the tombstones (Kafka's replay of an offset
		// deletion).
		s.forget(g, keys)
	}
	s.settle(now, g)
	return out, nil
}

func (s *shard) deleteGroup(now time.Time, id string) error {
	g := s.groups[id]
	switch {
	case g == nil:
		return fmt.Errorf("%w: %q", ErrGroupIDNotFound, id)
	case g.members() > 0:
		return fmt.Errorf("%w: %q has %d members", ErrNonEmptyGroup, id, g.members())
	}
	// Partitions only a transaction holds get a tombstone too: it
	// removes the pending offset, at replay as here (Kafka's
	// deleteAllOffsets).
	keys, recs := s.tombstones(g, func(tpKey, *offsetEntry) bool { return true })
	recs = append(recs, batch.Record{Key: encodeGroupKey(id)})
	if err := s.append(now, recs); err != nil {
		return err
	}
	s.forget(g, keys)
	s.drop(id)
	return nil
}

// compile-time check: a shard is a coordinator state.
var _ coord.State = (*shard)(nil)
