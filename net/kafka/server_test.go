package kafka_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/internal/testnode"
	"github.com/moonmq/moonmq/net/kafka"
	"github.com/moonmq/moonmq/node"
)

// server is a whole MoonMQ node run in-process (internal/testnode), as
// `moonmq serve` assembles it, with the views of its Kafka listener's
// internals that export_test.go gives these tests.
type server struct {
	n                  *node.Node
	k                  *kafka.Server
	budget, respBudget budget
	fetchPasses        counter
	idleChecks         counter
	parkedN            counter
}

// budget and counter read like the fields they watch (s.budget.inUse(),
// s.parkedN.Load()).
type budget struct{ kafka.Budget }

func (b budget) inUse() int64          { return b.InUse() }
func (b budget) force(n int64)         { b.Force(n) }
func (b budget) release(n int64)       { b.Release(n) }
func (b budget) releaseQuiet(n int64)  { b.ReleaseQuiet(n) }
func (b budget) tryUpTo(n int64) int64 { return b.TryUpTo(n) }

type counter func() int64

func (c counter) Load() int64 { return c() }

// startServer runs a node with cfg (testnode fills the rest).
func startServer(t *testing.T, cfg node.Config) *server {
	t.Helper()
	n := testnode.Start(t, cfg)
	k := n.Kafka()
	return &server{n: n, k: k, budget: budget{k.RequestBudget()}, respBudget: budget{k.ResponseBudget()},
		fetchPasses: k.FetchPasses, idleChecks: k.IdleChecks, parkedN: k.ParkedRequests}
}

func (s *server) Addr() net.Addr   { return s.n.Addr() }
func (s *server) Connections() int { return s.k.Connections() }

// Shutdown is the Kafka listener's graceful stop alone (the node's
// Shutdown also closes storage, whose fsyncs some tests hold back).
func (s *server) Shutdown(ctx context.Context) error { return s.k.Shutdown(ctx) }

type rawConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialRaw(t *testing.T, s *server) *rawConn {
	c, err := net.Dial("tcp", s.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	return &rawConn{t: t, c: c}
}

// send writes a request and returns its correlation id.
func (r *rawConn) send(req kmsg.Request) int32 {
	r.corr++
	body := kafka.EncodeRequest(req, r.corr)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	_, err := r.c.Write(append(frame, body...))
	require.NoError(r.t, err)
	return r.corr
}

// recvFrame reads one response frame: its correlation id and its body.
func (r *rawConn) recvFrame() (int32, []byte) {
	var size [4]byte
	_, err := io.ReadFull(r.c, size[:])
	require.NoError(r.t, err)
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(r.c, buf)
	require.NoError(r.t, err)
	return int32(binary.BigEndian.Uint32(buf)), buf[4:]
}

// recvBody reads one response and returns its body undecoded (for answers
// that are not the request's response shape, such as UNSUPPORTED_VERSION).
func (r *rawConn) recvBody() []byte {
	_, body := r.recvFrame()
	return body
}

// recv reads one response into resp (whose version must match the request).
func (r *rawConn) recv(resp kmsg.Response) int32 {
	corr, body := r.recvFrame()
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:] // empty header tags
	}
	require.NoError(r.t, resp.ReadFrom(body))
	return corr
}

func createTopic(t *testing.T, s *server, name string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()))
	require.NoError(t, err)
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
}

// highWatermark asks, on a connection of its own, where partition 0 of
// topic ends (ListOffsets latest): its high watermark.
func highWatermark(t *testing.T, s *server, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 4
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rc := dialRaw(t, s)
	rc.send(req)
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.Version = req.Version
	rc.recv(resp)
	p := resp.Topics[0].Partitions[0]
	require.Zero(t, p.ErrorCode)
	return p.Offset
}

func fetchRequest(topic string, maxWait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	return req
}

// TestPipelinedResponsesKeepOrder sends a long-poll fetch and, behind it on
// the same connection, a metadata request: the metadata answer must wait
// for the fetch (Kafka answers in request order), while another
// connection is served during the poll.
func TestPipelinedResponsesKeepOrder(t *testing.T) {
	s := startServer(t, node.Config{})
	createTopic(t, s, "quiet", 1)

	rc := dialRaw(t, s)
	fetchCorr := rc.send(fetchRequest("quiet", 60*time.Second)) // outlives the 20 s connection deadline
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	mdCorr := rc.send(md)

	// Another connection is answered while the fetch is parked.
	other := dialRaw(t, s)
	other.send(md)
	omd := kmsg.NewPtrMetadataResponse()
	omd.Version = 9
	other.recv(omd)

	// Wake the fetch; its answer comes first, then the metadata behind it.
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DefaultProduceTopic("quiet"))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("x")}).FirstErr())
	fr := kmsg.NewPtrFetchResponse()
	fr.Version = 11
	require.Equal(t, fetchCorr, rc.recv(fr))
	mr := kmsg.NewPtrMetadataResponse()
	mr.Version = 9
	require.Equal(t, mdCorr, rc.recv(mr))
	require.Len(t, mr.Topics, 1)
}

// TestLongPollWakesOnProduce: a fetch parked on an empty partition returns
// as soon as a record is produced, well before MaxWait.
func TestLongPollWakesOnProduce(t *testing.T) {
	s := startServer(t, node.Config{})
	createTopic(t, s, "wake", 1)
	rc := dialRaw(t, s)
	rc.send(fetchRequest("wake", 60*time.Second)) // outlives the 20 s connection deadline

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DefaultProduceTopic("wake"))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("hi")}).FirstErr())

	fr := kmsg.NewPtrFetchResponse()
	fr.Version = 11
	rc.recv(fr)
	p := fr.Topics[0].Partitions[0]
	require.Equal(t, int16(0), p.ErrorCode)
	require.NotEmpty(t, p.RecordBatches)
	require.Equal(t, int64(1), p.HighWatermark)
}

func TestAutoCreateIsOffByDefault(t *testing.T) {
	s := startServer(t, node.Config{})
	rc := dialRaw(t, s)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	name := "nope"
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	md.AllowAutoTopicCreation = true
	rc.send(md)
	mr := kmsg.NewPtrMetadataResponse()
	mr.Version = 9
	rc.recv(mr)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, mr.Topics[0].ErrorCode)

	s2 := startServer(t, node.Config{AutoCreateTopics: true, DefaultPartitions: 3})
	rc2 := dialRaw(t, s2)
	rc2.send(md)
	mr = kmsg.NewPtrMetadataResponse()
	mr.Version = 9
	rc2.recv(mr)
	require.Equal(t, int16(0), mr.Topics[0].ErrorCode)
	require.Len(t, mr.Topics[0].Partitions, 3)
}

// produceRequest is a v9 produce of records to partition 0 of topic.
func produceRequest(topic string, acks int16, timeout time.Duration, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, acks, int32(timeout.Milliseconds())
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestProduceErrors(t *testing.T) {
	s := startServer(t, node.Config{})
	createTopic(t, s, "p", 1)
	rc := dialRaw(t, s)
	produce := func(acks int16, topic string, records []byte) *kmsg.ProduceResponse {
		rc.send(produceRequest(topic, acks, 5*time.Second, records))
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		rc.recv(resp)
		return resp
	}
	bad := batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []batch.Record{{Value: []byte("v")}})
	bad[len(bad)-1] ^= 0xff
	require.Equal(t, kerr.CorruptMessage.Code, produce(-1, "p", bad).Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, kerr.UnsupportedForMessageFormat.Code, produce(-1, "p", make([]byte, 70)).Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, produce(1, "missing", []byte{1}).Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, kerr.InvalidRequiredAcks.Code, produce(2, "p", []byte{1}).Topics[0].Partitions[0].ErrorCode)
}

// TestProduceTimesOutWaitingForDurability: an acks=all produce whose fsync
// does not come within its timeout gets REQUEST_TIMED_OUT, in order with the
// replies around it; its append stays in the log, as in Kafka. The produce
// timeouts and the group-commit window that holds the fsync back run on one
// fake clock, so the test decides what happens first instead of racing the
// machine: the timeout passes while the window is still open.
func TestProduceTimesOutWaitingForDurability(t *testing.T) {
	clk := clock.NewFake(time.Now())
	s := startServer(t, node.Config{Clock: clk, GroupCommitWindow: 3 * time.Second})
	createTopic(t, s, "slow", 1)
	rc := dialRaw(t, s)
	produce := func(timeout time.Duration) int32 {
		records := batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []batch.Record{{Value: []byte("v")}})
		return rc.send(produceRequest("slow", -1, timeout, records))
	}
	recv := func(corr int32) kmsg.ProduceResponseTopicPartition {
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		require.Equal(t, corr, rc.recv(resp))
		return resp.Topics[0].Partitions[0]
	}

	first := recv(produce(10 * time.Second)) // the first round does not wait
	require.Zero(t, first.ErrorCode)
	require.Equal(t, int64(0), first.BaseOffset)

	late, patient := produce(50*time.Millisecond), produce(10*time.Second)
	require.Eventually(t, func() bool {
		timers := clk.Timers()
		return slices.Contains(timers, 50*time.Millisecond) && slices.Contains(timers, 10*time.Second)
	}, 10*time.Second, time.Millisecond, "both produces appended and wait on their timeouts")
	clk.Advance(50 * time.Millisecond)
	timedOut := recv(late)
	require.Equal(t, kerr.RequestTimedOut.Code, timedOut.ErrorCode)
	require.Equal(t, int64(1), highWatermark(t, s, "slow"), "answered at its timeout, before the fsync")
	clk.Advance(3 * time.Second) // the window ends: one round covers both appends
	ok := recv(patient)
	require.Zero(t, ok.ErrorCode)
	require.Equal(t, int64(2), ok.BaseOffset, "the timed-out append stays")
}

// TestShutdownDeadlineCutsDurabilityWaits: a shutdown that runs out of time
// does not wait for fsyncs that have not come yet.
func TestShutdownDeadlineCutsDurabilityWaits(t *testing.T) {
	clk := clock.NewFake(time.Now())
	s := startServer(t, node.Config{Clock: clk, GroupCommitWindow: time.Hour})
	createTopic(t, s, "stuck", 1)
	rc := dialRaw(t, s)
	records := batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []batch.Record{{Value: []byte("v")}})
	rc.send(produceRequest("stuck", -1, time.Hour, records)) // the first round is immediate
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	rc.recv(resp)
	rc.send(produceRequest("stuck", -1, time.Hour, records)) // this one waits an hour for its fsync
	require.Eventually(t, func() bool { return s.parkedN.Load() == 1 }, 10*time.Second, time.Millisecond)

	// The window runs on a clock that never moves: the fsync cannot come,
	// so a Shutdown that returns did not wait for it.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.Shutdown(ctx), context.DeadlineExceeded)
	require.Zero(t, s.parkedN.Load())
}

func TestShutdownFinishesInFlightAndRefusesNew(t *testing.T) {
	s := startServer(t, node.Config{})
	createTopic(t, s, "s", 1)
	rc := dialRaw(t, s)
	corr := rc.send(fetchRequest("s", 30*time.Second))
	// Wait until the server has read the fetch and parked it.
	require.Eventually(t, func() bool { return s.parkedN.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	// The parked long poll is answered at once, not after 30 s.
	fr := kmsg.NewPtrFetchResponse()
	fr.Version = 11
	require.Equal(t, corr, rc.recv(fr))
	require.NoError(t, <-done)
	_, err := net.DialTimeout("tcp", s.Addr().String(), time.Second)
	require.Error(t, err, "the listener is closed")
}

func TestDescribeLogDirsReportsSizes(t *testing.T) {
	s := startServer(t, node.Config{})
	createTopic(t, s, "sized", 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DefaultProduceTopic("sized"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Value: make([]byte, 1000), Partition: 1}).FirstErr())

	adm := kadm.NewClient(cl)
	dirs, err := adm.DescribeAllLogDirs(context.Background(), nil)
	require.NoError(t, err)
	sizes := map[int32]int64{}
	dirs.Each(func(d kadm.DescribedLogDir) {
		require.NoError(t, d.Err)
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "sized" {
				sizes[p.Partition] = p.Size
			}
		})
	})
	require.Len(t, sizes, 2)
	require.Equal(t, int64(0), sizes[0])
	require.Greater(t, sizes[1], int64(1000))
}

// TestHostileRequestsCostOnlyTheirAnswer covers requests that once crashed
// or stalled the broker: a negative partition in ListOffsets, a fetch
// at an out-of-range offset with a long MaxWait (answered at once), and
// appends to an internal topic.
func TestHostileRequestsCostOnlyTheirAnswer(t *testing.T) {
	s := startServer(t, node.Config{})
	createTopic(t, s, "h", 1)
	rc := dialRaw(t, s)

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 4
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "h"
	for _, p := range []int32{-1, 0, 7} {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = p, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lt)
	rc.send(lo)
	lr := kmsg.NewPtrListOffsetsResponse()
	lr.Version = 4
	rc.recv(lr)
	codes := []int16{}
	for _, p := range lr.Topics[0].Partitions {
		codes = append(codes, p.ErrorCode)
	}
	require.Equal(t, []int16{kerr.UnknownTopicOrPartition.Code, 0, kerr.UnknownTopicOrPartition.Code}, codes)

	fr := fetchRequest("h", 60*time.Second) // longer than the connection's 20 s deadline
	fr.Topics[0].Partitions[0].FetchOffset = 100
	rc.send(fr)
	fresp := kmsg.NewPtrFetchResponse()
	fresp.Version = 11
	rc.recv(fresp)
	require.Equal(t, kerr.OffsetOutOfRange.Code, fresp.Topics[0].Partitions[0].ErrorCode)

	pr := kmsg.NewPtrProduceRequest()
	pr.Version, pr.Acks, pr.TimeoutMillis = 9, -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "__consumer_offsets"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []batch.Record{{Value: []byte("forged")}})
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	rc.send(pr)
	presp := kmsg.NewPtrProduceResponse()
	presp.Version = 9
	rc.recv(presp)
	require.Equal(t, kerr.InvalidTopicException.Code, presp.Topics[0].Partitions[0].ErrorCode)
}

// CreateTopics and CreatePartitions with a replica assignment: the
// replicas are taken as listed (here the only broker), partitions must be
// 0..n-1 once each, and a broker that is not registered is
// INVALID_REPLICA_ASSIGNMENT, with nothing created.
func TestCreateTopicsWithReplicaAssignment(t *testing.T) {
	s := startServer(t, node.Config{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()))
	require.NoError(t, err)
	defer cl.Close()
	ctx := context.Background()
	create := func(name string, parts ...[]int32) kmsg.CreateTopicsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
		for i, r := range parts {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(len(parts)-1-i), r // listed backwards: order is by index
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp.Topics[0]
	}
	got := create("assigned", []int32{1}, []int32{1})
	require.Zero(t, got.ErrorCode, "%v", got.ErrorMessage)
	require.Equal(t, int32(2), got.NumPartitions)
	require.Equal(t, int16(1), got.ReplicationFactor)

	bad := create("elsewhere", []int32{2})
	require.Equal(t, kerr.InvalidReplicaAssignment.Code, bad.ErrorCode)
	require.Contains(t, *bad.ErrorMessage, "broker 2 is not registered")
	twice := create("twice", []int32{1, 1})
	require.Equal(t, kerr.InvalidReplicaAssignment.Code, twice.ErrorCode)
	md := kmsg.NewPtrMetadataRequest()
	mresp, err := md.RequestWith(ctx, cl)
	require.NoError(t, err)
	for _, tp := range mresp.Topics {
		require.NotContains(t, []string{"elsewhere", "twice"}, *tp.Topic, "a refused assignment creates nothing")
	}

	grow := func(count int32, replicas ...[]int32) kmsg.CreatePartitionsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "assigned", count
		for _, r := range replicas {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = r
			rt.Assignment = append(rt.Assignment, a)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp.Topics[0]
	}
	g := grow(3, []int32{7})
	require.Equal(t, kerr.InvalidReplicaAssignment.Code, g.ErrorCode)
	g = grow(4, []int32{1})
	require.Equal(t, kerr.InvalidReplicaAssignment.Code, g.ErrorCode, "one list for two new partitions")
	g = grow(3, []int32{1})
	require.Zero(t, g.ErrorCode, "%v", g.ErrorMessage)
}
