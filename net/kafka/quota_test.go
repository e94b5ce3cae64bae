package kafka_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/net/kafka"
	"github.com/moonmq/moonmq/node"
)

// quotaSource is a test's client quotas: a static list under a version
// that changes when the list does, as the controller's would.
type quotaSource struct {
	mu      sync.Mutex
	quotas  []metadata.ClientQuota
	version uint64
}

func (q *quotaSource) set(qs ...metadata.ClientQuota) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.quotas, q.version = qs, q.version+1
}

func (q *quotaSource) get() ([]metadata.ClientQuota, uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.quotas, q.version
}

// clientQuota is one entity's quota: parts are type, name pairs, name ""
// for the type's <default>.
func clientQuota(key string, value float64, parts ...string) metadata.ClientQuota {
	q := metadata.ClientQuota{Values: map[string]float64{key: value}}
	for i := 0; i+1 < len(parts); i += 2 {
		p := metadata.QuotaEntityPart{Type: parts[i]}
		if parts[i+1] != "" {
			name := parts[i+1]
			p.Name = &name
		}
		q.Entity = append(q.Entity, p)
	}
	return q
}

// quotaWindow shortens Kafka's 1 s quota windows so a test spans several
// rate spans in a few seconds: 11 samples of 100 ms measure rates over
// about a second, and a new client's free burst is one second's quota.
const quotaWindow = 100 * time.Millisecond

func startQuotaServer(t *testing.T, src *quotaSource) *server {
	return startServer(t, node.Config{Quotas: kafka.QuotaOptions{Source: src.get, Window: quotaWindow}})
}

// throttleHook counts the throttles a franz-go client was told of.
type throttleHook struct{ n atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// produceFor produces value-sized records as fast as the client is let,
// for d, and returns the bytes acknowledged and the time taken.
func produceFor(t *testing.T, cl *kgo.Client, value []byte, d time.Duration) (int, time.Duration) {
	t.Helper()
	var (
		acked atomic.Int64
		errs  atomic.Int64
		wg    sync.WaitGroup
	)
	start := time.Now()
	for time.Since(start) < d {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				errs.Add(1)
				return
			}
			acked.Add(int64(len(value)))
		})
	}
	wg.Wait()
	require.Zero(t, errs.Load(), "a throttled producer slows down, it does not fail")
	return int(acked.Load()), time.Since(start)
}

// TestProducerByteRateQuota: a producer whose client id has a
// producer_byte_rate is slowed to it (what it gets acknowledged over a few
// seconds is within a bound of the quota, its free first burst included)
// and is told of the throttle, while a client id without a quota is never
// throttled; then a quota of the <default> user applies to every client.
func TestProducerByteRateQuota(t *testing.T) {
	const rate = 200 << 10 // bytes per second
	src := &quotaSource{}
	src.set(clientQuota("producer_byte_rate", rate, "client-id", "slow"))
	s := startQuotaServer(t, src)
	createTopic(t, s, "q", 1)
	value := incompressible(8 << 10) // quotas count bytes on the wire
	const buffered = 16              // records a producer holds, so one request is at most 128 KiB

	newProducer := func(id string, hook *throttleHook) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.ClientID(id), kgo.DefaultProduceTopic("q"),
			kgo.WithHooks(hook), kgo.MaxBufferedRecords(buffered), kgo.ProducerLinger(0),
			// Every record has the same value: compressed, a batch of them
			// would be tiny on the wire, which is what quotas count.
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}

	var slowHook throttleHook
	slow := newProducer("slow", &slowHook)
	bytes, took := produceFor(t, slow, value, 3*time.Second)
	// The rate spans 11 windows (1.1 s) and is at least 10 of them long,
	// so a new client's first second of quota is free; a request is
	// admitted and then throttled, so the last one's bytes may not have
	// been waited for yet: what gets through in T seconds is at most about
	// rate x (T + 1.1) plus one request (the producer's buffer), with a
	// margin for rounding.
	bound := func(took time.Duration) float64 {
		return rate*(took.Seconds()+1.1)*1.1 + buffered*float64(len(value))
	}
	limit := bound(took)
	t.Logf("slow producer: %d bytes in %v (%.0f B/s against a quota of %d B/s), %d throttles",
		bytes, took, float64(bytes)/took.Seconds(), rate, slowHook.n.Load())
	require.LessOrEqual(t, float64(bytes), limit, "the producer was not slowed to its quota")
	require.GreaterOrEqual(t, float64(bytes), rate*took.Seconds()*0.5, "a throttled producer still makes progress")
	require.Positive(t, slowHook.n.Load(), "the producer was told of the throttle")
	n, err := s.k.QuotaThrottles("producer_byte_rate")
	require.NoError(t, err)
	require.Positive(t, n)

	var fastHook throttleHook
	fast := newProducer("fast", &fastHook)
	bytes, _ = produceFor(t, fast, value, time.Second)
	require.Positive(t, bytes)
	require.Zero(t, fastHook.n.Load(), "a client id without a quota is not throttled")

	// A quota of the <default> user is a rate per user: ANONYMOUS here, for
	// every client id (a user-level quota comes before client-id ones).
	src.set(clientQuota("producer_byte_rate", rate, "user", ""))
	var otherHook throttleHook
	other := newProducer("other", &otherHook)
	bytes, took = produceFor(t, other, value, 3*time.Second)
	require.LessOrEqual(t, float64(bytes), bound(took))
	require.Positive(t, otherHook.n.Load())
}

// TestConsumerByteRateQuota: a consumer whose client id has a
// consumer_byte_rate reads at about that rate, sees throttles, and still
// reads every record in order (a throttled fetch is answered empty and
// the records come with a later one); another client id reads unthrottled.
func TestConsumerByteRateQuota(t *testing.T) {
	const rate = 200 << 10
	src := &quotaSource{}
	src.set(clientQuota("consumer_byte_rate", rate, "client-id", "slowc"))
	s := startQuotaServer(t, src)
	createTopic(t, s, "cq", 1)
	value := incompressible(8 << 10)
	const records = 128 // 1 MiB: about four seconds at the quota
	p, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DefaultProduceTopic("cq"), kgo.ClientID("loader"))
	require.NoError(t, err)
	defer p.Close()
	for i := range records {
		value[0] = byte(i)
		require.NoError(t, p.ProduceSync(context.Background(), &kgo.Record{Value: append([]byte(nil), value...)}).FirstErr())
	}

	consume := func(id string, hook *throttleHook) (int, time.Duration) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.ClientID(id), kgo.ConsumeTopics("cq"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(hook))
		require.NoError(t, err)
		defer cl.Close()
		start := time.Now()
		got, bytes := 0, 0
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for got < records {
			fs := cl.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "consumer %s read %d of %d records", id, got, records)
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch error: %v", err) })
			fs.EachRecord(func(r *kgo.Record) {
				require.Equal(t, int64(got), r.Offset, "records in order, none skipped")
				require.Equal(t, byte(got), r.Value[0])
				got++
				bytes += len(r.Value)
			})
		}
		return bytes, time.Since(start)
	}

	var slowHook throttleHook
	bytes, took := consume("slowc", &slowHook)
	t.Logf("slow consumer: %d bytes in %v (%.0f B/s against a quota of %d B/s), %d throttles",
		bytes, took, float64(bytes)/took.Seconds(), rate, slowHook.n.Load())
	require.Positive(t, slowHook.n.Load())
	// Reading 1 MiB at 200 KiB/s takes about 5 s less the free burst (1 s
	// of quota): far more than the unthrottled read below.
	require.GreaterOrEqual(t, took.Seconds(), float64(bytes)/rate-1.1-0.5, "the consumer was not slowed to its quota")
	n, err := s.k.QuotaThrottles("consumer_byte_rate")
	require.NoError(t, err)
	require.Positive(t, n)

	var fastHook throttleHook
	consume("fastc", &fastHook)
	require.Zero(t, fastHook.n.Load(), "a client id without a quota is not throttled")
}

// TestThrottledConnectionIsMuted (KIP-219): the response over the quota
// carries throttle_time_ms at once, and the broker reads nothing more of
// that connection for that long, even from a client that does not wait
// the throttle out itself; other connections are served meanwhile.
func TestThrottledConnectionIsMuted(t *testing.T) {
	src := &quotaSource{}
	// 2 KiB/s, measured over about a second: one 4 KiB produce is over it
	// by half again its bytes, a throttle of about a second.
	src.set(clientQuota("producer_byte_rate", 2<<10, "client-id", "raw"))
	s := startQuotaServer(t, src)
	createTopic(t, s, "m", 1)

	rc := dialRaw(t, s)
	req := produceRequest("m", 1, 5*time.Second, testBatch(t, 4<<10))
	rc.send(req) // dialRaw's client id, "cli", has no quota
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = req.Version
	rc.recv(resp)
	require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	require.Zero(t, resp.ThrottleMillis, "a client id without a quota is not throttled")

	raw := dialClient(t, s, "raw")
	sent := time.Now()
	raw.send(req)
	resp = kmsg.NewPtrProduceResponse()
	resp.Version = req.Version
	raw.recv(resp)
	require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode, "a throttled request is still served")
	throttle := time.Duration(resp.ThrottleMillis) * time.Millisecond
	require.Greater(t, throttle, 500*time.Millisecond)

	// Another connection is not held back.
	apiVersionsWorks(t, s)
	require.Less(t, time.Since(sent), throttle, "another connection waited for the throttled one")

	// The next request on the throttled connection is read only after the
	// throttle time.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	raw.send(md)
	mresp := kmsg.NewPtrMetadataResponse()
	mresp.Version = md.Version
	raw.recv(mresp)
	require.GreaterOrEqual(t, time.Since(sent), throttle, "the muted connection was served before its throttle ended")
}

// dialClient is dialRaw with a client id in every request header.
func dialClient(t *testing.T, s *server, clientID string) *clientConn {
	return &clientConn{rawConn: dialRaw(t, s), id: clientID}
}

type clientConn struct {
	*rawConn
	id string
}

func (c *clientConn) send(req kmsg.Request) {
	c.corr++
	b := binary.BigEndian.AppendUint32(nil, 0) // size, below
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(c.corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(c.id)))
	b = append(b, c.id...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_, err := c.c.Write(b)
	require.NoError(c.t, err)
}

// incompressible is n random bytes: quotas count the bytes on the wire,
// and franz-go compresses batches.
func incompressible(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// testBatch is a record batch of one record of n bytes.
func testBatch(t *testing.T, n int) []byte {
	t.Helper()
	return batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []batch.Record{{Value: make([]byte, n)}})
}

// TestRequestPercentageQuota: a client over its request_percentage is told
// to wait (at most one window) on any API.
func TestRequestPercentageQuota(t *testing.T) {
	src := &quotaSource{}
	src.set(clientQuota("request_percentage", 0.0001, "client-id", "busy"))
	s := startQuotaServer(t, src)
	c := dialClient(t, s, "busy")
	var throttled int32
	for range 20 {
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 9
		c.send(md)
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = md.Version
		c.recv(resp)
		if resp.ThrottleMillis > 0 {
			throttled = resp.ThrottleMillis
			break
		}
	}
	require.Positive(t, throttled, "no Metadata answer carried a throttle")
	require.LessOrEqual(t, throttled, int32(quotaWindow/time.Millisecond), "request throttles are capped at one window")
}

// TestConnectionCreationRateQuota: connections from an IP over its
// connection_creation_rate are closed unserved, counted, and the IP may
// connect again once its rate is back under; another IP is unaffected.
func TestConnectionCreationRateQuota(t *testing.T) {
	src := &quotaSource{}
	// 5 a second over a span of about a second: five at once, not six.
	src.set(clientQuota("connection_creation_rate", 5, "ip", "127.0.0.1"))
	s := startQuotaServer(t, src)
	for range 5 {
		apiVersionsWorks(t, s)
	}
	refused := func() bool {
		c, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		rc := &rawConn{t: t, c: c}
		require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
		req := kmsg.NewPtrApiVersionsRequest()
		rc.send(req)
		var b [4]byte
		_, err = c.Read(b[:])
		return err != nil // closed unanswered
	}
	require.True(t, refused(), "the sixth connection within the span was served")
	n, err := s.k.ConnectionRejects("connection_creation_rate")
	require.NoError(t, err)
	require.Equal(t, 1.0, n)

	// Another address of this host has no quota.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	c, err := d.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Logf("cannot dial from 127.0.0.2 (%v): skipping the other-IP check", err)
	} else {
		rc := &rawConn{t: t, c: c}
		require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
		req := kmsg.NewPtrApiVersionsRequest()
		rc.send(req)
		resp := kmsg.NewPtrApiVersionsResponse()
		rc.recv(resp)
		require.Zero(t, resp.ErrorCode)
		c.Close()
	}

	// Once the burst leaves the span, 127.0.0.1 connects again.
	eventually(t, "127.0.0.1 may connect again", 10*time.Second, func() bool { return !refused() })
}

// TestBrokerConnectionCreationRate: over the broker-wide connection rate
// the acceptor waits before taking the next connection, which is then
// served (Kafka's max.connection.creation.rate paces, it does not refuse).
func TestBrokerConnectionCreationRate(t *testing.T) {
	s := startServer(t, node.Config{Quotas: kafka.QuotaOptions{MaxConnectionCreationRate: 5, Window: quotaWindow}})
	for range 5 {
		apiVersionsWorks(t, s)
	}
	// The sixth within the span (about a second, padded): up to (6-5)/5 of
	// it, 200 ms, less the part of the span the first five took.
	start := time.Now()
	apiVersionsWorks(t, s)
	took := time.Since(start)
	n, wait, err := s.k.QuotaThrottleTime("connection_creation_rate")
	require.NoError(t, err)
	require.Equal(t, uint64(1), n, "the acceptor did not wait")
	require.Positive(t, wait)
	require.GreaterOrEqual(t, took, wait, "the connection was served before the acceptor's wait ended")
	refused, err := s.k.ConnectionRejects("connection_creation_rate")
	require.NoError(t, err)
	require.Zero(t, refused)
}

func TestQuotaOptionsValidate(t *testing.T) {
	for _, q := range []kafka.QuotaOptions{
		{MaxConnectionCreationRate: -1},
		{Window: time.Microsecond},
		{Window: -time.Second},
		{Samples: -1},
	} {
		o := kafka.Options{Quotas: q}
		require.Error(t, o.Validate(), "%+v", q)
	}
	o := kafka.Options{Quotas: kafka.QuotaOptions{MaxConnectionCreationRate: 10, Window: time.Second, Samples: 11}}
	require.NoError(t, o.Validate())
}

// TestAcksZeroProduceIsThrottled: an acks=0 produce has no response to
// carry a throttle, but it counts against the quota and mutes the
// connection all the same (Kafka does the same).
func TestAcksZeroProduceIsThrottled(t *testing.T) {
	src := &quotaSource{}
	src.set(clientQuota("producer_byte_rate", 2<<10, "client-id", "zero"))
	s := startQuotaServer(t, src)
	createTopic(t, s, "z", 1)
	c := dialClient(t, s, "zero")
	sent := time.Now()
	c.send(produceRequest("z", 0, 5*time.Second, testBatch(t, 4<<10)))
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	c.send(md)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = md.Version
	c.recv(resp)
	n, throttle, err := s.k.QuotaThrottleTime("producer_byte_rate")
	require.NoError(t, err)
	require.Equal(t, uint64(1), n)
	require.Greater(t, throttle, 500*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(sent), throttle, "the request after the throttled acks=0 produce was not held back")
}

// TestUserQuotaThroughKadm, end to end: a producer_byte_rate for user
// alice set with kadm.AlterClientQuotas (stored by the controller, which
// the node's listener takes its quotas from) throttles alice's producer,
// whatever its client id, and not bob's.
func TestUserQuotaThroughKadm(t *testing.T) {
	s := startServer(t, node.Config{Quotas: kafka.QuotaOptions{Window: quotaWindow}})
	// Connections from these addresses act as these principals (as SASL
	// would make them); others are ANONYMOUS.
	as := map[string]string{"127.0.0.5": "User:alice", "127.0.0.6": "User:bob"}
	s.k.SetPrincipalOf(func(nc net.Conn) string {
		host, _, _ := net.SplitHostPort(nc.RemoteAddr().String())
		if p, ok := as[host]; ok {
			return p
		}
		return kafka.AnonymousPrincipal
	})
	createTopic(t, s, "uq", 1)
	ctx := context.Background()
	admin, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()))
	require.NoError(t, err)
	defer admin.Close()
	adm := kadm.NewClient(admin)
	alice := "alice"
	entity := kadm.ClientQuotaEntity{{Type: "user", Name: &alice}}
	altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 4096}}}})
	require.NoError(t, err)
	for _, a := range altered {
		require.NoError(t, a.Err)
	}

	value := incompressible(8 << 10)
	produceAs := func(ip, clientID string) int64 {
		var hook throttleHook
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.Dialer(d.DialContext), kgo.ClientID(clientID),
			kgo.DefaultProduceTopic("uq"), kgo.WithHooks(&hook), kgo.ProducerBatchCompression(kgo.NoCompression()))
		require.NoError(t, err)
		defer cl.Close()
		// 8 KiB against 4 KiB/s over about a second: throttled once, for
		// about a second; the second produce waits it out and is answered.
		for range 2 {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr())
		}
		return hook.n.Load()
	}
	probe := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.5")}}
	if c, err := probe.Dial("tcp", s.Addr().String()); err != nil {
		t.Skipf("cannot dial from 127.0.0.5: %v", err)
	} else {
		c.Close()
	}
	require.Positive(t, produceAs("127.0.0.5", "any-client"), "alice's quota was not enforced")
	require.Zero(t, produceAs("127.0.0.6", "any-client"), "bob has no quota")
}
