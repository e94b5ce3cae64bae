package node

import (
	"log/slog"
	"sync"

	"github.com/moonmq/moonmq/engine/cleaner"
	"github.com/moonmq/moonmq/engine/replica"
)

// cleanerSource lists the partitions of compacted topics this node hosts
// (leaders and followers alike: every replica compacts its own log, as in
// Kafka) for the log cleaner, with their bounds read now.
func cleanerSource(b *replica.Manager, logger *slog.Logger) cleaner.Source {
	var warnOnce sync.Once
	return func() []cleaner.Target {
		var out []cleaner.Target
		for _, p := range b.Partitions() {
			v := p.CleanerView()
			if !v.Config.CleanupCompact {
				continue
			}
			l, ok := cleanableLog(p)
			if !ok {
				warnOnce.Do(func() {
					logger.Warn("log compaction is not available in this build: compacted topics are not cleaned " +
						"(engine/log has no Clean yet)")
				})
				continue
			}
			out = append(out, cleaner.Target{
				TopicPartition: cleaner.TopicPartition{Topic: p.TopicPartition().Topic, Partition: p.TopicPartition().Partition},
				Config:         v.Config, HighWatermark: v.HighWatermark, LastStable: v.LastStable,
				ActiveBase: v.ActiveBase, LogStart: v.LogStart,
				FirstBatchTimestamp: p.FirstBatchTimestamp, Log: l,
			})
		}
		return out
	}
}

// cleanableLog is the partition's log as the cleaner's Log. Until the
// compaction core (engine/log's Clean, branch i16-cleaner) is merged,
// *log.Log has no Clean and this reports false; after the merge, with
// cleaner.CleanOptions and CleanStats aliased to engine/log's, it is
// always true (and can become a plain conversion).
func cleanableLog(p *replica.Partition) (cleaner.Log, bool) {
	l, ok := any(p.Log()).(cleaner.Log)
	return l, ok
}
