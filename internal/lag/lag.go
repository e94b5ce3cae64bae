// Package lag owns the one definition of consumer-group lag that every
// MoonMQ surface reports: MQL (SHOW GROUPS, DESCRIBE GROUP), `moonmq top`,
// `/stats` and `/metrics` all call Of, so they agree.
//
// A group's lag on a partition is the number of records between its
// committed offset and the partition's end (the high watermark, what
// ListOffsets "latest" answers): how far the group is behind, never
// negative. A partition the group has not committed on has no lag: it is
// shown with no committed offset and unknown lag, as Kafka's own tools
// (kafka-consumer-groups.sh, Burrow) show it, and it adds nothing to a
// group's total. Where such a group would start depends on each
// consumer's auto.offset.reset, which the broker does not know, so any
// number would be a guess.
//
// Invariant: Of never returns a negative lag other than Unknown.
package lag

// Unknown is the lag of a partition without a committed offset or without
// a known end.
const Unknown int64 = -1

// Of returns the lag of a group whose committed offset on a partition is
// committed (negative: none) when the partition ends at end (negative:
// unknown).
func Of(committed, end int64) int64 {
	if committed < 0 || end < 0 {
		return Unknown
	}
	return max(end-committed, 0)
}

// Add adds a partition's lag to a group's total, skipping Unknown.
func Add(total, l int64) int64 {
	if l > 0 {
		return total + l
	}
	return total
}
