package controller

import (
	"fmt"
	"slices"
	"sort"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// assign places rf replicas for partitions first..first+count-1 over
// brokers (the live, unfenced ones; distinct ids), the way Kafka's
// AdminUtils.assignReplicasToBrokers does:
//   - the brokers are ordered alternating between racks (r1's first, r2's
//     first, ..., r1's second, ...), so neighbours in the order are in
//     different racks;
//   - partition p's leader is broker (start+p) mod n of that order, so
//     leaderships spread evenly and, with start chosen at random by the
//     proposer, topics do not all start on the same broker;
//   - the other replicas follow the leader at a shift that grows every n
//     partitions, so followers spread too, skipping a broker whose rack
//     already holds a replica of the partition while some rack holds none.
//
// Brokers without a rack form one rack of their own (""). Every replica
// starts in the ISR. The caller checks 1 <= rf <= len(brokers).
func assign(first, count int32, rf int, brokers []metadata.Broker, start int) []partitionAssignment {
	order := rackAlternated(brokers)
	n := len(order)
	rackOf := make(map[int32]string, n)
	racks := map[string]bool{}
	for _, b := range brokers {
		rackOf[b.ID] = b.Rack
		racks[b.Rack] = true
	}
	start = ((start % n) + n) % n
	out := make([]partitionAssignment, count)
	for i := range out {
		p := int(first) + i
		lead := (start + p) % n
		replicas := []int32{order[lead]}
		if rf > 1 {
			// The shift grows once per n partitions (Kafka's
			// nextReplicaShift), and in steps of the rack count so a
			// partition's followers keep alternating racks.
			shift := (start + p/n) * len(racks)
			usedRacks := map[string]bool{rackOf[order[lead]]: true}
			for k := 0; len(replicas) < rf && k < 2*n*n; k++ {
				b := order[(lead+1+(shift+k)%(n-1))%n]
				if slices.Contains(replicas, b) {
					continue
				}
				if usedRacks[rackOf[b]] && len(usedRacks) < len(racks) {
					continue
				}
				replicas = append(replicas, b)
				usedRacks[rackOf[b]] = true
			}
		}
		out[i] = partitionAssignment{Replicas: replicas, Leader: replicas[0], ISR: slices.Clone(replicas)}
	}
	return out
}

// rackAlternated orders brokers by rack, alternating: the first broker
// (by id) of each rack in rack order, then the second of each, and so on.
func rackAlternated(brokers []metadata.Broker) []int32 {
	byRack := map[string][]int32{}
	for _, b := range brokers {
		byRack[b.Rack] = append(byRack[b.Rack], b.ID)
	}
	racks := make([]string, 0, len(byRack))
	for r, ids := range byRack {
		racks = append(racks, r)
		slices.Sort(ids)
	}
	sort.Strings(racks)
	out := make([]int32, 0, len(brokers))
	for i := 0; len(out) < len(brokers); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}

// manualAssignment turns the replica lists a client chose for partitions
// first, first+1, ... into assignments, as Kafka's controller checks them:
// every list has rf distinct replicas, each a registered broker; the
// first eligible replica leads (the first replica is the preferred
// leader) and the eligible ones form the ISR; a partition with no eligible
// replica is refused (it would start offline).
func manualAssignment(st *state, first int32, lists [][]int32, rf int, eligible func(int32) bool) ([]partitionAssignment, error) {
	out := make([]partitionAssignment, len(lists))
	for i, replicas := range lists {
		p := first + int32(i)
		if len(replicas) != rf || rf < 1 {
			return nil, fmt.Errorf("%w: partition %d has %d replicas, want %d (every partition the same number)",
				metadata.ErrInvalidReplicaAssignment, p, len(replicas), rf)
		}
		var isr []int32
		for j, b := range replicas {
			if slices.Contains(replicas[:j], b) {
				return nil, fmt.Errorf("%w: partition %d lists broker %d twice", metadata.ErrInvalidReplicaAssignment, p, b)
			}
			if _, ok := st.brokers[b]; !ok {
				return nil, fmt.Errorf("%w: partition %d: broker %d is not registered", metadata.ErrInvalidReplicaAssignment, p, b)
			}
			if eligible(b) {
				isr = append(isr, b)
			}
		}
		if len(isr) == 0 {
			return nil, fmt.Errorf("%w: partition %d: none of brokers %v is alive and unfenced", metadata.ErrInvalidReplicaAssignment, p, replicas)
		}
		out[i] = partitionAssignment{Replicas: slices.Clone(replicas), Leader: isr[0], ISR: isr}
	}
	return out, nil
}
