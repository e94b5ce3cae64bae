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
	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/txncoord"
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
	// Authorization comes first, as in Kafka: WRITE on the transactional
	// id for the whole request, then WRITE on each topic.
	z := c.authz(r)
	if req.TransactionID != nil && !z.allowed(acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID) {
		return c.produceError(req, resp, kerr.TransactionalIDAuthorizationFailed.Code, nil), nil
	}
	writable := z.topics(acl.OpWrite, namesOf(req.Topics, func(t *kmsg.ProduceRequestTopic) string { return t.Topic }))
	acks := req.Acks
	if acks != 0 && acks != 1 && acks != -1 {
		return c.produceError(req, resp, kerr.InvalidRequiredAcks.Code, nil), nil
	}
	if req.TransactionID != nil && c.s.opts.Txns == nil {
		// Without a transaction coordinator, say so rather than accepting
		// writes nobody can commit or abort (see handleInitProducerID).
		c.refuseTransactions("Produce", *req.TransactionID)
		msg := errTransactionsUnsupported
		return c.produceError(req, resp, kerr.UnsupportedVersion.Code, &msg), nil
	}
	producer, code := transactionalProducer(req)
	if code != 0 {
		return c.produceError(req, resp, code, nil), nil
	}
	var verify *verifyBatch
	if producer != nil {
		verify = c.newVerifyBatch(*req.TransactionID, req.Version, time.Duration(req.TimeoutMillis)*time.Millisecond)
	}

	var leaders map[int32]bool // the leaders named in refusals (NodeEndpoints)
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
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	// The flusher settles each partition's wait right after its fsync, a
	// verification's answer resumes a transactional append, and the last
	// partition to settle answers: no goroutine waits per request. The
	// handler holds the wait open until every partition is registered.
	pw := &produceWait{resp: resp, errCode: c.errCode, acks: acks, remaining: 1, connCtx: c.ctx}
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
			if !writable.ok(t.Topic) {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
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
			if producer != nil && isTransactional(p.Records) {
				// Appended now, or once the coordinator verified the
				// partition is in the transaction (KIP-890).
				i := pw.add(rp)
				fn := verify.fn(txncoord.TP{Topic: t.Topic, Partition: p.Partition})
				part.AppendTxn(p.Records, fn, func(res replica.ProduceResult, err error) {
					if err != nil {
						c.s.log.Debug("transactional produce rejected", "peer", c.peer, "topic", t.Topic, "partition", p.Partition, "err", err)
					}
					pw.appended(i, part, t.Topic, res, err, c.s.metrics)
				})
				continue
			}
			res, err := part.Append(p.Records) // stamped with the epoch the replica leads in
			if err != nil {
				refuse(rp, t.Topic, err)
				rp.ErrorMessage = produceErrMessage(err)
				rp.ErrorRecords = recordErrors(err)
				c.s.log.Debug("produce rejected", "peer", c.peer, "topic", t.Topic, "partition", p.Partition, "err", err)
				continue
			}
			pw.appended(pw.add(rp), part, t.Topic, res, nil, c.s.metrics)
		}
	}
	if verify != nil {
		verify.flush() // one verification for every partition of the request
	}
	for _, b := range c.leaderEndpoints(leaders) {
		rb := kmsg.NewProduceResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.ID, b.Host, b.Port
		rb.Rack = rackOf(b)
		resp.Brokers = append(resp.Brokers, rb)
	}
	if acks == 0 {
		pw.mu.Lock()
		pw.finished = true // nobody is answered; the appends run their course
		pw.mu.Unlock()
		return nil, nil
	}
	pw.mu.Lock() // callbacks may run before the answer is registered
	if pw.remaining == 1 {
		// Nothing waits: answer now.
		pw.finished = true
		pw.mu.Unlock()
		return resp, nil
	}
	pw.answer = c.answerLater(r)
	pw.timer = c.s.opts.Clock.AfterFunc(timeout, pw.expire)
	// A connection torn down (peer gone, server closing) stops waiting at
	// once; nobody reads that answer, but the request stops counting as in
	// flight, so Close need not wait for the disk.
	pw.stopAbandon = context.AfterFunc(c.ctx, pw.expire)
	pw.mu.Unlock()
	pw.settle(-1, nil) // the handler's hold
	return nil, nil
}

// transactionalProducer finds the producer of a request's transactional
// batches, with Kafka's request-level refusals: transactional batches
// without a transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as
// Kafka answers), or of more than one producer id and epoch
// (INVALID_PRODUCER_ID_MAPPING). nil: the request has none.
func transactionalProducer(req *kmsg.ProduceRequest) (*[2]int64, int16) {
	var producer *[2]int64
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			h, err := batch.ParseHeader(p.Records)
			if err != nil || !h.IsTransactional() {
				continue // an invalid batch is refused by its partition
			}
			if req.TransactionID == nil {
				return nil, kerr.TransactionalIDAuthorizationFailed.Code
			}
			id := [2]int64{h.ProducerID, int64(h.ProducerEpoch)}
			if producer != nil && *producer != id {
				return nil, kerr.InvalidProducerIDMapping.Code
			}
			producer = &id
		}
	}
	return producer, 0
}

// isTransactional reports whether a partition's records start with a
// transactional batch (the partition checks the rest).
func isTransactional(records []byte) bool {
	h, err := batch.ParseHeader(records)
	return err == nil && h.IsTransactional()
}

// produceWait is a produce request waiting for its partitions: their
// verification and append (transactional ones) and their durability (or
// replication, acks=all). Callbacks and the timeout race to finish it;
// once finished, the response belongs to the write loop and is not
// touched.
type produceWait struct {
	resp    *kmsg.ProduceResponse
	errCode func(error) int16
	acks    int16
	connCtx context.Context

	mu sync.Mutex
	// replicated is the context of the acks=all waits of replicated
	// appends, made by the first of them and cancelled by stopReplicated
	// when the request is answered.
	replicated     context.Context
	stopReplicated context.CancelFunc
	outs           []*kmsg.ProduceResponseTopicPartition // by slot; nil once settled
	remaining      int                                   // slots not settled, plus the handler's hold
	finished       bool
	answer         func(kmsg.Response)
	timer          clock.Timer
	stopAbandon    func() bool
}

// add registers a partition that will settle later and returns its slot.
// Called by the handler only, before its hold is released.
func (w *produceWait) add(out *kmsg.ProduceResponseTopicPartition) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.outs = append(w.outs, out)
	w.remaining++
	return len(w.outs) - 1
}

// appended takes the outcome of slot i's append: a refusal settles it;
// an append fills its offsets and waits for its durability (or the ISR).
func (w *produceWait) appended(i int, part *replica.Partition, topic string, res replica.ProduceResult, err error, m *Metrics) {
	if err != nil {
		w.mu.Lock()
		if out := w.outs[i]; out != nil && !w.finished {
			out.ErrorMessage = produceErrMessage(err)
			out.ErrorRecords = recordErrors(err)
		}
		w.mu.Unlock()
		w.settle(i, err)
		return
	}
	m.bytesIn.WithLabelValues(topic).Add(float64(res.Bytes))
	m.recordsIn.WithLabelValues(topic).Add(float64(res.Records))
	if w.acks == 0 {
		return // nobody is answered
	}
	w.mu.Lock()
	if w.finished || w.outs[i] == nil {
		w.mu.Unlock()
		return // answered already (timed out): nothing waits
	}
	out := w.outs[i]
	out.BaseOffset, out.LogAppendTime, out.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
	// The acks=all waits of appends made by a replicated leader: what the
	// append was made as decides, not the role now (a leadership lost
	// since must not turn the wait into a local fsync's).
	var replicated context.Context
	if w.acks == -1 && res.Replicated() {
		if w.replicated == nil {
			w.replicated, w.stopReplicated = context.WithCancel(w.connCtx)
		}
		replicated = w.replicated
	}
	w.mu.Unlock()
	if replicated != nil {
		// The ISR's high watermark has no callbacks: one goroutine per
		// waiting partition, stopped when the request is answered.
		go func() { w.settle(i, part.WaitReplicated(replicated, res)) }()
		return
	}
	part.NotifyDurable(res, func(err error) { w.settle(i, err) })
}

// finish stops the timer, the abandon hook and the replication waits, and
// answers. Called once, by whoever set finished.
func (w *produceWait) finish() {
	w.timer.Stop()
	w.stopAbandon()
	w.mu.Lock()
	stop := w.stopReplicated
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	w.answer(w.resp)
}

// settle records the outcome of slot i (-1: the handler's hold) and
// answers when it was the last.
func (w *produceWait) settle(i int, err error) {
	w.mu.Lock()
	if w.finished || i >= 0 && w.outs[i] == nil {
		w.mu.Unlock()
		return
	}
	if i >= 0 {
		if err != nil {
			w.outs[i].ErrorCode = w.errCode(err)
			w.outs[i].BaseOffset = -1
		}
		w.outs[i] = nil
	}
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

// recordErrors names the records of a refusal by record (KIP-467, Produce
// v8+; older versions do not encode the field), as Kafka's
// RecordValidationException does: a compacted topic's keyless records.
func recordErrors(err error) []kmsg.ProduceResponseTopicPartitionErrorRecord {
	var refused *replica.RecordsRefusedError
	if !errors.As(err, &refused) {
		return nil
	}
	out := make([]kmsg.ProduceResponseTopicPartitionErrorRecord, 0, len(refused.Records))
	for _, r := range refused.Records {
		e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
		e.RelativeOffset = r.BatchIndex
		e.ErrorMessage = kmsg.StringPtr(r.Message)
		out = append(out, e)
	}
	return out
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
