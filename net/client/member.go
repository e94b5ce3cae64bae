package client

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Membership is a live member of a consumer group that reads nothing
// itself: it joins, takes part in rebalances and heartbeats, and so holds
// an assignment and a generation. The group shows a live member, and
// offsets committed through the Membership are accepted by the coordinator
// (which refuses admin commits for a group with members). The owner reads
// its assigned partitions by offset (Client.Read) and commits with Commit.
//
// It has its own connection, independent of the Client's; Leave ends it.
// Closing the Client does not: a Membership outliving its Client keeps
// heartbeating until Leave. It is safe for concurrent use.
type Membership struct {
	group   string
	topics  []string
	cl      *kgo.Client
	timeout time.Duration

	mu       sync.Mutex
	assigned map[string][]int32 // sorted partitions per topic
	first    chan struct{}      // closed at the first assignment
	once     sync.Once

	leaveOnce sync.Once
	left      chan struct{}
}

// JoinGroup makes a new member of group consuming topics, and waits (up to
// the request timeout, or ctx) for its first assignment. A member that
// joined but has no assignment yet (the group is still rebalancing) is
// returned as is; assignments then arrive in the background. Topics must
// exist: a missing one fails with ErrNotFound rather than a member that
// waits for it.
func (c *Client) JoinGroup(ctx context.Context, group string, topics ...string) (*Membership, error) {
	op := "join group"
	res := groupRes(group)
	if group == "" {
		return nil, invalid(op, "empty group name")
	}
	if len(topics) == 0 {
		return nil, invalid(op, "no topics to consume")
	}
	cctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, res, err)
	}
	for _, t := range topics {
		if _, err := c.topicDetail(cctx, t); err != nil {
			cancel()
			return nil, wrap(op+" '"+group+"' on", topicRes(t), err)
		}
	}
	cancel()

	m := &Membership{
		group:    group,
		topics:   append([]string(nil), topics...),
		timeout:  c.opts.RequestTimeout,
		assigned: map[string][]int32{},
		first:    make(chan struct{}),
		left:     make(chan struct{}),
	}
	cl, err := kgo.NewClient(c.opts.baseKgoOpts(
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(m.onAssigned),
		kgo.OnPartitionsRevoked(m.onRevoked),
		kgo.OnPartitionsLost(m.onRevoked),
	)...)
	if err != nil {
		return nil, wrap(op, res, err)
	}
	// The member never hands out records: the owner reads by offset.
	// Pausing keeps franz-go from fetching (and buffering) the
	// partitions; the group protocol runs regardless.
	cl.PauseFetchTopics(topics...)
	m.cl = cl

	timer := time.NewTimer(c.opts.RequestTimeout)
	defer timer.Stop()
	select {
	case <-m.first:
	case <-timer.C:
	case <-ctx.Done():
		cl.Close()
		return nil, wrap(op, res, ctx.Err())
	}
	return m, nil
}

func (m *Membership) onAssigned(_ context.Context, _ *kgo.Client, a map[string][]int32) {
	m.mu.Lock()
	for t, ps := range a {
		m.assigned[t] = mergeParts(m.assigned[t], ps)
	}
	m.mu.Unlock()
	m.once.Do(func() { close(m.first) })
}

func (m *Membership) onRevoked(_ context.Context, _ *kgo.Client, r map[string][]int32) {
	m.mu.Lock()
	for t, ps := range r {
		m.assigned[t] = removeParts(m.assigned[t], ps)
	}
	m.mu.Unlock()
}

// Group returns the group's name.
func (m *Membership) Group() string { return m.group }

// Topics returns the topics the member consumes, as joined.
func (m *Membership) Topics() []string { return append([]string(nil), m.topics...) }

// MemberID returns the member ID the coordinator gave, "" before the join
// completed.
func (m *Membership) MemberID() string {
	id, _ := m.cl.GroupMetadata()
	return id
}

// Assigned returns the member's current assignment, sorted by topic and
// partition; topics with no partitions are left out.
func (m *Membership) Assigned() []TopicPartitions {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]TopicPartitions, 0, len(m.assigned))
	for t, ps := range m.assigned {
		if len(ps) > 0 {
			out = append(out, TopicPartitions{Topic: t, Partitions: append([]int32(nil), ps...)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// AssignedPartitions returns the member's partitions of topic, sorted.
func (m *Membership) AssignedPartitions(topic string) []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int32(nil), m.assigned[topic]...)
}

// Commit commits offsets (partition -> next offset to read) of topic with
// the member's generation. A commit the coordinator refuses (for example
// because a rebalance moved the partition) fails with the partition's
// Kafka error.
func (m *Membership) Commit(ctx context.Context, topic string, offsets map[int32]int64) error {
	const op = "commit offsets for"
	res := groupRes(m.group)
	select {
	case <-m.left:
		return wrap(op, res, fmt.Errorf("the member left the group: %w", ErrClosed))
	default:
	}
	if len(offsets) == 0 {
		return nil
	}
	eo := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for p, o := range offsets {
		if o < 0 {
			return invalid(op, "offset %d of partition %d (want >= 0)", o, p)
		}
		eo[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var first error
	m.cl.CommitOffsetsSync(ctx, eo, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			first = wrap(op, res, err)
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil && first == nil {
					first = wrap(op, res+" on "+partRes(t.Topic, p.Partition), e)
				}
			}
		}
	})
	return first
}

// Leave leaves the group (the coordinator rebalances the others at once
// rather than after the session timeout) and closes the member's
// connection. It is idempotent.
func (m *Membership) Leave() {
	m.leaveOnce.Do(func() {
		close(m.left)
		m.cl.Close()
	})
}

// mergeParts returns the sorted union of a and b.
func mergeParts(a, b []int32) []int32 {
	set := make(map[int32]bool, len(a)+len(b))
	for _, p := range a {
		set[p] = true
	}
	for _, p := range b {
		set[p] = true
	}
	out := make([]int32, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// removeParts returns a without the partitions in b, keeping a's order.
func removeParts(a, b []int32) []int32 {
	drop := make(map[int32]bool, len(b))
	for _, p := range b {
		drop[p] = true
	}
	var out []int32
	for _, p := range a {
		if !drop[p] {
			out = append(out, p)
		}
	}
	return out
}
