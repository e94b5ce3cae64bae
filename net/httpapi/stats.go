package httpapi

import (
	"time"

	"github.com/moonmq/moonmq/engine/replica"
)

// Stats is the /stats document. Field names are part of the operator
// interface (documented in the README): add fields, never rename them.
type Stats struct {
	Version       string       `json:"version"`
	NodeID        int32        `json:"node_id"`
	StartedAt     time.Time    `json:"started_at"`
	UptimeSeconds float64      `json:"uptime_seconds"`
	Listeners     Listeners    `json:"listeners"`
	Connections   int          `json:"connections"`
	Topics        []TopicStats `json:"topics"`
	Groups        []GroupStats `json:"groups"`
}

// Listeners are the bound and advertised addresses.
type Listeners struct {
	Kafka      string `json:"kafka"`
	Advertised string `json:"advertised"`
	HTTP       string `json:"http"`
}

// TopicStats sums a topic's partitions.
type TopicStats struct {
	Name       string           `json:"name"`
	Records    int64            `json:"records"` // sum of high watermark - log start
	SizeBytes  int64            `json:"size_bytes"`
	Partitions []PartitionStats `json:"partitions"`
}

// PartitionStats is one partition's log state.
type PartitionStats struct {
	Partition      int32 `json:"partition"`
	LogStartOffset int64 `json:"log_start_offset"`
	LogEndOffset   int64 `json:"log_end_offset"`
	HighWatermark  int64 `json:"high_watermark"`
	SizeBytes      int64 `json:"size_bytes"`
	Segments       int   `json:"segments"`
	// State is "online" or "offline" (it cannot be opened or its log failed
	// an I/O operation; Error says which, and the broker is retrying it).
	State         string             `json:"state"`
	Error         string             `json:"error,omitempty"`
	CorruptRanges []CorruptRangeStat `json:"corrupt_ranges,omitempty"`
}

// CorruptRangeStat is a damaged stretch of a partition's log: its offsets
// are not served (reads answer CORRUPT_MESSAGE) and nothing is deleted.
type CorruptRangeStat struct {
	FromOffset int64  `json:"from_offset"`
	ToOffset   int64  `json:"to_offset"` // exclusive; -1: to the end of its segment
	Segment    int64  `json:"segment"`
	Reason     string `json:"reason"`
}

// GroupStats is one consumer group's lag.
type GroupStats struct {
	Group      string               `json:"group"`
	State      string               `json:"state"`
	Members    int                  `json:"members"`
	Lag        int64                `json:"lag"`
	Partitions []GroupPartitionStat `json:"partitions,omitempty"`
}

// GroupPartitionStat is a group's position in one partition.
type GroupPartitionStat struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"`
}

// TopicStatsOf summarises the partitions hosted by b, online or not.
func TopicStatsOf(b *replica.Manager) []TopicStats {
	var out []TopicStats
	for _, ps := range b.PartitionStates() { // sorted by topic, partition
		if len(out) == 0 || out[len(out)-1].Name != ps.Topic {
			out = append(out, TopicStats{Name: ps.Topic, Partitions: []PartitionStats{}})
		}
		t := &out[len(out)-1]
		st := ps.Stats
		p := PartitionStats{
			Partition: ps.Partition, LogStartOffset: st.LogStartOffset, LogEndOffset: st.LogEndOffset,
			HighWatermark: st.HighWatermark, SizeBytes: st.Size, Segments: st.Segments,
			State: "online", Error: ps.Error,
		}
		if !ps.Online {
			p.State = "offline"
		}
		for _, cr := range ps.CorruptRanges {
			p.CorruptRanges = append(p.CorruptRanges, CorruptRangeStat{FromOffset: cr.FromOffset, ToOffset: cr.ToOffset,
				Segment: cr.Segment, Reason: cr.Reason})
		}
		t.Partitions = append(t.Partitions, p)
		t.Records += st.HighWatermark - st.LogStartOffset
		t.SizeBytes += st.Size
	}
	return out
}
