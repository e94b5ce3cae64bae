package httpapi

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/cleaner"
	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/topicconfig"
)

// dirtyLog is a cleaner.Log with a fixed dirty ratio whose cleanings
// report fixed statistics.
type dirtyLog struct {
	ratio float64
	bytes int64
}

func (d *dirtyLog) DirtyRatio(int64) (float64, int64) { return d.ratio, d.bytes }
func (d *dirtyLog) Clean(context.Context, cleaner.CleanOptions) (cleaner.CleanStats, error) {
	d.ratio = 0.1
	return cleaner.CleanStats{BytesRead: 5000, BytesWritten: 1200, RecordsRemoved: 40, Passes: 1, Duration: 250 * time.Millisecond}, nil
}

// The cleaner's metrics and /stats fields: its totals, and per compacted
// partition the dirty ratio, the lag, bytes cleaned and the last cleaning.
func TestCleanerMetricsAndStats(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	m, err := cleaner.New(cleaner.Options{Threads: 2, Clock: clock.NewFake(now), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	defer m.Close()
	cfg, err := topicconfig.Resolve(map[string]string{"cleanup.policy": "compact"})
	require.NoError(t, err)
	src := func() []cleaner.Target {
		return []cleaner.Target{
			{TopicPartition: cleaner.TopicPartition{Topic: "c", Partition: 0}, Config: cfg, HighWatermark: 10, LastStable: 10, ActiveBase: 10,
				Log: &dirtyLog{ratio: 0.8, bytes: 4000}},
			{TopicPartition: cleaner.TopicPartition{Topic: "c", Partition: 1}, Config: cfg, HighWatermark: 10, LastStable: 10, ActiveBase: 10,
				Log: &dirtyLog{ratio: 0.2, bytes: 300}},
		}
	}
	col := NewCleanerCollector(m)
	got := gather(t, col)
	require.Equal(t, float64(2), got["moonmq_log_cleaner_threads"])
	require.Zero(t, got["moonmq_log_cleaner_cleanings_total{result=ok}"])
	require.NotContains(t, got, "moonmq_partition_dirty_ratio{partition=0,topic=c}", "no pass yet")

	require.True(t, m.CleanOnce(context.Background(), src))
	got = gather(t, col)
	require.Equal(t, float64(1), got["moonmq_log_cleaner_cleanings_total{result=ok}"])
	require.Equal(t, float64(5000), got["moonmq_log_cleaner_read_bytes_total"])
	require.Equal(t, float64(1200), got["moonmq_log_cleaner_written_bytes_total"])
	require.Equal(t, float64(40), got["moonmq_log_cleaner_removed_records_total"])
	require.Equal(t, 0.25, got["moonmq_log_cleaner_seconds_total"])
	require.Equal(t, float64(now.Unix()), got["moonmq_log_cleaner_last_run_timestamp_seconds"])
	require.Equal(t, 0.8, got["moonmq_log_cleaner_max_dirty_ratio"])
	require.Equal(t, 0.8, got["moonmq_partition_dirty_ratio{partition=0,topic=c}"])
	require.Equal(t, float64(4000), got["moonmq_partition_dirty_bytes{partition=0,topic=c}"])
	require.Equal(t, float64(5000), got["moonmq_partition_cleaned_bytes_total{partition=0,topic=c}"])
	require.Equal(t, float64(1), got["moonmq_partition_cleanings_total{partition=0,topic=c}"])
	require.Equal(t, float64(now.Unix()), got["moonmq_partition_last_cleaning_timestamp_seconds{partition=0,topic=c}"])
	require.Equal(t, 0.25, got["moonmq_partition_last_cleaning_duration_seconds{partition=0,topic=c}"])
	require.Equal(t, 0.2, got["moonmq_partition_dirty_ratio{partition=1,topic=c}"])
	require.NotContains(t, got, "moonmq_partition_last_cleaning_timestamp_seconds{partition=1,topic=c}", "never cleaned")

	st := CleanerStatsOf(m)
	require.Equal(t, int64(1), st.Cleanings)
	require.Equal(t, now, *st.LastRun)
	require.Nil(t, CleanerStatsOf(nil))
	topics := []TopicStats{{Name: "c", Partitions: []PartitionStats{{Partition: 0}, {Partition: 1}}}, {Name: "plain", Partitions: []PartitionStats{{Partition: 0}}}}
	AddCompaction(topics, m)
	c0 := topics[0].Partitions[0].Compaction
	require.NotNil(t, c0)
	require.Equal(t, 0.8, c0.DirtyRatio)
	require.Equal(t, int64(5000), c0.BytesRead)
	require.Equal(t, int64(250), c0.LastDurationMs)
	require.Equal(t, now, *c0.LastCleaned)
	require.Nil(t, topics[0].Partitions[1].Compaction.LastCleaned)
	require.Nil(t, topics[1].Partitions[0].Compaction, "not compacted")
}
