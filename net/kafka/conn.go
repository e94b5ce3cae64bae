package kafka

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxControlRequestSize bounds every request but Produce.
const maxControlRequestSize = 8 << 20

// request is one decoded request frame.
type request struct {
	key, version int16
	corr         int32
	clientID     string
	kreq         kmsg.Request // nil when the key or version is unsupported
	received     time.Time
	size         int64         // frame bytes held against the server's request budget
	entry        *entry        // its place in the connection's reply order
	later        bool          // the handler arranged to answer from a callback (answerLater)
	charge       fetchCharge   // fetched data the reply holds until written
	frameBytes   int64         // the request's size, for producer_byte_rate
	handlerTime  time.Duration // its handler's run on the read loop, for request_percentage (when measured)
	quotaDone    bool          // its reply was recorded against the client's quotas (throttleReply)
}

// reply is what the write loop sends for one request, in order. A reply
// with no body (acks=0 produce) is skipped.
type reply struct {
	req   *request
	resp  kmsg.Response
	raw   []byte // pre-encoded body for answers kmsg cannot build (unsupported versions)
	token bool   // raw is a bare SASL token: no correlation id (after SaslHandshake v0)
	fatal error  // close the connection after writing what came before
}

type conn struct {
	s    *Server
	nc   net.Conn
	peer string

	ctx    context.Context
	cancel context.CancelFunc
	out    *outbox

	// respBudget bounds the fetched record bytes of this connection's
	// replies not yet written; the server's respBudget bounds them over
	// all connections.
	respBudget *memBudget
	lastActive atomic.Int64 // unix nanos of the last request read or reply written
	pieces     []piece      // scratch for writeFetch; owned by the write loop

	// principal is who the connection acts as ("User:ANONYMOUS" until a
	// SASL exchange or a client certificate says otherwise); host is the
	// client's IP, which ACLs match. Set before the first request other
	// than the handshake's is handled; read-only after.
	principal string
	host      string

	// On a TLS listener (security.go): tlsState is the handshake's
	// outcome, tlsServerCert the certificate this server presented on the
	// connection (SCRAM's tls-server-end-point channel binding hashes it),
	// and certPrincipal the principal of the client's verified certificate
	// ("" without one), which SASL EXTERNAL takes on SASL_SSL. Set by the
	// handshake, before the first request is read; read-only after. raw
	// is the TCP connection under nc.
	tlsState      *tls.ConnectionState
	tlsServerCert *x509.Certificate
	certPrincipal string
	raw           net.Conn
	tlsDone       atomic.Bool // set after the fields above (for readers off the connection's goroutine)

	// sasl is the progress of SASL authentication; nil once the
	// connection is authenticated, or on a listener without SASL. Read
	// loop only.
	sasl *saslState
	// closeAfterReply ends the connection once the replies queued so far
	// are written (a refused SASL exchange). Read loop only.
	closeAfterReply bool

	// refusedTxn is set once a transactional request was refused and
	// logged: clients retry the refusal, the log says it once per
	// connection. Read loop only.
	refusedTxn bool

	// mutedUntil (unix nanos) is when a throttled connection may send
	// requests again (quota.go): the read loop takes none before.
	mutedUntil atomic.Int64
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{s: s, raw: nc, peer: nc.RemoteAddr().String(), principal: AnonymousPrincipal, ctx: ctx, cancel: cancel,
		out: newOutbox(s.opts.MaxInFlight), respBudget: newMemBudget(s.opts.ConnResponseBytes)}
	c.nc = c.wrapTLS(nc)
	c.host = c.peer
	if h, _, err := net.SplitHostPort(c.peer); err == nil {
		c.host = h
	}
	if f := s.principalOf.Load(); f != nil {
		c.principal = (*f)(nc)
	}
	if s.sasl != nil {
		c.sasl = &saslState{}
	}
	c.touch()
	return c
}

// AnonymousPrincipal is who an unauthenticated connection acts as.
const AnonymousPrincipal = "User:ANONYMOUS"

func (c *conn) serve() {
	c.s.log.Debug("connection opened", "peer", c.peer)
	if tc, ok := c.nc.(*tls.Conn); ok {
		// Here, in the connection's goroutine, never in the accept loop:
		// a slow or silent client holds only its own connection.
		if err := c.handshakeTLS(tc); err != nil {
			reason := c.tlsFailureReason(err)
			c.s.metrics.tls.failures.WithLabelValues(reason).Inc()
			c.logTLSFailure(reason, err)
			c.cancel()
			c.nc.Close()
			return
		}
		c.s.metrics.tls.handshakes.Inc()
		c.s.log.Debug("TLS handshake done", "peer", c.peer, "version", tls.VersionName(c.tlsState.Version),
			"cipher", tls.CipherSuiteName(c.tlsState.CipherSuite), "principal", c.principal, "cert_principal", c.certPrincipal)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.writeLoop()
	}()
	err := c.readLoop()
	if err != nil && !c.draining() {
		// The peer is gone or broke the protocol: nobody will read the
		// replies still owed, so stop parked work (long polls, fsync waits)
		// instead of letting it run to its deadline.
		c.cancel()
	}
	c.out.close()
	<-done
	c.cancel()
	// Replies still owed will never be written: whoever fills them from
	// now on (a parked fetch waking on the cancel) gives back what they hold.
	c.out.abandon(c.dropReply)
	if c.draining() {
		c.closeGently()
	}
	c.nc.Close()
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), c.s.ctx.Err() != nil, c.draining():
		c.s.log.Debug("connection closed", "peer", c.peer)
	case errors.Is(err, errIdle):
		c.s.log.Debug("closing idle connection", "peer", c.peer, "reason", err)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT):
		// A client that drops its connection is normal client behaviour
		// (a killed consumer, a load balancer's probe): nothing for an
		// operator to look at.
		c.s.log.Debug("connection dropped by the client", "peer", c.peer, "reason", err)
	default:
		c.s.log.Warn("closing connection", "peer", c.peer, "reason", err)
	}
}

// closeGently ends a connection at shutdown without an RST: closing a
// socket with unread input makes the kernel reset it, and the reset can
// destroy replies still in the send buffer (acknowledgements of durable
// produces). So: half-close, then read and discard until the peer closes
// or a short deadline passes.
//
// On TLS, CloseWrite sends close_notify first; what the peer sends after
// is discarded undecrypted, from the TCP connection under it.
func (c *conn) closeGently() {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok {
		return
	}
	if cw.CloseWrite() != nil {
		return
	}
	_ = c.raw.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.Copy(io.Discard, io.LimitReader(c.raw, 64<<20))
}

// readLoop reads, decodes and dispatches requests in order. Handlers run
// their synchronous part here, so requests from one connection take effect
// in the order they were sent (idempotent producers pipeline up to five
// produce requests and rely on it); anything that waits is parked by the
// handler into its own goroutine.
//
// The loop stops reading, as Kafka mutes a channel, while the connection's
// unwritten replies hold more than ConnResponseBytes (its client is not
// reading them), and closes the connection when it has been idle for
// ConnectionsMaxIdle or a started request stops arriving for
// RequestTimeout.
func (c *conn) readLoop() error {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		if err := c.waitUnmuted(); err != nil {
			if errors.Is(err, errDraining) {
				return nil
			}
			return err
		}
		if err := c.awaitRequest(br); err != nil {
			if errors.Is(err, errDraining) {
				return nil // graceful shutdown: stop taking requests
			}
			return err
		}
		if c.sasl != nil && c.sasl.raw {
			if err := c.saslRawToken(br); err != nil {
				return err
			}
			if c.closeAfterReply || c.ctx.Err() != nil || c.draining() {
				return nil
			}
			continue
		}
		body, charged, err := c.readFrame(br)
		if err != nil {
			if c.draining() && (errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, errDraining)) {
				return nil
			}
			return err
		}
		c.touch()
		req, err := decodeRequest(body)
		if err != nil {
			c.s.budget.release(charged)
			return err
		}
		req.size, req.frameBytes = charged, int64(len(body))
		if c.sasl != nil {
			if err := c.saslGate(req); err != nil {
				c.s.budget.release(charged)
				return err
			}
		}
		// A reply written while this request was being read may have
		// throttled the connection: the request waits the throttle out.
		if err := c.waitUnmuted(); err != nil {
			c.s.budget.release(charged)
			if errors.Is(err, errDraining) {
				return nil
			}
			return err
		}
		if req.entry, err = c.out.reserve(c.ctx); err != nil {
			c.s.budget.release(req.size)
			return err
		}
		c.dispatch(req)
		if c.ctx.Err() != nil || c.draining() || c.closeAfterReply {
			// Stop reading; the replies queued so far are still written
			// (serve closes the outbox and waits for the write loop).
			return nil
		}
		if err := c.waitForReader(); err != nil {
			if errors.Is(err, errDraining) {
				return nil
			}
			return err
		}
	}
}

// waitForReader holds the read loop while the connection's fetched data
// waiting to be written exceeds ConnResponseBytes: a client that sends
// requests but does not read the replies gets no more work done for it.
func (c *conn) waitForReader() error {
	for {
		freed := c.respBudget.released() // before the check, so no release is missed
		if c.respBudget.inUse() < c.s.opts.ConnResponseBytes {
			return nil
		}
		select {
		case <-freed:
		case <-c.ctx.Done():
			return c.ctx.Err()
		case <-c.s.draining:
			return errDraining
		}
	}
}

var (
	errDraining = errors.New("draining")
	errIdle     = errors.New("idle")
)

// touch records activity on the connection (a request read, a reply
// written), which keeps it from being closed as idle.
func (c *conn) touch() { c.lastActive.Store(time.Now().UnixNano()) }

// awaitRequest waits for the first byte of the next request. A connection
// with no request, no reply owed and nothing written for ConnectionsMaxIdle
// is closed (Kafka's connections.max.idle.ms), so idle sockets cannot hold
// the per-IP connection slots for good.
func (c *conn) awaitRequest(br *bufio.Reader) error {
	idle := c.s.opts.ConnectionsMaxIdle
	for {
		deadline := time.Time{}
		if idle > 0 {
			deadline = time.Unix(0, c.lastActive.Load()).Add(idle)
			if !deadline.After(time.Now()) {
				// Past the idle time but a reply is owed (a long poll): look
				// again a full idle time from now, not in a tight loop.
				deadline = time.Now().Add(idle)
			}
		}
		// Set the deadline, then check draining: Shutdown closes draining
		// before it cuts the deadline short, so one of the two is seen.
		if err := c.nc.SetReadDeadline(deadline); err != nil {
			return err
		}
		if c.draining() {
			return errDraining
		}
		if br.Buffered() > 0 {
			return nil
		}
		_, err := br.Peek(1)
		if err == nil {
			return nil
		}
		c.s.idleChecks.Add(1)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if c.draining() {
			return errDraining
		}
		if idle > 0 && time.Since(time.Unix(0, c.lastActive.Load())) >= idle && c.out.empty() {
			return fmt.Errorf("%w for %v (connections-max-idle): closing", errIdle, idle)
		}
		// Busy (replies owed) or active meanwhile: wait again.
	}
}

// readFrame reads one request frame. The body is received into a buffer
// that grows as bytes arrive, charged to the request budget as it grows,
// so a frame that announces 100 MiB and sends nothing holds 64 KiB, not
// 100 MiB; and each read must make progress within RequestTimeout, so
// a client that stops mid-request loses its connection instead of holding
// memory. It returns the body and the bytes charged for it.
func (c *conn) readFrame(br *bufio.Reader) (body []byte, charged int64, err error) {
	timeout := c.s.opts.RequestTimeout
	progress := func() error {
		if c.draining() {
			return errDraining // Shutdown cut the read short; do not extend it
		}
		return c.nc.SetReadDeadline(time.Now().Add(timeout))
	}
	if err := progress(); err != nil {
		return nil, 0, err
	}
	var sizeBuf [4]byte
	if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
		return nil, 0, fmt.Errorf("reading request size: %w", err)
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 8 || size > c.s.opts.MaxRequestSize {
		return nil, 0, fmt.Errorf("request frame of %d bytes is outside [8, %d]%s", size, c.s.opts.MaxRequestSize, sniffProtocol(sizeBuf))
	}
	if c.sasl != nil && size > maxUnauthenticatedRequest {
		return nil, 0, fmt.Errorf("request frame of %d bytes before SASL authentication exceeds %d", size, maxUnauthenticatedRequest)
	}
	if err := progress(); err != nil {
		return nil, 0, err
	}
	// Only produce requests carry bulk data. Other requests are small,
	// and decoding expands arrays by the in-memory size of their
	// elements, so a tighter bound keeps a hostile frame from turning
	// into gigabytes of allocations.
	key, err := br.Peek(2)
	if err != nil {
		return nil, 0, fmt.Errorf("reading request header: %w", err)
	}
	if k := int16(binary.BigEndian.Uint16(key)); k != kmsg.Produce.Int16() && size > maxControlRequestSize {
		return nil, 0, fmt.Errorf("%s request of %d bytes exceeds %d", kmsg.NameForKey(k), size, maxControlRequestSize)
	}
	defer func() {
		if err != nil {
			c.s.budget.release(charged)
			charged = 0
		}
	}()
	for len(body) < int(size) {
		if len(body) == cap(body) {
			grown := min(max(2*cap(body), firstBodyChunk), int(size))
			if !c.s.budget.tryAcquire(int64(grown - cap(body))) {
				// No room for the next part: give back what this frame holds
				// and wait for room for all of it at once. Waiting while
				// holding a part would let partly received frames hold the
				// whole budget and wait on each other for good. The wait is
				// bounded like a stalled read: a frame near the budget's
				// size needs it nearly empty, which a busy node may never be.
				c.s.budget.release(charged)
				charged = 0
				if err := c.awaitRoom(int64(size), timeout); err != nil {
					return nil, 0, err
				}
				charged, grown = int64(size), int(size)
			} else {
				charged += int64(grown - cap(body))
			}
			nb := make([]byte, len(body), grown)
			copy(nb, body)
			body = nb
		}
		if err := progress(); err != nil {
			return nil, charged, err
		}
		n, err := io.ReadAtLeast(br, body[len(body):cap(body)], 1)
		body = body[:len(body)+n]
		if err != nil {
			return nil, charged, fmt.Errorf("reading %d-byte request after %d bytes: %w", size, len(body), err)
		}
	}
	return body, charged, nil
}

// awaitRoom waits up to timeout for n bytes of the request budget; a
// shutdown ends the wait. The error closes the connection (logged there).
func (c *conn) awaitRoom(n int64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	err := c.s.budget.acquire(ctx, c.s.draining, n)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no room in the %d-byte request budget for a %d-byte request within %v",
			c.s.budget.limit, n, timeout)
	}
	return err
}

// firstBodyChunk is the first buffer a request body is received into; it
// doubles as more arrives.
const firstBodyChunk = 64 << 10

// sniffProtocol names what the first bytes of a bad frame look like, so a
// TLS client or an HTTP request on the Kafka port is logged as such.
func sniffProtocol(b [4]byte) string {
	switch {
	case b[0] == 0x16 && b[1] == 0x03:
		return " (looks like a TLS handshake on a plaintext listener)"
	case string(b[:]) == "GET " || string(b[:]) == "POST" || string(b[:]) == "HEAD" || string(b[:]) == "PUT ":
		return " (looks like an HTTP request on the Kafka port)"
	}
	return ""
}

func (c *conn) draining() bool {
	select {
	case <-c.s.draining:
		return true
	default:
		return false
	}
}

// decodeRequest parses the request header and, when MoonMQ supports the key
// and version, the body.
func decodeRequest(body []byte) (*request, error) {
	r := kbin.Reader{Src: body}
	req := &request{key: r.Int16(), version: r.Int16(), corr: r.Int32(), received: time.Now()}
	if id := r.NullableString(); id != nil {
		req.clientID = *id
	}
	if !r.Ok() {
		return nil, errors.New("truncated request header")
	}
	if !supported(req.key, req.version) {
		return req, nil // answered with UNSUPPORTED_VERSION by dispatch
	}
	kreq := kmsg.RequestForKey(req.key)
	kreq.SetVersion(req.version)
	if kreq.IsFlexible() {
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return nil, fmt.Errorf("%s v%d: malformed header tags", kmsg.NameForKey(req.key), req.version)
		}
	}
	if req.key == kmsg.Produce.Int16() {
		if err := precheckProduce(req.version, r.Src); err != nil {
			return nil, fmt.Errorf("Produce v%d: malformed request: %w", req.version, err)
		}
	}
	if err := readFrom(kreq, r.Src); err != nil {
		return nil, fmt.Errorf("%s v%d: malformed request: %w", kmsg.NameForKey(req.key), req.version, err)
	}
	req.kreq = kreq
	return req, nil
}

// readFrom decodes a body, turning a decoder panic (kmsg trusts array
// lengths less than we would like on some paths) into an error so hostile
// input can only ever close its own connection.
func readFrom(kreq kmsg.Request, src []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panic: %v", r)
		}
	}()
	err = kreq.ReadFrom(src)
	if err != nil && err.Error() == kmsgShortInput {
		// kmsg's decoder is shared with clients and words this for them.
		err = errors.New("request ends before its fields do (truncated or malformed)")
	}
	return err
}

// kmsgShortInput is the text of kmsg's error for input that ends too soon
// (its kbin package is internal, so the value cannot be compared).
const kmsgShortInput = "response did not contain enough data to be valid"

// writeLoop writes replies in request order. It takes every reply that is
// ready at the front of the outbox, writes them in one go and flushes before
// it waits again, so a parked long-poll never holds back the replies written
// before it.
func (c *conn) writeLoop() {
	dw := &deadlineWriter{nc: c.nc, timeout: c.s.opts.RequestTimeout}
	bw := bufio.NewWriterSize(dw, 64<<10)
	var (
		buf     []byte
		replies []reply
		broken  bool
	)
	fail := func() {
		broken = true
		c.cancel()
		c.nc.Close()
	}
	for {
		var finished bool
		replies, finished = c.out.take(replies[:0])
		for _, rp := range replies {
			if broken {
				c.dropReply(rp)
				continue // drain so the read loop can finish
			}
			if rp.fatal != nil {
				c.s.log.Warn("closing connection", "peer", c.peer, "api", kmsg.NameForKey(rp.req.key), "reason", rp.fatal)
				_ = bw.Flush()
				fail()
				c.dropReply(rp)
				continue
			}
			rp = c.throttleReply(rp)
			buf = c.writeReply(bw, buf, rp)
			c.releaseCharge(rp.req.charge)
		}
		if !broken && len(replies) > 0 {
			// Flush also reports a write that failed before (large record
			// sets go straight to the socket, past the buffer).
			if err := bw.Flush(); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					c.s.log.Warn("closing connection: the client stopped reading its replies",
						"peer", c.peer, "request_timeout", c.s.opts.RequestTimeout)
				} else {
					c.s.log.Debug("closing connection: writing a reply failed", "peer", c.peer, "err", err)
				}
				fail()
			} else {
				c.touch()
			}
		}
		c.out.done(len(replies))
		clear(replies) // do not pin answered responses while waiting
		switch {
		case finished || (broken && c.out.isClosed()):
			return
		case broken:
			<-c.out.ready // drain until the read loop closes the outbox
			continue
		}
		select {
		case <-c.out.ready:
		case <-c.ctx.Done():
			// The connection is being torn down: replies still owed are
			// dropped (the peer is gone or the server is closing).
			fail()
		}
	}
}

// deadlineWriter writes to the socket in chunks and gives each chunk the
// whole RequestTimeout. A client that stops reading its replies loses the
// connection after RequestTimeout without progress, rather than holding
// the memory its replies take for good; one that reads a large reply
// slowly but steadily keeps it (a 50 MiB fetch over a slow link may take
// longer than RequestTimeout in all).
type deadlineWriter struct {
	nc      net.Conn
	timeout time.Duration
}

// writeChunk is how much one deadline covers: at 30 s, a reader slower
// than about 9 KB/s is cut.
const writeChunk = 256 << 10

func (w *deadlineWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		end := min(len(p), n+writeChunk)
		_ = w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
		m, err := w.nc.Write(p[n:end])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// dropReply gives back what a reply that will not be written holds.
func (c *conn) dropReply(rp reply) {
	if f, ok := rp.resp.(*kmsg.FetchResponse); ok {
		recycleFetch(f)
	}
	c.releaseCharge(rp.req.charge)
}

// writeReply encodes rp into bw (reusing buf) and returns the buffer to keep
// for the next reply.
func (c *conn) writeReply(bw *bufio.Writer, buf []byte, rp reply) []byte {
	c.s.metrics.observe(rp.req, rp.resp)
	if rp.resp == nil && rp.raw == nil {
		return buf // acks=0 produce: no response
	}
	if f, ok := rp.resp.(*kmsg.FetchResponse); ok && f.Version >= minFetchPieces && f.Version <= maxFetchPieces {
		buf = c.writeFetch(bw, buf[:0], rp.req.corr, f)
	} else {
		buf = encodeReply(buf[:0], rp)
		_, _ = bw.Write(buf) // a write error sticks in bw; the flush reports it
	}
	if f, ok := rp.resp.(*kmsg.FetchResponse); ok {
		c.s.metrics.countFetch(f)
		recycleFetch(f)
	}
	if cap(buf) > 1<<20 {
		// Do not pin a large buffer on an idle connection; share it (or,
		// past maxPooledBuffer, give it back to the garbage collector).
		putWriteBuf(buf)
		return nil
	}
	return buf
}

// writeFetch writes a fetch response frame with its record sets taken from
// where they were read into, not copied into buf (see fetchwire.go).
func (c *conn) writeFetch(bw *bufio.Writer, buf []byte, corr int32, f *kmsg.FetchResponse) []byte {
	buf = append(buf, 0, 0, 0, 0) // size, filled below
	buf = binary.BigEndian.AppendUint32(buf, uint32(corr))
	if f.IsFlexible() {
		buf = append(buf, 0) // empty header tags
	}
	head := len(buf)
	buf, c.pieces = encodeFetchPieces(buf, c.pieces[:0], f)
	size := head - 4
	for _, p := range c.pieces {
		size += p.b - p.a + len(p.rec)
	}
	binary.BigEndian.PutUint32(buf, uint32(size))
	_, _ = bw.Write(buf[:head]) // a write error sticks in bw; the flush reports it
	for _, p := range c.pieces {
		if p.rec != nil {
			_, _ = bw.Write(p.rec)
		} else {
			_, _ = bw.Write(buf[p.a:p.b])
		}
	}
	clear(c.pieces) // do not pin the record buffers
	return buf
}

func encodeReply(buf []byte, rp reply) []byte {
	buf = append(buf, 0, 0, 0, 0) // size, filled below
	if rp.token {
		buf = append(buf, rp.raw...)
		binary.BigEndian.PutUint32(buf[:4], uint32(len(buf)-4))
		return buf
	}
	buf = binary.BigEndian.AppendUint32(buf, uint32(rp.req.corr))
	if rp.raw != nil {
		buf = append(buf, rp.raw...)
	} else {
		// Flexible responses carry an empty tag buffer in the header, except
		// ApiVersions, whose response header is always v0 so clients can
		// parse it before they know our versions.
		if rp.resp.IsFlexible() && rp.resp.Key() != kmsg.ApiVersions.Int16() {
			buf = append(buf, 0)
		}
		buf = rp.resp.AppendTo(buf)
	}
	binary.BigEndian.PutUint32(buf[:4], uint32(len(buf)-4))
	return buf
}

// writeBufs shares large response buffers between connections.
var writeBufs sync.Pool // of *[]byte

func getWriteBuf(n int) []byte {
	if p, ok := writeBufs.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, n)
}

func putWriteBuf(b []byte) {
	if cap(b) > maxPooledBuffer {
		return
	}
	b = b[:0]
	writeBufs.Put(&b)
}
