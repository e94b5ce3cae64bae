package clustertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/internal/cluster"
	"github.com/moonmq/moonmq/internal/testbroker"
	"github.com/moonmq/moonmq/net/httpapi"
)

// keyedWrite is one keyed produce and what the client learnt of it.
type keyedWrite struct {
	key, value string
	offset     int64 // -1 unless acknowledged
	acked      bool
}

// keyedHistory records the keyed writes of a compacted topic, per
// partition.
type keyedHistory struct {
	mu     sync.Mutex
	writes map[int32][]keyedWrite
}

func (h *keyedHistory) add(p int32, w keyedWrite) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.writes == nil {
		h.writes = map[int32][]keyedWrite{}
	}
	h.writes[p] = append(h.writes[p], w)
}

// check compares a partition read from its start with the history: offsets
// strictly increase, every value read was produced under its key (and, at
// an acknowledged offset, is the acknowledged value), and each key's last
// record is at or past the key's last acknowledged write: compaction kept
// the latest value. A write of unknown outcome may be that latest value.
func (h *keyedHistory) check(p int32, read []*kgo.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	produced := map[string]string{} // value -> key
	ackedAt := map[int64]keyedWrite{}
	lastAcked := map[string]int64{}
	for _, w := range h.writes[p] {
		produced[w.value] = w.key
		if w.acked {
			ackedAt[w.offset] = w
			lastAcked[w.key] = max(lastAcked[w.key], w.offset)
		}
	}
	last := map[string]int64{}
	prev := int64(-1)
	for _, r := range read {
		if r.Offset <= prev {
			return fmt.Errorf("partition %d: offset %d after %d", p, r.Offset, prev)
		}
		prev = r.Offset
		k, v := string(r.Key), string(r.Value)
		if pk, ok := produced[v]; !ok || pk != k {
			return fmt.Errorf("partition %d offset %d: %s=%s was never produced", p, r.Offset, k, v)
		}
		if w, ok := ackedAt[r.Offset]; ok && (w.key != k || w.value != v) {
			return fmt.Errorf("partition %d offset %d: read %s=%s, acknowledged %s=%s", p, r.Offset, k, v, w.key, w.value)
		}
		last[k] = r.Offset
	}
	for k, off := range lastAcked {
		got, ok := last[k]
		if !ok || got < off {
			return fmt.Errorf("partition %d: key %s: last record read at %d (present %v), acknowledged at %d: the latest value is lost", p, k, got, ok, off)
		}
	}
	return nil
}

// readPartition reads partition p of topic from its start to end.
func readPartition(ctx context.Context, c *cluster.Cluster, topic string, p int32, end int64) ([]*kgo.Record, error) {
	cl, _ := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(0)}}), quickMetadata)
	defer cl.Close()
	var out []*kgo.Record
	for {
		if len(out) > 0 && out[len(out)-1].Offset+1 >= end {
			return out, nil
		}
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("read %s[%d] up to %d: %w (%d records)", topic, p, end, err, len(out))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end {
				out = append(out, r)
			}
		})
	}
}

// cleaningsOn is how many cleanings node id's replica of topic[p] has
// done (its /stats), -1 when it cannot say.
func cleaningsOn(nd *cluster.Node, topic string, p int32) int64 {
	var st httpapi.Stats
	if err := getJSON("http://"+nd.HTTP+"/stats", &st); err != nil {
		return -1
	}
	for _, ts := range st.Topics {
		if ts.Name != topic {
			continue
		}
		for _, ps := range ts.Partitions {
			if ps.Partition == p && ps.Compaction != nil {
				return ps.Compaction.Cleanings
			}
		}
	}
	return -1
}

// A replicated compacted topic: every replica cleans its own log while
// keyed writes go on, a leader is SIGKILLed and comes back, and then each
// partition is read through its leader, and again through another replica
// (leadership moved by killing the leader): whichever log serves it, every key's latest
// acknowledged value is there, offsets only increase and nothing appears
// that was not produced.
func TestCompactedTopicAcrossFailovers(t *testing.T) {
	cluster.SkipUnlessSupported(t)
	c := cluster.Start(t, cluster.Options{Nodes: 3, Flags: []string{"--log-cleaner-backoff", "50ms"}})
	cl, _ := c.Client()
	ctx := ctxT(t, 4*time.Minute)
	const topic, partitions, keys = "table", 2, 40
	createTopic(t, cl, topic, partitions, 3, map[string]*string{
		"cleanup.policy": new("compact"), "segment.bytes": new("4096"), "min.cleanable.dirty.ratio": new("0.01"),
	})

	h := &keyedHistory{}
	pcl, _ := c.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(64),
		kgo.RecordDeliveryTimeout(30*time.Second), quickMetadata)
	var seq int
	var wg sync.WaitGroup
	produce := func(n int) {
		for range n {
			seq++
			p, k := int32(seq%partitions), fmt.Sprintf("k%02d", seq%keys)
			v := fmt.Sprintf("%s-v%d-%s", k, seq, strings.Repeat("x", 40))
			wg.Add(1)
			pcl.Produce(ctx, &kgo.Record{Partition: p, Key: []byte(k), Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				h.add(p, keyedWrite{key: k, value: v, offset: r.Offset, acked: err == nil})
			})
		}
	}

	// Every replica of both partitions cleans while writes go on.
	produce(3000)
	wg.Wait()
	testbroker.WaitFor(t, time.Minute, "every replica to have cleaned its log", func() bool {
		produce(50) // keeps segments rolling and dirty
		wg.Wait()
		for _, nd := range c.Nodes {
			for p := range int32(partitions) {
				if cleaningsOn(nd, topic, p) < 1 {
					return false
				}
			}
		}
		return true
	})

	// SIGKILL the leader of partition 0 while writing; it comes back.
	leader, _ := leaderOf(t, cl, topic, 0, -1, 30*time.Second)
	produce(500)
	c.Kill(leader)
	produce(1000)
	wg.Wait()
	c.Launch(leader)
	c.WaitReady(leader)
	waitHealthy(t, cl, topic, partitions, 3, time.Minute)
	produce(500)
	wg.Wait()

	// Read through each replica as leader in turn.
	verify := func(round int) {
		for p := range int32(partitions) {
			_, adm := c.Client()
			ends, err := adm.ListEndOffsets(ctx, topic)
			require.NoError(t, err)
			end, ok := ends.Lookup(topic, p)
			require.True(t, ok)
			require.NoError(t, end.Err)
			read, err := readPartition(ctx, c, topic, p, end.Offset)
			require.NoError(t, err)
			require.NoError(t, h.check(p, read), "round %d", round)
			require.Less(t, len(read), int(end.Offset), "round %d: partition %d was compacted", round, p)
		}
	}
	verify(0)
	// Then through other replicas: each partition's leader is killed and
	// comes back as a follower.
	for p := range int32(partitions) {
		old, _ := leaderOf(t, cl, topic, p, -1, 30*time.Second)
		c.Kill(old)
		leaderOf(t, cl, topic, p, old, time.Minute)
		c.Launch(old)
		c.WaitReady(old)
		waitHealthy(t, cl, topic, partitions, 3, time.Minute)
	}
	verify(1)
}
