// Package testnode starts MoonMQ nodes in-process for tests that need a
// whole broker but not a process (net/kafka, the MQL scripts, the tui
// sources): node.Open, the very assembly `moonmq serve` runs, on a fresh
// temporary data directory and 127.0.0.1:0. It never builds or spawns the
// binary; tests of a real process (signals, SIGKILL, kcat, terminals) use
// internal/testbroker.
//
// Invariants: Start returns a node that is ready (the group coordinator has
// replayed __consumer_offsets) or fails the test; the node is closed at the
// test's cleanup, and its log is shown if the test failed.
package testnode

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/moonmq/moonmq/internal/syncbuf"
	"github.com/moonmq/moonmq/node"
)

// Start opens a node from cfg, whose zero fields are filled for a test: a
// temporary data directory, 127.0.0.1:0 (unless cfg.Listener is set),
// node id 1, three partitions of __consumer_offsets (a quicker start than
// the 50 of `moonmq serve`) and a log kept for the failure report.
func Start(t testing.TB, cfg node.Config) *node.Node {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Listen == "" && cfg.Listener == nil {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.NodeID == 0 {
		cfg.NodeID = 1
	}
	if cfg.Groups.OffsetsTopicPartitions == 0 {
		cfg.Groups.OffsetsTopicPartitions = 3
	}
	if cfg.Version == "" {
		cfg.Version = "test"
	}
	var logs *syncbuf.Buffer
	if cfg.Logger == nil {
		logs = &syncbuf.Buffer{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("opening a node: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("closing the node: %v", err)
		}
		if t.Failed() && logs != nil {
			t.Logf("node log:\n%s", logs.Tail(100))
		}
	})
	select {
	case <-n.Ready():
	case <-ctx.Done():
		t.Fatalf("the node was not ready within 30s")
	}
	return n
}
