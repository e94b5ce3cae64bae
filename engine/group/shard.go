package group

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/coord"
)

// shard is the group state of one __consumer_offsets partition: the
// coord.State the runtime replays, ticks and serialises. Its methods run
// as runtime operations (under the shard's lock), with the time as input.
type shard struct {
	cfg    *Config
	log    *slog.Logger
	topics func() *topicSnapshot
	sh     *coord.Shard
	p      int32
	// home records where groups found outside their hash partition live
	// (the topic grew). The routes outlive the shard: while it is unloaded
	// (moved, or being replayed again) its groups must not be served from
	// their hash partitions.
	home func(group string, p int32) bool

	groups    map[string]*Group
	deadlines map[string]time.Time // groups with timeouts pending
	nextSweep time.Time
	// txnOffsets are the transactional offset commits whose transaction
	// has not ended, by producer id, then group and partition: visible to
	// nobody until a commit marker makes them committed offsets.
	txnOffsets map[int64]map[string]map[tpKey]*offsetEntry
}

func (c *Coordinator) newShard(sh *coord.Shard) *shard {
	return &shard{cfg: &c.cfg, log: c.log, topics: c.topics.Load, sh: sh, p: sh.Partition(),
		home:   c.setHome,
		groups: map[string]*Group{}, deadlines: map[string]time.Time{}, txnOffsets: map[int64]map[string]map[tpKey]*offsetEntry{}}
}

// Replay implements coord.State: one record of the partition.
func (s *shard) Replay(now time.Time, r coord.Record) bool {
	pid := int64(-1)
	if r.Transactional {
		pid = r.ProducerID
	}
	return s.replayRecord(now, r.Key, r.Value, r.Offset, pid)
}

// ReplayMarker implements coord.MarkerReplayer: a transaction's end makes
// its offsets committed, or drops them.
func (s *shard) ReplayMarker(now time.Time, _ int64, pid int64, _ int16, commit bool) {
	s.endTxnOffsets(now, pid, commit)
}

// replayRecord applies one record at offset, written in a transaction of
// producer pid (-1: not transactional); false if it could not be decoded.
func (s *shard) replayRecord(now time.Time, key, value []byte, offset, pid int64) (ok bool) {
	defer func() {
		if r := recover(); r != nil { // kmsg decoding of hostile bytes
			ok = false
		}
	}()
	r, known, err := decodeRecord(key, value)
	if err != nil {
		return false
	}
	if !known || r.group == "" {
		return true
	}
	g := s.groups[r.group]
	if r.isGroup {
		if r.metadata == nil {
			if g != nil {
				g.kind, g.persisted = newClassic(s.cfg, now), false
				if len(g.offsets) == 0 {
					delete(s.groups, r.group)
				}
			}
			return true
		}
		if g == nil {
			g = newGroup(s.cfg, r.group, s.p, now)
			s.groups[r.group] = g
		}
		g.kind, g.persisted = restoreClassic(s.cfg, now, r.metadata), true
		return true
	}
	k := tpKey{r.topic, r.partition}
	if r.offset == nil {
		s.dropTxnOffset(r.group, k)
		if g != nil {
			delete(g.offsets, k)
			if len(g.offsets) == 0 && !g.persisted && g.members() == 0 && !s.hasTxnOffsets(r.group) {
				delete(s.groups, r.group)
			}
		}
		return true
	}
	if g == nil {
		g = newGroup(s.cfg, r.group, s.p, now)
		s.groups[r.group] = g
	}
	r.offset.recordOffset = offset
	if pid >= 0 {
		s.addTxnOffset(pid, r.group, k, r.offset)
		return true
	}
	g.offsets[k] = r.offset
	return true
}

// addTxnOffset records a transactional offset commit of producer pid.
func (s *shard) addTxnOffset(pid int64, group string, k tpKey, e *offsetEntry) {
	byGroup := s.txnOffsets[pid]
	if byGroup == nil {
		byGroup = map[string]map[tpKey]*offsetEntry{}
		s.txnOffsets[pid] = byGroup
	}
	if byGroup[group] == nil {
		byGroup[group] = map[tpKey]*offsetEntry{}
	}
	byGroup[group][k] = e
}

// dropTxnOffset forgets every producer's pending offset of (group, k): a
// tombstone removes it (Kafka's replay of an offset deletion).
func (s *shard) dropTxnOffset(group string, k tpKey) {
	for _, byGroup := range s.txnOffsets {
		delete(byGroup[group], k)
	}
}

// hasTxnOffsets reports whether a transaction has offsets of group
// pending; with k, of that partition.
func (s *shard) hasTxnOffsets(group string, k ...tpKey) bool {
	for _, byGroup := range s.txnOffsets {
		offs := byGroup[group]
		if len(k) == 0 && len(offs) > 0 {
			return true
		}
		for _, kk := range k {
			if _, ok := offs[kk]; ok {
				return true
			}
		}
	}
	return false
}

// endTxnOffsets applies the end of producer pid's transaction: committed,
// its offsets become the groups' committed offsets, each unless a plain
// commit written after it already replaced the partition's offset
// (Kafka's replayEndTransactionMarker); aborted, they are dropped.
func (s *shard) endTxnOffsets(now time.Time, pid int64, commit bool) {
	byGroup := s.txnOffsets[pid]
	delete(s.txnOffsets, pid)
	if !commit {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(byGroup)) {
		g := s.groups[id]
		if g == nil {
			g = newGroup(s.cfg, id, s.p, now)
			s.groups[id] = g
		}
		for k, e := range byGroup[id] {
			if cur := g.offsets[k]; cur == nil || cur.recordOffset < e.recordOffset {
				g.offsets[k] = e
			}
		}
	}
}

// Activate implements coord.State: the replayed groups are served. A
// group found outside its hash partition (only after the topic grew) is
// routed here, unless another partition's copy already is. Offsets of
// topics deleted meanwhile are purged.
func (s *shard) Activate(now time.Time) {
	s.nextSweep = now.Add(s.cfg.RetentionCheckInterval)
	for _, id := range slices.Sorted(maps.Keys(s.groups)) {
		if !s.home(id, s.p) {
			s.log.Warn("a group has records in two offsets partitions; keeping the first",
				"group", id, "ignored", s.p)
			delete(s.groups, id)
		}
	}
	s.purgeUnknownTopics(now)
	for _, g := range s.groups {
		s.settle(now, g)
	}
}

// Unload implements coord.State.
func (s *shard) Unload(err error) {
	for _, g := range s.groups {
		g.kind.failAll(err)
	}
	s.groups, s.deadlines = map[string]*Group{}, map[string]time.Time{}
	s.txnOffsets = map[int64]map[string]map[tpKey]*offsetEntry{}
}

// Tick implements coord.State: the timeouts due at now and, when due, the
// offset retention sweep.
func (s *shard) Tick(now time.Time) {
	snap := s.topics()
	for _, id := range slices.Sorted(maps.Keys(s.deadlines)) {
		if now.Before(s.deadlines[id]) {
			continue
		}
		g := s.groups[id]
		if g == nil {
			delete(s.deadlines, id)
			continue
		}
		g.kind.tick(now, snap)
		s.settle(now, g)
	}
	if now.Before(s.nextSweep) {
		return
	}
	s.nextSweep = now.Add(s.cfg.RetentionCheckInterval)
	s.sweep(now)
}

// append writes recs to the partition as one batch.
func (s *shard) append(now time.Time, recs []batch.Record) error {
	_, err := s.appendAt(now, recs)
	return err
}

// appendAt is append that also returns the offset of the first record.
func (s *shard) appendAt(now time.Time, recs []batch.Record) (int64, error) {
	last, err := s.sh.Append(now, recs)
	if errors.Is(err, coord.ErrBatchTooLarge) {
		return 0, fmt.Errorf("%w: %v", ErrInvalidCommitOffsetSize, err)
	}
	return last - int64(len(recs)) + 1, err
}

// group returns a group, creating it (classic, empty) when create.
func (s *shard) group(now time.Time, id string, create bool) *Group {
	g := s.groups[id]
	if g == nil && create {
		g = newGroup(s.cfg, id, s.p, now)
		s.groups[id] = g
	}
	return g
}

// drop forgets a group.
func (s *shard) drop(id string) {
	delete(s.groups, id)
	delete(s.deadlines, id)
}

// settle runs after every operation on g: it persists changed group
// metadata, tracks g's next timeout and forgets groups that hold nothing.
func (s *shard) settle(now time.Time, g *Group) {
	if val := g.kind.takeMetadata(); val != nil {
		if err := s.append(now, []batch.Record{{Key: encodeGroupKey(g.id), Value: val}}); err != nil {
			s.log.Error("persisting group metadata failed", "group", g.id, "err", err)
		} else {
			g.persisted = true
		}
	}
	if d := g.kind.NextDeadline(); !d.IsZero() {
		s.deadlines[g.id] = d
	} else {
		delete(s.deadlines, g.id)
	}
	// A group that never held anything (a join that failed validation)
	// is forgotten at once; one that did lingers, Empty, until the
	// retention sweep removes it, as in Kafka.
	switch {
	case !g.idle() || len(g.offsets) > 0 || g.persisted || g.kind.held() || s.hasTxnOffsets(g.id):
		g.established = true
	case !g.established && s.groups[g.id] == g:
		s.drop(g.id)
	}
}

// tombstones returns the partitions of g that match, committed or pending
// in a transaction, and their deletion records (Kafka's deleteAllOffsets
// and onPartitionsDeleted tombstone pending transactional offsets too).
// forget applies them as replay applies the records.
func (s *shard) tombstones(g *Group, match func(k tpKey, o *offsetEntry) bool) (keys []tpKey, recs []batch.Record) {
	for _, k := range g.sortedOffsets() {
		if match(k, g.offsets[k]) {
			keys = append(keys, k)
		}
	}
	var pending []tpKey
	for _, byGroup := range s.txnOffsets {
		for k, o := range byGroup[g.id] {
			if !slices.Contains(keys, k) && !slices.Contains(pending, k) && match(k, o) {
				pending = append(pending, k)
			}
		}
	}
	slices.SortFunc(pending, compareTP)
	keys = append(keys, pending...)
	for _, k := range keys {
		recs = append(recs, batch.Record{Key: encodeOffsetKey(g.id, k.topic, k.part)})
	}
	return keys, recs
}

// forget removes partitions keys of g as replay applies their tombstones:
// the committed offsets, and every transaction's pending offsets of those
// partitions (replayRecord). Whatever writes a tombstone applies it with
// forget, so the state served is the state a restart rebuilds.
func (s *shard) forget(g *Group, keys []tpKey) {
	for _, k := range keys {
		delete(g.offsets, k)
		s.dropTxnOffset(g.id, k)
	}
}

// sweep removes expired offsets and then groups left with nothing
// (Kafka's cleanupGroupMetadata).
func (s *shard) sweep(now time.Time) {
	removed := 0
	for _, id := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[id]
		// An offset a transaction may still replace is kept (Kafka's
		// cleanupExpiredOffsets).
		expired := slices.DeleteFunc(g.expiredOffsets(now, s.cfg.OffsetsRetention),
			func(k tpKey) bool { return s.hasTxnOffsets(g.id, k) })
		var recs []batch.Record
		for _, k := range expired {
			recs = append(recs, batch.Record{Key: encodeOffsetKey(g.id, k.topic, k.part)})
		}
		deleteGroup := g.idle() && len(g.offsets) == len(expired) && !s.hasTxnOffsets(g.id)
		if deleteGroup && g.persisted {
			recs = append(recs, batch.Record{Key: encodeGroupKey(g.id)})
		}
		if len(recs) > 0 {
			if err := s.append(now, recs); err != nil {
				s.log.Warn("expiring offsets failed; will retry", "group", g.id, "err", err)
				continue
			}
		}
		for _, k := range expired {
			delete(g.offsets, k)
		}
		removed += len(expired)
		if deleteGroup {
			s.drop(id)
		}
	}
	if removed > 0 {
		s.log.Info("expired committed offsets", "partition", s.p, "offsets", removed)
	}
}

// topicDeleted removes every group's offsets of a deleted topic.
func (s *shard) topicDeleted(now time.Time, topic string) {
	for _, id := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[id]
		keys, recs := s.tombstones(g, func(k tpKey, _ *offsetEntry) bool { return k.topic == topic })
		if len(recs) == 0 {
			continue
		}
		if err := s.append(now, recs); err != nil {
			// The offsets stay in the log, but replay drops offsets whose
			// topic id no longer exists, so they cannot come back.
			s.log.Warn("writing tombstones for a deleted topic failed", "group", g.id, "topic", topic, "err", err)
		}
		s.forget(g, keys)
		s.settle(now, g)
	}
}

// purgeUnknownTopics drops replayed offsets of topics that no longer
// exist (or were recreated: another topic id), writing tombstones: topics
// deleted while this partition was not served got none.
func (s *shard) purgeUnknownTopics(now time.Time) {
	snap := s.topics()
	for _, id := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[id]
		keys, recs := s.tombstones(g, func(k tpKey, o *offsetEntry) bool {
			t, ok := snap.byName[k.topic]
			return !ok || o.topicID != TopicID{} && o.topicID != t.ID
		})
		if len(keys) == 0 {
			continue
		}
		if err := s.append(now, recs); err != nil {
			s.log.Warn("removing offsets of deleted topics failed", "group", g.id, "err", err)
		}
		s.forget(g, keys)
	}
}
