package mql

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/net/client"
)

// A streamed table (SUBSCRIBE) looks like the same rows as a whole table
// (SELECT): numbers right-aligned, text left-aligned, NULL where nothing.
func TestStreamAlignsLikeTable(t *testing.T) {
	ts := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	recs := []client.Record{
		{Partition: 0, Offset: 7, Timestamp: ts, Key: []byte("a"), Value: []byte("1")},
		{Partition: 11, Offset: 12345, Timestamp: ts, Value: []byte("long value here"),
			Headers: []client.Header{{Key: "h", Value: []byte("v")}}},
	}
	whole := &Table{Columns: recordColumns}
	for _, r := range recs {
		whole.Rows = append(whole.Rows, recordRow(r))
	}
	var want bytes.Buffer
	NewRenderer(&want, FormatTable, false).Table(whole)

	// Stream with the widths the whole table chose, so only alignment can
	// differ.
	lines := strings.Split(want.String(), "\n")
	var widths []int
	for _, dashes := range strings.Fields(lines[1]) {
		widths = append(widths, len(dashes))
	}
	var got bytes.Buffer
	r := NewRenderer(&got, FormatTable, false)
	r.BeginStream(recordColumns, widths, recordNumeric)
	for _, rec := range recs {
		r.StreamRow(recordRow(rec))
	}
	r.EndStream()
	require.Equal(t, want.String(), got.String())
	require.Contains(t, got.String(), "\n       11   12345  ")
}

// RESET GROUP's title names the position in lower case but keeps a
// timestamp literal as written (it once lower-cased the whole, 'T' and
// 'Z' included).
func TestStartText(t *testing.T) {
	for src, want := range map[string]string{
		"RESET GROUP g TO EARLIEST":                         "earliest",
		"RESET GROUP g TO LATEST":                           "latest",
		"RESET GROUP g TO OFFSET 5":                         "offset 5",
		"RESET GROUP g TO TIMESTAMP '2026-01-01T10:00:01Z'": "timestamp '2026-01-01T10:00:01Z'",
	} {
		st, err := Parse(src)
		require.NoError(t, err)
		require.Equal(t, want, startText(st.(*ResetGroup).To), src)
	}
}

// DESCRIBE TOPIC of a compacted topic, from a description as a MoonMQ
// broker reports it: the dirty ratio with two decimals and right-aligned,
// NULL for what is not known (a partition the cleaner has not looked at)
// or did not happen (no cleaning yet), and a partition the cleaner gave
// up on among the storage problems. JSON says the same.
func TestDescribeCompactedTopicTables(t *testing.T) {
	last := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	d := client.TopicDescription{Name: "table",
		Partitions: []client.PartitionInfo{
			{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, State: "online", LogStart: 0, HighWatermark: 120, LastStable: 120, Bytes: 2048,
				Compaction: &client.Compaction{DirtyRatio: 0.41666, Cleanings: 3, LastCleaned: last}},
			{Partition: 1, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, State: "online", LogStart: 0, HighWatermark: 7, LastStable: 7, Bytes: 300,
				Compaction: &client.Compaction{DirtyRatio: 1, Uncleanable: "clean segment 0: crc mismatch"}},
			{Partition: 2, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, State: "online", LogStart: 0, HighWatermark: 0, LastStable: 0, Bytes: 0},
		},
		Configs: []client.ConfigEntry{{Name: "cleanup.policy", Value: "compact,delete", Source: "topic"}},
	}
	var out bytes.Buffer
	r := NewRenderer(&out, FormatTable, false)
	for _, tb := range describeTables(d) {
		r.Table(tb)
	}
	require.Equal(t, `topic 'table': 3 partitions
partition  leader  replicas  isr  state   log_start  high_watermark  last_stable  records  bytes  dirty_ratio  cleanings  last_cleaned
---------  ------  --------  ---  ------  ---------  --------------  -----------  -------  -----  -----------  ---------  ------------------------
        0       1  1         1    online          0             120          120      120   2048         0.42          3  2026-05-01T12:00:00.000Z
        1       1  1         1    online          0               7            7        7    300         1.00          0  NULL
        2       1  1         1    online          0               0            0        0      0         NULL       NULL  NULL
(3 rows)
storage problems
partition  state        from_offset  to_offset  detail
---------  -----------  -----------  ---------  -----------------------------
        1  uncleanable  NULL         NULL       clean segment 0: crc mismatch
(1 row)
configs
config          value           source
--------------  --------------  ------
cleanup.policy  compact,delete  topic
(1 row)
`, out.String())

	out.Reset()
	r = NewRenderer(&out, FormatJSON, false)
	r.Table(describeTables(d)[0])
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Contains(t, lines[0], `"dirty_ratio":0.42,"cleanings":3,"last_cleaned":"2026-05-01T12:00:00.000Z"}`)
	require.Contains(t, lines[2], `"dirty_ratio":null,"cleanings":null,"last_cleaned":null}`)

	// Not compacted: no compaction columns, whatever a broker reports.
	d.Configs[0].Value = "delete"
	require.NotContains(t, describeTables(d)[0].Columns, "dirty_ratio")
}
