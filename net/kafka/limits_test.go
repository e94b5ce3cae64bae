package kafka

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// announce opens a connection that sends a frame header claiming size
// bytes of a request with the given key, and nothing more.
func announce(t *testing.T, s *Server, size int, key kmsg.Key) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	hdr := binary.BigEndian.AppendUint32(nil, uint32(size))
	hdr = binary.BigEndian.AppendUint16(hdr, uint16(key.Int16()))
	_, err = c.Write(hdr)
	require.NoError(t, err)
	return c
}

func apiVersionsWorks(t *testing.T, s *Server) {
	t.Helper()
	rc := dialRaw(t, s)
	require.NoError(t, rc.c.SetDeadline(time.Now().Add(2*time.Second)))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	rc.send(req)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	rc.recv(resp)
	require.Zero(t, resp.ErrorCode)
}

// closedByServer reports whether the server closed c (a read sees EOF or a
// reset rather than a timeout).
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

// Finding 3 of issue 10: six connections announcing 100 MiB produces and
// sending nothing froze every client. Memory is now charged as bytes
// arrive, so they hold almost none, others are served at once, and they
// are closed when their body stops arriving.
func TestAnnouncedFramesDoNotStallOthers(t *testing.T) {
	s := startServer(t, Options{MaxQueuedRequestBytes: 512 << 20, RequestReadTimeout: 300 * time.Millisecond})
	var conns []net.Conn
	for range 6 {
		conns = append(conns, announce(t, s, 100<<20, kmsg.Produce))
	}
	eventually(t, "the six frames to be started", 2*time.Second, func() bool { return s.Connections() == 6 })
	apiVersionsWorks(t, s)
	require.Less(t, s.budget.inUse(), int64(6*firstBodyChunk+1), "announced sizes are not reserved")
	for _, c := range conns {
		eventually(t, "a stalled request's connection to close", 3*time.Second, func() bool { return closedByServer(c) })
	}
	require.Zero(t, s.budget.inUse())
}

// A big reservation that has to wait does not hold back small requests.
func TestBudgetLetsSmallRequestsPass(t *testing.T) {
	b := newMemBudget(100)
	require.NoError(t, b.acquire(context.Background(), 60))
	bigDone := make(chan error, 1)
	go func() { bigDone <- b.acquire(context.Background(), 80) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.NoError(t, b.acquire(ctx, 30), "a small request fits beside the held bytes")
	select {
	case <-bigDone:
		t.Fatal("the big request cannot fit yet")
	default:
	}
	b.release(60)
	b.release(30)
	require.NoError(t, <-bigDone)
	require.Equal(t, int64(80), b.inUse())
	// Alone, a request larger than the whole budget still gets through.
	b.release(80)
	require.NoError(t, b.acquire(context.Background(), 500))
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	s := startServer(t, Options{ConnectionsMaxIdle: 200 * time.Millisecond})
	createTopic(t, s, "t", 1)
	idle := dialRaw(t, s)
	apiVersionsWorks(t, s)

	// A connection waiting for a long poll owes a reply: not idle.
	poll := dialRaw(t, s)
	req := fetchRequest("t", 1500*time.Millisecond)
	req.MinBytes = 1
	poll.send(req)

	eventually(t, "the idle connection to be closed", 3*time.Second, func() bool { return closedByServer(idle.c) })
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	poll.recv(resp)
	require.Len(t, resp.Topics, 1, "the long poll was answered")
}

// Finding 4 of issue 10: one connection that pipelined 64 fetches and
// never read the answers pinned 3.3 GB. Now what its unwritten replies
// hold is bounded per connection, and the connection stops being read.
func TestUnreadFetchRepliesAreBounded(t *testing.T) {
	const connLimit = 4 << 20
	s := startServer(t, Options{ConnResponseBytes: connLimit, FetchMaxBytes: 2 << 20})
	createTopic(t, s, "t", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DefaultProduceTopic("t"),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(0))
	require.NoError(t, err)
	defer cl.Close()
	value := []byte(strings.Repeat("x", 64<<10))
	for i := 0; i < 200; i++ {
		cl.Produce(context.Background(), &kgo.Record{Value: value}, nil)
	}
	require.NoError(t, cl.Flush(context.Background()))

	c, err := net.Dial("tcp", s.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	rc := &rawConn{t: t, c: c}
	go func() {
		for i := 0; i < 64; i++ {
			req := fetchRequest("t", 0)
			req.MaxBytes = 2 << 20
			rc.send(req) // blocks once the server stops reading
		}
	}()
	eventually(t, "unread replies to fill the connection's budget", 5*time.Second, func() bool {
		return s.respBudget.inUse() >= connLimit
	})
	// Watch it for a while: without the bound, the remaining fetches would
	// take another 100 MB within milliseconds.
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		require.LessOrEqual(t, s.respBudget.inUse(), int64(connLimit+(2<<20)), "unwritten replies are bounded per connection")
	}

	// Reading the replies lets the rest through.
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	for i := 0; i < 64; i++ {
		var size [4]byte
		_, err := io.ReadFull(c, size[:])
		require.NoError(t, err, "reply %d, budget %d", i, s.respBudget.inUse())
		_, err = io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(size[:])))
		require.NoError(t, err)
	}
	eventually(t, "the budget to drain", 2*time.Second, func() bool { return s.respBudget.inUse() == 0 })
}

// Finding 8 of issue 10: malformed requests were logged with kmsg's
// client-side wording, "response did not contain enough data".
func TestTruncatedRequestIsCalledARequest(t *testing.T) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	topic := "some-topic"
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	body := encodeRequest(req, 1)
	_, err := decodeRequest(body[:len(body)-4])
	require.Error(t, err)
	require.NotContains(t, err.Error(), "response")
	require.Contains(t, err.Error(), "request ends before its fields do")
}

func TestMemoryIsReturnedAfterASpike(t *testing.T) {
	b := newMemBudget(1 << 30)
	stop := make(chan struct{})
	reclaimed := make(chan struct{}, 10)
	go reclaimAfterSpikes(stop, time.Millisecond, func() { reclaimed <- struct{}{} }, b)
	defer close(stop)
	b.force(reclaimAfterPeak)
	select {
	case <-reclaimed:
		t.Fatal("reclaimed while the spike is still held")
	case <-time.After(20 * time.Millisecond):
	}
	b.release(reclaimAfterPeak)
	select {
	case <-reclaimed:
	case <-time.After(5 * time.Second):
		t.Fatal("memory not reclaimed after the spike")
	}
	b.force(1 << 20) // a small burst is left to the runtime
	b.release(1 << 20)
	select {
	case <-reclaimed:
		t.Fatal("reclaimed after a small burst")
	case <-time.After(20 * time.Millisecond):
	}
}

// Finding 2 of issue 10: a client could create __consumer_offsets first,
// with retention that deleted committed offsets. Internal topics belong to
// the broker: creating one is refused, and so is any change that would let
// retention delete its records.
func TestClientsCannotCreateOrBreakInternalTopics(t *testing.T) {
	s := startServer(t, Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()))
	require.NoError(t, err)
	defer cl.Close()
	ctx := context.Background()
	for _, name := range []string{"__consumer_offsets", "__transaction_state"} {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		for k, v := range map[string]string{"cleanup.policy": "delete", "retention.ms": "1000", "segment.bytes": "1024"} {
			rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: kmsg.StringPtr(v)})
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Equal(t, kerr.InvalidRequest.Code, resp.Topics[0].ErrorCode, name)
		require.Contains(t, *resp.Topics[0].ErrorMessage, "prohibited")
	}
	_, ok := s.meta.Topic("__consumer_offsets")
	require.False(t, ok, "nothing was created")

	// Made by its owner, its settings are the owner's.
	_, err = s.meta.CreateTopic(ctx, "__consumer_offsets", 1, 1, nil, false)
	require.NoError(t, err)
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "__consumer_offsets"
	ar.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "cleanup.policy", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("delete")}}
	alter.Resources = append(alter.Resources, ar)
	aresp, err := alter.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidTopicException.Code, aresp.Resources[0].ErrorCode)
	require.Contains(t, *aresp.Resources[0].ErrorMessage, "fixed configs")
}
