// Package replicatest holds test helpers over engine/replica partitions,
// shared by the coordinators' compaction tests (engine/group,
// engine/txncoord), which compact their internal topics for real.
package replicatest

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/replica"
)

// Clean compacts part below the bound engine/cleaner gives it (the high
// watermark, the last stable offset, the active segment) at now, with a
// delete horizon of an hour, and returns the records removed. Half the
// time (by rnd) its key map holds 16 keys, so a cleaning takes several
// passes.
func Clean(ctx context.Context, t testing.TB, part *replica.Partition, now time.Time, rnd *rand.Rand) int64 {
	t.Helper()
	v := part.CleanerView()
	mapMemory := 1 << 16
	if rnd.IntN(2) == 0 {
		mapMemory = 16 * 24 // 16 slots: several passes
	}
	st, err := part.Log().Clean(ctx, log.CleanOptions{Now: now, DeleteRetention: time.Hour,
		FirstUncleanable: min(v.HighWatermark, v.LastStable, v.ActiveBase), MapMemory: mapMemory})
	require.NoError(t, err)
	return st.RecordsRemoved
}

// Counts are what a partition holds: data records, the tombstones among
// them, and control records (end-transaction markers).
type Counts struct{ Records, Tombstones, Markers int }

// Count reads part whole and counts its records.
func Count(t testing.TB, part *replica.Partition) Counts {
	t.Helper()
	var n Counts
	start, end := part.Bounds()
	for off := start; off < end; {
		data, err := part.ReadToEnd(off, 1<<20)
		require.NoError(t, err)
		if len(data) == 0 {
			break
		}
		next := off
		require.NoError(t, batch.Iterate(data, func(h batch.Header, raw []byte) bool {
			next = h.NextOffset()
			if h.IsControl() {
				n.Markers += int(h.NumRecords)
				return true
			}
			require.NoError(t, batch.Records(raw, func(r batch.Record) bool {
				n.Records++
				if r.Value == nil {
					n.Tombstones++
				}
				return true
			}))
			return true
		}))
		off = next
	}
	return n
}

// CreateTopic is a topic creation for a coordinator's BrokerStorage
// (engine/group) over b: it ensures parts partitions of topic with configs
// and then stores parts in n, the storage's partition count.
func CreateTopic(b *replica.Manager, topic string, n *atomic.Int32) func(context.Context, int32, map[string]string) error {
	return func(_ context.Context, parts int32, configs map[string]string) error {
		for i := range parts {
			if _, err := b.EnsurePartition(replica.TopicPartition{Topic: topic, Partition: i}, configs); err != nil {
				return err
			}
		}
		n.Store(parts)
		return nil
	}
}
