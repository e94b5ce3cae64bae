package main

import (
	"flag"
	"log/slog"
	"math"
	"time"

	"github.com/moonmq/moonmq/engine/group"
)

// groupFlags are the consumer-group settings of `moonmq serve`, named
// after Kafka's broker configs.
type groupFlags struct {
	minSession, maxSession time.Duration
	initialDelay           time.Duration
	maxSize                int
	consumerSession        time.Duration
	consumerHeartbeat      time.Duration
	offsetsRetention       time.Duration
	offsetsRetentionCheck  time.Duration
	offsetsTopicPartitions int
	offsetsTopicSegment    int
	offsetMetadataMaxBytes int
	resetOffsetsTopic      bool
}

func addGroupFlags(fs *flag.FlagSet) *groupFlags {
	g := &groupFlags{}
	fs.DurationVar(&g.minSession, "group-min-session-timeout", 6*time.Second, "smallest session timeout a classic group member may ask for (group.min.session.timeout.ms)")
	fs.DurationVar(&g.maxSession, "group-max-session-timeout", 30*time.Minute, "largest session timeout a classic group member may ask for (group.max.session.timeout.ms)")
	fs.DurationVar(&g.initialDelay, "group-initial-rebalance-delay", 3*time.Second, "how long the first rebalance of an empty group waits for more members (group.initial.rebalance.delay.ms)")
	fs.IntVar(&g.maxSize, "group-max-size", math.MaxInt32, "most members in one consumer group (group.max.size)")
	fs.DurationVar(&g.consumerSession, "group-consumer-session-timeout", 45*time.Second, "session timeout of KIP-848 consumer group members (group.consumer.session.timeout.ms)")
	fs.DurationVar(&g.consumerHeartbeat, "group-consumer-heartbeat-interval", 5*time.Second, "heartbeat interval of KIP-848 consumer group members (group.consumer.heartbeat.interval.ms)")
	fs.DurationVar(&g.offsetsRetention, "offsets-retention", 7*24*time.Hour, "how long offsets of an empty group are kept (offsets.retention.minutes)")
	fs.DurationVar(&g.offsetsRetentionCheck, "offsets-retention-check-interval", 10*time.Minute, "how often expired offsets are removed (offsets.retention.check.interval.ms)")
	fs.IntVar(&g.offsetsTopicPartitions, "offsets-topic-partitions", 50, "partitions of __consumer_offsets when it is created (offsets.topic.num.partitions)")
	fs.IntVar(&g.offsetsTopicSegment, "offsets-topic-segment-bytes", group.DefaultOffsetsTopicSegmentBytes,
		"segment.bytes of __consumer_offsets, set when it is created and put back at every start (offsets.topic.segment.bytes); compaction never cleans a partition's last segment")
	fs.IntVar(&g.offsetMetadataMaxBytes, "offset-metadata-max-bytes", 4096, "largest metadata string of an offset commit (offset.metadata.max.bytes)")
	fs.BoolVar(&g.resetOffsetsTopic, "reset-offsets-topic", false,
		"delete __consumer_offsets at start so it is created anew: every committed offset and group is lost (the way out of an offsets topic created badly by an older release)")
	return g
}

// config is the coordinator's configuration; serve's validation and its
// start both use it, so --print-config refuses what a start would.
func (g *groupFlags) config(logger *slog.Logger) group.Config {
	cfg := group.Config{
		MinSessionTimeout: g.minSession, MaxSessionTimeout: g.maxSession,
		InitialRebalanceDelay: g.initialDelay, MaxSize: g.maxSize,
		ConsumerSessionTimeout: g.consumerSession, ConsumerHeartbeatInterval: g.consumerHeartbeat,
		OffsetsRetention: g.offsetsRetention, RetentionCheckInterval: g.offsetsRetentionCheck,
		OffsetsTopicPartitions: int32(g.offsetsTopicPartitions), OffsetsTopicSegmentBytes: g.offsetsTopicSegment,
		MaxMetadataBytes: g.offsetMetadataMaxBytes, Logger: logger,
	}
	// group.Config treats 0 as "Kafka's default"; on the command line 0
	// means none.
	if cfg.InitialRebalanceDelay == 0 {
		cfg.InitialRebalanceDelay = time.Nanosecond
	}
	if cfg.MinSessionTimeout == 0 {
		cfg.MinSessionTimeout = time.Nanosecond
	}
	return cfg
}
