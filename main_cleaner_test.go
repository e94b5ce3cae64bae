package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/cleaner"
)

// The cleaner's flags have Kafka's defaults, are config keys and MOONMQ_*
// variables like every flag, and are validated before anything opens.
func TestCleanerFlags(t *testing.T) {
	cfg, err := load(t, nil, nil)
	require.NoError(t, err)
	require.Equal(t, &cleaner.Options{Threads: 1, DedupeBufferSize: 128 << 20, IOMaxBytesPerSecond: 200e6, Backoff: 15 * time.Second},
		cfg.cleaner.options(), "Kafka's defaults, but for the I/O limit")

	file := writeConfig(t, "log_cleaner_threads = 3\nlog_cleaner_io_max_bytes_per_second = 1048576.5\n")
	cfg, err = load(t, []string{"--config", file, "--log-cleaner-backoff", "2s"},
		[]string{"MOONMQ_LOG_CLEANER_DEDUPE_BUFFER_SIZE=268435456", "MOONMQ_LOG_CLEANER_THREADS=9"})
	require.NoError(t, err)
	require.Equal(t, &cleaner.Options{Threads: 3, DedupeBufferSize: 256 << 20, IOMaxBytesPerSecond: 1048576.5, Backoff: 2 * time.Second},
		cfg.cleaner.options(), "flag, then file, then environment")
	require.Equal(t, cfg.cleaner.options(), cfg.nodeConfig(nil).Cleaner)

	for args, want := range map[string]string{
		"--log-cleaner-threads=-1":                 "--log-cleaner-threads",
		"--log-cleaner-dedupe-buffer-size=-5":      "--log-cleaner-dedupe-buffer-size",
		"--log-cleaner-io-max-bytes-per-second=-1": "--log-cleaner-io-max-bytes-per-second",
		"--log-cleaner-backoff=-1s":                "--log-cleaner-backoff",
		"--log-cleaner-dedupe-buffer-size=1000":    "--log-cleaner-dedupe-buffer-size",
	} {
		_, err := load(t, []string{args}, nil)
		require.ErrorContains(t, err, want, args)
	}
	// 0 threads turns compaction off, as Kafka's log.cleaner.threads=0.
	_, err = load(t, []string{"--log-cleaner-threads=0"}, nil)
	require.NoError(t, err)
}
