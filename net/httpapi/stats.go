package httpapi

import (
	"time"

	"github.com/moonmq/moonmq/engine/broker"
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

// TopicStatsOf summarises the partitions hosted by b.
func TopicStatsOf(b *broker.Broker) []TopicStats {
	var out []TopicStats
	for _, p := range b.Partitions() { // sorted by topic, partition
		tp := p.TopicPartition()
		st := p.Log().Stats()
		if len(out) == 0 || out[len(out)-1].Name != tp.Topic {
			out = append(out, TopicStats{Name: tp.Topic, Partitions: []PartitionStats{}})
		}
		t := &out[len(out)-1]
		t.Partitions = append(t.Partitions, PartitionStats{
			Partition: tp.Partition, LogStartOffset: st.LogStartOffset, LogEndOffset: st.LogEndOffset,
			HighWatermark: st.HighWatermark, SizeBytes: st.Size, Segments: st.Segments,
		})
		t.Records += st.HighWatermark - st.LogStartOffset
		t.SizeBytes += st.Size
	}
	return out
}
