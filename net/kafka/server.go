// Package kafka is MoonMQ's Kafka protocol front end: the listener, the
// per-connection read and write loops, request decoding with franz-go's kmsg,
// one handler per API, and the single place where engine and controller
// errors become Kafka error codes. Handlers translate: the rules of a read
// (isolation level, leader-epoch checks, offsets reported) are the
// partition's (engine/replica), not theirs.
//
// Invariants: every length read from the socket is bounded before
// allocation; a request that cannot be decoded closes only its connection;
// responses on a connection are written in request order (the Kafka rule,
// kept by the connection's outbox) while slow requests never stall the read
// loop: long-poll fetches and group joins are parked in a goroutine, and
// acks=1/all produces are answered from the log's durability callbacks
// (answerLater) once their fsync is done; acks=all on a replicated leader
// waits for the ISR in one goroutine per waiting partition, ended when the
// request is answered or times out. A client over one of its quotas
// (quota.go) is answered at once with a throttle time, and its connection
// reads nothing more until that time has passed (KIP-219).
package kafka

import (
	"context"
	"errors"
	"fmt"
	"github.com/twmb/franz-go/pkg/kmsg"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/cleaner"
	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/engine/quota"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/txncoord"
	"github.com/moonmq/moonmq/net/auth"
)

// Options configures a Server.
type Options struct {
	// Listen is the address to bind (host:port; port 0 picks one).
	Listen string
	// Listener, when set, is used instead of listening on Listen: serve
	// binds the port before it touches the data directory, so a start
	// that cannot listen leaves nothing behind. The server owns it.
	Listener net.Listener
	// Advertise is the host:port returned in Metadata; empty means the bound
	// address (with 0.0.0.0/:: replaced by 127.0.0.1... only a guess, so
	// operators set --advertise when exposing the port).
	Advertise string
	NodeID    int32
	// Clustered is set on a node with peers (--peers): the metadata is the
	// cluster's, so Metadata answers each partition's leader and offline
	// replicas as the controller has them (its Offline, and the replicas
	// of fenced brokers) rather than from this node's own replicas, which
	// is what a single node (one replica of everything) answers.
	Clustered bool
	// MaxRequestSize bounds one request frame (Kafka's socket.request.max.bytes).
	MaxRequestSize int32
	// AutoCreateTopics creates unknown topics on Metadata/Produce (Kafka's
	// auto.create.topics.enable). Off by default.
	AutoCreateTopics  bool
	DefaultPartitions int32
	// MaxInFlight bounds the pipelined requests per connection that are read
	// but not yet answered.
	MaxInFlight int
	// MaxQueuedRequestBytes bounds the request frames being received,
	// decoded or handled at once, across connections (Kafka's
	// queued.max.request.bytes); a frame is charged as its bytes arrive, and
	// readers wait when it is used up.
	MaxQueuedRequestBytes int64
	// MaxQueuedResponseBytes bounds the fetched record bytes held for
	// replies not yet written, across connections; ConnResponseBytes bounds
	// them per connection, which also stops reading a connection's
	// requests while it is over (its client is not reading replies).
	// Fetches answer with what fits, always at least one batch.
	MaxQueuedResponseBytes int64
	ConnResponseBytes      int64
	// ConnectionsMaxIdle closes connections idle that long: no request
	// read, no reply owed or written (Kafka's connections.max.idle.ms).
	// Zero keeps idle connections open.
	ConnectionsMaxIdle time.Duration
	// RequestTimeout closes a connection whose started request stops
	// arriving, or whose reply the client stops reading, for that long.
	RequestTimeout time.Duration
	// FetchMaxBytes caps the record bytes of one fetch response, whatever
	// the client asks for (Kafka's fetch.max.bytes).
	FetchMaxBytes int
	// MaxConnections and MaxConnectionsPerIP refuse connections beyond them
	// (0 = unlimited); a refused connection is logged and counted.
	MaxConnections      int
	MaxConnectionsPerIP int
	// Metrics receives request, traffic and connection metrics; nil creates
	// an unregistered set.
	Metrics *Metrics
	Logger  *slog.Logger
	Version string
	// Groups is the group coordinator; nil answers every group API with
	// COORDINATOR_NOT_AVAILABLE.
	Groups *group.Coordinator
	// Txns is the transaction coordinator; nil refuses transactional ids
	// (InitProducerId) and answers every other transaction API with
	// COORDINATOR_NOT_AVAILABLE.
	Txns *txncoord.Coordinator
	// Verifier asks transactional ids' coordinators, on this node or
	// another, whether a partition is in a producer's transaction before
	// a transactional write opens one there (KIP-890). Required with Txns.
	Verifier Verifier
	// TransactionVersion is the cluster's transaction version (KIP-890):
	// 2 offers the part 2 protocol (Produce v12, TxnOffsetCommit v5,
	// EndTxn v5) and the transaction.version feature clients choose it
	// by; 0 and 1 offer the part 1 protocol only.
	TransactionVersion int16
	// Auth says how connections are secured and authenticated
	// (security.go, sasl.go): the security protocol, its TLS material,
	// the SASL mechanisms.
	Auth AuthOptions
	// Clock runs the timers of requests that wait on the partitions: the
	// produce durability timeout and the long-poll fetch's MaxWait
	// (default clock.Real), and is the time of the SASL lockout. Socket
	// deadlines stay on the machine's clock.
	Clock clock.Clock
	// Quotas enforces client quotas (quota.go); the zero value none.
	Quotas QuotaOptions
	// Authz configures ACL checks (authz.go); off by default.
	Authz AuthzOptions
	// Cleaner is the log cleaner's view of the compacted partitions
	// hosted here (the node passes its *cleaner.Manager), which
	// DescribeLogDirs reports (logdirs.go); nil reports none.
	Cleaner CleanerStats
}

// CleanerStats is what DescribeLogDirs needs of the log cleaner: its
// state of every compacted partition it has looked at.
type CleanerStats interface {
	PartitionStats() []cleaner.PartitionStats
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:9092"
	}
	if o.MaxRequestSize <= 0 {
		o.MaxRequestSize = 100 << 20
	}
	if o.DefaultPartitions <= 0 {
		o.DefaultPartitions = 1
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 64
	}
	if o.FetchMaxBytes <= 0 {
		o.FetchMaxBytes = 55 << 20
	}
	if o.MaxQueuedRequestBytes <= 0 {
		o.MaxQueuedRequestBytes = 512 << 20
	}
	o.MaxQueuedRequestBytes = max(o.MaxQueuedRequestBytes, int64(o.MaxRequestSize))
	if o.MaxQueuedResponseBytes <= 0 {
		o.MaxQueuedResponseBytes = 1 << 30
	}
	if o.ConnResponseBytes <= 0 {
		o.ConnResponseBytes = int64(o.FetchMaxBytes) + 8<<20
	}
	if o.ConnectionsMaxIdle < 0 {
		o.ConnectionsMaxIdle = 0
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if p, err := ParseSecurityProtocol(string(o.Auth.SecurityProtocol)); err == nil {
		o.Auth.SecurityProtocol = p // "" is PLAINTEXT; any case; Validate refuses the rest
	}
	o.Auth.ensureSASLDefaults()
}

// Validate reports a misconfiguration.
func (o *Options) Validate() error {
	switch {
	case o.MaxConnections < 0:
		return fmt.Errorf("kafka: max connections %d must not be negative", o.MaxConnections)
	case o.MaxConnectionsPerIP < 0:
		return fmt.Errorf("kafka: max connections per IP %d must not be negative", o.MaxConnectionsPerIP)
	}
	if err := o.Quotas.validate(); err != nil {
		return err
	}
	if err := o.Auth.validate(); err != nil {
		return err
	}
	if o.Advertise != "" {
		_, port, err := net.SplitHostPort(o.Advertise)
		if err != nil {
			return fmt.Errorf("advertise %q: want host:port: %v", o.Advertise, err)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return fmt.Errorf("advertise %q: the port must be 0 to 65535", o.Advertise)
		}
	}
	return nil
}

// Metadata is what the handlers need from the cluster metadata, in
// cluster/metadata's types so the front end does not depend on how the
// metadata is replicated; the node passes its controller.
type Metadata interface {
	Topic(name string) (metadata.Topic, bool)
	Topics() []metadata.Topic
	CreateTopic(ctx context.Context, name string, partitions int32, replicationFactor int16, configs map[string]string, validateOnly bool) (metadata.Topic, error)
	DeleteTopic(ctx context.Context, name string) (metadata.Topic, error)
	CreatePartitions(ctx context.Context, name string, total int32, validateOnly bool) (metadata.Topic, error)
	// CreateTopicAssigned and CreatePartitionsAssigned take the replicas
	// a client chose for each (new) partition.
	CreateTopicAssigned(ctx context.Context, name string, assignment [][]int32, configs map[string]string, validateOnly bool) (metadata.Topic, error)
	CreatePartitionsAssigned(ctx context.Context, name string, total int32, assignment [][]int32, validateOnly bool) (metadata.Topic, error)
	AlterConfigs(ctx context.Context, name string, ops []metadata.ConfigOp, validateOnly bool) (metadata.Topic, error)
	ReplaceConfigs(ctx context.Context, name string, configs map[string]string, validateOnly bool) (metadata.Topic, error)
	AllocateProducerIDs(ctx context.Context, n int64) (int64, error)
	ClusterID() string
	// Brokers are the registered brokers, sorted by id; Metadata and
	// DescribeCluster list the ones not fenced.
	Brokers() []metadata.Broker
	// ControllerID is the active controller's node id, -1 while there is
	// none (an election, or no quorum).
	ControllerID() int32
	// SecurityMetadata: ACLs, SCRAM credentials, client quotas (acls.go).
	SecurityMetadata
}

// Server accepts Kafka connections.
type Server struct {
	opts   Options
	meta   Metadata
	broker *replica.Manager
	log    *slog.Logger

	ln          net.Listener
	advHost     string
	advPort     int32
	pids        txncoord.IDBlocks // idempotent producers' ids
	ctx         context.Context
	cancel      context.CancelFunc
	draining    chan struct{} // closed by Shutdown: stop reading, cut long polls short
	drainOnce   sync.Once
	metrics     *Metrics
	parked      sync.WaitGroup        // parked request continuations; waited for by Close
	parkedN     atomic.Int64          // how many are parked now
	budget      *memBudget            // request frames (Options.MaxQueuedRequestBytes)
	respBudget  *memBudget            // fetched data not yet written (Options.MaxQueuedResponseBytes)
	acceptErr   atomic.Pointer[error] // the last accept failure, until one succeeds
	idleChecks  atomic.Int64          // read-loop wake-ups while waiting for a request (tests: no busy loop)
	fetchPasses atomic.Int64          // partition-read passes of fetches (tests: parked fetches do not spin)
	mu          sync.Mutex
	conns       map[*conn]struct{}
	perIP       map[string]int
	wg          sync.WaitGroup // connection goroutines; Shutdown waits for them
	bg          sync.WaitGroup // background work that stops on Close
	closeOnce   sync.Once
	apiKeysOnce sync.Once
	apiKeys     []kmsg.ApiVersionsResponseApiKey // what ApiVersions advertises (apiVersionKeys)

	quotas        *quota.Manager        // nil: no quota enforced (quota.go)
	delayedCloses map[net.Conn]struct{} // refused over their IP's connection rate, closed after the delay

	authz      atomic.Pointer[builtAuthorizer] // the Authorizer of the latest ACLs seen (authz.go)
	authzBuild sync.Mutex                      // held while an Authorizer is built
	// principalOf, set only by tests (export_test.go), names the
	// principal of a new connection, standing in for authentication.
	principalOf atomic.Pointer[func(net.Conn) string]
	sasl        *auth.Server  // nil: the listener does not use SASL
	lockout     *auth.Lockout // nil: no lockout
}

// Listen binds the listener; Serve then accepts on it.
func Listen(opts Options, meta Metadata, b *replica.Manager) (*Server, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		if opts.Listener != nil {
			opts.Listener.Close()
		}
		return nil, err
	}
	saslSrv, lockout, err := opts.Auth.saslServer()
	if err != nil {
		if opts.Listener != nil {
			opts.Listener.Close()
		}
		return nil, err
	}
	ln := opts.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", opts.Listen); err != nil {
			return nil, fmt.Errorf("kafka: listen on %s: %w", opts.Listen, err)
		}
	}
	host, port, err := AdvertisedAddress(opts.Advertise, ln.Addr(), opts.Logger)
	if err != nil {
		ln.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts: opts, meta: meta, broker: b, log: opts.Logger,
		ln: ln, advHost: host, advPort: port,
		ctx: ctx, cancel: cancel, draining: make(chan struct{}),
		conns: make(map[*conn]struct{}), perIP: make(map[string]int),
		metrics: opts.Metrics, budget: newMemBudget(opts.MaxQueuedRequestBytes),
		respBudget: newMemBudget(opts.MaxQueuedResponseBytes),
		quotas:     newQuotas(opts.Quotas), delayedCloses: make(map[net.Conn]struct{}),
		sasl: saslSrv, lockout: lockout,
	}
	s.pids.Reserve = meta.AllocateProducerIDs
	return s, nil
}

// AdvertisedAddress is the host and port clients are told to reach a
// listener bound at bound with --advertise advertise (empty: the bound
// address; port 0: the bound port; a wildcard host: loopback, with a
// warning). The node registers it in the metadata before it listens.
func AdvertisedAddress(advertise string, bound net.Addr, logger *slog.Logger) (string, int32, error) {
	adv := advertise
	if adv == "" {
		adv = bound.String()
	}
	host, portStr, err := net.SplitHostPort(adv)
	if err != nil {
		return "", 0, fmt.Errorf("kafka: advertise address %q: %w", adv, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("kafka: advertise port %q: %w", portStr, err)
	}
	if tcp, ok := bound.(*net.TCPAddr); ok && port == 0 { // ":0" advertised: use the bound port
		port = uint64(tcp.Port)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		// A wildcard bind cannot be dialled by clients; advertise loopback
		// and tell the operator to set --advertise.
		if logger != nil {
			logger.Warn("listening on a wildcard address without --advertise; advertising 127.0.0.1, remote clients need --advertise", "listen", bound.String())
		}
		host = "127.0.0.1"
	}
	return host, int32(port), nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Advertised is the host:port given to clients in Metadata.
func (s *Server) Advertised() string {
	return net.JoinHostPort(s.advHost, strconv.Itoa(int(s.advPort)))
}

// Serve accepts connections until Close. It returns nil after Close.
func (s *Server) Serve() error {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		reclaimAfterSpikes(s.ctx.Done(), reclaimInterval, returnMemory, s.budget, s.respBudget)
	}()
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || s.isDraining() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Anything else (EMFILE, ENFILE, ENOBUFS, timeouts) is a
			// resource problem that may pass: back off and keep serving,
			// and say so in /readyz until an accept works again.
			s.acceptErr.Store(&err)
			s.metrics.connRejects.WithLabelValues(acceptFailureReason(err)).Inc()
			if backoff == 0 {
				s.log.Error("cannot accept connections; retrying", "err", err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
			case <-s.draining:
			}
			continue
		}
		if backoff != 0 {
			s.log.Info("accepting connections again")
			s.acceptErr.Store(nil)
		}
		backoff = 0
		ip := remoteIP(nc)
		if !s.admitConnection(nc, ip) {
			continue
		}
		s.mu.Lock()
		if s.ctx.Err() != nil || s.isDraining() {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		if reason := s.refuse(ip); reason != "" {
			s.mu.Unlock()
			s.metrics.connRejects.WithLabelValues(reason).Inc()
			s.log.Warn("refusing connection", "peer", nc.RemoteAddr().String(), "reason", reason)
			nc.Close()
			continue
		}
		c := newConn(s, nc)
		s.conns[c] = struct{}{}
		s.perIP[ip]++
		s.wg.Add(1)
		s.mu.Unlock()
		s.metrics.connections.Inc()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			if s.perIP[ip]--; s.perIP[ip] <= 0 {
				delete(s.perIP, ip)
			}
			s.mu.Unlock()
			s.metrics.connections.Dec()
		}()
	}
}

func (s *Server) isDraining() bool {
	select {
	case <-s.draining:
		return true
	default:
		return false
	}
}

// refuse says why a new connection from ip must be refused, or "". s.mu is held.
func (s *Server) refuse(ip string) string {
	switch {
	case s.opts.MaxConnections > 0 && len(s.conns) >= s.opts.MaxConnections:
		return rejectMaxConnections
	case s.opts.MaxConnectionsPerIP > 0 && s.perIP[ip] >= s.opts.MaxConnectionsPerIP:
		return rejectMaxConnectionsPerIP
	}
	return ""
}

func remoteIP(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return nc.RemoteAddr().String()
}

// AcceptError is why accepting connections fails right now (out of file
// descriptors, typically), or nil.
func (s *Server) AcceptError() error {
	if p := s.acceptErr.Load(); p != nil {
		return *p
	}
	return nil
}

// acceptFailureReason labels an accept failure for moonmq_connection_rejects_total.
func acceptFailureReason(err error) string {
	switch {
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return rejectOutOfFDs
	default:
		return rejectAcceptError
	}
}

// replicaState is how this node's replica of a partition can serve.
type replicaState int

const (
	replicaOK       replicaState = iota
	replicaFailed                // its log failed an I/O operation: no appends until healed
	replicaUnopened              // it could not be opened at all
)

func (s *Server) replicaState(topic string, partition int32) replicaState {
	p, err := s.broker.Partition(replica.TopicPartition{Topic: topic, Partition: partition})
	switch {
	case errors.Is(err, replica.ErrPartitionOffline):
		return replicaUnopened
	case err == nil && p.Failure() != nil:
		return replicaFailed
	}
	return replicaOK
}

// Connections is the number of open client connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Shutdown stops accepting, lets every connection finish the requests it
// has read (long polls return what they have at once, produces wait for
// their fsync), then closes the connections. Requests not yet read are not
// taken: clients retry them elsewhere or after the restart. If ctx ends
// first, the remaining connections are closed and in-flight requests
// abandoned; Shutdown then returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.drainOnce.Do(func() {
		s.mu.Lock() // Serve checks draining under s.mu, so no connection slips past the loop below
		close(s.draining)
		s.mu.Unlock()
		if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			s.log.Warn("closing listener", "err", err)
		}
		s.mu.Lock()
		for c := range s.conns {
			// Unblock the read loop; it sees draining and stops reading.
			_ = c.nc.SetReadDeadline(time.Now())
		}
		s.mu.Unlock()
	})
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return s.Close()
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
}

// Close stops accepting, closes every connection and waits for their
// goroutines. In-flight requests are abandoned once their connection closes;
// appends already made are durable or not per the log's own rules.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.cancel()
		err := s.ln.Close()
		for c := range s.conns {
			// The TCP connection: an abrupt close sends no TLS
			// close_notify, which could wait on a client not reading.
			c.raw.Close()
		}
		for nc := range s.delayedCloses {
			nc.Close()
		}
		s.mu.Unlock()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			s.log.Warn("closing listener", "err", err)
		}
	})
	s.wg.Wait()
	s.parked.Wait()
	s.bg.Wait()
	return nil
}
