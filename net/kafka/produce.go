package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/replica"
)

// Produce appends on the read loop, in request order, then parks the wait
// for fsync so that pipelined produces from many clients share group
// commits instead of queueing behind each other.
//
// Replication (issue 13): acks=1 waits for the leader's fsync only, as
// alone. acks=all (-1) on a replicated leader is refused before anything is
// written while the ISR is below min.insync.replicas (NOT_ENOUGH_REPLICAS),
// and is answered once the ISR's high watermark passed the append
// (WaitReplicated; NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank
// meanwhile). A partition this broker does not lead is
// NOT_LEADER_OR_FOLLOWER, with the metadata's leader in v10+ (leader.go).
func (c *conn) handleProduce(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	acks := req.Acks
	if acks != 0 && acks != 1 && acks != -1 {
		return c.produceError(req, resp, kerr.InvalidRequiredAcks.Code, nil), nil
	}
	if req.TransactionID != nil {
		// Until transactions land, say so rather than accepting writes we
		// cannot commit or abort (see handleInitProducerID for the code).
		c.refuseTransactions("Produce", *req.TransactionID)
		msg := errTransactionsUnsupported
		return c.produceError(req, resp, kerr.UnsupportedVersion.Code, &msg), nil
	}

	type pending struct {
		part *replica.Partition
		res  replica.ProduceResult
		out  *kmsg.ProduceResponseTopicPartition
	}
	var (
		waits   []pending
		leaders map[int32]bool // the leaders named in refusals (NodeEndpoints)
	)
	refuse := func(rp *kmsg.ProduceResponseTopicPartition, topic string, err error) {
		rp.ErrorCode = c.errCode(err)
		if req.Version < 10 {
			return
		}
		if h := c.currentLeader(rp.ErrorCode, topic, rp.Partition); h.ok {
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = h.id, h.epoch
			if leaders == nil {
				leaders = make(map[int32]bool)
			}
			leaders[h.id] = true
		}
	}
	// Allocate the whole response first so pointers into it stay valid for
	// the parked durability wait.
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti, t := range req.Topics {
		rt := &resp.Topics[ti]
		*rt = kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		for pi, p := range t.Partitions {
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			if metadata.IsInternalTopic(t.Topic) {
				// Only the coordinators write their topics; a forged commit
				// would be replayed as real at the next start.
				rp.ErrorCode = kerr.InvalidTopicException.Code
				rp.ErrorMessage = errMessage(fmt.Errorf("cannot append to internal topic %s", t.Topic))
				continue
			}
			part, err := c.s.broker.Partition(replica.TopicPartition{Topic: t.Topic, Partition: p.Partition})
			if err != nil {
				refuse(rp, t.Topic, err)
				continue
			}
			if acks == -1 {
				if err := part.CanAppend(); err != nil {
					refuse(rp, t.Topic, err)
					continue
				}
			}
			res, err := part.Append(p.Records) // stamped with the epoch the replica leads in
			if err != nil {
				refuse(rp, t.Topic, err)
				rp.ErrorMessage = produceErrMessage(err)
				c.s.log.Debug("produce rejected", "peer", c.peer, "topic", t.Topic, "partition", p.Partition, "err", err)
				continue
			}
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
			c.s.metrics.bytesIn.WithLabelValues(t.Topic).Add(float64(res.Bytes))
			c.s.metrics.recordsIn.WithLabelValues(t.Topic).Add(float64(res.Records))
			waits = append(waits, pending{part: part, res: res, out: rp})
		}
	}
	for _, b := range c.leaderEndpoints(leaders) {
		rb := kmsg.NewProduceResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.ID, b.Host, b.Port
		rb.Rack = rackOf(b)
		resp.Brokers = append(resp.Brokers, rb)
	}
	if acks == 0 {
		return nil, nil
	}
	if len(waits) == 0 {
		return resp, nil
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	// The flusher settles each partition's wait right after its fsync, and
	// the last one answers: no goroutine waits per request.
	pw := &produceWait{resp: resp, errCode: c.errCode, outs: make([]*kmsg.ProduceResponseTopicPartition, len(waits))}
	pw.remaining = len(waits)
	for i, w := range waits {
		pw.outs[i] = w.out
	}
	// The acks=all waits of appends made by a replicated leader: what the
	// append was made as decides, not the role now (a leadership lost
	// since must not turn the wait into a local fsync's).
	var replicated context.Context
	for _, w := range waits {
		if acks == -1 && w.res.Replicated() {
			replicated, pw.stopReplicated = context.WithCancel(c.ctx)
			break
		}
	}
	pw.mu.Lock() // callbacks may run before every wait is registered
	pw.answer = c.answerLater(r)
	pw.timer = c.s.opts.Clock.AfterFunc(timeout, pw.expire)
	// A connection torn down (peer gone, server closing) stops waiting at
	// once; nobody reads that answer, but the request stops counting as in
	// flight, so Close need not wait for the disk.
	pw.stopAbandon = context.AfterFunc(c.ctx, pw.expire)
	pw.mu.Unlock()
	for i, w := range waits {
		if replicated != nil && w.res.Replicated() {
			// The ISR's high watermark has no callbacks: one goroutine per
			// waiting partition, stopped when the request is answered.
			go func() { pw.settle(i, w.part.WaitReplicated(replicated, w.res)) }()
			continue
		}
		w.part.NotifyDurable(w.res, func(err error) { pw.settle(i, err) })
	}
	return nil, nil
}

// produceWait is an acks=-1/1 produce request waiting for its partitions'
// appends to become durable. Callbacks and the timeout race to finish it;
// once finished, the response belongs to the write loop and is not touched.
type produceWait struct {
	resp    *kmsg.ProduceResponse
	errCode func(error) int16

	mu          sync.Mutex
	outs        []*kmsg.ProduceResponseTopicPartition // the waiting partitions; nil once settled
	remaining   int
	finished    bool
	answer      func(kmsg.Response)
	timer       clock.Timer
	stopAbandon func() bool
	// stopReplicated ends the acks=all waits still running (nil: none);
	// set before any wait starts, never changed.
	stopReplicated context.CancelFunc
}

// finish stops the timer, the abandon hook and the replication waits, and
// answers. Called once, by whoever set finished.
func (w *produceWait) finish() {
	w.timer.Stop()
	w.stopAbandon()
	if w.stopReplicated != nil {
		w.stopReplicated()
	}
	w.answer(w.resp)
}

// settle records the outcome of partition i's durability wait and answers
// when it was the last.
func (w *produceWait) settle(i int, err error) {
	w.mu.Lock()
	if w.finished || w.outs[i] == nil {
		w.mu.Unlock()
		return
	}
	if err != nil {
		w.outs[i].ErrorCode = w.errCode(err)
		w.outs[i].BaseOffset = -1
	}
	w.outs[i] = nil
	w.remaining--
	done := w.remaining == 0
	w.finished = done
	w.mu.Unlock()
	if done {
		w.finish()
	}
}

// expire answers REQUEST_TIMED_OUT for the partitions still waiting when the
// request's timeout passes (their appends stay, as in Kafka: the client
// retries and idempotence dedups).
func (w *produceWait) expire() {
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		return
	}
	for i, out := range w.outs {
		if out != nil {
			out.ErrorCode = kerr.RequestTimedOut.Code
			out.BaseOffset = -1
			w.outs[i] = nil
		}
	}
	w.finished = true
	w.mu.Unlock()
	w.finish()
}

func (c *conn) produceError(req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, code int16, msg *string) kmsg.Response {
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.ErrorMessage = msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Acks == 0 {
		return nil
	}
	return resp
}

// produceErrMessage gives validation failures a message; other errors keep
// the bare code so internal details do not leak to clients.
func produceErrMessage(err error) *string {
	for _, e := range []error{batch.ErrCorrupt, batch.ErrTooLarge, batch.ErrInvalidRecord, batch.ErrUnsupportedMagic, replica.ErrInvalidTimestamp} {
		if errors.Is(err, e) {
			return errMessage(err)
		}
	}
	return nil
}

// errTransactionsUnsupported is the message Produce v8+ carries with a
// transactional refusal, for clients that print it.
const errTransactionsUnsupported = "MoonMQ does not support transactions yet"

// refuseTransactions logs a refused transactional request, once per
// connection: the client shows only an error code, so the broker's log says
// why.
func (c *conn) refuseTransactions(api, transactionalID string) {
	if c.refusedTxn {
		return
	}
	c.refusedTxn = true
	c.s.log.Warn("refused a transactional producer: MoonMQ does not support transactions yet",
		"api", api, "transactional_id", transactionalID, "peer", c.peer)
}
