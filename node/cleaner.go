package node

import (
	"github.com/moonmq/moonmq/engine/cleaner"
	"github.com/moonmq/moonmq/engine/replica"
)

// cleanerSource lists the partitions of compacted topics this node hosts
// (leaders and followers alike: every replica compacts its own log, as in
// Kafka) for the log cleaner, with their bounds read now.
func cleanerSource(b *replica.Manager) cleaner.Source {
	return func() []cleaner.Target {
		var out []cleaner.Target
		for _, p := range b.Partitions() {
			v := p.CleanerView()
			if !v.Config.CleanupCompact {
				continue
			}
			out = append(out, cleaner.Target{
				TopicPartition: cleaner.TopicPartition{Topic: p.TopicPartition().Topic, Partition: p.TopicPartition().Partition},
				Config:         v.Config, HighWatermark: v.HighWatermark, LastStable: v.LastStable,
				ActiveBase: v.ActiveBase, LogStart: v.LogStart,
				FirstBatchTimestamp: p.FirstBatchTimestamp, Log: p.Log(),
			})
		}
		return out
	}
}
