// Package peer is the follower side of partition replication: the fetcher
// that keeps this node's follower replicas up to date with their leaders,
// Kafka's ReplicaFetcherThread/AbstractFetcherThread.
//
// It owns one fetch session (a goroutine and one TCP connection) per leader
// broker. A session fetches every partition this node follows from that
// leader in one Fetch request, as replica NodeID (ReplicaID), from each
// follower's committed end: the offset a follower reports to the leader's
// ISR is only what it has fsynced (group commit on followers: it appends
// what arrived for every partition, waits for their fsyncs, then fetches
// from the new durable ends). Each answer's high watermark is carried to
// the follower (SetFollowerHighWatermark) and its log start too
// (AdvanceLogStart: DeleteRecords and retention act on every replica).
//
// Before a partition's first fetch in a leader epoch (Follow), its
// divergent tail is truncated through OffsetForLeaderEpoch (KIP-101/279):
// the leader says where the follower's latest epoch ends on its log, the
// follower truncates to that (or to its own end for the epoch if smaller),
// asking again with an older epoch when the leader did not have this one;
// when the leader knows no epoch, or the follower has none, it falls back
// to its high watermark. A fetch offset outside the leader's log is
// handled as Kafka does: below the leader's log start, the follower
// restarts empty there (TruncateFullyAndStartAt); above its end, the
// truncation runs again. A leader that says the follower's epoch is stale
// (FENCED_LEADER_EPOCH) stops that partition until the next Follow;
// retriable refusals back the partition off; connection and decoding
// errors drop the connection and re-dial with a backoff (doubling up to
// MaxBackoff, on Options.Clock).
//
// Wire: kmsg encoding and decoding over a plain TCP connection with a
// size-prefixed frame reader (wire.go) rather than franz-go's kgo client:
// a replica fetch must go to one exact broker with ReplicaID set, one
// request at a time, with the frame size bounded before allocation and the
// answer's topic and partition counts checked against the request before
// kmsg decodes it; kgo would add metadata discovery, its own retries and
// buffering this loop must control.
//
// Invariants: a partition is fetched by at most one session; a session
// applies nothing to a partition once Follow moved it elsewhere or Unfollow
// removed it (the move waits for an apply in progress), so a stale leader's
// batches never land after the new leader's truncation; every goroutine
// stops on Close.
package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/replica"
)

// FetcherOptions configures a Fetcher.
type FetcherOptions struct {
	// NodeID is this broker's id, sent as the fetches' ReplicaID.
	NodeID int32
	// Dial connects to a leader's address (default: TCP with a 10s timeout).
	Dial   func(ctx context.Context, addr string) (net.Conn, error)
	Logger *slog.Logger
	// Clock times the backoffs (default clock.Real).
	Clock clock.Clock
	// MaxWait is how long a leader holds a fetch that finds nothing
	// (replica.fetch.wait.max.ms, default 500ms).
	MaxWait time.Duration
	// MaxBytes and PartitionMaxBytes bound a fetch answer's records
	// (replica.fetch.response.max.bytes, default 10 MiB, and
	// replica.fetch.max.bytes, default 1 MiB); the leader still returns a
	// first batch larger than them.
	MaxBytes, PartitionMaxBytes int32
	// MaxFrameBytes bounds an answer frame before it is read (default
	// 128 MiB: room for MaxBytes and a first batch of any size a topic
	// allows).
	MaxFrameBytes int
	// Backoff is the wait after a refused partition or a failed
	// connection, doubling up to MaxBackoff for connections
	// (replica.fetch.backoff.ms; defaults 1s and 10s).
	Backoff, MaxBackoff time.Duration
	// RequestTimeout bounds one exchange beyond MaxWait (default 30s).
	RequestTimeout time.Duration
}

// EnsureDefaults fills zero fields.
func (o *FetcherOptions) EnsureDefaults() {
	if o.Dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		o.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 500 * time.Millisecond
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 10 << 20
	}
	if o.PartitionMaxBytes <= 0 {
		o.PartitionMaxBytes = 1 << 20
	}
	if o.MaxFrameBytes <= 0 {
		o.MaxFrameBytes = 128 << 20
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = max(10*time.Second, o.Backoff)
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
}

// Validate reports a misconfiguration.
func (o *FetcherOptions) Validate() error {
	if o.NodeID < 0 {
		return fmt.Errorf("peer: node id %d must not be negative", o.NodeID)
	}
	return nil
}

// ErrClosed: the fetcher was closed.
var ErrClosed = errors.New("peer: fetcher closed")

// Fetcher replicates the partitions this node follows. Safe for
// concurrent use.
type Fetcher struct {
	opts FetcherOptions

	mu       sync.Mutex
	sessions map[int32]*session // by leader id
	where    map[replica.TopicPartition]*session
	closed   bool
}

// NewFetcher returns a fetcher following nothing yet.
func NewFetcher(opts FetcherOptions) (*Fetcher, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Fetcher{opts: opts, sessions: make(map[int32]*session), where: make(map[replica.TopicPartition]*session)}, nil
}

// Follow makes the fetcher replicate p (partition tp, already a follower:
// p.BecomeFollower) from broker leaderID at leaderAddr (its Kafka
// listener) in leaderEpoch. Its tail is first checked against the leader
// (OffsetForLeaderEpoch). Following the same leader in the same epoch again
// changes nothing; a new epoch or leader restarts from the truncation.
func (f *Fetcher) Follow(tp replica.TopicPartition, leaderID int32, leaderAddr string, leaderEpoch int32, p *replica.Partition) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if s := f.where[tp]; s != nil {
		if s.leaderID == leaderID && s.addr == leaderAddr && s.following(tp, leaderEpoch, p) {
			return nil
		}
		f.removeLocked(tp)
	}
	s := f.sessions[leaderID]
	if s != nil && s.addr != leaderAddr {
		// The leader moved to another address: a new session there takes
		// its partitions over, each truncating again.
		for _, m := range s.members() {
			f.removeLocked(m.tp)
			defer f.followLocked(m.tp, leaderID, leaderAddr, m.epoch, m.p)
		}
		s = nil
	}
	f.followLocked(tp, leaderID, leaderAddr, leaderEpoch, p)
	return nil
}

func (f *Fetcher) followLocked(tp replica.TopicPartition, leaderID int32, addr string, epoch int32, p *replica.Partition) {
	s := f.sessions[leaderID]
	if s == nil {
		s = newSession(f, leaderID, addr)
		f.sessions[leaderID] = s
	}
	s.add(tp, epoch, p)
	f.where[tp] = s
}

// Unfollow stops replicating tp (it became leader, or left this node). It
// returns once no fetch of the old session can still apply to it.
func (f *Fetcher) Unfollow(tp replica.TopicPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removeLocked(tp)
}

func (f *Fetcher) removeLocked(tp replica.TopicPartition) {
	s := f.where[tp]
	if s == nil {
		return
	}
	delete(f.where, tp)
	if s.remove(tp) == 0 {
		delete(f.sessions, s.leaderID)
		s.stop()
	}
}

// Following lists the partitions followed now and their leaders, for
// metrics and tests.
func (f *Fetcher) Following() map[replica.TopicPartition]int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[replica.TopicPartition]int32, len(f.where))
	for tp, s := range f.where {
		out[tp] = s.leaderID
	}
	return out
}

// Close stops every session and waits for their goroutines.
func (f *Fetcher) Close() error {
	f.mu.Lock()
	f.closed = true
	sessions := f.sessions
	f.sessions, f.where = map[int32]*session{}, map[replica.TopicPartition]*session{}
	f.mu.Unlock()
	for _, s := range sessions {
		s.stop()
	}
	return nil
}
