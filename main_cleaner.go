package main

import (
	"flag"
	"time"

	"github.com/moonmq/moonmq/engine/cleaner"
)

// cleanerFlags are the log cleaner's settings of `moonmq serve`, named
// after Kafka's log.cleaner.* broker configs, with Kafka's defaults but
// for the I/O limit (cleaner.DefaultIOMaxBytesPerSecond says why).
type cleanerFlags struct {
	threads       int
	dedupeBuffer  int64
	ioMaxBytesSec float64
	backoff       time.Duration
}

func addCleanerFlags(fs *flag.FlagSet) *cleanerFlags {
	c := &cleanerFlags{}
	fs.IntVar(&c.threads, "log-cleaner-threads", cleaner.DefaultThreads,
		"goroutines compacting topics with cleanup.policy=compact (log.cleaner.threads; 0 = no compaction)")
	fs.Int64Var(&c.dedupeBuffer, "log-cleaner-dedupe-buffer-size", cleaner.DefaultDedupeBufferSize,
		"bytes of key map shared by the cleaner threads; a log with more keys is cleaned in several passes (log.cleaner.dedupe.buffer.size)")
	fs.Float64Var(&c.ioMaxBytesSec, "log-cleaner-io-max-bytes-per-second", cleaner.DefaultIOMaxBytesPerSecond,
		"read plus write rate of all the cleaner threads together, in bytes per second (log.cleaner.io.max.bytes.per.second; 0 = unlimited, Kafka's default)")
	fs.DurationVar(&c.backoff, "log-cleaner-backoff", cleaner.DefaultBackoff,
		"how long a cleaner thread with nothing to clean waits before looking again (log.cleaner.backoff.ms)")
	return c
}

// options are the cleaner's options; serve's validation (through the
// node's) and its start both use them.
func (c *cleanerFlags) options() *cleaner.Options {
	return &cleaner.Options{Threads: c.threads, DedupeBufferSize: c.dedupeBuffer,
		IOMaxBytesPerSecond: c.ioMaxBytesSec, Backoff: c.backoff}
}
