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
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/moonmq/moonmq/net/auth"
	"github.com/moonmq/moonmq/net/kafka"
	"github.com/moonmq/moonmq/node"
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
	cluster                       clusterFlags      // main_cluster.go
	groups                        *groupFlags       // main_groups.go
	txns                          *txnFlags         // main_txns.go
	authz                         *authzFlags       // main_authz.go
	tls                           *tlsFlags         // main_tls.go
	interBroker                   *interBrokerFlags // main_interbroker.go
	sasl                          *saslFlags        // main_sasl.go
	cleaner                       *cleanerFlags     // main_cleaner.go
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
	cfg.cluster.add(fs)
	cfg.groups = addGroupFlags(fs)
	cfg.txns = addTxnFlags(fs)
	cfg.authz = addAuthzFlags(fs)
	cfg.tls = addTLSFlags(fs)
	cfg.interBroker = addInterBrokerFlags(fs)
	cfg.sasl = addSASLFlags(fs)
	cfg.cleaner = addCleanerFlags(fs)
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
	if err := c.cluster.validate(int32(c.nodeID)); err != nil {
		return err
	}
	if _, err := c.authz.principals(); err != nil {
		return err
	}
	if err := c.nodeConfig(slog.New(slog.DiscardHandler)).Validate(); err != nil {
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
	// SIGHUP re-reads the TLS files. Caught from before the node opens:
	// its default action would end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	n, err := node.Open(ctx, cfg.nodeConfig(logger))
	if err != nil {
		return err
	}
	defer n.Close()
	reloadDone := make(chan struct{})
	defer close(reloadDone)
	go reloadOnHangup(hup, reloadDone, n, logger)

	select {
	case <-ctx.Done():
	case err := <-n.Stopped():
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

	shutdownStart := time.Now()
	n.Draining() // /readyz answers 503 from here to the end
	logger.Info("shutting down", "timeout", cfg.shutdownTimeout, "delay", cfg.shutdownDelay)
	if cfg.shutdownDelay > 0 {
		// Keep serving while load balancers and orchestrators notice the
		// 503 and stop sending new clients here; a second signal cuts it
		// short (above).
		time.Sleep(cfg.shutdownDelay)
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := n.Shutdown(sctx); err != nil {
		logger.Warn("shutdown did not finish everything", "err", err)
	}
	logger.Info("shutdown complete", "took", time.Since(shutdownStart).Round(time.Millisecond))
	return nil
}

// reloadOnHangup re-reads the Kafka listener's TLS files at each SIGHUP
// until done: the next handshakes use them, open connections keep theirs,
// and a bad file keeps the material in use (auth.TLS.Reload logs which).
func reloadOnHangup(hup <-chan os.Signal, done <-chan struct{}, n *node.Node, logger *slog.Logger) {
	for {
		select {
		case <-done:
			return
		case <-hup:
		}
		if n.TLS() == nil {
			logger.Info("SIGHUP: nothing to reload, the Kafka listener does not use TLS")
			continue
		}
		logger.Info("SIGHUP: reloading the TLS certificate, key and client CA files")
		_ = n.ReloadTLS() // logs the new certificate, or the error and the one kept

	}
}

// nodeConfig is the node's configuration from the settings.
func (c *serveConfig) nodeConfig(logger *slog.Logger) node.Config {
	cfg := c.nodeConfigBase(logger)
	c.tls.apply(&cfg)
	c.sasl.apply(&cfg)
	c.interBroker.apply(&cfg)
	return cfg
}

func (c *serveConfig) nodeConfigBase(logger *slog.Logger) node.Config {
	return node.Config{
		DataDir: c.data, Listen: c.listen, Advertise: c.advertise, HTTP: c.http, Pprof: c.pprof,
		NodeID: int32(c.nodeID), AutoCreateTopics: c.autoCreate, DefaultPartitions: int32(c.defaultPartitions),
		MaxRequestSize: int32(c.maxRequestSize), MaxConnections: c.maxConnections, MaxConnectionsPerIP: c.maxConnectionsPerIP,
		ConnectionsMaxIdle: c.connectionsMaxIdle, RequestTimeout: c.requestTimeout,
		RetentionCheckInterval: c.retentionCheck, GroupCommitWindow: c.groupCommitWindow,
		Groups: c.groups.config(logger), ResetOffsetsTopic: c.groups.resetOffsetsTopic,
		Txns:    c.txns.config(logger),
		Cluster: c.cluster.config(), Version: version, Logger: logger,
		Authz:   c.authz.config(c.authenticates()),
		Cleaner: c.cleaner.options(),
	}
}

// authenticates reports whether the Kafka listener authenticates its
// clients, which is when ACLs are enforced: SASL_PLAINTEXT and SASL_SSL
// always, SSL when it asks for client certificates (required, or
// requested: a client without one is then User:ANONYMOUS to the ACLs).
func (c *serveConfig) authenticates() bool {
	switch c.tls.protocol.p {
	case kafka.ProtocolSASLPlaintext, kafka.ProtocolSASLSSL:
		return true
	case kafka.ProtocolSSL:
		opts := auth.TLSOptions{ClientCAFile: c.tls.ca, ClientAuth: c.tls.clientAuth.a}
		return opts.EffectiveClientAuth() != auth.ClientAuthNone
	}
	return false
}
