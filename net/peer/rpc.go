package peer

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Caller sends the broker-to-broker requests of transactions to other
// brokers' Kafka listeners: WriteTxnMarkers (a transaction coordinator to
// the leaders of its partitions) and AddPartitionsToTxn v4/v5 (a partition
// leader verifying a transactional produce with the coordinator, KIP-890).
// It keeps one connection per destination broker and one request in
// flight on it (Kafka's InterBrokerSendThread); a failed exchange drops the
// connection and the next call dials again. Answers are bounded
// (MaxFrameBytes before anything is read into memory) and checked against
// the request before they are returned.
type Caller struct {
	opts CallerOptions

	mu     sync.Mutex
	conns  map[int32]*destination
	closed bool
}

// CallerOptions configures a Caller.
type CallerOptions struct {
	// NodeID names this broker in the client id of its requests.
	NodeID int32
	// Dial connects to a broker (default: TCP with a 10s timeout).
	Dial   func(ctx context.Context, addr string) (net.Conn, error)
	Logger *slog.Logger
	// RequestTimeout bounds one exchange (default 30s).
	RequestTimeout time.Duration
	// MaxFrameBytes bounds an answer (default 1 MiB: these answers carry
	// one error code per partition).
	MaxFrameBytes int
}

func (o *CallerOptions) ensureDefaults() {
	if o.Dial == nil {
		d := net.Dialer{Timeout: 10 * time.Second}
		o.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.MaxFrameBytes <= 0 {
		o.MaxFrameBytes = 1 << 20
	}
}

// destination is the connection to one broker; mu serialises its
// requests.
type destination struct {
	mu   sync.Mutex
	addr string
	c    *wireConn
}

// NewCaller returns a Caller.
func NewCaller(opts CallerOptions) *Caller {
	opts.ensureDefaults()
	return &Caller{opts: opts, conns: map[int32]*destination{}}
}

// Close drops every connection; later calls fail.
func (c *Caller) Close() error {
	c.mu.Lock()
	c.closed = true
	conns := c.conns
	c.conns = map[int32]*destination{}
	c.mu.Unlock()
	for _, d := range conns {
		d.mu.Lock()
		if d.c != nil {
			_ = d.c.Close()
			d.c = nil
		}
		d.mu.Unlock()
	}
	return nil
}

// call sends req to broker id at addr and decodes its answer into resp,
// vetted by check.
func (c *Caller) call(ctx context.Context, id int32, addr string, req kmsg.Request, resp kmsg.Response) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("peer: caller closed")
	}
	d := c.conns[id]
	if d == nil {
		d = &destination{addr: addr}
		c.conns[id] = d
	}
	c.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c != nil && d.addr != addr {
		_ = d.c.Close() // the broker moved
		d.c = nil
	}
	d.addr = addr
	if d.c == nil {
		nc, err := c.opts.Dial(ctx, addr)
		if err != nil {
			return fmt.Errorf("peer: dial broker %d at %s: %w", id, addr, err)
		}
		d.c = newWireConn(nc, fmt.Sprintf("moonmq-broker-%d", c.opts.NodeID), c.opts.MaxFrameBytes, c.opts.RequestTimeout)
	}
	if err := d.c.roundTrip(ctx, req, resp, nil); err != nil {
		_ = d.c.Close()
		d.c = nil
		return fmt.Errorf("peer: %s to broker %d at %s: %w", kmsg.NameForKey(req.Key()), id, addr, err)
	}
	return nil
}

// WriteTxnMarkers sends req (version 1 or 2) to broker id and returns its
// answer, which must name each marker's producer once per marker and no
// partition it was not asked about.
func (c *Caller) WriteTxnMarkers(ctx context.Context, id int32, addr string, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	if err := c.call(ctx, id, addr, req, resp); err != nil {
		return nil, err
	}
	if err := checkMarkersAnswer(req, resp); err != nil {
		c.drop(id)
		return nil, err
	}
	return resp, nil
}

// checkMarkersAnswer vets a WriteTxnMarkers answer against its request.
func checkMarkersAnswer(req *kmsg.WriteTxnMarkersRequest, resp *kmsg.WriteTxnMarkersResponse) error {
	if len(resp.Markers) > len(req.Markers) {
		return fmt.Errorf("%w: %d markers answered for %d sent", errMalformed, len(resp.Markers), len(req.Markers))
	}
	asked, answered := 0, 0
	for _, m := range req.Markers {
		for _, t := range m.Topics {
			asked += len(t.Partitions)
		}
	}
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			answered += len(t.Partitions)
		}
	}
	if answered > asked {
		return fmt.Errorf("%w: %d marker partitions answered for %d sent", errMalformed, answered, asked)
	}
	return nil
}

// AddPartitionsToTxn sends a broker's AddPartitionsToTxn (version 4 or
// 5) to the transaction coordinator id and returns its answer, which must
// not name more transactions or partitions than asked.
func (c *Caller) AddPartitionsToTxn(ctx context.Context, id int32, addr string, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if err := c.call(ctx, id, addr, req, resp); err != nil {
		return nil, err
	}
	asked, answered := 0, 0
	for _, t := range req.Transactions {
		for _, tt := range t.Topics {
			asked += len(tt.Partitions)
		}
	}
	for _, t := range resp.Transactions {
		for _, tt := range t.Topics {
			answered += len(tt.Partitions)
		}
	}
	if len(resp.Transactions) > len(req.Transactions) || answered > asked {
		c.drop(id)
		return nil, fmt.Errorf("%w: AddPartitionsToTxn answered %d transactions, %d partitions for %d, %d", errMalformed,
			len(resp.Transactions), answered, len(req.Transactions), asked)
	}
	return resp, nil
}

func (c *Caller) drop(id int32) {
	c.mu.Lock()
	d := c.conns[id]
	c.mu.Unlock()
	if d == nil {
		return
	}
	d.mu.Lock()
	if d.c != nil {
		_ = d.c.Close()
		d.c = nil
	}
	d.mu.Unlock()
}
