package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"
)

// raftStates are the values of moonmq_raft_state's state label: every one
// is exported, 1 for the current state and 0 for the others, so the label
// set is fixed.
var raftStates = []string{"follower", "candidate", "leader", "shutdown"}

// clusterCollector reports the controller, Raft and replication state of
// the node at scrape time, from the same ClusterStats as /stats.
type clusterCollector struct {
	cluster                                         func() *ClusterStats
	active, controllerID                            *prometheus.Desc
	raftState, term, lastLog, commit, applied       *prometheus.Desc
	led, assigned, underReplicated, underMinISR     *prometheus.Desc
	clusterOffline, isrShrinks, isrExpands, brokers *prometheus.Desc
	brokersFenced                                   *prometheus.Desc
}

// NewClusterCollector exposes the cluster metric families from cluster,
// which builds the /stats "cluster" object; nil (the node is still
// opening) exports none of them.
func NewClusterCollector(cluster func() *ClusterStats) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &clusterCollector{
		cluster:      cluster,
		active:       d("moonmq_controller_active", "1 while this node is the active controller (the Raft leader), else 0 (Kafka's ActiveControllerCount)."),
		controllerID: d("moonmq_controller_id", "Node id of the active controller as this node knows it; -1 while there is none."),
		raftState: prometheus.NewDesc("moonmq_raft_state",
			"1 for this node's current Raft state (follower, candidate, leader, or shutdown once closed), 0 for the others.", []string{"state"}, nil),
		term:     d("moonmq_raft_term", "Current Raft term of the metadata log."),
		lastLog:  d("moonmq_raft_last_log_index", "Index of the last entry in this node's Raft log (or snapshot)."),
		commit:   d("moonmq_raft_commit_index", "Index of the last Raft entry this node knows committed."),
		applied:  d("moonmq_raft_applied_index", "Index of the last Raft entry handed to the metadata state machine."),
		led:      d("moonmq_partitions_led", "Partitions this node leads, as the metadata it applied says (Kafka's LeaderCount)."),
		assigned: d("moonmq_partitions_assigned", "Partitions the metadata assigns a replica of to this node, led or followed (Kafka's PartitionCount)."),
		underReplicated: d("moonmq_partitions_under_replicated",
			"Partitions this node leads whose ISR is smaller than their replicas (Kafka's UnderReplicatedPartitions)."),
		underMinISR: d("moonmq_partitions_under_min_isr",
			"Partitions this node leads whose ISR is smaller than min.insync.replicas: acks=all produces fail (Kafka's UnderMinIsrPartitionCount)."),
		clusterOffline: d("moonmq_cluster_partitions_offline",
			"Partitions of the whole cluster without a leader, on the active controller; 0 on every other node, so the sum (or max) over the nodes is the cluster's count (Kafka's OfflinePartitionsCount)."),
		isrShrinks: d("moonmq_isr_shrinks_total", "ISR shrinks this node's leaders proposed and the controller committed (Kafka's IsrShrinksPerSec)."),
		isrExpands: d("moonmq_isr_expands_total", "ISR expansions this node's leaders proposed and the controller committed (Kafka's IsrExpandsPerSec)."),
		brokers:    d("moonmq_cluster_brokers", "Brokers registered in the metadata this node applied."),
		brokersFenced: d("moonmq_cluster_brokers_fenced",
			"Registered brokers the controller fenced (unreachable for the session timeout, or shut down), in the metadata this node applied."),
	}
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.active, c.controllerID, c.raftState, c.term, c.lastLog, c.commit, c.applied,
		c.led, c.assigned, c.underReplicated, c.underMinISR, c.clusterOffline, c.isrShrinks, c.isrExpands,
		c.brokers, c.brokersFenced} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.cluster()
	if s == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	offline := 0
	if s.ActiveController {
		offline = s.ClusterPartitionsOffline
	}
	gauge(c.active, boolValue(s.ActiveController))
	gauge(c.controllerID, float64(s.ControllerID))
	for _, st := range raftStates {
		gauge(c.raftState, boolValue(s.Raft.State == st), st)
	}
	gauge(c.term, float64(s.Raft.Term))
	gauge(c.lastLog, float64(s.Raft.LastLogIndex))
	gauge(c.commit, float64(s.Raft.CommitIndex))
	gauge(c.applied, float64(s.Raft.AppliedIndex))
	gauge(c.led, float64(s.PartitionsLed))
	gauge(c.assigned, float64(s.PartitionsAssigned))
	gauge(c.underReplicated, float64(s.PartitionsUnderReplicated))
	gauge(c.underMinISR, float64(s.PartitionsUnderMinISR))
	gauge(c.clusterOffline, float64(offline))
	ch <- prometheus.MustNewConstMetric(c.isrShrinks, prometheus.CounterValue, float64(s.ISRShrinks))
	ch <- prometheus.MustNewConstMetric(c.isrExpands, prometheus.CounterValue, float64(s.ISRExpands))
	fenced := 0
	for _, b := range s.Brokers {
		if b.Fenced {
			fenced++
		}
	}
	gauge(c.brokers, float64(len(s.Brokers)))
	gauge(c.brokersFenced, float64(fenced))
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
