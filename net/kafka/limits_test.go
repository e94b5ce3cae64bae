package kafka_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/net/kafka"
	"github.com/moonmq/moonmq/node"
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
func announce(t *testing.T, s *server, size int, key kmsg.Key) net.Conn {
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

func apiVersionsWorks(t *testing.T, s *server) {
	t.Helper()
	rc := dialRaw(t, s)
	require.NoError(t, rc.c.SetDeadline(time.Now().Add(2*time.Second)))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "moonmq-test", "1.0.0"
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
	s := startServer(t, node.Config{MaxQueuedRequestBytes: 512 << 20, RequestTimeout: 300 * time.Millisecond})
	var conns []net.Conn
	for range 6 {
		conns = append(conns, announce(t, s, 100<<20, kmsg.Produce))
	}
	eventually(t, "the six frames to be started", 2*time.Second, func() bool { return s.Connections() == 6 })
	apiVersionsWorks(t, s)
	require.Less(t, s.budget.inUse(), int64(6*kafka.FirstBodyChunk+1), "announced sizes are not reserved")
	for _, c := range conns {
		eventually(t, "a stalled request's connection to close", 3*time.Second, func() bool { return closedByServer(c) })
	}
	require.Zero(t, s.budget.inUse())
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	s := startServer(t, node.Config{ConnectionsMaxIdle: 200 * time.Millisecond})
	createTopic(t, s, "t", 1)
	idle := dialRaw(t, s)
	apiVersionsWorks(t, s)

	// A connection waiting for a long poll owes a reply: not idle.
	poll := dialRaw(t, s)
	req := fetchRequest("t", 1500*time.Millisecond)
	req.MinBytes = 1
	poll.send(req)

	passes, checks := s.fetchPasses.Load(), s.idleChecks.Load()
	eventually(t, "the idle connection to be closed", 3*time.Second, func() bool { return closedByServer(idle.c) })
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	poll.recv(resp)
	require.Len(t, resp.Topics, 1, "the long poll was answered")
	// Waiting is not spinning: a parked fetch reads again only when woken,
	// and a busy connection past its idle time checks once per idle time.
	require.LessOrEqual(t, s.fetchPasses.Load()-passes, int64(3), "parked fetch passes")
	require.LessOrEqual(t, s.idleChecks.Load()-checks, int64(20), "read-loop wake-ups over 1.5 s")
}

// fillTopic creates a one-partition topic holding a little more than n
// bytes of uncompressed 64 KiB records.
func fillTopic(t *testing.T, s *server, topic string, n int) {
	t.Helper()
	createTopic(t, s, topic, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	require.NoError(t, err)
	defer cl.Close()
	value := []byte(strings.Repeat("x", 64<<10))
	var rs []*kgo.Record
	for i := 0; i < n/len(value)+10; i++ {
		rs = append(rs, &kgo.Record{Value: value})
	}
	require.NoError(t, cl.ProduceSync(context.Background(), rs...).FirstErr())
}

// A client that sends requests but never reads the replies loses its
// connection after RequestTimeout, and what its replies held is returned.
// One reply far larger than any socket buffer makes the write stall.
func TestUnreadRepliesCloseTheConnection(t *testing.T) {
	const reply = 40 << 20
	s := startServer(t, node.Config{RequestTimeout: 300 * time.Millisecond, FetchMaxBytes: reply})
	fillTopic(t, s, "t", reply)
	eventually(t, "the producer to disconnect", 5*time.Second, func() bool { return s.Connections() == 0 })

	rc := dialRaw(t, s)
	req := fetchRequest("t", 0)
	req.MaxBytes, req.Topics[0].Partitions[0].PartitionMaxBytes = reply, reply
	rc.send(req) // and never read
	eventually(t, "the reply to be read from the log", 5*time.Second, func() bool { return s.respBudget.inUse() > 0 })
	eventually(t, "the non-reading client to be dropped", 10*time.Second, func() bool {
		return s.Connections() == 0 && s.respBudget.inUse() == 0
	})
}

// The write deadline is about progress: a consumer that reads a large
// reply steadily but takes longer than RequestTimeout for all of it (a
// slow link) keeps its connection.
func TestSlowButSteadyReaderKeepsItsConnection(t *testing.T) {
	const reply = 8 << 20
	s := startServer(t, node.Config{RequestTimeout: 200 * time.Millisecond, FetchMaxBytes: reply})
	fillTopic(t, s, "t", reply)

	rc := dialRaw(t, s)
	req := fetchRequest("t", 0)
	req.MaxBytes, req.Topics[0].Partitions[0].PartitionMaxBytes = reply, reply
	rc.send(req)
	var size [4]byte
	_, err := io.ReadFull(rc.c, size[:])
	require.NoError(t, err)
	total := int(binary.BigEndian.Uint32(size[:]))
	buf := make([]byte, 64<<10)
	got, start := 0, time.Now()
	for got < total {
		n, err := rc.c.Read(buf[:min(len(buf), total-got)])
		got += n
		require.NoError(t, err, "after %d of %d bytes in %v", got, total, time.Since(start))
		time.Sleep(3 * time.Millisecond) // the reader's pace: ~20 MB/s
	}
	require.Greater(t, time.Since(start), 200*time.Millisecond, "the reply took longer than RequestTimeout")
}

// Finding 4 of issue 10: one connection that pipelined 64 fetches and
// never read the answers pinned 3.3 GB. Now what its unwritten replies
// hold is bounded per connection, and the connection stops being read.
func TestUnreadFetchRepliesAreBounded(t *testing.T) {
	const connLimit = 4 << 20
	s := startServer(t, node.Config{ConnResponseBytes: connLimit, FetchMaxBytes: 2 << 20})
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

// Finding 2 of issue 10: a client could create __consumer_offsets first,
// with retention that deleted committed offsets. Internal topics belong to
// the broker: creating one is refused, and so is any change that would let
// retention delete its records.
func TestClientsCannotCreateOrBreakInternalTopics(t *testing.T) {
	s := startServer(t, node.Config{})
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
	md, err := kadm.NewClient(cl).ListTopicsWithInternal(ctx, "__consumer_offsets")
	require.NoError(t, err)
	require.False(t, md.Has("__consumer_offsets"), "nothing was created")

	// Made by its owner (the group coordinator, asked for a group's
	// coordinator), its settings are the owner's.
	findCoordinator(t, dialRaw(t, s))
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

// Partly received frames never wait on each other while holding part of
// the budget. Two 600 KiB frames each received past 512 KiB fill a 1 MiB
// budget exactly (bodies grow by doubling); holding that while waiting to
// grow would stall both, and every other client, for good. Instead one
// gives its part back, the other grows, a third client gets through, and
// both complete once their bodies arrive.
func TestPartlyReceivedFramesDoNotDeadlock(t *testing.T) {
	s := startServer(t, node.Config{MaxQueuedRequestBytes: 1 << 20, MaxRequestSize: 1 << 20})
	const size, first, second = 600 << 10, 300 << 10, 250 << 10
	var conns []net.Conn
	for range 2 {
		c := announce(t, s, size, kmsg.Produce)
		_, err := c.Write(make([]byte, first))
		require.NoError(t, err)
		conns = append(conns, c)
	}
	eventually(t, "both frames to hold 512 KiB", 2*time.Second, func() bool { return s.budget.inUse() == 1<<20 })
	for _, c := range conns { // both need to grow past 512 KiB now
		_, err := c.Write(make([]byte, second))
		require.NoError(t, err)
	}
	apiVersionsWorks(t, s)
	// Their headers say Produce v0, which is not served: each is answered.
	for _, c := range conns {
		_, err := c.Write(make([]byte, size-2-first-second))
		require.NoError(t, err)
	}
	for i, c := range conns {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		var n [4]byte
		_, err := io.ReadFull(c, n[:])
		require.NoError(t, err, "frame %d was received and answered", i)
		c.Close()
	}
	eventually(t, "the budget to drain", 5*time.Second, func() bool { return s.budget.inUse() == 0 })
	apiVersionsWorks(t, s)
}

// A frame that finds no room waits no longer than a stalled read would:
// its connection is closed after RequestTimeout, and others still work.
func TestAFrameWaitingForRoomIsBounded(t *testing.T) {
	s := startServer(t, node.Config{MaxQueuedRequestBytes: 1 << 20, MaxRequestSize: 1 << 20, RequestTimeout: 300 * time.Millisecond})
	s.budget.force(1<<20 - 1<<10) // what other requests hold, for good
	c := announce(t, s, 600<<10, kmsg.Produce)
	start := time.Now()
	_, err := c.Write(make([]byte, 100<<10))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err, "the connection was closed")
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "closed by the server, not by our deadline: %v", err)
	require.Less(t, time.Since(start), 3*time.Second)
	s.budget.release(1<<20 - 1<<10)
	apiVersionsWorks(t, s)
}

// smallBudgetServer serves topic "t" holding one 100-byte record, with a
// 64 KiB budget for replies waiting to be written.
func smallBudgetServer(t *testing.T) *server {
	t.Helper()
	s := startServer(t, node.Config{MaxQueuedResponseBytes: 64 << 10})
	createTopic(t, s, "t", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DefaultProduceTopic("t"))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(strings.Repeat("x", 100))}).FirstErr())
	return s
}

// A parked fetch whose read the budgets cut short waits for room without
// waking itself: its own releases (the unused grant, the discarded reply)
// must not end the wait, while a release by another reply does. Here
// other replies hold most of the server budget, and the data is below
// MinBytes.
func TestStarvedParkedFetchDoesNotSpin(t *testing.T) {
	s := smallBudgetServer(t)

	const others = 60 << 10
	s.respBudget.force(others) // what other connections' replies hold
	rc := dialRaw(t, s)
	req := fetchRequest("t", 1500*time.Millisecond)
	req.MinBytes = 1 << 20 // more than there is: it parks until MaxWait
	before := s.fetchPasses.Load()
	rc.send(req)
	eventually(t, "the fetch to park", 2*time.Second, func() bool { return s.fetchPasses.Load()-before >= 2 })
	parked := s.fetchPasses.Load()
	s.respBudget.release(others)
	eventually(t, "the released room to wake it", 2*time.Second, func() bool { return s.fetchPasses.Load() > parked })
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	rc.recv(resp)
	require.NotEmpty(t, resp.Topics[0].Partitions[0].RecordBatches, "answered with what there is at MaxWait")
	require.LessOrEqual(t, s.fetchPasses.Load()-before, int64(10), "partition-read passes of one parked fetch")
}

// A starved parked fetch whose room another fetch's pass held, and gave
// back quietly, does not wait for MaxWait: it looks again shortly. The
// fetch's waits run on a fake clock, so "shortly" is starvedRetry of it and
// MaxWait never comes.
func TestStarvedFetchLooksAgainAfterAQuietRelease(t *testing.T) {
	clk := clock.NewFake(time.Now())
	s := startServer(t, node.Config{MaxQueuedResponseBytes: 64 << 10, Clock: clk})
	createTopic(t, s, "small", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DefaultProduceTopic("small"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(1))
	require.NoError(t, err)
	defer cl.Close()
	for range 8 {
		require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(strings.Repeat("y", 1000))}).FirstErr())
	}

	held := s.respBudget.tryUpTo(64 << 10) // another parked fetch's pass, in progress
	before := s.fetchPasses.Load()
	rc := dialRaw(t, s)
	req := fetchRequest("small", 30*time.Second)
	req.MinBytes = 4 << 10 // what the 8 KiB of data satisfies once there is room
	rc.send(req)
	eventually(t, "the fetch to park, starved", 10*time.Second, func() bool {
		return s.fetchPasses.Load()-before >= 2 && slices.Contains(clk.Timers(), kafka.StarvedRetry)
	})
	s.respBudget.releaseQuiet(held) // that pass ends, as settle and discardFetch end theirs
	clk.Advance(kafka.StarvedRetry)
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	rc.recv(resp)
	require.NotEmpty(t, resp.Topics[0].Partitions[0].RecordBatches, "answered after starvedRetry, MaxWait still far")
}

// Several starved parked fetches (on their own connections) do not wake
// each other either: the room one takes and gives back within a pass is
// nothing new for the others, so each reads its partitions a few times
// over its MaxWait, not thousands of times.
func TestStarvedParkedFetchesDoNotWakeEachOther(t *testing.T) {
	s := smallBudgetServer(t)

	s.respBudget.force(60 << 10) // what other connections' replies hold
	defer s.respBudget.release(60 << 10)
	const fetchers = 8
	before := s.fetchPasses.Load()
	var conns []*rawConn
	for range fetchers {
		rc := dialRaw(t, s)
		req := fetchRequest("t", time.Second)
		req.MinBytes = 1 << 20 // more than there is: each parks until MaxWait
		rc.send(req)
		conns = append(conns, rc)
	}
	for _, rc := range conns {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = fetchRequest("t", 0).Version
		rc.recv(resp)
	}
	// Three passes each (the first read, the one that parks, the one at
	// MaxWait), one more whenever an earlier reply is written (a real
	// release), and a look every starvedRetry: about 3n + n(n-1)/2 +
	// n*MaxWait/starvedRetry. Waking each other on their own releases costs
	// hundreds of thousands.
	bound := 3*fetchers + fetchers*(fetchers-1)/2 + fetchers*int(time.Second/kafka.StarvedRetry)
	require.LessOrEqual(t, s.fetchPasses.Load()-before, int64(bound), "partition-read passes of %d parked fetches", fetchers)
}

// A parked fetch whose connection goes away gives back what it read.
func TestParkedFetchOfAClosedConnectionReleasesItsRoom(t *testing.T) {
	s := startServer(t, node.Config{})
	createTopic(t, s, "t", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DefaultProduceTopic("t"))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(strings.Repeat("x", 1000))}).FirstErr())
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		rc := &rawConn{t: t, c: c}
		req := fetchRequest("t", 5*time.Second)
		req.MinBytes = 1 << 20 // more than there is: it parks
		rc.send(req)
		eventually(t, "the fetch to park", 2*time.Second, func() bool { return s.parkedN.Load() > 0 })
		c.Close()
		eventually(t, "the parked fetch to end", 5*time.Second, func() bool { return s.parkedN.Load() == 0 })
	}
	eventually(t, "the budget to drain", 2*time.Second, func() bool { return s.respBudget.inUse() == 0 })
}
