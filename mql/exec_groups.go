package mql

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/net/client"
)

func (s *Session) showGroups(ctx context.Context, cl *client.Client, st *ShowGroups) error {
	if err := s.require(ctx, cl, featGroupsList); err != nil {
		return fmt.Errorf("SHOW GROUPS: %w", err)
	}
	groups, err := cl.ListGroups(ctx)
	if err != nil {
		return err
	}
	var like *regexp.Regexp
	if st.Like != nil {
		like = likeRegexp(string(*st.Like))
	}
	t := &Table{Columns: []string{"group", "state", "protocol", "members", "lag"}}
	for _, g := range groups {
		if like != nil && !like.MatchString(g.Name) {
			continue
		}
		row := []any{g.Name, g.State, nil, nil, nil}
		if d, err := cl.DescribeGroup(ctx, g.Name); err == nil {
			row[1] = d.State
			if d.Protocol != "" {
				row[2] = d.Protocol
			}
			row[3] = int64(len(d.Members))
			row[4] = d.TotalLag
		}
		t.Rows = append(t.Rows, row)
	}
	s.out.Table(t)
	return nil
}

func (s *Session) describeGroup(ctx context.Context, cl *client.Client, st *DescribeGroup) error {
	if err := s.require(ctx, cl, featGroupsRead); err != nil {
		return fmt.Errorf("DESCRIBE GROUP: %w", err)
	}
	d, err := cl.DescribeGroup(ctx, string(st.Name))
	if err != nil {
		return err
	}
	proto := d.Protocol
	if proto == "" {
		proto = "none"
	}
	members := &Table{
		Title: fmt.Sprintf("group %s: %s, protocol %s, coordinator %d, total lag %d",
			quoteRes(d.Name), d.State, proto, d.Coordinator, d.TotalLag),
		Columns: []string{"member", "client_id", "host", "assigned"},
	}
	for _, m := range d.Members {
		var as []string
		for _, tp := range m.Assigned {
			as = append(as, tpString(tp.Topic, tp.Partitions))
		}
		members.Rows = append(members.Rows, []any{m.ID, m.ClientID, m.Host, strings.Join(as, " ")})
	}
	s.out.Table(members)
	offsets := &Table{Title: "offsets", Columns: []string{"topic", "partition", "committed", "end", "lag", "member"}}
	for _, o := range d.Offsets {
		var member any
		if o.MemberID != "" {
			member = o.MemberID
		}
		offsets.Rows = append(offsets.Rows, []any{o.Topic, int64(o.Partition), orNull(o.Committed), orNull(o.End), orNull(o.Lag), member})
	}
	s.out.Table(offsets)
	return nil
}

// tpString renders orders[0,1,2].
func tpString(topic string, parts []int32) string {
	ps := make([]string, len(parts))
	for i, p := range parts {
		ps[i] = fmt.Sprint(p)
	}
	return topic + "[" + strings.Join(ps, ",") + "]"
}

// committedOffsets returns the group's committed offsets on topic; a group
// that does not exist yet has none.
func (s *Session) committedOffsets(ctx context.Context, cl *client.Client, group, topic string) (map[int32]int64, error) {
	out := map[int32]int64{}
	d, err := cl.DescribeGroup(ctx, group)
	if errors.Is(err, client.ErrNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, o := range d.Offsets {
		if o.Topic == topic && o.Committed >= 0 {
			out[o.Partition] = o.Committed
		}
	}
	return out, nil
}

// commit sets committed offsets; through the joined member when the session
// is a member of that group (the coordinator only accepts commits from
// members of a group that has members), else as an admin commit.
func (s *Session) commit(ctx context.Context, cl *client.Client, group, topic string, offsets map[int32]int64) error {
	if m := s.member; m != nil && m.group == group {
		return m.commit(ctx, topic, offsets)
	}
	parts := make([]int32, 0, len(offsets))
	for p := range offsets {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		if err := cl.CommitOffset(ctx, group, topic, p, offsets[p]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Session) commitOffset(ctx context.Context, cl *client.Client, st *CommitOffset) error {
	group, err := s.groupFor(st.Group, "COMMIT")
	if err != nil {
		return err
	}
	if err := s.require(ctx, cl, featGroupsCommit); err != nil {
		return fmt.Errorf("COMMIT: %w", err)
	}
	topic, p := string(st.Topic), int32(st.Partition)
	// Check the partition exists: Kafka accepts commits for unknown
	// partitions on some versions, which would hide a typo.
	ranges, err := cl.ListOffsets(ctx, topic)
	if err != nil {
		return err
	}
	if int(p) >= len(ranges) {
		return fmt.Errorf("commit offset for group %s: partition %d of topic %s does not exist (it has %s)",
			quoteRes(group), p, quoteRes(topic), plural(int64(len(ranges)), "partition"))
	}
	if err := s.commit(ctx, cl, group, topic, map[int32]int64{p: int64(st.Offset)}); err != nil {
		return err
	}
	s.out.OK(fmt.Sprintf("committed %s[%d] @ offset %d", topic, p, st.Offset))
	return nil
}

func (s *Session) resetGroup(ctx context.Context, cl *client.Client, st *ResetGroup) error {
	if err := s.require(ctx, cl, featGroupsCommit); err != nil {
		return fmt.Errorf("RESET GROUP: %w", err)
	}
	to, err := startPosition(st.To, nil)
	if err != nil {
		return err
	}
	topic := ""
	if st.Topic != nil {
		topic = string(*st.Topic)
	}
	res, err := cl.ResetGroup(ctx, string(st.Group), topic, to)
	if err != nil {
		return err
	}
	t := &Table{
		Title:   fmt.Sprintf("group %s reset to %s", quoteRes(string(st.Group)), strings.ToLower(fmtStart(st.To))),
		Columns: []string{"topic", "partition", "committed", "end", "lag"},
	}
	for _, o := range res {
		t.Rows = append(t.Rows, []any{o.Topic, int64(o.Partition), o.Committed, orNull(o.End), orNull(o.Lag)})
	}
	s.out.Table(t)
	return nil
}

func (s *Session) dropGroup(ctx context.Context, cl *client.Client, st *DropGroup) error {
	if err := s.require(ctx, cl, featGroupsDelete); err != nil {
		return fmt.Errorf("DROP GROUP: %w", err)
	}
	name := string(st.Name)
	err := cl.DeleteGroup(ctx, name)
	if st.IfExists && errors.Is(err, client.ErrNotFound) {
		s.out.OK(fmt.Sprintf("group %s does not exist", quoteRes(name)))
		return nil
	}
	if err != nil {
		return err
	}
	s.out.OK(fmt.Sprintf("group %s dropped", quoteRes(name)))
	return nil
}

func (s *Session) joinGroup(ctx context.Context, cl *client.Client, st *JoinGroup) error {
	if err := s.require(ctx, cl, featGroupsMember); err != nil {
		return fmt.Errorf("JOIN GROUP: %w", err)
	}
	group := string(st.Group)
	if s.member != nil {
		return fmt.Errorf("already a member of group %s: LEAVE GROUP first", quoteRes(s.member.group))
	}
	topics := make([]string, len(st.Topics))
	for i, t := range st.Topics {
		topics[i] = string(t)
		// Fail on a missing topic now: the member would wait for it.
		if _, err := cl.ListOffsets(ctx, topics[i]); err != nil {
			return err
		}
	}
	m, err := joinGroup(ctx, cl.Options(), group, topics)
	if err != nil {
		return err
	}
	s.member = m
	s.group = group
	assigned := m.assignedString()
	if assigned == "" {
		assigned = "no partitions yet"
	}
	s.out.OK(fmt.Sprintf("joined group %s as %s; assigned %s", quoteRes(group), m.memberID(), assigned))
	return nil
}

func (s *Session) leaveGroup(st *LeaveGroup) error {
	if s.member == nil {
		return errors.New("not a member of any group (JOIN GROUP name ON topic first)")
	}
	if st.Group != nil && string(*st.Group) != s.member.group {
		return fmt.Errorf("not a member of group %s (the session is in group %s)", quoteRes(string(*st.Group)), quoteRes(s.member.group))
	}
	g := s.member.group
	s.member.leave()
	s.member = nil
	s.out.OK(fmt.Sprintf("left group %s", quoteRes(g)))
	return nil
}

// member is the session's membership of a consumer group (JOIN GROUP). It
// is a franz-go group consumer whose fetching is paused: it only holds an
// assignment and a generation, so the group shows a live member, FETCH
// reads only this member's partitions and commits are accepted. net/client
// has no membership API (its Consume reads and commits records), so this is
// the one place mql builds a kgo client itself, from the connection's
// options.
type member struct {
	group  string
	topics []string
	cl     *kgo.Client

	mu       sync.Mutex
	assigned map[string][]int32
	first    chan struct{} // closed at the first assignment
	once     sync.Once
}

func joinGroup(ctx context.Context, opts client.Options, group string, topics []string) (*member, error) {
	m := &member{group: group, topics: topics, assigned: map[string][]int32{}, first: make(chan struct{})}
	onAssigned := func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
		m.mu.Lock()
		for t, ps := range a {
			m.assigned[t] = mergeParts(m.assigned[t], ps)
		}
		m.mu.Unlock()
		m.once.Do(func() { close(m.first) })
	}
	onRevoked := func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
		m.mu.Lock()
		for t, ps := range r {
			m.assigned[t] = removeParts(m.assigned[t], ps)
		}
		m.mu.Unlock()
	}
	var seeds []string
	for _, a := range strings.Split(opts.Addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			seeds = append(seeds, a)
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ClientID(opts.ClientID),
		kgo.DialTimeout(opts.DialTimeout),
		kgo.RetryTimeout(opts.RequestTimeout),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(onAssigned),
		kgo.OnPartitionsRevoked(onRevoked),
		kgo.OnPartitionsLost(onRevoked),
	)
	if err != nil {
		return nil, fmt.Errorf("join group %s: %w", quoteRes(group), err)
	}
	// The member never hands out records: FETCH reads by offsets.
	cl.PauseFetchTopics(topics...)
	m.cl = cl
	wait := opts.RequestTimeout
	if wait <= 0 {
		wait = client.DefaultRequestTimeout
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-m.first:
	case <-timer.C:
		// Joined but not assigned yet (the group may be rebalancing);
		// the membership stays and assignments arrive later.
	case <-ctx.Done():
		cl.Close()
		return nil, fmt.Errorf("join group %s: %w", quoteRes(group), ctx.Err())
	}
	return m, nil
}

func (m *member) memberID() string {
	id, _ := m.cl.GroupMetadata()
	if id == "" {
		return "a new member"
	}
	return "member " + id
}

func (m *member) assignedSet(topic string) map[int32]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int32]bool{}
	for _, p := range m.assigned[topic] {
		out[p] = true
	}
	return out
}

func (m *member) assignedString() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	topics := make([]string, 0, len(m.assigned))
	for t, ps := range m.assigned {
		if len(ps) > 0 {
			topics = append(topics, t)
		}
	}
	sort.Strings(topics)
	out := make([]string, len(topics))
	for i, t := range topics {
		out[i] = tpString(t, m.assigned[t])
	}
	return strings.Join(out, " ")
}

// commit commits offsets with the member's generation.
func (m *member) commit(ctx context.Context, topic string, offsets map[int32]int64) error {
	eo := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for p, o := range offsets {
		eo[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var firstErr error
	m.cl.CommitOffsetsSync(ctx, eo, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			firstErr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil && firstErr == nil {
					firstErr = fmt.Errorf("commit %s[%d] for group %s: %w", t.Topic, p.Partition, quoteRes(m.group), e)
				}
			}
		}
	})
	if firstErr != nil {
		return fmt.Errorf("commit offsets for group %s: %w", quoteRes(m.group), firstErr)
	}
	return nil
}

// leave closes the member, which leaves the group.
func (m *member) leave() { m.cl.Close() }

func mergeParts(a, b []int32) []int32 {
	set := map[int32]bool{}
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

func removeParts(a, b []int32) []int32 {
	drop := map[int32]bool{}
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
