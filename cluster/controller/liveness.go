package controller

import (
	"maps"
	"slices"
	"time"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// Liveness says which brokers are reachable now. The node passes its
// cluster/membership (gossip); tests pass a fake. The active controller
// polls it.
type Liveness interface {
	Alive(id int32) bool
}

// ContactLiveness is a Liveness that also knows when it last heard from a
// broker (cluster/membership does). With it, a session is counted from the
// last contact rather than from the last poll that found the broker alive:
// gossip takes a few seconds to declare a dead member dead, and those
// seconds count toward the session timeout.
type ContactLiveness interface {
	Liveness
	LastContact(id int32) (time.Time, bool)
}

// IncarnationLiveness is a Liveness that also knows which start of a
// broker's process it hears from (cluster/membership carries it in its
// gossip): a broker is live only as the incarnation it registered with.
// false: not known (gone, or a member that does not say).
type IncarnationLiveness interface {
	Liveness
	Incarnation(id int32) (string, bool)
}

// livenessTracker decides, on the active controller, which brokers to
// fence and unfence. It is a pure state machine: time and what Liveness
// said are inputs, so tests drive it without a clock.
//
//   - A broker not alive for SessionTimeout since it was last seen alive is
//     fenced. A tracker that has not seen a broker yet (a new active
//     controller, a new registration) starts its clock at the first
//     observation, so every broker gets a full session after a controller
//     change. Where liveness knows the last contact, and it is earlier
//     than the last observation that found the broker alive (gossip still
//     called a dead member alive then), the clock starts there.
//   - A fenced broker seen alive is unfenced, except one fenced by a
//     controlled shutdown: it is still alive while it stops, and stays
//     fenced until it has been seen gone (or registers again, which
//     unfences it through the registration).
type livenessTracker struct {
	timeout   time.Duration
	lastAlive map[int32]time.Time
	// shutdown holds brokers fenced by a controlled shutdown that have not
	// been seen gone since.
	shutdown map[int32]bool
}

func newLivenessTracker(timeout time.Duration) *livenessTracker {
	return &livenessTracker{timeout: timeout, lastAlive: map[int32]time.Time{}, shutdown: map[int32]bool{}}
}

// shutDown notes a controlled shutdown of id.
func (t *livenessTracker) shutDown(id int32) { t.shutdown[id] = true }

// observe takes the registered brokers and what liveness says of each at
// now (contact, if not nil: when each was last heard from), and returns
// the ids to fence and to unfence, in id order.
func (t *livenessTracker) observe(now time.Time, brokers []metadata.Broker, alive func(int32) bool,
	contact func(int32) (time.Time, bool),
) (fence, unfence []int32) {
	seen := make(map[int32]bool, len(brokers))
	for _, b := range brokers {
		seen[b.ID] = true
		if alive(b.ID) {
			t.lastAlive[b.ID] = now
			if b.Fenced && !t.shutdown[b.ID] {
				unfence = append(unfence, b.ID)
			}
			continue
		}
		delete(t.shutdown, b.ID)
		last, ok := t.lastAlive[b.ID]
		if contact != nil {
			if c, known := contact(b.ID); known && (!ok || c.Before(last)) {
				last, ok = c, true
				t.lastAlive[b.ID] = c
			}
		}
		if !ok {
			t.lastAlive[b.ID] = now
			continue
		}
		if !b.Fenced && now.Sub(last) >= t.timeout {
			fence = append(fence, b.ID)
		}
	}
	for _, id := range slices.Collect(maps.Keys(t.lastAlive)) {
		if !seen[id] {
			delete(t.lastAlive, id)
			delete(t.shutdown, id)
		}
	}
	slices.Sort(fence)
	slices.Sort(unfence)
	return fence, unfence
}
