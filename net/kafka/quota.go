package kafka

// Client quotas (issue 15), enforced as Kafka enforces them (KIP-219): a
// request is handled and answered at once, its response carries
// throttle_time_ms, and the connection then reads no request for that
// long (it is muted), so a client over its quota slows down instead of
// failing; franz-go and librdkafka also wait the throttle out themselves.
//
//   - producer_byte_rate: the bytes of each produce request, recorded when
//     it is answered (acks=0 too: no answer, but the mute).
//   - consumer_byte_rate: the record bytes of each fetch response. A fetch
//     that would go over is answered empty (its bytes are not counted) and
//     throttled, as Kafka does, so the consumer reads them after the delay;
//     and a fetch asks at most quota x 10 windows, so one response alone
//     never throttles.
//   - request_percentage: the time the request's handler ran on the
//     connection's read loop (not time spent waiting on fsync or a long
//     poll, as Kafka counts request-thread time), as a percentage of one
//     thread per second; capped at one window of delay.
//   - connection_creation_rate per IP: a connection over its IP's rate is
//     closed after the delay (Kafka delays the close so the client does
//     not reconnect at once); QuotaOptions.MaxConnectionCreationRate
//     paces the acceptor for all IPs.
//
// The user of a connection is its principal's name ("User:alice" is
// alice, unauthenticated connections are ANONYMOUS) and the client id is
// the request header's. Replica fetches and the handshake and inter-broker
// APIs are exempt.
//
// With no quota source the cost is a nil check per reply; with a source
// but no quotas, a call of the source and a version compare.

import (
	"fmt"
	"math"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/quota"
)

// QuotaOptions configure client quotas.
type QuotaOptions struct {
	// Source returns the cluster's client quotas and their version (the
	// node passes its controller's ClientQuotas); the quotas are rebuilt
	// only when the version changes. Nil enforces no client quota.
	Source func() ([]metadata.ClientQuota, uint64)
	// MaxConnectionCreationRate paces new connections from all IPs
	// together, per second (Kafka's max.connection.creation.rate): the
	// acceptor waits before taking a connection over it. 0 is unlimited.
	MaxConnectionCreationRate float64
	// Window and Samples are Kafka's quota.window.size.seconds (default
	// 1 s) and quota.window.num (default 11): rates are measured over
	// Samples windows of Window.
	Window  time.Duration
	Samples int
}

func (o QuotaOptions) validate() error {
	switch {
	case o.MaxConnectionCreationRate < 0 || math.IsNaN(o.MaxConnectionCreationRate):
		return fmt.Errorf("kafka: max connection creation rate %v must be a positive number of connections per second (0: unlimited)", o.MaxConnectionCreationRate)
	case o.Window < 0 || (o.Window > 0 && o.Window < time.Millisecond):
		return fmt.Errorf("kafka: quota window %v must be at least 1ms (0: Kafka's 1s)", o.Window)
	case o.Samples < 0:
		return fmt.Errorf("kafka: quota window count %d must not be negative (0: Kafka's 11)", o.Samples)
	}
	return nil
}

func (o QuotaOptions) enabled() bool {
	return o.Source != nil || o.MaxConnectionCreationRate > 0
}

// newQuotas is the server's quota manager, nil when nothing is enforced.
func newQuotas(o QuotaOptions) *quota.Manager {
	if !o.enabled() {
		return nil
	}
	return quota.New(quota.Options{Window: o.Window, Samples: o.Samples, BrokerConnectionRate: o.MaxConnectionCreationRate})
}

// syncQuotas brings the quotas up to the source's version. It reports
// whether quotas are enforced at all.
func (s *Server) syncQuotas() bool {
	if s.quotas == nil {
		return false
	}
	if src := s.opts.Quotas.Source; src != nil {
		qs, version := src()
		if err := s.quotas.Sync(version, func() []quota.Entry { return quotaEntries(qs) }); err != nil {
			s.log.Warn("ignoring client quotas this broker cannot apply", "version", version, "err", err)
		}
	}
	return true
}

// quotaEntries converts the metadata's quotas to engine/quota's (which,
// being engine, does not import cluster/metadata).
func quotaEntries(qs []metadata.ClientQuota) []quota.Entry {
	out := make([]quota.Entry, len(qs))
	for i, q := range qs {
		parts := make([]quota.Part, len(q.Entity))
		for j, p := range q.Entity {
			parts[j] = quota.Part{Type: p.Type, Name: p.Name}
		}
		out[i] = quota.Entry{Entity: parts, Values: q.Values}
	}
	return out
}

// quotaUser is the user name quotas know a connection by: the principal's
// name without its type.
func (c *conn) quotaUser() string {
	if _, name, ok := strings.Cut(c.principal, ":"); ok {
		return name
	}
	return c.principal
}

// quotaExempt are the APIs no client quota applies to: the handshake
// (before a client can know its quota) and what brokers send each other.
var quotaExempt = map[int16]bool{
	kmsg.ApiVersions.Int16():      true,
	kmsg.SASLHandshake.Int16():    true,
	kmsg.SASLAuthenticate.Int16(): true,
	kmsg.WriteTxnMarkers.Int16():  true,
}

// Quota labels of moonmq_quota_throttle_seconds.
const (
	quotaLabelProduce    = "producer_byte_rate"
	quotaLabelFetch      = "consumer_byte_rate"
	quotaLabelRequest    = "request_percentage"
	quotaLabelConnection = "connection_creation_rate"
)

// nanosToPercent turns handler time into request_percentage units: the
// percentage of one thread's second (Kafka's NanosToPercentagePerSecond).
const nanosToPercent = 100.0 / float64(time.Second)

// measureHandler reports whether a request's handler time is wanted (a
// request_percentage quota exists).
func (c *conn) measureHandler() bool {
	q := c.s.quotas
	return q != nil && q.Enabled(quota.Request)
}

// throttleReply records a reply against the client's quotas and, if the
// client is over one, sets the response's throttle time and mutes the
// connection for it. A throttled fetch is answered empty instead. It
// returns the reply to write. It is called once the answer is made (by
// dispatch for answers made on the read loop, by the write loop for the
// others) and records a reply once.
func (c *conn) throttleReply(rp reply) reply {
	r := rp.req
	if r == nil || r.quotaDone || rp.fatal != nil || r.kreq == nil || quotaExempt[r.key] ||
		!c.s.syncQuotas() || !c.s.quotas.AnyEnabled() {
		// Nothing to record: the common case of a broker without client
		// quotas costs a version check per reply.
		return rp
	}
	r.quotaDone = true
	q := c.s.quotas
	user, now := c.quotaUser(), time.Now()
	request := func() time.Duration {
		return q.Record(quota.Request, user, r.clientID, float64(r.handlerTime)*nanosToPercent, now)
	}
	var (
		d     time.Duration
		label = quotaLabelRequest
	)
	switch req := r.kreq.(type) {
	case *kmsg.ProduceRequest:
		d = q.Record(quota.Produce, user, r.clientID, float64(r.frameBytes), now)
		label = quotaLabelProduce
		if req.Acks != 0 { // Kafka does not enforce the request quota on acks=0
			if dr := request(); dr > d {
				d, label = dr, quotaLabelRequest
			}
		}
	case *kmsg.FetchRequest:
		f, ok := rp.resp.(*kmsg.FetchResponse)
		if req.ReplicaID >= 0 || !ok {
			return rp // a follower's fetch: replication is not a client
		}
		d = request()
		size := float64(fetchBytes(f))
		if df := q.Record(quota.Fetch, user, r.clientID, size, now); df > d {
			d, label = df, quotaLabelFetch
		}
		if d > 0 {
			// Answer empty: the consumer fetches the same records after
			// the delay, so they do not count now.
			q.Unrecord(quota.Fetch, user, r.clientID, size, now)
			empty := kmsg.NewPtrFetchResponse()
			empty.Version = f.Version
			recycleFetch(f)
			rp.resp = empty
		}
	default:
		d = request()
	}
	if d <= 0 {
		return rp
	}
	ms := int32(min(d.Milliseconds(), 1<<31-1))
	if tr, ok := rp.resp.(throttleSetter); ok {
		if cur, _ := tr.Throttle(); cur < ms {
			tr.SetThrottle(ms)
		}
	}
	c.mute(now.Add(d))
	c.s.metrics.quotaThrottle.WithLabelValues(label).Observe(d.Seconds())
	return rp
}

// throttleSetter is a response with a throttle_time_ms (every kmsg
// response with one has both methods).
type throttleSetter interface {
	Throttle() (int32, bool)
	SetThrottle(int32)
}

// fetchBytes is the record bytes a fetch response carries (its size but
// for a few bytes of framing per partition).
func fetchBytes(f *kmsg.FetchResponse) int {
	n := 0
	for _, t := range f.Topics {
		for _, p := range t.Partitions {
			n += len(p.RecordBatches)
		}
	}
	return n
}

// mute stops the read loop taking requests until until (later mutes win).
func (c *conn) mute(until time.Time) {
	u := until.UnixNano()
	for {
		cur := c.mutedUntil.Load()
		if cur >= u || c.mutedUntil.CompareAndSwap(cur, u) {
			return
		}
	}
}

// waitUnmuted holds the read loop while the connection is throttled.
func (c *conn) waitUnmuted() error {
	until := c.mutedUntil.Load()
	if until == 0 {
		return nil
	}
	d := time.Until(time.Unix(0, until))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	case <-c.s.draining:
		return errDraining
	}
}

// fetchQuotaCap lowers a fetch's MaxBytes to what the client's
// consumer_byte_rate allows in the quota's span, so one response alone
// never throttles (Kafka's getMaxValueInQuotaWindow).
func (c *conn) fetchQuotaCap(r *request, req *kmsg.FetchRequest) {
	if req.ReplicaID >= 0 || !c.s.syncQuotas() || !c.s.quotas.Enabled(quota.Fetch) {
		return
	}
	if mx, ok := c.s.quotas.MaxValueInWindow(quota.Fetch, c.quotaUser(), r.clientID); ok {
		limit := int32(max(min(mx, float64(1<<31-1)), 1))
		if req.MaxBytes <= 0 || req.MaxBytes > limit {
			req.MaxBytes = limit
		}
	}
}

// admitConnection applies the connection creation rates to a connection
// just accepted from ip: it paces the acceptor for the broker-wide rate
// and reports false when the IP is over its own (the connection is then
// closed after the delay).
func (s *Server) admitConnection(nc net.Conn, ip string) bool {
	if !s.syncQuotas() {
		return true
	}
	now := time.Now()
	if d := s.quotas.RecordConnection(ip, now); d > 0 {
		s.metrics.connRejects.WithLabelValues(rejectConnectionRate).Inc()
		s.metrics.quotaThrottle.WithLabelValues(quotaLabelConnection).Observe(d.Seconds())
		s.log.Debug("refusing connection over its IP's connection_creation_rate", "peer", nc.RemoteAddr().String(), "close_in", d)
		s.closeLater(nc, d)
		return false
	}
	if d := s.quotas.RecordBrokerConnection(now); d > 0 {
		s.metrics.quotaThrottle.WithLabelValues(quotaLabelConnection).Observe(d.Seconds())
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.ctx.Done():
		case <-s.draining:
		}
		t.Stop()
	}
	return true
}

// maxDelayedCloses bounds the refused connections held open until their
// delay ends; past it they are closed at once (a flood must not hold
// file descriptors).
const maxDelayedCloses = 1024

// closeLater closes a refused connection after d, or at once when too
// many wait already or the server closes.
func (s *Server) closeLater(nc net.Conn, d time.Duration) {
	s.mu.Lock()
	if len(s.delayedCloses) >= maxDelayedCloses || s.ctx.Err() != nil {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.delayedCloses[nc] = struct{}{}
	s.mu.Unlock()
	time.AfterFunc(d, func() {
		s.mu.Lock()
		delete(s.delayedCloses, nc)
		s.mu.Unlock()
		nc.Close()
	})
}
