package httpapi

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moonmq/moonmq/engine/cleaner"
)

// CleanerStats is the /stats "cleaner" object: the log cleaner's totals
// since start (Kafka's LogCleaner metrics).
type CleanerStats struct {
	Threads        int     `json:"threads"`
	Cleanings      int64   `json:"cleanings"`
	Aborted        int64   `json:"aborted"`
	Failed         int64   `json:"failed"`
	Passes         int64   `json:"passes"`
	BytesRead      int64   `json:"bytes_read"`
	BytesWritten   int64   `json:"bytes_written"`
	RecordsRemoved int64   `json:"records_removed"`
	TimeSeconds    float64 `json:"time_seconds"`
	// LastRun is when the last cleaning ended (absent: none yet).
	LastRun *time.Time `json:"last_run,omitempty"`
	// MaxDirtyRatio and MaxCompactionDelayMs are the largest over the
	// compacted partitions; Uncleanable counts partitions whose cleaning
	// failed.
	MaxDirtyRatio        float64 `json:"max_dirty_ratio"`
	MaxCompactionDelayMs int64   `json:"max_compaction_delay_ms"`
	Uncleanable          int     `json:"uncleanable_partitions"`
}

// CompactionStats is a compacted partition's "compaction" object in
// /stats.
type CompactionStats struct {
	DirtyRatio float64 `json:"dirty_ratio"`
	// DirtyBytes is what is left to clean, CompactionDelayMs how far past
	// max.compaction.lag.ms its oldest dirty record is: the cleaner's lag.
	DirtyBytes        int64      `json:"dirty_bytes"`
	CompactionDelayMs int64      `json:"compaction_delay_ms"`
	Cleanings         int64      `json:"cleanings"`
	BytesRead         int64      `json:"bytes_read"`
	BytesWritten      int64      `json:"bytes_written"`
	RecordsRemoved    int64      `json:"records_removed"`
	LastCleaned       *time.Time `json:"last_cleaned,omitempty"`
	LastDurationMs    int64      `json:"last_duration_ms"`
	Cleaning          bool       `json:"cleaning,omitempty"`
	Uncleanable       string     `json:"uncleanable,omitempty"`
}

// CleanerStatsOf is the /stats view of m (nil: no cleaner).
func CleanerStatsOf(m *cleaner.Manager) *CleanerStats {
	if m == nil {
		return nil
	}
	s := m.Stats()
	out := &CleanerStats{Threads: s.Threads, Cleanings: s.Cleanings, Aborted: s.Aborted, Failed: s.Failed,
		Passes: s.Passes, BytesRead: s.BytesRead, BytesWritten: s.BytesWritten, RecordsRemoved: s.RecordsRemoved,
		TimeSeconds: s.TimeSpent.Seconds(), MaxDirtyRatio: s.MaxDirtyRatio,
		MaxCompactionDelayMs: s.MaxCompactionDelay.Milliseconds(), Uncleanable: s.Uncleanable}
	if !s.LastRun.IsZero() {
		t := s.LastRun
		out.LastRun = &t
	}
	return out
}

// AddCompaction fills the "compaction" object of the compacted partitions
// of topics from m.
func AddCompaction(topics []TopicStats, m *cleaner.Manager) {
	if m == nil {
		return
	}
	byTP := make(map[cleaner.TopicPartition]cleaner.PartitionStats)
	for _, ps := range m.PartitionStats() {
		byTP[ps.TopicPartition] = ps
	}
	for i := range topics {
		for j := range topics[i].Partitions {
			p := &topics[i].Partitions[j]
			ps, ok := byTP[cleaner.TopicPartition{Topic: topics[i].Name, Partition: p.Partition}]
			if !ok {
				continue
			}
			c := &CompactionStats{DirtyRatio: ps.DirtyRatio, DirtyBytes: ps.DirtyBytes,
				CompactionDelayMs: ps.CompactionDelay.Milliseconds(), Cleanings: ps.Cleanings,
				BytesRead: ps.BytesRead, BytesWritten: ps.BytesWritten, RecordsRemoved: ps.RecordsRemoved,
				LastDurationMs: ps.LastDuration.Milliseconds(), Cleaning: ps.Cleaning, Uncleanable: ps.Uncleanable}
			if !ps.LastCleaned.IsZero() {
				t := ps.LastCleaned
				c.LastCleaned = &t
			}
			p.Compaction = c
		}
	}
}

// cleanerCollector reports the log cleaner's totals and each compacted
// partition's state at scrape time; labels are bounded by the compacted
// partitions that exist.
type cleanerCollector struct {
	m                                          *cleaner.Manager
	threads, cleanings, passes                 *prometheus.Desc
	bytesRead, bytesWritten, removed, seconds  *prometheus.Desc
	lastRun, maxDirty, maxDelay, uncleanable   *prometheus.Desc
	dirtyRatio, dirtyBytes, delay, pCleanings  *prometheus.Desc
	pBytesRead, pBytesWritten, pLast, pLastDur *prometheus.Desc
}

// NewCleanerCollector exposes the log cleaner's metrics.
func NewCleanerCollector(m *cleaner.Manager) prometheus.Collector {
	node := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	pl := []string{"topic", "partition"}
	return &cleanerCollector{
		m:            m,
		threads:      node("moonmq_log_cleaner_threads", "Log cleaner threads (--log-cleaner-threads; 0: compaction is off)."),
		cleanings:    node("moonmq_log_cleaner_cleanings_total", "Cleanings by outcome: ok, aborted (truncation, deletion, shutdown) or failed (the partition is then uncleanable).", "result"),
		passes:       node("moonmq_log_cleaner_passes_total", "Passes over dirty log sections; a log with more keys than a thread's key map takes several per cleaning."),
		bytesRead:    node("moonmq_log_cleaner_read_bytes_total", "Bytes of log the cleaner read."),
		bytesWritten: node("moonmq_log_cleaner_written_bytes_total", "Bytes of cleaned segments the cleaner wrote."),
		removed:      node("moonmq_log_cleaner_removed_records_total", "Records the cleaner removed (superseded values, expired tombstones, aborted transactional records)."),
		seconds:      node("moonmq_log_cleaner_seconds_total", "Time spent cleaning."),
		lastRun:      node("moonmq_log_cleaner_last_run_timestamp_seconds", "When the last cleaning ended (Unix seconds; 0: none yet)."),
		maxDirty:     node("moonmq_log_cleaner_max_dirty_ratio", "The largest dirty ratio over the compacted partitions (Kafka's max-dirty-percent, as a ratio)."),
		maxDelay:     node("moonmq_log_cleaner_max_compaction_delay_seconds", "How far past max.compaction.lag.ms the oldest dirty record of any compacted partition is (Kafka's max-compaction-delay-secs)."),
		uncleanable:  node("moonmq_log_cleaner_uncleanable_partitions", "Partitions whose cleaning failed; they are not cleaned again until truncated, re-created or the broker restarts."),
		dirtyRatio:   node("moonmq_partition_dirty_ratio", "Share of a compacted partition's cleanable bytes not cleaned yet; it is cleaned once this exceeds min.cleanable.dirty.ratio.", pl...),
		dirtyBytes:   node("moonmq_partition_dirty_bytes", "Bytes of a compacted partition waiting to be cleaned: the cleaner's lag in bytes.", pl...),
		delay:        node("moonmq_partition_compaction_delay_seconds", "How far past max.compaction.lag.ms a compacted partition's oldest dirty record is: the cleaner's lag in time (0: within it).", pl...),
		pCleanings:   node("moonmq_partition_cleanings_total", "Cleanings of a compacted partition that ended well.", pl...),
		pBytesRead:   node("moonmq_partition_cleaned_bytes_total", "Bytes of a compacted partition's log the cleaner read.", pl...),
		pBytesWritten: node("moonmq_partition_cleaner_written_bytes_total",
			"Bytes of cleaned segments the cleaner wrote for a compacted partition.", pl...),
		pLast:    node("moonmq_partition_last_cleaning_timestamp_seconds", "When a compacted partition's last cleaning ended (Unix seconds; absent: none yet).", pl...),
		pLastDur: node("moonmq_partition_last_cleaning_duration_seconds", "How long a compacted partition's last cleaning took.", pl...),
	}
}

func (c *cleanerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.threads, c.cleanings, c.passes, c.bytesRead, c.bytesWritten, c.removed, c.seconds,
		c.lastRun, c.maxDirty, c.maxDelay, c.uncleanable, c.dirtyRatio, c.dirtyBytes, c.delay, c.pCleanings,
		c.pBytesRead, c.pBytesWritten, c.pLast, c.pLastDur} {
		ch <- d
	}
}

func (c *cleanerCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.Stats()
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	counter := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
	}
	gauge(c.threads, float64(s.Threads))
	counter(c.cleanings, float64(s.Cleanings), "ok")
	counter(c.cleanings, float64(s.Aborted), "aborted")
	counter(c.cleanings, float64(s.Failed), "failed")
	counter(c.passes, float64(s.Passes))
	counter(c.bytesRead, float64(s.BytesRead))
	counter(c.bytesWritten, float64(s.BytesWritten))
	counter(c.removed, float64(s.RecordsRemoved))
	counter(c.seconds, s.TimeSpent.Seconds())
	last := 0.0
	if !s.LastRun.IsZero() {
		last = float64(s.LastRun.UnixNano()) / 1e9
	}
	gauge(c.lastRun, last)
	gauge(c.maxDirty, s.MaxDirtyRatio)
	gauge(c.maxDelay, s.MaxCompactionDelay.Seconds())
	gauge(c.uncleanable, float64(s.Uncleanable))
	for _, ps := range c.m.PartitionStats() {
		lv := []string{ps.Topic, strconv.Itoa(int(ps.Partition))}
		gauge(c.dirtyRatio, ps.DirtyRatio, lv...)
		gauge(c.dirtyBytes, float64(ps.DirtyBytes), lv...)
		gauge(c.delay, ps.CompactionDelay.Seconds(), lv...)
		counter(c.pCleanings, float64(ps.Cleanings), lv...)
		counter(c.pBytesRead, float64(ps.BytesRead), lv...)
		counter(c.pBytesWritten, float64(ps.BytesWritten), lv...)
		if !ps.LastCleaned.IsZero() {
			gauge(c.pLast, float64(ps.LastCleaned.UnixNano())/1e9, lv...)
			gauge(c.pLastDur, ps.LastDuration.Seconds(), lv...)
		}
	}
}
