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
