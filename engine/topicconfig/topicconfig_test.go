package topicconfig

import (
	"math"
	"os"
	"strings"
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
	require.Equal(t, CompressionProducer, c.Compression)
	require.Equal(t, int64(math.MaxInt64), c.FlushMessages)
	require.Equal(t, 10<<20, c.SegmentIndexBytes)
	require.Zero(t, c.SegmentJitter)
	require.Equal(t, int64(math.MaxInt64), c.TimestampBeforeMaxMs)
	require.Equal(t, int64(3600000), c.TimestampAfterMaxMs, "Kafka 4.0's default")

	c, err = Resolve(map[string]string{
		RetentionMs: "-1", FlushPolicy: "interval", FlushMs: "250", CleanupPolicy: "compact,delete",
		MessageTimestampType: "LogAppendTime", SegmentBytes: "1048576", SegmentJitterMs: "60000",
		SegmentIndexBytes: "4096", FlushMessages: "10", CompressionType: "zstd", CompressionZstdLevel: "-5",
	})
	require.NoError(t, err)
	require.Less(t, c.Retention, time.Duration(0))
	require.False(t, c.FlushAlways)
	require.Equal(t, 250*time.Millisecond, c.FlushInterval)
	require.True(t, c.CleanupCompact && c.CleanupDelete)
	require.True(t, c.LogAppendTime)
	require.Equal(t, int64(1048576), c.SegmentBytes)
	require.Equal(t, time.Minute, c.SegmentJitter)
	require.Equal(t, 4096, c.SegmentIndexBytes)
	require.Equal(t, int64(10), c.FlushMessages)
	require.Equal(t, CompressionZstd, c.Compression)
	require.Equal(t, -5, c.CompressionLevel)

	// Each codec takes its own level key; the others' levels do not leak.
	c, err = Resolve(map[string]string{CompressionType: "gzip", CompressionZstdLevel: "7"})
	require.NoError(t, err)
	require.Equal(t, -1, c.CompressionLevel)
	c, err = Resolve(map[string]string{CompressionType: "lz4", CompressionLZ4Level: "12"})
	require.NoError(t, err)
	require.Equal(t, 12, c.CompressionLevel)
}

// Values are trimmed and booleans compared without case, as Kafka's
// ConfigDef parses them; Resolve reads them the same way.
func TestValuesParseLikeKafka(t *testing.T) {
	c, err := Resolve(map[string]string{FlushPolicy: " interval ", SegmentMs: " 60000", Preallocate: "TRUE"})
	require.NoError(t, err)
	require.False(t, c.FlushAlways)
	require.Equal(t, time.Minute, c.SegmentAge)
}

// Milliseconds too large for a Duration saturate: retention.ms of
// Long.MAX_VALUE or 2^62 keeps data forever rather than wrapping into a
// tiny retention that would delete it.
func TestHugeMillisecondsSaturate(t *testing.T) {
	for _, v := range []string{"9223372036854775807", "4611686018427387904", "9999999999999999"} {
		c, err := Resolve(map[string]string{RetentionMs: v, SegmentMs: v})
		require.NoError(t, err, v)
		require.Equal(t, time.Duration(math.MaxInt64), c.Retention, v)
		require.Equal(t, time.Duration(math.MaxInt64), c.SegmentAge, v)
	}
}

// Every key issue 11 lists (tools and infrastructure-as-code set them) is
// accepted with a valid value, in one topic.
func TestIssueKeysAccepted(t *testing.T) {
	valid := map[string]string{
		MinCleanableDirtyRatio:               "0.25",
		MaxCompactionLagMs:                   "86400000",
		UncleanLeaderElectionEnable:          "true",
		Preallocate:                          "false",
		SegmentIndexBytes:                    "1048576",
		SegmentJitterMs:                      "1000",
		FlushMessages:                        "10000",
		MessageTimestampDifferenceMaxMs:      "600000",
		MessageTimestampBeforeMaxMs:          "86400000",
		MessageTimestampAfterMaxMs:           "60000",
		MessageDownconversionEnable:          "false",
		LocalRetentionMs:                     "-2",
		LocalRetentionBytes:                  "1073741824",
		RemoteStorageEnable:                  "false",
		FollowerReplicationThrottledReplicas: "0:1,1:2",
		LeaderReplicationThrottledReplicas:   "*",
	}
	for k, v := range valid {
		require.NoError(t, ValidateOne(k, v), "%s=%s", k, v)
	}
	c, err := Resolve(valid)
	require.NoError(t, err)
	// An explicit bound wins over the deprecated difference.
	require.Equal(t, int64(86400000), c.TimestampBeforeMaxMs)
	require.Equal(t, int64(60000), c.TimestampAfterMaxMs)
}

// Every other key Kafka 4.x documents for topics is accepted too.
func TestEveryKafkaTopicKeyAccepted(t *testing.T) {
	valid := map[string]string{
		CleanupPolicy: "compact", CompressionType: "snappy", CompressionGzipLevel: "9", CompressionLZ4Level: "17",
		CompressionZstdLevel: "-131072", DeleteRetentionMs: "0", FileDeleteDelayMs: "0", FlushMs: "5",
		IndexIntervalBytes: "0", MaxMessageBytes: "0", MessageTimestampType: "LogAppendTime",
		MinCompactionLagMs: "1000", MinInsyncReplicas: "2", RemoteLogCopyDisable: "true",
		RemoteLogDeleteOnDisable: "true", RetentionBytes: "-5", RetentionMs: "-1", SegmentBytes: "1024",
		SegmentMs: "1",
	}
	for k, v := range valid {
		require.NoError(t, ValidateOne(k, v), "%s=%s", k, v)
	}
	require.NoError(t, Validate(valid))
	for _, v := range []string{"", "*", " * ", "0:1", "0:1, 10:22 ,3:4"} {
		require.NoError(t, ValidateOne(LeaderReplicationThrottledReplicas, v), v)
	}
	for _, v := range []string{"0", "1", "0.5", ".5", "1e-1", "1.0"} {
		require.NoError(t, ValidateOne(MinCleanableDirtyRatio, v), v)
	}
}

// Wrong types and out-of-range values are refused with a message naming the
// key, the value and what is expected.
func TestValidateNamesKeyValueAndExpectation(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"no.such.key", "1", "unknown key"},
		{RetentionMs, "7d", "LONG"},
		{RetentionMs, "-2", "at least -1"},
		{SegmentBytes, "10", "at least 1024"},
		{FlushPolicy, "sometimes", "one of: always, interval"},
		{CleanupPolicy, "compact,forget", `"forget" is not a cleanup policy`},
		{CleanupPolicy, "", "must not be empty"},
		{MaxMessageBytes, "99999999999", "INT"},
		{MessageTimestampType, "Now", "one of: CreateTime, LogAppendTime"},
		{CompressionType, "brotli", "one of: uncompressed, zstd, lz4, snappy, gzip, producer"},
		{CompressionType, "GZIP", "one of"},
		{CompressionGzipLevel, "0", "between 1 and 9 or equal to -1"},
		{CompressionGzipLevel, "10", "between 1 and 9 or equal to -1"},
		{CompressionLZ4Level, "0", "between 1 and 17"},
		{CompressionZstdLevel, "23", "between -131072 and 22"},
		{MinCleanableDirtyRatio, "1.5", "between 0 and 1"},
		{MinCleanableDirtyRatio, "-0.1", "between 0 and 1"},
		{MinCleanableDirtyRatio, "half", "DOUBLE"},
		{MinCleanableDirtyRatio, "NaN", "DOUBLE"},
		{MaxCompactionLagMs, "0", "at least 1"},
		{UncleanLeaderElectionEnable, "yes", "BOOLEAN"},
		{Preallocate, "1", "BOOLEAN"},
		{MessageDownconversionEnable, "on", "BOOLEAN"},
		{SegmentIndexBytes, "3", "at least 4"},
		{SegmentJitterMs, "-1", "at least 0"},
		{FlushMessages, "0", "at least 1"},
		{MessageTimestampDifferenceMaxMs, "-1", "at least 0"},
		{MessageTimestampBeforeMaxMs, "soon", "LONG"},
		{MessageTimestampAfterMaxMs, "-1", "at least 0"},
		{LocalRetentionMs, "-3", "at least -2"},
		{LocalRetentionBytes, "-3", "at least -2"},
		{RemoteStorageEnable, "true", "tiered storage"},
		{RemoteStorageEnable, "maybe", "BOOLEAN"},
		{LeaderReplicationThrottledReplicas, "0-1", "[partitionId]:[brokerId]"},
		{FollowerReplicationThrottledReplicas, "*,0:1", "the literal '*'"},
		{"message.format.version", "3.0", "removed in Kafka 4.0"},
	} {
		err := ValidateOne(tc.key, tc.value)
		require.ErrorIs(t, err, ErrInvalid, "%s=%q", tc.key, tc.value)
		msg := err.Error()
		require.Contains(t, msg, tc.key)
		require.Contains(t, msg, tc.want, "%s=%q", tc.key, tc.value)
		if tc.value != "" && !strings.HasPrefix(tc.want, "unknown") && tc.key != "message.format.version" {
			require.Contains(t, msg, tc.value)
		}
		require.ErrorIs(t, Validate(map[string]string{tc.key: tc.value}), ErrInvalid)
	}
}

// Kafka's LogConfig.validateValues: the compaction lags must be ordered,
// judged on the effective values.
func TestCompactionLagsOrdered(t *testing.T) {
	err := Validate(map[string]string{MinCompactionLagMs: "5000", MaxCompactionLagMs: "1000"})
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "min.compaction.lag.ms (5000) is greater than max.compaction.lag.ms (1000)")
	require.NoError(t, Validate(map[string]string{MinCompactionLagMs: "5000"}))
	require.ErrorIs(t, Validate(map[string]string{MaxCompactionLagMs: "1", MinCompactionLagMs: "2"}), ErrInvalid)
}

// The deprecated message.timestamp.difference.max.ms stands in for each
// bound the topic does not set itself.
func TestTimestampDifferenceIsTheDefaultBound(t *testing.T) {
	c, err := Resolve(map[string]string{MessageTimestampDifferenceMaxMs: "1000"})
	require.NoError(t, err)
	require.Equal(t, int64(1000), c.TimestampBeforeMaxMs)
	require.Equal(t, int64(1000), c.TimestampAfterMaxMs)
	c, err = Resolve(map[string]string{MessageTimestampDifferenceMaxMs: "1000", MessageTimestampAfterMaxMs: "5"})
	require.NoError(t, err)
	require.Equal(t, int64(1000), c.TimestampBeforeMaxMs)
	require.Equal(t, int64(5), c.TimestampAfterMaxMs)
}

func TestDefsAreConsistent(t *testing.T) {
	_, ok := Lookup(RetentionMs)
	require.True(t, ok)
	require.Len(t, Defs(), len(defs))
	require.Len(t, byName, len(defs), "duplicate key")
	for _, d := range Defs() {
		// Every default is a valid value, and documented.
		require.NoError(t, ValidateOne(d.Name, d.Default), d.Name)
		require.NotEmpty(t, d.Doc, d.Name)
		if d.NotApplied != "" {
			require.Contains(t, d.Documentation(), "does not act on it yet: "+d.NotApplied, d.Name)
		} else {
			require.Equal(t, d.Doc, d.Documentation())
		}
	}
	c, err := Resolve(nil)
	require.NoError(t, err)
	require.Equal(t, 1048588, c.MaxMessageBytes)
}

// The README's topic-config section lists every key, and says which are
// stored but not acted on yet: exactly the keys with NotApplied.
func TestReadmeListsEveryKey(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	s := string(raw)
	start := strings.Index(s, "## Topic configs")
	require.GreaterOrEqual(t, start, 0)
	section := s[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	at := strings.Index(section, "Stored but not acted on yet")
	require.GreaterOrEqual(t, at, 0, "README's topic-config section has no \"Stored but not acted on yet\" part")
	stored := section[at:]
	for _, d := range Defs() {
		require.Contains(t, section, "`"+d.Name+"`", "README does not list %s", d.Name)
		if d.NotApplied != "" {
			require.Contains(t, stored, "`"+d.Name+"`", "README does not list %s as stored only", d.Name)
		} else {
			require.NotContains(t, stored, "`"+d.Name+"`", "README lists %s as stored only, but it is applied", d.Name)
		}
	}
}

func TestCanonicalShowsBooleansAsKafkaDoes(t *testing.T) {
	d, ok := Lookup(Preallocate)
	if !ok {
		t.Fatal("preallocate is not a key")
	}
	if err := ValidateOne(Preallocate, " TRUE "); err != nil {
		t.Fatalf("TRUE is a boolean, as Kafka parses it: %v", err)
	}
	if got := d.Canonical(" TRUE "); got != "true" {
		t.Errorf("Canonical = %q, want true", got)
	}
	r, _ := Lookup(RetentionMs)
	if got := r.Canonical(" 1000 "); got != "1000" {
		t.Errorf("Canonical = %q", got)
	}
}

// The compaction keys resolve with Kafka's defaults and every spelling of
// cleanup.policy Kafka takes; "compact" alone switches retention off.
func TestCompactionConfig(t *testing.T) {
	c, err := Resolve(nil)
	require.NoError(t, err)
	require.False(t, c.CleanupCompact)
	require.Equal(t, 0.5, c.MinCleanableDirtyRatio)
	require.Zero(t, c.MinCompactionLag)
	require.Equal(t, time.Duration(math.MaxInt64), c.MaxCompactionLag, "Long.MAX_VALUE: never forced")
	require.Equal(t, 24*time.Hour, c.DeleteRetention)

	for _, tc := range []struct {
		policy          string
		compact, delete bool
	}{
		{"compact", true, false},
		{"delete", false, true},
		{"compact,delete", true, true},
		{"delete,compact", true, true},
		{" compact , delete ", true, true},
	} {
		c, err := Resolve(map[string]string{CleanupPolicy: tc.policy})
		require.NoError(t, err, tc.policy)
		require.Equal(t, tc.compact, c.CleanupCompact, tc.policy)
		require.Equal(t, tc.delete, c.CleanupDelete, tc.policy)
	}

	c, err = Resolve(map[string]string{
		CleanupPolicy: "compact", MinCleanableDirtyRatio: "0.01", MinCompactionLagMs: "1000",
		MaxCompactionLagMs: "60000", DeleteRetentionMs: "0",
	})
	require.NoError(t, err)
	require.Equal(t, 0.01, c.MinCleanableDirtyRatio)
	require.Equal(t, time.Second, c.MinCompactionLag)
	require.Equal(t, time.Minute, c.MaxCompactionLag)
	require.Zero(t, c.DeleteRetention)

	// Bounds: Kafka's validators (between(0,1), atLeast(0), atLeast(1)) and
	// LogConfig.validateValues' min <= max.
	for _, bad := range []map[string]string{
		{CleanupPolicy: "compacted"},
		{CleanupPolicy: ""},
		{CleanupPolicy: "compact,nope"},
		{MinCleanableDirtyRatio: "1.01"},
		{MinCleanableDirtyRatio: "-0.1"},
		{MinCleanableDirtyRatio: "NaN"},
		{MinCleanableDirtyRatio: "half"},
		{MinCompactionLagMs: "-1"},
		{MaxCompactionLagMs: "0"},
		{DeleteRetentionMs: "-1"},
		{MinCompactionLagMs: "5000", MaxCompactionLagMs: "4000"},
	} {
		err := Validate(bad)
		require.ErrorIs(t, err, ErrInvalid, "%v", bad)
	}
	for _, ok := range []string{"0", "1", "0.0", "1.0", "0.5"} {
		require.NoError(t, ValidateOne(MinCleanableDirtyRatio, ok), ok)
	}
	// cleanup.policy is acted on (retention, keyless records refused).
	d, ok := Lookup(CleanupPolicy)
	require.True(t, ok)
	require.Empty(t, d.NotApplied)
}
