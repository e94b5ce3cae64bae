package kafka

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/replica"
)

// Fetch sessions (KIP-227) are optional for a broker: answering SessionID 0
// tells clients to keep sending full fetches, which is what MoonMQ does.
//
// Replica fetches (issue 13): a Fetch with ReplicaID >= 0 (the top-level
// field of v4-v12; v15's ReplicaState comes with serving v15) is a
// follower's. The partition decides (engine/replica): a replicated leader
// reads to its committed end and reports the fetch offset to its ISR, a
// broker the ISR does not know or a stale or future epoch is refused
// (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), and
// the answer carries the HW the fetch made. Long polls wake on the leader's
// committed end as well as its HW. A consumer fetching from a follower is
// NOT_LEADER_OR_FOLLOWER; v12 answers carry the metadata's leader in
// CurrentLeader (leader.go).

func (c *conn) handleFetch(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.FetchRequest)
	c.fetchQuotaCap(r, req)
	if req.SessionID != 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	}
	// Decided once for the request, not at each pass of a long poll: a
	// follower needs CLUSTER_ACTION for everything, a consumer READ on
	// each topic (Kafka's handleFetchRequest).
	z := c.authz(r)
	var readable topicSet
	if req.ReplicaID >= 0 {
		if !z.cluster(acl.OpClusterAction) {
			readable = noTopics
		}
	} else {
		readable = z.topics(acl.OpRead, namesOf(req.Topics, func(t *kmsg.FetchRequestTopic) string { return t.Topic }))
	}
	resp, bytes, _, _, charge := c.fetchOnce(req, readable)
	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	// Like Kafka, a partition error (out of range, unknown partition)
	// answers at once: the client has to act on it, waiting helps nobody.
	if bytes >= int(req.MinBytes) || maxWait <= 0 || fetchHasError(resp) {
		r.charge = charge
		return resp, nil
	}
	c.discardFetch(resp, charge)
	return nil, func() kmsg.Response {
		ctx, cancel := c.withTimeout(c.ctx, maxWait)
		defer cancel()
		for {
			if c.ctx.Err() != nil {
				return req.ResponseKind() // the connection is gone: nothing to read for it
			}
			// fetchOnce takes the logs' change channels before reading, so
			// an append between the read and the wait still wakes us.
			resp, bytes, changed, starved, charge := c.fetchOnce(req, readable)
			if bytes >= int(req.MinBytes) || ctx.Err() != nil || len(changed) == 0 || c.draining() {
				r.charge = charge
				return resp
			}
			c.discardFetch(resp, charge)
			changed = append(changed, c.s.draining)
			if !starved {
				replica.WaitAny(ctx, changed)
				continue
			}
			// A read the budgets cut short also waits for room. The
			// channels are taken after the discard, whose releases would
			// otherwise wake this fetch at once, again and again. Other
			// parked fetches give back quietly what they take within a
			// pass, so room one of them held while this fetch read frees
			// up unannounced: a starved fetch also looks again shortly.
			changed = append(changed, c.respBudget.released(), c.s.respBudget.released())
			wctx, cancel := c.withTimeout(ctx, starvedRetry)
			replica.WaitAny(wctx, changed)
			cancel()
		}
	}
}

// withTimeout is context.WithTimeout on the server's clock: the context is
// cancelled once d has passed on it.
func (c *conn) withTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	t := c.s.opts.Clock.AfterFunc(d, cancel)
	return ctx, func() {
		t.Stop()
		cancel()
	}
}

// starvedRetry is how soon a parked fetch the budgets starved reads again
// without being woken.
const starvedRetry = 20 * time.Millisecond

// fetchCharge is the fetched record data a reply holds against the
// connection's and the server's response budgets until it is written.
type fetchCharge struct{ conn, server int64 }

// grantFetch takes room for up to n bytes of records from both budgets,
// without waiting: a fetch answers with what fits.
func (c *conn) grantFetch(n int64) fetchCharge {
	g := c.respBudget.tryUpTo(n)
	s := c.s.respBudget.tryUpTo(g)
	c.respBudget.release(g - s)
	return fetchCharge{conn: s, server: s}
}

// settle adjusts a grant to the bytes really used: the unused part goes
// back (without waking the server budget's waiters: it was free when the
// pass began); a first batch larger than the grant is charged in full (it
// is always returned).
func (c *conn) settle(ch fetchCharge, used int64) fetchCharge {
	switch {
	case used < ch.conn:
		c.respBudget.release(ch.conn - used)
		c.s.respBudget.releaseQuiet(ch.server - used)
	case used > ch.conn:
		c.respBudget.force(used - ch.conn)
		c.s.respBudget.force(used - ch.server)
	}
	return fetchCharge{conn: used, server: used}
}

// releaseCharge gives a written (or dropped) reply's room back.
func (c *conn) releaseCharge(ch fetchCharge) {
	c.respBudget.release(ch.conn)
	c.s.respBudget.release(ch.server)
}

// discardFetch drops the response of a fetch that parks instead. Its room
// goes back to the server budget quietly, as in settle: only parked
// fetches wait on that budget, and room taken and returned by one of them
// is nothing new for the others. The connection's budget still notifies
// (its read loop may wait on it).
func (c *conn) discardFetch(resp *kmsg.FetchResponse, ch fetchCharge) {
	recycleFetch(resp)
	c.respBudget.release(ch.conn)
	c.s.respBudget.releaseQuiet(ch.server)
}

// fetchOnce reads every requested partition once. It returns the response,
// the record bytes it holds, the channels to wait on before reading again
// (each partition's change channel, captured before reading), whether the
// response budgets cut a read short (then a parked fetch waits for room
// too), and the budget charge of the records.
//
// Room is taken from the budgets partition by partition, for what each
// read may return, and what the read did not use is given back at once.
// Topics readable does not allow are answered TOPIC_AUTHORIZATION_FAILED.
func (c *conn) fetchOnce(req *kmsg.FetchRequest, readable topicSet) (resp *kmsg.FetchResponse, bytes int, changed []<-chan struct{}, starved bool, charge fetchCharge) {
	c.s.fetchPasses.Add(1)
	resp = req.ResponseKind().(*kmsg.FetchResponse)
	// The client's sizes are capped by the broker's, so one consumer cannot
	// make the broker buffer gigabytes (Kafka's fetch.max.bytes).
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 || maxBytes > c.s.opts.FetchMaxBytes {
		maxBytes = c.s.opts.FetchMaxBytes
	}
	// A connection with no fetched data outstanding always gets a first
	// batch, even past the server budget: every consumer progresses, and
	// each connection overshoots by one batch at most.
	mayForce := c.respBudget.inUse() == 0
	total := 0
	remaining := maxBytes
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.RecordBatches = []byte{} // librdkafka rejects a null record set
			if !readable.ok(t.Topic) {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			part, err := c.s.broker.Partition(replica.TopicPartition{Topic: t.Topic, Partition: p.Partition})
			if err != nil {
				rp.ErrorCode = c.errCode(err)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			var grant fetchCharge
			res, err := part.Fetch(replica.FetchParams{
				Offset: p.FetchOffset, Isolation: replica.IsolationLevel(req.IsolationLevel),
				ReplicaID: req.ReplicaID, CurrentLeaderEpoch: p.CurrentLeaderEpoch,
				// Asked only when there is something to read: a partition at
				// its end takes no room.
				Room: func() ([]byte, int, bool) {
					want := min(max(int(p.PartitionMaxBytes), 0), remaining)
					grant = c.grantFetch(int64(want))
					// Starved: less than even empty budgets would have given
					// (a want beyond a budget's whole size never fits).
					if grant.conn < min(int64(want), c.respBudget.limit, c.s.respBudget.limit) {
						starved = true
					}
					if grant.conn == 0 && (!mayForce || total > 0) {
						return nil, 0, false
					}
					return getFetchBuf(), int(grant.conn), true
				},
			})
			if res.Changed != nil {
				changed = append(changed, res.Changed)
			}
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = res.HighWatermark, res.LastStable, res.LogStart
			rp.ErrorCode = c.errCode(err)
			if req.Version >= 12 {
				if h := c.currentLeader(rp.ErrorCode, t.Topic, p.Partition); h.ok {
					rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = h.id, h.epoch
				}
			}
			for _, a := range res.Aborted {
				rp.AbortedTransactions = append(rp.AbortedTransactions,
					kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
			}
			if len(res.Batches) > 0 {
				rp.RecordBatches = res.Batches
				remaining -= len(res.Batches)
				total += len(res.Batches)
			}
			used := c.settle(grant, int64(len(res.Batches))) // nothing when Room was not asked
			charge.conn += used.conn
			charge.server += used.server
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, total, changed, starved, charge
}

// maxPooledBuffer is the largest buffer kept in a pool for reuse.
const maxPooledBuffer = 8 << 20

// fetchBufs recycles the buffers partitions are read into. A consumer
// streaming a log reads megabytes per request; allocating them fresh makes
// the garbage collector, not the disk or the socket, the bottleneck.
var fetchBufs sync.Pool // of *[]byte

func getFetchBuf() []byte {
	if p, ok := fetchBufs.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return nil
}

func fetchHasError(resp *kmsg.FetchResponse) bool {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return true
			}
		}
	}
	return false
}

// countFetch adds a written fetch response to the per-topic out metrics.
func (m *Metrics) countFetch(resp *kmsg.FetchResponse) {
	for _, t := range resp.Topics {
		var bytes, records int
		for _, p := range t.Partitions {
			if len(p.RecordBatches) == 0 {
				continue
			}
			bytes += len(p.RecordBatches)
			_ = batch.Iterate(p.RecordBatches, func(h batch.Header, _ []byte) bool {
				records += int(h.NumRecords)
				return true
			})
		}
		if bytes > 0 {
			m.bytesOut.WithLabelValues(t.Topic).Add(float64(bytes))
			m.recordsOut.WithLabelValues(t.Topic).Add(float64(records))
		}
	}
}

// recycleFetch returns a written fetch response's record buffers to the
// pool. The caller must hold the only reference to resp.
func recycleFetch(resp *kmsg.FetchResponse) {
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			b := resp.Topics[ti].Partitions[pi].RecordBatches
			// Keep mid-sized buffers for reuse; huge ones go back to the
			// garbage collector rather than pinning memory after a spike.
			if cap(b) >= 64<<10 && cap(b) <= maxPooledBuffer {
				b = b[:0]
				fetchBufs.Put(&b)
			}
			resp.Topics[ti].Partitions[pi].RecordBatches = nil
		}
	}
}
