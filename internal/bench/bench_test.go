package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/moonmq/moonmq/internal/syncbuf"
	"github.com/moonmq/moonmq/net/client"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testAddr returns MOONMQ_TEST_ADDR (a real broker) or a fresh kfake cluster.
func testAddr(t *testing.T) string {
	t.Helper()
	if addr := os.Getenv("MOONMQ_TEST_ADDR"); addr != "" {
		return addr
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(3))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = Run(testCtx(t), args, &out, &errb)
	return out.String(), errb.String(), err
}

func topicName(t *testing.T) string {
	return "bench-" + strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 10)
}

func TestProduceThenConsume(t *testing.T) {
	addr := testAddr(t)
	topic := topicName(t)

	out, errOut, err := run(t, "produce", "--addr", addr, "--topic", topic, "--records", "2000",
		"--size", "64", "--producers", "2", "--partitions", "3", "--create", "--output", "json",
		"--compression", "lz4")
	require.NoError(t, err, errOut)
	require.Empty(t, errOut, "no progress line when stderr is not a terminal")
	var res Result
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, strings.Count(out, "\n"), 1, "exactly one JSON line")
	require.Equal(t, "produce", res.Mode)
	require.Equal(t, topic, res.Topic)
	require.Equal(t, int64(2000), res.Records)
	require.Equal(t, int64(2000*64), res.Bytes)
	require.Zero(t, res.Failed)
	require.Positive(t, res.Elapsed)
	require.Positive(t, res.RecordsPS)
	require.Positive(t, res.MBPS)
	require.NotNil(t, res.Latency)
	require.Positive(t, res.Latency.Max)
	require.LessOrEqual(t, res.Latency.P50, res.Latency.P99)
	require.LessOrEqual(t, res.Latency.P99, res.Latency.P999)
	require.LessOrEqual(t, res.Latency.P999, res.Latency.Max)

	// The broker holds exactly what was acknowledged, with random values.
	cl, err := client.Dial(testCtx(t), client.Options{Addr: addr})
	require.NoError(t, err)
	defer cl.Close()
	offs, err := cl.ListOffsets(testCtx(t), topic)
	require.NoError(t, err)
	require.Len(t, offs, 3)
	var total int64
	for _, o := range offs {
		total += o.Records()
	}
	require.Equal(t, int64(2000), total)
	recs, err := cl.Read(testCtx(t), client.ReadRequest{Topic: topic, Limit: 5})
	require.NoError(t, err)
	for _, r := range recs {
		require.Len(t, r.Value, 64)
		require.NotEqual(t, make([]byte, 64), r.Value, "values are random, not zeros")
	}

	// Consume to the end snapshot.
	out, errOut, err = run(t, "consume", "--addr", addr, "--topic", topic, "--output", "json")
	require.NoError(t, err, errOut)
	require.Empty(t, errOut)
	res = Result{}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, "consume", res.Mode)
	require.Equal(t, int64(2000), res.Records)
	require.Equal(t, int64(2000*64), res.Bytes)
	require.Nil(t, res.Latency)

	// Consume a fixed count, text output.
	out, _, err = run(t, "consume", "--addr", addr, "--topic", topic, "--records", "500")
	require.NoError(t, err)
	require.Contains(t, out, "consume "+topic+"\n")
	require.Contains(t, out, "  records     500\n")
	require.Contains(t, out, "records/s")
	require.Contains(t, out, "MB/s")

	// From the end: nothing to read, returns at once.
	out, _, err = run(t, "consume", "--addr", addr, "--topic", topic, "--from", "latest", "--output", "json")
	require.NoError(t, err)
	res = Result{}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Zero(t, res.Records)
}

func TestProduceTextAndRate(t *testing.T) {
	addr := testAddr(t)
	topic := topicName(t)
	out, _, err := run(t, "produce", "--addr", addr, "--topic", topic, "--create", "--partitions", "1",
		"--records", "50", "--size", "10", "--rate", "1000", "--acks", "1")
	require.NoError(t, err)
	require.Contains(t, out, "produce "+topic+"\n")
	require.Contains(t, out, "  records     50 acknowledged, 0 failed\n")
	require.Contains(t, out, "p99.9")
	// Pacing at 1000/s: 50 records take at least ~49ms. A lower bound on
	// a paced run, not a speed assertion.
	var res Result
	out, _, err = run(t, "produce", "--addr", addr, "--topic", topic, "--records", "50", "--size", "10",
		"--rate", "1000", "--acks", "0", "--output", "json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, int64(50), res.Records)
	require.GreaterOrEqual(t, res.Elapsed, 0.045)
}

func TestProduceMissingTopic(t *testing.T) {
	addr := testAddr(t)
	_, _, err := run(t, "produce", "--addr", addr, "--topic", "absent-topic", "--records", "1")
	require.ErrorIs(t, err, client.ErrNotFound)
	require.ErrorContains(t, err, "pass --create")
}

func TestUnreachable(t *testing.T) {
	_, _, err := run(t, "consume", "--addr", "127.0.0.1:1", "--topic", "t")
	require.ErrorIs(t, err, client.ErrUnreachable)
}

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing command"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"produce", "--topic", "t", "--nope"}, "--nope"},
		{[]string{"produce", "--topic", "t", "--records", "abc"}, "--records"},
		{[]string{"produce", "--topic", "t", "--records", "0"}, "--records"},
		{[]string{"produce"}, "--topic: required"},
		{[]string{"produce", "--topic", "t", "--acks", "2"}, "--acks"},
		{[]string{"produce", "--topic", "t", "--compression", "brotli"}, "--compression"},
		{[]string{"produce", "--topic", "t", "--producers", "0"}, "--producers"},
		{[]string{"produce", "--topic", "t", "--rate", "-1"}, "--rate"},
		{[]string{"produce", "--topic", "t", "--batch", "10"}, "--batch"},
		{[]string{"produce", "--topic", "t", "--linger", "soon"}, "--linger"},
		{[]string{"produce", "--topic", "t", "--output", "xml"}, "--output"},
		{[]string{"produce", "--topic", "t", "extra"}, `unexpected argument "extra"`},
		{[]string{"produce", "--topic", "t", "--keys", "-1"}, "--keys: must not be negative"},
		{[]string{"produce", "--topic", "t", "--keys", "many"}, "--keys"},
		{[]string{"produce", "--topic", "t", "--keys", "10", "--key-order", "sorted"}, `--key-order: must be random or sequential (got "sorted")`},
		{[]string{"produce", "--topic", "t", "--key-order", "sequential"}, "--key-order: applies only with --keys"},
		{[]string{"produce", "--topic", "t", "--tombstones", "0.1"}, "--tombstones: applies only with --keys"},
		{[]string{"produce", "--topic", "t", "--keys", "10", "--tombstones", "1.5"}, "--tombstones: must be a fraction between 0 and 1 (got 1.5)"},
		{[]string{"produce", "--topic", "t", "--keys", "10", "--tombstones", "-0.5"}, "--tombstones"},
		{[]string{"produce", "--topic", "t", "--keys", "10", "--tombstones", "NaN"}, "--tombstones"},
		{[]string{"produce", "--topic", "t", "--topic-config", "cleanup.policy=compact"}, "--topic-config: applies only with --create"},
		{[]string{"produce", "--topic", "t", "--create", "--topic-config", "compact"}, `--topic-config "compact": want key=value`},
		{[]string{"produce", "--topic", "t", "--create", "--topic-config", "=compact"}, `--topic-config "=compact": empty config name`},
		{[]string{"produce", "--topic", "t", "--create", "--topic-config", "a=1", "--topic-config", "a=2"}, "a is given twice"},
		{[]string{"consume", "--topic", "t", "--from", "tomorrow"}, "--from"},
		{[]string{"consume", "--topic", "t", "--records", "-3"}, "--records"},
		{[]string{"consume", "--topic", "t", "--fetch-max-bytes", "1"}, "--fetch-max-bytes"},
		{[]string{"consume"}, "--topic: required"},
		{[]string{"connect", "--connections", "0"}, "--connections"},
		{[]string{"connect", "--concurrency", "0"}, "--concurrency"},
		{[]string{"connect", "--user", "u", "--password", "p", "--mechanism", "GSSAPI"}, "GSSAPI"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			require.ErrorIs(t, err, ErrUsage)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestConnect opens connections one after another and four at a time;
// every one is counted with its set-up latency, and an unreachable broker
// fails every connection with the error kept.
func TestConnect(t *testing.T) {
	addr := testAddr(t)
	out, errOut, err := run(t, "connect", "--addr", addr, "--connections", "12", "--concurrency", "4", "--output", "json")
	require.NoError(t, err, errOut)
	var res Result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, "connect", res.Mode)
	require.EqualValues(t, 12, res.Records)
	require.Zero(t, res.Failed)
	require.Positive(t, res.RecordsPS)
	require.NotNil(t, res.Latency)
	require.Positive(t, res.Latency.P50)

	out, _, err = run(t, "connect", "--addr", addr, "--connections", "3")
	require.NoError(t, err)
	require.Contains(t, out, "connections 3 set up, 0 failed")
	require.Contains(t, out, "connections/s")

	out, _, err = run(t, "connect", "--addr", "127.0.0.1:1", "--connections", "2", "--timeout", "20s")
	require.Error(t, err)
	require.Contains(t, out, "2 failed")
}

func TestHelp(t *testing.T) {
	out, _, err := run(t, "produce", "--help")
	require.NoError(t, err)
	for _, f := range []string{"--addr", "--topic", "--records", "--size", "--acks", "--batch", "--linger",
		"--producers", "--rate", "--partitions", "--create", "--compression", "--output", "--timeout",
		"--keys", "--key-order", "--tombstones", "--topic-config"} {
		require.Contains(t, out, "  "+f+" ", "produce help lists %s", f)
	}
	require.Contains(t, out, "(default 100000)")
	require.Contains(t, out, "(default 0)", "zero defaults are shown too")
	require.Contains(t, out, "(default all)")

	out, _, err = run(t, "consume", "-h")
	require.NoError(t, err)
	for _, f := range []string{"--addr", "--topic", "--records", "--from", "--fetch-max-bytes", "--output"} {
		require.Contains(t, out, "  "+f+" ", "consume help lists %s", f)
	}
	require.Contains(t, out, "(default earliest)")

	out, _, err = run(t, "help")
	require.NoError(t, err)
	require.Contains(t, out, "produce")
	require.Contains(t, out, "consume")
}

func TestProgressLine(t *testing.T) {
	var buf syncbuf.Buffer
	var n, b atomic.Int64
	n.Store(1000)
	b.Store(2_000_000)
	p := startProgress(&buf, "produce", 5*time.Millisecond, &n, &b)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), "records/s") {
		require.False(t, time.Now().After(deadline), "no progress line printed")
		time.Sleep(5 * time.Millisecond)
	}
	p.Stop()
	p.Stop() // idempotent
	s := buf.String()
	require.Contains(t, s, "\r\x1b[Kproduce: 1000 records, ")
	require.True(t, strings.HasSuffix(s, "\r\x1b[K"), "line cleared at the end: %q", s)

	// Disabled writer: Stop still works.
	startProgress(nil, "x", time.Millisecond, &n, &b).Stop()
	require.False(t, isTerminal(&bytes.Buffer{}))
}
