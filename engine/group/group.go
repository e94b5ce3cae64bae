package group

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"
)

// offsetEntry is one committed offset.
type offsetEntry struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitTime  int64 // ms
	expireTime  int64 // ms; -1 unless an OffsetCommit v1-v4 asked for one
	topicID     TopicID
	// recordOffset is where its record is in __consumer_offsets: a
	// transactional commit that a marker makes visible replaces a
	// committed offset only if it was written after it.
	recordOffset int64
}

type tpKey struct {
	topic string
	part  int32
}

// Group is one group id: its membership state machine (its kind) and its
// committed offsets.
type Group struct {
	id        string
	partition int32 // __consumer_offsets partition holding its records
	kind      kind
	offsets   map[tpKey]*offsetEntry
	// persisted is set once a GroupMetadata record exists, so deleting
	// the group writes a tombstone for it.
	persisted bool
	// established is set once the group has had members or offsets; until
	// then an idle group is dropped as soon as an operation leaves it so.
	established bool
}

func newGroup(cfg *Config, id string, partition int32, now time.Time) *Group {
	return &Group{id: id, partition: partition, kind: newClassic(cfg, now), offsets: map[tpKey]*offsetEntry{}}
}

// Type is "classic" or "consumer", as ListGroups v5 reports it.
func (g *Group) Type() string { return g.kind.Type() }

// State is the group's state.
func (g *Group) State() State { return g.kind.State() }

// ProtocolType is "consumer" for consumer groups and the classic group's
// protocol type otherwise ("" for groups that only store offsets).
func (g *Group) ProtocolType() string { return g.kind.ProtocolType() }

func (g *Group) members() int { return g.kind.Len() }

// idle reports a group with no members and no member id handed out.
func (g *Group) idle() bool { return g.kind.idle() }

// compareTP orders partitions by topic, then partition.
func compareTP(a, b tpKey) int {
	return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.part, b.part))
}

// sortedOffsets returns the committed partitions in topic, partition order.
func (g *Group) sortedOffsets() []tpKey {
	return slices.SortedFunc(maps.Keys(g.offsets), compareTP)
}

// expiredOffsets is the offset retention rule (KIP-211): an explicit
// expiry wins; otherwise an empty group's offsets expire once both the
// group has been empty and the commit is older than the retention, and an
// active consumer group's offsets expire only for topics it no longer
// consumes, by commit age. Offsets of groups whose subscriptions the
// broker cannot read never expire while the group has members. A simple
// group (offsets only, no protocol type) has no state to have entered:
// its offsets expire by commit age alone, as in Kafka; its "since" is only
// when this coordinator created or replayed it, and counting from it
// would let every restart push the expiry back.
func (g *Group) expiredOffsets(now time.Time, retention time.Duration) []tpKey {
	nowMs := now.UnixMilli()
	ret := retention.Milliseconds()
	empty := g.members() == 0
	var since int64
	if empty && g.ProtocolType() != "" {
		since = g.kind.since().UnixMilli()
	}
	var out []tpKey
	for _, k := range g.sortedOffsets() {
		o := g.offsets[k]
		switch {
		case o.expireTime >= 0:
			if nowMs >= o.expireTime {
				out = append(out, k)
			}
		case empty:
			if max(since, o.commitTime)+ret <= nowMs {
				out = append(out, k)
			}
		default:
			if sub, known := g.kind.subscribes(k.topic); known && !sub && o.commitTime+ret <= nowMs {
				out = append(out, k)
			}
		}
	}
	return out
}
