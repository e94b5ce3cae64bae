package group

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"
)

// TopicInfo describes a topic for server-side assignment and for checking
// commits; main builds it from the metadata controller.
type TopicInfo struct {
	Name       string
	ID         TopicID
	Partitions int32
}

// topicSnapshot is an immutable view of the cluster's topics; version
// changes with every metadata change so groups re-resolve subscriptions
// only when something changed.
type topicSnapshot struct {
	version uint64
	byName  map[string]TopicInfo
	byID    map[TopicID]TopicInfo
	sorted  []TopicInfo
}

func newTopicSnapshot(version uint64, topics []TopicInfo) *topicSnapshot {
	s := &topicSnapshot{version: version, byName: make(map[string]TopicInfo, len(topics)),
		byID: make(map[TopicID]TopicInfo, len(topics)), sorted: slices.Clone(topics)}
	slices.SortFunc(s.sorted, func(a, b TopicInfo) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	for _, t := range topics {
		s.byName[t.Name] = t
		s.byID[t.ID] = t
	}
	return s
}

// TopicPartitions is a topic (by id) and some of its partitions.
type TopicPartitions struct {
	ID         TopicID
	Partitions []int32
}

// ConsumerHeartbeatRequest is a ConsumerGroupHeartbeat (KIP-848). Nil
// pointer and slice fields mean "unchanged since the last heartbeat".
type ConsumerHeartbeatRequest struct {
	Group                string
	Version              int16
	MemberID             string
	MemberEpoch          int32
	InstanceID           *string
	RackID               *string
	RebalanceTimeout     time.Duration // negative: unchanged
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	ServerAssignor       *string
	Owned                []TopicPartitions
	ClientID, ClientHost string
}

// ConsumerHeartbeatResult answers a ConsumerGroupHeartbeat. Assignment is
// meaningful only when HasAssignment (the protocol's null means
// "unchanged").
type ConsumerHeartbeatResult struct {
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	HasAssignment     bool
	Assignment        []TopicPartitions
	// Err is the heartbeat's error (set by the Coordinator; the other
	// fields are then unset).
	Err error
}

// Consumer-group member epochs with a special meaning.
const (
	leaveEpoch       = -1 // the member leaves
	staticLeaveEpoch = -2 // a static member leaves and will come back
)

type memberState int

const (
	memberStable     memberState = iota
	memberUnrevoked              // must give up partitions before going on
	memberUnreleased             // waits for partitions other members still hold
)

type consumerMember struct {
	id, instanceID, rackID string
	clientID, clientHost   string
	epoch, prevEpoch       int32
	state                  memberState
	rebalanceTimeout       time.Duration
	topics                 []string // subscribed names, sorted
	regex                  string
	re                     *regexp.Regexp
	assignor               string
	assigned               assignment // partitions the member may consume
	revoking               assignment // partitions it must give up
	// assignEpochs records the epoch at which each held partition was
	// given to the member, so a commit carrying an older epoch for a
	// partition it has held since is still accepted (KIP-1251).
	assignEpochs    map[TopicID]map[int32]int32
	sessionDeadline time.Time
	revokeDeadline  time.Time
	left            bool // static member gone with epoch -2, may come back
}

// Consumer is the state machine of a KIP-848 consumer group, following
// Kafka's GroupMetadataManager: every membership or subscription change
// bumps the group epoch and recomputes the target assignment; each member
// is then reconciled towards its target on its own heartbeats, revoking
// partitions before they are handed to the next owner.
type Consumer struct {
	cfg *Config

	epoch       int32 // group epoch
	targetEpoch int32
	target      map[string]assignment
	members     map[string]*consumerMember
	static      map[string]string // instance id -> member id
	owners      map[TopicID]map[int32]string
	// subscription metadata: the topics any member subscribes to, as of
	// topic snapshot subsVersion; a change bumps the group epoch.
	subsMeta    map[string]topicMeta
	subsVersion uint64
	stateSince  time.Time
}

func newConsumer(cfg *Config, now time.Time) *Consumer {
	return &Consumer{
		cfg: cfg, target: map[string]assignment{}, members: map[string]*consumerMember{},
		static: map[string]string{}, owners: map[TopicID]map[int32]string{},
		subsMeta: map[string]topicMeta{}, stateSince: now,
	}
}

// Epoch is the group epoch.
func (g *Consumer) Epoch() int32 { return g.epoch }

// active counts members that have not left (static members gone with
// epoch -2 still hold their place but are not active).
func (g *Consumer) active() int {
	n := 0
	for _, m := range g.members {
		if !m.left {
			n++
		}
	}
	return n
}

// Len is the number of members, including static members that left
// temporarily.
func (g *Consumer) Len() int { return len(g.members) }

// State is the group state as Kafka reports consumer groups.
func (g *Consumer) State() State {
	if len(g.members) == 0 {
		return StateEmpty
	}
	if g.targetEpoch != g.epoch {
		return StateAssigning
	}
	for _, m := range g.members {
		if !m.left && (m.epoch != g.targetEpoch || m.state != memberStable) {
			return StateReconciling
		}
	}
	return StateStable
}

func validAssignor(name string) bool { return name == AssignorUniform || name == AssignorRange }

// compileSubscription compiles a subscribed topic regex; Kafka matches it
// against the whole topic name (RE2 syntax).
func compileSubscription(re string) (*regexp.Regexp, error) {
	c, err := regexp.Compile("^(?:" + re + ")$")
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrInvalidRegex, re, err)
	}
	return c, nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
}

// validateHeartbeat applies Kafka's request checks before the group is
// touched.
func validateHeartbeat(req *ConsumerHeartbeatRequest) error {
	if req.InstanceID != nil && *req.InstanceID == "" {
		return invalid("InstanceId can't be empty.")
	}
	if req.RackID != nil && *req.RackID == "" {
		return invalid("RackId can't be empty.")
	}
	if req.ServerAssignor != nil && !validAssignor(*req.ServerAssignor) {
		return fmt.Errorf("%w: %q; use %q or %q", ErrUnsupportedAssignor, *req.ServerAssignor, AssignorUniform, AssignorRange)
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileSubscription(*req.SubscribedTopicRegex); err != nil {
			return err
		}
	}
	switch {
	case req.MemberEpoch < staticLeaveEpoch:
		return invalid("MemberEpoch is invalid.")
	case req.MemberEpoch == 0:
		if req.Version >= 1 && req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
		if req.RebalanceTimeout < 0 {
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		}
		if req.Owned == nil || len(req.Owned) > 0 {
			return invalid("TopicPartitions must be empty when (re-)joining.")
		}
		if req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil {
			return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
		}
	case req.MemberEpoch == staticLeaveEpoch:
		if req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
		if req.InstanceID == nil {
			return invalid("InstanceId can't be null.")
		}
	default:
		if req.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
	}
	return nil
}

// Heartbeat handles a ConsumerGroupHeartbeat: join (epoch 0), leave (-1,
// -2) or a regular heartbeat carrying the member's owned partitions.
func (g *Consumer) Heartbeat(now time.Time, req ConsumerHeartbeatRequest, topics *topicSnapshot) (ConsumerHeartbeatResult, error) {
	if err := validateHeartbeat(&req); err != nil {
		return ConsumerHeartbeatResult{}, err
	}
	if req.MemberEpoch == leaveEpoch || req.MemberEpoch == staticLeaveEpoch {
		return g.leave(now, req, topics)
	}
	var (
		m       *consumerMember
		changed bool
		err     error
	)
	if req.MemberEpoch == 0 {
		m, changed, err = g.join(now, req)
	} else {
		m, changed, err = g.existing(req)
	}
	if err != nil {
		return ConsumerHeartbeatResult{}, err
	}
	m.sessionDeadline = now.Add(g.cfg.ConsumerSessionTimeout)
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	if req.ClientID != "" || req.ClientHost != "" {
		m.clientID, m.clientHost = req.ClientID, req.ClientHost
	}
	if (changed || g.subsVersion != topics.version) && g.refreshSubscriptions(topics) {
		changed = true
	}
	if changed {
		g.bump(now, topics)
	}
	before := m.assigned.clone()
	g.reconcile(now, m, req.Owned, req.Owned == nil)
	full := req.MemberEpoch == 0 || req.RebalanceTimeout >= 0 &&
		(req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Owned != nil
	res := ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: m.epoch, HeartbeatInterval: g.cfg.ConsumerHeartbeatInterval}
	if full || !before.equal(m.assigned) {
		res.HasAssignment = true
		res.Assignment = toTopicPartitions(m.assigned)
	}
	return res, nil
}

func toTopicPartitions(a assignment) []TopicPartitions {
	out := []TopicPartitions{}
	ids := slices.Collect(maps.Keys(a))
	slices.SortFunc(ids, compareIDs)
	for _, t := range ids {
		if len(a[t]) > 0 {
			out = append(out, TopicPartitions{ID: t, Partitions: slices.Clone(a[t])})
		}
	}
	return out
}

// join handles epoch 0: a new member, a rejoin in place (the response to
// an earlier heartbeat was lost, or the member was fenced and keeps its
// id), or a static member replacing its departed previous incarnation.
func (g *Consumer) join(now time.Time, req ConsumerHeartbeatRequest) (*consumerMember, bool, error) {
	id := req.MemberID
	if id == "" { // v0: the coordinator names the member
		id = g.cfg.NewID()
	}
	var inherit *consumerMember
	if req.InstanceID != nil {
		if oldID, ok := g.static[*req.InstanceID]; ok && oldID != id {
			old := g.members[oldID]
			if old != nil && !old.left {
				return nil, false, fmt.Errorf("%w: %q is held by member %s", ErrUnreleasedInstanceID, *req.InstanceID, oldID)
			}
			inherit = old
		}
	}
	m := g.members[id]
	changed := false
	switch {
	case m != nil:
		// Rejoin in place: keep the assignment; the owned partitions are
		// empty, so any revocation in progress is complete.
		if m.left {
			m.left = false
			m.epoch = m.prevEpoch
		}
	case inherit != nil:
		// A static member's new incarnation takes over the old one's
		// partitions and epoch: no rebalance (KIP-345 for KIP-848).
		m = &consumerMember{
			id: id, instanceID: inherit.instanceID, epoch: inherit.prevEpoch, prevEpoch: inherit.prevEpoch,
			state: memberStable, topics: inherit.topics, regex: inherit.regex, re: inherit.re, assignor: inherit.assignor,
			assigned: inherit.assigned, revoking: assignment{}, assignEpochs: inherit.assignEpochs,
		}
		g.assigned(inherit.id).each(func(t TopicID, p int32) { g.owners[t][p] = id })
		g.target[id] = g.target[inherit.id]
		delete(g.target, inherit.id)
		delete(g.members, inherit.id)
		g.members[id] = m
	default:
		if g.active() >= g.cfg.MaxSize {
			return nil, false, fmt.Errorf("%w: %d members", ErrGroupMaxSizeReached, g.cfg.MaxSize)
		}
		m = &consumerMember{id: id, state: memberStable, assigned: assignment{}, revoking: assignment{},
			assignEpochs: map[TopicID]map[int32]int32{}, assignor: ""}
		g.members[id] = m
		changed = true
	}
	if req.InstanceID != nil {
		m.instanceID = *req.InstanceID
		g.static[m.instanceID] = id
	}
	if req.RebalanceTimeout > 0 {
		m.rebalanceTimeout = req.RebalanceTimeout
	}
	if g.updateSubscription(m, req) {
		changed = true
	}
	return m, changed, nil
}

// existing finds the member of a regular heartbeat and checks its epoch.
func (g *Consumer) existing(req ConsumerHeartbeatRequest) (*consumerMember, bool, error) {
	m := g.members[req.MemberID]
	if m == nil || m.left {
		if req.InstanceID != nil {
			if owner, ok := g.static[*req.InstanceID]; ok && owner != req.MemberID {
				return nil, false, ErrFencedInstanceID
			}
		}
		return nil, false, fmt.Errorf("%w: %s", ErrUnknownMemberID, req.MemberID)
	}
	switch {
	case req.MemberEpoch > m.epoch:
		return nil, false, fmt.Errorf("%w: member epoch %d is ahead of the coordinator's %d; rejoin", ErrFencedMemberEpoch, req.MemberEpoch, m.epoch)
	case req.MemberEpoch < m.epoch:
		// The response that moved the member to its current epoch may
		// have been lost: accept the previous epoch if the member owns no
		// more than it was given.
		if req.MemberEpoch != m.prevEpoch || req.Owned == nil || !isSubset(req.Owned, m.assigned) {
			return nil, false, fmt.Errorf("%w: member epoch %d is behind the coordinator's %d; rejoin", ErrFencedMemberEpoch, req.MemberEpoch, m.epoch)
		}
	}
	if req.RebalanceTimeout > 0 {
		m.rebalanceTimeout = req.RebalanceTimeout
	}
	return m, g.updateSubscription(m, req), nil
}

func isSubset(owned []TopicPartitions, a assignment) bool {
	for _, t := range owned {
		for _, p := range t.Partitions {
			if !a.has(t.ID, p) {
				return false
			}
		}
	}
	return true
}

// updateSubscription applies the non-null subscription fields and reports
// whether the subscription changed.
func (g *Consumer) updateSubscription(m *consumerMember, req ConsumerHeartbeatRequest) bool {
	changed := false
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.topics) {
			m.topics = names
			changed = true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex = *req.SubscribedTopicRegex
		m.re = nil
		if m.regex != "" {
			m.re, _ = compileSubscription(m.regex) // validated in validateHeartbeat
		}
		changed = true
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor = *req.ServerAssignor
		changed = true
	}
	return changed
}

// leave handles epochs -1 (leave) and -2 (a static member leaves and will
// come back within the session timeout, keeping its partitions).
func (g *Consumer) leave(now time.Time, req ConsumerHeartbeatRequest, topics *topicSnapshot) (ConsumerHeartbeatResult, error) {
	m := g.members[req.MemberID]
	if m == nil {
		return ConsumerHeartbeatResult{}, fmt.Errorf("%w: %s", ErrUnknownMemberID, req.MemberID)
	}
	res := ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: req.MemberEpoch, HeartbeatInterval: g.cfg.ConsumerHeartbeatInterval}
	if req.MemberEpoch == staticLeaveEpoch && m.instanceID != "" {
		if !m.left {
			g.release(m.id, m.revoking)
			m.revoking = assignment{}
			m.prevEpoch = m.epoch
			m.epoch = staticLeaveEpoch
			m.state = memberStable
			m.revokeDeadline = time.Time{}
			m.left = true
			m.sessionDeadline = now.Add(g.cfg.ConsumerSessionTimeout)
		}
		return res, nil
	}
	g.remove(now, m, topics)
	return res, nil
}

// remove takes a member out of the group: its partitions are released and
// the group epoch is bumped so the others take them over.
func (g *Consumer) remove(now time.Time, m *consumerMember, topics *topicSnapshot) {
	g.release(m.id, m.assigned)
	g.release(m.id, m.revoking)
	delete(g.members, m.id)
	delete(g.target, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	g.refreshSubscriptions(topics)
	g.bump(now, topics)
}

func (g *Consumer) release(id string, a assignment) {
	for t, ps := range a {
		for _, p := range ps {
			if g.owners[t][p] == id {
				delete(g.owners[t], p)
			}
		}
		if len(g.owners[t]) == 0 {
			delete(g.owners, t)
		}
	}
}

func (g *Consumer) claim(id string, a assignment) {
	for t, ps := range a {
		if g.owners[t] == nil {
			g.owners[t] = map[int32]string{}
		}
		for _, p := range ps {
			g.owners[t][p] = id
		}
	}
}

// assigned returns what member id holds (assigned or being revoked).
func (g *Consumer) assigned(id string) assignment {
	m := g.members[id]
	out := m.assigned.clone()
	m.revoking.each(func(t TopicID, p int32) { out.add(t, p) })
	return out
}

// resolve returns the existing topics a member subscribes to: its names
// plus, for a regex, every topic it matches in full. Internal topics are not
// excluded: Kafka's broker-side resolution (GroupMetadataManager
// .refreshRegularExpressions) matches every topic in the image, so a
// pattern that names __consumer_offsets is assigned it. Hiding internal
// topics from a broad pattern is the client's choice (exclude.internal.topics
// applies to client-side matching only).
func (m *consumerMember) resolve(topics *topicSnapshot) []string {
	var out []string
	for _, n := range m.topics {
		if _, ok := topics.byName[n]; ok {
			out = append(out, n)
		}
	}
	if m.re != nil {
		for _, t := range topics.sorted {
			if m.re.MatchString(t.Name) {
				out = append(out, t.Name)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// refreshSubscriptions recomputes the metadata of every subscribed topic
// when the topics changed, and reports whether it differs (a topic created,
// deleted, recreated or grown).
func (g *Consumer) refreshSubscriptions(topics *topicSnapshot) bool {
	meta := map[string]topicMeta{}
	for _, m := range g.members {
		for _, n := range m.resolve(topics) {
			t := topics.byName[n]
			meta[n] = topicMeta{id: t.ID, partitions: t.Partitions}
		}
	}
	g.subsVersion = topics.version
	if maps.Equal(meta, g.subsMeta) {
		return false
	}
	g.subsMeta = meta
	return true
}

// subscribed reports whether the group consumes topic.
func (g *Consumer) subscribed(topic string) bool {
	_, ok := g.subsMeta[topic]
	return ok
}

// bump advances the group epoch and computes the new target assignment.
func (g *Consumer) bump(now time.Time, topics *topicSnapshot) {
	g.epoch++
	g.stateSince = now
	in := assignInput{subs: map[string][]string{}, topics: g.subsMeta, prev: g.target}
	votes := map[string]int{}
	for id, m := range g.members {
		in.members = append(in.members, id)
		for _, n := range m.resolve(topics) {
			if _, ok := g.subsMeta[n]; ok {
				in.subs[id] = append(in.subs[id], n)
			}
		}
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	slices.Sort(in.members)
	assignor := AssignorUniform
	if votes[AssignorRange] > votes[AssignorUniform] {
		assignor = AssignorRange
	}
	if assignor == AssignorRange {
		g.target = assignRange(in)
	} else {
		g.target = assignUniform(in)
	}
	g.targetEpoch = g.epoch
}

// reconcile moves a member towards its target assignment (Kafka's
// CurrentAssignmentBuilder). owned is what the member reports holding; nil
// (ownedUnknown) means it did not say, which is taken as still owning
// everything it was given.
func (g *Consumer) reconcile(now time.Time, m *consumerMember, owned []TopicPartitions, ownedUnknown bool) {
	if m.left {
		return
	}
	ownsAny := func(a assignment) bool {
		if ownedUnknown {
			return a.count() > 0
		}
		for _, t := range owned {
			for _, p := range t.Partitions {
				if a.has(t.ID, p) {
					return true
				}
			}
		}
		return false
	}
	switch m.state {
	case memberStable:
		if m.epoch == g.targetEpoch {
			return
		}
		g.computeNext(now, m, m.epoch, ownsAny)
	case memberUnrevoked:
		if ownsAny(m.revoking) {
			return
		}
		g.computeNext(now, m, min(m.epoch+1, g.targetEpoch), ownsAny)
	case memberUnreleased:
		g.computeNext(now, m, m.epoch, ownsAny)
	}
}

func (g *Consumer) computeNext(now time.Time, m *consumerMember, epoch int32, ownsAny func(assignment) bool) {
	target := g.target[m.id]
	keep, revoke, add := assignment{}, assignment{}, assignment{}
	unreleased := false
	topics := map[TopicID]bool{}
	for t := range target {
		topics[t] = true
	}
	for t := range m.assigned {
		topics[t] = true
	}
	for t := range topics {
		for _, p := range m.assigned[t] {
			if target.has(t, p) {
				keep.add(t, p)
			} else {
				revoke.add(t, p)
			}
		}
		for _, p := range target[t] {
			if keep.has(t, p) {
				continue
			}
			if owner, ok := g.owners[t][p]; ok && owner != m.id {
				unreleased = true // still held by another member
				continue
			}
			add.add(t, p)
		}
	}
	oldHeld := g.assigned(m.id)
	wasUnrevoked := m.state == memberUnrevoked
	setEpoch := func(e int32) {
		if e != m.epoch {
			m.prevEpoch = m.epoch
			m.epoch = e
		}
	}
	switch {
	case revoke.count() > 0 && ownsAny(revoke):
		m.state = memberUnrevoked
		setEpoch(epoch)
		m.assigned, m.revoking = keep, revoke
	default:
		add.each(func(t TopicID, p int32) { keep.add(t, p) })
		m.state = memberStable
		if unreleased {
			m.state = memberUnreleased
		}
		setEpoch(g.targetEpoch)
		m.assigned, m.revoking = keep, assignment{}
	}
	g.release(m.id, oldHeld)
	g.claim(m.id, g.assigned(m.id))
	// Record when each newly held partition was given.
	epochs := map[TopicID]map[int32]int32{}
	m.assigned.each(func(t TopicID, p int32) {
		if epochs[t] == nil {
			epochs[t] = map[int32]int32{}
		}
		if e, ok := m.assignEpochs[t][p]; ok {
			epochs[t][p] = e
		} else {
			epochs[t][p] = m.epoch
		}
	})
	m.revoking.each(func(t TopicID, p int32) {
		if e, ok := m.assignEpochs[t][p]; ok {
			if epochs[t] == nil {
				epochs[t] = map[int32]int32{}
			}
			epochs[t][p] = e
		}
	})
	m.assignEpochs = epochs
	switch {
	case m.state != memberUnrevoked:
		m.revokeDeadline = time.Time{}
	case !wasUnrevoked:
		rt := m.rebalanceTimeout
		if rt <= 0 {
			rt = g.cfg.ConsumerSessionTimeout
		}
		m.revokeDeadline = now.Add(rt)
	}
}

// Tick removes members whose session expired and members that did not
// revoke partitions within their rebalance timeout.
func (g *Consumer) Tick(now time.Time, topics *topicSnapshot) {
	ids := slices.Sorted(maps.Keys(g.members))
	for _, id := range ids {
		m := g.members[id]
		if m == nil {
			continue
		}
		if !now.Before(m.sessionDeadline) || !m.revokeDeadline.IsZero() && !now.Before(m.revokeDeadline) {
			g.remove(now, m, topics)
		}
	}
}

// NextDeadline is the earliest time Tick has work to do (zero if none).
func (g *Consumer) NextDeadline() time.Time {
	var d time.Time
	for _, m := range g.members {
		for _, t := range []time.Time{m.sessionDeadline, m.revokeDeadline} {
			if !t.IsZero() && (d.IsZero() || t.Before(d)) {
				d = t
			}
		}
	}
	return d
}

// validateCommit checks an offset commit against a consumer group. An
// admin commit (negative epoch) is allowed while no member is active. A
// member's commit must use OffsetCommit v9+; an epoch older than the
// member's is still accepted for partitions it has held since that epoch.
func (g *Consumer) validateCommit(memberID string, epoch int32, version int16) (func(t TopicID, p int32) error, error) {
	if epoch < 0 && g.active() == 0 {
		return nil, nil
	}
	m := g.members[memberID]
	if m == nil || m.left {
		return nil, fmt.Errorf("%w: %s", ErrUnknownMemberID, memberID)
	}
	if version < 9 {
		return nil, fmt.Errorf("%w: consumer group members must commit with OffsetCommit v9+", ErrUnsupportedVersion)
	}
	switch {
	case epoch > m.epoch:
		return nil, fmt.Errorf("%w: epoch %d, member is at %d", ErrStaleMemberEpoch, epoch, m.epoch)
	case epoch == m.epoch:
		return nil, nil
	}
	return func(t TopicID, p int32) error {
		if e, ok := m.assignEpochs[t][p]; ok && epoch >= e {
			return nil
		}
		return fmt.Errorf("%w: epoch %d, member is at %d", ErrStaleMemberEpoch, epoch, m.epoch)
	}, nil
}

// validateFetch checks an OffsetFetch v9+ that names a member.
func (g *Consumer) validateFetch(memberID *string, epoch int32) error {
	if memberID == nil && epoch < 0 {
		return nil
	}
	if memberID == nil {
		return fmt.Errorf("%w: member epoch without member id", ErrUnknownMemberID)
	}
	m := g.members[*memberID]
	if m == nil || m.left {
		return fmt.Errorf("%w: %s", ErrUnknownMemberID, *memberID)
	}
	if epoch != m.epoch {
		return fmt.Errorf("%w: epoch %d, member is at %d", ErrStaleMemberEpoch, epoch, m.epoch)
	}
	return nil
}

// ConsumerMemberDescription is a member as ConsumerGroupDescribe shows it.
type ConsumerMemberDescription struct {
	MemberID, InstanceID, RackID string
	ClientID, ClientHost         string
	MemberEpoch                  int32
	SubscribedTopics             []string
	SubscribedTopicRegex         string
	Assignment                   []TopicPartitions
	TargetAssignment             []TopicPartitions
}

func (g *Consumer) describeMembers() []ConsumerMemberDescription {
	ids := slices.Sorted(maps.Keys(g.members))
	out := make([]ConsumerMemberDescription, 0, len(ids))
	for _, id := range ids {
		m := g.members[id]
		out = append(out, ConsumerMemberDescription{
			MemberID: m.id, InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
			MemberEpoch: m.epoch, SubscribedTopics: slices.Clone(m.topics), SubscribedTopicRegex: m.regex,
			Assignment: toTopicPartitions(m.assigned), TargetAssignment: toTopicPartitions(g.target[id]),
		})
	}
	return out
}

func (g *Consumer) assignorName() string {
	votes := map[string]int{}
	for _, m := range g.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	if votes[AssignorRange] > votes[AssignorUniform] {
		return AssignorRange
	}
	return AssignorUniform
}
