package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// result captures a callback's value; done reports whether it fired.
type result[T any] struct {
	done  bool
	calls int
	v     T
}

func (r *result[T]) cb(v T) {
	r.calls++
	r.done, r.v = true, v
}

// classicHarness drives a Classic group with a fake clock.
type classicHarness struct {
	t   *testing.T
	cfg Config
	now time.Time
	g   *Classic
}

func testConfig() Config {
	n := 0
	cfg := Config{
		MinSessionTimeout: time.Second, InitialRebalanceDelay: 3 * time.Second,
		ConsumerSessionTimeout: 10 * time.Second, ConsumerHeartbeatInterval: time.Second,
		NewID: func() string { n++; return fmt.Sprintf("id%d", n) },
	}
	cfg.EnsureDefaults()
	return cfg
}

func newClassicHarness(t *testing.T) *classicHarness {
	h := &classicHarness{t: t, cfg: testConfig(), now: time.Unix(1_000_000, 0)}
	h.g = newClassic(&h.cfg, h.now)
	return h
}

// advance moves the clock in driver-sized steps, ticking at each.
func (h *classicHarness) advance(d time.Duration) {
	const step = 100 * time.Millisecond
	for end := h.now.Add(d); h.now.Before(end); {
		h.now = h.now.Add(min(step, end.Sub(h.now)))
		h.g.Tick(h.now)
	}
}

func joinReq(member string, meta string) JoinRequest {
	return JoinRequest{
		Group: "g", Version: 9, MemberID: member, ClientID: "c", ClientHost: "/127.0.0.1",
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second, ProtocolType: "consumer",
		Protocols: []Protocol{{Name: "range", Metadata: []byte(meta)}},
	}
}

func (h *classicHarness) join(req JoinRequest) *result[JoinResult] {
	r := &result[JoinResult]{}
	h.g.Join(h.now, req, r.cb)
	return r
}

// newMember runs the MEMBER_ID_REQUIRED round and parks the real join.
func (h *classicHarness) newMember(meta string) (string, *result[JoinResult]) {
	h.t.Helper()
	first := h.join(joinReq("", meta))
	require.True(h.t, first.done)
	require.ErrorIs(h.t, first.v.Err, ErrMemberIDRequired)
	require.NotEmpty(h.t, first.v.MemberID)
	return first.v.MemberID, h.join(joinReq(first.v.MemberID, meta))
}

func (h *classicHarness) sync(member string, gen int32, assign map[string][]byte) *result[SyncResult] {
	r := &result[SyncResult]{}
	h.g.Sync(h.now, SyncRequest{Group: "g", Generation: gen, MemberID: member, Assignments: assign}, r.cb)
	return r
}

func (h *classicHarness) heartbeat(member string, gen int32) error {
	return h.g.Heartbeat(h.now, HeartbeatRequest{Group: "g", Generation: gen, MemberID: member})
}

// stable brings members (already joined and parked) through the sync with
// the leader assigning "a-<member>".
func (h *classicHarness) syncAll(joins map[string]*result[JoinResult]) int32 {
	h.t.Helper()
	var leader string
	var gen int32
	for id, j := range joins {
		require.True(h.t, j.done, "join of %s answered", id)
		require.NoError(h.t, j.v.Err)
		gen = j.v.Generation
		if j.v.Leader == id {
			leader = id
		}
	}
	require.NotEmpty(h.t, leader)
	require.Len(h.t, joins[leader].v.Members, len(joins))
	assign := map[string][]byte{}
	for id := range joins {
		assign[id] = []byte("a-" + id)
	}
	syncs := map[string]*result[SyncResult]{}
	for id := range joins {
		if id != leader {
			syncs[id] = h.sync(id, gen, nil)
			require.False(h.t, syncs[id].done, "followers wait for the leader")
		}
	}
	syncs[leader] = h.sync(leader, gen, assign)
	for id, s := range syncs {
		require.True(h.t, s.done)
		require.NoError(h.t, s.v.Err)
		require.Equal(h.t, "a-"+id, string(s.v.Assignment))
	}
	require.Equal(h.t, StateStable, h.g.State())
	return gen
}

func TestClassicJoinSyncHeartbeat(t *testing.T) {
	h := newClassicHarness(t)
	a, ja := h.newMember("ma")
	require.Equal(t, StatePreparingRebalance, h.g.State())
	b, jb := h.newMember("mb")
	// The initial rebalance delay holds the first generation back so that
	// members starting together land in one rebalance.
	h.advance(2 * time.Second)
	require.False(t, ja.done)
	h.advance(time.Second) // b arrived during the delay: it is extended once
	require.False(t, ja.done)
	h.advance(3 * time.Second)
	require.True(t, ja.done)
	require.True(t, jb.done)
	require.Equal(t, int32(1), ja.v.Generation)
	require.Equal(t, "range", ja.v.Protocol)
	require.Equal(t, a, ja.v.Leader, "the first member leads")
	require.Equal(t, []JoinMember{{MemberID: a, Metadata: []byte("ma")}, {MemberID: b, Metadata: []byte("mb")}}, ja.v.Members)
	require.Empty(t, jb.v.Members, "only the leader sees the members")
	require.Equal(t, StateCompletingRebalance, h.g.State())
	require.NoError(t, h.heartbeat(b, 1), "heartbeats are fine while syncing")

	gen := h.syncAll(map[string]*result[JoinResult]{a: ja, b: jb})
	require.True(t, h.g.dirty, "the assignment is persisted")
	require.NoError(t, h.heartbeat(a, gen))
	require.ErrorIs(t, h.heartbeat(a, gen+1), ErrIllegalGeneration)
	require.ErrorIs(t, h.heartbeat("nobody", gen), ErrUnknownMemberID)

	// A follower rejoining with the same metadata gets the current
	// generation back without a rebalance.
	again := h.join(joinReq(b, "mb"))
	require.True(t, again.done)
	require.Equal(t, gen, again.v.Generation)
	require.Equal(t, StateStable, h.g.State())
}

func TestClassicRebalanceOnJoinLeaveAndTimeouts(t *testing.T) {
	h := newClassicHarness(t)
	a, ja := h.newMember("ma")
	b, jb := h.newMember("mb")
	h.advance(10 * time.Second)
	gen := h.syncAll(map[string]*result[JoinResult]{a: ja, b: jb})

	// A third member triggers a rebalance; the others learn of it from
	// their heartbeats and rejoin, which completes the join phase at once.
	c, jc := h.newMember("mc")
	require.Equal(t, StatePreparingRebalance, h.g.State())
	require.ErrorIs(t, h.heartbeat(a, gen), ErrRebalanceInProgress)
	ja = h.join(joinReq(a, "ma"))
	require.False(t, ja.done)
	jb = h.join(joinReq(b, "mb"))
	require.True(t, jc.done && ja.done && jb.done)
	gen = h.syncAll(map[string]*result[JoinResult]{a: ja, b: jb, c: jc})
	require.Equal(t, int32(2), gen)

	// c leaves: rebalance without it.
	require.NoError(t, h.g.Leave(h.now, LeaveMember{MemberID: c}))
	require.ErrorIs(t, h.g.Leave(h.now, LeaveMember{MemberID: c}), ErrUnknownMemberID)
	ja, jb = h.join(joinReq(a, "ma")), h.join(joinReq(b, "mb"))
	gen = h.syncAll(map[string]*result[JoinResult]{a: ja, b: jb})
	require.Equal(t, int32(3), gen)

	// b stops heartbeating: after its session timeout it is removed.
	for i := 0; i < 4; i++ {
		h.advance(3 * time.Second)
		if i < 3 {
			require.NoError(t, h.heartbeat(a, gen))
		}
	}
	require.False(t, h.g.HasMember(b))
	require.ErrorIs(t, h.heartbeat(a, gen), ErrRebalanceInProgress)
	ja = h.join(joinReq(a, "ma"))
	require.True(t, ja.done, "a is the only member left")
	require.Equal(t, a, ja.v.Leader)
	require.Equal(t, StateCompletingRebalance, h.g.State())

	// a never syncs: after the rebalance timeout it is removed and the
	// group becomes empty.
	h.advance(21 * time.Second)
	require.Equal(t, StateEmpty, h.g.State())
	require.Equal(t, 0, h.g.Len())
}

func TestClassicRebalanceTimeoutDropsSlowMembers(t *testing.T) {
	h := newClassicHarness(t)
	a, ja := h.newMember("ma")
	b, jb := h.newMember("mb")
	h.advance(10 * time.Second)
	gen := h.syncAll(map[string]*result[JoinResult]{a: ja, b: jb})

	// a rejoins (e.g. with new metadata); b keeps heartbeating but never
	// rejoins: it is dropped when the rebalance timeout ends the phase.
	ja = h.join(joinReq(a, "ma2"))
	require.False(t, ja.done)
	for i := 0; i < 8; i++ {
		h.advance(3 * time.Second)
		if h.g.HasMember(b) {
			require.ErrorIs(t, h.heartbeat(b, gen), ErrRebalanceInProgress)
		}
	}
	require.True(t, ja.done)
	require.NoError(t, ja.v.Err)
	require.Equal(t, gen+1, ja.v.Generation)
	require.False(t, h.g.HasMember(b))
	require.Equal(t, []JoinMember{{MemberID: a, Metadata: []byte("ma2")}}, ja.v.Members)
}

func TestClassicFollowersWaitForLeaderAndRebalanceAnswersThem(t *testing.T) {
	h := newClassicHarness(t)
	a, ja := h.newMember("ma")
	b, jb := h.newMember("mb")
	h.advance(10 * time.Second)
	require.True(t, ja.done && jb.done)
	follower, leader := b, a
	if ja.v.Leader == b {
		follower, leader = a, b
	}
	sb := h.sync(follower, 1, nil)
	require.False(t, sb.done)
	// The leader dies before syncing: its pending sync expires, and the
	// parked follower hears REBALANCE_IN_PROGRESS.
	for i := 0; i < 30 && !sb.done; i++ {
		h.advance(time.Second)
	}
	require.True(t, sb.done)
	require.ErrorIs(t, sb.v.Err, ErrRebalanceInProgress)
	require.False(t, h.g.HasMember(leader))
	require.Equal(t, StatePreparingRebalance, h.g.State())
}

func TestClassicStaticMembership(t *testing.T) {
	h := newClassicHarness(t)
	static := func(member, instance string) JoinRequest {
		r := joinReq(member, "m-"+instance)
		r.InstanceID = instance
		return r
	}
	// Static members get an id at once (no MEMBER_ID_REQUIRED round).
	ja := h.join(static("", "x"))
	jb := h.join(static("", "y"))
	h.advance(10 * time.Second)
	require.True(t, ja.done && jb.done)
	x, y := ja.v.MemberID, jb.v.MemberID
	require.Regexp(t, `^x-`, x)
	require.Equal(t, x, ja.v.Leader)
	gen := h.syncAll(map[string]*result[JoinResult]{x: ja, y: jb})
	h.g.dirty = false

	// y restarts (no LeaveGroup) and rejoins within its session timeout:
	// new member id, same generation, no rebalance, same assignment.
	jy := h.join(static("", "y"))
	require.True(t, jy.done)
	require.NoError(t, jy.v.Err)
	y2 := jy.v.MemberID
	require.NotEqual(t, y, y2)
	require.Equal(t, gen, jy.v.Generation)
	require.Equal(t, x, jy.v.Leader)
	require.Equal(t, StateStable, h.g.State())
	require.True(t, h.g.dirty, "the new member id is persisted")
	s := h.sync(y2, gen, nil)
	require.True(t, s.done)
	require.Equal(t, "a-"+y, string(s.v.Assignment))
	require.NoError(t, h.heartbeat(x, gen), "x saw no rebalance")

	// The old incarnation is fenced.
	err := h.g.Heartbeat(h.now, HeartbeatRequest{Generation: gen, MemberID: y, InstanceID: "y"})
	require.ErrorIs(t, err, ErrFencedInstanceID)
	require.ErrorIs(t, h.g.validateCommit(h.now, gen, y, "y", false), ErrFencedInstanceID)

	// The static leader restarting with JoinGroup v9 learns it leads but
	// must skip the assignment (KIP-814); older versions are told the old
	// leader id, so they do not assign.
	jx := h.join(static("", "x"))
	require.True(t, jx.done)
	require.True(t, jx.v.SkipAssignment)
	require.Equal(t, jx.v.MemberID, jx.v.Leader)
	require.Len(t, jx.v.Members, 2)
	old := static("", "x")
	old.Version = 5
	jx5 := h.join(old)
	require.True(t, jx5.done)
	require.False(t, jx5.v.SkipAssignment)
	require.NotEqual(t, jx5.v.MemberID, jx5.v.Leader)
	require.Empty(t, jx5.v.Members)
	require.Equal(t, gen, jx5.v.Generation)

	// A static member leaving by instance id alone; a wrong member id for
	// an instance is fenced.
	require.ErrorIs(t, h.g.Leave(h.now, LeaveMember{MemberID: "bogus", InstanceID: "y"}), ErrFencedInstanceID)
	require.NoError(t, h.g.Leave(h.now, LeaveMember{InstanceID: "y"}))
	require.ErrorIs(t, h.g.Leave(h.now, LeaveMember{InstanceID: "y"}), ErrUnknownMemberID)
	require.Equal(t, StatePreparingRebalance, h.g.State())
}

func TestClassicStaticMemberRejoiningDuringJoinPhase(t *testing.T) {
	h := newClassicHarness(t)
	req := joinReq("", "m")
	req.InstanceID = "x"
	first := h.join(req)
	// The same instance joins again while the first join is parked (the
	// client restarted): the old request is fenced, the new one waits.
	second := h.join(req)
	require.True(t, first.done)
	require.ErrorIs(t, first.v.Err, ErrFencedInstanceID)
	require.False(t, second.done)
	h.advance(10 * time.Second)
	require.True(t, second.done)
	require.NoError(t, second.v.Err)
	require.Equal(t, second.v.MemberID, second.v.Leader)
}

func TestClassicErrors(t *testing.T) {
	h := newClassicHarness(t)
	h.cfg.MaxSize = 2
	for _, tc := range []struct {
		name string
		req  JoinRequest
		want error
	}{
		{"session timeout too small", func() JoinRequest { r := joinReq("", "m"); r.SessionTimeout = time.Millisecond; return r }(), ErrInvalidSessionTimeout},
		{"session timeout too large", func() JoinRequest { r := joinReq("", "m"); r.SessionTimeout = time.Hour; return r }(), ErrInvalidSessionTimeout},
		{"no protocols", func() JoinRequest { r := joinReq("", "m"); r.Protocols = nil; return r }(), ErrInconsistentGroupProtocol},
		{"no protocol type", func() JoinRequest { r := joinReq("", "m"); r.ProtocolType = ""; return r }(), ErrInconsistentGroupProtocol},
		{"unknown member id", joinReq("made-up", "m"), ErrUnknownMemberID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.join(tc.req)
			require.True(t, r.done)
			require.ErrorIs(t, r.v.Err, tc.want)
			require.Equal(t, int32(-1), r.v.Generation)
		})
	}
	require.Equal(t, 0, h.g.Len(), "failed joins leave no trace")

	a, ja := h.newMember("ma")
	b, jb := h.newMember("mb")
	// Full: the third member is refused before it gets an id.
	third := h.join(joinReq("", "mc"))
	require.ErrorIs(t, third.v.Err, ErrGroupMaxSizeReached)
	// Another protocol type or no common protocol is refused.
	other := joinReq("", "m")
	other.ProtocolType = "connect"
	require.ErrorIs(t, h.join(other).v.Err, ErrInconsistentGroupProtocol)
	other = joinReq(a, "m")
	other.Protocols = []Protocol{{Name: "roundrobin"}}
	require.ErrorIs(t, h.join(other).v.Err, ErrInconsistentGroupProtocol)

	// Sync and commit during the join phase.
	require.ErrorIs(t, h.sync(a, 0, nil).v.Err, ErrRebalanceInProgress)
	require.ErrorIs(t, h.sync(a, 5, nil).v.Err, ErrIllegalGeneration)
	require.NoError(t, h.g.validateCommit(h.now, 0, a, "", false), "commits of the previous generation are fine while rejoining")
	h.advance(10 * time.Second)
	require.True(t, ja.done && jb.done)
	require.ErrorIs(t, h.g.validateCommit(h.now, 1, a, "", false), ErrRebalanceInProgress, "no commits while the assignment is made")
	require.ErrorIs(t, h.g.validateCommit(h.now, -1, "", "", false), ErrUnknownMemberID, "admin commits need an empty group")
	require.ErrorIs(t, h.g.validateCommit(h.now, 7, a, "", false), ErrIllegalGeneration)
	pt := "other"
	r := &result[SyncResult]{}
	h.g.Sync(h.now, SyncRequest{Generation: 1, MemberID: a, ProtocolType: &pt}, r.cb)
	require.ErrorIs(t, r.v.Err, ErrInconsistentGroupProtocol)
	h.syncAll(map[string]*result[JoinResult]{a: ja, b: jb})
	require.NoError(t, h.g.validateCommit(h.now, 1, b, "", false))
}

func TestClassicOversizedAssignmentIsRefused(t *testing.T) {
	h := newClassicHarness(t)
	h.cfg.MaxRecordBytes = 2048
	a, ja := h.newMember("ma")
	h.advance(10 * time.Second)
	s := h.sync(a, ja.v.Generation, map[string][]byte{a: make([]byte, 4096)})
	require.True(t, s.done)
	require.ErrorIs(t, s.v.Err, ErrGroupMetadataTooLarge)
	require.Equal(t, StatePreparingRebalance, h.g.State())
}

func TestClassicMetadataRoundTrip(t *testing.T) {
	h := newClassicHarness(t)
	req := joinReq("", "mx")
	req.InstanceID = "x"
	jx := h.join(req)
	y, jy := h.newMember("my")
	h.advance(10 * time.Second)
	gen := h.syncAll(map[string]*result[JoinResult]{jx.v.MemberID: jx, y: jy})

	v := h.g.metadataValue()
	r := restoreClassic(&h.cfg, h.now, v)
	require.Equal(t, StateStable, r.State())
	require.Equal(t, gen, r.Generation())
	require.Equal(t, h.g.Leader(), r.Leader())
	require.Equal(t, "consumer", r.ProtocolType())
	_, members := r.describe()
	_, orig := h.g.describe()
	require.Equal(t, orig, members)
	// Restored members keep heartbeating; the static mapping is back.
	require.NoError(t, r.Heartbeat(h.now, HeartbeatRequest{Generation: gen, MemberID: jx.v.MemberID, InstanceID: "x"}))
	require.NoError(t, r.Heartbeat(h.now, HeartbeatRequest{Generation: gen, MemberID: y}))
	// An empty group restores as Empty with its generation.
	e := restoreClassic(&h.cfg, h.now, newClassic(&h.cfg, h.now).metadataValue())
	require.Equal(t, StateEmpty, e.State())
}

func TestClassicSelectProtocol(t *testing.T) {
	h := newClassicHarness(t)
	mk := func(names ...string) JoinRequest {
		r := joinReq("", "m")
		r.Protocols = nil
		for _, n := range names {
			r.Protocols = append(r.Protocols, Protocol{Name: n, Metadata: []byte(n)})
		}
		return r
	}
	first := h.join(mk("cooperative-sticky", "range"))
	j1 := h.join(func() JoinRequest { r := mk("cooperative-sticky", "range"); r.MemberID = first.v.MemberID; return r }())
	second := h.join(mk("range", "cooperative-sticky"))
	j2 := h.join(func() JoinRequest { r := mk("range", "cooperative-sticky"); r.MemberID = second.v.MemberID; return r }())
	third := h.join(mk("range"))
	j3 := h.join(func() JoinRequest { r := mk("range"); r.MemberID = third.v.MemberID; return r }())
	h.advance(10 * time.Second)
	for _, j := range []*result[JoinResult]{j1, j2, j3} {
		require.True(t, j.done)
		require.Equal(t, "range", j.v.Protocol, "the only protocol all support")
	}
	require.Equal(t, []byte("range"), j1.v.Members[0].Metadata)
}

// TestClassicLastLeaveEmptiesAtOnce: when the last member of a Stable group
// leaves, the group is Empty by the time Leave returns (Kafka completes the
// join phase of a memberless group immediately), so DeleteGroups or an
// offset reset right after the consumer closes succeeds.
func TestClassicLastLeaveEmptiesAtOnce(t *testing.T) {
	h := newClassicHarness(t)
	a, ja := h.newMember("ma")
	h.advance(10 * time.Second)
	gen := h.syncAll(map[string]*result[JoinResult]{a: ja})
	require.Equal(t, StateStable, h.g.State())

	require.NoError(t, h.g.Leave(h.now, LeaveMember{MemberID: a}))
	require.Equal(t, StateEmpty, h.g.State())
	require.Equal(t, 0, h.g.Len())
	require.Greater(t, h.g.Generation(), gen)
}
