package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func tid(name string) TopicID {
	var id TopicID
	copy(id[:], name)
	return id
}

type consumerHarness struct {
	t      *testing.T
	cfg    Config
	now    time.Time
	g      *Consumer
	topics *topicSnapshot
}

func newConsumerHarness(t *testing.T, topics map[string]int32) *consumerHarness {
	h := &consumerHarness{t: t, cfg: testConfig(), now: time.Unix(1_000_000, 0)}
	h.g = newConsumer(&h.cfg, h.now)
	h.setTopics(topics)
	return h
}

func (h *consumerHarness) setTopics(topics map[string]int32) {
	var infos []TopicInfo
	for n, p := range topics {
		infos = append(infos, TopicInfo{Name: n, ID: tid(n), Partitions: p})
	}
	var v uint64
	if h.topics != nil {
		v = h.topics.version + 1
	}
	h.topics = newTopicSnapshot(v, infos)
}

func (h *consumerHarness) advance(d time.Duration) {
	const step = 100 * time.Millisecond
	for end := h.now.Add(d); h.now.Before(end); {
		h.now = h.now.Add(min(step, end.Sub(h.now)))
		h.g.Tick(h.now, h.topics)
	}
}

func (h *consumerHarness) hb(req ConsumerHeartbeatRequest) (ConsumerHeartbeatResult, error) {
	req.Version = 1
	if req.RebalanceTimeout == 0 {
		req.RebalanceTimeout = -1
	}
	return h.g.Heartbeat(h.now, req, h.topics)
}

func (h *consumerHarness) join(id string, topics ...string) ConsumerHeartbeatResult {
	h.t.Helper()
	res, err := h.hb(ConsumerHeartbeatRequest{MemberID: id, MemberEpoch: 0, RebalanceTimeout: 30 * time.Second,
		SubscribedTopicNames: topics, Owned: []TopicPartitions{}})
	require.NoError(h.t, err)
	require.True(h.t, res.HasAssignment, "a join always carries the assignment")
	return res
}

// keepalive is a heartbeat with every optional field null.
func (h *consumerHarness) keepalive(id string, epoch int32) ConsumerHeartbeatResult {
	h.t.Helper()
	res, err := h.hb(ConsumerHeartbeatRequest{MemberID: id, MemberEpoch: epoch})
	require.NoError(h.t, err)
	return res
}

// owning is a heartbeat reporting the partitions the member owns.
func (h *consumerHarness) owning(id string, epoch int32, owned []TopicPartitions) ConsumerHeartbeatResult {
	h.t.Helper()
	res, err := h.hb(ConsumerHeartbeatRequest{MemberID: id, MemberEpoch: epoch, Owned: owned})
	require.NoError(h.t, err)
	return res
}

func parts(topic string, ps ...int32) []TopicPartitions {
	return []TopicPartitions{{ID: tid(topic), Partitions: ps}}
}

func TestConsumerReconciliationRevokesBeforeReassigning(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 6})
	a := h.join("A", "t")
	require.Equal(t, int32(1), a.MemberEpoch)
	require.Equal(t, parts("t", 0, 1, 2, 3, 4, 5), a.Assignment)
	require.Equal(t, StateStable, h.g.State())

	// B joins: the target splits the partitions, but all of B's are still
	// held by A, so B starts with nothing.
	b := h.join("B", "t")
	require.Equal(t, int32(2), b.MemberEpoch)
	require.Equal(t, []TopicPartitions{}, b.Assignment)
	require.Equal(t, StateReconciling, h.g.State())

	// A is told to give up its share, staying at its epoch until it has.
	a = h.keepalive("A", 1)
	require.Equal(t, int32(1), a.MemberEpoch)
	require.True(t, a.HasAssignment)
	require.Equal(t, parts("t", 0, 1, 2), a.Assignment)
	a = h.owning("A", 1, parts("t", 0, 1, 2, 3, 4, 5))
	require.Equal(t, int32(1), a.MemberEpoch, "still owns revoked partitions")
	require.False(t, a.HasAssignment)
	a = h.owning("A", 1, parts("t", 0, 1, 2))
	require.Equal(t, int32(2), a.MemberEpoch)

	// Now B gets them.
	b = h.keepalive("B", 2)
	require.True(t, b.HasAssignment)
	require.Equal(t, parts("t", 3, 4, 5), b.Assignment)
	require.Equal(t, StateStable, h.g.State())
	b = h.keepalive("B", 2)
	require.False(t, b.HasAssignment, "unchanged assignments are not resent")

	// Commits: the current epoch is fine; an older one only for
	// partitions held since then (KIP-1251); a newer one is stale.
	check, err := h.g.validateCommit("A", 1, 9)
	require.NoError(t, err)
	require.NoError(t, check(tid("t"), 0))
	require.ErrorIs(t, check(tid("t"), 4), ErrStaleMemberEpoch)
	_, err = h.g.validateCommit("A", 3, 9)
	require.ErrorIs(t, err, ErrStaleMemberEpoch)
	check, err = h.g.validateCommit("B", 2, 9)
	require.NoError(t, err)
	require.Nil(t, check)
	_, err = h.g.validateCommit("B", 2, 8)
	require.ErrorIs(t, err, ErrUnsupportedVersion)
	_, err = h.g.validateCommit("", -1, 9)
	require.ErrorIs(t, err, ErrUnknownMemberID, "admin commits need an empty group")
	require.ErrorIs(t, h.g.validateFetch(ptr("B"), 1), ErrStaleMemberEpoch)
	require.NoError(t, h.g.validateFetch(ptr("B"), 2))
	require.NoError(t, h.g.validateFetch(nil, -1))

	// A leaves: B takes everything.
	res, err := h.hb(ConsumerHeartbeatRequest{MemberID: "A", MemberEpoch: -1})
	require.NoError(t, err)
	require.Equal(t, int32(-1), res.MemberEpoch)
	b = h.keepalive("B", 2)
	require.Equal(t, int32(3), b.MemberEpoch)
	require.Equal(t, parts("t", 0, 1, 2, 3, 4, 5), b.Assignment)
}

func ptr(s string) *string { return &s }

func TestConsumerEpochFencing(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 4})
	h.join("A", "t")
	h.join("B", "t")
	h.owning("A", 1, parts("t", 0, 1))
	a := h.keepalive("A", 2)
	require.Equal(t, int32(2), a.MemberEpoch)

	_, err := h.hb(ConsumerHeartbeatRequest{MemberID: "A", MemberEpoch: 5})
	require.ErrorIs(t, err, ErrFencedMemberEpoch)
	// The previous epoch is accepted if the member owns no more than it
	// was given (the response that bumped it may have been lost)...
	_, err = h.hb(ConsumerHeartbeatRequest{MemberID: "A", MemberEpoch: 1, Owned: parts("t", 0)})
	require.NoError(t, err)
	// ...but not without saying what it owns, nor older epochs.
	_, err = h.hb(ConsumerHeartbeatRequest{MemberID: "A", MemberEpoch: 1})
	require.ErrorIs(t, err, ErrFencedMemberEpoch)
	_, err = h.hb(ConsumerHeartbeatRequest{MemberID: "Z", MemberEpoch: 3})
	require.ErrorIs(t, err, ErrUnknownMemberID)

	// A fenced member rejoins with epoch 0 and the same id: it keeps its
	// partitions and gets them all again.
	a = h.join("A", "t")
	require.Equal(t, int32(2), a.MemberEpoch)
	require.Equal(t, parts("t", 0, 1), a.Assignment)
}

func TestConsumerStaticMembers(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 4})
	static := func(id, instance string, epoch int32) (ConsumerHeartbeatResult, error) {
		req := ConsumerHeartbeatRequest{MemberID: id, MemberEpoch: epoch, InstanceID: &instance}
		if epoch == 0 {
			req.RebalanceTimeout, req.SubscribedTopicNames, req.Owned = time.Minute, []string{"t"}, []TopicPartitions{}
		}
		return h.hb(req)
	}
	s1, err := static("S1", "s", 0)
	require.NoError(t, err)
	h.join("B", "t")
	h.owning("S1", s1.MemberEpoch, parts("t", 0, 1))
	epoch := h.g.Epoch()

	// Another process claiming the instance while S1 is active.
	_, err = static("S2", "s", 0)
	require.ErrorIs(t, err, ErrUnreleasedInstanceID)

	// S1 leaves temporarily; S2 (its restart) takes over its partitions
	// without a new group epoch.
	res, err := static("S1", "s", -2)
	require.NoError(t, err)
	require.Equal(t, int32(-2), res.MemberEpoch)
	res, err = static("S2", "s", 0)
	require.NoError(t, err)
	require.Equal(t, parts("t", 0, 1), res.Assignment)
	require.Equal(t, epoch, h.g.Epoch(), "no rebalance")
	_, err = h.hb(ConsumerHeartbeatRequest{MemberID: "S1", MemberEpoch: res.MemberEpoch, InstanceID: ptr("s")})
	require.ErrorIs(t, err, ErrFencedInstanceID)

	// S2 leaves temporarily and does not come back: after the session
	// timeout its partitions go to B.
	_, err = static("S2", "s", -2)
	require.NoError(t, err)
	h.advance(5 * time.Second)
	h.keepalive("B", h.g.members["B"].epoch)
	h.advance(6 * time.Second)
	require.Equal(t, 1, h.g.Len())
	b := h.keepalive("B", h.g.members["B"].epoch)
	require.Equal(t, parts("t", 0, 1, 2, 3), b.Assignment)
}

func TestConsumerTimeouts(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 4})
	h.join("A", "t")
	h.join("B", "t")
	// A must revoke two partitions but never acknowledges: fenced after its
	// rebalance timeout (30s) although it keeps heartbeating.
	h.keepalive("A", 1)
	for i := 0; i < 31; i++ {
		h.advance(time.Second)
		if h.g.members["A"] != nil {
			h.keepalive("A", 1)
		}
		h.keepalive("B", h.g.members["B"].epoch)
	}
	require.Nil(t, h.g.members["A"])
	h.keepalive("B", h.g.members["B"].epoch)
	require.Equal(t, parts("t", 0, 1, 2, 3), toTopicPartitions(h.g.members["B"].assigned))

	// B stops heartbeating: gone after the session timeout.
	h.advance(11 * time.Second)
	require.Equal(t, 0, h.g.Len())
	require.Equal(t, StateEmpty, h.g.State())
}

func TestConsumerHeartbeatValidation(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"t": 1})
	empty := ""
	bad := "range2"
	re := "(unclosed"
	for _, tc := range []struct {
		name string
		req  ConsumerHeartbeatRequest
		want error
	}{
		{"no member id", ConsumerHeartbeatRequest{MemberEpoch: 0, RebalanceTimeout: time.Second, SubscribedTopicNames: []string{"t"}, Owned: []TopicPartitions{}}, ErrInvalidRequest},
		{"no rebalance timeout on join", ConsumerHeartbeatRequest{MemberID: "m", SubscribedTopicNames: []string{"t"}, Owned: []TopicPartitions{}}, ErrInvalidRequest},
		{"owned partitions on join", ConsumerHeartbeatRequest{MemberID: "m", RebalanceTimeout: time.Second, SubscribedTopicNames: []string{"t"}, Owned: parts("t", 0)}, ErrInvalidRequest},
		{"no subscription on join", ConsumerHeartbeatRequest{MemberID: "m", RebalanceTimeout: time.Second, Owned: []TopicPartitions{}}, ErrInvalidRequest},
		{"empty instance id", ConsumerHeartbeatRequest{MemberID: "m", InstanceID: &empty, RebalanceTimeout: time.Second, SubscribedTopicNames: []string{"t"}, Owned: []TopicPartitions{}}, ErrInvalidRequest},
		{"static leave without instance", ConsumerHeartbeatRequest{MemberID: "m", MemberEpoch: -2}, ErrInvalidRequest},
		{"epoch below -2", ConsumerHeartbeatRequest{MemberID: "m", MemberEpoch: -3}, ErrInvalidRequest},
		{"unknown assignor", ConsumerHeartbeatRequest{MemberID: "m", ServerAssignor: &bad, RebalanceTimeout: time.Second, SubscribedTopicNames: []string{"t"}, Owned: []TopicPartitions{}}, ErrUnsupportedAssignor},
		{"bad regex", ConsumerHeartbeatRequest{MemberID: "m", SubscribedTopicRegex: &re, RebalanceTimeout: time.Second, Owned: []TopicPartitions{}}, ErrInvalidRegex},
		{"leave of an unknown member", ConsumerHeartbeatRequest{MemberID: "m", MemberEpoch: -1}, ErrUnknownMemberID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req.RebalanceTimeout == 0 {
				tc.req.RebalanceTimeout = -1
			}
			tc.req.Version = 1
			_, err := h.g.Heartbeat(h.now, tc.req, h.topics)
			require.ErrorIs(t, err, tc.want)
		})
	}
	require.Equal(t, 0, h.g.Len())

	h.cfg.MaxSize = 1
	h.join("A", "t")
	_, err := h.hb(ConsumerHeartbeatRequest{MemberID: "B", RebalanceTimeout: time.Second, SubscribedTopicNames: []string{"t"}, Owned: []TopicPartitions{}})
	require.ErrorIs(t, err, ErrGroupMaxSizeReached)
}

func TestConsumerRegexAndTopicChanges(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"events": 2, "other": 1})
	re := "ev.*"
	res, err := h.hb(ConsumerHeartbeatRequest{MemberID: "A", RebalanceTimeout: time.Second, SubscribedTopicRegex: &re, Owned: []TopicPartitions{}})
	require.NoError(t, err)
	require.Equal(t, parts("events", 0, 1), res.Assignment)
	epoch := h.g.Epoch()

	// A new matching topic and more partitions: the next heartbeat
	// notices, bumps the group epoch and assigns them.
	h.setTopics(map[string]int32{"events": 3, "evx": 1, "other": 1})
	res = h.keepalive("A", res.MemberEpoch)
	require.Greater(t, h.g.Epoch(), epoch)
	require.True(t, res.HasAssignment)
	require.ElementsMatch(t, append(parts("events", 0, 1, 2), parts("evx", 0)...), res.Assignment)

	// A deleted topic is revoked.
	h.setTopics(map[string]int32{"evx": 1, "other": 1})
	res = h.keepalive("A", res.MemberEpoch)
	require.Equal(t, parts("evx", 0), res.Assignment)
	require.True(t, h.g.subscribed("evx"))
	require.False(t, h.g.subscribed("other"))
}

// A broker-resolved regex matches internal topics like any other, as
// Kafka's does: a pattern naming __consumer_offsets is assigned it
// (franz-go's Test848RegexBrokerResolves).
func TestConsumerRegexMatchesInternalTopics(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"orders": 1, "orders-v2": 1, OffsetsTopic: 2})
	re := "orders|__consumer_offsets"
	res, err := h.hb(ConsumerHeartbeatRequest{MemberID: "A", RebalanceTimeout: time.Second, SubscribedTopicRegex: &re, Owned: []TopicPartitions{}})
	require.NoError(t, err)
	require.ElementsMatch(t, append(parts("orders", 0), parts(OffsetsTopic, 0, 1)...), res.Assignment,
		"the regex matches in full: orders-v2 is not assigned, __consumer_offsets is")
}

func TestConsumerRangeAssignorSelected(t *testing.T) {
	h := newConsumerHarness(t, map[string]int32{"a": 4, "b": 4})
	rng := AssignorRange
	for _, id := range []string{"m1", "m2"} {
		_, err := h.hb(ConsumerHeartbeatRequest{MemberID: id, RebalanceTimeout: time.Second, ServerAssignor: &rng,
			SubscribedTopicNames: []string{"a", "b"}, Owned: []TopicPartitions{}})
		require.NoError(t, err)
	}
	require.Equal(t, AssignorRange, h.g.assignorName())
	require.Equal(t, assignment{tid("a"): {0, 1}, tid("b"): {0, 1}}, h.g.target["m1"])
	require.Equal(t, assignment{tid("a"): {2, 3}, tid("b"): {2, 3}}, h.g.target["m2"])
}

func TestAssignUniform(t *testing.T) {
	topics := map[string]topicMeta{"x": {tid("x"), 7}, "y": {tid("y"), 2}}
	in := assignInput{members: []string{"a", "b", "c"}, subs: map[string][]string{"a": {"x"}, "b": {"x"}, "c": {"x"}}, topics: topics}
	out := assignUniform(in)
	counts := []int{out["a"].count(), out["b"].count(), out["c"].count()}
	require.ElementsMatch(t, []int{3, 2, 2}, counts)
	seen := map[int32]bool{}
	for _, a := range out {
		for _, p := range a[tid("x")] {
			require.False(t, seen[p])
			seen[p] = true
		}
	}
	require.Len(t, seen, 7)

	// Sticky: with one member gone, the survivors keep what they had.
	in2 := assignInput{members: []string{"a", "b"}, subs: map[string][]string{"a": {"x"}, "b": {"x"}}, topics: topics, prev: out}
	out2 := assignUniform(in2)
	for _, m := range []string{"a", "b"} {
		for _, p := range out[m][tid("x")] {
			require.True(t, out2[m].has(tid("x"), p), "%s keeps partition %d", m, p)
		}
	}
	require.ElementsMatch(t, []int{4, 3}, []int{out2["a"].count(), out2["b"].count()})

	// Heterogeneous: only b subscribes to y.
	in3 := assignInput{members: []string{"a", "b"}, subs: map[string][]string{"a": {"x"}, "b": {"x", "y"}}, topics: topics}
	out3 := assignUniform(in3)
	require.Len(t, out3["b"][tid("y")], 2)
	require.Empty(t, out3["a"][tid("y")])
	require.InDelta(t, out3["a"].count(), out3["b"].count(), 1)
}

func TestAssignRange(t *testing.T) {
	topics := map[string]topicMeta{"x": {tid("x"), 5}}
	out := assignRange(assignInput{members: []string{"a", "b"}, subs: map[string][]string{"a": {"x"}, "b": {"x"}}, topics: topics})
	require.Equal(t, []int32{0, 1, 2}, out["a"][tid("x")])
	require.Equal(t, []int32{3, 4}, out["b"][tid("x")])
}

func TestPartitionForMatchesKafka(t *testing.T) {
	// Values of Java's abs(String.hashCode()) % 50.
	for _, tc := range []struct {
		group string
		want  int32
	}{
		{"hello", 99162322 % 50},
		{"", 0},
		{"polygenelubricants", 0},    // hashCode is Integer.MIN_VALUE
		{"\U0001F600", 1772899 % 50}, // a surrogate pair in UTF-16
	} {
		require.Equal(t, tc.want, PartitionFor(tc.group, 50), fmt.Sprintf("%q", tc.group))
	}
}
