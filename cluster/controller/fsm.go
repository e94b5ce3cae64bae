package controller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/meta"
)

// Keys of the FSM state in meta (relative to meta's FSM namespace).
const (
	stateKeyCluster = "cluster"
	stateKeyPID     = "pid"
	stateKeyTopic   = "topic/"
	stateKeyBroker  = "broker/"
)

// state is the materialised metadata. Topic values are never modified once
// they are in the map (a change stores a new *Topic), so the FSM can read
// them without copying and readers copy them under the read lock.
type state struct {
	// applied is the last log index folded in (FSM entries only; Raft's
	// own configuration entries do not count).
	applied   uint64
	clusterID string
	nextPID   int64
	topics    map[string]*metadata.Topic
	byID      map[[16]byte]string
	// collisions maps collisionKey(name) to the existing topic's name.
	collisions map[string]string
	brokers    map[int32]metadata.Broker
	// sec is the security metadata: ACLs, SCRAM credentials, quotas
	// (security.go).
	sec securityState
}

func newState() state {
	return state{topics: map[string]*metadata.Topic{}, byID: map[[16]byte]string{},
		collisions: map[string]string{}, brokers: map[int32]metadata.Broker{}, sec: newSecurityState()}
}

func (st *state) checkCollision(name string) error {
	if other, ok := st.collisions[collisionKey(name)]; ok && other != name {
		return collisionErr(name, other)
	}
	return nil
}

func collisionErr(name, other string) error {
	return fmt.Errorf("%w: %q collides with existing topic %q ('.' and '_' are interchangeable in metric names)",
		metadata.ErrInvalidTopicName, name, other)
}

// image is the whole state as a snapshot delta.
func (st *state) image() metadata.Delta {
	d := metadata.Delta{Index: st.applied, Snapshot: true}
	for _, name := range sortedNames(st.topics) {
		d.Changes = append(d.Changes, &metadata.TopicCreated{Topic: st.topics[name].Clone()})
	}
	for _, id := range slices.Sorted(maps.Keys(st.brokers)) {
		d.Changes = append(d.Changes, &metadata.BrokerRegistered{Broker: st.brokers[id]})
	}
	return d
}

// result is what an applied entry returns through raft's ApplyFuture.
type result struct {
	topic    *metadata.Topic
	firstPID int64
	err      error
}

// txn applies one entry's records to a copy-on-write view of a state: the
// state itself is not changed until mutate, so an entry applies all or
// nothing, and the proposer can dry-run records (validateOnly) on the live
// state under its read lock.
type txn struct {
	st *state
	// topics holds every name the entry touched: the topic after it (a
	// copy the txn owns), or nil if deleted.
	topics      map[string]*metadata.Topic
	created     map[string]bool
	configsSeen map[string]bool
	brokers     map[int32]metadata.Broker
	nextPID     int64 // >0: new producer id counter
	clusterID   string
	intents     []intent
	res         result
	resName     string
	// sec holds the entry's security changes (nil: none).
	sec *secTxn
}

// intent is a change to announce once the entry is applied, resolved
// against the final state (so a partition created with its topic carries
// the topic's configs from the same entry).
type intent struct {
	kind    intentKind
	name    string
	part    int32
	removed *metadata.Topic
	broker  metadata.Broker
}

type intentKind int

const (
	intentCreated intentKind = iota + 1
	intentPartition
	intentPartitionAdded
	intentConfigs
	intentDeleted
	intentBroker
)

func newTxn(st *state) *txn {
	return &txn{st: st, topics: map[string]*metadata.Topic{}, created: map[string]bool{},
		configsSeen: map[string]bool{}, brokers: map[int32]metadata.Broker{}}
}

// applyRecords applies records to st's view in order and checks the
// result; an error means the entry changes nothing.
func applyRecords(st *state, recs []record) (*txn, error) {
	x := newTxn(st)
	for _, r := range recs {
		if err := x.apply(r); err != nil {
			return nil, err
		}
	}
	if err := x.finish(); err != nil {
		return nil, err
	}
	x.resolveResult()
	return x, nil
}

func (x *txn) topic(name string) (*metadata.Topic, bool) {
	if t, ok := x.topics[name]; ok {
		return t, t != nil
	}
	t, ok := x.st.topics[name]
	return t, ok
}

func (x *txn) nameByID(s string) (string, error) {
	id, err := parseTopicID(s)
	if err != nil {
		return "", err
	}
	for name, t := range x.topics {
		if t != nil && t.ID == id {
			return name, nil
		}
	}
	if name, ok := x.st.byID[id]; ok {
		if _, touched := x.topics[name]; !touched {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w: topic id %s", metadata.ErrUnknownTopic, s)
}

// edit returns the txn's own copy of a topic, to modify.
func (x *txn) edit(name string) (*metadata.Topic, error) {
	if t, ok := x.topics[name]; ok {
		if t == nil {
			return nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
		}
		return t, nil
	}
	t, ok := x.st.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
	}
	c := t.Clone()
	x.topics[name] = &c
	return &c, nil
}

// editByID is edit for the topic with id s.
func (x *txn) editByID(s string) (string, *metadata.Topic, error) {
	name, err := x.nameByID(s)
	if err != nil {
		return "", nil, err
	}
	t, err := x.edit(name)
	return name, t, err
}

func (x *txn) touch(name string) {
	if x.resName == "" {
		x.resName = name
	}
}

func (x *txn) apply(r record) error {
	switch r := r.(type) {
	case *clusterRecord:
		if x.st.clusterID != "" || x.clusterID != "" {
			return nil // the first choice stays
		}
		if r.ClusterID == "" {
			return fmt.Errorf("%w: empty cluster id", metadata.ErrInvalidRequest)
		}
		x.clusterID = r.ClusterID

	case *registerBrokerRecord:
		b := metadata.Broker{ID: r.BrokerID, Host: r.Host, Port: r.Port, Rack: r.Rack, Incarnation: r.Incarnation}
		if err := validateBroker(b); err != nil {
			return err
		}
		x.brokers[b.ID] = b
		x.intents = append(x.intents, intent{kind: intentBroker, broker: b})

	case *fenceBrokerRecord:
		return x.setFenced(r.BrokerID, true)

	case *unfenceBrokerRecord:
		return x.setFenced(r.BrokerID, false)

	case *topicRecord:
		if err := ValidateTopicName(r.Name); err != nil {
			return err
		}
		if _, ok := x.topic(r.Name); ok {
			return fmt.Errorf("%w: %q", metadata.ErrTopicExists, r.Name)
		}
		if err := x.checkCollision(r.Name); err != nil {
			return err
		}
		id, err := parseTopicID(r.TopicID)
		if err != nil {
			return err
		}
		if _, err := x.nameByID(r.TopicID); err == nil {
			return fmt.Errorf("%w: topic id %s is in use", metadata.ErrInvalidRequest, r.TopicID)
		}
		x.topics[r.Name] = &metadata.Topic{Name: r.Name, ID: id, Internal: r.Internal, Configs: map[string]string{}}
		x.created[r.Name] = true
		x.touch(r.Name)
		x.intents = append(x.intents, intent{kind: intentCreated, name: r.Name})

	case *partitionRecord:
		name, t, err := x.editByID(r.TopicID)
		if err != nil {
			return err
		}
		n := int32(len(t.Partitions))
		if r.Partition != n {
			return fmt.Errorf("%w: partition %d of %q, which has %d (concurrent change?)", metadata.ErrInvalidPartitions, r.Partition, name, n)
		}
		if n >= metadata.MaxPartitions {
			return fmt.Errorf("%w: %d partitions; the limit is %d", metadata.ErrInvalidPartitions, n+1, metadata.MaxPartitions)
		}
		if r.Leader == metadata.NoLeader {
			return fmt.Errorf("%w: new partition %d of %q has no leader", metadata.ErrInvalidRequest, r.Partition, name)
		}
		pa := partitionAssignment{Replicas: r.Replicas, Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, ISR: r.ISR}
		rf := len(r.Replicas)
		if n > 0 {
			rf = len(t.Partitions[0].Replicas)
		}
		if err := validatePartitions([]partitionAssignment{pa}, rf); err != nil {
			return err
		}
		t.Partitions = append(t.Partitions, metadata.Partition{ID: n, Replicas: slices.Clone(r.Replicas),
			Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, ISR: slices.Clone(r.ISR)})
		x.touch(name)
		x.intents = append(x.intents, intent{kind: intentPartitionAdded, name: name, part: n})

	case *partitionChangeRecord:
		name, t, err := x.editByID(r.TopicID)
		if err != nil {
			return err
		}
		if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
			return fmt.Errorf("%w: %q has no partition %d", metadata.ErrUnknownTopic, name, r.Partition)
		}
		p := &t.Partitions[r.Partition]
		if r.Replicas != nil {
			p.Replicas = slices.Clone(r.Replicas)
		}
		if r.ISR != nil {
			p.ISR = slices.Clone(r.ISR)
		}
		if r.Offline != nil {
			p.Offline = nonEmpty(slices.Clone(*r.Offline))
		}
		if r.Leader != nil && *r.Leader != p.Leader {
			if p.LeaderEpoch == math.MaxInt32 {
				return fmt.Errorf("%w: leader epoch of %s-%d exhausted", metadata.ErrInvalidRequest, name, r.Partition)
			}
			p.Leader = *r.Leader
			p.LeaderEpoch++
		}
		if p.PartitionEpoch == math.MaxInt32 {
			return fmt.Errorf("%w: partition epoch of %s-%d exhausted", metadata.ErrInvalidRequest, name, r.Partition)
		}
		p.PartitionEpoch++
		pa := partitionAssignment{Replicas: p.Replicas, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, ISR: p.ISR, Offline: p.Offline}
		if err := validatePartitions([]partitionAssignment{pa}, len(p.Replicas)); err != nil {
			return err
		}
		x.touch(name)
		x.intents = append(x.intents, intent{kind: intentPartition, name: name, part: r.Partition})

	case *configRecord:
		if r.ResourceType != configResourceTopic {
			return fmt.Errorf("%w: config resource type %d", metadata.ErrInvalidRequest, r.ResourceType)
		}
		t, err := x.edit(r.ResourceName)
		if err != nil {
			return err
		}
		if r.Value != nil {
			t.Configs[r.Name] = *r.Value
		} else {
			delete(t.Configs, r.Name)
		}
		x.touch(r.ResourceName)
		if !x.configsSeen[r.ResourceName] {
			x.configsSeen[r.ResourceName] = true
			x.intents = append(x.intents, intent{kind: intentConfigs, name: r.ResourceName})
		}

	case *removeTopicRecord:
		name, err := x.nameByID(r.TopicID)
		if err != nil {
			return err
		}
		t, _ := x.topic(name)
		x.topics[name] = nil
		x.touch(name)
		x.intents = append(x.intents, intent{kind: intentDeleted, name: name, removed: t})

	case *producerIDsRecord:
		cur := x.st.nextPID
		if x.nextPID > 0 {
			cur = x.nextPID
		}
		if r.NextProducerID <= cur || r.NextProducerID-cur > MaxProducerIDBlock {
			return fmt.Errorf("%w: producer id block %d..%d", metadata.ErrInvalidRequest, cur, r.NextProducerID)
		}
		x.res.firstPID = cur
		x.nextPID = r.NextProducerID

	default:
		if handled, err := x.applySecurity(r); handled {
			return err
		}
		return fmt.Errorf("%w: unknown record %T", metadata.ErrInvalidRequest, r)
	}
	return nil
}

// setFenced fences or unfences a registered broker.
func (x *txn) setFenced(id int32, fenced bool) error {
	b, ok := x.brokers[id]
	if !ok {
		b, ok = x.st.brokers[id]
	}
	if !ok {
		return fmt.Errorf("%w: broker %d is not registered", metadata.ErrBrokerNotAvailable, id)
	}
	b.Fenced = fenced
	x.brokers[id] = b
	x.intents = append(x.intents, intent{kind: intentBroker, broker: b})
	return nil
}

func (x *txn) checkCollision(name string) error {
	key := collisionKey(name)
	for other, t := range x.topics {
		if t != nil && other != name && collisionKey(other) == key {
			return collisionErr(name, other)
		}
	}
	if other, ok := x.st.collisions[key]; ok && other != name {
		if _, touched := x.topics[other]; !touched {
			return collisionErr(name, other)
		}
	}
	return nil
}

// finish checks the touched topics as a whole: every topic has
// partitions, and a topic's override set is valid together.
func (x *txn) finish() error {
	for _, name := range sortedNames(x.topics) {
		t := x.topics[name]
		if t == nil {
			continue
		}
		if len(t.Partitions) == 0 {
			return fmt.Errorf("%w: topic %q would have no partitions", metadata.ErrInvalidPartitions, name)
		}
		if x.created[name] || x.configsSeen[name] {
			if err := validateConfigs(t.Configs); err != nil {
				return err
			}
		}
	}
	return nil
}

func (x *txn) resolveResult() {
	if x.resName == "" {
		return
	}
	if t := x.topics[x.resName]; t != nil {
		x.res.topic = t
		return
	}
	for _, in := range x.intents {
		if in.kind == intentDeleted && in.name == x.resName {
			x.res.topic = in.removed
		}
	}
}

// changes are the entry's typed changes, in record order, resolved
// against the state after it.
func (x *txn) changes() []metadata.Change {
	var out []metadata.Change
	for _, in := range x.intents {
		t := x.topics[in.name]
		switch in.kind {
		case intentCreated:
			if t != nil {
				out = append(out, &metadata.TopicCreated{Topic: t.Clone()})
			}
		case intentPartition, intentPartitionAdded:
			if t != nil && !x.created[in.name] {
				out = append(out, &metadata.PartitionChanged{Topic: t.Name, TopicID: t.ID,
					Partition: t.Partitions[in.part].Clone(), Configs: maps.Clone(t.Configs),
					Added: in.kind == intentPartitionAdded})
			}
		case intentConfigs:
			if t != nil && !x.created[in.name] {
				out = append(out, &metadata.ConfigsChanged{Topic: t.Name, Configs: maps.Clone(t.Configs)})
			}
		case intentDeleted:
			out = append(out, &metadata.TopicDeleted{Topic: in.removed.Clone()})
		case intentBroker:
			out = append(out, &metadata.BrokerRegistered{Broker: in.broker})
		}
	}
	return out
}

// write adds the entry's persistent changes to b.
func (x *txn) write(b *meta.StateBatch) error {
	for _, name := range sortedNames(x.topics) {
		t := x.topics[name]
		if t == nil {
			b.Delete([]byte(stateKeyTopic + name))
			continue
		}
		v, err := encodeTopic(t)
		if err != nil {
			return err
		}
		b.Set([]byte(stateKeyTopic+name), v)
	}
	for _, id := range slices.Sorted(maps.Keys(x.brokers)) {
		v, err := encodeBroker(x.brokers[id])
		if err != nil {
			return err
		}
		b.Set([]byte(stateKeyBroker+strconv.FormatInt(int64(id), 10)), v)
	}
	if x.nextPID > 0 {
		b.Set([]byte(stateKeyPID), binary.BigEndian.AppendUint64(nil, uint64(x.nextPID)))
	}
	if x.clusterID != "" {
		b.Set([]byte(stateKeyCluster), []byte(x.clusterID))
	}
	if x.sec != nil {
		return x.sec.write(b)
	}
	return nil
}

// mutate applies the entry to st. The caller holds the write lock.
func (x *txn) mutate(st *state) {
	for name, t := range x.topics {
		if old, ok := st.topics[name]; ok {
			delete(st.byID, old.ID)
			if st.collisions[collisionKey(name)] == name {
				delete(st.collisions, collisionKey(name))
			}
			delete(st.topics, name)
		}
		if t != nil {
			st.addTopic(t)
		}
	}
	maps.Copy(st.brokers, x.brokers)
	if x.nextPID > 0 {
		st.nextPID = x.nextPID
	}
	if x.clusterID != "" {
		st.clusterID = x.clusterID
	}
}

func (st *state) addTopic(t *metadata.Topic) {
	st.topics[t.Name] = t
	st.byID[t.ID] = t.Name
	st.collisions[collisionKey(t.Name)] = t.Name
}

// loadState reads the materialised state and its applied index from db.
func loadState(db *meta.DB) (state, error) {
	st := newState()
	applied, err := db.AppliedIndex()
	if err != nil {
		return st, err
	}
	st.applied = applied
	v, err := db.GetState([]byte(stateKeyCluster))
	switch {
	case err == nil:
		st.clusterID = string(v)
	case !errors.Is(err, meta.ErrNotFound):
		return st, err
	}
	v, err = db.GetState([]byte(stateKeyPID))
	switch {
	case err == nil:
		if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) < 0 {
			return st, fmt.Errorf("%w: producer id counter holds %d bytes", meta.ErrCorrupt, len(v))
		}
		st.nextPID = int64(binary.BigEndian.Uint64(v))
	case !errors.Is(err, meta.ErrNotFound):
		return st, err
	}
	err = db.ScanState([]byte(stateKeyTopic), func(k, v []byte) error {
		t, err := decodeTopic(v)
		if err != nil {
			return fmt.Errorf("%w: topic %q: %v", meta.ErrCorrupt, k, err)
		}
		if t.Name != string(k) {
			return fmt.Errorf("%w: topic record %q holds topic %q", meta.ErrCorrupt, k, t.Name)
		}
		st.addTopic(t)
		return nil
	})
	if err != nil {
		return st, err
	}
	err = db.ScanState([]byte(stateKeyBroker), func(k, v []byte) error {
		b, err := decodeBroker(v)
		if err != nil {
			return fmt.Errorf("%w: broker %q: %v", meta.ErrCorrupt, k, err)
		}
		if strconv.FormatInt(int64(b.ID), 10) != string(k) {
			return fmt.Errorf("%w: broker record %q holds broker %d", meta.ErrCorrupt, k, b.ID)
		}
		st.brokers[b.ID] = b
		return nil
	})
	if err != nil {
		return st, err
	}
	return st, loadSecurity(db, &st)
}

// fsm adapts the Controller to raft.FSM. Raft calls Apply, Snapshot and
// Restore from one goroutine, never concurrently.
type fsm struct{ c *Controller }

var _ raft.FSM = (*fsm)(nil)

// Apply folds one committed entry into the state and publishes its delta.
// Entries at or below the persisted applied index are already in the state
// (Raft replays its log after a restart) and are skipped. Apply does no
// work for subscribers beyond queueing the delta: hosting partitions
// happens in their own goroutines.
func (f *fsm) Apply(l *raft.Log) any {
	c := f.c
	if l.Index <= c.applied {
		return nil // nobody waits on a replayed entry
	}
	if err := c.broken.Load(); err != nil {
		return &result{err: *err}
	}
	c.mu.RLock()
	recs, err := decodeEntry(l.Data, &c.st)
	var x *txn
	if err == nil {
		x, err = applyRecords(&c.st, recs)
	}
	c.mu.RUnlock()
	if errors.Is(err, errNewerEntry) {
		// Not a rejected change: skipping it would apply the rest of the
		// log without it. Stop here, without advancing the applied index.
		c.setBroken(fmt.Errorf("%w: index %d: %v", ErrStateBroken, l.Index, err))
		return &result{err: *c.broken.Load()}
	}
	rejected := err
	b := c.db.NewStateBatch()
	var werr error
	if rejected == nil {
		werr = x.write(b)
	}
	if werr == nil {
		// The applied index advances even for rejected entries, so a
		// restart does not re-run them.
		werr = b.Commit(l.Index)
	}
	if werr != nil {
		c.setBroken(fmt.Errorf("%w: index %d: %v", ErrStateBroken, l.Index, werr))
		return &result{err: *c.broken.Load()}
	}
	c.applied = l.Index
	if rejected != nil {
		c.logger.Debug("metadata entry rejected", "index", l.Index, "error", rejected)
		c.publish(func(st *state) metadata.Delta {
			st.applied = l.Index
			return metadata.Delta{Index: l.Index}
		})
		return &result{err: rejected}
	}
	c.publish(func(st *state) metadata.Delta {
		x.mutate(st)
		if x.sec != nil {
			x.sec.mutate(&st.sec, l.Index)
			c.publishSecurity(&st.sec)
		}
		st.applied = l.Index
		return metadata.Delta{Index: l.Index, Changes: x.changes()}
	})
	return &x.res
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
// the leader's snapshot). Subscribers get the new image as a snapshot
// delta.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	c := f.c
	if err := c.db.RestoreState(rc); err != nil {
		return fmt.Errorf("controller: restore snapshot: %w", err)
	}
	st, err := loadState(c.db)
	if err != nil {
		c.setBroken(fmt.Errorf("%w: reload after restore: %v", ErrStateBroken, err))
		return fmt.Errorf("controller: reload after restore: %w", err)
	}
	c.applied = st.applied
	c.broken.Store(nil)
	c.publish(func(cur *state) metadata.Delta {
		*cur = st
		c.publishSecurity(&cur.sec)
		return cur.image()
	})
	return nil
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

func sortedNames[V any](m map[string]V) []string {
	names := slices.Collect(maps.Keys(m))
	sort.Strings(names)
	return names
}

// topicIDString is a topic id as records carry it.
func topicIDString(id [16]byte) string { return uuid.UUID(id).String() }
