package controller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/moonmq/moonmq/engine/meta"
)

// Keys of the FSM state in meta (relative to meta's FSM namespace).
const (
	stateKeyCluster = "cluster"
	stateKeyPID     = "pid"
	stateKeyTopic   = "topic/"
)

// state is the materialised metadata. Topic values are never modified once
// they are in the map (a change stores a new *Topic), so the FSM can read
// them without copying and readers copy them under the read lock.
type state struct {
	clusterID string
	nextPID   int64
	topics    map[string]*Topic
	// collisions maps collisionKey(name) to the existing topic's name.
	collisions map[string]string
}

func newState() state {
	return state{topics: map[string]*Topic{}, collisions: map[string]string{}}
}

// result is what an applied command returns through raft's ApplyFuture.
type result struct {
	topic     *Topic
	firstPID  int64
	clusterID string
	err       error
}

// effect is a planned change: computed from a command and the current state
// without modifying either, then persisted and published by the FSM. The
// proposer runs the same plan to validate (and answer validateOnly) before
// a command reaches the log.
type effect struct {
	put       *Topic // store this topic (new or changed)
	del       string // delete this topic
	prev      *Topic // the topic before the change, for events
	kind      EventKind
	nextPID   int64 // >0: new producer id counter
	clusterID string
	result    result
}

// plan computes the effect of cmd on st. It must be deterministic: it may
// depend only on cmd and st, never on time, randomness or local options,
// because every replica runs it and they must agree.
func plan(cmd *command, st *state) effect {
	var e effect
	e.result.err = planInto(&e, cmd, st)
	if e.result.err != nil {
		return effect{result: result{err: e.result.err}}
	}
	return e
}

func planInto(e *effect, cmd *command, st *state) error {
	switch cmd.Op {
	case opInitCluster:
		e.result.clusterID = st.clusterID
		if st.clusterID == "" {
			if cmd.ClusterID == "" {
				return fmt.Errorf("%w: empty cluster id", ErrInvalidRequest)
			}
			e.clusterID = cmd.ClusterID
			e.result.clusterID = cmd.ClusterID
		}
		return nil

	case opCreateTopic:
		if err := ValidateTopicName(cmd.Topic); err != nil {
			return err
		}
		if _, ok := st.topics[cmd.Topic]; ok {
			return fmt.Errorf("%w: %q", ErrTopicExists, cmd.Topic)
		}
		if other, ok := st.collisions[collisionKey(cmd.Topic)]; ok {
			return fmt.Errorf("%w: %q collides with existing topic %q ('.' and '_' are interchangeable in metric names)", ErrInvalidTopicName, cmd.Topic, other)
		}
		n := len(cmd.Partitions)
		if n < 1 || n > MaxPartitions {
			return fmt.Errorf("%w: %d partitions; use 1 to %d", ErrInvalidPartitions, n, MaxPartitions)
		}
		if err := validatePartitions(cmd.Partitions, len(cmd.Partitions[0].Replicas)); err != nil {
			return err
		}
		id, err := uuid.Parse(cmd.TopicID)
		if err != nil || id == (uuid.UUID{}) {
			return fmt.Errorf("%w: bad topic id %q", ErrInvalidRequest, cmd.TopicID)
		}
		if err := validateConfigs(cmd.Configs); err != nil {
			return err
		}
		t := &Topic{
			Name:       cmd.Topic,
			ID:         id,
			Internal:   cmd.Internal,
			Partitions: recordsToPartitions(0, cmd.Partitions),
			Configs:    maps.Clone(cmd.Configs),
		}
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		e.put, e.kind, e.result.topic = t, TopicCreated, t
		return nil

	case opDeleteTopic:
		t, ok := st.topics[cmd.Topic]
		if !ok {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, cmd.Topic)
		}
		e.del, e.prev, e.kind, e.result.topic = t.Name, t, TopicDeleted, t
		return nil

	case opCreatePartitions:
		t, ok := st.topics[cmd.Topic]
		if !ok {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, cmd.Topic)
		}
		cur := int32(len(t.Partitions))
		if cmd.Total <= cur {
			return fmt.Errorf("%w: topic %q has %d partitions; the new total must be greater", ErrInvalidPartitions, t.Name, cur)
		}
		if cmd.Total > MaxPartitions {
			return fmt.Errorf("%w: %d partitions; the limit is %d", ErrInvalidPartitions, cmd.Total, MaxPartitions)
		}
		if int64(len(cmd.Partitions)) != int64(cmd.Total-cur) {
			return fmt.Errorf("%w: %d new partitions assigned for %d -> %d (concurrent change?)", ErrInvalidPartitions, len(cmd.Partitions), cur, cmd.Total)
		}
		if err := validatePartitions(cmd.Partitions, len(t.Partitions[0].Replicas)); err != nil {
			return err
		}
		nt := *t
		nt.Partitions = append(append([]Partition(nil), t.Partitions...), recordsToPartitions(cur, cmd.Partitions)...)
		e.put, e.prev, e.kind, e.result.topic = &nt, t, PartitionsAdded, &nt
		return nil

	case opAlterConfigs, opReplaceConfigs:
		t, ok := st.topics[cmd.Topic]
		if !ok {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, cmd.Topic)
		}
		var next map[string]string
		if cmd.Op == opAlterConfigs {
			var err error
			if next, err = applyConfigOps(t.Configs, cmd.ConfigOps); err != nil {
				return err
			}
		} else {
			if err := validateConfigs(cmd.Configs); err != nil {
				return err
			}
			next = maps.Clone(cmd.Configs)
			if next == nil {
				next = map[string]string{}
			}
		}
		e.result.topic = t
		if maps.Equal(next, t.Configs) {
			return nil // nothing to store or announce
		}
		nt := *t
		nt.Configs = next
		e.put, e.prev, e.kind, e.result.topic = &nt, t, ConfigsChanged, &nt
		return nil

	case opAllocProducerIDs:
		if cmd.Count < 1 || cmd.Count > MaxProducerIDBlock {
			return fmt.Errorf("%w: producer id block of %d; use 1 to %d", ErrInvalidRequest, cmd.Count, MaxProducerIDBlock)
		}
		if st.nextPID > math.MaxInt64-cmd.Count {
			return ErrProducerIDsExhausted
		}
		e.result.firstPID = st.nextPID
		e.nextPID = st.nextPID + cmd.Count
		return nil
	}
	// A command from a newer version: reject it the same way everywhere.
	return fmt.Errorf("%w: unknown command %q", ErrInvalidRequest, cmd.Op)
}

// write adds the effect's persistent changes to b.
func (e *effect) write(b *meta.StateBatch) error {
	if e.put != nil {
		v, err := encodeTopic(e.put)
		if err != nil {
			return err
		}
		b.Set([]byte(stateKeyTopic+e.put.Name), v)
	}
	if e.del != "" {
		b.Delete([]byte(stateKeyTopic + e.del))
	}
	if e.nextPID > 0 {
		b.Set([]byte(stateKeyPID), binary.BigEndian.AppendUint64(nil, uint64(e.nextPID)))
	}
	if e.clusterID != "" {
		b.Set([]byte(stateKeyCluster), []byte(e.clusterID))
	}
	return nil
}

// mutate applies the effect to st. The caller holds the write lock.
func (e *effect) mutate(st *state) {
	if e.put != nil {
		st.topics[e.put.Name] = e.put
		st.collisions[collisionKey(e.put.Name)] = e.put.Name
	}
	if e.del != "" {
		delete(st.topics, e.del)
		delete(st.collisions, collisionKey(e.del))
	}
	if e.nextPID > 0 {
		st.nextPID = e.nextPID
	}
	if e.clusterID != "" {
		st.clusterID = e.clusterID
	}
}

// loadState reads the materialised state and its applied index from db.
func loadState(db *meta.DB) (state, uint64, error) {
	st := newState()
	applied, err := db.AppliedIndex()
	if err != nil {
		return st, 0, err
	}
	v, err := db.GetState([]byte(stateKeyCluster))
	switch {
	case err == nil:
		st.clusterID = string(v)
	case !errors.Is(err, meta.ErrNotFound):
		return st, 0, err
	}
	v, err = db.GetState([]byte(stateKeyPID))
	switch {
	case err == nil:
		if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) < 0 {
			return st, 0, fmt.Errorf("%w: producer id counter holds %d bytes", meta.ErrCorrupt, len(v))
		}
		st.nextPID = int64(binary.BigEndian.Uint64(v))
	case !errors.Is(err, meta.ErrNotFound):
		return st, 0, err
	}
	err = db.ScanState([]byte(stateKeyTopic), func(k, v []byte) error {
		t, err := decodeTopic(v)
		if err != nil {
			return fmt.Errorf("%w: topic %q: %v", meta.ErrCorrupt, k, err)
		}
		if t.Name != string(k) {
			return fmt.Errorf("%w: topic record %q holds topic %q", meta.ErrCorrupt, k, t.Name)
		}
		st.topics[t.Name] = t
		st.collisions[collisionKey(t.Name)] = t.Name
		return nil
	})
	if err != nil {
		return st, 0, err
	}
	return st, applied, nil
}

// fsm adapts the Controller to raft.FSM. Raft calls Apply, Snapshot and
// Restore from one goroutine, never concurrently.
type fsm struct{ c *Controller }

var _ raft.FSM = (*fsm)(nil)

// Apply folds one committed command into the state. Entries at or below the
// persisted applied index are already in the state (Raft replays its log
// after a restart) and are skipped.
func (f *fsm) Apply(l *raft.Log) any {
	c := f.c
	if l.Index <= c.applied {
		return nil // nobody waits on a replayed entry
	}
	if err := c.broken.Load(); err != nil {
		return &result{err: *err}
	}
	var e effect
	cmd, err := decodeCommand(l.Data)
	if err != nil {
		e.result.err = err
	} else {
		c.mu.RLock()
		e = plan(cmd, &c.st)
		c.mu.RUnlock()
	}
	b := c.db.NewStateBatch()
	if e.result.err == nil {
		err = e.write(b)
	}
	if err == nil {
		// The applied index advances even for rejected commands, so a
		// restart does not re-run them.
		err = b.Commit(l.Index)
	}
	if err != nil {
		c.setBroken(fmt.Errorf("%w: index %d: %v", ErrStateBroken, l.Index, err))
		return &result{err: *c.broken.Load()}
	}
	c.applied = l.Index
	if e.result.err != nil {
		c.logger.Debug("metadata command rejected", "index", l.Index, "error", e.result.err)
		return &e.result
	}
	c.publish(func(st *state) []Event {
		e.mutate(st)
		if e.kind == 0 {
			return nil
		}
		ev := Event{Kind: e.kind}
		if e.put != nil {
			ev.Topic = *e.put
		} else {
			ev.Topic = *e.prev
		}
		if e.prev != nil && e.kind != TopicDeleted {
			ev.Prev = *e.prev
		}
		return []Event{ev}
	})
	return &e.result
}

// Snapshot captures the state for Raft. meta makes it durable first: Raft
// may compact its log up to the snapshot's index as soon as it is stored.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.c.broken.Load(); err != nil {
		return nil, *err
	}
	ss, err := f.c.db.SnapshotState()
	if err != nil {
		return nil, fmt.Errorf("controller: snapshot: %w", err)
	}
	return &fsmSnapshot{ss: ss}, nil
}

// Restore replaces the state with a snapshot (a follower catching up from
// the leader's snapshot). Listeners see the difference as events.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	c := f.c
	if err := c.db.RestoreState(rc); err != nil {
		return fmt.Errorf("controller: restore snapshot: %w", err)
	}
	st, applied, err := loadState(c.db)
	if err != nil {
		c.setBroken(fmt.Errorf("%w: reload after restore: %v", ErrStateBroken, err))
		return fmt.Errorf("controller: reload after restore: %w", err)
	}
	c.applied = applied
	c.broken.Store(nil)
	c.publish(func(cur *state) []Event {
		evs := diffStates(cur, &st)
		*cur = st
		return evs
	})
	return nil
}

// diffStates returns the events that turn a into b, in name order per kind.
func diffStates(a, b *state) []Event {
	var evs []Event
	for _, name := range sortedNames(a.topics) {
		old := a.topics[name]
		nt, ok := b.topics[name]
		switch {
		case !ok || nt.ID != old.ID:
			evs = append(evs, Event{Kind: TopicDeleted, Topic: *old})
		default:
			if len(nt.Partitions) > len(old.Partitions) {
				evs = append(evs, Event{Kind: PartitionsAdded, Topic: *nt, Prev: *old})
			}
			if !maps.Equal(nt.Configs, old.Configs) {
				evs = append(evs, Event{Kind: ConfigsChanged, Topic: *nt, Prev: *old})
			}
		}
	}
	for _, name := range sortedNames(b.topics) {
		nt := b.topics[name]
		if old, ok := a.topics[name]; !ok || old.ID != nt.ID {
			evs = append(evs, Event{Kind: TopicCreated, Topic: *nt})
		}
	}
	return evs
}

type fsmSnapshot struct{ ss *meta.StateSnapshot }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.ss.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("controller: persist snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("controller: persist snapshot: %w", err)
	}
	return nil
}

func (s *fsmSnapshot) Release() { _ = s.ss.Close() }
