// Command moonmq is the MoonMQ broker and its toolkit in one binary:
//
//	moonmq serve   run a broker node
//	moonmq bench   produce/consume load generator
//	moonmq version print the version
//
// This file parses flags, builds configuration and wires the packages
// together; it holds no broker logic of its own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/moonmq/moonmq/cluster/controller"
	"github.com/moonmq/moonmq/engine/broker"
	"github.com/moonmq/moonmq/internal/bench"
	"github.com/moonmq/moonmq/net/httpapi"
	"github.com/moonmq/moonmq/net/kafka"
)

// version is set with -ldflags "-X main.version=..." by the Makefile.
var version = "dev"

const usage = `moonmq — a Kafka-compatible message broker and its toolkit

Usage:
  moonmq serve [flags]          run a broker node (moonmq serve --help for flags)
  moonmq bench produce|consume  load generator (moonmq bench produce --help)
  moonmq version                print the version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stderr)
	case "bench":
		err = bench.Run(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "moonmq", versionString())
		return 0
	case "help", "--help", "-h", "-help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "moonmq: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintln(stderr, "moonmq:", err)
		return 1
	}
}

// errUsage marks an error already reported by a FlagSet.
var errUsage = errors.New("usage error")

func versionString() string {
	v := version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return v
}

type serveConfig struct {
	data, listen, advertise, http string
	nodeID                        int
	autoCreate                    bool
	defaultPartitions             int
	maxRequestSize                int
	logLevel                      string
	logFormat                     string
	pprof                         bool
	retentionCheck                time.Duration
}

func serveFlags(stderr io.Writer) (*flag.FlagSet, *serveConfig) {
	cfg := &serveConfig{}
	fs := flag.NewFlagSet("moonmq serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.data, "data", "./moonmq-data", "data directory (partition logs and metadata)")
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:9092", "Kafka protocol listener address (host:port); use 0.0.0.0:9092 to expose it")
	fs.StringVar(&cfg.advertise, "advertise", "", "host:port given to clients in Metadata (default: the listen address)")
	fs.StringVar(&cfg.http, "http", "127.0.0.1:9090", "HTTP address for /metrics, /healthz, /readyz (empty disables)")
	fs.IntVar(&cfg.nodeID, "node-id", 1, "this node's broker id")
	fs.BoolVar(&cfg.autoCreate, "auto-create-topics", false, "create unknown topics on Metadata/Produce (Kafka's auto.create.topics.enable)")
	fs.IntVar(&cfg.defaultPartitions, "default-partitions", 1, "partitions of auto-created topics and of CreateTopics with -1")
	fs.IntVar(&cfg.maxRequestSize, "max-request-size", 100<<20, "largest request frame accepted, in bytes")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log format: text or json")
	fs.BoolVar(&cfg.pprof, "pprof", false, "serve /debug/pprof on the HTTP address")
	fs.DurationVar(&cfg.retentionCheck, "retention-check-interval", 30*time.Second, "how often retention and time-based segment rolls run")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: moonmq serve [flags]\n\nRuns a MoonMQ broker node.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs, cfg
}

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs, cfg := serveFlags(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	if cfg.nodeID < 0 || cfg.nodeID > 1<<31-1 {
		return fmt.Errorf("--node-id %d: must be between 0 and 2147483647", cfg.nodeID)
	}
	if cfg.defaultPartitions < 1 {
		return fmt.Errorf("--default-partitions %d: must be at least 1", cfg.defaultPartitions)
	}
	logger, err := newLogger(cfg.logLevel, cfg.logFormat, stderr)
	if err != nil {
		return err
	}
	start := time.Now()

	var hs *httpapi.Server
	if cfg.http != "" {
		if hs, err = httpapi.Listen(httpapi.Options{Addr: cfg.http, Pprof: cfg.pprof, Logger: logger}); err != nil {
			return err
		}
		go func() {
			if err := hs.Serve(); err != nil {
				logger.Error("http server stopped", "err", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = hs.Close(sctx)
		}()
	}

	b, err := broker.Open(broker.Options{DataDir: cfg.data, Logger: logger, RetentionCheckInterval: cfg.retentionCheck})
	if err != nil {
		return err
	}
	defer func() {
		if err := b.Close(); err != nil {
			logger.Error("closing partitions", "err", err)
		}
	}()

	ctrl, err := controller.Open(ctx, controller.Options{
		Dir: filepath.Join(cfg.data, "meta"), NodeID: int32(cfg.nodeID), Logger: logger,
	})
	if err != nil {
		return err
	}
	defer ctrl.Close()
	if err := wireMetadata(ctrl, b, logger); err != nil {
		return err
	}

	ks, err := kafka.Listen(kafka.Options{
		Listen: cfg.listen, Advertise: cfg.advertise, NodeID: int32(cfg.nodeID),
		MaxRequestSize: int32(cfg.maxRequestSize), AutoCreateTopics: cfg.autoCreate,
		DefaultPartitions: int32(cfg.defaultPartitions), Logger: logger, Version: version,
	}, ctrl, b)
	if err != nil {
		return err
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- ks.Serve() }()
	if hs != nil {
		hs.SetReady(true)
	}
	httpAddr := ""
	if hs != nil {
		httpAddr = hs.Addr().String()
	}
	logger.Info("moonmq serving", "kafka", ks.Addr().String(), "advertised", ks.Advertised(),
		"http", httpAddr, "data", cfg.data, "node_id", cfg.nodeID, "version", version,
		"startup", time.Since(start).Round(time.Millisecond))

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-serveErr:
		if err != nil {
			return err
		}
	}
	if hs != nil {
		hs.SetReady(false)
	}
	return ks.Close()
}

// wireMetadata keeps the hosted partitions in step with the metadata: the
// controller calls back synchronously on every change, so a CreateTopics
// answer is sent only after the partitions exist on disk. Registering
// replays every existing topic first; a partition that fails to open then
// fails the start rather than leaving a hole clients would see as an
// unknown partition.
func wireMetadata(ctrl *controller.Controller, b *broker.Broker, logger *slog.Logger) error {
	var (
		replaying  atomic.Bool // true while OnChange replays existing topics
		startupErr error
	)
	replaying.Store(true)
	ctrl.OnChange(func(ev controller.Event) {
		var err error
		switch ev.Kind {
		case controller.TopicCreated, controller.PartitionsAdded:
			for _, p := range ev.Topic.Partitions {
				_, perr := b.EnsurePartition(broker.TopicPartition{Topic: ev.Topic.Name, Partition: p.ID}, ev.Topic.Configs)
				err = errors.Join(err, perr)
			}
		case controller.ConfigsChanged:
			err = b.UpdateConfigs(ev.Topic.Name, ev.Topic.Configs)
		case controller.TopicDeleted:
			err = b.DeleteTopic(ev.Topic.Name)
		}
		if err != nil && replaying.Load() {
			startupErr = errors.Join(startupErr, err)
		} else if err != nil {
			logger.Error("applying metadata change", "topic", ev.Topic.Name, "event", ev.Kind, "err", err)
		}
	})
	replaying.Store(false)
	if startupErr != nil {
		return fmt.Errorf("opening partitions: %w", startupErr)
	}
	known := map[broker.TopicPartition]bool{}
	for _, t := range ctrl.Topics() {
		for _, p := range t.Partitions {
			known[broker.TopicPartition{Topic: t.Name, Partition: p.ID}] = true
		}
	}
	return b.RemoveOrphans(func(tp broker.TopicPartition) bool { return known[tp] })
}
