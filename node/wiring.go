package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/moonmq/moonmq/cluster/controller"
	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/internal/lag"
	"github.com/moonmq/moonmq/net/httpapi"
	"github.com/moonmq/moonmq/net/kafka"
)

// partitionSummary counts the hosted partitions for the start-up line.
type partitionSummary struct{ total, unclean, offline, damaged int }

func summarizePartitions(states []replica.PartitionState) partitionSummary {
	var s partitionSummary
	for _, p := range states {
		s.total++
		switch {
		case !p.Online:
			s.offline++
		case p.Stats.UncleanOpen:
			s.unclean++
		}
		if len(p.CorruptRanges) > 0 {
			s.damaged++
		}
	}
	return s
}

// readiness decides /readyz: the node is ready when it serves everything
// it should — not while the group coordinator is still replaying
// __consumer_offsets, while shutting down, while any partition it hosts is
// offline (it could not be opened, or its log failed an I/O operation; the
// broker retries it), or while accepting connections fails (out of file
// descriptors). Damaged ranges inside a partition do not make the node
// unready: everything else in it is served (they show in /stats and
// /metrics).
func readiness(shuttingDown bool, groupsErr error, parts []replica.PartitionState, acceptErr error) (bool, string) {
	switch {
	case shuttingDown:
		return false, "shutting down"
	case groupsErr != nil:
		return false, "storage recovery or metadata load in progress: " + groupsErr.Error()
	case acceptErr != nil:
		return false, "cannot accept connections: " + acceptErr.Error()
	}
	var offline []string
	for _, p := range parts {
		if !p.Online {
			offline = append(offline, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
		}
	}
	if len(offline) > 0 {
		shown := offline[:min(len(offline), 10)]
		more := ""
		if len(offline) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(offline)-len(shown))
		}
		return false, fmt.Sprintf("%d partitions offline (%s%s); see /stats", len(offline), strings.Join(shown, ", "), more)
	}
	return true, ""
}

// descriptorPlan divides the process's file descriptor limit: a share for
// client connections (up to --max-connections, at most half the limit), a
// cache of idle segment files, a fixed reserve for the metadata store,
// listeners and transient files, and the rest for partitions (one each).
type descriptorPlan struct {
	limit, reserve, fileCache int
}

func planDescriptors(maxConnections int) descriptorPlan {
	var r syscall.Rlimit
	limit := 1 << 20
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err == nil && r.Cur < 1<<30 {
		limit = int(r.Cur) // Go has raised the soft limit to the hard one
	}
	conns := maxConnections
	if conns <= 0 || conns > limit/2 {
		conns = limit / 2
	}
	return descriptorPlan{limit: limit, reserve: 256 + conns, fileCache: min(max(limit/8, 32), 4096)}
}

// wireMetadata keeps the hosted partitions in step with the metadata: the
// controller calls back synchronously on every change, so a CreateTopics
// answer is sent only after the partitions exist on disk. Registering
// replays every existing topic first. A partition that fails to open does
// not fail the start: the broker keeps it offline (reported in /readyz,
// /stats and /metrics) and retries it while the rest of the node serves.
func wireMetadata(ctrl *controller.Controller, b *replica.Manager, m *kafka.Metrics, logger *slog.Logger) error {
	ctrl.OnChange(func(ev controller.Event) {
		var err error
		switch ev.Kind {
		case controller.TopicCreated, controller.PartitionsAdded:
			for _, p := range ev.Topic.Partitions {
				part, perr := b.EnsurePartition(replica.TopicPartition{Topic: ev.Topic.Name, Partition: p.ID}, ev.Topic.Configs)
				if perr == nil {
					part.MakeLeader(p.LeaderEpoch)
				}
				if !errors.Is(perr, replica.ErrPartitionOffline) { // offline ones are reported by the broker
					err = errors.Join(err, perr)
				}
			}
		case controller.ConfigsChanged:
			err = b.UpdateConfigs(ev.Topic.Name, ev.Topic.Configs)
		case controller.TopicDeleted:
			err = b.DeleteTopic(ev.Topic.Name)
			m.DeleteTopic(ev.Topic.Name)
		}
		if err != nil {
			logger.Error("applying metadata change", "topic", ev.Topic.Name, "event", ev.Kind, "err", err)
		}
	})
	known := map[replica.TopicPartition]bool{}
	for _, t := range ctrl.Topics() {
		for _, p := range t.Partitions {
			known[replica.TopicPartition{Topic: t.Name, Partition: p.ID}] = true
		}
	}
	return b.RemoveOrphans(func(tp replica.TopicPartition) bool { return known[tp] })
}

// startGroups builds the group coordinator over the broker's partitions of
// __consumer_offsets, keeps its view of the topics current (and drops the
// offsets of deleted topics) through a metadata listener, and starts it.
// Call after wireMetadata, so the offsets partitions are open.
func startGroups(cfg group.Config, reset bool, ctrl *controller.Controller, b *replica.Manager, logger *slog.Logger) (*group.Coordinator, error) {
	store := &group.BrokerStorage{
		Broker: b,
		PartitionCount: func() int32 {
			t, _ := ctrl.Topic(group.OffsetsTopic)
			return int32(len(t.Partitions))
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
func groupStatsOf(coord *group.Coordinator, b *replica.Manager) []httpapi.GroupStats {
	out := []httpapi.GroupStats{}
	for _, s := range coord.Stats() {
		gs := httpapi.GroupStats{Group: s.Group, State: string(s.State), Members: s.Members}
		for _, o := range s.Offsets {
			ps := httpapi.GroupPartitionStat{Topic: o.Topic, Partition: o.Partition, Committed: o.Offset, End: -1, Lag: -1}
			if p, err := b.Partition(replica.TopicPartition{Topic: o.Topic, Partition: o.Partition}); err == nil {
				ps.End = p.HighWatermark()
				ps.Lag = lag.Of(o.Offset, ps.End)
				gs.Lag = lag.Add(gs.Lag, ps.Lag)
			}
			gs.Partitions = append(gs.Partitions, ps)
		}
		out = append(out, gs)
	}
	return out
}
