package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/moonmq/moonmq/cluster/controller"
	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/internal/lag"
	"github.com/moonmq/moonmq/net/httpapi"
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
// it should — not while it has not hosted what the metadata said at start
// (reconcileErr), nor while the group coordinator is still replaying
// __consumer_offsets, while shutting down, while any partition it hosts is
// offline (it could not be opened, or its log failed an I/O operation; the
// broker retries it), or while accepting connections fails (out of file
// descriptors). Damaged ranges inside a partition do not make the node
// unready: everything else in it is served (they show in /stats and
// /metrics).
func readiness(shuttingDown bool, reconcileErr, groupsErr error, parts []replica.PartitionState, acceptErr error) (bool, string) {
	switch {
	case shuttingDown:
		return false, "shutting down"
	case reconcileErr != nil:
		return false, reconcileErr.Error()
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

// startGroups builds the group coordinator over the broker's partitions of
// __consumer_offsets, has the reconciler keep its view of the topics
// current (and drop the offsets of deleted topics), and starts it. Call
// once the reconciler hosts the partitions the metadata names, so the
// offsets partitions are open.
func startGroups(cfg group.Config, reset bool, ctrl *controller.Controller, rec *reconciler, b *replica.Manager, logger *slog.Logger) (*group.Coordinator, error) {
	configs := group.OffsetsTopicConfigs(cfg.OffsetsTopicSegmentBytes)
	store := internalTopicStorage(ctrl, b, group.OffsetsTopic, configs)
	if reset {
		if err := resetOffsetsTopic(ctrl, logger); err != nil {
			return nil, err
		}
	}
	if err := repairOffsetsTopic(ctrl, configs, logger); err != nil {
		return nil, err
	}
	if rec.repl != nil {
		// A group is coordinated by the leader of its offsets partition;
		// the reconciler moves it as leadership moves (coordinate).
		cfg.Owns = func(p int32) bool {
			return rec.repl.leads(replica.TopicPartition{Topic: group.OffsetsTopic, Partition: p})
		}
	}
	coord, err := group.New(cfg, store)
	if err != nil {
		return nil, fmt.Errorf("group coordinator: %w", err)
	}
	rec.attachGroups(coord)
	coord.Start()
	return coord, nil
}

// internalTopicStorage is a coordinator's storage over the broker's
// partitions of its internal topic, created with configs through the
// controller.
func internalTopicStorage(ctrl *controller.Controller, b *replica.Manager, topic string, configs map[string]string) *group.BrokerStorage {
	return &group.BrokerStorage{
		Broker: b, Topic: topic, Configs: configs,
		PartitionCount: func() int32 {
			t, _ := ctrl.Topic(topic)
			return int32(len(t.Partitions))
		},
		CreateTopic: func(ctx context.Context, n int32, configs map[string]string) error {
			if err := b.CheckCapacity(int(n)); err != nil {
				return fmt.Errorf("create %s: %w", topic, err)
			}
			_, err := ctrl.CreateTopic(ctx, topic, n, -1, configs, false)
			if errors.Is(err, metadata.ErrTopicExists) {
				return nil
			}
			return err
		},
	}
}

// repairOffsetsTopic puts back the settings the coordinator creates
// __consumer_offsets with (configs), if an older release let a client
// create or alter it otherwise (retention that deleted committed offsets),
// or the node was started with another --offsets-topic-segment-bytes,
// logging each change. The repair is exact (extra overrides are removed
// too): no override of an internal topic can be an operator's choice but
// the broker's own settings, since AlterConfigs refuses every change to
// one, so any other difference is such a leftover.
func repairOffsetsTopic(ctrl *controller.Controller, configs map[string]string, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	repairs, err := ctrl.RepairTopicConfigs(ctx, group.OffsetsTopic, configs)
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
