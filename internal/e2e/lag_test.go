package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/internal/testbroker"
	"github.com/moonmq/moonmq/internal/testnode"
	"github.com/moonmq/moonmq/node"
)

// Issue 11: group lag was 6 in MQL and `moonmq top` (which counted a
// partition without a commit from its log start) and 3 in /stats and
// /metrics. Every surface now computes it with package lag: a partition
// the group consumes but has not committed on has no lag (shown with no
// committed offset, as Kafka's tools show it) and adds nothing to the
// total.
func TestLagIsTheSameEverywhere(t *testing.T) {
	// The broker needs no process: only the console (-e) runs the binary.
	n := testnode.Start(t, node.Config{HTTP: "127.0.0.1:0"})
	addr, httpAddr := n.Addr().String(), n.HTTPAddr().String()
	_, adm := newClient(t, addr)
	createTopic(t, adm, "lagged", 2, nil)
	producer, _ := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := ctxT(t, 60*time.Second)
	for i, p := range []int32{0, 0, 0, 0, 0, 1, 1, 1} {
		require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Topic: "lagged", Partition: p, Value: []byte{byte('a' + i)}}).FirstErr())
	}

	// A live member owns both partitions and commits only on 0 (at 2).
	member, _ := newClient(t, addr, kgo.ConsumerGroup("lagging"), kgo.ConsumeTopics("lagged"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	testbroker.WaitFor(t, 30*time.Second, "the member to be assigned both partitions", func() bool {
		member.PollRecords(ctxT(t, 500*time.Millisecond), 100)
		owned := 0
		d, err := adm.DescribeGroups(ctx, "lagging")
		if err != nil {
			return false
		}
		for _, m := range d["lagging"].Members {
			if c, ok := m.Assigned.AsConsumer(); ok {
				for _, tp := range c.Topics {
					owned += len(tp.Partitions)
				}
			}
		}
		return owned == 2
	})
	var commitErr error
	member.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"lagged": {0: {Epoch: -1, Offset: 2}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
		})
	require.NoError(t, commitErr)

	const want = 3 // partition 0: 5 - 2; partition 1: no commit, no lag

	// MQL, which `moonmq top` shares (net/client.DescribeGroup).
	out, err := exec.Command(testbroker.Binary(t), "--addr", addr, "--output", "json", "-e", "DESCRIBE GROUP lagging;").CombinedOutput()
	require.NoError(t, err, "%s", out)
	var committedRows, uncommittedRows int
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var row map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &row), line)
		if row["topic"] != "lagged" {
			continue
		}
		switch row["partition"] {
		case 0.0:
			committedRows++
			require.Equal(t, 2.0, row["committed"], line)
			require.Equal(t, float64(want), row["lag"], line)
		case 1.0:
			uncommittedRows++
			require.Nil(t, row["committed"], line)
			require.Nil(t, row["lag"], "no commit, no lag: %s", line)
		}
	}
	require.Equal(t, 1, committedRows, "%s", out)
	require.Equal(t, 1, uncommittedRows, "the uncommitted partition is shown: %s", out)
	out, err = exec.Command(testbroker.Binary(t), "--addr", addr, "--output", "json", "-e", "SHOW GROUPS;").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), `"lag":3`, "SHOW GROUPS total")

	// /stats and /metrics.
	_, body := httpGet(t, "http://"+httpAddr+"/stats")
	var stats struct {
		Groups []struct {
			Group string `json:"group"`
			Lag   int64  `json:"lag"`
		} `json:"groups"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &stats))
	found := false
	for _, g := range stats.Groups {
		if g.Group == "lagging" {
			found = true
			require.Equal(t, int64(want), g.Lag, "/stats")
		}
	}
	require.True(t, found, body)
	require.Equal(t, float64(want), metricValue(scrape(t, httpAddr), "moonmq_group_lag_total", map[string]string{"group": "lagging"}), "/metrics")
}
