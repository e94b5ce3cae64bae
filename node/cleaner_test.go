package node

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/cleaner"
	"github.com/moonmq/moonmq/net/httpapi"
)

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
		n, err := Open(ctx, cfg)
		require.NoError(t, err)
		select {
		case <-n.Ready():
		case <-ctx.Done():
			t.Fatal("not ready")
		}
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
