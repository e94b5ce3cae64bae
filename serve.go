package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/term"

	"github.com/moonmq/moonmq/cluster/controller"
	"github.com/moonmq/moonmq/engine/broker"
	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/net/httpapi"
	"github.com/moonmq/moonmq/net/kafka"
)

// serveConfig holds every `moonmq serve` setting. Each is a flag; the
// config file and MOONMQ_* environment variables set the same flags (see
// config.go), so this struct is the one definition of the configuration.
type serveConfig struct {
	config      string
	printConfig bool

	data, listen, advertise, http string
	nodeID                        int
	autoCreate                    bool
	defaultPartitions             int
	maxRequestSize                int
	maxConnections                int
	maxConnectionsPerIP           int
	logLevel, logFormat           string
	pprof                         bool
	retentionCheck                time.Duration
	groupCommitWindow             time.Duration
	shutdownTimeout               time.Duration
	shutdownDelay                 time.Duration
	connectionsMaxIdle            time.Duration
	requestTimeout                time.Duration
	groups                        *groupFlags // main_groups.go
}

func serveFlags(stderr io.Writer) (*flag.FlagSet, *serveConfig) {
	cfg := &serveConfig{}
	fs := flag.NewFlagSet("moonmq serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.config, "config", "", "TOML config file (keys are flag names with underscores; env MOONMQ_CONFIG)")
	fs.BoolVar(&cfg.printConfig, "print-config", false, "print the effective configuration as TOML and exit")
	fs.StringVar(&cfg.data, "data", "./moonmq-data", "data directory (partition logs and metadata)")
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:9092", "Kafka protocol listener address (host:port); use 0.0.0.0:9092 to expose it")
	fs.StringVar(&cfg.advertise, "advertise", "", "host:port given to clients in Metadata (default: the listen address)")
	fs.StringVar(&cfg.http, "http", "127.0.0.1:9090", "HTTP address for /metrics, /stats, /healthz, /readyz (empty disables)")
	fs.IntVar(&cfg.nodeID, "node-id", 1, "this node's broker id")
	fs.BoolVar(&cfg.autoCreate, "auto-create-topics", false, "create unknown topics on Metadata/Produce (Kafka's auto.create.topics.enable)")
	fs.IntVar(&cfg.defaultPartitions, "default-partitions", 1, "partitions of auto-created topics and of CreateTopics with -1")
	fs.IntVar(&cfg.maxRequestSize, "max-request-size", 100<<20, "largest request frame accepted, in bytes")
	fs.IntVar(&cfg.maxConnections, "max-connections", 10000, "most client connections at once (0 = unlimited)")
	fs.IntVar(&cfg.maxConnectionsPerIP, "max-connections-per-ip", 1000, "most client connections from one IP address (0 = unlimited)")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&cfg.logFormat, "log-format", "auto", "log format: text, json, or auto (text on a terminal, json otherwise)")
	fs.BoolVar(&cfg.pprof, "pprof", false, "serve /debug/pprof on the HTTP address")
	fs.DurationVar(&cfg.retentionCheck, "retention-check-interval", 30*time.Second, "how often retention and time-based segment rolls run")
	fs.DurationVar(&cfg.groupCommitWindow, "group-commit-window", time.Millisecond,
		"shortest time between two fsyncs of one partition; acks=all produces arriving sooner share the next (0 = fsync back to back)")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long a graceful shutdown waits for in-flight requests")
	fs.DurationVar(&cfg.shutdownDelay, "shutdown-delay", 0,
		"how long a graceful shutdown keeps serving, with /readyz answering 503, before it stops accepting: time for a load balancer to see the node leave")
	fs.DurationVar(&cfg.connectionsMaxIdle, "connections-max-idle", 10*time.Minute,
		"close client connections idle this long: no request, no reply owed (Kafka's connections.max.idle.ms; 0 = never)")
	fs.DurationVar(&cfg.requestTimeout, "request-timeout", 30*time.Second,
		"close a connection whose request stops arriving, or whose replies stop being read, for this long")
	cfg.groups = addGroupFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: moonmq serve [flags]\n\nRuns a MoonMQ broker node. Every flag can also be set in the --config file\n"+
			"(key = flag name with underscores) or as MOONMQ_<KEY> in the environment;\n"+
			"precedence: flags, then config file, then environment, then defaults.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs, cfg
}

func (c *serveConfig) validate() error {
	switch {
	case c.nodeID < 0 || c.nodeID > 1<<31-1:
		return fmt.Errorf("node-id %d: must be between 0 and 2147483647", c.nodeID)
	case c.defaultPartitions < 1:
		return fmt.Errorf("default-partitions %d: must be at least 1", c.defaultPartitions)
	case c.maxRequestSize < 1024 || c.maxRequestSize > 1<<30:
		return fmt.Errorf("max-request-size %d: must be between 1024 and 1073741824", c.maxRequestSize)
	case c.maxConnections < 0:
		return fmt.Errorf("max-connections %d: must not be negative", c.maxConnections)
	case c.maxConnectionsPerIP < 0:
		return fmt.Errorf("max-connections-per-ip %d: must not be negative", c.maxConnectionsPerIP)
	case c.retentionCheck <= 0:
		return fmt.Errorf("retention-check-interval %v: must be positive", c.retentionCheck)
	case c.groupCommitWindow < 0 || c.groupCommitWindow > time.Second:
		return fmt.Errorf("group-commit-window %v: must be between 0 and 1s", c.groupCommitWindow)
	case c.shutdownTimeout <= 0:
		return fmt.Errorf("shutdown-timeout %v: must be positive", c.shutdownTimeout)
	case c.shutdownDelay < 0 || c.shutdownDelay > 10*time.Minute:
		return fmt.Errorf("shutdown-delay %v: must be between 0 and 10m", c.shutdownDelay)
	case c.connectionsMaxIdle < 0:
		return fmt.Errorf("connections-max-idle %v: must not be negative (0 keeps idle connections)", c.connectionsMaxIdle)
	case c.requestTimeout <= 0:
		return fmt.Errorf("request-timeout %v: must be positive", c.requestTimeout)
	case c.data == "":
		return errors.New("data: must not be empty")
	}
	if c.advertise != "" {
		if _, _, err := net.SplitHostPort(c.advertise); err != nil {
			return fmt.Errorf("advertise %q: want host:port: %v", c.advertise, err)
		}
	}
	if err := c.groups.validate(); err != nil {
		return err
	}
	// The logger is built after validation; check its settings here so
	// --print-config refuses exactly what a start would.
	_, err := newLogger(c.logLevel, c.logFormat, io.Discard)
	return err
}

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: durationsAsText}
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "text"
		}
	}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("log-format %q: want text, json or auto", format)
	}
}

// durationsAsText writes durations as Go duration strings ("1.5s",
// "479µs"): slog's JSON handler would print raw nanoseconds.
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// loadServeConfig parses flags, then fills the rest from the config file and
// the environment.
func loadServeConfig(args []string, env []string, stdout, stderr io.Writer) (*serveConfig, error) {
	fs, cfg := serveFlags(stderr)
	if err := parseFlags(fs, args, stderr); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	path := cfg.config
	if path == "" {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "MOONMQ_CONFIG="); ok {
				path = v
			}
		}
	}
	if err := applyConfig(fs, path, env); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.printConfig {
		printConfig(stdout, fs)
		return nil, flag.ErrHelp // done, exit 0
	}
	return cfg, nil
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := loadServeConfig(args, os.Environ(), stdout, stderr)
	if err != nil {
		return err
	}
	logger, err := newLogger(cfg.logLevel, cfg.logFormat, stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	// Registered first, so it runs last: after the deferred closes below
	// have flushed and checkpointed every partition.
	var shutdownStart time.Time
	defer func() {
		if !shutdownStart.IsZero() {
			logger.Info("shutdown complete", "took", time.Since(shutdownStart).Round(time.Millisecond))
		}
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	storage := httpapi.NewStorageMetrics(reg)
	kmetrics := kafka.NewMetrics(reg)

	// The HTTP listener comes up first so /healthz answers and /readyz says
	// 503 while storage recovers and metadata loads.
	var (
		hs    *httpapi.Server
		stats atomic.Pointer[func() *httpapi.Stats]
	)
	if cfg.http != "" {
		hs, err = httpapi.Listen(httpapi.Options{Addr: cfg.http, Pprof: cfg.pprof, Registry: reg, Logger: logger,
			Stats: func() *httpapi.Stats {
				if f := stats.Load(); f != nil {
					return (*f)()
				}
				return &httpapi.Stats{Version: version, NodeID: int32(cfg.nodeID)}
			}})
		if err != nil {
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

	// Bind the Kafka port before the data directory is touched: a start
	// that cannot listen (a bad address, a port in use) must not leave a
	// fresh data directory and cluster id behind. Connections made while
	// storage recovers wait in the listen backlog.
	kln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("kafka listener: %w", err)
	}
	handedOver := false
	defer func() {
		if !handedOver {
			kln.Close()
		}
	}()

	fds := planDescriptors(cfg.maxConnections)
	b, err := broker.Open(broker.Options{DataDir: cfg.data, Logger: logger,
		RetentionCheckInterval: cfg.retentionCheck, GroupCommitWindow: cfg.groupCommitWindow, OnFsync: storage.ObserveFsync,
		FDLimit: fds.limit, FDReserve: fds.reserve, Files: log.NewFileCache(fds.fileCache), FileCacheCapacity: fds.fileCache})
	if err != nil {
		return err
	}
	defer func() {
		if err := b.Close(); err != nil {
			logger.Error("closing partitions", "err", err)
		}
	}()
	reg.MustRegister(httpapi.NewPartitionCollector(b))

	ctrl, err := controller.Open(ctx, controller.Options{
		Dir: filepath.Join(cfg.data, "meta"), NodeID: int32(cfg.nodeID), Logger: logger,
	})
	if err != nil {
		return err
	}
	defer ctrl.Close()
	if err := wireMetadata(ctrl, b, kmetrics, logger); err != nil {
		return err
	}
	groups, err := startGroups(cfg.groups, ctrl, b, logger)
	if err != nil {
		return err
	}
	defer groups.Close()

	handedOver = true
	ks, err := kafka.Listen(kafka.Options{
		Listen: cfg.listen, Listener: kln, Advertise: cfg.advertise, NodeID: int32(cfg.nodeID),
		MaxRequestSize: int32(cfg.maxRequestSize), AutoCreateTopics: cfg.autoCreate,
		DefaultPartitions: int32(cfg.defaultPartitions), MaxConnections: cfg.maxConnections,
		MaxConnectionsPerIP: cfg.maxConnectionsPerIP, Metrics: kmetrics, Logger: logger, Version: version,
		Groups: groups, ConnectionsMaxIdle: cfg.connectionsMaxIdle, RequestTimeout: cfg.requestTimeout,
	}, ctrl, b)
	if err != nil {
		return err
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- ks.Serve() }()

	listeners := httpapi.Listeners{Kafka: ks.Addr().String(), Advertised: ks.Advertised()}
	if hs != nil {
		listeners.HTTP = hs.Addr().String()
	}
	statsFn := func() *httpapi.Stats {
		return &httpapi.Stats{
			Version: version, NodeID: int32(cfg.nodeID), StartedAt: start,
			UptimeSeconds: time.Since(start).Seconds(), Listeners: listeners,
			Connections: ks.Connections(), Topics: httpapi.TopicStatsOf(b), Groups: groupStatsOf(groups, b),
		}
	}
	stats.Store(&statsFn)
	reg.MustRegister(httpapi.NewGroupCollector(func() []httpapi.GroupStats { return groupStatsOf(groups, b) }))
	var shuttingDown atomic.Bool
	if hs != nil {
		hs.SetReadiness(func() (bool, string) {
			return readiness(shuttingDown.Load(), groups.Ready(), b.PartitionStates(), ks.AcceptError())
		})
	}
	// One line sums up the start; each partition's own opening is logged
	// at DEBUG.
	parts := summarizePartitions(b.PartitionStates())
	logger.Info("moonmq serving", "kafka", listeners.Kafka, "advertised", listeners.Advertised,
		"http", listeners.HTTP, "data", cfg.data, "node_id", cfg.nodeID, "cluster_id", ctrl.ClusterID(), "version", version,
		"topics", len(ctrl.Topics()), "partitions", parts.total, "recovered_unclean", parts.unclean,
		"offline", parts.offline, "damaged", parts.damaged,
		"startup", time.Since(start).Round(time.Millisecond))

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		ks.Close()
		if err == nil {
			err = errors.New("closed unexpectedly")
		}
		return fmt.Errorf("kafka listener stopped: %w", err)
	}
	// A second signal during the graceful shutdown exits at once.
	forced := make(chan os.Signal, 1)
	signal.Notify(forced, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(forced)
	go func() {
		if _, ok := <-forced; ok {
			logger.Warn("second signal: exiting without a clean shutdown")
			os.Exit(1)
		}
	}()

	shutdownStart = time.Now()
	shuttingDown.Store(true) // /readyz answers 503 from here to the end
	logger.Info("shutting down", "timeout", cfg.shutdownTimeout, "delay", cfg.shutdownDelay)
	if cfg.shutdownDelay > 0 {
		// Keep serving while load balancers and orchestrators notice the
		// 503 and stop sending new clients here; a second signal cuts it
		// short (above).
		time.Sleep(cfg.shutdownDelay)
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	// Parked JoinGroup/SyncGroup requests can wait minutes for a rebalance;
	// closing the coordinator first answers them (COORDINATOR_NOT_AVAILABLE,
	// so clients find the coordinator again after the restart).
	_ = groups.Close()
	if err := ks.Shutdown(sctx); err != nil {
		logger.Warn("in-flight requests abandoned at shutdown", "err", err)
	}
	return nil // deferred closes flush, fsync and checkpoint every partition
}

// partitionSummary counts the hosted partitions for the start-up line.
type partitionSummary struct{ total, unclean, offline, damaged int }

func summarizePartitions(states []broker.PartitionState) partitionSummary {
	var s partitionSummary
	for _, p := range states {
		s.total++
		switch {
		case !p.Online:
			s.offline++
		case p.Stats.UncleanOpen:
			s.unclean++
		}
		if len(p.CorruptRanges) > 0 {
			s.damaged++
		}
	}
	return s
}

// readiness decides /readyz: the node is ready when it serves everything
// it should — not while the group coordinator is still replaying
// __consumer_offsets, while shutting down, while any partition it hosts is
// offline (it could not be opened, or its log failed an I/O operation; the
// broker retries it), or while accepting connections fails (out of file
// descriptors). Damaged ranges inside a partition do not make the node
// unready: everything else in it is served (they show in /stats and
// /metrics).
func readiness(shuttingDown bool, groupsErr error, parts []broker.PartitionState, acceptErr error) (bool, string) {
	switch {
	case shuttingDown:
		return false, "shutting down"
	case groupsErr != nil:
		return false, "storage recovery or metadata load in progress: " + groupsErr.Error()
	case acceptErr != nil:
		return false, "cannot accept connections: " + acceptErr.Error()
	}
	var offline []string
	for _, p := range parts {
		if !p.Online {
			offline = append(offline, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
		}
	}
	if len(offline) > 0 {
		shown := offline[:min(len(offline), 10)]
		more := ""
		if len(offline) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(offline)-len(shown))
		}
		return false, fmt.Sprintf("%d partitions offline (%s%s); see /stats", len(offline), strings.Join(shown, ", "), more)
	}
	return true, ""
}

// descriptorPlan divides the process's file descriptor limit: a share for
// client connections (up to --max-connections, at most half the limit), a
// cache of idle segment files, a fixed reserve for the metadata store,
// listeners and transient files, and the rest for partitions (one each).
type descriptorPlan struct {
	limit, reserve, fileCache int
}

func planDescriptors(maxConnections int) descriptorPlan {
	var r syscall.Rlimit
	limit := 1 << 20
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err == nil && r.Cur < 1<<30 {
		limit = int(r.Cur) // Go has raised the soft limit to the hard one
	}
	conns := maxConnections
	if conns <= 0 || conns > limit/2 {
		conns = limit / 2
	}
	return descriptorPlan{limit: limit, reserve: 256 + conns, fileCache: min(max(limit/8, 32), 4096)}
}

// wireMetadata keeps the hosted partitions in step with the metadata: the
// controller calls back synchronously on every change, so a CreateTopics
// answer is sent only after the partitions exist on disk. Registering
// replays every existing topic first. A partition that fails to open does
// not fail the start: the broker keeps it offline (reported in /readyz,
// /stats and /metrics) and retries it while the rest of the node serves.
func wireMetadata(ctrl *controller.Controller, b *broker.Broker, m *kafka.Metrics, logger *slog.Logger) error {
	ctrl.OnChange(func(ev controller.Event) {
		var err error
		switch ev.Kind {
		case controller.TopicCreated, controller.PartitionsAdded:
			for _, p := range ev.Topic.Partitions {
				_, perr := b.EnsurePartition(broker.TopicPartition{Topic: ev.Topic.Name, Partition: p.ID}, ev.Topic.Configs)
				if !errors.Is(perr, broker.ErrPartitionOffline) { // offline ones are reported by the broker
					err = errors.Join(err, perr)
				}
			}
		case controller.ConfigsChanged:
			err = b.UpdateConfigs(ev.Topic.Name, ev.Topic.Configs)
		case controller.TopicDeleted:
			err = b.DeleteTopic(ev.Topic.Name)
			m.DeleteTopic(ev.Topic.Name)
		}
		if err != nil {
			logger.Error("applying metadata change", "topic", ev.Topic.Name, "event", ev.Kind, "err", err)
		}
	})
	known := map[broker.TopicPartition]bool{}
	for _, t := range ctrl.Topics() {
		for _, p := range t.Partitions {
			known[broker.TopicPartition{Topic: t.Name, Partition: p.ID}] = true
		}
	}
	return b.RemoveOrphans(func(tp broker.TopicPartition) bool { return known[tp] })
}
