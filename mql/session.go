// Package mql is the MoonMQ query language: its lexer and participle
// grammar (AST with positions), a formatter whose output parses back to the
// same AST, and a Session that executes statements against a broker through
// net/client only, so it works against any Kafka-compatible cluster.
// Results are rendered as aligned tables, JSON (one object per row) or CSV.
//
// Invariants:
//   - The parser is built once at package init; statements are split at ';'
//     and parsed one by one, each keeping its source position.
//   - A statement that parses has also passed validate: ranges, formats and
//     operand types are checked before anything is sent to a broker.
//   - Every broker call is bounded (net/client's request timeout, the
//     snapshot end of a SELECT, a SUBSCRIBE's TIMEOUT/LIMIT or its context).
//   - A lost connection is reported and dropped; the next statement dials
//     again. A failed PRODUCE is never re-sent by the session.
//   - Features the broker lacks (groups, transactions, SCRAM users, ACLs,
//     reassignments) fail with an error matching client.ErrUnsupported that
//     names the missing Kafka API; they never silently succeed.
//
// The REPL lives in mql/repl; the CLI glue in the moonmq main package.
package mql

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/moonmq/moonmq/net/client"
)

// ErrExit is returned by Exec for EXIT and QUIT.
var ErrExit = errors.New("exit")

// ErrNotConnected is returned after DISCONNECT until the next CONNECT.
var ErrNotConnected = errors.New("not connected: use CONNECT 'host:port'")

// Options configures a Session.
type Options struct {
	// Addr is the broker to connect to (host:port[,host:port]).
	Addr string
	// DialTimeout and RequestTimeout are passed to net/client (defaults
	// there).
	DialTimeout, RequestTimeout time.Duration
	// Out receives results. Required.
	Out io.Writer
	// Status receives acknowledgements ("OK topic 'x' created") in the
	// json and csv formats, so that Out carries data rows only and a
	// script's output can be fed to a JSON or CSV reader as is. The CLI
	// passes stderr; nil drops them. In the table format they go to Out.
	Status io.Writer
	// Format is the initial output format.
	Format Format
	// Color enables ANSI styling of tables; set it only for a terminal.
	Color bool
	// Logger receives client logs. Default: discard.
	Logger *slog.Logger
	// ClientID is sent to the broker. Default "moonmq-mql".
	ClientID string
	// Security is TLS and SASL from the command line (--user, --tls,
	// --client-config, ...). A CONNECT without USER, MECHANISM or TLS
	// keeps using it; one with any of them uses only what it says.
	Security client.Security
	// Now is the clock relative timestamps ('5m' ago) count back from.
	// Default time.Now; tests pass a fixed time.
	Now func() time.Time
}

// Session executes statements against one cluster connection, which it
// opens lazily and re-opens after a loss. It also holds the session state
// statements change: the default group, the output format, a joined group
// membership, an open transaction and the isolation of reads. Exec is not safe for concurrent use;
// the completion helpers (TopicNames, GroupNames) are.
type Session struct {
	opts Options
	out  *Renderer

	mu           sync.Mutex // guards cl and addr for the completion helpers
	cl           *client.Client
	addr         string
	sec          client.Security    // of addr: Options.Security or the last CONNECT's
	disconnected bool               // DISCONNECT: do not dial until CONNECT
	apis         *client.BrokerAPIs // cached ApiVersions of cl

	group     string              // USE GROUP
	isolation client.Isolation    // SET ISOLATION
	member    *client.Membership  // JOIN GROUP
	txn       *client.Transaction // BEGIN TRANSACTION
}

// NewSession returns a session; it connects on the first statement that
// needs the broker.
func NewSession(opts Options) *Session {
	if opts.ClientID == "" {
		opts.ClientID = "moonmq-mql"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := NewRenderer(opts.Out, opts.Format, opts.Color)
	r.SetStatus(opts.Status)
	return &Session{opts: opts, out: r, addr: opts.Addr, sec: opts.Security}
}

// Renderer returns the session's renderer (its format follows SET FORMAT).
func (s *Session) Renderer() *Renderer { return s.out }

// Addr returns the address the session connects to.
func (s *Session) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Close ends a joined group membership, aborts an open transaction and
// closes the connection.
func (s *Session) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.txn != nil {
		// Nobody is left to report a failure to; the broker aborts an
		// abandoned transaction at its timeout anyway.
		_ = s.txn.Abort(ctx)
		s.txn = nil
	}
	if s.member != nil {
		s.member.Leave()
		s.member = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl != nil {
		s.cl.Close()
		s.cl = nil
	}
}

// Connect dials now (the REPL does, to print its banner) and returns the
// client.
func (s *Session) Connect(ctx context.Context) (*client.Client, error) { return s.client(ctx) }

func (s *Session) client(ctx context.Context) (*client.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl != nil {
		return s.cl, nil
	}
	if s.disconnected || s.addr == "" {
		return nil, ErrNotConnected
	}
	cl, err := client.Dial(ctx, client.Options{
		Addr: s.addr, ClientID: s.opts.ClientID, DialTimeout: s.opts.DialTimeout,
		RequestTimeout: s.opts.RequestTimeout, Logger: s.opts.Logger, Security: s.sec,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot connect to %s: %s", s.addr, client.Explain(err))
	}
	s.cl, s.apis = cl, nil
	return cl, nil
}

// dropConnection forgets a connection that failed at the transport level,
// so the next statement dials again.
func (s *Session) dropConnection() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl != nil {
		s.cl.Close()
		s.cl = nil
	}
}

// LostConnectionError reports a statement that failed because the broker
// stopped answering. The session has dropped the connection and dials again
// on the next statement.
type LostConnectionError struct {
	Addr string
	// Produce is set when the statement was a PRODUCE: its records may or
	// may not have been written, and they were not re-sent.
	Produce bool
	Err     error
}

func (e *LostConnectionError) Error() string {
	msg := fmt.Sprintf("connection to %s lost: %s; the next statement reconnects", e.Addr, client.Explain(e.Err))
	if e.Produce {
		msg += " (the records may or may not have been written; they were not re-sent)"
	}
	return msg
}

func (e *LostConnectionError) Unwrap() error { return e.Err }

// Exec runs one statement, writing its results to the session's output.
// It returns ErrExit for EXIT/QUIT. Errors are ready to show a person.
func (s *Session) Exec(ctx context.Context, st Statement) error {
	err := s.exec(ctx, st)
	if err == nil || errors.Is(err, ErrExit) {
		return err
	}
	if errors.Is(err, client.ErrUnreachable) && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		s.mu.Lock()
		hadClient := s.cl != nil
		s.mu.Unlock()
		if hadClient {
			s.dropConnection()
			_, isProduce := st.(*Produce)
			return &LostConnectionError{Addr: s.Addr(), Produce: isProduce, Err: err}
		}
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return fmt.Errorf("canceled")
	}
	return err
}

func (s *Session) exec(ctx context.Context, st Statement) error {
	switch st := st.(type) {
	case *Exit:
		return ErrExit
	case *Help:
		s.help(st.Words)
		return nil
	case *SetFormat:
		f, err := ParseFormat(string(st.Format))
		if err != nil {
			return err
		}
		s.out.SetFormat(f)
		s.out.OK("format " + f.String())
		return nil
	case *SetIsolation:
		s.isolation = isolationOf(st.Isolation)
		s.out.OK("isolation " + isolationText(s.isolation))
		return nil
	case *UseGroup:
		s.group = string(st.Group)
		s.out.OK("using group " + quoteRes(s.group))
		return nil
	case *Connect:
		return s.connect(ctx, st)
	case *Disconnect:
		s.Close()
		s.mu.Lock()
		s.disconnected = true
		s.mu.Unlock()
		s.out.OK("disconnected from " + s.Addr())
		return nil
	}
	cl, err := s.client(ctx)
	if err != nil {
		return err
	}
	switch st := st.(type) {
	case *CreateTopic:
		return s.createTopic(ctx, cl, st)
	case *DropTopic:
		return s.dropTopic(ctx, cl, st)
	case *AlterTopic:
		return s.alterTopic(ctx, cl, st)
	case *ShowTopics:
		return s.showTopics(ctx, cl, st)
	case *DescribeTopic:
		return s.describeTopic(ctx, cl, st)
	case *ShowOffsets:
		return s.showOffsets(ctx, cl, st)
	case *Produce:
		return s.produce(ctx, cl, st)
	case *Select:
		t, err := s.query(ctx, cl, st)
		if err != nil {
			return err
		}
		s.out.Table(t)
		return nil
	case *Assert:
		return s.assert(ctx, cl, st)
	case *Fetch:
		return s.fetch(ctx, cl, st)
	case *Subscribe:
		return s.subscribe(ctx, cl, st)
	case *ShowGroups:
		return s.showGroups(ctx, cl, st)
	case *DescribeGroup:
		return s.describeGroup(ctx, cl, st)
	case *JoinGroup:
		return s.joinGroup(ctx, cl, st)
	case *LeaveGroup:
		return s.leaveGroup(st)
	case *CommitOffset:
		return s.commitOffset(ctx, cl, st)
	case *ResetGroup:
		return s.resetGroup(ctx, cl, st)
	case *DropGroup:
		return s.dropGroup(ctx, cl, st)
	case *ShowTransactions:
		return s.showTransactions(ctx, cl, st)
	case *DescribeTransaction:
		return s.describeTransaction(ctx, cl, st)
	case *BeginTxn:
		return s.beginTxn(ctx, cl, st)
	case *CommitTxn:
		return s.endTxn(ctx, true)
	case *AbortTxn:
		return s.endTxn(ctx, false)
	case *CreateUser:
		return s.createUser(ctx, cl, st)
	case *DropUser:
		return s.dropUser(ctx, cl, st)
	case *ShowUsers:
		return s.showUsers(ctx, cl)
	case *Grant:
		return s.grant(ctx, cl, st.Ops, st.Resource, string(st.Principal), true)
	case *Revoke:
		return s.grant(ctx, cl, st.Ops, st.Resource, string(st.Principal), false)
	case *SetQuota:
		return s.setQuota(ctx, cl, st)
	case *ResetQuota:
		return s.resetQuota(ctx, cl, st)
	case *ShowQuotas:
		return s.showQuotas(ctx, cl, st)
	case *ShowAcls:
		return s.showAcls(ctx, cl, st)
	case *ShowBrokers:
		return s.showBrokers(ctx, cl)
	case *ShowCluster:
		return s.showCluster(ctx, cl)
	case *MovePartition:
		return s.movePartition(ctx, cl, st)
	case *ShowReassignments:
		return s.showReassignments(ctx, cl)
	}
	return fmt.Errorf("statement %T is not implemented", st)
}

func (s *Session) connect(ctx context.Context, st *Connect) error {
	addr := strings.TrimSpace(string(st.Addr))
	if addr == "" {
		return errors.New("CONNECT needs an address, like 'localhost:9092'")
	}
	sec, err := connectSecurity(s.opts.Security, st)
	if err != nil {
		return err
	}
	s.Close()
	s.mu.Lock()
	s.addr, s.sec, s.disconnected = addr, sec, false
	s.mu.Unlock()
	cl, err := s.client(ctx)
	if err != nil {
		return err
	}
	info, err := cl.Cluster(ctx)
	if err != nil {
		return err
	}
	s.out.OK(fmt.Sprintf("connected to %s (%s)%s", addr, clusterSummary(info), asPrincipal(sec)))
	return nil
}

// connectSecurity is the security of a CONNECT: the command line's when the
// statement says nothing about it, else exactly what it says. It is checked
// (mechanism, CA file) before the current connection is closed, so a
// mistyped CONNECT leaves the session as it was.
func connectSecurity(cmdline client.Security, st *Connect) (client.Security, error) {
	if st.User == nil && st.Mechanism == nil && !st.TLS {
		return cmdline, nil
	}
	var sec client.Security
	sec.SetLabel("User", "USER")
	sec.SetLabel("Password", "PASSWORD")
	sec.SetLabel("Mechanism", "MECHANISM")
	sec.SetLabel("TLSCAFile", "CA")
	if st.User != nil {
		sec.User = string(*st.User)
		if st.Password != nil {
			sec.Password = string(*st.Password)
		}
	}
	if st.Mechanism != nil {
		sec.Mechanism = strings.ToUpper(strings.TrimSpace(string(*st.Mechanism)))
	}
	if st.TLS {
		sec.TLS = true
		if st.CA != nil {
			sec.TLSCAFile = string(*st.CA)
		}
	}
	if err := sec.Validate(); err != nil {
		return sec, fmt.Errorf("CONNECT: %w", err)
	}
	if _, err := sec.TLSConfig(); err != nil {
		return sec, fmt.Errorf("CONNECT: %w", err)
	}
	return sec, nil
}

// asPrincipal is " as User:x" for an authenticated connection, "" for an
// anonymous one (whose messages stay as they always were).
func asPrincipal(sec client.Security) string {
	if p := sec.Principal(); p != client.AnonymousPrincipal {
		return " as " + p
	}
	return ""
}

// Principal is whom the broker sees the session as (User:ANONYMOUS
// without SASL or a client certificate).
func (s *Session) Principal() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sec.Principal()
}

func clusterSummary(info client.ClusterInfo) string {
	n := len(info.Brokers)
	s := fmt.Sprintf("%d broker", n)
	if n != 1 {
		s += "s"
	}
	if info.ID != "" {
		s = "cluster " + info.ID + ", " + s
	}
	return s
}

// Banner describes the connection for the REPL's first line: address,
// broker software version when the broker reports one, cluster and
// brokers.
func (s *Session) Banner(ctx context.Context) (string, error) {
	cl, err := s.client(ctx)
	if err != nil {
		return "", err
	}
	info, err := cl.Cluster(ctx)
	if err != nil {
		return "", err
	}
	version := s.brokerVersion(ctx, cl, info)
	s.mu.Lock()
	as := asPrincipal(s.sec)
	s.mu.Unlock()
	return fmt.Sprintf("connected to %s%s — %s, %s", s.Addr(), as, version, clusterSummary(info)), nil
}

// brokerVersion returns the broker's software version if it reports one as
// a broker config (moonmq.version), else what its API versions say.
func (s *Session) brokerVersion(ctx context.Context, cl *client.Client, info client.ClusterInfo) string {
	if len(info.Brokers) > 0 {
		if cfgs, err := cl.BrokerConfigs(ctx, info.Brokers[0].ID); err == nil {
			for _, c := range cfgs {
				if c.Name == "moonmq.version" && c.Value != "" {
					return "MoonMQ " + c.Value
				}
			}
		}
	}
	apis, err := s.brokerAPIs(ctx, cl)
	switch {
	case err != nil:
		return "unknown version"
	case apis.KafkaVersion != "":
		return "Kafka " + apis.KafkaVersion + " compatible"
	}
	return fmt.Sprintf("Kafka-compatible broker (%d APIs)", len(apis.Versions))
}

// feature names a group of Kafka APIs a statement needs.
type feature struct {
	name string
	keys []client.APIKey
}

var (
	featGroupsList   = feature{"consumer groups", []client.APIKey{client.APIListGroups, client.APIDescribeGroups, client.APIFindCoordinator}}
	featGroupsRead   = feature{"consumer groups", []client.APIKey{client.APIFindCoordinator, client.APIDescribeGroups, client.APIOffsetFetch}}
	featGroupsCommit = feature{"consumer group offsets", []client.APIKey{client.APIFindCoordinator, client.APIOffsetFetch, client.APIOffsetCommit}}
	featGroupsMember = feature{"consumer group membership", []client.APIKey{client.APIFindCoordinator, client.APIJoinGroup, client.APISyncGroup, client.APIHeartbeat, client.APILeaveGroup, client.APIOffsetFetch, client.APIOffsetCommit}}
	featGroupsDelete = feature{"deleting consumer groups", []client.APIKey{client.APIFindCoordinator, client.APIDeleteGroups}}
	featTxn          = feature{"transactions", []client.APIKey{client.APIFindCoordinator, client.APIInitProducerID, client.APIAddPartitionsToTxn, client.APIEndTxn}}
	featTxnList      = feature{"listing transactions", []client.APIKey{client.APIListTransactions}}
	featTxnDescribe  = feature{"describing transactions", []client.APIKey{client.APIFindCoordinator, client.APIDescribeTransactions}}
	featUsers        = feature{"SCRAM users", []client.APIKey{client.APIDescribeUserSCRAMCredentials, client.APIAlterUserSCRAMCredentials}}
	featACLs         = feature{"ACLs", []client.APIKey{client.APIDescribeACLs, client.APICreateACLs, client.APIDeleteACLs}}
	featQuotas       = feature{"client quotas", []client.APIKey{client.APIDescribeClientQuotas, client.APIAlterClientQuotas}}
	featReassign     = feature{"partition reassignment", []client.APIKey{client.APIAlterPartitionAssignments, client.APIListPartitionReassignments}}
)

// brokerAPIs returns the broker's ApiVersions answer, cached per
// connection (a reconnect may reach a different broker).
func (s *Session) brokerAPIs(ctx context.Context, cl *client.Client) (*client.BrokerAPIs, error) {
	s.mu.Lock()
	apis := s.apis
	s.mu.Unlock()
	if apis != nil {
		return apis, nil
	}
	a, err := cl.APIVersions(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.cl == cl {
		s.apis = &a
	}
	s.mu.Unlock()
	return &a, nil
}

// require checks, with ApiVersions (cached per connection), that the
// broker implements every API of f. The error matches client.ErrUnsupported
// and names the first missing API, so "not supported" is never confused
// with a failure of a supported request.
func (s *Session) require(ctx context.Context, cl *client.Client, f feature) error {
	apis, err := s.brokerAPIs(ctx, cl)
	if err != nil {
		return err // "cannot list the broker's APIs: ..."
	}
	for _, k := range f.keys {
		if !apis.Supports(k) {
			return &UnsupportedError{Feature: f.name, API: k}
		}
	}
	return nil
}

// UnsupportedError says the broker lacks a feature a statement needs, and
// which Kafka API shows it. It matches client.ErrUnsupported.
type UnsupportedError struct {
	Feature string
	API     client.APIKey
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("this broker does not support %s: it does not implement the Kafka %s API (key %d)", e.Feature, e.API, int16(e.API))
}

// Is makes errors.Is(err, client.ErrUnsupported) hold.
func (e *UnsupportedError) Is(target error) bool { return target == client.ErrUnsupported }

// TopicNames returns topic names for completion (internal topics
// excluded), or nil if the session is not connected or the broker does not
// answer within a short time. It never dials.
func (s *Session) TopicNames(ctx context.Context) []string {
	return s.completionNames(ctx, func(ctx context.Context, cl *client.Client) ([]string, error) {
		return cl.TopicNames(ctx)
	})
}

// GroupNames returns group names for completion, like TopicNames.
func (s *Session) GroupNames(ctx context.Context) []string {
	return s.completionNames(ctx, func(ctx context.Context, cl *client.Client) ([]string, error) {
		groups, err := cl.ListGroups(ctx)
		names := make([]string, len(groups))
		for i, g := range groups {
			names[i] = g.Name
		}
		return names, err
	})
}

// completionNames asks the connected client (never dialling) for names,
// bounded so completion never stalls the prompt; any error means none.
func (s *Session) completionNames(ctx context.Context, list func(context.Context, *client.Client) ([]string, error)) []string {
	s.mu.Lock()
	cl := s.cl
	s.mu.Unlock()
	if cl == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	names, err := list(ctx, cl)
	if err != nil {
		return nil
	}
	return names
}

// quoteRes renders a resource name in messages: 'orders'.
func quoteRes(name string) string { return "'" + name + "'" }

// groupFor resolves an optional GROUP clause against USE GROUP.
func (s *Session) groupFor(g *Name, what string) (string, error) {
	if g != nil {
		return string(*g), nil
	}
	if s.group != "" {
		return s.group, nil
	}
	return "", fmt.Errorf("%s needs a group: add GROUP name, or run USE GROUP name first", what)
}
