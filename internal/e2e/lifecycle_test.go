package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/testbroker"
)

// logLines decodes a JSON log, one record per line.
func logLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "a log line that is not JSON: %s", line)
		out = append(out, rec)
	}
	return out
}

// Issue 11, "Logs and probes", on a real process at the default INFO
// level: one summary line at start-up (no line per partition), durations
// as Go duration strings, no "clean":false for a partition just created,
// a shutdown that says it completed and how long it took,
// moonmq_connection_rejects_total exported at 0, and a client dropping its
// connection not logged as a warning.
func TestStartAndStopLogs(t *testing.T) {
	b := testbroker.Start(t, "--log-level", "info")
	_, adm := newClient(t, b.Addr)
	createTopic(t, adm, "logged", 4, nil)

	fams := scrape(t, b.HTTPAddr)
	for _, reason := range []string{"max_connections", "max_connections_per_ip", "out_of_file_descriptors", "accept_error"} {
		require.Equal(t, float64(0), metricValue(fams, "moonmq_connection_rejects_total", map[string]string{"reason": reason}),
			"exported at 0 before any rejection: %s", reason)
	}

	// A client that resets its connection mid-request.
	conns := func() float64 { return metricValue(scrape(t, b.HTTPAddr), "moonmq_connections", nil) }
	before := conns()
	c, err := net.Dial("tcp", b.Addr)
	require.NoError(t, err)
	_, err = c.Write([]byte{0, 0, 0, 100, 0, 3})
	require.NoError(t, err)
	testbroker.WaitFor(t, 10*time.Second, "the connection to be open", func() bool {
		return conns() == before+1
	})
	require.NoError(t, c.(*net.TCPConn).SetLinger(0)) // close sends RST
	require.NoError(t, c.Close())
	// The broker must see the reset while serving, not only at shutdown.
	testbroker.WaitFor(t, 10*time.Second, "the broker to drop the reset connection", func() bool {
		return conns() == before
	})

	require.NoError(t, b.Stop())
	b.Restart()
	require.NoError(t, b.Stop())

	var serving, complete int
	infoBeforeServing, starting := 0, true
	for _, rec := range logLines(t, b.Log()) {
		msg := rec["msg"].(string)
		if rec["level"] == "INFO" && msg != "moonmq serving" && starting {
			// Between a start and its serving line only the one-time
			// creation of a new cluster may be logged at INFO.
			if msg != "bootstrapped a new metadata cluster" {
				infoBeforeServing++
				t.Logf("INFO line during start-up: %v", rec)
			}
		}
		require.NotEqual(t, "WARN", rec["level"], "nothing here is worth a warning: %v", rec)
		require.NotContains(t, msg, "log opened", "per-partition lines are DEBUG")
		require.NotContains(t, msg, "epoch checkpoint", "per-partition lines are DEBUG")
		for k, v := range rec {
			if k == "startup" || k == "took" || k == "timeout" || k == "delay" || k == "duration" {
				s, ok := v.(string)
				require.True(t, ok, "%s is a duration string, not raw nanoseconds: %v", k, rec)
				_, err := time.ParseDuration(s)
				require.NoError(t, err, "%s: %v", k, rec)
			}
		}
		switch msg {
		case "moonmq serving":
			serving++
			starting = false
			require.NotEmpty(t, rec["cluster_id"], "%v", rec)
			if serving == 2 {
				require.Equal(t, 4.0, rec["partitions"], "%v", rec)
				require.Equal(t, 0.0, rec["recovered_unclean"], "a graceful stop leaves nothing to recover: %v", rec)
			}
		case "shutdown complete":
			complete++
			starting = true // the restart follows
		}
	}
	require.Equal(t, 2, serving)
	require.Zero(t, infoBeforeServing, "start-up logs one summary line at INFO")
	require.Equal(t, 2, complete, "each graceful stop logs its completion")
}

// A new partition is "created", not "clean": false as if it had crashed.
func TestNewPartitionIsNotLoggedAsUnclean(t *testing.T) {
	b := testbroker.Start(t)
	_, adm := newClient(t, b.Addr)
	createTopic(t, adm, "fresh", 2, nil)
	testbroker.WaitFor(t, 10*time.Second, "the partitions' log lines", func() bool {
		return strings.Count(b.Log(), `"msg":"log created"`) >= 2
	})
	for _, rec := range logLines(t, b.Log()) {
		if rec["topic"] == "fresh" {
			require.NotEqual(t, false, rec["clean"], "%v", rec)
		}
	}
}

// During a graceful shutdown /readyz answers 503 and /healthz 200 for the
// whole drain (with --shutdown-delay, while Kafka clients are still
// served), so a load balancer sees the node leave before the port closes.
func TestReadyzDuringShutdown(t *testing.T) {
	// A delay far longer than the checks need, so a slow machine does not
	// run out of it; the broker is killed once they are done.
	b := testbroker.Start(t, "--shutdown-delay", "60s")
	status := func(path string) int {
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get("http://" + b.HTTPAddr + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, 200, status("/readyz"))
	require.NoError(t, syscall.Kill(b.Pid(), syscall.SIGTERM))
	testbroker.WaitFor(t, 5*time.Second, "/readyz to answer 503", func() bool { return status("/readyz") == 503 })
	require.Equal(t, 200, status("/healthz"), "alive while draining")
	require.NoError(t, runKafkaProbe(t, b.Addr), "the Kafka port still serves during the delay")
	require.Contains(t, b.Log(), `"delay":"1m0s"`)
	b.Kill()
}

// runKafkaProbe sends one ApiVersions request and reads the answer.
func runKafkaProbe(t *testing.T, addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(frame(18, 0, 7, nil)); err != nil {
		return err
	}
	corr, body := readResponse(t, c)
	require.Equal(t, int32(7), corr)
	require.GreaterOrEqual(t, len(body), 2)
	require.Zero(t, binary.BigEndian.Uint16(body), "ApiVersions answered NONE")
	return nil
}

// A start that fails (the Kafka port is taken, a bad address, a group
// setting the coordinator refuses) leaves no data directory and no cluster
// id behind.
func TestFailedStartLeavesNothing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", taken.Addr().String()}, "address already in use"},
		{[]string{"--listen", "256.0.0.1:9092"}, "kafka listener"},
		{[]string{"--listen", "127.0.0.1:0", "--offsets-topic-partitions", "5000"}, "offsets topic partitions 5000"},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, testbroker.Binary(t),
			append([]string{"serve", "--data", dir, "--http", "127.0.0.1:0"}, tc.args...)...).CombinedOutput()
		cancel()
		require.Error(t, err, "%v: %s", tc.args, out)
		require.Contains(t, string(out), tc.want, "%v", tc.args)
		_, err = os.Stat(dir)
		require.ErrorIs(t, err, os.ErrNotExist, "%v: the failed start created %s:\n%s", tc.args, dir, out)
	}
}
