package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/internal/cluster"
	"github.com/moonmq/moonmq/internal/history"
	"github.com/moonmq/moonmq/internal/testbroker"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates topic with partitions and replication factor rf and
// waits until every partition has a leader and a full ISR.
func createTopic(t *testing.T, cl *kgo.Client, topic string, partitions int32, rf int16, configs map[string]*string) map[int32]cluster.PartitionState {
	t.Helper()
	resp, err := kadm.NewClient(cl).CreateTopic(ctxT(t, 30*time.Second), partitions, rf, configs, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	return waitHealthy(t, cl, topic, int(partitions), int(rf), 60*time.Second)
}

// waitHealthy polls metadata until topic has its partitions, each with a
// leader, rf replicas and all of them in the ISR.
func waitHealthy(t *testing.T, cl *kgo.Client, topic string, partitions, rf int, timeout time.Duration) map[int32]cluster.PartitionState {
	t.Helper()
	var last map[int32]cluster.PartitionState
	var lastErr error
	testbroker.WaitFor(t, timeout, fmt.Sprintf("%s: %d partitions, each with a leader and %d replicas in sync", topic, partitions, rf), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		last, lastErr = cluster.Partitions(ctx, cl, topic)
		if lastErr != nil || len(last) != partitions {
			return false
		}
		for _, p := range last {
			if p.Leader < 0 || len(p.Replicas) != rf || len(p.ISR) != rf {
				return false
			}
		}
		return true
	})
	return last
}

// leaderOf polls metadata until partition p of topic has a leader (other
// than not, when not >= 0) and returns it with its epoch.
func leaderOf(t *testing.T, cl *kgo.Client, topic string, p, not int32, timeout time.Duration) (int32, int32) {
	t.Helper()
	var leader, epoch int32 = -1, -1
	testbroker.WaitFor(t, timeout, fmt.Sprintf("a leader of %s[%d] other than %d", topic, p, not), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		parts, err := cluster.Partitions(ctx, cl, topic)
		if err != nil {
			return false
		}
		st, ok := parts[p]
		if !ok || st.Leader < 0 || st.Leader == not {
			return false
		}
		leader, epoch = st.Leader, st.LeaderEpoch
		return true
	})
	return leader, epoch
}

// outOfISR polls metadata until broker id is no longer in the ISR of
// partition p of topic.
func outOfISR(t *testing.T, cl *kgo.Client, topic string, p, id int32, timeout time.Duration) {
	t.Helper()
	testbroker.WaitFor(t, timeout, fmt.Sprintf("broker %d out of the ISR of %s[%d]", id, topic, p), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		parts, err := cluster.Partitions(ctx, cl, topic)
		return err == nil && parts[p].Leader >= 0 && !slices.Contains(parts[p].ISR, id)
	})
}

// controllerOf asks the running, unpaused nodes (each itself: a client
// may keep sending to a paused node, whose kernel still accepts
// connections) until one names an active controller other than not (when
// not >= 0), and returns it.
func controllerOf(t *testing.T, c *cluster.Cluster, nc nodeClients, not int32, timeout time.Duration) int32 {
	t.Helper()
	ctrl := int32(-1)
	testbroker.WaitFor(t, timeout, fmt.Sprintf("an active controller other than %d", not), func() bool {
		for _, nd := range c.Nodes {
			if !nd.Running() || nd.Paused() || c.Isolated(nd.ID) {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			resp, err := nc.metadata(ctx, nd.ID)
			cancel()
			if err == nil && resp.ControllerID >= 0 && resp.ControllerID != not {
				ctrl = resp.ControllerID
				return true
			}
		}
		return false
	})
	return ctrl
}

// waitConverged polls every node's /stats until each one hears every
// broker over gossip and the metadata it applied fences none. After a
// partition heals, gossip takes a moment to call everyone alive again; a
// fault started before then meets a cluster the healing has not finished
// with (a broker the new controller fences at its first look).
func waitConverged(t *testing.T, c *cluster.Cluster, timeout time.Duration) {
	t.Helper()
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last seen: %s", last)
		}
	}()
	testbroker.WaitFor(t, timeout, "every node hearing every broker, none fenced", func() bool {
		for _, nd := range c.Nodes {
			var st struct {
				Cluster struct {
					Brokers []struct {
						ID     int32 `json:"id"`
						Fenced bool  `json:"fenced"`
						Alive  bool  `json:"alive"`
					} `json:"brokers"`
				} `json:"cluster"`
			}
			if err := getJSON("http://"+nd.HTTP+"/stats", &st); err != nil {
				last = fmt.Sprintf("node %d: %v", nd.ID, err)
				return false
			}
			if len(st.Cluster.Brokers) != len(c.Nodes) {
				last = fmt.Sprintf("node %d knows %d brokers", nd.ID, len(st.Cluster.Brokers))
				return false
			}
			for _, b := range st.Cluster.Brokers {
				if b.Fenced || !b.Alive {
					last = fmt.Sprintf("node %d: broker %d fenced %v, alive %v", nd.ID, b.ID, b.Fenced, b.Alive)
					return false
				}
			}
		}
		return true
	})
}

func getJSON(url string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// quickMetadata lets a client refresh metadata soon after a leader died,
// rather than after franz-go's default 5 s, so the load follows failovers
// within a short fault test.
var quickMetadata = kgo.MetadataMinAge(250 * time.Millisecond)

// producer writes unique values ("name-seq") to chosen partitions with an
// idempotent acks=all franz-go client and records every outcome.
type producer struct {
	name string
	cl   *kgo.Client
	h    *history.History
	seq  atomic.Int64
	wg   sync.WaitGroup
}

func newProducer(t *testing.T, c *cluster.Cluster, h *history.History, name, topic string, opts ...kgo.Opt) *producer {
	t.Helper()
	cl, _ := c.Client(append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(256),
		kgo.RecordDeliveryTimeout(30 * time.Second), quickMetadata}, opts...)...)
	return &producer{name: name, cl: cl, h: h}
}

// produce sends one record to partition p; its promise records the outcome
// in the order franz-go reports them (per partition, acknowledgement order).
func (pr *producer) produce(ctx context.Context, p int32) {
	v := fmt.Sprintf("%s-%d", pr.name, pr.seq.Add(1))
	pr.wg.Add(1)
	pr.cl.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
		defer pr.wg.Done()
		e := history.Produce{Producer: pr.name, Partition: p, Value: v}
		if err == nil {
			e.Outcome, e.Offset = history.Acked, r.Offset
		} else {
			e.Outcome, e.Err = history.Unknown, err.Error()
		}
		pr.h.Produced(e)
	})
}

// wait waits for every promise (the client's delivery timeout bounds it).
func (pr *producer) wait() { pr.wg.Wait() }

// reader consumes every partition of topic from the start, recording each
// record with the high watermark of its fetch, until ctx ends.
func reader(ctx context.Context, c *cluster.Cluster, h *history.History, name, topic string, partitions int32, opts ...kgo.Opt) {
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offsets[p] = kgo.NewOffset().At(0)
	}
	cl, _ := c.Client(append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}), quickMetadata}, opts...)...)
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			for _, r := range fp.Records {
				h.ReadRecord(history.Read{Reader: name, Partition: fp.Partition, Offset: r.Offset,
					Value: string(r.Value), LeaderEpoch: r.LeaderEpoch, HW: fp.HighWatermark})
			}
		})
	}
}

// finalLog reads every partition of topic from its start to its high
// watermark (the end offset a read_uncommitted consumer sees).
func finalLog(t *testing.T, c *cluster.Cluster, topic string, partitions int32) map[int32][]history.Record {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	_, adm := c.Client()
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, ends.Error())
	want := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	var total int64
	for p := int32(0); p < partitions; p++ {
		o, ok := ends.Lookup(topic, p)
		require.True(t, ok, "no end offset for %s[%d]", topic, p)
		want[p] = o.Offset
		total += o.Offset
		offsets[p] = kgo.NewOffset().At(0)
	}
	cl, _ := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	out := map[int32][]history.Record{}
	var got int64
	for got < total {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "final read: %d of %d records", got, total)
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("final read %s[%d]: %v (retrying)", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= want[r.Partition] {
				return // written after the end offsets were taken
			}
			out[r.Partition] = append(out[r.Partition], history.Record{Offset: r.Offset, Value: string(r.Value), LeaderEpoch: r.LeaderEpoch})
			got++
		})
	}
	return out
}

// nodeClients are one client per node, each sending its requests to that
// node itself (its only seed), not to whichever broker a client picks.
type nodeClients map[int32]*kgo.Client

func newNodeClients(t *testing.T, c *cluster.Cluster) nodeClients {
	t.Helper()
	nc := nodeClients{}
	for _, nd := range c.Nodes {
		cl, err := kgo.NewClient(kgo.SeedBrokers(nd.Kafka))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		nc[nd.ID] = cl
	}
	return nc
}

// metadata asks node id itself for the metadata of topics (all if none).
func (nc nodeClients) metadata(ctx context.Context, id int32, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	return req.RequestWith(ctx, nc[id].SeedBrokers()[0])
}

// observeEpochs asks every running, reachable node for topic's metadata and
// records the leader epochs it reports, keyed by the node's process
// lifetime.
func observeEpochs(ctx context.Context, c *cluster.Cluster, nc nodeClients, h *history.History, topic string) {
	for _, nd := range c.Nodes {
		if !nd.Running() || nd.Paused() || c.Isolated(nd.ID) {
			continue
		}
		source := fmt.Sprintf("node %d (start %d)", nd.ID, nd.Starts())
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := nc.metadata(rctx, nd.ID, topic)
		cancel()
		if err != nil {
			continue // the node may be going down: no observation
		}
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if p.ErrorCode == 0 && p.Leader >= 0 {
					h.SawEpoch(history.Epoch{Source: source, Partition: p.Partition, Epoch: p.LeaderEpoch})
				}
			}
		}
	}
}

// soakBudget reads MOONMQ_SOAK: a duration the fault test runs for, or a
// number of nemesis cycles; the default is one minute.
func soakBudget(t *testing.T) (time.Duration, int) {
	t.Helper()
	v := os.Getenv("MOONMQ_SOAK")
	if v == "" {
		return time.Minute, 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return 0, n
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("MOONMQ_SOAK=%q: want a duration (10m) or a number of cycles (200)", v)
	}
	return d, 0
}

// soakSeed is the seed of the fault test's random choices: MOONMQ_SOAK_SEED,
// else the time, logged so a run can be replayed.
func soakSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("MOONMQ_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("MOONMQ_SOAK_SEED=%q: want an unsigned integer", v)
		}
		seed = n
	}
	t.Logf("fault order seed %d (MOONMQ_SOAK_SEED replays it)", seed)
	return seed
}

// others are the node ids but id.
func others(c *cluster.Cluster, id int32) []int32 {
	var out []int32
	for _, nd := range c.Nodes {
		if nd.ID != id {
			out = append(out, nd.ID)
		}
	}
	return slices.Clip(out)
}
