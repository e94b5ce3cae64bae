package controller

import (
	"fmt"
	"slices"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// The planners of leadership and ISR changes: fencing and unfencing a
// broker, a leader's AlterPartition, a broker's report of a replica's
// storage, the preferred-leader rebalance. Like the others (plan.go) they
// depend only on their arguments; eligible says which brokers may lead or
// join an ISR (registered, unfenced, and live as far as the active
// controller can tell), so liveness is an input. Whether a broker's
// replica of a partition may lead or join that partition's ISR also
// depends on the partition: a replica its broker reported offline (its
// storage failed) may not (eligibleFor).

// eligibleIn returns the eligibility rule over st's brokers: registered,
// unfenced, and live (live nil: every unfenced broker is).
func eligibleIn(st *state, live func(int32) bool) func(int32) bool {
	return func(id int32) bool {
		b, ok := st.brokers[id]
		return ok && !b.Fenced && (live == nil || live(id))
	}
}

// eligibleFor narrows a broker eligibility rule to p's replicas: a
// replica p lists offline is not eligible whatever its broker is.
func eligibleFor(p *metadata.Partition, eligible func(int32) bool) func(int32) bool {
	return func(id int32) bool { return !slices.Contains(p.Offline, id) && eligible(id) }
}

// nonEmpty is s, or nil when s is empty: an empty offline set is stored
// and published as nil, so a partition reads the same before and after a
// restart.
func nonEmpty(s []int32) []int32 {
	if len(s) == 0 {
		return nil
	}
	return s
}

// forEachPartition calls fn for every partition in topic-name then
// partition order (deterministic), collecting the records it returns.
func forEachPartition(st *state, fn func(t *metadata.Topic, p *metadata.Partition) record) []record {
	var out []record
	for _, name := range sortedNames(st.topics) {
		t := st.topics[name]
		for i := range t.Partitions {
			if r := fn(t, &t.Partitions[i]); r != nil {
				out = append(out, r)
			}
		}
	}
	return out
}

func changeOf(t *metadata.Topic, p *metadata.Partition) *partitionChangeRecord {
	return &partitionChangeRecord{TopicID: topicIDString(t.ID), Partition: p.ID}
}

// planFenceBroker fences broker id (unless it is already) and takes it out
// of every partition it serves: each leadership moves to the first
// eligible ISR member in replica order (a new leader epoch), and it leaves
// every ISR. An ISR is never left empty: where it was the last member it
// stays, and the partition is offline (Leader NoLeader) until it returns,
// as Kafka without eligible leader replicas does; unclean election is off.
// Run again, it finds nothing left to do.
func planFenceBroker(st *state, id int32, eligible func(int32) bool) ([]record, error) {
	b, ok := st.brokers[id]
	if !ok {
		return nil, fmt.Errorf("%w: broker %d is not registered", metadata.ErrBrokerNotAvailable, id)
	}
	var recs []record
	if !b.Fenced {
		recs = append(recs, &fenceBrokerRecord{BrokerID: id})
	}
	recs = append(recs, forEachPartition(st, func(t *metadata.Topic, p *metadata.Partition) record {
		if !slices.Contains(p.ISR, id) {
			return nil
		}
		ch := changeOf(t, p)
		isr := slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return r == id })
		if len(isr) == 0 {
			if p.Leader != id {
				return nil // already offline, waiting for it
			}
			ch.Leader = ptr(metadata.NoLeader)
			return ch
		}
		ch.ISR = isr
		if p.Leader == id {
			others := eligibleFor(p, func(r int32) bool { return r != id && eligible(r) })
			ch.Leader = ptr(firstEligible(p.Replicas, isr, others))
		}
		return ch
	})...)
	return recs, nil
}

// firstEligible is the first replica (in assignment order, so the
// preferred replica wins when it can) that is in isr and eligible, or
// NoLeader.
func firstEligible(replicas, isr []int32, eligible func(int32) bool) int32 {
	for _, r := range replicas {
		if slices.Contains(isr, r) && eligible(r) {
			return r
		}
	}
	return metadata.NoLeader
}

// planUnfenceBroker unfences broker id (unless it is not fenced) and
// elects leaders for the offline partitions it can lead again.
func planUnfenceBroker(st *state, id int32, eligible func(int32) bool) ([]record, error) {
	b, ok := st.brokers[id]
	if !ok {
		return nil, fmt.Errorf("%w: broker %d is not registered", metadata.ErrBrokerNotAvailable, id)
	}
	var recs []record
	if b.Fenced {
		recs = append(recs, &unfenceBrokerRecord{BrokerID: id})
	}
	return append(recs, planOfflineLeaders(st, func(r int32) bool { return r == id || eligible(r) })...), nil
}

// planOfflineLeaders gives every offline partition a leader from its ISR
// where one is eligible (and not reported offline): a broker that was the
// last ISR member has every committed record (only ISR members are
// elected: unclean election is off).
func planOfflineLeaders(st *state, eligible func(int32) bool) []record {
	return forEachPartition(st, func(t *metadata.Topic, p *metadata.Partition) record {
		if p.Leader != metadata.NoLeader {
			return nil
		}
		l := firstEligible(p.Replicas, p.ISR, eligibleFor(p, eligible))
		if l == metadata.NoLeader {
			return nil
		}
		ch := changeOf(t, p)
		ch.Leader = ptr(l)
		return ch
	})
}

// planAlterPartition checks a leader's ISR proposal with Kafka's
// AlterPartition rules (ReplicationControlManager, KIP-497, KIP-841) and
// returns the change (none if the ISR is already so) and the partition as
// it is now:
//   - the topic (and its id, when given) and partition must exist;
//   - the sender must be the current leader at the current leader epoch
//     (ErrFencedLeaderEpoch: a deposed leader's proposal loses);
//   - it must be based on the current partition epoch
//     (ErrInvalidUpdateVersion: the controller changed the partition since);
//   - the new ISR must hold the leader, distinct replicas only, and every
//     member it adds must be eligible (ErrIneligibleReplica: fenced, not
//     live, not a replica, or its replica is reported offline).
func planAlterPartition(st *state, req metadata.AlterPartitionRequest, eligible func(int32) bool) ([]record, metadata.Partition, error) {
	t, ok := st.topics[req.Topic]
	if !ok || (req.TopicID != [16]byte{} && t.ID != req.TopicID) {
		return nil, metadata.Partition{}, fmt.Errorf("%w: %q (id %s)", metadata.ErrUnknownTopic, req.Topic, topicIDString(req.TopicID))
	}
	if req.Partition < 0 || int(req.Partition) >= len(t.Partitions) {
		return nil, metadata.Partition{}, fmt.Errorf("%w: %q has no partition %d", metadata.ErrUnknownTopic, req.Topic, req.Partition)
	}
	p := &t.Partitions[req.Partition]
	cur := p.Clone()
	tp := fmt.Sprintf("%s-%d", req.Topic, req.Partition)
	if req.LeaderID != p.Leader || req.LeaderEpoch != p.LeaderEpoch {
		return nil, cur, fmt.Errorf("%w: %s: broker %d at leader epoch %d, but the leader is %d at epoch %d",
			metadata.ErrFencedLeaderEpoch, tp, req.LeaderID, req.LeaderEpoch, p.Leader, p.LeaderEpoch)
	}
	if req.PartitionEpoch != p.PartitionEpoch {
		return nil, cur, fmt.Errorf("%w: %s: proposal based on partition epoch %d, the current one is %d",
			metadata.ErrInvalidUpdateVersion, tp, req.PartitionEpoch, p.PartitionEpoch)
	}
	if !slices.Contains(req.NewISR, p.Leader) {
		return nil, cur, fmt.Errorf("%w: %s: new ISR %v without its leader %d", metadata.ErrInvalidRequest, tp, req.NewISR, p.Leader)
	}
	for i, r := range req.NewISR {
		if slices.Contains(req.NewISR[:i], r) {
			return nil, cur, fmt.Errorf("%w: %s: new ISR %v repeats %d", metadata.ErrInvalidRequest, tp, req.NewISR, r)
		}
		if !slices.Contains(p.Replicas, r) {
			return nil, cur, fmt.Errorf("%w: %s: broker %d is not a replica (replicas %v)", metadata.ErrIneligibleReplica, tp, r, p.Replicas)
		}
		if slices.Contains(p.ISR, r) {
			continue
		}
		if slices.Contains(p.Offline, r) {
			return nil, cur, fmt.Errorf("%w: %s: the replica on broker %d is offline (its storage failed)", metadata.ErrIneligibleReplica, tp, r)
		}
		if !eligible(r) {
			return nil, cur, fmt.Errorf("%w: %s: broker %d is fenced or not live", metadata.ErrIneligibleReplica, tp, r)
		}
	}
	// The ISR is kept in replica order, so the same set is the same ISR.
	isr := make([]int32, 0, len(req.NewISR))
	for _, r := range p.Replicas {
		if slices.Contains(req.NewISR, r) {
			isr = append(isr, r)
		}
	}
	if sameSet(isr, p.ISR) {
		return nil, cur, nil
	}
	ch := changeOf(t, p)
	ch.ISR = isr
	return []record{ch}, cur, nil
}

// planReplicaStorage applies broker's report on the storage of its
// replica of a partition (Kafka's offline log directories, KIP-858, at
// partition granularity) and returns the change (none if the partition
// already says so) and the partition as it is now:
//   - the topic (and its id, when given) and partition must exist
//     (ErrUnknownTopic), the broker be registered (ErrBrokerNotAvailable)
//     and one of the partition's replicas (ErrInvalidRequest);
//   - offline: the replica is added to Offline and leaves the ISR unless
//     it is its last member (an ISR is never empty); if it leads, the
//     leadership moves to the first eligible ISR member that is not
//     offline, in replica order (a new leader epoch), or to NoLeader if
//     there is none (unclean election is off: the partition waits);
//   - online: the replica leaves Offline, and a partition without a
//     leader elects the first eligible ISR member now that it is online
//     (it, when it was the last one). It rejoins the ISR of a partition
//     that has a leader by catching up, through the leader's
//     AlterPartition, as any follower does.
//
// A report says what the storage is now, not what changed, so it may be
// sent again: a broker resends it until the metadata agrees.
func planReplicaStorage(st *state, a replicaStorageArgs, eligible func(int32) bool) ([]record, metadata.Partition, error) {
	t, ok := st.topics[a.Topic]
	if !ok || (a.TopicID != [16]byte{} && t.ID != a.TopicID) {
		return nil, metadata.Partition{}, fmt.Errorf("%w: %q (id %s)", metadata.ErrUnknownTopic, a.Topic, topicIDString(a.TopicID))
	}
	if a.Partition < 0 || int(a.Partition) >= len(t.Partitions) {
		return nil, metadata.Partition{}, fmt.Errorf("%w: %q has no partition %d", metadata.ErrUnknownTopic, a.Topic, a.Partition)
	}
	p := &t.Partitions[a.Partition]
	cur := p.Clone()
	tp := fmt.Sprintf("%s-%d", a.Topic, a.Partition)
	if _, ok := st.brokers[a.Broker]; !ok {
		return nil, cur, fmt.Errorf("%w: %s: broker %d is not registered", metadata.ErrBrokerNotAvailable, tp, a.Broker)
	}
	if !slices.Contains(p.Replicas, a.Broker) {
		return nil, cur, fmt.Errorf("%w: %s: broker %d is not a replica (replicas %v)", metadata.ErrInvalidRequest, tp, a.Broker, p.Replicas)
	}
	if slices.Contains(p.Offline, a.Broker) == a.Offline {
		return nil, cur, nil // already so
	}
	// The new offline set, in replica order and never nil (an empty one
	// is recorded as [], which clears it).
	offline := make([]int32, 0, len(p.Offline)+1)
	for _, r := range p.Replicas {
		if r == a.Broker && a.Offline || r != a.Broker && slices.Contains(p.Offline, r) {
			offline = append(offline, r)
		}
	}
	next := metadata.Partition{Offline: offline}
	ch := changeOf(t, p)
	ch.Offline = &offline
	if a.Offline {
		isr := p.ISR
		if slices.Contains(isr, a.Broker) && len(isr) > 1 {
			isr = slices.DeleteFunc(slices.Clone(isr), func(r int32) bool { return r == a.Broker })
			ch.ISR = isr
		}
		if p.Leader == a.Broker {
			ch.Leader = ptr(firstEligible(p.Replicas, isr, eligibleFor(&next, eligible)))
		}
		return []record{ch}, cur, nil
	}
	if p.Leader == metadata.NoLeader {
		if l := firstEligible(p.Replicas, p.ISR, eligibleFor(&next, eligible)); l != metadata.NoLeader {
			ch.Leader = ptr(l)
		}
	}
	return []record{ch}, cur, nil
}

func sameSet(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// maxRebalanceMoves bounds one rebalance entry; the next round moves the
// rest.
const maxRebalanceMoves = 1000

// planPreferredLeaders moves leaderships back to the preferred replica
// (Replicas[0]) wherever it is in the ISR and eligible (and not reported
// offline) and does not lead (Kafka's auto.leader.rebalance), at most
// maxRebalanceMoves at a time.
func planPreferredLeaders(st *state, eligible func(int32) bool) []record {
	n := 0
	return forEachPartition(st, func(t *metadata.Topic, p *metadata.Partition) record {
		pref := p.Replicas[0]
		if n >= maxRebalanceMoves || p.Leader == pref || !slices.Contains(p.ISR, pref) || !eligibleFor(p, eligible)(pref) {
			return nil
		}
		n++
		ch := changeOf(t, p)
		ch.Leader = ptr(pref)
		return ch
	})
}

func ptr[T any](v T) *T { return &v }
