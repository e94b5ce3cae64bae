package client

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/moonmq/moonmq/internal/lag"
)

// Group states as reported by Kafka (classic protocol names).
const (
	GroupStateEmpty  = "Empty"
	GroupStateStable = "Stable"
	GroupStateDead   = "Dead"
)

// GroupSummary is one row of ListGroups.
type GroupSummary struct {
	Name string `json:"name"`
	// State is e.g. Empty, Stable, PreparingRebalance ("" if the broker
	// does not report states).
	State string `json:"state"`
	// ProtocolType is "consumer" for consumer groups.
	ProtocolType string `json:"protocol_type"`
	// Type is classic, consumer or share ("" on older brokers).
	Type        string `json:"type,omitempty"`
	Coordinator int32  `json:"coordinator"`
}

// TopicPartitions is a topic and some of its partitions.
type TopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// GroupMember is a live member of a group.
type GroupMember struct {
	ID         string            `json:"id"`
	InstanceID string            `json:"instance_id,omitempty"`
	ClientID   string            `json:"client_id"`
	Host       string            `json:"host"`
	Assigned   []TopicPartitions `json:"assigned"`
}

// GroupOffset is a group's position in one partition.
type GroupOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the committed offset, -1 if none.
	Committed int64 `json:"committed"`
	// End is the partition's high watermark, -1 if unknown.
	End int64 `json:"end"`
	// Lag is End - Committed (End - log start without a commit), -1 if
	// unknown.
	Lag int64 `json:"lag"`
	// MemberID is the member assigned this partition, "" if none.
	MemberID string `json:"member_id,omitempty"`
	// Err is why Lag is unknown, if it is.
	Err error `json:"-"`
}

// GroupDescription is the result of DescribeGroup.
type GroupDescription struct {
	Name         string        `json:"name"`
	State        string        `json:"state"`
	ProtocolType string        `json:"protocol_type"`
	Protocol     string        `json:"protocol"`
	Coordinator  int32         `json:"coordinator"`
	Members      []GroupMember `json:"members"`
	// Offsets covers assigned and committed partitions, sorted by topic
	// then partition.
	Offsets []GroupOffset `json:"offsets"`
	// TotalLag sums the known lags.
	TotalLag int64 `json:"total_lag"`
}

// ListGroups lists the cluster's groups, sorted by name.
func (c *Client) ListGroups(ctx context.Context) ([]GroupSummary, error) {
	const op = "list groups"
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	defer cancel()
	ls, err := c.adm.ListGroups(ctx)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	out := make([]GroupSummary, 0, len(ls))
	for _, g := range ls.Sorted() {
		out = append(out, GroupSummary{
			Name:         g.Group,
			State:        g.State,
			ProtocolType: g.ProtocolType,
			Type:         g.GroupType,
			Coordinator:  g.Coordinator,
		})
	}
	return out, nil
}

// DescribeGroup returns a group's members, assignments and, per partition,
// committed offset, end offset and lag. A group that does not exist is an
// error matching ErrNotFound.
func (c *Client) DescribeGroup(ctx context.Context, group string) (GroupDescription, error) {
	const op = "describe group"
	res := groupRes(group)
	if group == "" {
		return GroupDescription{}, invalid(op, "empty group name")
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return GroupDescription{}, wrap(op, res, err)
	}
	defer cancel()
	lags, err := c.adm.Lag(ctx, group)
	if err != nil {
		return GroupDescription{}, wrap(op, res, err)
	}
	l, ok := lags[group]
	if !ok {
		return GroupDescription{}, wrap(op, res, kerr.GroupIDNotFound)
	}
	if errors.Is(l.DescribeErr, kerr.GroupIDNotFound) {
		// DescribeGroups v6+ answers GROUP_ID_NOT_FOUND for a KIP-848
		// consumer group: describe it with ConsumerGroupDescribe instead.
		return c.describeConsumerGroup(ctx, group)
	}
	if err := l.Error(); err != nil {
		return GroupDescription{}, wrap(op, res, err)
	}
	// Classic Kafka describes an unknown group as Dead with no members.
	if l.State == GroupStateDead && len(l.Members) == 0 && len(l.Lag) == 0 {
		return GroupDescription{}, wrap(op, res, kerr.GroupIDNotFound)
	}
	d := GroupDescription{
		Name:         group,
		State:        l.State,
		ProtocolType: l.ProtocolType,
		Protocol:     l.Protocol,
		Coordinator:  l.Coordinator.NodeID,
		Members:      make([]GroupMember, 0, len(l.Members)),
		Offsets:      []GroupOffset{},
	}
	for _, m := range l.Members {
		gm := GroupMember{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				ps := append([]int32(nil), t.Partitions...)
				sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
				gm.Assigned = append(gm.Assigned, TopicPartitions{Topic: t.Topic, Partitions: ps})
			}
			sort.Slice(gm.Assigned, func(i, j int) bool { return gm.Assigned[i].Topic < gm.Assigned[j].Topic })
		}
		d.Members = append(d.Members, gm)
	}
	for _, ml := range l.Lag.Sorted() {
		// kadm counts a partition without a commit from its log start;
		// MoonMQ's lag (package lag) leaves it unknown, as /stats does.
		o := GroupOffset{
			Topic:     ml.Topic,
			Partition: ml.Partition,
			Committed: ml.Commit.At,
			End:       -1,
			Err:       ml.Err,
		}
		if ml.End.Err == nil {
			o.End = ml.End.Offset
		}
		o.Lag = lag.Of(o.Committed, o.End)
		if ml.Member != nil {
			o.MemberID = ml.Member.MemberID
		}
		d.TotalLag = lag.Add(d.TotalLag, o.Lag)
		d.Offsets = append(d.Offsets, o)
	}
	return d, nil
}

// describeConsumerGroup is DescribeGroup for a KIP-848 consumer group:
// members and assignments from ConsumerGroupDescribe, committed offsets
// from OffsetFetch and end offsets from ListOffsets, over the assigned and
// committed partitions.
func (c *Client) describeConsumerGroup(ctx context.Context, group string) (GroupDescription, error) {
	const op = "describe group"
	res := groupRes(group)
	dgs, err := c.adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return GroupDescription{}, wrap(op, res, err)
	}
	dg, ok := dgs[group]
	if !ok {
		return GroupDescription{}, wrap(op, res, kerr.GroupIDNotFound)
	}
	if dg.Err != nil {
		return GroupDescription{}, wrap(op, res, dg.Err)
	}
	fetched, err := c.adm.FetchOffsets(ctx, group)
	if err != nil {
		return GroupDescription{}, wrap(op, res, err)
	}
	d := GroupDescription{
		Name: group, State: dg.State, ProtocolType: "consumer", Protocol: dg.AssignorName,
		Coordinator: dg.Coordinator.NodeID, Members: make([]GroupMember, 0, len(dg.Members)), Offsets: []GroupOffset{},
	}
	owner := map[string]map[int32]string{}
	parts := map[string]map[int32]bool{}
	addPart := func(t string, p int32) {
		if parts[t] == nil {
			parts[t] = map[int32]bool{}
		}
		parts[t][p] = true
	}
	for _, m := range dg.Members {
		gm := GroupMember{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		for t, ps := range m.Assignment {
			tp := TopicPartitions{Topic: t}
			for p := range ps {
				tp.Partitions = append(tp.Partitions, p)
				addPart(t, p)
				if owner[t] == nil {
					owner[t] = map[int32]string{}
				}
				owner[t][p] = m.MemberID
			}
			sort.Slice(tp.Partitions, func(i, j int) bool { return tp.Partitions[i] < tp.Partitions[j] })
			gm.Assigned = append(gm.Assigned, tp)
		}
		sort.Slice(gm.Assigned, func(i, j int) bool { return gm.Assigned[i].Topic < gm.Assigned[j].Topic })
		d.Members = append(d.Members, gm)
	}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			addPart(o.Topic, o.Partition)
		}
	})
	var topics []string
	for t := range parts {
		topics = append(topics, t)
	}
	var ends kadm.ListedOffsets
	if len(topics) > 0 {
		// Shard errors leave partitions out; they show up with Err below.
		ends, _ = c.adm.ListEndOffsets(ctx, topics...)
	}
	for t, ps := range parts {
		for p := range ps {
			o := GroupOffset{Topic: t, Partition: p, Committed: -1, End: -1, Lag: -1, MemberID: owner[t][p]}
			if f, ok := fetched.Lookup(t, p); ok && f.Err == nil {
				o.Committed = f.At
			}
			end, eok := ends.Lookup(t, p)
			switch {
			case !eok:
				o.Err = kerr.UnknownTopicOrPartition
			case end.Err != nil:
				o.Err = end.Err
			default:
				o.End = end.Offset
				o.Lag = lag.Of(o.Committed, o.End)
				d.TotalLag = lag.Add(d.TotalLag, o.Lag)
			}
			d.Offsets = append(d.Offsets, o)
		}
	}
	sort.Slice(d.Offsets, func(i, j int) bool {
		if d.Offsets[i].Topic != d.Offsets[j].Topic {
			return d.Offsets[i].Topic < d.Offsets[j].Topic
		}
		return d.Offsets[i].Partition < d.Offsets[j].Partition
	})
	return d, nil
}

// requireInactive fails with NON_EMPTY_GROUP when the group has live
// members, of either protocol: DescribeGroups does not see KIP-848 groups
// (it answers GROUP_ID_NOT_FOUND for them), so those are asked for with
// ConsumerGroupDescribe.
func (c *Client) requireInactive(ctx context.Context, op, group string) error {
	res := groupRes(group)
	dgs, err := c.adm.DescribeGroups(ctx, group)
	if err != nil {
		return wrap(op, res, err)
	}
	dg, ok := dgs[group]
	switch {
	case !ok:
		return nil
	case errors.Is(dg.Err, kerr.GroupIDNotFound):
		cgs, err := c.adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return nil // a broker without KIP-848 has no such group
		}
		if cg, ok := cgs[group]; ok && cg.Err == nil && len(cg.Members) > 0 {
			return wrap(op, res, kerr.NonEmptyGroup)
		}
		return nil
	case dg.Err != nil:
		return wrapDetail(op, res, dg.Err, dg.ErrMessage)
	case len(dg.Members) > 0:
		return wrap(op, res, kerr.NonEmptyGroup)
	}
	return nil
}

// CommitOffset sets a group's committed offset for one partition (the next
// offset the group will read). Kafka only accepts this while the group has
// no live members.
func (c *Client) CommitOffset(ctx context.Context, group, topic string, partition int32, offset int64) error {
	const op = "commit offset for"
	if group == "" {
		return invalid(op, "empty group name")
	}
	if offset < 0 {
		return invalid(op, "offset %d (want >= 0)", offset)
	}
	var os kadm.Offsets
	os.AddOffset(topic, partition, offset, -1)
	return c.commit(ctx, op, group, os)
}

func (c *Client) commit(ctx context.Context, op, group string, os kadm.Offsets) error {
	res := groupRes(group)
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return wrap(op, res, err)
	}
	defer cancel()
	resps, err := c.adm.CommitOffsets(ctx, group, os)
	if err != nil {
		return wrap(op, res, err)
	}
	var first error
	resps.EachError(func(r kadm.OffsetResponse) {
		if first == nil {
			first = wrap(op, res+" on "+partRes(r.Topic, r.Partition), r.Err)
		}
	})
	return first
}

// ResetGroup moves a group's committed offsets for every partition of topic
// (every topic the group has committed to, if topic is "") to the Position
// to, and returns the new offsets. The group must have no live members
// (ErrGroupActive otherwise): a running consumer would overwrite the reset.
// Resetting a group that does not exist yet creates its offsets.
func (c *Client) ResetGroup(ctx context.Context, group, topic string, to Position) ([]GroupOffset, error) {
	const op = "reset group"
	res := groupRes(group)
	if group == "" {
		return nil, invalid(op, "empty group name")
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, res, err)
	}
	defer cancel()
	if err := c.requireInactive(ctx, op, group); err != nil {
		return nil, err
	}
	topics := []string{topic}
	if topic == "" {
		fetched, err := c.adm.FetchOffsets(ctx, group)
		if err != nil {
			return nil, wrap(op, res, err)
		}
		topics = fetched.Partitions().Topics()
		if len(topics) == 0 {
			// Nothing to reset: say so rather than report a reset that did
			// nothing (naming a topic creates the offsets).
			return nil, wrapDetail(op, res, kerr.GroupIDNotFound,
				fmt.Sprintf("group '%s' has no committed offsets; name a TOPIC to create them", group))
		}
	}
	var os kadm.Offsets
	var out []GroupOffset
	for _, t := range topics {
		ranges, err := c.Range(ctx, t, nil, to)
		if err != nil {
			return nil, wrap(op, res+" on "+topicRes(t), err)
		}
		for _, r := range ranges {
			os.AddOffset(t, r.Partition, r.From, -1)
			out = append(out, GroupOffset{
				Topic: t, Partition: r.Partition, Committed: r.From, End: r.End, Lag: lag.Of(r.From, r.End),
			})
		}
	}
	if err := c.commit(ctx, op, group, os); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// DeleteGroup deletes a group and its committed offsets. The group must have
// no live members (the error then matches ErrGroupActive).
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	const op = "delete group"
	res := groupRes(group)
	if group == "" {
		return invalid(op, "empty group name")
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return wrap(op, res, err)
	}
	defer cancel()
	r, err := c.adm.DeleteGroup(ctx, group)
	if err != nil {
		return wrap(op, res, err)
	}
	return wrap(op, res, r.Err)
}
