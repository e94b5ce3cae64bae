package node

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/group"
)

func testConfig(t *testing.T, dir string) Config {
	return Config{DataDir: dir, Listen: "127.0.0.1:0", NodeID: 1, Version: "test",
		Groups: group.Config{OffsetsTopicPartitions: 3}}
}

// A node opened in-process serves Kafka clients, and what it acknowledged
// is there after a graceful Shutdown and a new Open on the same data.
func TestOpenServeShutdownReopen(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := Open(ctx, testConfig(t, dir))
	require.NoError(t, err)
	select {
	case <-n.Ready():
	case <-ctx.Done():
		t.Fatal("a new node never became ready")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()), kgo.DefaultProduceTopic("t"))
	require.NoError(t, err)
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "t")
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}).FirstErr())
	var offs kadm.Offsets
	offs.AddOffset("t", 0, 1, -1)
	_, err = kadm.NewClient(cl).CommitOffsets(ctx, "g", offs)
	require.NoError(t, err)
	cl.Close()
	require.Nil(t, n.HTTPAddr(), "no HTTP listener unless asked")
	require.NoError(t, n.Shutdown(ctx))

	n, err = Open(ctx, testConfig(t, dir))
	require.NoError(t, err)
	defer n.Close()
	select {
	case <-n.Ready():
	case <-ctx.Done():
		t.Fatal("the reopened node never finished replaying __consumer_offsets")
	}
	cl, err = kgo.NewClient(kgo.SeedBrokers(n.Addr().String()))
	require.NoError(t, err)
	defer cl.Close()
	fetched, err := kadm.NewClient(cl).FetchOffsets(ctx, "g")
	require.NoError(t, err)
	o, ok := fetched.Lookup("t", 0)
	require.True(t, ok)
	require.Equal(t, int64(1), o.At, "the commit was replayed by the time the node was ready")
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "t")
	require.NoError(t, err)
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	require.Equal(t, int64(2), total)
}

// The node takes a listener it is given (tests and embedders), and an Open
// that fails leaves no data directory behind and closes what it opened.
func TestOpenWithAListenerAndFailures(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := testConfig(t, t.TempDir())
	cfg.Listener = ln
	n, err := Open(ctx, cfg)
	require.NoError(t, err)
	require.Equal(t, ln.Addr().String(), n.Addr().String())
	require.NoError(t, n.Close())

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	for _, bad := range []func(*Config){
		func(c *Config) { c.Listen = taken.Addr().String() },
		func(c *Config) { c.Groups.OffsetsTopicPartitions = 5000 },
		func(c *Config) { c.HTTP = taken.Addr().String() },
		func(c *Config) { c.Advertise = "h:99999" },
	} {
		cfg := testConfig(t, filepath.Join(t.TempDir(), "data"))
		bad(&cfg)
		_, err := Open(ctx, cfg)
		require.Error(t, err)
		_, statErr := os.Stat(cfg.DataDir)
		require.ErrorIs(t, statErr, os.ErrNotExist, "a failed Open created the data directory: %v", err)
	}
}

// A listener handed to Open is the node's from then on: a failed Open
// closes it too.
func TestFailedOpenClosesTheGivenListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := testConfig(t, filepath.Join(t.TempDir(), "data"))
	cfg.Listener, cfg.Groups.OffsetsTopicPartitions = ln, 5000
	_, err = Open(context.Background(), cfg)
	require.Error(t, err)
	_, err = ln.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
}

// A Shutdown whose deadline passes does not wait for fsyncs that have not
// come: an acks=all produce parked on an fsync is abandoned and Shutdown
// reports it. The group-commit window holding that fsync back runs on a
// fake clock that never moves, so the fsync cannot come at all; that
// Shutdown returns proves it did not wait for it.
func TestShutdownDeadlineCutsDurabilityWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clk := clock.NewFake(time.Now())
	cfg := testConfig(t, t.TempDir())
	cfg.Clock, cfg.GroupCommitWindow = clk, time.Hour
	n, err := Open(ctx, cfg)
	require.NoError(t, err)
	defer n.Close()
	<-n.Ready()
	const timeout = 2 * time.Hour // tells the produces' timers apart from the window's
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()), kgo.DefaultProduceTopic("stuck"),
		kgo.ProduceRequestTimeout(timeout))
	require.NoError(t, err)
	defer cl.Close()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "stuck")
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}).FirstErr(), "the first round is immediate")
	answered := make(chan error, 1)
	go func() { answered <- cl.ProduceSync(ctx, &kgo.Record{Value: []byte("b")}).FirstErr() }()
	require.Eventually(t, func() bool { return slices.Contains(clk.Timers(), timeout) }, 10*time.Second, time.Millisecond,
		"the produce waits for its fsync")

	sctx, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer scancel()
	require.ErrorIs(t, n.Shutdown(sctx), context.DeadlineExceeded)
	cl.Close() // no retries against the stopped node
	require.Error(t, <-answered, "the abandoned produce got no answer")
}
