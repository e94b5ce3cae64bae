package node

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/engine/cleaner"
	"github.com/moonmq/moonmq/net/httpapi"
)

// openReady opens a node on cfg and waits, within ctx, until it is ready.
func openReady(ctx context.Context, t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := Open(ctx, cfg)
	require.NoError(t, err)
	select {
	case <-n.Ready():
	case <-ctx.Done():
		_ = n.Close()
		t.Fatal("not ready")
	}
	return n
}

// The node runs the log cleaner with its configuration (Kafka's defaults
// when none is given), refuses a bad one before opening anything, and
// reports it in /stats and /metrics.
func TestNodeRunsTheCleaner(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Cleaner = &cleaner.Options{Threads: -1}
	require.ErrorContains(t, cfg.Validate(), "--log-cleaner-threads")
	cfg.Cleaner = &cleaner.Options{Threads: 4, DedupeBufferSize: 1 << 10}
	require.ErrorContains(t, cfg.Validate(), "--log-cleaner-dedupe-buffer-size")

	for _, tc := range []struct {
		opts    *cleaner.Options
		threads int
	}{{nil, 1}, {&cleaner.Options{Threads: 3}, 3}, {&cleaner.Options{Threads: 0}, 0}} {
		cfg := testConfig(t, t.TempDir())
		cfg.HTTP = "127.0.0.1:0"
		cfg.Cleaner = tc.opts
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n := openReady(ctx, t, cfg)
		require.NotNil(t, n.cleaner)
		require.Equal(t, tc.threads, n.cleaner.Stats().Threads)
		if tc.opts == nil {
			require.Equal(t, cleaner.DefaultDedupeBufferSize, n.cleaner.MapMemory())
		}

		var st httpapi.Stats
		require.NoError(t, json.Unmarshal([]byte(httpGet(t, "http://"+n.HTTPAddr().String()+"/stats")), &st))
		require.NotNil(t, st.Cleaner)
		require.Equal(t, tc.threads, st.Cleaner.Threads)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(httpGet(t, "http://"+n.HTTPAddr().String()+"/metrics")))
		require.NoError(t, err)
		require.Contains(t, fams, "moonmq_log_cleaner_threads")
		require.Equal(t, float64(tc.threads), fams["moonmq_log_cleaner_threads"].Metric[0].GetGauge().GetValue())
		require.NoError(t, n.Close())
		cancel()
	}
}

// End to end, through the node's wiring: a compacted topic written by a
// Kafka client is cleaned in the background to the latest value of each
// key, offsets kept; a tombstone past delete.retention.ms removes its key.
func TestNodeCompactsInTheBackground(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.HTTP = "127.0.0.1:0"
	cfg.Cleaner = &cleaner.Options{Threads: 1, Backoff: 10 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := openReady(ctx, t, cfg)
	defer n.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()), kgo.DefaultProduceTopic("table"))
	require.NoError(t, err)
	defer cl.Close()
	configs := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"} {
		configs[k] = &v
	}
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, 1, configs, "table")
	require.NoError(t, err)

	const keys, rounds = 10, 20
	want := map[string]string{}
	for r := 0; r < rounds; r++ {
		for k := 0; k < keys; k++ {
			key, val := fmt.Sprintf("k%d", k), fmt.Sprintf("v%d-%d", k, r)
			rec := &kgo.Record{Key: []byte(key), Value: []byte(val)}
			if k == 0 && r == rounds-1 {
				rec.Value = nil // a tombstone: k0 goes
				delete(want, key)
			} else {
				want[key] = val
			}
			require.NoError(t, cl.ProduceSync(ctx, rec).FirstErr())
		}
	}
	// Rolls the last data segment: the active segment is never cleaned.
	for i := 0; i < 10; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte("filler"), Value: make([]byte, 200)}).FirstErr())
	}
	want["filler"] = string(make([]byte, 200))

	read := func() (map[string]string, int) {
		rc, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()), kgo.ConsumeTopics("table"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		require.NoError(t, err)
		defer rc.Close()
		got, count, last := map[string]string{}, 0, int64(-1)
		end := int64(keys*rounds + 10)
		for last < end-1 {
			fs := rc.PollFetches(ctx)
			require.NoError(t, fs.Err())
			fs.EachRecord(func(r *kgo.Record) {
				require.Greater(t, r.Offset, last, "offsets only go forward")
				last, count = r.Offset, count+1
				if r.Value == nil {
					delete(got, string(r.Key))
				} else {
					got[string(r.Key)] = string(r.Value)
				}
			})
		}
		return got, count
	}
	require.Eventually(t, func() bool {
		return n.cleaner.Stats().Cleanings > 0 && n.cleaner.Stats().RecordsRemoved > 0
	}, 30*time.Second, 10*time.Millisecond, "the cleaner ran")
	got, count := read()
	require.Equal(t, want, got, "the latest value of every key, as before cleaning")
	require.Less(t, count, keys*rounds, "superseded records are gone")

	var st httpapi.Stats
	require.NoError(t, json.Unmarshal([]byte(httpGet(t, "http://"+n.HTTPAddr().String()+"/stats")), &st))
	require.Positive(t, st.Cleaner.Cleanings)
	for _, tp := range st.Topics {
		if tp.Name == "table" {
			require.NotNil(t, tp.Partitions[0].Compaction)
			require.Positive(t, tp.Partitions[0].Compaction.Cleanings)
		}
	}
}

// A topic created compacted is looked at by the cleaner at once, not one
// backoff later: its partitions' state is there for DescribeLogDirs and
// /stats from the start (the backoff here is longer than the test).
func TestCleanerLooksAtACreatedCompactedTopicAtOnce(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Cleaner = &cleaner.Options{Threads: 1, Backoff: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := openReady(ctx, t, cfg)
	defer n.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()))
	require.NoError(t, err)
	defer cl.Close()
	compact := "compact"
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 2, 1, map[string]*string{"cleanup.policy": &compact}, "table")
	require.NoError(t, err)
	for len(n.cleaner.PartitionStats()) < 2 {
		select {
		case <-ctx.Done():
			t.Fatalf("the cleaner has not looked at the new topic: %+v", n.cleaner.PartitionStats())
		case <-time.After(5 * time.Millisecond):
		}
	}
	for _, ps := range n.cleaner.PartitionStats() {
		require.Equal(t, "table", ps.Topic)
	}
}

// A node started on dirty compacted logs cleans them at once, not after
// --log-cleaner-backoff: the partitions learn their configs from the first
// metadata image, which wakes the cleaner threads (their first look, at
// start, found no compacted partition).
func TestNodeCleansDirtyLogsAtStart(t *testing.T) {
	dir := t.TempDir()
	open := func(threads int) *Node {
		cfg := testConfig(t, dir)
		cfg.Cleaner = &cleaner.Options{Threads: threads, Backoff: time.Hour}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return openReady(ctx, t, cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	n := open(0) // no cleaning: the log stays dirty
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()), kgo.DefaultProduceTopic("dirty"))
	require.NoError(t, err)
	configs := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024"} {
		configs[k] = &v
	}
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, 1, configs, "dirty")
	require.NoError(t, err)
	for i := range 200 {
		rec := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%5), Value: fmt.Appendf(nil, "v%d", i)}
		require.NoError(t, cl.ProduceSync(ctx, rec).FirstErr())
	}
	cl.Close()
	require.NoError(t, n.Close())

	n = open(1)
	defer n.Close()
	require.Eventually(t, func() bool { return n.cleaner.Stats().RecordsRemoved > 0 },
		20*time.Second, 10*time.Millisecond, "cleaned within the test, not after the hour of backoff")
}
