package group

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a group state as Kafka names it in ListGroups and
// DescribeGroups.
type State string

// Classic group states, and the extra states of consumer (KIP-848) groups.
const (
	StateEmpty               State = "Empty"
	StatePreparingRebalance  State = "PreparingRebalance"
	StateCompletingRebalance State = "CompletingRebalance"
	StateStable              State = "Stable"
	StateDead                State = "Dead"
	StateAssigning           State = "Assigning"
	StateReconciling         State = "Reconciling"
)

// ConsumerProtocolType is the protocol type of Kafka consumers; groups of
// this type carry ConsumerMemberMetadata the broker can read.
const ConsumerProtocolType = "consumer"

// Protocol is one of a member's supported assignment protocols with its
// opaque metadata (for consumers, a serialized ConsumerMemberMetadata).
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is a JoinGroup request in the coordinator's terms.
type JoinRequest struct {
	Group string
	// Version is the JoinGroup version: v4+ gets MEMBER_ID_REQUIRED, v9+
	// may be told to skip the assignment (KIP-814).
	Version              int16
	MemberID, InstanceID string
	ClientID, ClientHost string
	SessionTimeout       time.Duration
	RebalanceTimeout     time.Duration
	ProtocolType         string
	Protocols            []Protocol
}

// JoinMember is one member as the leader sees it in its JoinGroup response.
type JoinMember struct {
	MemberID, InstanceID string
	Metadata             []byte
}

// JoinResult answers a JoinGroup. On error, MemberID is still set when the
// client must use it (MEMBER_ID_REQUIRED).
type JoinResult struct {
	Err            error
	MemberID       string
	Generation     int32
	ProtocolType   string
	Protocol       string
	Leader         string
	SkipAssignment bool
	Members        []JoinMember // only for the leader
}

// SyncRequest is a SyncGroup request; Assignments is non-empty only from
// the leader.
type SyncRequest struct {
	Group                string
	Generation           int32
	MemberID, InstanceID string
	ProtocolType         *string // v5+: checked against the group's
	Protocol             *string
	Assignments          map[string][]byte
}

// SyncResult answers a SyncGroup.
type SyncResult struct {
	Err          error
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// HeartbeatRequest is a classic Heartbeat.
type HeartbeatRequest struct {
	Group                string
	Generation           int32
	MemberID, InstanceID string
}

// LeaveMember names one member of a (batched, v3+) LeaveGroup.
type LeaveMember struct {
	MemberID, InstanceID string
}

// MemberDescription is a member as DescribeGroups shows it.
type MemberDescription struct {
	MemberID, InstanceID string
	ClientID, ClientHost string
	Metadata, Assignment []byte
}

type classicMember struct {
	id, instanceID       string
	clientID, clientHost string
	sessionTimeout       time.Duration
	rebalanceTimeout     time.Duration
	protocols            []Protocol
	assignment           []byte
	sessionDeadline      time.Time
	joinCB               func(JoinResult) // set while a JoinGroup is parked
	syncCB               func(SyncResult) // set while a SyncGroup is parked
}

func (m *classicMember) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether protocols equal the member's, in order, as
// Kafka's MemberMetadata.matches does: a rejoin with identical metadata
// does not need a rebalance.
func (m *classicMember) matches(protocols []Protocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b Protocol) bool {
		return a.Name == b.Name && string(a.Metadata) == string(b.Metadata)
	})
}

// Classic is the state machine of a group using the classic protocol,
// following Kafka's GroupCoordinator: Empty -> PreparingRebalance (members
// join) -> CompletingRebalance (members sync, the leader assigns) -> Stable.
type Classic struct {
	cfg *Config

	state        State
	generation   int32
	protocolType string
	protocol     string // selected protocol of the current generation
	leader       string
	members      map[string]*classicMember
	order        []string             // member ids in join order
	static       map[string]string    // group.instance.id -> member id
	pending      map[string]time.Time // ids handed out with MEMBER_ID_REQUIRED -> expiry
	pendingSync  map[string]bool      // members that must still SyncGroup this generation
	stateSince   time.Time

	// PreparingRebalance: when the join phase ends. The first rebalance of
	// an empty group waits InitialRebalanceDelay, extended while new
	// members keep arriving, up to the rebalance timeout.
	joinDeadline   time.Time
	initialJoin    bool
	newMemberAdded bool
	joinRemaining  time.Duration
	// CompletingRebalance/Stable: members in pendingSync are removed at
	// syncDeadline.
	syncDeadline time.Time

	// dirty is set when the group's metadata (generation, members,
	// assignment) changed in a way that must be persisted.
	dirty bool
}

func newClassic(cfg *Config, now time.Time) *Classic {
	return &Classic{
		cfg: cfg, state: StateEmpty, stateSince: now,
		members: map[string]*classicMember{}, static: map[string]string{},
		pending: map[string]time.Time{}, pendingSync: map[string]bool{},
	}
}

// State reports the group state.
func (g *Classic) State() State { return g.state }

// Generation is the current generation id.
func (g *Classic) Generation() int32 { return g.generation }

// ProtocolType is the group's protocol type ("" for a group that only
// stores offsets).
func (g *Classic) ProtocolType() string { return g.protocolType }

// Leader is the leader's member id.
func (g *Classic) Leader() string { return g.leader }

// Len is the number of members.
func (g *Classic) Len() int { return len(g.members) }

// HasMember reports whether id is a member.
func (g *Classic) HasMember(id string) bool { _, ok := g.members[id]; return ok }

// Join handles a JoinGroup. cb is called exactly once: immediately for
// errors and for joins that need no rebalance, otherwise when the join
// phase completes.
func (g *Classic) Join(now time.Time, req JoinRequest, cb func(JoinResult)) {
	fail := func(err error) { cb(JoinResult{Err: err, MemberID: req.MemberID, Generation: -1}) }
	if req.SessionTimeout < g.cfg.MinSessionTimeout || req.SessionTimeout > g.cfg.MaxSessionTimeout {
		fail(ErrInvalidSessionTimeout)
		return
	}
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout // JoinGroup v0 has no rebalance timeout
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		fail(ErrInconsistentGroupProtocol)
		return
	}
	if req.MemberID == "" {
		g.joinUnknown(now, req, cb)
		return
	}
	if _, ok := g.pending[req.MemberID]; ok {
		delete(g.pending, req.MemberID)
		if req.InstanceID != "" {
			// Static members never go through MEMBER_ID_REQUIRED; one that
			// presents a pending id is handled as a fresh static join, which
			// replaces (and fences) a current holder of the instance id
			// instead of leaving two members sharing it.
			req.MemberID = ""
			g.joinUnknown(now, req, cb)
			return
		}
		g.addMember(now, req.MemberID, req, cb)
		return
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		fail(err)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case StatePreparingRebalance:
		g.updateMember(now, m, req, cb)
		g.tryCompleteJoin(now)
	case StateCompletingRebalance:
		if m.matches(req.Protocols) {
			// A retry of a join whose response was lost: answer with the
			// current generation.
			cb(g.joinResult(m, m.id == g.leader))
			return
		}
		g.updateMember(now, m, req, cb)
		g.prepareRebalance(now)
	case StateStable:
		if m.id == g.leader || !m.matches(req.Protocols) {
			// The leader rejoins to force a rebalance (e.g. metadata
			// changed); a follower with new metadata needs one too.
			g.updateMember(now, m, req, cb)
			g.prepareRebalance(now)
			return
		}
		cb(g.joinResult(m, false))
	default:
		fail(ErrUnknownMemberID)
	}
}

func (g *Classic) joinUnknown(now time.Time, req JoinRequest, cb func(JoinResult)) {
	if req.InstanceID != "" {
		if old, ok := g.static[req.InstanceID]; ok {
			g.replaceStatic(now, old, req, cb)
			return
		}
	}
	if len(g.members)+len(g.pending) >= g.cfg.MaxSize {
		cb(JoinResult{Err: ErrGroupMaxSizeReached, Generation: -1})
		return
	}
	if req.InstanceID != "" {
		g.addMember(now, req.InstanceID+"-"+g.cfg.NewID(), req, cb)
		return
	}
	id := req.ClientID + "-" + g.cfg.NewID()
	if req.Version >= 4 {
		// KIP-394: the member must come back with this id, so a client
		// that never completes a join costs only a pending entry.
		g.pending[id] = now.Add(req.SessionTimeout)
		cb(JoinResult{Err: ErrMemberIDRequired, MemberID: id, Generation: -1})
		return
	}
	g.addMember(now, id, req, cb)
}

func (g *Classic) addMember(now time.Time, id string, req JoinRequest, cb func(JoinResult)) {
	m := &classicMember{
		id: id, instanceID: req.InstanceID, clientID: req.ClientID, clientHost: req.ClientHost,
		sessionTimeout: req.SessionTimeout, rebalanceTimeout: req.RebalanceTimeout,
		protocols: req.Protocols, sessionDeadline: now.Add(req.SessionTimeout), joinCB: cb,
	}
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	g.members[id] = m
	g.order = append(g.order, id)
	if g.leader == "" {
		g.leader = id
	}
	if m.instanceID != "" {
		g.static[m.instanceID] = id
	}
	if g.state == StatePreparingRebalance && g.initialJoin {
		g.newMemberAdded = true
	}
	switch g.state {
	case StateEmpty, StateStable, StateCompletingRebalance:
		g.prepareRebalance(now)
	}
	g.tryCompleteJoin(now)
}

func (g *Classic) updateMember(now time.Time, m *classicMember, req JoinRequest, cb func(JoinResult)) {
	if m.joinCB != nil {
		// A duplicate join (the first one's connection is likely gone):
		// only the latest request waits for the rebalance.
		m.joinCB(JoinResult{Err: ErrRebalanceInProgress, MemberID: m.id, Generation: -1})
	}
	m.protocols = req.Protocols
	m.sessionTimeout, m.rebalanceTimeout = req.SessionTimeout, req.RebalanceTimeout
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	m.joinCB = cb
	m.sessionDeadline = now.Add(m.sessionTimeout)
}

// replaceStatic gives a restarted static member (known instance id,
// unknown member id) the old member's place: a new member id, the same
// assignment, and no rebalance when the group is stable and the selected
// protocol does not change (KIP-345).
func (g *Classic) replaceStatic(now time.Time, oldID string, req JoinRequest, cb func(JoinResult)) {
	old := g.members[oldID]
	if old.joinCB != nil {
		old.joinCB(JoinResult{Err: ErrFencedInstanceID, MemberID: oldID, Generation: -1})
		old.joinCB = nil
	}
	if old.syncCB != nil {
		old.syncCB(SyncResult{Err: ErrFencedInstanceID})
		old.syncCB = nil
	}
	prevLeader := g.leader
	newID := req.InstanceID + "-" + g.cfg.NewID()
	m := *old
	m.id = newID
	delete(g.members, oldID)
	g.members[newID] = &m
	g.order[slices.Index(g.order, oldID)] = newID
	g.static[req.InstanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	g.updateMember(now, &m, req, cb)

	switch g.state {
	case StateStable:
		if g.selectProtocol() != g.protocol {
			g.prepareRebalance(now)
			return
		}
		g.dirty = true // the new member id must survive a restart
		res := g.joinResult(&m, false)
		res.Leader = prevLeader
		if m.id == g.leader && req.Version >= 9 {
			// KIP-814: tell the leader it leads (so it keeps watching
			// metadata) but must not reassign a stable group.
			res = g.joinResult(&m, true)
			res.SkipAssignment = true
		}
		m.joinCB = nil
		cb(res)
	case StateCompletingRebalance:
		// The leader may already be assigning with the old member id:
		// start over so the new id gets an assignment.
		g.prepareRebalance(now)
	case StatePreparingRebalance:
		g.tryCompleteJoin(now)
	}
}

// prepareRebalance starts a join phase.
func (g *Classic) prepareRebalance(now time.Time) {
	if g.state == StateCompletingRebalance {
		for _, id := range g.order {
			m := g.members[id]
			m.assignment = nil
			if m.syncCB != nil {
				// The parked sync was the member's heartbeat so far.
				cb := m.syncCB
				m.syncCB = nil
				m.sessionDeadline = now.Add(m.sessionTimeout)
				cb(SyncResult{Err: ErrRebalanceInProgress})
			}
		}
	}
	clear(g.pendingSync)
	g.syncDeadline = time.Time{}
	rebalance := g.maxRebalanceTimeout()
	if g.state == StateEmpty {
		g.initialJoin = true
		g.newMemberAdded = false
		delay := min(g.cfg.InitialRebalanceDelay, rebalance)
		g.joinRemaining = rebalance - delay
		g.joinDeadline = now.Add(delay)
	} else {
		g.initialJoin = false
		g.joinDeadline = now.Add(rebalance)
	}
	g.state = StatePreparingRebalance
	g.stateSince = now
}

func (g *Classic) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// allJoined: every member has a parked JoinGroup and no MEMBER_ID_REQUIRED
// id is outstanding.
func (g *Classic) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinCB == nil {
			return false
		}
	}
	return true
}

func (g *Classic) tryCompleteJoin(now time.Time) {
	if g.state == StatePreparingRebalance && !g.initialJoin && g.allJoined() {
		g.completeJoin(now)
	}
}

// completeJoin ends the join phase: members that did not rejoin are
// dropped (static ones keep their place until their session expires), the
// generation advances, and every waiting member gets its JoinGroup answer.
func (g *Classic) completeJoin(now time.Time) {
	for _, id := range slices.Clone(g.order) {
		m := g.members[id]
		if m.joinCB == nil && m.instanceID == "" {
			g.dropMember(m)
		}
	}
	if len(g.members) > 0 {
		if l := g.members[g.leader]; l == nil || l.joinCB == nil {
			g.leader = ""
			for _, id := range g.order {
				if g.members[id].joinCB != nil {
					g.leader = id
					break
				}
			}
			if g.leader == "" {
				// Only static members that have not rejoined remain: wait
				// for them to come back or for their sessions to expire.
				g.leader = g.order[0]
				g.joinDeadline = now.Add(g.maxRebalanceTimeout())
				return
			}
		}
	}
	g.generation++
	g.stateSince = now
	if len(g.members) == 0 {
		g.state = StateEmpty
		g.protocol = ""
		g.leader = ""
		g.dirty = true
		return
	}
	// Not persisted yet: like Kafka, the new generation is written when the
	// leader's SyncGroup brings its assignments. A restart before that must
	// restore the previous, consistent generation, so members of this one
	// get ILLEGAL_GENERATION and rejoin instead of running on a Stable group
	// with stale or empty assignments.
	g.protocol = g.selectProtocol()
	g.state = StateCompletingRebalance
	g.syncDeadline = now.Add(g.maxRebalanceTimeout())
	for _, id := range g.order {
		g.pendingSync[id] = true
	}
	for _, id := range g.order {
		m := g.members[id]
		if m.joinCB == nil {
			continue
		}
		cb := m.joinCB
		m.joinCB = nil
		m.sessionDeadline = now.Add(m.sessionTimeout)
		cb(g.joinResult(m, id == g.leader))
	}
}

func (g *Classic) joinResult(m *classicMember, withMembers bool) JoinResult {
	res := JoinResult{
		MemberID: m.id, Generation: g.generation, ProtocolType: g.protocolType,
		Protocol: g.protocol, Leader: g.leader,
	}
	if withMembers {
		res.Members = make([]JoinMember, 0, len(g.order))
		for _, id := range g.order {
			o := g.members[id]
			res.Members = append(res.Members, JoinMember{MemberID: o.id, InstanceID: o.instanceID, Metadata: o.metadata(g.protocol)})
		}
	}
	return res
}

// supportsProtocols is Kafka's rule: an empty group accepts any non-empty
// protocol list; otherwise the type must match and one of the protocols
// must be supported by every current member.
func (g *Classic) supportsProtocols(protocolType string, protocols []Protocol) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supportedByAll(p.Name) {
			return true
		}
	}
	return false
}

func (g *Classic) supportedByAll(name string) bool {
	for _, m := range g.members {
		if !slices.ContainsFunc(m.protocols, func(p Protocol) bool { return p.Name == name }) {
			return false
		}
	}
	return true
}

// selectProtocol picks the protocol every member supports that most
// members prefer; ties go to the earliest member's preference order, which
// keeps the choice deterministic.
func (g *Classic) selectProtocol() string {
	if len(g.order) == 0 {
		return ""
	}
	var candidates []string
	for _, p := range g.members[g.order[0]].protocols {
		if g.supportedByAll(p.Name) && !slices.Contains(candidates, p.Name) {
			candidates = append(candidates, p.Name)
		}
	}
	votes := map[string]int{}
	for _, id := range g.order {
		for _, p := range g.members[id].protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

// validateMember is Kafka's check of a member's identity: a static member
// must present the member id currently bound to its instance id.
func (g *Classic) validateMember(memberID, instanceID string) error {
	if instanceID != "" {
		id, ok := g.static[instanceID]
		switch {
		case !ok:
			return ErrUnknownMemberID
		case id != memberID:
			return ErrFencedInstanceID
		}
		return nil
	}
	if _, ok := g.members[memberID]; !ok {
		return ErrUnknownMemberID
	}
	return nil
}

// Sync handles a SyncGroup. cb is called exactly once: at once, or (for
// followers in CompletingRebalance) when the leader's assignment arrives.
func (g *Classic) Sync(now time.Time, req SyncRequest, cb func(SyncResult)) {
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		cb(SyncResult{Err: err})
		return
	}
	if req.Generation != g.generation {
		cb(SyncResult{Err: ErrIllegalGeneration})
		return
	}
	if req.ProtocolType != nil && *req.ProtocolType != g.protocolType || req.Protocol != nil && *req.Protocol != g.protocol {
		cb(SyncResult{Err: ErrInconsistentGroupProtocol})
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case StatePreparingRebalance:
		cb(SyncResult{Err: ErrRebalanceInProgress})
	case StateCompletingRebalance:
		if m.syncCB != nil {
			m.syncCB(SyncResult{Err: ErrRebalanceInProgress})
		}
		m.syncCB = cb
		m.sessionDeadline = now.Add(m.sessionTimeout)
		delete(g.pendingSync, m.id)
		if m.id != g.leader {
			return
		}
		for _, id := range g.order {
			a := req.Assignments[id]
			if a == nil {
				a = []byte{}
			}
			g.members[id].assignment = a
		}
		if size := g.metadataSize(); size > g.cfg.MaxRecordBytes {
			// Kafka fails the store and starts over; the leader must
			// produce a smaller assignment.
			for _, id := range g.order {
				o := g.members[id]
				if o.syncCB != nil {
					cb := o.syncCB
					o.syncCB = nil
					cb(SyncResult{Err: ErrGroupMetadataTooLarge})
				}
			}
			g.prepareRebalance(now)
			return
		}
		g.state = StateStable
		g.stateSince = now
		g.dirty = true
		for _, id := range g.order {
			o := g.members[id]
			if o.syncCB != nil {
				cb := o.syncCB
				o.syncCB = nil
				o.sessionDeadline = now.Add(o.sessionTimeout)
				cb(SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: o.assignment})
			}
		}
	case StateStable:
		m.sessionDeadline = now.Add(m.sessionTimeout)
		delete(g.pendingSync, m.id)
		cb(SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment})
	default:
		cb(SyncResult{Err: ErrUnknownMemberID})
	}
}

// Heartbeat handles a classic Heartbeat; members learn of a rebalance from
// its REBALANCE_IN_PROGRESS answer.
func (g *Classic) Heartbeat(now time.Time, req HeartbeatRequest) error {
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return ErrIllegalGeneration
	}
	m := g.members[req.MemberID]
	switch g.state {
	case StatePreparingRebalance:
		m.sessionDeadline = now.Add(m.sessionTimeout)
		return ErrRebalanceInProgress
	case StateCompletingRebalance, StateStable:
		m.sessionDeadline = now.Add(m.sessionTimeout)
		return nil
	}
	return ErrUnknownMemberID
}

// Leave removes one member (LeaveGroup). A static member may be named by
// instance id alone; with both ids they must agree.
func (g *Classic) Leave(now time.Time, lm LeaveMember) error {
	if lm.InstanceID != "" {
		id, ok := g.static[lm.InstanceID]
		switch {
		case !ok:
			return ErrUnknownMemberID
		case lm.MemberID != "" && lm.MemberID != id:
			return ErrFencedInstanceID
		}
		g.removeMember(now, g.members[id])
		return nil
	}
	if _, ok := g.pending[lm.MemberID]; ok {
		delete(g.pending, lm.MemberID)
		g.tryCompleteJoin(now)
		return nil
	}
	m, ok := g.members[lm.MemberID]
	if !ok {
		return ErrUnknownMemberID
	}
	g.removeMember(now, m)
	return nil
}

// dropMember removes a member without starting a rebalance, answering its
// parked requests with UNKNOWN_MEMBER_ID.
func (g *Classic) dropMember(m *classicMember) {
	if m.joinCB != nil {
		cb := m.joinCB
		m.joinCB = nil
		cb(JoinResult{Err: ErrUnknownMemberID, MemberID: m.id, Generation: -1})
	}
	if m.syncCB != nil {
		cb := m.syncCB
		m.syncCB = nil
		cb(SyncResult{Err: ErrUnknownMemberID})
	}
	delete(g.members, m.id)
	g.order = slices.DeleteFunc(g.order, func(id string) bool { return id == m.id })
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	delete(g.pendingSync, m.id)
	if g.leader == m.id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
}

func (g *Classic) removeMember(now time.Time, m *classicMember) {
	g.dropMember(m)
	switch g.state {
	case StateStable, StateCompletingRebalance:
		g.prepareRebalance(now)
		// With nobody left the join phase is over at once and the group is
		// Empty before the LeaveGroup is answered, as in Kafka, so an admin
		// can delete it or reset its offsets right after its consumers close.
		g.tryCompleteJoin(now)
	case StatePreparingRebalance:
		g.tryCompleteJoin(now)
	}
}

// Tick applies every timeout due at now: expired pending member ids,
// expired sessions, the end of the join phase and members that never
// synced.
func (g *Classic) Tick(now time.Time) {
	for id, dl := range g.pending {
		if !now.Before(dl) {
			delete(g.pending, id)
			g.tryCompleteJoin(now)
		}
	}
	for _, id := range slices.Clone(g.order) {
		m := g.members[id]
		// A member with a parked join or sync is alive by definition
		// (Kafka's shouldKeepAlive); its request is the heartbeat.
		if m == nil || m.joinCB != nil || m.syncCB != nil || now.Before(m.sessionDeadline) {
			continue
		}
		g.removeMember(now, m)
	}
	if g.state == StatePreparingRebalance && !now.Before(g.joinDeadline) {
		if g.initialJoin && g.newMemberAdded && g.joinRemaining > 0 {
			delay := min(g.cfg.InitialRebalanceDelay, g.joinRemaining)
			g.joinRemaining -= delay
			g.newMemberAdded = false
			g.joinDeadline = now.Add(delay)
		} else {
			g.completeJoin(now)
		}
	}
	if (g.state == StateCompletingRebalance || g.state == StateStable) && len(g.pendingSync) > 0 && !now.Before(g.syncDeadline) {
		for _, id := range slices.Clone(g.order) {
			if g.pendingSync[id] {
				g.dropMember(g.members[id])
			}
		}
		clear(g.pendingSync)
		if len(g.members) == 0 {
			g.prepareRebalance(now)
			g.completeJoin(now)
		} else {
			g.prepareRebalance(now)
		}
	}
}

// NextDeadline is the earliest time Tick has work to do (zero if none).
func (g *Classic) NextDeadline() time.Time {
	var d time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	for _, t := range g.pending {
		earliest(t)
	}
	for _, m := range g.members {
		if m.joinCB == nil && m.syncCB == nil {
			earliest(m.sessionDeadline)
		}
	}
	if g.state == StatePreparingRebalance {
		earliest(g.joinDeadline)
	}
	if len(g.pendingSync) > 0 {
		earliest(g.syncDeadline)
	}
	return d
}

// validateCommit is Kafka's check of a classic-group offset commit. An
// admin commit (negative generation, no member) is allowed only while the
// group is empty; a member's commit must carry the current generation and
// is refused while the new generation's assignment is being made.
// validateCommit checks an OffsetCommit's member and generation (Kafka's
// ClassicGroup.validateOffsetCommit); a transactional commit is not
// refused during a rebalance.
func (g *Classic) validateCommit(now time.Time, generation int32, memberID, instanceID string, transactional bool) error {
	if generation < 0 && g.state == StateEmpty {
		return nil
	}
	if generation >= 0 || memberID != "" || instanceID != "" {
		if err := g.validateMember(memberID, instanceID); err != nil {
			return err
		}
		if generation != g.generation {
			return ErrIllegalGeneration
		}
		m := g.members[memberID]
		m.sessionDeadline = now.Add(m.sessionTimeout)
	} else if g.state != StateEmpty {
		return ErrUnknownMemberID
	}
	if g.state == StateCompletingRebalance && !transactional {
		return ErrRebalanceInProgress
	}
	return nil
}

// describe returns the members as Kafka's GroupMetadata.summary does:
// protocol metadata and assignments only for a stable group.
func (g *Classic) describe() (protocol string, members []MemberDescription) {
	for _, id := range g.order {
		m := g.members[id]
		md := MemberDescription{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			Metadata: []byte{}, Assignment: []byte{}}
		if g.state == StateStable {
			md.Metadata = m.metadata(g.protocol)
			md.Assignment = m.assignment
		}
		members = append(members, md)
	}
	if g.state == StateStable {
		protocol = g.protocol
	}
	return protocol, members
}

// subscribedTopics returns the union of the consumer members'
// subscriptions, or ok=false when they cannot be known (not a consumer
// protocol, or undecodable metadata).
func (g *Classic) subscribedTopics() (topics map[string]bool, ok bool) {
	if g.protocolType != ConsumerProtocolType || len(g.members) == 0 {
		return nil, false
	}
	topics = map[string]bool{}
	for _, m := range g.members {
		md := m.metadata(g.protocol)
		if g.protocol == "" && len(m.protocols) > 0 {
			md = m.protocols[0].Metadata
		}
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(md); err != nil {
			return nil, false
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics, true
}

// failAll answers every parked request with err (coordinator shutdown or
// loss of the offsets topic).
func (g *Classic) failAll(err error) {
	for _, id := range g.order {
		m := g.members[id]
		if m.joinCB != nil {
			cb := m.joinCB
			m.joinCB = nil
			cb(JoinResult{Err: err, MemberID: m.id, Generation: -1})
		}
		if m.syncCB != nil {
			cb := m.syncCB
			m.syncCB = nil
			cb(SyncResult{Err: err})
		}
	}
}

// metadataValue is the GroupMetadataValue that persists this group.
func (g *Classic) metadataValue() *kmsg.GroupMetadataValue {
	v := kmsg.NewGroupMetadataValue()
	v.Version = 3
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" && len(g.members) > 0 {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = g.stateSince.UnixMilli()
	for _, id := range g.order {
		m := g.members[id]
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID = m.id
		if m.instanceID != "" {
			iid := m.instanceID
			mv.InstanceID = &iid
		}
		mv.ClientID, mv.ClientHost = m.clientID, m.clientHost
		mv.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		mv.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		mv.Subscription = m.metadata(g.protocol)
		if mv.Subscription == nil {
			mv.Subscription = []byte{}
		}
		mv.Assignment = m.assignment
		if mv.Assignment == nil {
			mv.Assignment = []byte{}
		}
		v.Members = append(v.Members, mv)
	}
	return &v
}

func (g *Classic) metadataSize() int {
	return len(g.metadataValue().AppendTo(nil))
}

// restoreClassic rebuilds a group from its persisted metadata. A group
// with members comes back Stable and its members must heartbeat within
// their session timeout, as after a coordinator failover in Kafka.
func restoreClassic(cfg *Config, now time.Time, v *kmsg.GroupMetadataValue) *Classic {
	g := newClassic(cfg, now)
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	if v.CurrentStateTimestamp > 0 {
		g.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
	}
	for _, mv := range v.Members {
		if mv.MemberID == "" || g.members[mv.MemberID] != nil {
			continue
		}
		m := &classicMember{
			id: mv.MemberID, clientID: mv.ClientID, clientHost: mv.ClientHost,
			sessionTimeout:   time.Duration(mv.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(mv.RebalanceTimeoutMillis) * time.Millisecond,
			protocols:        []Protocol{{Name: g.protocol, Metadata: mv.Subscription}},
			assignment:       mv.Assignment,
		}
		if m.rebalanceTimeout <= 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		m.sessionDeadline = now.Add(m.sessionTimeout)
		if mv.InstanceID != nil && *mv.InstanceID != "" {
			m.instanceID = *mv.InstanceID
			g.static[m.instanceID] = m.id
		}
		g.members[m.id] = m
		g.order = append(g.order, m.id)
	}
	if len(g.members) == 0 {
		g.protocol = ""
		return g
	}
	g.state = StateStable
	if v.Leader != nil && g.members[*v.Leader] != nil {
		g.leader = *v.Leader
	} else {
		g.leader = g.order[0]
	}
	return g
}
