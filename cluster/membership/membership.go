// Package membership tells which brokers of the cluster are reachable now.
// It wraps hashicorp/memberlist (SWIM gossip over UDP and TCP on one
// address): every node runs a member named after its broker id, joins the
// seeds it is given and keeps re-joining them, so a node that started
// before the others, or was cut off and came back, finds the cluster
// again. The controller polls Alive (and LastContact) to fence brokers
// that stay unreachable for the session timeout.
//
// Invariants:
//   - A member is alive from the moment gossip reports it alive or suspect
//     until memberlist declares it dead or left; the probe and suspicion
//     timers are tuned so a dead node on a LAN is declared dead within
//     about 3s, well inside the default 6s broker session timeout.
//   - Members' names are their broker ids in decimal; a member with any
//     other name (another application on the port) is ignored.
//   - Close stops the rejoin loop and memberlist's goroutines; Alive then
//     reports only this node.
package membership

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Options configures Open.
type Options struct {
	// NodeID is this broker's id; the member's name.
	NodeID int32
	// Incarnation names this start of the broker's process (the one it
	// registers with the controller); gossip carries it as the member's
	// metadata, and Incarnation reports it of every member.
	Incarnation string
	// BindAddr is the host:port memberlist listens on (UDP and TCP). Port 0
	// picks a free port (tests); Addr reports it.
	BindAddr string
	// AdvertiseAddr is the host:port other members reach this one at.
	// Default: BindAddr (with the chosen port; for a wildcard host, an
	// address of this host's that memberlist picks).
	AdvertiseAddr string
	// Join lists seed members (host:port). Open tries them once and returns
	// even if none answered (nodes start in any order); a background loop
	// keeps trying while fewer members than seeds are alive.
	Join []string
	// RejoinInterval is how often the background loop retries the seeds.
	// Default: 2s.
	RejoinInterval time.Duration
	// SecretKey, when set, encrypts and authenticates all gossip with
	// AES-GCM (memberlist's keyring; 16, 24 or 32 bytes: AES-128/192/256):
	// a node without the same key can neither read the cluster's gossip
	// nor join it. Set on a secured cluster (--gossip-key).
	SecretKey []byte
	// Logger receives memberlist's logs at their levels. Default:
	// slog.Default().
	Logger *slog.Logger
}

// Member is one alive member.
type Member struct {
	ID   int32
	Addr string
}

// Membership is this node's view of the cluster's members.
type Membership struct {
	opts   Options
	logger *slog.Logger
	ml     *memberlist.Memberlist

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every membership event
	// contact is when each member (by name) last answered a probe of
	// this one, or joined.
	contact map[string]time.Time

	stop chan struct{}
	wg   sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Open starts the member and tries the seeds once, for as long as ctx
// allows (nodes start in any order: no seed answering is not an error; the
// rejoin loop keeps trying).
func Open(ctx context.Context, opts Options) (*Membership, error) {
	if opts.NodeID < 0 {
		return nil, fmt.Errorf("membership: node id %d must be >= 0", opts.NodeID)
	}
	if n := len(opts.SecretKey); n != 0 && n != 16 && n != 24 && n != 32 {
		return nil, fmt.Errorf("membership: gossip key of %d bytes: want 16, 24 or 32", n)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RejoinInterval <= 0 {
		opts.RejoinInterval = 2 * time.Second
	}
	host, port, err := splitHostPort(ctx, opts.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("membership: bind address: %w", err)
	}
	m := &Membership{opts: opts, logger: opts.Logger.With("component", "membership", "node", opts.NodeID),
		changed: make(chan struct{}), contact: map[string]time.Time{}, stop: make(chan struct{})}

	conf := memberlist.DefaultLANConfig()
	conf.Name = strconv.FormatInt(int64(opts.NodeID), 10)
	conf.BindAddr, conf.BindPort = host, port
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		// A wildcard bind address is no address to advertise: memberlist
		// then picks one of the host's.
		conf.AdvertiseAddr = host
	}
	conf.AdvertisePort = port
	if opts.AdvertiseAddr != "" {
		ah, ap, err := splitHostPort(ctx, opts.AdvertiseAddr)
		if err != nil {
			return nil, fmt.Errorf("membership: advertise address: %w", err)
		}
		conf.AdvertiseAddr, conf.AdvertisePort = ah, ap
	}
	// Failure detection: a member is probed about every (members-1) probe
	// intervals; one that misses its direct and indirect probes becomes
	// suspect, and dead SuspicionMult probe intervals later (with three
	// members): under 3s from its death to "dead".
	conf.ProbeInterval = 500 * time.Millisecond
	conf.ProbeTimeout = 250 * time.Millisecond
	conf.SuspicionMult = 2
	conf.GossipInterval = 100 * time.Millisecond
	conf.TCPTimeout = 2 * time.Second
	conf.PushPullInterval = 10 * time.Second
	// Names are broker ids: a restarted node reuses its name at once.
	conf.DeadNodeReclaimTime = time.Second
	conf.Events = &events{m: m}
	conf.Delegate = nodeMeta(opts.Incarnation)
	conf.Ping = &pings{m: m}
	conf.Logger = log.New(&logWriter{logger: m.logger}, "", 0)
	if len(opts.SecretKey) > 0 {
		// memberlist builds a keyring from SecretKey and then both
		// encrypts what it sends and refuses what is not encrypted
		// (GossipVerifyIncoming/Outgoing default to true).
		conf.SecretKey = opts.SecretKey
	}

	ml, err := memberlist.Create(conf)
	if err != nil {
		return nil, fmt.Errorf("membership: start memberlist on %s: %w", opts.BindAddr, err)
	}
	m.ml = ml
	joined := make(chan struct{})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(joined)
		m.join()
	}()
	select {
	case <-joined:
	case <-ctx.Done():
	}
	m.wg.Add(1)
	go m.rejoinLoop()
	return m, nil
}

// splitHostPort splits addr, resolving a host name to an IP address:
// memberlist binds and advertises IP addresses only.
func splitHostPort(ctx context.Context, addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port of %q: %w", addr, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if net.ParseIP(host) == nil {
		ips, err := net.DefaultResolver.LookupIP(ctx, "ip", host)
		if err != nil || len(ips) == 0 {
			return "", 0, fmt.Errorf("resolve %q: %v", host, err)
		}
		host = ips[0].String()
		for _, ip := range ips { // IPv4 if there is one, as most configs mean
			if ip.To4() != nil {
				host = ip.String()
				break
			}
		}
	}
	return host, int(port), nil
}

// Addr is the address other members reach this one at.
func (m *Membership) Addr() string { return m.ml.LocalNode().Address() }

// join tries every seed; failures are expected while the others are down.
func (m *Membership) join() {
	if len(m.opts.Join) == 0 {
		return
	}
	if n, err := m.ml.Join(m.opts.Join); err != nil {
		m.logger.Debug("gossip seeds not reachable yet", "joined", n, "seeds", m.opts.Join, "err", err)
	}
}

// rejoinLoop re-joins the seeds while fewer members than this one plus its
// seeds are alive: after a start before the others, or after a network
// partition healed (memberlist does not probe members it declared dead).
func (m *Membership) rejoinLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.opts.RejoinInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			if m.ml.NumMembers() < len(m.opts.Join)+1 {
				m.join()
			}
		}
	}
}

// Members returns the alive members (including this one), by id.
func (m *Membership) Members() []Member {
	var out []Member
	for _, n := range m.ml.Members() {
		id, err := strconv.ParseInt(n.Name, 10, 32)
		if err != nil || id < 0 {
			continue
		}
		out = append(out, Member{ID: int32(id), Addr: n.Address()})
	}
	slices.SortFunc(out, func(a, b Member) int { return int(a.ID) - int(b.ID) })
	return out
}

// Alive reports whether broker id is an alive (or merely suspect) member.
func (m *Membership) Alive(id int32) bool {
	if id == m.opts.NodeID {
		return true
	}
	name := strconv.FormatInt(int64(id), 10)
	for _, n := range m.ml.Members() {
		if n.Name == name {
			return true
		}
	}
	return false
}

// Incarnation is the incarnation broker id's member gossips (see
// Options.Incarnation), if it is alive and says one.
func (m *Membership) Incarnation(id int32) (string, bool) {
	if id == m.opts.NodeID {
		return m.opts.Incarnation, m.opts.Incarnation != ""
	}
	name := strconv.FormatInt(int64(id), 10)
	for _, n := range m.ml.Members() {
		if n.Name == name {
			return string(n.Meta), len(n.Meta) > 0
		}
	}
	return "", false
}

// LastContact is when broker id last answered one of this member's
// probes (or joined); false if never. Probes go round-robin, so for an
// alive member it is at most about (members-1) probe intervals (500ms
// each) old. This node is always in contact with itself.
func (m *Membership) LastContact(id int32) (time.Time, bool) {
	if id == m.opts.NodeID {
		return time.Now(), true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.contact[strconv.FormatInt(int64(id), 10)]
	return t, ok
}

func (m *Membership) touch(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.contact[name] = time.Now()
}

// Changed returns a channel closed at the next membership event (a member
// joined, left, died or was updated). Call it again for the one after.
func (m *Membership) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

func (m *Membership) notify() {
	m.mu.Lock()
	defer m.mu.Unlock()
	close(m.changed)
	m.changed = make(chan struct{})
}

// Close leaves the cluster (telling the others, so they need not wait
// for the failure detector) and stops. It is idempotent.
func (m *Membership) Close() error {
	m.closeOnce.Do(func() {
		close(m.stop)
		m.wg.Wait()
		var errs []error
		if err := m.ml.Leave(time.Second); err != nil {
			errs = append(errs, fmt.Errorf("membership: leave: %w", err))
		}
		if err := m.ml.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("membership: shutdown: %w", err))
		}
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}

// events turns memberlist's callbacks into change signals. memberlist
// calls them from its own goroutines and expects them not to block.
type events struct{ m *Membership }

func (e *events) NotifyJoin(n *memberlist.Node) {
	e.m.logger.Debug("member alive", "member", n.Name, "addr", n.Address())
	e.m.touch(n.Name)
	e.m.notify()
}

func (e *events) NotifyLeave(n *memberlist.Node) {
	e.m.logger.Info("member gone", "member", n.Name, "addr", n.Address())
	e.m.notify()
}

func (e *events) NotifyUpdate(n *memberlist.Node) { e.m.notify() }

// nodeMeta is the memberlist delegate that gives this member's metadata:
// its incarnation. MoonMQ sends no user messages or state over gossip.
type nodeMeta string

func (d nodeMeta) NodeMeta(limit int) []byte {
	if len(d) > limit {
		return nil // memberlist's limit is 512 bytes; a UUID is 36
	}
	return []byte(d)
}
func (nodeMeta) NotifyMsg([]byte)                           {}
func (nodeMeta) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (nodeMeta) LocalState(join bool) []byte                { return nil }
func (nodeMeta) MergeRemoteState(buf []byte, join bool)     {}

// pings records the members that answered a probe.
type pings struct{ m *Membership }

func (p *pings) AckPayload() []byte { return nil }

func (p *pings) NotifyPingComplete(n *memberlist.Node, _ time.Duration, _ []byte) { p.m.touch(n.Name) }

// logWriter maps memberlist's "[LEVEL] memberlist: ..." lines to slog.
type logWriter struct{ logger *slog.Logger }

func (w *logWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for prefix, l := range map[string]slog.Level{"[DEBUG]": slog.LevelDebug, "[INFO]": slog.LevelInfo,
		"[WARN]": slog.LevelWarn, "[ERR]": slog.LevelError} {
		if rest, ok := bytes.CutPrefix(line, []byte(prefix)); ok {
			level, line = l, bytes.TrimSpace(rest)
			break
		}
	}
	w.logger.Log(context.Background(), level, string(line))
	return len(p), nil
}
