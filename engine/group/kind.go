package group

import (
	"errors"
	"fmt"
	"time"
)

// kind is a group's membership protocol: *Classic (JoinGroup/SyncGroup)
// or *Consumer (KIP-848), and later share groups. A Group holds exactly
// one; what differs between protocols is behind this interface, and only
// the protocol's own requests (JoinGroup, ConsumerGroupHeartbeat, the
// describes) look at the concrete type.
type kind interface {
	// Type is the group type ListGroups v5 reports: "classic", "consumer".
	Type() string
	State() State
	// ProtocolType is "consumer" for consumer groups, the classic group's
	// protocol type otherwise ("" for groups that only store offsets).
	ProtocolType() string
	// Len is the number of members.
	Len() int
	// NextDeadline is the earliest time tick has work to do (zero: none).
	NextDeadline() time.Time
	tick(now time.Time, topics *topicSnapshot)
	// idle: no members and no member id handed out.
	idle() bool
	// held reports state worth keeping even without members or offsets
	// (a consumer group that had an epoch).
	held() bool
	// since is when the group entered its current state (offset
	// retention of an empty group counts from it).
	since() time.Time
	// subscribes reports whether the members consume topic; known is
	// false when the broker cannot tell.
	subscribes(topic string) (subscribed, known bool)
	// checkCommit validates an OffsetCommit's member; check, if set,
	// validates each partition.
	checkCommit(now time.Time, req *CommitRequest) (check func(TopicID, int32) error, err error)
	checkFetch(memberID *string, epoch int32) error
	// takeMetadata returns the GroupMetadata record value to persist if
	// the membership changed since the last call (nil: nothing to write).
	takeMetadata() []byte
	// failAll answers every parked request with err.
	failAll(err error)
}

// ---- *Classic ----

// Type implements kind.
func (g *Classic) Type() string { return "classic" }

func (g *Classic) tick(now time.Time, _ *topicSnapshot) { g.Tick(now) }

func (g *Classic) idle() bool { return len(g.members) == 0 && len(g.pending) == 0 }

func (g *Classic) held() bool { return false }

func (g *Classic) since() time.Time { return g.stateSince }

func (g *Classic) subscribes(topic string) (bool, bool) {
	topics, ok := g.subscribedTopics()
	return topics[topic], ok
}

func (g *Classic) checkCommit(now time.Time, req *CommitRequest) (func(TopicID, int32) error, error) {
	return nil, g.validateCommit(now, req.Generation, req.MemberID, req.InstanceID, req.Producer != nil)
}

func (g *Classic) checkFetch(*string, int32) error { return nil }

func (g *Classic) takeMetadata() []byte {
	if !g.dirty {
		return nil
	}
	g.dirty = false
	return g.metadataValue().AppendTo(nil)
}

// ---- *Consumer ----

// Type implements kind.
func (g *Consumer) Type() string { return "consumer" }

// ProtocolType implements kind.
func (g *Consumer) ProtocolType() string { return ConsumerProtocolType }

func (g *Consumer) tick(now time.Time, topics *topicSnapshot) { g.Tick(now, topics) }

func (g *Consumer) idle() bool { return len(g.members) == 0 }

func (g *Consumer) held() bool { return g.epoch > 0 }

func (g *Consumer) since() time.Time { return g.stateSince }

func (g *Consumer) subscribes(topic string) (bool, bool) { return g.subscribed(topic), true }

func (g *Consumer) checkCommit(_ time.Time, req *CommitRequest) (func(TopicID, int32) error, error) {
	if req.Producer == nil {
		return g.validateCommit(req.MemberID, req.Generation, req.Version)
	}
	// A transactional commit (TxnOffsetCommit has its own versions): a
	// stale member epoch is ILLEGAL_GENERATION, as Kafka answers it.
	check, err := g.validateCommit(req.MemberID, req.Generation, 9)
	stale := func(err error) error {
		if errors.Is(err, ErrStaleMemberEpoch) {
			return fmt.Errorf("%w: %v", ErrIllegalGeneration, err)
		}
		return err
	}
	if err != nil || check == nil {
		return check, stale(err)
	}
	return func(t TopicID, p int32) error { return stale(check(t, p)) }, nil
}

func (g *Consumer) checkFetch(memberID *string, epoch int32) error {
	return g.validateFetch(memberID, epoch)
}

// takeMetadata implements kind: consumer-group membership is not
// persisted (members rejoin after a restart).
func (g *Consumer) takeMetadata() []byte { return nil }

// failAll implements kind: a consumer group parks no request.
func (g *Consumer) failAll(error) {}
