package group

import (
	"slices"
	"sort"
)

// TopicID is a topic's UUID, as KIP-848 assignments name topics.
type TopicID = [16]byte

// Assignor names the server-side assignors of consumer groups.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// assignment is a member's partitions per topic; partition lists are kept
// sorted and free of duplicates.
type assignment map[TopicID][]int32

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a assignment) has(t TopicID, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

func (a assignment) add(t TopicID, p int32) {
	ps := a[t]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		a[t] = slices.Insert(ps, i, p)
	}
}

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) equal(b assignment) bool {
	if a.count() != b.count() {
		return false
	}
	for t, ps := range a {
		if len(ps) > 0 && !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

// each calls fn for every partition, topics in id order.
func (a assignment) each(fn func(t TopicID, p int32)) {
	ids := make([]TopicID, 0, len(a))
	for t := range a {
		ids = append(ids, t)
	}
	slices.SortFunc(ids, compareIDs)
	for _, t := range ids {
		for _, p := range a[t] {
			fn(t, p)
		}
	}
}

func compareIDs(a, b TopicID) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}

// topicMeta is what the assignors need to know of a subscribed topic.
type topicMeta struct {
	id         TopicID
	partitions int32
}

// assignInput is one target-assignment computation.
type assignInput struct {
	members []string            // member ids, sorted
	subs    map[string][]string // member -> subscribed topics that exist, sorted
	topics  map[string]topicMeta
	prev    map[string]assignment // the previous target, for stickiness
}

type tp struct {
	topic string
	part  int32
}

// assignUniform spreads every subscribed partition over the members that
// subscribe to its topic so that, among members sharing a subscription,
// counts differ by at most one; partitions stay with their previous owner
// whenever that keeps the balance (sticky, like Kafka's UniformAssignor).
func assignUniform(in assignInput) map[string]assignment {
	eligible := map[string][]string{} // topic -> members subscribed, sorted
	for _, m := range in.members {
		for _, t := range in.subs[m] {
			eligible[t] = append(eligible[t], m)
		}
	}
	var all []tp
	for t, ms := range eligible {
		if len(ms) == 0 {
			continue
		}
		for p := int32(0); p < in.topics[t].partitions; p++ {
			all = append(all, tp{t, p})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if na, nb := len(eligible[a.topic]), len(eligible[b.topic]); na != nb {
			return na < nb // most constrained first
		}
		if a.topic != b.topic {
			return a.topic < b.topic
		}
		return a.part < b.part
	})
	owner := make(map[tp]string, len(all))
	load := make(map[string]int, len(in.members))
	for _, m := range in.members {
		load[m] = 0
	}
	isEligible := func(m, topic string) bool {
		_, ok := slices.BinarySearch(eligible[topic], m)
		return ok
	}
	// Sticky pass: keep previous owners that still subscribe.
	for _, x := range all {
		meta := in.topics[x.topic]
		for _, m := range in.members {
			if in.prev[m].has(meta.id, x.part) && isEligible(m, x.topic) {
				owner[x] = m
				load[m]++
				break
			}
		}
	}
	leastLoaded := func(topic string) string {
		best := ""
		for _, m := range eligible[topic] {
			if best == "" || load[m] < load[best] {
				best = m
			}
		}
		return best
	}
	for _, x := range all {
		if _, ok := owner[x]; !ok {
			m := leastLoaded(x.topic)
			owner[x] = m
			load[m]++
		}
	}
	// Balance: move partitions from heavier to lighter eligible members
	// until no move narrows the spread. Each move lowers the sum of
	// squared loads, so this terminates.
	for moved := true; moved; {
		moved = false
		for i := len(all) - 1; i >= 0; i-- {
			x := all[i]
			from := owner[x]
			to := leastLoaded(x.topic)
			if load[to] < load[from]-1 {
				owner[x] = to
				load[from]--
				load[to]++
				moved = true
			}
		}
	}
	out := make(map[string]assignment, len(in.members))
	for _, m := range in.members {
		out[m] = assignment{}
	}
	for _, x := range all {
		out[owner[x]].add(in.topics[x.topic].id, x.part)
	}
	return out
}

// assignRange gives each member a contiguous range of every topic it
// subscribes to, members in id order, the first ones taking one extra
// partition when the count does not divide (Kafka's RangeAssignor), so
// co-partitioned topics are assigned alike.
func assignRange(in assignInput) map[string]assignment {
	out := make(map[string]assignment, len(in.members))
	subscribers := map[string][]string{}
	for _, m := range in.members {
		out[m] = assignment{}
		for _, t := range in.subs[m] {
			subscribers[t] = append(subscribers[t], m)
		}
	}
	for t, ms := range subscribers {
		meta := in.topics[t]
		n, k := int(meta.partitions), len(ms)
		per, extra := n/k, n%k
		p := 0
		for i, m := range ms {
			c := per
			if i < extra {
				c++
			}
			for j := 0; j < c; j++ {
				out[m].add(meta.id, int32(p))
				p++
			}
		}
	}
	return out
}
