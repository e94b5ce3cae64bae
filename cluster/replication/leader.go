// Package replication is the leader side of partition replication as a pure
// state machine: the in-sync replica set (ISR), the high watermark (HW) and
// acks=all readiness of one partition, with no I/O and no clock. Inputs come
// in as method calls carrying the time (Become, Appended, FollowerFetched,
// Tick, AlterPartitionResult); decisions come out as values (HighWatermark,
// Pending, Ready, CanAppend). It follows Kafka's Partition (maybeExpandIsr,
// maybeShrinkIsr, maybeIncrementLeaderHW, checkEnoughReplicasReachOffset)
// and Replica.updateFetchStateOrThrow, in the shape of etcd-io/raft's
// rawnode: the caller owns the goroutine, the log and the network.
//
// It owns, for one partition this node leads: the controller's committed
// state (replicas, ISR, leader epoch, partition epoch, min.insync.replicas),
// the leader's durable log end offset, every follower's durable log end
// offset and last caught-up time, the HW, and at most one ISR change in
// flight to the controller (AlterPartition, KIP-497), during which the HW is
// computed over the "maximal ISR" (committed ∪ proposed, KIP-841), so a
// shrink the controller may still reject never lets the HW pass a replica
// that could stay in the ISR.
//
// Offsets are durable offsets: MoonMQ acknowledges only fsynced data, so the
// leader reports its fsynced end (Appended) and a follower reports, as its
// fetch offset, only what it has fsynced. An acknowledged acks=all write is
// therefore on every ISR member's disk.
//
// Invariants (checked by the property test):
//   - the HW never decreases, and never passes the leader's end offset;
//   - the HW is at most the end offset of every maximal-ISR member;
//   - the committed and the maximal ISR always contain the leader: a shrink
//     never proposes to drop it;
//   - an expansion is proposed only for a caught-up follower (its end offset
//     at or past the HW and the start of the leader's epoch);
//   - at most one ISR change is in flight; the controller's state wins: a
//     rejected, stale or superseded proposal is dropped, and Become with a
//     newer epoch replaces everything.
//
// Hostile input (an unknown replica, a fetch carrying another leader epoch,
// an offset past the leader's end) is refused with a sentinel error and
// changes nothing.
//
// Wiring (issue 13): a replicated engine/replica.Partition takes a Leader
// as its replica.ISR (BecomeLeader; this type satisfies that interface
// without an adapter, checked in net/peer's tests), feeds it its fsync
// progress (Appended) and the follower fetches it serves (FollowerFetched),
// and uses Ready to answer acks=all produces and HighWatermark to bound
// read_uncommitted fetches; net/kafka maps the sentinel errors to Kafka
// codes. The node calls Become, Tick and AlterPartitionResult through the
// partition's UpdateISR, carrying Pending to the controller as an
// AlterPartition.
package replication

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// The refusals and acks=all outcomes, mapped to Kafka error codes by the
// protocol layer.
var (
	ErrNotLeader                    = errors.New("replication: not the leader of this partition")
	ErrUnknownReplica               = errors.New("replication: replica is not assigned to this partition")
	ErrFencedLeaderEpoch            = errors.New("replication: leader epoch is older than the current one")
	ErrUnknownLeaderEpoch           = errors.New("replication: leader epoch is newer than the current one")
	ErrOffsetOutOfRange             = errors.New("replication: offset outside the leader's log")
	ErrInvalidState                 = errors.New("replication: invalid leader state")
	ErrStaleState                   = errors.New("replication: controller state older than the one held")
	ErrNotEnoughReplicas            = errors.New("replication: ISR smaller than min.insync.replicas")
	ErrNotEnoughReplicasAfterAppend = errors.New("replication: ISR shrank below min.insync.replicas after the append")
	ErrNoPendingChange              = errors.New("replication: no ISR change in flight")
)

// LeaderState is what the controller decided for a partition this node leads.
type LeaderState struct {
	Replicas       []int32 // assigned replicas, the leader among them
	ISR            []int32 // committed ISR, the leader among them
	LeaderEpoch    int32
	PartitionEpoch int32 // bumped by the controller on every ISR or assignment change
	MinISR         int   // min.insync.replicas
	LogEnd         int64 // the leader's durable log end offset when it becomes leader
	HighWatermark  int64 // the HW the log had (it never goes back)
}

// Change is an ISR change proposed to the controller (AlterPartition).
type Change struct {
	LeaderEpoch    int32
	PartitionEpoch int32 // the partition epoch it is based on
	ISR            []int32
	Shrink         bool // true: members leave; false: one joins
}

// Result is the controller's answer to the Change in flight.
type Result struct {
	Accepted bool
	// State is the controller's ISR state in the answer (accepted: the new
	// one; rejected: the current one, when the answer carries it).
	ISR            []int32
	LeaderEpoch    int32
	PartitionEpoch int32
}

type follower struct {
	logEnd             int64 // durable end offset it reported; -1 unknown
	lastFetch          time.Time
	lastFetchLeaderEnd int64 // the leader's end offset at its last fetch
	lastCaughtUp       time.Time
}

// Leader is the state machine of one partition this node leads. It is not
// safe for concurrent use: its owner serialises the calls.
type Leader struct {
	id     int32
	maxLag time.Duration // replica.lag.time.max.ms

	leading    bool
	state      LeaderState
	epochStart int64 // the leader's end offset when its epoch began
	logEnd     int64
	hw         int64
	followers  map[int32]*follower
	pending    *Change
}

// New returns the state machine of node id, with maxLag as
// replica.lag.time.max.ms. It leads nothing until Become.
func New(id int32, maxLag time.Duration) *Leader {
	return &Leader{id: id, maxLag: maxLag}
}

// Become installs the controller's state. A newer leader epoch starts a new
// leadership: the followers' ends are forgotten, ISR members count as
// caught up at now, others as never, and any change in flight is dropped.
// The same leader epoch with a newer partition epoch updates the ISR and
// assignment (the controller's state wins over a pending change, which is
// dropped), keeps the followers' ends and restarts their lag clocks as a
// new leadership does (Kafka does not forget the ends when it stays
// leader across an epoch bump; this is more cautious). The same epochs again
// only update min.insync.replicas. An older state is refused with
// ErrStaleState and changes nothing.
func (l *Leader) Become(now time.Time, s LeaderState) error {
	if err := l.validate(s); err != nil {
		return err
	}
	newEpoch := !l.leading || s.LeaderEpoch > l.state.LeaderEpoch
	if !newEpoch && s.PartitionEpoch < l.state.PartitionEpoch {
		return fmt.Errorf("become at partition epoch %d, have %d: %w", s.PartitionEpoch, l.state.PartitionEpoch, ErrStaleState)
	}
	if !newEpoch && s.PartitionEpoch == l.state.PartitionEpoch {
		// The same ISR state again (a config change, a replayed delta): only
		// min.insync.replicas may differ, and the change in flight stays.
		l.state.MinISR = s.MinISR
		return nil
	}
	s.Replicas, s.ISR = slices.Clone(s.Replicas), sorted(s.ISR)
	if newEpoch {
		l.followers = make(map[int32]*follower, len(s.Replicas))
		l.epochStart = s.LogEnd
		l.logEnd = s.LogEnd
		l.hw = s.HighWatermark
	} else if s.LogEnd > l.logEnd {
		l.logEnd = s.LogEnd
	}
	// As Kafka's resetReplicaState: an ISR member gets a full lag period
	// from now to fetch (the controller just said it is in sync), a
	// non-member must fetch before it counts as caught up. A new leadership
	// also forgets the followers' ends: they were measured against another
	// epoch's log, whose tail a follower may still have to truncate.
	followers := make(map[int32]*follower, len(s.Replicas))
	for _, id := range s.Replicas {
		if id == l.id {
			continue
		}
		f := l.followers[id]
		if f == nil {
			f = &follower{logEnd: -1, lastFetchLeaderEnd: -1}
		} else {
			f.lastFetchLeaderEnd = l.logEnd
		}
		f.lastFetch, f.lastCaughtUp = time.Time{}, time.Time{}
		if slices.Contains(s.ISR, id) {
			f.lastFetch, f.lastCaughtUp = now, now
		}
		followers[id] = f
	}
	l.followers = followers
	l.leading, l.state, l.pending = true, s, nil
	l.advanceHW()
	return nil
}

func (l *Leader) validate(s LeaderState) error {
	switch {
	case s.LeaderEpoch < l.state.LeaderEpoch: // kept across Resign: a delayed old state stays refused
		return fmt.Errorf("become at leader epoch %d, have %d: %w", s.LeaderEpoch, l.state.LeaderEpoch, ErrStaleState)
	case !slices.Contains(s.Replicas, l.id) || !slices.Contains(s.ISR, l.id):
		return fmt.Errorf("leader %d not in replicas %v or ISR %v: %w", l.id, s.Replicas, s.ISR, ErrInvalidState)
	case s.LeaderEpoch < 0 || s.PartitionEpoch < 0 || s.MinISR < 1 || s.LogEnd < 0 || s.HighWatermark < 0 || s.HighWatermark > s.LogEnd:
		return fmt.Errorf("epochs %d/%d, min ISR %d, log end %d, HW %d: %w", s.LeaderEpoch, s.PartitionEpoch, s.MinISR, s.LogEnd, s.HighWatermark, ErrInvalidState)
	}
	for i, id := range s.Replicas {
		if slices.Contains(s.Replicas[:i], id) {
			return fmt.Errorf("replica %d listed twice: %w", id, ErrInvalidState)
		}
	}
	for i, id := range s.ISR {
		if !slices.Contains(s.Replicas, id) || slices.Contains(s.ISR[:i], id) {
			return fmt.Errorf("ISR %v not a set of replicas %v: %w", s.ISR, s.Replicas, ErrInvalidState)
		}
	}
	return nil
}

// Resign ends the leadership (this node became a follower or lost the
// replica): every later input is refused with ErrNotLeader until Become,
// which must then carry at least the last leader epoch seen.
func (l *Leader) Resign() { l.leading, l.pending, l.followers = false, nil, nil }

// Appended records the leader's durable log end offset (after an fsync). It
// never goes back while leading: a smaller one is refused.
func (l *Leader) Appended(logEnd int64) error {
	if !l.leading {
		return ErrNotLeader
	}
	if logEnd < l.logEnd {
		return fmt.Errorf("log end %d behind %d: %w", logEnd, l.logEnd, ErrOffsetOutOfRange)
	}
	l.logEnd = logEnd
	l.advanceHW()
	return nil
}

// FollowerFetched records a fetch from follower replica at now: fetchOffset
// is the follower's durable end offset, leaderEpoch the epoch the follower
// believes current. It may propose an expansion (see Pending) and advance
// the HW.
//
// The caught-up rule is Kafka's: a fetch at or past the leader's current end
// makes the follower caught up now; a fetch at or past the leader's end as
// of the follower's previous fetch makes it caught up as of that previous
// fetch (it had everything there was then).
func (l *Leader) FollowerFetched(now time.Time, replica int32, fetchOffset int64, leaderEpoch int32) error {
	if !l.leading {
		return ErrNotLeader
	}
	f := l.followers[replica]
	switch {
	case f == nil:
		return fmt.Errorf("fetch from replica %d, replicas %v: %w", replica, l.state.Replicas, ErrUnknownReplica)
	case leaderEpoch < l.state.LeaderEpoch:
		return fmt.Errorf("fetch at leader epoch %d, current %d: %w", leaderEpoch, l.state.LeaderEpoch, ErrFencedLeaderEpoch)
	case leaderEpoch > l.state.LeaderEpoch:
		return fmt.Errorf("fetch at leader epoch %d, current %d: %w", leaderEpoch, l.state.LeaderEpoch, ErrUnknownLeaderEpoch)
	case fetchOffset < 0 || fetchOffset > l.logEnd:
		return fmt.Errorf("fetch offset %d, leader log end %d: %w", fetchOffset, l.logEnd, ErrOffsetOutOfRange)
	}
	switch {
	case fetchOffset >= l.logEnd:
		f.lastCaughtUp = later(f.lastCaughtUp, now)
	case fetchOffset >= f.lastFetchLeaderEnd: // a zero lastFetch changes nothing
		f.lastCaughtUp = later(f.lastCaughtUp, f.lastFetch)
	}
	f.logEnd = fetchOffset
	f.lastFetch = now
	f.lastFetchLeaderEnd = max(f.lastFetchLeaderEnd, l.logEnd)
	l.maybeExpand(replica, f)
	l.advanceHW()
	return nil
}

// Tick runs the lag check at now: ISR followers not caught up within maxLag
// are proposed for removal (when no change is in flight).
func (l *Leader) Tick(now time.Time) error {
	if !l.leading {
		return ErrNotLeader
	}
	if l.pending != nil {
		return nil
	}
	var out []int32
	for _, id := range l.state.ISR {
		if id == l.id {
			continue
		}
		f := l.followers[id]
		if f.logEnd != l.logEnd && now.Sub(f.lastCaughtUp) > l.maxLag {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return nil
	}
	isr := slices.DeleteFunc(slices.Clone(l.state.ISR), func(id int32) bool { return slices.Contains(out, id) })
	l.pending = &Change{LeaderEpoch: l.state.LeaderEpoch, PartitionEpoch: l.state.PartitionEpoch, ISR: isr, Shrink: true}
	return nil
}

// maybeExpand proposes adding replica when it is out of the ISR, caught up
// to the HW and to the start of this leader's epoch (so it holds no tail of
// an older epoch the leader does not have), and no change is in flight.
func (l *Leader) maybeExpand(replica int32, f *follower) {
	if l.pending != nil || slices.Contains(l.state.ISR, replica) {
		return
	}
	if f.logEnd < l.hw || f.logEnd < l.epochStart {
		return
	}
	isr := sorted(append(slices.Clone(l.state.ISR), replica))
	l.pending = &Change{LeaderEpoch: l.state.LeaderEpoch, PartitionEpoch: l.state.PartitionEpoch, ISR: isr}
}

// Pending returns the ISR change to send to the controller, if any. It
// stays pending until AlterPartitionResult or Become.
func (l *Leader) Pending() (Change, bool) {
	if l.pending == nil {
		return Change{}, false
	}
	c := *l.pending
	c.ISR = slices.Clone(c.ISR)
	return c, true
}

// AlterPartitionResult applies the controller's answer to the change in
// flight. Accepted: the state in r becomes the committed one, unless it is
// older than what Become already installed (stale: ignored). Rejected: the
// change is dropped; a newer state in r of this leader epoch is installed
// (the controller wins); another leader epoch waits for Become. Either way
// the lag check and expansion run again on later inputs.
func (l *Leader) AlterPartitionResult(r Result) error {
	if !l.leading {
		return ErrNotLeader
	}
	if l.pending == nil {
		return ErrNoPendingChange
	}
	l.pending = nil
	if r.LeaderEpoch != l.state.LeaderEpoch || r.PartitionEpoch <= l.state.PartitionEpoch {
		return nil // stale, or no state to install: what the controller says next (Become) wins
	}
	isr := sorted(r.ISR)
	if !slices.Contains(isr, l.id) {
		return fmt.Errorf("controller ISR %v without the leader %d: %w", isr, l.id, ErrInvalidState)
	}
	for _, id := range isr {
		if l.followers[id] == nil && id != l.id {
			return fmt.Errorf("controller ISR %v not within replicas %v: %w", isr, l.state.Replicas, ErrInvalidState)
		}
	}
	l.state.ISR, l.state.PartitionEpoch = isr, r.PartitionEpoch
	l.advanceHW()
	return nil
}

// MaximalISR is the committed ISR joined with the one in flight: the set
// the HW waits for.
func (l *Leader) MaximalISR() []int32 {
	isr := slices.Clone(l.state.ISR)
	if l.pending != nil {
		for _, id := range l.pending.ISR {
			if !slices.Contains(isr, id) {
				isr = append(isr, id)
			}
		}
	}
	return sorted(isr)
}

// advanceHW moves the HW to the smallest end offset over the maximal ISR,
// never back.
func (l *Leader) advanceHW() {
	hw := l.logEnd
	for _, id := range l.MaximalISR() {
		if id != l.id {
			hw = min(hw, l.followers[id].logEnd)
		}
	}
	if hw > l.hw {
		l.hw = hw
	}
}

// HighWatermark is the offset below which records are committed: consumers
// may read them and followers learn it in fetch answers.
func (l *Leader) HighWatermark() int64 { return l.hw }

// LogEnd is the leader's durable log end offset.
func (l *Leader) LogEnd() int64 { return l.logEnd }

// State is the committed controller state as the leader holds it.
func (l *Leader) State() LeaderState {
	s := l.state
	s.Replicas, s.ISR = slices.Clone(s.Replicas), slices.Clone(s.ISR)
	s.LogEnd, s.HighWatermark = l.logEnd, l.hw
	return s
}

// CanAppend says whether an acks=all produce may be appended now: the
// committed ISR must have min.insync.replicas members, else
// ErrNotEnoughReplicas and nothing should be written.
func (l *Leader) CanAppend() error {
	if !l.leading {
		return ErrNotLeader
	}
	if len(l.state.ISR) < l.state.MinISR {
		return fmt.Errorf("ISR %v, min.insync.replicas %d: %w", l.state.ISR, l.state.MinISR, ErrNotEnoughReplicas)
	}
	return nil
}

// Ready says whether an acks=all produce whose records end before end (its
// last offset + 1) may be answered: false while the HW is below end; true
// once it is past, with ErrNotEnoughReplicasAfterAppend when the committed
// ISR has meanwhile shrunk below min.insync.replicas (the records are
// written but not on enough disks to promise).
func (l *Leader) Ready(end int64) (bool, error) {
	if !l.leading {
		return false, ErrNotLeader
	}
	if end > l.logEnd {
		return false, fmt.Errorf("produce end %d past log end %d: %w", end, l.logEnd, ErrOffsetOutOfRange)
	}
	if l.hw < end {
		return false, nil
	}
	if len(l.state.ISR) < l.state.MinISR {
		return true, fmt.Errorf("ISR %v, min.insync.replicas %d: %w", l.state.ISR, l.state.MinISR, ErrNotEnoughReplicasAfterAppend)
	}
	return true, nil
}

func sorted(ids []int32) []int32 {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return slices.Compact(ids)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
