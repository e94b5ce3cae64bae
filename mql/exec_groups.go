package mql

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/moonmq/moonmq/net/client"
)

func (s *Session) showGroups(ctx context.Context, cl *client.Client, st *ShowGroups) error {
	if err := s.require(ctx, cl, featGroupsList); err != nil {
		return err
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
			row[2] = orNone(d.Protocol)
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
		return err
	}
	d, err := cl.DescribeGroup(ctx, string(st.Name))
	if err != nil {
		return err
	}
	// The group's own row has SHOW GROUPS's columns (and the
	// coordinator), so a value reads the same in both: an empty group has
	// no protocol, NULL like any absent value (null in JSON).
	summary := &Table{
		Kind:    "group",
		Columns: []string{"group", "state", "protocol", "coordinator", "members", "lag"},
		Rows:    [][]any{{d.Name, d.State, orNone(d.Protocol), int64(d.Coordinator), int64(len(d.Members)), d.TotalLag}},
	}
	s.out.Table(summary)
	members := &Table{Title: "members", Kind: "member", Columns: []string{"member", "client_id", "host", "assigned"}}
	for _, m := range d.Members {
		var as []string
		for _, tp := range m.Assigned {
			as = append(as, tpString(tp.Topic, tp.Partitions))
		}
		members.Rows = append(members.Rows, []any{m.ID, m.ClientID, m.Host, orNone(strings.Join(as, " "))})
	}
	s.out.Table(members)
	offsets := &Table{Title: "offsets", Kind: "offset", Columns: []string{"topic", "partition", "committed", "end", "lag", "member"}}
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

// startText describes a position in prose: the keywords in lower case,
// a timestamp literal as written ("timestamp '2026-01-01T10:00:00Z'").
func startText(p *StartAt) string {
	if p.Timestamp != nil {
		return "timestamp " + Quote(string(*p.Timestamp))
	}
	return strings.ToLower(fmtStart(p))
}

// orNone maps an empty string (a group without a protocol, a member
// without partitions) to NULL.
func orNone(s string) any {
	if s == "" {
		return nil
	}
	return s
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
	if m := s.member; m != nil && m.Group() == group {
		return m.Commit(ctx, topic, offsets)
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
		return err
	}
	topic, p := string(st.Topic), int32(st.Partition)
	// Check the partition exists: Kafka accepts commits for unknown
	// partitions on some versions, which would hide a typo.
	ranges, err := cl.ListOffsets(ctx, topic)
	if err != nil {
		return err
	}
	if int(p) >= len(ranges) {
		return fmt.Errorf("partition %d of topic %s does not exist (it has %s)",
			p, quoteRes(topic), plural(int64(len(ranges)), "partition"))
	}
	if err := s.commit(ctx, cl, group, topic, map[int32]int64{p: int64(st.Offset)}); err != nil {
		return err
	}
	s.out.OK(fmt.Sprintf("committed %s[%d] @ offset %d", topic, p, st.Offset))
	return nil
}

func (s *Session) resetGroup(ctx context.Context, cl *client.Client, st *ResetGroup) error {
	if err := s.require(ctx, cl, featGroupsCommit); err != nil {
		return err
	}
	to, err := startPosition(st.To, nil, s.opts.Now())
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
		Title:   fmt.Sprintf("group %s reset to %s", quoteRes(string(st.Group)), startText(st.To)),
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
		return err
	}
	name := string(st.Name)
	err := cl.DeleteGroup(ctx, name)
	if st.IfExists && errors.Is(err, client.ErrNotFound) {
		s.out.OK(fmt.Sprintf("group %s does not exist: nothing to drop", quoteRes(name)))
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
		return err
	}
	group := string(st.Group)
	if s.member != nil {
		return fmt.Errorf("already a member of group %s: LEAVE GROUP first", quoteRes(s.member.Group()))
	}
	topics := make([]string, len(st.Topics))
	for i, t := range st.Topics {
		topics[i] = string(t)
	}
	// The member never hands out records: FETCH reads its assigned
	// partitions by offset and commits through it.
	m, err := cl.JoinGroup(ctx, group, topics...)
	if err != nil {
		return err
	}
	s.member = m
	s.group = group
	assigned := assignedString(m.Assigned())
	if assigned == "" {
		assigned = "no partitions yet"
	}
	who := "a new member"
	if id := m.MemberID(); id != "" {
		who = "member " + id
	}
	s.out.OK(fmt.Sprintf("joined group %s as %s; assigned %s", quoteRes(group), who, assigned))
	return nil
}

func (s *Session) leaveGroup(st *LeaveGroup) error {
	if s.member == nil {
		return errors.New("not a member of any group (JOIN GROUP name ON topic first)")
	}
	g := s.member.Group()
	if st.Group != nil && string(*st.Group) != g {
		return fmt.Errorf("not a member of group %s (the session is in group %s)", quoteRes(string(*st.Group)), quoteRes(g))
	}
	s.member.Leave()
	s.member = nil
	s.out.OK(fmt.Sprintf("left group %s", quoteRes(g)))
	return nil
}

// assignedString renders an assignment as "orders[0,1] audit[2]".
func assignedString(tps []client.TopicPartitions) string {
	out := make([]string, len(tps))
	for i, tp := range tps {
		out[i] = tpString(tp.Topic, tp.Partitions)
	}
	return strings.Join(out, " ")
}
