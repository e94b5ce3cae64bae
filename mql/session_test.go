package mql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/moonmq/moonmq/engine/cleaner"
	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/internal/syncbuf"
	"github.com/moonmq/moonmq/internal/testnode"
	"github.com/moonmq/moonmq/net/client"
	"github.com/moonmq/moonmq/node"
)

type harness struct {
	t      *testing.T
	s      *Session
	out    *syncbuf.Buffer // results: JSON rows
	status *syncbuf.Buffer // acknowledgements, which never share the JSON stream
	ctx    context.Context
}

func newFake(t *testing.T, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// newMoonMQ runs a MoonMQ node in-process and returns its address; the
// tests that run against both it and kfake (eachBroker) check that the
// console behaves the same on MoonMQ as on any Kafka-compatible broker.
func newMoonMQ(t *testing.T) string {
	t.Helper()
	// No initial rebalance delay: JOIN GROUP and SUBSCRIBE have one member.
	return testnode.Start(t, node.Config{Groups: group.Config{InitialRebalanceDelay: time.Nanosecond}}).Addr().String()
}

// eachBroker runs test against kfake and against MoonMQ.
func eachBroker(t *testing.T, test func(t *testing.T, addr string)) {
	t.Run("kfake", func(t *testing.T) { test(t, newFake(t)) })
	t.Run("moonmq", func(t *testing.T) { test(t, newMoonMQ(t)) })
}

func newHarness(t *testing.T, addr string) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	out, status := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	s := NewSession(Options{Addr: addr, Out: out, Status: status, Format: FormatJSON, RequestTimeout: 5 * time.Second, DialTimeout: 2 * time.Second})
	t.Cleanup(s.Close)
	return &harness{t: t, s: s, out: out, status: status, ctx: ctx}
}

// exec runs statements and returns the results they printed.
func (h *harness) exec(src string) string {
	h.t.Helper()
	h.out.Reset()
	h.status.Reset()
	for _, p := range ParseScript("", src) {
		require.Nil(h.t, p.Err, "%s", src)
		require.NoError(h.t, h.s.Exec(h.ctx, p.Stmt), "%s", p.Text)
	}
	return h.out.String()
}

// ack runs statements and returns their acknowledgements ("OK ...").
func (h *harness) ack(src string) string {
	h.t.Helper()
	h.exec(src)
	return h.status.String()
}

func (h *harness) fail(src string) error {
	h.t.Helper()
	st, err := Parse(src)
	require.NoError(h.t, err)
	err = h.s.Exec(h.ctx, st)
	require.Error(h.t, err, src)
	return err
}

// rows decodes JSON-lines output.
func rows(t *testing.T, out string) []map[string]any {
	t.Helper()
	var res []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		res = append(res, m)
	}
	return res
}

func TestSessionRecords(t *testing.T) {
	eachBroker(t, func(t *testing.T, addr string) {
		h := newHarness(t, addr)
		h.exec(`CREATE TOPIC t PARTITIONS 2;
			PRODUCE INTO t PARTITION 0 KEY 'a' VALUE 'x1' TIMESTAMP '2026-01-01T00:00:00Z';
			PRODUCE INTO t PARTITION 0 KEY 'b' VALUE 'x2' TIMESTAMP '2026-01-01T00:00:02Z';
			PRODUCE INTO t PARTITION 1 KEY 'c' VALUE 'x3' TIMESTAMP '2026-01-01T00:00:01Z';`)
		got := rows(t, h.exec(`SELECT partition, offset, key FROM t;`))
		require.Equal(t, []map[string]any{
			{"partition": 0.0, "offset": 0.0, "key": "a"},
			{"partition": 1.0, "offset": 0.0, "key": "c"},
			{"partition": 0.0, "offset": 1.0, "key": "b"},
		}, got)
		// Push-down and filter agree.
		got = rows(t, h.exec(`SELECT key FROM t WHERE partition = 0 AND offset > 0;`))
		require.Equal(t, []map[string]any{{"key": "b"}}, got)
		got = rows(t, h.exec(`SELECT count(*) FROM t WHERE partition = 0 AND partition = 1;`))
		require.Equal(t, []map[string]any{{"count": 0.0}}, got)
		got = rows(t, h.exec(`SELECT count(*) FROM t WHERE timestamp >= '2026-01-01T00:00:01Z';`))
		require.Equal(t, []map[string]any{{"count": 2.0}}, got)
		got = rows(t, h.exec(`SELECT key FROM t LIMIT 0;`))
		require.Empty(t, got)
		h.exec(`ASSERT (SELECT count(*) FROM t) = 3; ASSERT (SELECT key FROM t PARTITION 1 LIMIT 1) = 'c';`)
		var ae *AssertionError
		require.ErrorAs(t, h.fail(`ASSERT (SELECT count(*) FROM t) < 3;`), &ae)
		require.Equal(t, "3", ae.Got)
		require.ErrorContains(t, h.fail(`ASSERT (SELECT key, value FROM t) = 'a';`), "one value")
		require.ErrorIs(t, h.fail(`SELECT * FROM missing;`), client.ErrNotFound)
	})
}

// DESCRIBE TOPIC in JSON: every row says whether it is a partition or a
// config (or a storage problem), so a consumer of the one stream can tell
// them apart.
func TestDescribeTopicJSONKinds(t *testing.T) {
	eachBroker(t, func(t *testing.T, addr string) {
		h := newHarness(t, addr)
		h.exec(`CREATE TOPIC dk PARTITIONS 2;`)
		kinds := map[any]int{}
		for _, r := range rows(t, h.exec(`DESCRIBE TOPIC dk;`)) {
			kinds[r["kind"]]++
			switch r["kind"] {
			case "partition":
				require.Contains(t, r, "leader")
			case "config":
				require.Contains(t, r, "config")
			default:
				t.Fatalf("row without a known kind: %v", r)
			}
		}
		require.Equal(t, 2, kinds["partition"])
		require.Positive(t, kinds["config"])
		// A single-table statement has no kind field.
		require.NotContains(t, rows(t, h.exec(`SHOW TOPICS;`))[0], "kind")
		// CSV carries the kind too.
		h.exec(`SET FORMAT csv;`)
		out := h.exec(`DESCRIBE TOPIC dk;`)
		require.True(t, strings.HasPrefix(out, "kind,partition,leader,"), out)
		require.Contains(t, out, "\nkind,config,value,source\n")
	})
}

// DESCRIBE TOPIC of a compacted topic adds dirty_ratio, cleanings and
// last_cleaned to each partition, NULL where the broker does not report
// them (Kafka: kfake); a topic that is not compacted has no such columns.
func TestDescribeCompactedTopic(t *testing.T) {
	eachBroker(t, func(t *testing.T, addr string) {
		h := newHarness(t, addr)
		h.exec(`CREATE TOPIC plain PARTITIONS 1; CREATE TOPIC table PARTITIONS 1 WITH (cleanup.policy = 'compact');`)
		for _, r := range rows(t, h.exec(`DESCRIBE TOPIC plain;`)) {
			if r["kind"] == "partition" {
				require.NotContains(t, r, "dirty_ratio")
			}
		}
		out := h.exec(`DESCRIBE TOPIC table;`)
		for _, r := range rows(t, out) {
			if r["kind"] == "partition" {
				require.Contains(t, r, "dirty_ratio")
				require.Contains(t, r, "cleanings")
				require.Nil(t, r["last_cleaned"], "never cleaned: %v", r)
			}
		}
		h.exec(`SET FORMAT csv;`)
		require.True(t, strings.HasPrefix(h.exec(`DESCRIBE TOPIC table;`),
			"kind,partition,leader,replicas,isr,state,log_start,high_watermark,last_stable,records,bytes,dirty_ratio,cleanings,last_cleaned\n"))
	})
}

// Against MoonMQ, a cleaning shows in DESCRIBE TOPIC: its count, when it
// ended, the dirty ratio the cleaner left.
func TestDescribeCompactedTopicAfterCleaning(t *testing.T) {
	addr := testnode.Start(t, node.Config{Cleaner: &cleaner.Options{Threads: 1, Backoff: 20 * time.Millisecond}}).Addr().String()
	h := newHarness(t, addr)
	h.exec(`CREATE TOPIC table PARTITIONS 1 WITH (cleanup.policy = 'compact', segment.bytes = 1024, min.cleanable.dirty.ratio = 0.01);`)
	start := time.Now()
	for i := range 20 {
		h.exec(fmt.Sprintf(`PRODUCE INTO table VALUES ('a', 'v%d'), ('b', 'v%d'), ('c', 'v%d'), ('d', 'v%d');`, i, i, i, i))
	}
	var part map[string]any
	for part["cleanings"] == nil || part["cleanings"].(float64) == 0 {
		select {
		case <-h.ctx.Done():
			t.Fatalf("no cleaning shown: %v", part)
		case <-time.After(20 * time.Millisecond):
		}
		part = rows(t, h.exec(`DESCRIBE TOPIC table;`))[0]
	}
	require.Equal(t, "partition", part["kind"])
	ratio, ok := part["dirty_ratio"].(float64)
	require.True(t, ok, "%v", part)
	require.GreaterOrEqual(t, ratio, 0.0)
	require.LessOrEqual(t, ratio, 1.0)
	last, err := time.Parse(time.RFC3339Nano, part["last_cleaned"].(string))
	require.NoError(t, err)
	require.False(t, last.Before(start.Truncate(time.Millisecond)), "last cleaned %s, before the test's records", last)
	require.False(t, last.After(time.Now()))
}

func TestSessionGroupsAndMembership(t *testing.T) {
	eachBroker(t, func(t *testing.T, addr string) {
		h := newHarness(t, addr)
		h.exec(`CREATE TOPIC t PARTITIONS 2;
			PRODUCE INTO t PARTITION 0 VALUES ('a', '1'), ('b', '2');
			PRODUCE INTO t PARTITION 1 VALUES ('c', '3');`)
		require.ErrorContains(t, h.fail(`FETCH FROM t;`), "FETCH needs a group")

		// Admin-level FETCH: committed position, then commit past the rows.
		got := rows(t, h.exec(`FETCH FROM t GROUP g LIMIT 2;`))
		require.Len(t, got, 2)
		got = rows(t, h.exec(`FETCH FROM t GROUP g;`))
		require.Len(t, got, 1)
		require.Empty(t, rows(t, h.exec(`FETCH FROM t GROUP g;`)))

		// JOIN GROUP: the session becomes a live member holding partitions.
		out := h.ack(`JOIN GROUP live ON t;`)
		require.Contains(t, out, "joined group 'live' as member ")
		require.Contains(t, out, "assigned t[0,1]")
		desc := rows(t, h.exec(`DESCRIBE GROUP live;`))
		// JSON rows say what they are: the group, its members, its offsets.
		require.Equal(t, "group", desc[0]["kind"], "%v", desc)
		require.Equal(t, "live", desc[0]["group"])
		require.NotNil(t, desc[0]["protocol"], "a group with a member has a protocol")
		require.Equal(t, 1.0, desc[0]["members"])
		require.Equal(t, "member", desc[1]["kind"])
		require.Equal(t, "t[0,1]", desc[1]["assigned"], "%v", desc)
		require.ErrorContains(t, h.fail(`JOIN GROUP other ON t;`), "already a member")
		// The group is not empty: an admin reset is refused, but FETCH and
		// COMMIT go through the member (USE GROUP was set by JOIN).
		require.ErrorIs(t, h.fail(`RESET GROUP live TO EARLIEST;`), client.ErrGroupActive)
		require.Len(t, rows(t, h.exec(`FETCH FROM t LIMIT 2;`)), 2)
		h.exec(`COMMIT t PARTITION 1 OFFSET 1;`)
		offs := rows(t, h.exec(`DESCRIBE GROUP live;`))
		committed := map[float64]float64{}
		for _, r := range offs {
			if r["kind"] == "offset" {
				committed[r["partition"].(float64)] = r["committed"].(float64)
			}
		}
		require.Equal(t, map[float64]float64{0: 2, 1: 1}, committed, "%v", offs)
		require.ErrorContains(t, h.fail(`LEAVE GROUP other;`), "not a member of group 'other'")
		require.Contains(t, h.ack(`LEAVE GROUP;`), "left group 'live'")
		require.ErrorContains(t, h.fail(`LEAVE GROUP;`), "not a member")

		// An empty group has no protocol: null in DESCRIBE GROUP and SHOW
		// GROUPS alike.
		desc = rows(t, h.exec(`DESCRIBE GROUP g;`))
		require.Equal(t, "group", desc[0]["kind"])
		require.Contains(t, desc[0], "protocol")
		require.Nil(t, desc[0]["protocol"])
		for _, g := range rows(t, h.exec(`SHOW GROUPS LIKE 'g';`)) {
			require.Contains(t, g, "protocol")
			require.Nil(t, g["protocol"])
		}

		groups := rows(t, h.exec(`SHOW GROUPS;`))
		names := map[string]bool{}
		for _, g := range groups {
			names[g["group"].(string)] = true
		}
		require.True(t, names["g"] && names["live"], "%v", groups)
		h.exec(`DROP GROUP g; DROP GROUP IF EXISTS g;`)
		require.ErrorIs(t, h.fail(`DESCRIBE GROUP g;`), client.ErrNotFound)
	})
}

func TestSessionSubscribe(t *testing.T) {
	eachBroker(t, func(t *testing.T, addr string) {
		h := newHarness(t, addr)
		h.exec(`CREATE TOPIC t PARTITIONS 1; PRODUCE INTO t VALUES ('a', '1'), ('b', '2'), ('c', '3');`)

		// With a group and a LIMIT: exactly the shown rows are committed.
		require.Len(t, rows(t, h.exec(`SUBSCRIBE TO t GROUP sub FROM EARLIEST LIMIT 2;`)), 2)
		testWait(t, func() bool {
			for _, r := range rows(t, h.exec(`DESCRIBE GROUP sub;`)) {
				if r["committed"] == 2.0 {
					return true
				}
			}
			return false
		})
		got := rows(t, h.exec(`SUBSCRIBE TO t GROUP sub LIMIT 1;`))
		require.Equal(t, "c", got[0]["key"])

		// Without LIMIT, SUBSCRIBE streams until canceled (Ctrl-C): rows that
		// arrive are printed as they come, and cancellation is not an error.
		ctx, cancel := context.WithCancel(h.ctx)
		defer cancel()
		st, err := Parse(`SUBSCRIBE TO t WHERE key != 'skip';`)
		require.NoError(t, err)
		h.out.Reset()
		done := make(chan error, 1)
		go func() { done <- h.s.Exec(ctx, st) }()

		producer := newHarness(t, h.s.Addr())
		testWait(t, func() bool {
			producer.exec(`PRODUCE INTO t KEY 'skip' VALUE 'no'; PRODUCE INTO t KEY 'live' VALUE 'yes';`)
			return strings.Contains(h.out.String(), `"key":"live"`)
		})
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Fatal("SUBSCRIBE did not stop when canceled")
		}
		require.NotContains(t, h.out.String(), `"key":"skip"`)

		// TIMEOUT bounds a quiet subscription.
		require.Empty(t, rows(t, h.exec(`SUBSCRIBE TO t TIMEOUT 200ms;`)))

		// A missing topic fails before the stream starts: no table header.
		var out bytes.Buffer
		tbl := NewSession(Options{Addr: h.s.Addr(), Out: &out, RequestTimeout: 5 * time.Second})
		defer tbl.Close()
		st, err = Parse(`SUBSCRIBE TO missing TIMEOUT 1;`)
		require.NoError(t, err)
		require.EqualError(t, tbl.Exec(h.ctx, st), "topic 'missing' does not exist")
		require.Empty(t, out.String())
	})
}

func TestSessionTransactions(t *testing.T) {
	h := newHarness(t, newFake(t))
	h.exec(`CREATE TOPIC t PARTITIONS 2;`)
	require.ErrorContains(t, h.fail(`COMMIT TRANSACTION;`), "no transaction is open")
	out := h.ack(`BEGIN TRANSACTION 'tx-1';
		PRODUCE INTO t KEY 'a' VALUE '1';
		PRODUCE INTO t PARTITION 1 VALUES ('b', '2'), (NULL, '3');`)
	require.Contains(t, out, "(in transaction 'tx-1')")
	require.ErrorContains(t, h.fail(`BEGIN TRANSACTION;`), "already open")
	require.Contains(t, h.ack(`COMMIT TRANSACTION;`), "transaction 'tx-1' committed")
	require.Equal(t, []map[string]any{{"count": 3.0}}, rows(t, h.exec(`SELECT count(*) FROM t;`)))

	h.exec(`BEGIN TRANSACTION; PRODUCE INTO t PARTITION 0 VALUE 'aborted';`)
	require.Contains(t, h.ack(`ABORT TRANSACTION;`), "aborted")
	// Reads are read-uncommitted (net/client's Read), so the aborted
	// record is visible, but the transaction ended and a new one may start.
	h.exec(`BEGIN TRANSACTION 'tx-2'; ABORT TRANSACTION;`)
}

// SHOW TRANSACTIONS, DESCRIBE TRANSACTION and the two isolation levels,
// against kfake (which implements transactions): a committed, an aborted
// and an open transaction.
func TestSessionTransactionTooling(t *testing.T) {
	addr := newFake(t)
	h := newHarness(t, addr)
	h.exec(`CREATE TOPIC t PARTITIONS 1;
		PRODUCE INTO t KEY 'plain' VALUE 'p';
		BEGIN TRANSACTION 'tx-commit'; PRODUCE INTO t KEY 'committed' VALUE 'c'; COMMIT TRANSACTION;
		BEGIN TRANSACTION 'tx-abort'; PRODUCE INTO t KEY 'aborted' VALUE 'a'; ABORT TRANSACTION;`)
	other := newHarness(t, addr)
	other.exec(`BEGIN TRANSACTION 'tx-open'; PRODUCE INTO t KEY 'open' VALUE 'o';`)
	h.exec(`PRODUCE INTO t KEY 'after' VALUE 'x';`)

	txns := rows(t, h.exec(`SHOW TRANSACTIONS;`))
	require.Len(t, txns, 3, "%v", txns)
	states := map[string]any{}
	for _, x := range txns {
		states[x["transaction"].(string)] = x["state"]
		require.Contains(t, x, "producer_id")
		require.Equal(t, 0.0, x["coordinator"])
	}
	require.Equal(t, "Ongoing", states["tx-open"])
	require.NotEqual(t, "Ongoing", states["tx-commit"])
	require.Equal(t, []map[string]any{{"transaction": "tx-open", "state": "Ongoing", "producer_id": txns[2]["producer_id"], "coordinator": 0.0}},
		rows(t, h.exec(`SHOW TRANSACTIONS LIKE '%open';`)))

	desc := rows(t, h.exec(`DESCRIBE TRANSACTION 'tx-open';`))
	require.Len(t, desc, 2, "%v", desc)
	require.Equal(t, "transaction", desc[0]["kind"])
	require.Equal(t, "Ongoing", desc[0]["state"])
	require.NotNil(t, desc[0]["started"])
	require.Positive(t, desc[0]["timeout_ms"])
	require.Equal(t, map[string]any{"kind": "partition", "topic": "t", "partition": 0.0}, desc[1])
	desc = rows(t, h.exec(`DESCRIBE TRANSACTION "tx-commit";`))
	require.Len(t, desc, 1, "no partitions once the transaction ended: %v", desc)
	require.Nil(t, desc[0]["started"])
	err := h.fail(`DESCRIBE TRANSACTION nope;`)
	require.ErrorIs(t, err, client.ErrNotFound)
	require.EqualError(t, err, "transaction 'nope' does not exist")

	keys := func(src string) []string {
		t.Helper()
		var out []string
		for _, r := range rows(t, h.exec(src)) {
			out = append(out, r["key"].(string))
		}
		return out
	}
	all := []string{"plain", "committed", "aborted", "open", "after"}
	committed := []string{"plain", "committed"}
	require.Equal(t, all, keys(`SELECT key FROM t;`))
	require.Equal(t, committed, keys(`SELECT key FROM t ISOLATION READ COMMITTED;`))
	require.Equal(t, []map[string]any{{"count": 2.0}}, rows(t, h.exec(`SELECT count(*) FROM t ISOLATION READ COMMITTED;`)))
	h.exec(`ASSERT (SELECT count(*) FROM t ISOLATION READ COMMITTED) = 2;`)

	// The session setting applies to SELECT, FETCH and SUBSCRIBE; a
	// query's own ISOLATION wins.
	require.Contains(t, h.ack(`SET ISOLATION READ COMMITTED;`), "OK isolation read committed")
	require.Equal(t, committed, keys(`SELECT key FROM t;`))
	require.Equal(t, all, keys(`SELECT key FROM t ISOLATION READ UNCOMMITTED;`))
	require.Equal(t, committed, keys(`FETCH FROM t GROUP g;`))
	require.Equal(t, committed, keys(`SUBSCRIBE TO t FROM EARLIEST TIMEOUT 1 LIMIT 5;`))

	// DESCRIBE TOPIC shows the open transaction holding the stable offset
	// back.
	parts := rows(t, h.exec(`DESCRIBE TOPIC t;`))
	require.Equal(t, "partition", parts[0]["kind"])
	require.Equal(t, 7.0, parts[0]["high_watermark"], "%v", parts[0])
	require.Equal(t, 5.0, parts[0]["last_stable"], "%v", parts[0])

	// Once it commits, its records and those behind it are committed.
	other.exec(`COMMIT TRANSACTION;`)
	require.Equal(t, []string{"plain", "committed", "open", "after"}, keys(`SELECT key FROM t;`))
	require.Equal(t, []string{"open", "after"}, keys(`FETCH FROM t GROUP g;`))
	h.exec(`SET ISOLATION READ UNCOMMITTED;`)
	require.Equal(t, all, keys(`SELECT key FROM t;`))
}

func TestSessionSecurityAndCluster(t *testing.T) {
	p := newHarness(t, newFake(t))
	require.Contains(t, p.ack(`CREATE USER alice PASSWORD 'secret-pw';`), "user 'alice' created (SCRAM-SHA-256)")
	users := rows(t, p.exec(`SHOW USERS;`))
	require.Equal(t, []map[string]any{{"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 8192.0}}, users)
	require.Contains(t, p.ack(`DROP USER alice;`), "user 'alice' dropped")
	require.ErrorIs(t, p.fail(`DROP USER alice;`), client.ErrNotFound)

	require.Contains(t, p.ack(`GRANT READ, WRITE ON TOPIC orders PREFIXED TO alice;`), "granted READ, WRITE on topic 'orders' (prefix) to User:alice")
	acls := rows(t, p.exec(`SHOW ACLS FOR alice;`))
	require.Len(t, acls, 2, "%v", acls)
	require.Equal(t, "User:alice", acls[0]["principal"])
	require.Equal(t, "prefixed", acls[0]["pattern"])
	require.Contains(t, p.ack(`REVOKE WRITE ON TOPIC orders PREFIXED FROM alice;`), "(1 ACL removed)")
	require.Len(t, rows(t, p.exec(`SHOW ACLS;`)), 1)

	brokers := rows(t, p.exec(`SHOW BROKERS;`))
	require.Len(t, brokers, 1)
	require.Equal(t, true, brokers[0]["controller"])
	cl := rows(t, p.exec(`SHOW CLUSTER;`))
	require.Equal(t, 1.0, cl[0]["brokers"])
	p.exec(`CREATE TOPIC t PARTITIONS 1; SHOW REASSIGNMENTS;`)
	require.Empty(t, rows(t, p.exec(`SHOW REASSIGNMENTS;`)))
}

// A broker that lacks an API gets a clear "not supported" error naming it,
// through the ApiVersions check, never a silent success.
func TestSessionUnsupported(t *testing.T) {
	v := kversion.Stable()
	for _, k := range []kmsg.Key{kmsg.ListGroups, kmsg.AddPartitionsToTxn, kmsg.AlterUserSCRAMCredentials,
		kmsg.DescribeUserSCRAMCredentials, kmsg.CreateACLs, kmsg.AlterPartitionAssignments} {
		v.SetMaxKeyVersion(k.Int16(), -1)
	}
	h := newHarness(t, newFake(t, kfake.MaxVersions(v)))
	for src, api := range map[string]string{
		`SHOW GROUPS;`:                        "ListGroups",
		`BEGIN TRANSACTION;`:                  "AddPartitionsToTxn",
		`SHOW USERS;`:                         "DescribeUserSCRAMCredentials",
		`GRANT READ ON TOPIC t TO a;`:         "CreateACLs",
		`MOVE PARTITION t 0 TO BROKERS (1);`:  "AlterPartitionAssignments",
		`CREATE USER a PASSWORD 'long-pass';`: "DescribeUserSCRAMCredentials",
	} {
		err := h.fail(src)
		require.ErrorIs(t, err, client.ErrUnsupported, src)
		require.ErrorContains(t, err, "this broker does not support ", src)
		require.ErrorContains(t, err, ": it does not implement the Kafka "+api+" API", src)
	}
}

// A broker with transactions but without the admin APIs of KIP-664 (Kafka
// before 3.0) says which one it lacks; one without transactions says that.
func TestSessionTransactionToolingUnsupported(t *testing.T) {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.ListTransactions.Int16(), -1)
	v.SetMaxKeyVersion(kmsg.DescribeTransactions.Int16(), -1)
	h := newHarness(t, newFake(t, kfake.MaxVersions(v)))
	err := h.fail(`SHOW TRANSACTIONS;`)
	require.ErrorIs(t, err, client.ErrUnsupported)
	require.EqualError(t, err, "this broker does not support listing transactions: it does not implement the Kafka ListTransactions API (key 66)")
	err = h.fail(`DESCRIBE TRANSACTION 'x';`)
	require.EqualError(t, err, "this broker does not support describing transactions: it does not implement the Kafka DescribeTransactions API (key 65)")

	v = kversion.Stable()
	v.SetMaxKeyVersion(kmsg.EndTxn.Int16(), -1)
	h = newHarness(t, newFake(t, kfake.MaxVersions(v)))
	for _, src := range []string{`SHOW TRANSACTIONS;`, `DESCRIBE TRANSACTION 'x';`} {
		require.EqualError(t, h.fail(src), "this broker does not support transactions: it does not implement the Kafka EndTxn API (key 26)")
	}
	// Reading committed records needs nothing of the broker but
	// ListOffsets: without transactions every record is committed.
	h.exec(`CREATE TOPIC t; PRODUCE INTO t VALUE 'v';`)
	require.Equal(t, []map[string]any{{"count": 1.0}}, rows(t, h.exec(`SELECT count(*) FROM t ISOLATION READ COMMITTED;`)))
}

// A lost connection is reported, the next statement reconnects, and a
// failed PRODUCE says its records were not re-sent.
func TestSessionReconnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())

	c1, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	addr := c1.ListenAddrs()[0]
	h := newHarness(t, addr)
	h.s.opts.RequestTimeout = 2 * time.Second
	h.exec(`SHOW TOPICS;`)
	c1.Close()

	err = h.fail(`PRODUCE INTO t VALUE 'x';`)
	var lost *LostConnectionError
	require.ErrorAs(t, err, &lost, "%v", err)
	require.Contains(t, err.Error(), "connection to "+addr+" lost")
	require.Contains(t, err.Error(), "not re-sent")

	c2, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	defer c2.Close()
	require.Contains(t, h.exec(`SHOW TOPICS;`), `"name":"t"`)

	h.exec(`DISCONNECT;`)
	require.ErrorIs(t, h.fail(`SHOW TOPICS;`), ErrNotConnected)
	require.Contains(t, h.ack(`CONNECT '`+addr+`';`), "connected to "+addr)
	require.Contains(t, h.exec(`SHOW TOPICS;`), `"name":"t"`)
}

func TestSessionLocalStatements(t *testing.T) {
	h := newHarness(t, "127.0.0.1:1") // never dialed by these statements
	require.Contains(t, h.exec(`HELP;`), "CREATE TOPIC")
	require.Contains(t, h.exec(`HELP produce;`), "Example:\n  PRODUCE INTO orders")
	require.Contains(t, h.exec(`HELP CREATE;`), "CREATE USER")
	require.Contains(t, h.exec(`HELP SELCT;`), "did you mean HELP SELECT?")
	require.Contains(t, h.ack(`USE GROUP billing;`), "using group 'billing'")
	require.Contains(t, h.ack(`SET FORMAT csv;`), "OK format csv")
	require.True(t, errors.Is(h.s.Exec(h.ctx, &Exit{}), ErrExit))
}

func testWait(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		<-tick.C
	}
}

// TestReviewRegressions pins fixes from review: FROM LATEST LIMIT returns
// the newest records across partitions, WHERE partition = N on a missing
// partition matches nothing, count(*) refuses LIMIT, and RESET GROUP of a
// group without offsets is an error, not a silent success.
func TestReviewRegressions(t *testing.T) {
	h := newHarness(t, newFake(t))
	h.exec(`CREATE TOPIC lt PARTITIONS 2;
PRODUCE INTO lt PARTITION 0 VALUE 'old1' TIMESTAMP '2020-01-01T00:00:01Z';
PRODUCE INTO lt PARTITION 0 VALUE 'old2' TIMESTAMP '2020-01-01T00:00:02Z';
PRODUCE INTO lt PARTITION 1 VALUE 'new1' TIMESTAMP '2026-01-01T00:00:01Z';
PRODUCE INTO lt PARTITION 1 VALUE 'new2' TIMESTAMP '2026-01-01T00:00:02Z';`)
	out := h.exec(`SELECT value FROM lt FROM LATEST LIMIT 2;`)
	require.Contains(t, out, "new1")
	require.Contains(t, out, "new2")
	require.NotContains(t, out, "old")

	require.Equal(t, "", strings.TrimSpace(h.exec(`SELECT value FROM lt WHERE partition = 99;`)))
	require.Equal(t, "", strings.TrimSpace(h.exec(`SELECT value FROM lt WHERE partition = 4294967296;`)))

	_, err := Parse(`SELECT count(*) FROM lt LIMIT 1;`)
	require.ErrorContains(t, err, "LIMIT does not apply to count(*)")
	err = h.fail(`RESET GROUP nosuch TO EARLIEST;`)
	require.ErrorIs(t, err, client.ErrNotFound)
	require.ErrorContains(t, err, "group 'nosuch' ")
}

// Relative timestamps count back from the session's clock (Options.Now),
// in every statement that takes a TIMESTAMP.
func TestSessionRelativeTimestamps(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	h := newHarness(t, newFake(t))
	h.s.opts.Now = func() time.Time { return now }
	h.exec(`CREATE TOPIC rt PARTITIONS 1;
		PRODUCE INTO rt KEY 'day' VALUE 'a' TIMESTAMP '1d';
		PRODUCE INTO rt KEY 'hour' VALUE 'b' TIMESTAMP '1h ago';
		PRODUCE INTO rt KEY 'minute' VALUE 'c' TIMESTAMP '-1m';
		PRODUCE INTO rt KEY 'millis' VALUE 'd' TIMESTAMP '@1777636800000';`)
	got := rows(t, h.exec(`SELECT key, timestamp FROM rt;`))
	require.Equal(t, []map[string]any{
		{"key": "day", "timestamp": "2026-04-30T12:00:00.000Z"},
		{"key": "hour", "timestamp": "2026-05-01T11:00:00.000Z"},
		{"key": "minute", "timestamp": "2026-05-01T11:59:00.000Z"},
		{"key": "millis", "timestamp": "2026-05-01T12:00:00.000Z"},
	}, got)
	require.Equal(t, []map[string]any{{"count": 3.0}}, rows(t, h.exec(`SELECT count(*) FROM rt WHERE timestamp > '90m';`)))
	require.Equal(t, []map[string]any{{"key": "minute"}, {"key": "millis"}}, rows(t, h.exec(`SELECT key FROM rt FROM TIMESTAMP '30m';`)))
	require.Equal(t, []map[string]any{{"partition": 0.0, "offset": 1.0, "timestamp": "2026-05-01T11:00:00.000Z"}},
		rows(t, h.exec(`SHOW OFFSETS rt AT TIMESTAMP '2h';`)))
	h.exec(`ASSERT (SELECT timestamp FROM rt LIMIT 1) < '23h';`)
	got = rows(t, h.exec(`RESET GROUP rg TOPIC rt TO TIMESTAMP '5m';`))
	require.Equal(t, 2.0, got[0]["committed"], "%v", got)
}

// In json and csv, Out is a data stream: acknowledgements (SET FORMAT's
// among them) go to Status, never into the rows. In the table format,
// meant for people, they stay with the results.
func TestAcknowledgementsStayOutOfDataStreams(t *testing.T) {
	addr := newFake(t)
	var out, status bytes.Buffer
	s := NewSession(Options{Addr: addr, Out: &out, Status: &status, RequestTimeout: 5 * time.Second})
	defer s.Close()
	ctx := context.Background()
	run := func(src string) {
		t.Helper()
		for _, p := range ParseScript("", src) {
			require.Nil(t, p.Err)
			require.NoError(t, s.Exec(ctx, p.Stmt), p.Text)
		}
	}
	run(`SET FORMAT json; CREATE TOPIC ack PARTITIONS 1; PRODUCE INTO ack KEY 'k' VALUE 'v';
		SELECT key, value FROM ack; USE GROUP g;`)
	require.Equal(t, `{"key":"k","value":"v"}`+"\n", out.String(), "only data rows on the JSON stream")
	require.Equal(t, "OK format json\nOK topic 'ack' created (1 partition)\nOK produced to ack → partition 0, offset 0\nOK using group 'g'\n", status.String())

	out.Reset()
	status.Reset()
	run(`SET FORMAT csv; SELECT key FROM ack; SET FORMAT table; SHOW GROUPS LIKE 'none';`)
	require.Equal(t, "key\nk\nOK format table\ngroup  state  protocol  members  lag\n-----  -----  --------  -------  ---\n(0 rows)\n", out.String())
	require.Equal(t, "OK format csv\n", status.String())

	// Without a Status writer, acknowledgements in json are dropped.
	out.Reset()
	quiet := NewSession(Options{Addr: addr, Out: &out, Format: FormatJSON})
	defer quiet.Close()
	st, err := Parse(`CREATE TOPIC ack2;`)
	require.NoError(t, err)
	require.NoError(t, quiet.Exec(ctx, st))
	require.Empty(t, out.String())
}
