// Package node assembles one MoonMQ broker node from its parts — the
// hosted partitions (engine/replica), the metadata controller
// (cluster/controller), the group coordinator (engine/group), the Kafka
// listener (net/kafka) and the operator's HTTP endpoints (net/httpapi) —
// and owns their order: storage and metadata before the coordinator,
// everything before the listener accepts, and the reverse at shutdown.
// Its reconciler (reconcile.go) is the one path from metadata to what the
// node hosts: it applies the controller's ordered deltas to the replicas
// and the coordinator in its own goroutine, never on Raft's apply path.
// Package main only turns flags, the config file and the environment into
// a Config.
//
// Invariants: Open either returns a serving node or has closed everything
// it opened; settings are checked and the Kafka port is bound before the
// data directory is touched, so a failed Open leaves no data behind; the
// node is ready (Ready, /readyz) only once it reconciled the metadata's
// applied index at start and the coordinator loaded.
package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/moonmq/moonmq/cluster/controller"
	"github.com/moonmq/moonmq/cluster/membership"
	"github.com/moonmq/moonmq/engine/cleaner"
	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/topicconfig"
	"github.com/moonmq/moonmq/engine/txncoord"
	"github.com/moonmq/moonmq/engine/vfs"
	"github.com/moonmq/moonmq/net/auth"
	"github.com/moonmq/moonmq/net/httpapi"
	"github.com/moonmq/moonmq/net/kafka"
	"github.com/moonmq/moonmq/net/peer"
)

// Config is everything a node is built from. Zero durations and sizes take
// the parts' own defaults.
type Config struct {
	DataDir string
	// Listen is the Kafka listener address; Listener, when set, is used
	// instead (the node owns it), so tests and embedders can pass one.
	Listen    string
	Listener  net.Listener
	Advertise string
	// HTTP is the address of /metrics, /stats, /healthz and /readyz;
	// empty disables them.
	HTTP  string
	Pprof bool

	NodeID              int32
	AutoCreateTopics    bool
	DefaultPartitions   int32
	MaxRequestSize      int32
	MaxConnections      int
	MaxConnectionsPerIP int
	ConnectionsMaxIdle  time.Duration
	RequestTimeout      time.Duration
	// SecurityProtocol is the Kafka listener's ("" is PLAINTEXT); TLS
	// names its certificate files, required with SSL and SASL_SSL and
	// refused with the others. Open loads them; ReloadTLS re-reads them.
	SecurityProtocol kafka.SecurityProtocol
	TLS              auth.TLSOptions
	// The Kafka listener's memory bounds (kafka.Options; Kafka's
	// queued.max.request.bytes and fetch.max.bytes). No flag sets them:
	// tests and embedders do.
	MaxQueuedRequestBytes  int64
	MaxQueuedResponseBytes int64
	ConnResponseBytes      int64
	FetchMaxBytes          int

	RetentionCheckInterval time.Duration
	GroupCommitWindow      time.Duration
	// Cleaner configures the log cleaner (compaction of cleanup.policy=
	// compact topics); nil is the broker's defaults (Kafka's: one thread,
	// 128 MiB of key map; and an I/O limit of
	// cleaner.DefaultIOMaxBytesPerSecond). Clock and Logger are the node's.
	Cleaner *cleaner.Options
	// Clock runs the storage's and the Kafka listener's timers (flushers,
	// group-commit windows, housekeeping, produce timeouts, fetch waits);
	// nil is the machine's clock. Tests pass a clock.Fake to decide when
	// time passes.
	Clock clock.Clock

	// Cluster makes the node one of a cluster; the zero value is a
	// one-node cluster.
	Cluster ClusterConfig

	Groups group.Config
	// ResetOffsetsTopic deletes __consumer_offsets at start (every
	// committed offset and group is lost).
	ResetOffsetsTopic bool
	// Txns configures the transaction coordinator.
	Txns txncoord.Config
	// Quotas are the Kafka listener's client quotas. A nil Source is the
	// controller's quotas (what AlterClientQuotas stored); tests pass a
	// static one.
	Quotas kafka.QuotaOptions
	// Authz configures ACL checks on the Kafka listener (authz.go).
	Authz AuthzConfig

	// SASL configures authentication on a SASL_* SecurityProtocol. With
	// no Credentials, the controller's SCRAM credentials are used.
	SASL kafka.SASLOptions
	// BootstrapUsers get SCRAM credentials at start if they have none.
	BootstrapUsers []BootstrapUser
	// InterBroker is the user this node logs in to its peers' SASL
	// listeners as (interbroker.go); required on a SASL cluster.
	InterBroker InterBrokerConfig
	// GossipKey encrypts the cluster's gossip (16, 24 or 32 bytes; the
	// same on every node). On a SASL cluster without one, a key derived
	// from the inter-broker password is used; a TLS cluster needs one.
	GossipKey []byte

	Version string
	Logger  *slog.Logger

	// partitionFS is the partition logs' filesystem (nil: the OS's): the
	// node's tests pass a vfs.Faults to fail one replica's disk.
	partitionFS vfs.FS
}

// Validate checks what Open would refuse before touching anything.
func (c Config) Validate() error {
	if err := c.Cluster.withDefaults(c.NodeID).validate(c.NodeID); err != nil {
		return err
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	if err := c.validateInterBroker(); err != nil {
		return err
	}
	ko := c.kafkaOptions(nil, nil, nil, nil, nil)
	if err := ko.Auth.ValidateSASL(); err != nil {
		return err
	}
	ko.Auth.TLS = nil // validateSecurity checked the files' names; Open loads them
	ko.Auth.SecurityProtocol = kafka.ProtocolPlaintext
	ko.Auth.SASL = kafka.SASLOptions{} // checked above, with the real protocol
	if err := ko.Validate(); err != nil {
		return err
	}
	g := c.Groups
	if g.Logger == nil {
		g.Logger = slog.New(slog.DiscardHandler)
	}
	g.EnsureDefaults()
	if err := g.Validate(); err != nil {
		return err
	}
	t := c.Txns
	t.EnsureDefaults()
	if err := t.Validate(); err != nil {
		return err
	}
	// The transaction coordinator knows no topic configs: the topic's own
	// rules (segment.bytes' minimum) are checked here, as the controller
	// would check them when it creates the topic.
	if err := topicconfig.Validate(txncoord.TopicConfigs(t.SegmentBytes)); err != nil {
		return fmt.Errorf("transaction state segment bytes: %w", err)
	}
	co := c.cleanerOptions()
	co.EnsureDefaults()
	return co.Validate()
}

// cleanerOptions are the log cleaner's options: Cleaner, or the broker's
// defaults (`moonmq serve`'s), with the node's clock and logger.
func (c Config) cleanerOptions() cleaner.Options {
	o := cleaner.Options{Threads: cleaner.DefaultThreads, IOMaxBytesPerSecond: cleaner.DefaultIOMaxBytesPerSecond}
	if c.Cleaner != nil {
		o = *c.Cleaner
	}
	if o.Clock == nil {
		o.Clock = c.Clock
	}
	if o.Logger == nil && c.Logger != nil {
		o.Logger = c.Logger.With("component", "cleaner")
	}
	return o
}

// kafkaOptions are the Kafka listener's options; Validate checks them
// before anything is opened.
func (c Config) kafkaOptions(ln net.Listener, m *kafka.Metrics, groups *group.Coordinator, txns *txncoord.Coordinator, verifier kafka.Verifier) kafka.Options {
	return kafka.Options{
		Listen: c.Listen, Listener: ln, Advertise: c.Advertise, NodeID: c.NodeID, Clustered: c.Cluster.Clustered(),
		MaxRequestSize: c.MaxRequestSize, AutoCreateTopics: c.AutoCreateTopics,
		DefaultPartitions: c.DefaultPartitions, MaxConnections: c.MaxConnections,
		MaxConnectionsPerIP: c.MaxConnectionsPerIP, Metrics: m, Logger: c.Logger, Version: c.Version,
		Groups: groups, Txns: txns, Verifier: verifier, TransactionVersion: c.Txns.TransactionVersion, ConnectionsMaxIdle: c.ConnectionsMaxIdle, RequestTimeout: c.RequestTimeout,
		MaxQueuedRequestBytes: c.MaxQueuedRequestBytes, MaxQueuedResponseBytes: c.MaxQueuedResponseBytes,
		ConnResponseBytes: c.ConnResponseBytes, FetchMaxBytes: c.FetchMaxBytes,
		Clock: c.Clock, Quotas: c.Quotas, Auth: kafka.AuthOptions{SecurityProtocol: c.SecurityProtocol, SASL: c.SASL},
	}
}

// Node is a running broker node.
type Node struct {
	cfg    Config
	log    *slog.Logger
	start  time.Time
	http   *httpapi.Server
	broker *replica.Manager
	// cleaner compacts the partitions of compacted topics in the
	// background (engine/cleaner).
	cleaner *cleaner.Manager
	ctrl    *controller.Controller
	// members is the gossip membership of a clustered node (nil alone).
	members *membership.Membership
	groups  *group.Coordinator
	txns    *txncoord.Coordinator
	kafka   *kafka.Server
	// tls is the Kafka listener's TLS material (nil without TLS).
	tls *auth.TLS
	rec *reconciler
	// startIndex is the metadata's applied index when the node opened: it
	// is ready once it reconciled that far (and the coordinator loaded).
	startIndex uint64
	ready      chan struct{}

	serveErr     chan error
	shuttingDown atomic.Bool
	closers      []func() // in opening order; Close runs them backwards
}

// Open builds the node and starts serving: HTTP first (so /readyz says 503
// while storage recovers), then storage, metadata, the group coordinator
// and the Kafka listener.
func Open(ctx context.Context, cfg Config) (_ *Node, err error) {
	// The node owns a listener it is given from here, whatever happens.
	handedOver := false
	defer func() {
		if !handedOver && cfg.Listener != nil {
			cfg.Listener.Close()
		}
	}()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Groups.Logger == nil {
		cfg.Groups.Logger = cfg.Logger
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Validate accepted it: from here the protocol is in its canonical
	// spelling, which the security decisions compare against.
	cfg.SecurityProtocol, _ = kafka.ParseSecurityProtocol(string(cfg.SecurityProtocol))
	n := &Node{cfg: cfg, log: cfg.Logger, start: time.Now(), serveErr: make(chan error, 1)}
	defer func() {
		if err != nil {
			n.closeAll()
		}
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	storage := httpapi.NewStorageMetrics(reg)
	kmetrics := kafka.NewMetrics(reg)

	var stats atomic.Pointer[func() *httpapi.Stats]
	if cfg.HTTP != "" {
		hs, err := httpapi.Listen(httpapi.Options{Addr: cfg.HTTP, Pprof: cfg.Pprof, Registry: reg, Logger: n.log,
			Stats: func() *httpapi.Stats {
				if f := stats.Load(); f != nil {
					return (*f)()
				}
				return &httpapi.Stats{Version: cfg.Version, NodeID: cfg.NodeID}
			}})
		if err != nil {
			return nil, err
		}
		n.http = hs
		go func() {
			if err := hs.Serve(); err != nil {
				n.log.Error("http server stopped", "err", err)
			}
		}()
		n.closers = append(n.closers, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = hs.Close(sctx)
		})
	}

	// The certificate files are read before anything else is opened: a
	// bad file fails the start with its name.
	if cfg.SecurityProtocol.TLS() {
		topts := cfg.TLS
		topts.Logger = n.log
		if n.tls, err = auth.LoadTLS(topts); err != nil {
			return nil, err
		}
		n.log.Info("TLS listener material loaded", "security_protocol", cfg.SecurityProtocol, "cert", topts.CertFile,
			"subject", n.tls.Leaf().Subject.String(), "serial", n.tls.Leaf().SerialNumber.String(),
			"not_after", n.tls.Leaf().NotAfter.UTC().Format(time.RFC3339), "client_auth", n.tls.ClientAuth().String())
		tlsMat := n.tls
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "moonmq_tls_certificate_not_after_seconds",
			Help: "When the Kafka listener's certificate in use expires (Unix seconds); follows SIGHUP reloads.",
		}, func() float64 { return float64(tlsMat.Leaf().NotAfter.Unix()) }))
	}

	// Bind the Kafka port before the data directory is touched: a start
	// that cannot listen (a bad address, a port in use) must not leave a
	// fresh data directory and cluster id behind. Connections made while
	// storage recovers wait in the listen backlog.
	if cfg.Listener == nil {
		if cfg.Listener, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("kafka listener: %w", err)
		}
	}
	kln := cfg.Listener
	// The cluster port too: a voter that cannot listen must fail before it
	// bootstraps a raft directory.
	cluster := cfg.Cluster.withDefaults(cfg.NodeID)
	var cln net.Listener
	if cluster.Clustered() {
		if cln, err = net.Listen("tcp", cluster.ClusterListen); err != nil {
			return nil, fmt.Errorf("cluster-listen: %w", err)
		}
		n.closers = append(n.closers, func() { cln.Close() }) // the controller closes it too; twice is harmless
	}

	// A partition the healer brings back is given its role by the
	// reconciler, made below (a partition healed before it exists was
	// offline at start, and the first image hosts it).
	var healed atomic.Pointer[reconciler]
	fds := planDescriptors(cfg.MaxConnections)
	// The log cleaner exists before the partitions: their truncation and
	// deletion pause it (replica.Options.Cleaner). Its threads start once
	// the partitions are open.
	cm, err := cleaner.New(cfg.cleanerOptions())
	if err != nil {
		return nil, err
	}
	b, err := replica.Open(replica.Options{DataDir: cfg.DataDir, Logger: n.log, Cleaner: cm,
		RetentionCheckInterval: cfg.RetentionCheckInterval, GroupCommitWindow: cfg.GroupCommitWindow, Clock: cfg.Clock, OnFsync: storage.ObserveFsync,
		// Each transaction waits for three rounds on its __transaction_state
		// partition one after another: no window there.
		NoGroupCommitWindow: func(topic string) bool { return topic == txncoord.Topic },
		Replicated:          cluster.Clustered(), FS: cfg.partitionFS,
		OnOnline: func(tp replica.TopicPartition) {
			if rec := healed.Load(); rec != nil {
				rec.rehost(tp)
			}
		},
		FDLimit: fds.limit, FDReserve: fds.reserve, Files: log.NewFileCache(fds.fileCache), FileCacheCapacity: fds.fileCache})
	if err != nil {
		return nil, err
	}
	n.broker = b
	n.closers = append(n.closers, func() {
		// Flushes, fsyncs and checkpoints every partition.
		if err := b.Close(); err != nil {
			n.log.Error("closing partitions", "err", err)
		}
	})
	reg.MustRegister(httpapi.NewPartitionCollector(b))
	if err := cm.Start(cleanerSource(b)); err != nil {
		return nil, err
	}
	n.cleaner = cm
	// Closed before the partitions (closers run backwards): a cleaning in
	// progress is cancelled, leaving its log whole, before the logs close.
	n.closers = append(n.closers, func() { cm.Close() })
	reg.MustRegister(httpapi.NewCleanerCollector(cm))

	// The broker registers the address clients reach it at; the Kafka
	// listener (below) logs the warning a wildcard address deserves.
	advHost, advPort, err := kafka.AdvertisedAddress(cfg.Advertise, kln.Addr(), nil)
	if err != nil {
		return nil, err
	}
	copts := controller.Options{
		Dir: filepath.Join(cfg.DataDir, "meta"), NodeID: cfg.NodeID, Logger: n.log,
		Host: advHost, Port: advPort, Rack: cluster.Rack,
		DefaultReplicationFactor: cluster.DefaultReplicationFactor,
		Incarnation:              controller.NewIncarnation(),
	}
	if cluster.Clustered() {
		ms, err := membership.Open(ctx, membership.Options{NodeID: cfg.NodeID, Incarnation: copts.Incarnation,
			BindAddr: cluster.GossipListen, Join: cluster.Join, Logger: n.log, SecretKey: cfg.GossipKey})
		if err != nil {
			return nil, fmt.Errorf("gossip-listen: %w", err)
		}
		n.members = ms
		n.closers = append(n.closers, func() { ms.Close() })
		for _, p := range cluster.Peers {
			copts.Peers = append(copts.Peers, controller.Peer{ID: p.ID, Addr: p.Addr})
		}
		copts.ClusterListener, copts.Liveness, copts.SessionTimeout = cln, ms, cluster.SessionTimeout
		if n.tls != nil {
			// A secured cluster stays secured inside: Raft and the
			// controller RPC run over TLS, and a peer must present a
			// certificate the client CA verifies (validateSecurity
			// requires one) for a broker (clusterPeerAllowed).
			copts.ClusterListener = tls.NewListener(cln, n.tls.PeerServerConfigFor(n.clusterPeerAllowed))
			copts.ClusterDial = n.tls.Dial
		}
	}
	ctrl, err := controller.Open(ctx, copts)
	if err != nil {
		return nil, err
	}
	n.ctrl = ctrl
	n.closers = append(n.closers, func() { ctrl.Close() })
	// The reconciler hosts what the metadata names, off Raft's apply path.
	// The node serves only once it has hosted what the metadata said at
	// start, as a Kafka broker waits for its first metadata publish before
	// it takes requests: the group coordinator needs the offsets
	// partitions, and clients connecting meanwhile wait in the backlog.
	rec := newReconciler(ctrl, b, kmetrics, n.log)
	rec.configsChanged = cm.Wake
	n.rec = rec
	healed.Store(rec)
	if cluster.Clustered() {
		fetcher, err := peer.NewFetcher(peer.FetcherOptions{NodeID: cfg.NodeID, Logger: n.log.With("component", "fetcher"),
			Clock: cfg.Clock, Backoff: followerBackoff, Dial: n.peerDial()})
		if err != nil {
			return nil, err
		}
		rec.repl = newReplicator(cfg.NodeID, ctrl, b, fetcher, cfg.Clock, n.log)
		rec.repl.start()
		// Closed before the partitions (closers run backwards): no fetch
		// appends to a closed log.
		n.closers = append(n.closers, rec.repl.close)
	}
	rec.start()
	n.closers = append(n.closers, rec.close)
	n.startIndex = ctrl.AppliedIndex()
	if err := rec.wait(ctx, n.startIndex); err != nil {
		return nil, fmt.Errorf("host the partitions the metadata names: %w", err)
	}
	if err := rec.startErr(); err != nil {
		return nil, err
	}
	groups, err := startGroups(cfg.Groups, cfg.ResetOffsetsTopic, ctrl, rec, b, n.log)
	if err != nil {
		return nil, err
	}
	n.groups = groups
	n.closers = append(n.closers, func() { groups.Close() })
	links := &txnLinks{nodeID: cfg.NodeID, ctrl: ctrl, log: n.log,
		caller: peer.NewCaller(peer.CallerOptions{NodeID: cfg.NodeID, Logger: n.log.With("component", "txn-rpc"), Dial: n.peerDial()})}
	n.closers = append(n.closers, func() { _ = links.caller.Close() })
	tcfg := cfg.Txns
	if tcfg.Logger == nil {
		tcfg.Logger = n.log
	}
	txns, err := newTxns(tcfg, ctrl, b, links)
	if err != nil {
		return nil, err
	}
	n.txns = txns
	rec.attachTxns(txns)
	n.closers = append(n.closers, txns.Close)
	n.ready = make(chan struct{})
	readyCtx, stopReady := context.WithCancel(context.Background())
	n.closers = append(n.closers, stopReady)
	// The reconciler is past startIndex already (waited above): only the
	// coordinator's replay is left.
	go closeWhenLoaded(readyCtx, n.ready, ctrl.Ready(), groups.Loaded())

	ko := cfg.kafkaOptions(kln, kmetrics, groups, txns, links)
	// DescribeLogDirs reports each compacted partition's cleaning state,
	// for the toolkit (MQL's DESCRIBE TOPIC, moonmq top).
	ko.Cleaner = cm
	if err := saslCredentials(&ko.Auth, ctrl, cfg.DataDir); err != nil {
		return nil, err
	}
	handedOver = true
	ko.Auth.TLS = n.tls
	ko.Authz = cfg.kafkaAuthz(ctrl)
	if ko.Authz.Enabled {
		ko.Authz.SuperUsers = append(slices.Clone(ko.Authz.SuperUsers), n.brokerPrincipals()...)
		n.log.Info("ACLs are enforced on the Kafka listener", "superusers", ko.Authz.SuperUsers,
			"allow_everyone_if_no_acl_found", cfg.Authz.AllowEveryoneIfNoACL)
	}
	if ko.Quotas.Source == nil {
		// The quotas AlterClientQuotas stores in the metadata, which every
		// node of the cluster has: each node enforces them for its own
		// connections (Kafka's quotas are per broker too).
		ko.Quotas.Source = ctrl.ClientQuotas
	}
	ks, err := kafka.Listen(ko, ctrl, b)
	if err != nil {
		return nil, err
	}
	links.local.Store(ks)
	n.kafka = ks
	n.closers = append(n.closers, func() { ks.Close() })
	go func() {
		// A clustered node takes requests only once it has registered and
		// caught up with the metadata the active controller had then (a
		// Kafka broker waits for its first metadata publish too): what it
		// applied locally before may be stale, and a replica that still
		// believes it leads in an old epoch must not answer a produce
		// (acks=1 needs only its own fsync). Clients wait in the backlog
		// meanwhile. A single node's controller is ready before Open gets
		// here.
		select {
		case <-ctrl.Ready():
		case <-readyCtx.Done():
			n.serveErr <- nil
			return
		}
		// Bootstrap users exist before the first client is served, so
		// a client started with the node can log in at once.
		users := cfg.BootstrapUsers
		if ib := cfg.InterBroker; ib.User != "" && !slices.ContainsFunc(users, func(u BootstrapUser) bool { return u.Name == ib.User }) {
			users = append(slices.Clone(users), BootstrapUser{Name: ib.User, Password: ib.Password})
		}
		if err := bootstrapUsers(readyCtx, ctrl, users, n.log); err != nil {
			n.log.Error("could not create the bootstrap users; they cannot log in", "err", err)
		}
		n.serveErr <- ks.Serve()
	}()

	listeners := httpapi.Listeners{Kafka: ks.Addr().String(), Advertised: ks.Advertised()}
	if n.http != nil {
		listeners.HTTP = n.http.Addr().String()
	}
	statsFn := func() *httpapi.Stats {
		topics := httpapi.TopicStatsOf(b)
		addReplication(topics, rec.reconciledTopics(), cfg.NodeID)
		httpapi.AddCompaction(topics, cm)
		return &httpapi.Stats{
			Version: cfg.Version, NodeID: cfg.NodeID, StartedAt: n.start,
			UptimeSeconds: time.Since(n.start).Seconds(), Listeners: listeners,
			Connections: ks.Connections(), Topics: topics, Groups: groupStatsOf(groups, b),
			Cluster: n.clusterStats(), Transactions: transactionStatsOf(txns),
			Cleaner: httpapi.CleanerStatsOf(cm),
		}
	}
	stats.Store(&statsFn)
	reg.MustRegister(httpapi.NewGroupCollector(func() []httpapi.GroupStats { return groupStatsOf(groups, b) }))
	reg.MustRegister(httpapi.NewClusterCollector(n.clusterStats))
	reg.MustRegister(httpapi.NewTransactionCollector(func() *httpapi.TransactionStats { return transactionStatsOf(txns) }))
	if n.http != nil {
		n.http.SetReadiness(func() (bool, string) {
			return readiness(n.shuttingDown.Load(), errors.Join(n.clusterErr(), n.reconcileErr()), groups.Ready(), b.PartitionStates(), ks.AcceptError())
		})
	}
	// One line sums up the start; each partition's own opening is logged
	// at DEBUG.
	parts := summarizePartitions(b.PartitionStates())
	n.log.Info("moonmq serving", "kafka", listeners.Kafka, "advertised", listeners.Advertised,
		"http", listeners.HTTP, "data", cfg.DataDir, "node_id", cfg.NodeID, "cluster_id", ctrl.ClusterID(), "version", cfg.Version,
		"topics", len(ctrl.Topics()), "partitions", parts.total, "recovered_unclean", parts.unclean,
		"offline", parts.offline, "damaged", parts.damaged,
		"startup", time.Since(n.start).Round(time.Millisecond))
	return n, nil
}

// The gossip tells the controller which process of a broker it hears from.
var _ controller.IncarnationLiveness = (*membership.Membership)(nil)

// Ready is closed once the node serves everything: storage and metadata
// are open when Open returns, the reconciler has hosted what the metadata
// said at start, and the group coordinator has replayed
// __consumer_offsets. (/readyz also reports offline partitions, which can
// come and go.)
func (n *Node) Ready() <-chan struct{} { return n.ready }

// closeWhenLoaded closes ready once every one of loaded is closed, unless
// ctx ends first (the node closed). Open calls it only after the
// reconciler hosted what the metadata said at start.
func closeWhenLoaded(ctx context.Context, ready chan<- struct{}, loaded ...<-chan struct{}) {
	for _, l := range loaded {
		select {
		case <-l:
		case <-ctx.Done():
			return
		}
	}
	close(ready)
}

// clusterErr says why the node has not joined the cluster yet: its
// registration is not committed or its metadata not caught up with the
// active controller's (no quorum yet, while the other voters start).
func (n *Node) clusterErr() error {
	select {
	case <-n.ctrl.Ready():
		return nil
	default:
		return fmt.Errorf("joining the cluster: waiting for a controller quorum of --peers and this broker's registration")
	}
}

// reconcileErr says why the node has not hosted what the metadata said at
// start, or nil once it has.
func (n *Node) reconcileErr() error {
	if got := n.rec.reconciled(); got < n.startIndex {
		return fmt.Errorf("metadata not applied yet: hosted up to index %d of %d", got, n.startIndex)
	}
	return nil
}

// validateSecurity checks the security settings' combinations (the files
// are read by Open).
func (c Config) validateSecurity() error {
	p, err := kafka.ParseSecurityProtocol(string(c.SecurityProtocol))
	if err != nil {
		return fmt.Errorf("security-protocol %w", err)
	}
	if p.TLS() {
		if err := c.TLS.Validate(); err != nil {
			return err
		}
		if c.Cluster.Clustered() && c.TLS.ClientCAFile == "" {
			return errors.New("a cluster with TLS needs tls-client-ca: the nodes verify each other's certificates " +
				"with it (Raft and the controller RPC require one, whatever tls-client-auth says for Kafka clients)")
		}
		return nil
	}
	if c.TLS != (auth.TLSOptions{}) {
		return fmt.Errorf("tls-cert, tls-key, tls-client-ca, tls-client-auth and tls-principal-mapping apply to the SSL "+
			"and SASL_SSL security protocols, not %s: set --security-protocol SSL or SASL_SSL, or drop them", p)
	}
	return nil
}

// ReloadTLS re-reads the Kafka listener's certificate, key and client CA
// files (SIGHUP): the next handshake uses them, open connections keep
// theirs. A bad file keeps the material in use; the error names it.
func (n *Node) ReloadTLS() error {
	if n.tls == nil {
		return errors.New("the Kafka listener does not use TLS (security-protocol PLAINTEXT or SASL_PLAINTEXT)")
	}
	return n.tls.Reload()
}

// TLS is the Kafka listener's TLS material, nil without TLS.
func (n *Node) TLS() *auth.TLS { return n.tls }

// Addr is the Kafka listener's bound address.
func (n *Node) Addr() net.Addr { return n.kafka.Addr() }

// Kafka is the node's Kafka listener, for tests and embedders that watch
// it (net/kafka's tests read its budgets); the node owns it: Shutdown and
// Close stop it.
func (n *Node) Kafka() *kafka.Server { return n.kafka }

// HTTPAddr is the HTTP listener's bound address, or nil without one.
func (n *Node) HTTPAddr() net.Addr {
	if n.http == nil {
		return nil
	}
	return n.http.Addr()
}

// Stopped delivers why the Kafka listener stopped serving on its own (it
// does not on a Shutdown or Close).
func (n *Node) Stopped() <-chan error { return n.serveErr }

// Draining marks the node as leaving: /readyz answers 503 from now on while
// everything keeps serving (a load balancer's grace before Shutdown).
func (n *Node) Draining() { n.shuttingDown.Store(true) }

// Shutdown stops gracefully: /readyz turns 503, the group coordinator
// answers parked joins, the listener closes and connections finish what
// they read (until ctx ends), then every partition is flushed, fsynced and
// checkpointed and the metadata store closed. HTTP goes last.
func (n *Node) Shutdown(ctx context.Context) error {
	n.Draining()
	n.handOver(ctx)
	// Parked JoinGroup/SyncGroup requests can wait minutes for a rebalance;
	// closing the coordinator first answers them (COORDINATOR_NOT_AVAILABLE,
	// so clients find the coordinator again after the restart).
	_ = n.groups.Close()
	var err error
	if serr := n.kafka.Shutdown(ctx); serr != nil {
		err = fmt.Errorf("in-flight requests abandoned at shutdown: %w", serr)
	}
	n.closeAll()
	return err
}

// Close stops at once: connections are closed with their requests.
func (n *Node) Close() error {
	n.closeAll()
	return nil
}

func (n *Node) closeAll() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
	n.closers = nil
}
