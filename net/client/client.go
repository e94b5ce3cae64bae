// Package client is MoonMQ's facade over franz-go (kgo, kadm) for the
// toolkit: the MQL console, the `moonmq top` dashboard and the bench tool.
// It speaks only the Kafka protocol, so it works against any Kafka-compatible
// cluster, and it never imports anything under engine/.
//
// What it owns and guarantees:
//   - One long-lived kgo client per Client, used for admin requests (through
//     kadm) and for Produce. Reads and Consume open their own short-lived
//     consumer clients, so a read never disturbs another and Close of the
//     Client never strands a consumer. A group Membership (JoinGroup) and a
//     Transaction (BeginTransaction) each own a kgo client too, which their
//     owner ends with Leave, Commit or Abort.
//   - Every kgo client of the toolkit, including the bench's (NewKgo), is
//     configured here from Options, so seeds, dialing and timeouts are
//     handled in one place. A Client does not expose its kgo or kadm
//     client: an operation the toolkit needs is added to this package, so
//     mql and tui never depend on franz-go (internal/archtest checks it).
//   - Every call is bounded: admin and produce calls by Options.RequestTimeout
//     (or the caller's earlier deadline); Read by the end offsets it snapshots
//     before reading, so it returns on a quiet topic; Consume by its context.
//   - Every failure is an *Error that names the operation and resource, keeps
//     the Kafka error code (errors.Is(err, kerr.X) works), matches this
//     package's sentinel classes (ErrNotFound, ...), and can be turned into
//     a sentence with Explain.
//   - Results are returned sorted (topics by name, partitions by number,
//     groups by name) so renderers are deterministic.
//   - Security (auth.go) applies to every kgo client of a Client: TLS with
//     a CA and client certificate, SASL PLAIN and SCRAM-SHA-256/512, and
//     SCRAM-SHA-x-PLUS with tls-server-end-point channel binding
//     (scramplus.go), offered first over TLS and fallen back from when the
//     broker lacks it. Passwords appear in no error, log or String(). The
//     toolkit's commands take the same flags (flags.go) and Kafka client
//     properties files (clientconfig.go).
package client

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults for Options.
const (
	DefaultClientID       = "moonmq-client"
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 15 * time.Second
)

// Options configures Dial.
type Options struct {
	// Addr is one or more seed brokers, "host:port[,host:port...]".
	// Required.
	Addr string
	// ClientID is sent to the broker with every request (it shows up in
	// broker logs and quotas). Default DefaultClientID.
	ClientID string
	// DialTimeout bounds establishing a connection. Default 5s.
	DialTimeout time.Duration
	// RequestTimeout bounds every admin or produce call made through the
	// Client (unless the caller's context has an earlier deadline), and is
	// the broker-side timeout sent with CreateTopics and the like.
	// Default 15s.
	RequestTimeout time.Duration
	// Logger receives franz-go's internal logs at Warn and above (Debug if
	// the logger enables it). Default: discard.
	Logger *slog.Logger

	// Security is TLS and SASL (auth.go). The zero value is PLAINTEXT.
	Security Security

	// sec are the kgo options Security yields (dialer, SASL), built once
	// by prepare so files are read once and every kgo client of a Client
	// shares one record of peer certificates.
	sec []kgo.Opt
}

// EnsureDefaults fills zero fields with defaults.
func (o *Options) EnsureDefaults() {
	o.Addr = strings.TrimSpace(o.Addr)
	if o.ClientID == "" {
		o.ClientID = DefaultClientID
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
}

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	if len(o.seeds()) == 0 {
		return argError("no broker address (want host:port)")
	}
	for _, s := range o.seeds() {
		if !strings.Contains(s, ":") {
			return argError(fmt.Sprintf("broker address %q has no port (want host:port)", s))
		}
	}
	return o.Security.Validate()
}

// prepare reads the TLS files and builds the security options; over TLS
// with SCRAM and no mechanism named, it first asks a broker whether it
// offers channel binding (saslprobe.go).
func (o *Options) prepare() error {
	if err := o.Security.Validate(); err != nil {
		return err
	}
	cfg, err := o.Security.TLSConfig()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if s := o.Security; cfg != nil && s.UsesSASL() && s.Mechanism == "" {
		ctx, cancel := context.WithTimeout(context.Background(), min(o.DialTimeout, probeTimeout))
		offered, ok := probeOffers(ctx, o.seeds(), tlsDialer(cfg, o.DialTimeout, &peerCerts{}), MechScramSHA256Plus)
		cancel()
		o.Security.noPlus = ok && !offered
	}
	o.sec = o.Security.kgoOpts(cfg, o.DialTimeout)
	return nil
}

// argError is an argument refused before anything is sent. Its message is
// the reason alone, ready to follow "cannot connect to ...: " or "--addr:
// ", and it matches ErrInvalidArgument.
type argError string

func (e argError) Error() string        { return string(e) }
func (e argError) Is(target error) bool { return target == ErrInvalidArgument }

func (o Options) seeds() []string {
	var out []string
	for _, s := range strings.Split(o.Addr, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Client is a connection to a Kafka-compatible cluster. It is safe for
// concurrent use. Close it when done.
type Client struct {
	opts Options
	cl   *kgo.Client
	adm  *kadm.Client

	closeOnce sync.Once
	closed    chan struct{}
}

// Dial connects to the cluster and verifies that a broker answers (a
// Metadata request after the ApiVersions handshake). It returns an error
// matching ErrUnreachable when no broker answers within DialTimeout +
// RequestTimeout (or ctx's deadline).
func Dial(ctx context.Context, opts Options) (*Client, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := opts.prepare(); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts.baseKgoOpts(
		kgo.RecordPartitioner(newPartitioner()),
		// The facade produces small interactive batches: send them at once.
		kgo.ProducerLinger(0),
		// No RecordDeliveryTimeout: franz-go measures it from the record
		// timestamp, which callers may set in the past. Produce is
		// bounded by its context instead.
		kgo.UnknownTopicRetries(1),
	)...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w: %w", opts.Addr, ErrInvalidArgument, err)
	}
	c := &Client{opts: opts, cl: cl, adm: kadm.NewClient(cl), closed: make(chan struct{})}
	c.adm.SetTimeoutMillis(int32(opts.RequestTimeout / time.Millisecond))

	pctx, cancel := context.WithTimeout(ctx, opts.DialTimeout+opts.RequestTimeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return nil, dialError(opts, err)
	}
	return c, nil
}

// baseKgoOpts are the options shared by every kgo client this Client opens.
func (o Options) baseKgoOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.seeds()...),
		kgo.ClientID(o.ClientID),
		kgo.DialTimeout(o.DialTimeout),
		kgo.RetryTimeout(o.RequestTimeout),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	opts = append(opts, o.sec...)
	if o.Logger != nil {
		opts = append(opts, kgo.WithLogger(slogAdapter{o.Logger}))
	}
	return append(opts, extra...)
}

// NewKgo returns a franz-go client set up from opts exactly as a Client
// sets up its own (seed brokers, client ID, dial and retry timeouts,
// logger), with extra applied last so it can override any of them. It is
// for tools whose hot path needs kgo itself (the bench); everything else
// should use a Client. It does not contact a broker (kgo connects lazily:
// Ping to check one answers), and the caller closes it.
func NewKgo(opts Options, extra ...kgo.Opt) (*kgo.Client, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := opts.prepare(); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts.baseKgoOpts(extra...)...)
	if err != nil {
		return nil, fmt.Errorf("new client for %s: %w: %w", opts.Addr, ErrInvalidArgument, err)
	}
	return cl, nil
}

// Principal is whom the broker sees this Client as, by Kafka's default
// rules (Security.Principal): "User:alice", the client certificate's
// "User:<CN>", or "User:ANONYMOUS".
func (c *Client) Principal() string { return c.opts.Security.Principal() }

// Addr returns the seed address the Client was dialed with.
func (c *Client) Addr() string { return c.opts.Addr }

// Options returns the effective options (with defaults applied).
func (c *Client) Options() Options { return c.opts }

// Close releases the connection. It is idempotent; calls after Close fail
// with ErrClosed.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.cl.Close()
	})
}

// call derives the context for one bounded request and checks the Client is
// open.
func (c *Client) call(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := c.checkOpen(); err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	return cctx, cancel, nil
}

// checkOpen returns ErrClosed after Close.
func (c *Client) checkOpen() error {
	select {
	case <-c.closed:
		return ErrClosed
	default:
		return nil
	}
}

// slogAdapter routes franz-go logs to slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case a.l.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelDebug
	case a.l.Enabled(ctx, slog.LevelInfo):
		// franz-go's Info level is chatty (every connection); keep it
		// for callers that ask for debug.
		return kgo.LogLevelWarn
	case a.l.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	default:
		return kgo.LogLevelError
	}
}

func (a slogAdapter) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var l slog.Level
	switch level {
	case kgo.LogLevelError:
		l = slog.LevelError
	case kgo.LogLevelWarn:
		l = slog.LevelWarn
	case kgo.LogLevelInfo:
		l = slog.LevelInfo
	default:
		l = slog.LevelDebug
	}
	a.l.Log(context.Background(), l, "kgo: "+msg, keyvals...)
}
