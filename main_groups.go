package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/moonmq/moonmq/cluster/controller"
	"github.com/moonmq/moonmq/engine/broker"
	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/internal/lag"
	"github.com/moonmq/moonmq/net/httpapi"
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
		OffsetsTopicPartitions: int32(g.offsetsTopicPartitions), MaxMetadataBytes: g.offsetMetadataMaxBytes,
		Logger: logger,
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

// validate checks the group settings as the coordinator will.
func (g *groupFlags) validate() error {
	cfg := g.config(slog.New(slog.DiscardHandler))
	cfg.EnsureDefaults()
	return cfg.Validate()
}

// startGroups builds the group coordinator over the broker's partitions of
// __consumer_offsets, keeps its view of the topics current (and drops the
// offsets of deleted topics) through a metadata listener, and starts it.
// Call after wireMetadata, so the offsets partitions are open.
func startGroups(g *groupFlags, ctrl *controller.Controller, b *broker.Broker, logger *slog.Logger) (*group.Coordinator, error) {
	reset := g.resetOffsetsTopic
	cfg := g.config(logger)
	store := &group.BrokerStorage{
		Broker: b,
		LeaderEpochs: func() []int32 {
			t, ok := ctrl.Topic(group.OffsetsTopic)
			if !ok {
				return nil
			}
			epochs := make([]int32, len(t.Partitions))
			for i, p := range t.Partitions {
				epochs[i] = p.LeaderEpoch
			}
			return epochs
		},
		CreateTopic: func(ctx context.Context, n int32, configs map[string]string) error {
			if err := b.CheckCapacity(int(n)); err != nil {
				return fmt.Errorf("create %s: %w", group.OffsetsTopic, err)
			}
			_, err := ctrl.CreateTopic(ctx, group.OffsetsTopic, n, -1, configs, false)
			if errors.Is(err, controller.ErrTopicExists) {
				return nil
			}
			return err
		},
	}
	if reset {
		if err := resetOffsetsTopic(ctrl, logger); err != nil {
			return nil, err
		}
	}
	if err := repairOffsetsTopic(ctrl, logger); err != nil {
		return nil, err
	}
	coord, err := group.New(cfg, store)
	if err != nil {
		return nil, fmt.Errorf("group coordinator: %w", err)
	}
	var replaying atomic.Bool
	replaying.Store(true)
	ctrl.OnChange(func(ev controller.Event) {
		if replaying.Load() {
			return // registration replays every topic; one snapshot below covers them
		}
		coord.SetTopics(topicInfos(ctrl.Topics()))
		if ev.Kind == controller.TopicDeleted {
			coord.TopicDeleted(ev.Topic.Name)
		}
	})
	replaying.Store(false)
	coord.SetTopics(topicInfos(ctrl.Topics()))
	coord.Start()
	return coord, nil
}

// repairOffsetsTopic puts back the settings the coordinator creates
// __consumer_offsets with, if an older release let a client create or
// alter it otherwise (retention that deleted committed offsets), logging
// each change. The repair is exact (extra overrides are removed too): no
// override of an internal topic can be an operator's choice, since
// AlterConfigs refuses every change to one and the broker has no setting
// for it, so any difference is such a leftover.
func repairOffsetsTopic(ctrl *controller.Controller, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	repairs, err := ctrl.RepairTopicConfigs(ctx, group.OffsetsTopic, group.OffsetsTopicConfigs)
	for _, r := range repairs {
		logger.Warn("repaired a setting of the offsets topic", "topic", r.Topic, "config", r.Key, "was", r.Was, "now", r.Now)
	}
	return err
}

// resetOffsetsTopic deletes __consumer_offsets so the coordinator creates
// it anew (--reset-offsets-topic): every committed offset and group is
// lost. It is the way out of an offsets topic an older release let a
// client create badly (its partition count cannot be changed).
func resetOffsetsTopic(ctrl *controller.Controller, logger *slog.Logger) error {
	if _, ok := ctrl.Topic(group.OffsetsTopic); !ok {
		logger.Info("--reset-offsets-topic: there is no offsets topic to reset")
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ctrl.DeleteTopic(ctx, group.OffsetsTopic); err != nil {
		return fmt.Errorf("reset %s: %w", group.OffsetsTopic, err)
	}
	logger.Warn("deleted the offsets topic as --reset-offsets-topic asked; committed offsets and groups are gone",
		"topic", group.OffsetsTopic)
	return nil
}

func topicInfos(ts []controller.Topic) []group.TopicInfo {
	out := make([]group.TopicInfo, 0, len(ts))
	for _, t := range ts {
		out = append(out, group.TopicInfo{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))})
	}
	return out
}

// groupStatsOf summarises every group's committed offsets and lag for
// /stats, against the partitions' high watermarks.
func groupStatsOf(coord *group.Coordinator, b *broker.Broker) []httpapi.GroupStats {
	out := []httpapi.GroupStats{}
	for _, s := range coord.Stats() {
		gs := httpapi.GroupStats{Group: s.Group, State: string(s.State), Members: s.Members}
		for _, o := range s.Offsets {
			ps := httpapi.GroupPartitionStat{Topic: o.Topic, Partition: o.Partition, Committed: o.Offset, End: -1, Lag: -1}
			if p, err := b.Partition(broker.TopicPartition{Topic: o.Topic, Partition: o.Partition}); err == nil {
				ps.End = p.Log().HighWatermark()
				ps.Lag = lag.Of(o.Offset, ps.End)
				gs.Lag = lag.Sum(gs.Lag, ps.Lag)
			}
			gs.Partitions = append(gs.Partitions, ps)
		}
		out = append(out, gs)
	}
	return out
}
