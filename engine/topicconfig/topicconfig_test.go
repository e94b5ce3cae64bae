package topicconfig

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestResolveDefaultsAndOverrides(t *testing.T) {
	c, err := Resolve(nil)
	require.NoError(t, err)
	require.True(t, c.FlushAlways)
	require.True(t, c.CleanupDelete)
	require.Equal(t, 7*24*time.Hour, c.Retention)
	require.Equal(t, int64(-1), c.RetentionBytes)

	c, err = Resolve(map[string]string{
		RetentionMs: "-1", FlushPolicy: "interval", FlushMs: "250", CleanupPolicy: "compact,delete",
		MessageTimestampType: "LogAppendTime", SegmentBytes: "1048576",
	})
	require.NoError(t, err)
	require.Less(t, c.Retention, time.Duration(0))
	require.False(t, c.FlushAlways)
	require.Equal(t, 250*time.Millisecond, c.FlushInterval)
	require.True(t, c.CleanupCompact && c.CleanupDelete)
	require.True(t, c.LogAppendTime)
	require.Equal(t, int64(1048576), c.SegmentBytes)
}

func TestValidateNamesTheKey(t *testing.T) {
	for k, v := range map[string]string{
		"no.such.key":        "1",
		RetentionMs:          "7d",
		RetentionBytes:       "-2",
		SegmentBytes:         "10",
		FlushPolicy:          "sometimes",
		CleanupPolicy:        "compact,forget",
		MaxMessageBytes:      "99999999999",
		CompressionType:      "zstd",
		MessageTimestampType: "Now",
	} {
		err := Validate(map[string]string{k: v})
		require.ErrorIs(t, err, ErrInvalid, k)
		require.Contains(t, err.Error(), k)
	}
	_, ok := Lookup(RetentionMs)
	require.True(t, ok)
	require.Len(t, Defs(), len(defs))
}
