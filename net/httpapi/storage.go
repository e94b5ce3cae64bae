package httpapi

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/replica"
)

// StorageMetrics observes fsync rounds; pass ObserveFsync as the broker's
// OnFsync hook.
type StorageMetrics struct {
	fsyncDuration prometheus.Histogram
	groupCommit   prometheus.Histogram
}

// NewStorageMetrics registers the fsync metrics with reg.
func NewStorageMetrics(reg prometheus.Registerer) *StorageMetrics {
	m := &StorageMetrics{
		fsyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "moonmq_fsync_duration_seconds", Help: "Duration of partition fsync rounds.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16), // 50µs .. ~1.6s
		}),
		groupCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "moonmq_group_commit_appends", Help: "Appends made durable by one fsync round (group commit size).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12), // 1 .. 2048
		}),
	}
	reg.MustRegister(m.fsyncDuration, m.groupCommit)
	return m
}

// ObserveFsync records one fsync round.
func (m *StorageMetrics) ObserveFsync(d time.Duration, appends uint64) {
	m.fsyncDuration.Observe(d.Seconds())
	m.groupCommit.Observe(float64(appends))
}

// partitionCollector reports every hosted partition's log state at scrape
// time; the label set is bounded by the partitions that exist.
type partitionCollector struct {
	b                                            *replica.Manager
	logStart, logEnd, hw, size, segments, fsyncs *prometheus.Desc
	online, corrupt, offline                     *prometheus.Desc
	filesOpen, filesEvicted, capacity            *prometheus.Desc
	followerLag, maxLag                          *prometheus.Desc
	lso, lsoLag, openTxns                        *prometheus.Desc
}

// NewPartitionCollector exposes per-partition log gauges for b, its
// offline partitions and its file descriptor use.
func NewPartitionCollector(b *replica.Manager) prometheus.Collector {
	labels := []string{"topic", "partition"}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	node := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &partitionCollector{
		b:        b,
		logStart: d("moonmq_partition_log_start_offset", "First offset still stored."),
		logEnd:   d("moonmq_partition_log_end_offset", "Next offset to be assigned."),
		hw:       d("moonmq_partition_high_watermark", "Offset up to which records are durable and readable."),
		size:     d("moonmq_partition_size_bytes", "Bytes of segment files on disk."),
		segments: d("moonmq_partition_segments", "Number of segments."),
		fsyncs:   d("moonmq_partition_fsyncs_total", "Fsync rounds of this partition's log."),
		online:   d("moonmq_partition_online", "1 while the partition takes appends and serves reads, 0 while it is offline (storage error; retried)."),
		corrupt:  d("moonmq_partition_corrupt_ranges", "Damaged stretches found in the partition's log (their offsets are not served)."),
		offline:  node("moonmq_partitions_offline", "Partitions hosted here that cannot serve (failed to open, or their log failed an I/O operation)."),
		filesOpen: node("moonmq_segment_files_open",
			"File descriptors held by segment files (active segments and the cache of sealed ones)."),
		filesEvicted: node("moonmq_segment_files_evicted_total", "Idle segment files closed to keep the file cache within its capacity."),
		capacity:     node("moonmq_partitions_capacity", "Partitions this node can hold within its file descriptor limit."),
		followerLag: d("moonmq_partition_follower_lag",
			"On a follower replica: its leader's high watermark (from the last fetch answer) minus this replica's durable end, in offsets; absent on leaders and before the leader answered."),
		lso: d("moonmq_partition_last_stable_offset",
			"Offset up to which read_committed consumers read: the high watermark unless an open transaction holds it back."),
		lsoLag:   d("moonmq_partition_lso_lag", "High watermark minus last stable offset: what open transactions hold back from read_committed consumers."),
		openTxns: d("moonmq_partition_open_transactions", "Transactions open on the partition."),
		maxLag: node("moonmq_follower_max_lag",
			"The largest moonmq_partition_follower_lag over the partitions this node follows (0 when it follows none), as Kafka's ReplicaFetcherManager MaxLag."),
	}
}

func (c *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.logStart, c.logEnd, c.hw, c.size, c.segments, c.fsyncs, c.online, c.corrupt,
		c.offline, c.filesOpen, c.filesEvicted, c.capacity, c.followerLag, c.maxLag, c.lso, c.lsoLag, c.openTxns} {
		ch <- d
	}
}

func (c *partitionCollector) Collect(ch chan<- prometheus.Metric) {
	offline := 0
	var maxLag int64
	for _, ps := range c.b.PartitionStates() {
		lv := []string{ps.Topic, strconv.Itoa(int(ps.Partition))}
		if ps.Following {
			ch <- prometheus.MustNewConstMetric(c.followerLag, prometheus.GaugeValue, float64(ps.FollowerLag), lv...)
			maxLag = max(maxLag, ps.FollowerLag)
		}
		online := 1.0
		if !ps.Online {
			online = 0
			offline++
		}
		ch <- prometheus.MustNewConstMetric(c.online, prometheus.GaugeValue, online, lv...)
		if ps.Stats == (log.Stats{}) {
			continue // never opened: no log to describe
		}
		st := ps.Stats
		ch <- prometheus.MustNewConstMetric(c.logStart, prometheus.GaugeValue, float64(st.LogStartOffset), lv...)
		ch <- prometheus.MustNewConstMetric(c.logEnd, prometheus.GaugeValue, float64(st.LogEndOffset), lv...)
		ch <- prometheus.MustNewConstMetric(c.hw, prometheus.GaugeValue, float64(st.HighWatermark), lv...)
		ch <- prometheus.MustNewConstMetric(c.lso, prometheus.GaugeValue, float64(ps.LastStable), lv...)
		ch <- prometheus.MustNewConstMetric(c.lsoLag, prometheus.GaugeValue, float64(max(0, st.HighWatermark-ps.LastStable)), lv...)
		ch <- prometheus.MustNewConstMetric(c.openTxns, prometheus.GaugeValue, float64(ps.OpenTransactions), lv...)
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(st.Size), lv...)
		ch <- prometheus.MustNewConstMetric(c.segments, prometheus.GaugeValue, float64(st.Segments), lv...)
		ch <- prometheus.MustNewConstMetric(c.fsyncs, prometheus.CounterValue, float64(st.Fsyncs), lv...)
		ch <- prometheus.MustNewConstMetric(c.corrupt, prometheus.GaugeValue, float64(len(ps.CorruptRanges)), lv...)
	}
	ch <- prometheus.MustNewConstMetric(c.offline, prometheus.GaugeValue, float64(offline))
	ch <- prometheus.MustNewConstMetric(c.maxLag, prometheus.GaugeValue, float64(maxLag))
	fc := c.b.FileCacheStats()
	ch <- prometheus.MustNewConstMetric(c.filesOpen, prometheus.GaugeValue, float64(fc.Open))
	ch <- prometheus.MustNewConstMetric(c.filesEvicted, prometheus.CounterValue, float64(fc.Evicted))
	ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(c.b.Capacity()))
}

// groupCollector reports consumer-group positions and lag at scrape time.
type groupCollector struct {
	groups            func() []GroupStats
	committed, lag    *prometheus.Desc
	groupLag, members *prometheus.Desc
}

// NewGroupCollector exposes per group/topic/partition committed offsets and
// lag, from the same source as /stats; labels are bounded by the groups and
// partitions that exist.
func NewGroupCollector(groups func() []GroupStats) prometheus.Collector {
	pl := []string{"group", "topic", "partition"}
	return &groupCollector{
		groups:    groups,
		committed: prometheus.NewDesc("moonmq_group_committed_offset", "Committed offset of a consumer group in a partition.", pl, nil),
		lag:       prometheus.NewDesc("moonmq_group_lag", "High watermark minus committed offset, per group and partition.", pl, nil),
		groupLag:  prometheus.NewDesc("moonmq_group_lag_total", "Sum of a group's lag over its partitions.", []string{"group"}, nil),
		members:   prometheus.NewDesc("moonmq_group_members", "Members of a consumer group.", []string{"group"}, nil),
	}
}

func (c *groupCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.committed, c.lag, c.groupLag, c.members} {
		ch <- d
	}
}

func (c *groupCollector) Collect(ch chan<- prometheus.Metric) {
	for _, g := range c.groups() {
		ch <- prometheus.MustNewConstMetric(c.groupLag, prometheus.GaugeValue, float64(g.Lag), g.Group)
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(g.Members), g.Group)
		for _, p := range g.Partitions {
			lv := []string{g.Group, p.Topic, strconv.Itoa(int(p.Partition))}
			ch <- prometheus.MustNewConstMetric(c.committed, prometheus.GaugeValue, float64(p.Committed), lv...)
			if p.Lag >= 0 {
				ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(p.Lag), lv...)
			}
		}
	}
}

// transactionCollector reports the transaction coordinator's counts.
type transactionCollector struct {
	stats                        func() *TransactionStats
	byState, pending             *prometheus.Desc
	committed, aborted, timedOut *prometheus.Desc
}

// NewTransactionCollector exposes the transactions this node coordinates
// by state, the markers it has still to write, and its committed, aborted
// and timed-out counts, from the same source as /stats.
func NewTransactionCollector(stats func() *TransactionStats) prometheus.Collector {
	node := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &transactionCollector{
		stats:     stats,
		byState:   prometheus.NewDesc("moonmq_transactions", "Transactional ids this node coordinates, by the state of their transaction.", []string{"state"}, nil),
		pending:   node("moonmq_transaction_markers_pending", "End-transaction markers the coordinator has not written yet."),
		committed: node("moonmq_transactions_committed_total", "Transactions committed by this node's coordinator since it started."),
		aborted:   node("moonmq_transactions_aborted_total", "Transactions aborted by this node's coordinator since it started (timed out ones included)."),
		timedOut:  node("moonmq_transactions_timed_out_total", "Transactions the coordinator aborted because they were open longer than their timeout."),
	}
}

func (c *transactionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.byState, c.pending, c.committed, c.aborted, c.timedOut} {
		ch <- d
	}
}

func (c *transactionCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	if st == nil {
		return
	}
	for state, n := range st.ByState {
		ch <- prometheus.MustNewConstMetric(c.byState, prometheus.GaugeValue, float64(n), state)
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(st.MarkersPending))
	ch <- prometheus.MustNewConstMetric(c.committed, prometheus.CounterValue, float64(st.Committed))
	ch <- prometheus.MustNewConstMetric(c.aborted, prometheus.CounterValue, float64(st.Aborted))
	ch <- prometheus.MustNewConstMetric(c.timedOut, prometheus.CounterValue, float64(st.TimedOut))
}
