package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/internal/cluster"
	"github.com/moonmq/moonmq/internal/history"
)

// TestClusterMetrics: the operator's view of replication on three real
// nodes. Healthy, one node is the active controller and every node agrees
// on it, the leaders add up to the partitions, each node holds a replica
// of what the metadata assigns it, nothing is under-replicated, and every
// follower reports its lag per partition. A node SIGKILLed makes the
// survivors report the partitions they lead with it as under-replicated,
// the active controller reports the partition only it held as offline,
// and /stats shows it fenced; once it is back and caught up, everything
// returns to 0, with the ISR expansions counted. A deleted topic's lag
// series go with it.
func TestClusterMetrics(t *testing.T) {
	cluster.SkipUnlessSupported(t)
	c := cluster.Start(t, cluster.Options{Nodes: 3, SessionTimeout: 3 * time.Second})
	cl, _ := c.Client()
	nc := newNodeClients(t, c)
	ctx := ctxT(t, 2*time.Minute)
	const topic, partitions = "m", 3
	createTopic(t, cl, topic, partitions, 3, nil)
	h := &history.History{}
	produceAll(t, c, h, topic, partitions, 300)

	// Healthy: one controller; leaders, replicas and followers' lag as the
	// metadata says.
	var ctrl int32
	eventually(t, 30*time.Second, "a healthy cluster's metrics", func() (bool, string) {
		md, err := clusterMetadata(ctx, cl)
		if err != nil {
			return false, err.Error()
		}
		views, err := viewAll(ctx, c, c.Nodes)
		if err != nil {
			return false, err.Error()
		}
		ctrl = -1
		led, followed := 0, 0
		for _, v := range views {
			switch {
			case v.gauge("moonmq_controller_active") == 1 && ctrl >= 0:
				return false, "two active controllers"
			case v.gauge("moonmq_controller_active") == 1:
				ctrl = v.id
			}
			if want := md.assigned(v.id); v.gauge("moonmq_partitions_assigned") != float64(want) {
				return false, fmt.Sprintf("node %d: %v partitions assigned, the metadata says %d", v.id, v.gauge("moonmq_partitions_assigned"), want)
			}
			if v.gauge("moonmq_partitions_under_replicated") != 0 || v.gauge("moonmq_cluster_partitions_offline") != 0 {
				return false, fmt.Sprintf("node %d: under-replicated or offline partitions in a healthy cluster", v.id)
			}
			if err := v.checkPartitions(topic); err != nil {
				return false, err.Error()
			}
			if lag := v.followerLag(topic); !slices.Equal(lag, v.withRole(topic, "follower")) {
				return false, fmt.Sprintf("node %d: lag series for %v, follows %v", v.id, lag, v.withRole(topic, "follower"))
			}
			followed += len(v.followerLag(topic))
			led += int(v.gauge("moonmq_partitions_led"))
		}
		if want := md.led(); led != want {
			return false, fmt.Sprintf("the nodes lead %d partitions, the metadata names %d leaders", led, want)
		}
		if followed != 2*partitions {
			return false, fmt.Sprintf("%d follower lag series for %s, want 2 per partition", followed, topic)
		}
		for _, v := range views {
			if v.gauge("moonmq_controller_id") != float64(ctrl) || v.stats.Cluster.ControllerID != ctrl {
				return false, fmt.Sprintf("node %d names controller %v, node %d is active", v.id, v.gauge("moonmq_controller_id"), ctrl)
			}
			if v.raftState() != map[bool]string{true: "leader", false: "follower"}[v.id == ctrl] {
				return false, fmt.Sprintf("node %d: raft state %s, controller %d", v.id, v.raftState(), ctrl)
			}
			if len(v.stats.Cluster.Brokers) != 3 || v.gauge("moonmq_raft_commit_index") <= 0 {
				return false, fmt.Sprintf("node %d: brokers %+v", v.id, v.stats.Cluster.Brokers)
			}
		}
		return ctrl >= 0, "no active controller"
	})

	// The victim is not the active controller, which then keeps
	// reporting. It alone holds a replica of "solo".
	victim := others(c, ctrl)[0]
	survivors := []*cluster.Node{c.Node(ctrl), c.Node(others(c, ctrl)[1])}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "solo", -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, []int32{victim}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	req.Topics = append(req.Topics, rt)
	cresp, err := req.RequestWith(ctx, nc[ctrl])
	require.NoError(t, err)
	require.Zero(t, cresp.Topics[0].ErrorCode, "%v", cresp.Topics[0].ErrorMessage)
	waitHealthy(t, cl, "solo", 1, 1, 30*time.Second)
	before, err := viewAll(ctx, c, survivors)
	require.NoError(t, err)

	c.Kill(victim)
	eventually(t, 40*time.Second, fmt.Sprintf("the survivors to report node %d's partitions", victim), func() (bool, string) {
		md, err := clusterMetadata(ctx, cl)
		if err != nil {
			return false, err.Error()
		}
		views, err := viewAll(ctx, c, survivors)
		if err != nil {
			return false, err.Error()
		}
		under := 0
		for _, v := range views {
			under += int(v.gauge("moonmq_partitions_under_replicated"))
			b := v.broker(victim)
			if !b.Fenced || b.Alive {
				return false, fmt.Sprintf("node %d sees node %d as %+v", v.id, victim, b)
			}
			wantOffline := map[bool]float64{true: 1, false: 0}[v.id == ctrl]
			if got := v.gauge("moonmq_cluster_partitions_offline"); got != wantOffline {
				return false, fmt.Sprintf("node %d: %v offline partitions, want %v", v.id, got, wantOffline)
			}
			if v.id == ctrl && v.stats.Cluster.ClusterPartitionsOffline != 1 {
				return false, fmt.Sprintf("controller /stats: %d offline partitions", v.stats.Cluster.ClusterPartitionsOffline)
			}
		}
		// Every partition with a replica on the victim and another one is
		// led by a survivor without it in the ISR.
		want := md.withReplica(victim, 2)
		if under == want && want >= partitions {
			t.Logf("survivors report %d under-replicated partitions", under)
		}
		return under == want && want >= partitions, fmt.Sprintf("survivors report %d under-replicated partitions, want %d", under, want)
	})

	c.Restart(victim)
	eventually(t, 40*time.Second, fmt.Sprintf("node %d back in every ISR", victim), func() (bool, string) {
		views, err := viewAll(ctx, c, c.Nodes)
		if err != nil {
			return false, err.Error()
		}
		for _, v := range views {
			if v.gauge("moonmq_partitions_under_replicated") != 0 || v.gauge("moonmq_cluster_partitions_offline") != 0 {
				return false, fmt.Sprintf("node %d: %v under-replicated, %v offline", v.id,
					v.gauge("moonmq_partitions_under_replicated"), v.gauge("moonmq_cluster_partitions_offline"))
			}
			if b := v.broker(victim); b.Fenced || !b.Alive {
				return false, fmt.Sprintf("node %d sees node %d as %+v", v.id, victim, b)
			}
		}
		return true, ""
	})
	after, err := viewAll(ctx, c, survivors)
	require.NoError(t, err)
	var expands float64
	for i := range after {
		expands += after[i].counter("moonmq_isr_expands_total") - before[i].counter("moonmq_isr_expands_total")
	}
	require.Positive(t, expands, "the survivors' leaders took node %d back into their ISRs", victim)
	t.Logf("controller %d, node %d killed and back; the survivors' leaders expanded their ISRs %v times", ctrl, victim, expands)

	// A deleted topic takes its lag series with it.
	_, adm := c.Client()
	_, err = adm.DeleteTopics(ctx, topic)
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the deleted topic's lag series gone", func() (bool, string) {
		views, err := viewAll(ctx, c, c.Nodes)
		if err != nil {
			return false, err.Error()
		}
		for _, v := range views {
			if lag := v.followerLag(topic); len(lag) > 0 {
				return false, fmt.Sprintf("node %d still exports lag for %s %v", v.id, topic, lag)
			}
		}
		return true, ""
	})
}

// eventually polls cond every 100ms until it holds, failing with its last
// explanation after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, why)
		case <-tick.C:
		}
	}
}

// nodeView is one node's /metrics and /stats.
type nodeView struct {
	id      int32
	metrics map[string]*dto.MetricFamily
	stats   statsDoc
}

// statsDoc is the part of /stats this test reads, under the field names
// the README documents.
type statsDoc struct {
	Topics []struct {
		Name       string `json:"name"`
		Partitions []struct {
			Partition   int32   `json:"partition"`
			Leader      int32   `json:"leader"`
			LeaderEpoch int32   `json:"leader_epoch"`
			Replicas    []int32 `json:"replicas"`
			ISR         []int32 `json:"isr"`
			Role        string  `json:"role"`
			FollowerLag *int64  `json:"follower_lag"`
		} `json:"partitions"`
	} `json:"topics"`
	Cluster *struct {
		NodeID           int32 `json:"node_id"`
		ControllerID     int32 `json:"controller_id"`
		ActiveController bool  `json:"active_controller"`
		Raft             struct {
			State string `json:"state"`
		} `json:"raft"`
		Brokers []brokerDoc `json:"brokers"`
		// ClusterPartitionsOffline is this node's metadata's count.
		ClusterPartitionsOffline int `json:"cluster_partitions_offline"`
	} `json:"cluster"`
}

type brokerDoc struct {
	ID      int32  `json:"id"`
	Address string `json:"address"`
	Fenced  bool   `json:"fenced"`
	Alive   bool   `json:"alive"`
}

func viewAll(ctx context.Context, c *cluster.Cluster, nodes []*cluster.Node) ([]nodeView, error) {
	var out []nodeView
	for _, nd := range nodes {
		v, err := viewOf(ctx, nd)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func viewOf(ctx context.Context, nd *cluster.Node) (nodeView, error) {
	v := nodeView{id: nd.ID}
	body, err := httpBody(ctx, "http://"+nd.HTTP+"/metrics")
	if err != nil {
		return v, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	if v.metrics, err = parser.TextToMetricFamilies(strings.NewReader(body)); err != nil {
		return v, fmt.Errorf("node %d /metrics: %w", nd.ID, err)
	}
	if body, err = httpBody(ctx, "http://"+nd.HTTP+"/stats"); err != nil {
		return v, err
	}
	if err := json.Unmarshal([]byte(body), &v.stats); err != nil {
		return v, fmt.Errorf("node %d /stats: %w", nd.ID, err)
	}
	if v.stats.Cluster == nil || v.stats.Cluster.NodeID != nd.ID {
		return v, fmt.Errorf("node %d /stats: cluster object %+v", nd.ID, v.stats.Cluster)
	}
	return v, nil
}

func httpBody(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b), nil
}

// gauge is the value of an unlabelled gauge, -1 when it is not exported.
func (v nodeView) gauge(name string) float64 {
	f := v.metrics[name]
	if f == nil || len(f.Metric) != 1 {
		return -1
	}
	return f.Metric[0].GetGauge().GetValue()
}

func (v nodeView) counter(name string) float64 {
	f := v.metrics[name]
	if f == nil || len(f.Metric) != 1 {
		return -1
	}
	return f.Metric[0].GetCounter().GetValue()
}

// raftState is the state moonmq_raft_state marks with 1.
func (v nodeView) raftState() string {
	var on []string
	for _, m := range v.metrics["moonmq_raft_state"].GetMetric() {
		if m.GetGauge().GetValue() == 1 {
			on = append(on, label(m, "state"))
		}
	}
	if len(on) != 1 {
		return fmt.Sprint(on)
	}
	return on[0]
}

// followerLag lists the partitions of topic with a lag series, sorted.
func (v nodeView) followerLag(topic string) []int32 {
	out := []int32{}
	for _, m := range v.metrics["moonmq_partition_follower_lag"].GetMetric() {
		if label(m, "topic") == topic {
			p, _ := strconv.Atoi(label(m, "partition"))
			out = append(out, int32(p))
		}
	}
	slices.Sort(out)
	return out
}

// withRole lists the partitions of topic /stats says this node has role
// in, sorted.
func (v nodeView) withRole(topic, role string) []int32 {
	out := []int32{}
	for _, t := range v.stats.Topics {
		if t.Name != topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.Role == role {
				out = append(out, p.Partition)
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkPartitions checks the replication fields of topic's partitions in
// /stats on a healthy cluster of three: a leader, three replicas in sync,
// the role the leader says, a lag on followers.
func (v nodeView) checkPartitions(topic string) error {
	for _, t := range v.stats.Topics {
		if t.Name != topic {
			continue
		}
		for _, p := range t.Partitions {
			role := map[bool]string{true: "leader", false: "follower"}[p.Leader == v.id]
			if p.Leader < 0 || p.LeaderEpoch < 0 || len(p.Replicas) != 3 || len(p.ISR) != 3 || p.Role != role ||
				(role == "follower") != (p.FollowerLag != nil) {
				return fmt.Errorf("node %d: %s-%d in /stats: %+v", v.id, topic, p.Partition, p)
			}
		}
		return nil
	}
	return fmt.Errorf("node %d: no %s in /stats", v.id, topic)
}

func (v nodeView) broker(id int32) brokerDoc {
	for _, b := range v.stats.Cluster.Brokers {
		if b.ID == id {
			return b
		}
	}
	return brokerDoc{ID: -1}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// metadataView is every partition of the cluster as a broker describes it.
type metadataView []cluster.PartitionState

func clusterMetadata(ctx context.Context, cl *kgo.Client) (metadataView, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl) // every topic
	if err != nil {
		return nil, err
	}
	var out metadataView
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, fmt.Errorf("metadata of %s: %w", *t.Topic, err)
		}
		for _, p := range t.Partitions {
			out = append(out, cluster.PartitionState{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR})
		}
	}
	return out, nil
}

// assigned counts the partitions with a replica on broker id.
func (md metadataView) assigned(id int32) int { return md.withReplica(id, 1) }

// withReplica counts the partitions with a replica on broker id and at
// least rf replicas.
func (md metadataView) withReplica(id int32, rf int) int {
	n := 0
	for _, p := range md {
		if slices.Contains(p.Replicas, id) && len(p.Replicas) >= rf {
			n++
		}
	}
	return n
}

// led counts the partitions with a leader.
func (md metadataView) led() int {
	n := 0
	for _, p := range md {
		if p.Leader >= 0 {
			n++
		}
	}
	return n
}
