package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/internal/testbroker"
)

func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/metrics")
	require.Equal(t, 200, code)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err, "metrics must parse as Prometheus text")
	return fams
}

// metricValue sums the samples of a family whose labels include want.
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	var sum float64
	for _, m := range f.Metric {
		match := true
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func TestMetricsStatsAndHealth(t *testing.T) {
	b := testbroker.Start(t)
	code, _ := httpGet(t, "http://"+b.HTTPAddr+"/healthz")
	require.Equal(t, 200, code)
	code, _ = httpGet(t, "http://"+b.HTTPAddr+"/readyz")
	require.Equal(t, 200, code)
	code, _ = httpGet(t, "http://"+b.HTTPAddr+"/debug/pprof/")
	require.Equal(t, 404, code, "pprof is off unless --pprof")

	before := scrape(t, b.HTTPAddr)
	require.Equal(t, float64(-1), metricValue(before, "moonmq_topic_records_in_total", map[string]string{"topic": "m"}))

	cl, adm := newClient(t, b.Addr, kgo.DefaultProduceTopic("m"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	createTopic(t, adm, "m", 2, nil)
	const n = 500
	ctx := ctxT(t, 30*time.Second)
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("value-%04d", i))}, nil)
	}
	require.NoError(t, cl.Flush(ctx))
	require.Len(t, consumeAll(t, b.Addr, "m", n), n)
	// A request about a missing topic is counted as an error.
	_, err := adm.DescribeTopicConfigs(ctx, "missing")
	require.NoError(t, err)

	// A group that committed offset 200 in the fuller partition (at least
	// 250 of the 500 records are there) lags by the rest.
	ends, err := adm.ListEndOffsets(ctx, "m")
	require.NoError(t, err)
	full := kadm.ListedOffset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > full.Offset {
			full = o
		}
	})
	require.GreaterOrEqual(t, full.Offset, int64(250))
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "m", Partition: full.Partition, At: 200, LeaderEpoch: -1})
	cr, err := adm.CommitOffsets(ctx, "lagging", offs)
	require.NoError(t, err)
	require.NoError(t, cr.Error())

	after := scrape(t, b.HTTPAddr)
	require.Equal(t, float64(full.Offset-200), metricValue(after, "moonmq_group_lag",
		map[string]string{"group": "lagging", "topic": "m", "partition": fmt.Sprint(full.Partition)}))
	require.Equal(t, float64(200), metricValue(after, "moonmq_group_committed_offset", map[string]string{"group": "lagging"}))
	require.Equal(t, float64(n), metricValue(after, "moonmq_topic_records_in_total", map[string]string{"topic": "m"}))
	require.Equal(t, float64(n), metricValue(after, "moonmq_topic_records_out_total", map[string]string{"topic": "m"}))
	require.Greater(t, metricValue(after, "moonmq_topic_bytes_in_total", map[string]string{"topic": "m"}), float64(n*10))
	require.Equal(t, float64(n), metricValue(after, "moonmq_partition_log_end_offset", map[string]string{"topic": "m"}))
	require.Equal(t, float64(n), metricValue(after, "moonmq_partition_high_watermark", map[string]string{"topic": "m"}))
	require.Equal(t, float64(2), metricValue(after, "moonmq_partition_segments", map[string]string{"topic": "m"}))
	require.Greater(t, metricValue(after, "moonmq_requests_total", map[string]string{"api": "Produce"}), float64(0))
	require.Greater(t, metricValue(after, "moonmq_request_duration_seconds", map[string]string{"api": "Fetch"}), float64(0))
	require.Equal(t, float64(1), metricValue(after, "moonmq_request_errors_total",
		map[string]string{"api": "DescribeConfigs", "error": "UNKNOWN_TOPIC_OR_PARTITION"}))
	require.Greater(t, metricValue(after, "moonmq_fsync_duration_seconds", nil), float64(0))
	require.Greater(t, metricValue(after, "moonmq_group_commit_appends", nil), float64(0))
	require.GreaterOrEqual(t, metricValue(after, "moonmq_connections", nil), float64(1))
	require.Greater(t, metricValue(after, "go_goroutines", nil), float64(0))
	require.Greater(t, metricValue(after, "process_resident_memory_bytes", nil), float64(0))

	code, body := httpGet(t, "http://"+b.HTTPAddr+"/stats")
	require.Equal(t, 200, code)
	var st struct {
		Version   string `json:"version"`
		NodeID    int32  `json:"node_id"`
		Listeners struct {
			Kafka string `json:"kafka"`
		} `json:"listeners"`
		Connections int `json:"connections"`
		Topics      []struct {
			Name       string `json:"name"`
			Records    int64  `json:"records"`
			Partitions []struct {
				HighWatermark int64 `json:"high_watermark"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Equal(t, int32(1), st.NodeID)
	require.Equal(t, b.Addr, st.Listeners.Kafka)
	var found bool
	for _, tp := range st.Topics {
		if tp.Name == "m" {
			found = true
			require.Equal(t, int64(n), tp.Records)
			require.Len(t, tp.Partitions, 2)
		}
	}
	require.True(t, found, "topic m in /stats")
}

func TestConnectionLimits(t *testing.T) {
	b := testbroker.Start(t, "--max-connections-per-ip", "2")
	c1, c2 := dial(t, b.Addr), dial(t, b.Addr)
	testbroker.WaitFor(t, 10*time.Second, "two connections", func() bool {
		return metricValue(scrape(t, b.HTTPAddr), "moonmq_connections", nil) == 2
	})
	c3 := dial(t, b.Addr)
	expectClosed(t, c3)
	require.Equal(t, float64(1), metricValue(scrape(t, b.HTTPAddr), "moonmq_connection_rejects_total",
		map[string]string{"reason": "max_connections_per_ip"}))
	require.Contains(t, b.Log(), "refusing connection")
	c1.Close()
	c2.Close()
	testbroker.WaitFor(t, 10*time.Second, "connections to close", func() bool {
		return metricValue(scrape(t, b.HTTPAddr), "moonmq_connections", nil) == 0
	})
}

// TestGracefulShutdownUnderLoad sends SIGTERM during an acks=all produce
// load: the broker must exit 0, the next start must find every partition
// cleanly closed (no recovery scan), and every acknowledged record must be
// there.
func TestGracefulShutdownUnderLoad(t *testing.T) {
	b := testbroker.Start(t)
	_, adm := newClient(t, b.Addr)
	createTopic(t, adm, "grace", 3, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic("grace"),
		kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(5*time.Second))
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("g%d", i)
			cl.Produce(ctxT(t, 30*time.Second), &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[string(r.Value)] = true
					mu.Unlock()
				}
			})
		}
	}()
	testbroker.WaitFor(t, 30*time.Second, "some acknowledged writes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) > 1000
	})
	require.NoError(t, b.Stop(), "SIGTERM must exit 0")
	close(stop)
	wg.Wait()
	cl.Close()
	require.Contains(t, b.Log(), "shutting down")

	logBefore := len(b.Log())
	b.Restart()
	opened := regexp.MustCompile(`"msg":"log opened".*"topic":"grace".*"clean":(true|false)`).FindAllStringSubmatch(b.Log()[logBefore:], -1)
	require.Len(t, opened, 3)
	for _, m := range opened {
		require.Equal(t, "true", m[1], "partition recovered with a scan after a graceful shutdown")
	}
	mu.Lock()
	want := len(acked)
	mu.Unlock()
	_, adm = newClient(t, b.Addr)
	ends, err := adm.ListEndOffsets(ctxT(t, 10*time.Second), "grace")
	require.NoError(t, err)
	var total int64
	for _, ps := range ends {
		for _, o := range ps {
			total += o.Offset
		}
	}
	got := map[string]bool{}
	for _, r := range consumeAll(t, b.Addr, "grace", int(total)) {
		got[string(r.Value)] = true
	}
	mu.Lock()
	defer mu.Unlock()
	for v := range acked {
		require.True(t, got[v], "acknowledged %s lost over a graceful restart", v)
	}
	t.Logf("%d acknowledged records survived SIGTERM", want)
}
