package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/coord"
	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/engine/txncoord"
)

// The transaction coordinator's APIs (KIP-98, KIP-890), answered through
// Options.Txns (engine/txncoord) by the node that leads the transactional
// id's __transaction_state partition:
//
//   - InitProducerId v0-5 with a transactional id (offsets.go routes it
//     here): epoch bumps, fencing, KIP-360 expected id and epoch.
//   - AddPartitionsToTxn v0-3 (clients) and v4-5 (brokers: verification,
//     KIP-890 part 1, and the implicit add of part 2).
//   - AddOffsetsToTxn v0-4: the group's __consumer_offsets partition.
//   - EndTxn v0-5 (v5: the epoch bump of transaction version 2).
//   - DescribeTransactions v0, ListTransactions v0-1.
//
// Version-dependent codes are Kafka's: PRODUCER_FENCED is
// INVALID_PRODUCER_EPOCH to InitProducerId v0-3, AddPartitionsToTxn and
// AddOffsetsToTxn v0-1 and EndTxn v0-1. Without a coordinator every one of
// them is COORDINATOR_NOT_AVAILABLE (InitProducerId keeps refusing
// transactional ids as before).

// txnWait bounds a coordinator request's wait (the durability of its
// record on the ISR, a producer id allocation).
const txnWait = 30 * time.Second

// maxTxnRequestItems bounds what one request may ask of the coordinator:
// transactions and partitions of an AddPartitionsToTxn v4+, ids of a
// DescribeTransactions.
const maxTxnRequestItems = 10000

// fencedCode is code with PRODUCER_FENCED replaced by
// INVALID_PRODUCER_EPOCH for a request version older than newSince.
func fencedCode(code, version, newSince int16) int16 {
	if code == kerr.ProducerFenced.Code && version < newSince {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// waitTxn waits for a coordinator reply within the request's budget.
func waitTxn[T any](c *conn, r *txncoord.Reply[T]) (T, error) {
	ctx, cancel := context.WithTimeout(c.ctx, txnWait)
	defer cancel()
	return r.Wait(ctx)
}

// initTransactional answers InitProducerId with a transactional id.
func (c *conn) initTransactional(req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) (kmsg.Response, func() kmsg.Response) {
	txns := c.s.opts.Txns
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if (req.ProducerID < 0) != (req.ProducerEpoch < 0) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	var expected *txncoord.PidEpoch
	if req.ProducerID >= 0 {
		expected = &txncoord.PidEpoch{ProducerID: req.ProducerID, Epoch: req.ProducerEpoch}
	}
	return nil, func() kmsg.Response {
		ctx, cancel := context.WithTimeout(c.ctx, txnWait)
		defer cancel()
		v, err := txns.InitProducerID(ctx, *req.TransactionalID, req.TransactionTimeoutMillis, expected).Wait(ctx)
		if err == nil {
			err = v.Err
		}
		if err != nil {
			resp.ErrorCode = fencedCode(c.errCode(err), req.Version, 4)
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = v.ProducerID, v.Epoch
		return resp
	}
}

// txnPartitions checks the partitions of a transaction request exist:
// an unknown one is UNKNOWN_TOPIC_OR_PARTITION; an internal topic's is
// TOPIC_AUTHORIZATION_FAILED unless internal is allowed (a partition
// leader verifying a transactional offset commit names __consumer_offsets;
// a client may not add it, as Kafka filters internal topics out of what a
// client may add). If any is refused, the others are
// OPERATION_NOT_ATTEMPTED (Kafka's answer). ok: all exist.
func (c *conn) txnPartitions(topics map[string][]int32, internal bool) (tps []txncoord.TP, codes map[txncoord.TP]int16, ok bool) {
	codes = map[txncoord.TP]int16{}
	ok = true
	for topic, parts := range topics {
		t, exists := c.s.meta.Topic(topic)
		for _, p := range parts {
			tp := txncoord.TP{Topic: topic, Partition: p}
			tps = append(tps, tp)
			switch {
			case !internal && metadata.IsInternalTopic(topic):
				codes[tp], ok = kerr.TopicAuthorizationFailed.Code, false
			case !exists || p < 0 || int(p) >= len(t.Partitions):
				codes[tp], ok = kerr.UnknownTopicOrPartition.Code, false
			}
		}
	}
	if !ok {
		for _, tp := range tps {
			if codes[tp] == 0 {
				codes[tp] = kerr.OperationNotAttempted.Code
			}
		}
	}
	return tps, codes, ok
}

func (c *conn) handleAddPartitionsToTxn(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	z := c.authz(r)
	if req.Version >= 4 {
		// From brokers only (KIP-890): CLUSTER_ACTION, as in Kafka.
		if !z.cluster(acl.OpClusterAction) {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp, nil
		}
		return c.addPartitionsBroker(req, resp)
	}
	topics := map[string][]int32{}
	for _, t := range req.Topics {
		topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
	}
	answer := func(code func(txncoord.TP) int16) {
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code(txncoord.TP{Topic: t.Topic, Partition: p})
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	// Kafka: WRITE on the transactional id, then WRITE on each topic; if
	// a topic is refused nothing is added (the others are
	// OPERATION_NOT_ATTEMPTED).
	if !z.allowed(acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		answer(func(txncoord.TP) int16 { return kerr.TransactionalIDAuthorizationFailed.Code })
		return resp, nil
	}
	writable := z.topics(acl.OpWrite, namesOf(req.Topics, func(t *kmsg.AddPartitionsToTxnRequestTopic) string { return t.Topic }))
	if writable.refusesAny() {
		answer(func(tp txncoord.TP) int16 {
			if !writable.ok(tp.Topic) {
				return kerr.TopicAuthorizationFailed.Code
			}
			return kerr.OperationNotAttempted.Code
		})
		return resp, nil
	}
	txns := c.s.opts.Txns
	if txns == nil {
		answer(func(txncoord.TP) int16 { return kerr.CoordinatorNotAvailable.Code })
		return resp, nil
	}
	tps, codes, ok := c.txnPartitions(topics, false)
	if !ok {
		answer(func(tp txncoord.TP) int16 { return codes[tp] })
		return resp, nil
	}
	return nil, func() kmsg.Response {
		v, err := waitTxn(c, txns.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps, 0))
		code := fencedCode(c.errCode(firstErr(v, err)), req.Version, 2)
		answer(func(txncoord.TP) int16 { return code })
		return resp
	}
}

// addPartitionsBroker answers AddPartitionsToTxn v4+, a partition leader's
// verification (VerifyOnly) or implicit add (transaction version 2).
func (c *conn) addPartitionsBroker(req *kmsg.AddPartitionsToTxnRequest, resp *kmsg.AddPartitionsToTxnResponse) (kmsg.Response, func() kmsg.Response) {
	txns := c.s.opts.Txns
	n := len(req.Transactions)
	for _, t := range req.Transactions {
		for _, tt := range t.Topics {
			n += len(tt.Partitions)
		}
	}
	switch {
	case txns == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	case n > maxTxnRequestItems:
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	type pending struct {
		rt      *kmsg.AddPartitionsToTxnResponseTransaction
		tps     []txncoord.TP
		add     *txncoord.Reply[error]
		verify  *txncoord.Reply[txncoord.VerifyResult]
		codes   map[txncoord.TP]int16
		settled bool
	}
	resp.Transactions = make([]kmsg.AddPartitionsToTxnResponseTransaction, len(req.Transactions))
	var waits []*pending
	for i, t := range req.Transactions {
		rt := &resp.Transactions[i]
		*rt = kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = t.TransactionalID
		topics := map[string][]int32{}
		for _, tt := range t.Topics {
			topics[tt.Topic] = append(topics[tt.Topic], tt.Partitions...)
		}
		w := &pending{rt: rt}
		var ok bool
		w.tps, w.codes, ok = c.txnPartitions(topics, true)
		switch {
		case t.TransactionalID == "":
			for _, tp := range w.tps {
				w.codes[tp] = kerr.InvalidRequest.Code
			}
			w.settled = true
		case !ok:
			w.settled = true
		case t.VerifyOnly:
			w.verify = txns.VerifyPartitions(t.TransactionalID, t.ProducerID, t.ProducerEpoch, w.tps)
		default:
			w.add = txns.AddPartitions(t.TransactionalID, t.ProducerID, t.ProducerEpoch, w.tps, 2)
		}
		waits = append(waits, w)
	}
	fill := func(w *pending) {
		byTopic := map[string]*kmsg.AddPartitionsToTxnResponseTransactionTopic{}
		for _, tp := range w.tps {
			rt := byTopic[tp.Topic]
			if rt == nil {
				w.rt.Topics = append(w.rt.Topics, kmsg.NewAddPartitionsToTxnResponseTransactionTopic())
				rt = &w.rt.Topics[len(w.rt.Topics)-1]
				rt.Topic = tp.Topic
				byTopic[tp.Topic] = rt
			}
			rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			rp.Partition, rp.ErrorCode = tp.Partition, w.codes[tp]
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
	return nil, func() kmsg.Response {
		for _, w := range waits {
			switch {
			case w.settled:
			case w.add != nil:
				v, err := waitTxn(c, w.add)
				code := c.errCode(firstErr(v, err))
				for _, tp := range w.tps {
					w.codes[tp] = code
				}
			default:
				v, err := waitTxn(c, w.verify)
				for _, tp := range w.tps {
					perr := firstErr(v.Err, err)
					if perr == nil {
						perr = v.Partitions[tp]
					}
					w.codes[tp] = c.errCode(perr)
				}
			}
			fill(w)
		}
		return resp
	}
}

func (c *conn) handleAddOffsetsToTxn(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	z := c.authz(r)
	switch {
	case !z.allowed(acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	case !z.allowed(acl.OpRead, acl.ResourceGroup, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	txns := c.s.opts.Txns
	t, ok := c.s.meta.Topic(group.OffsetsTopic)
	switch {
	case txns == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	case !ok || len(t.Partitions) == 0:
		// The group's coordinator creates the topic; the client retries.
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	tp := txncoord.TP{Topic: group.OffsetsTopic, Partition: coord.PartitionFor(req.Group, int32(len(t.Partitions)))}
	return nil, func() kmsg.Response {
		v, err := waitTxn(c, txns.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txncoord.TP{tp}, 0))
		resp.ErrorCode = fencedCode(c.errCode(firstErr(v, err)), req.Version, 2)
		return resp
	}
}

func (c *conn) handleEndTxn(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if !c.authz(r).allowed(acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	txns := c.s.opts.Txns
	if txns == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	tv := int16(0)
	if req.Version >= 5 {
		tv = 2 // KIP-890 part 2: the client expects the epoch bump
	}
	return nil, func() kmsg.Response {
		ctx, cancel := context.WithTimeout(c.ctx, txnWait)
		defer cancel()
		v, err := txns.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, tv).Wait(ctx)
		if err == nil {
			err = v.Err
		}
		if err != nil {
			resp.ErrorCode = fencedCode(c.errCode(err), req.Version, 2)
			return resp
		}
		// The outcome is decided (PrepareCommit or PrepareAbort is on the
		// ISR); its markers follow, as in Kafka. The producer's next
		// transaction, if it starts before they are written, is held at
		// the coordinator until they are (txncoord's holdAdd), not
		// refused with CONCURRENT_TRANSACTIONS.
		resp.ProducerID, resp.ProducerEpoch = v.ProducerID, v.Epoch
		return resp
	}
}

func (c *conn) handleDescribeTransactions(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	txns := c.s.opts.Txns
	type pending struct {
		st    *kmsg.DescribeTransactionsResponseTransactionState
		reply *txncoord.Reply[txncoord.Description]
	}
	var waits []pending
	// Kafka: DESCRIBE on each transactional id; the partitions listed are
	// those of topics the principal may DESCRIBE.
	z := c.authz(r)
	resp.TransactionStates = make([]kmsg.DescribeTransactionsResponseTransactionState, len(req.TransactionalIDs))
	for i, id := range req.TransactionalIDs {
		st := &resp.TransactionStates[i]
		*st = kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
		switch {
		case i < maxTxnRequestItems && !z.allowed(acl.OpDescribe, acl.ResourceTransactionalID, id):
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		case txns == nil:
			st.ErrorCode = kerr.CoordinatorNotAvailable.Code
		case id == "" || i >= maxTxnRequestItems:
			st.ErrorCode = kerr.InvalidRequest.Code
		default:
			waits = append(waits, pending{st: st, reply: txns.Describe([]string{id})[0]})
		}
	}
	if len(waits) == 0 {
		return resp, nil
	}
	describable := map[string]bool{}
	return nil, func() kmsg.Response {
		for _, w := range waits {
			d, err := waitTxn(c, w.reply)
			if err == nil {
				err = d.Err
			}
			if err != nil {
				w.st.ErrorCode = c.errCode(err)
				continue
			}
			w.st.State, w.st.TimeoutMillis, w.st.StartTimestamp = d.State.String(), d.TimeoutMs, d.StartMs
			w.st.ProducerID, w.st.ProducerEpoch = d.ProducerID, d.Epoch
			byTopic := map[string]int{}
			for _, tp := range d.Partitions {
				ok, seen := describable[tp.Topic]
				if !seen {
					ok = z.allowed(acl.OpDescribe, acl.ResourceTopic, tp.Topic)
					describable[tp.Topic] = ok
				}
				if !ok {
					continue
				}
				i, ok := byTopic[tp.Topic]
				if !ok {
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = tp.Topic
					w.st.Topics = append(w.st.Topics, t)
					i = len(w.st.Topics) - 1
					byTopic[tp.Topic] = i
				}
				w.st.Topics[i].Partitions = append(w.st.Topics[i].Partitions, tp.Partition)
			}
		}
		return resp
	}
}

func (c *conn) handleListTransactions(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	txns := c.s.opts.Txns
	if txns == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	var states []txncoord.State
	for _, name := range req.StateFilters {
		st, ok := txncoord.ParseState(name)
		if !ok || st == txncoord.StateDead || st == txncoord.StatePrepareEpochFence {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		states = append(states, st)
	}
	if len(req.StateFilters) > 0 && len(states) == 0 {
		return resp, nil // only unknown states: they match nothing
	}
	if txns.Loading() {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil
	}
	now := c.s.opts.Clock.Now().UnixMilli()
	z := c.authz(r) // Kafka lists the transactional ids the principal may DESCRIBE
	for _, l := range txns.List(states, req.ProducerIDFilters) {
		if !z.quietly(acl.OpDescribe, acl.ResourceTransactionalID, l.ID) {
			continue
		}
		// v1: only transactions running longer than the duration (Kafka's
		// rule: an Empty one, with no start, is kept).
		if req.Version >= 1 && req.DurationFilterMillis >= 0 && l.StartMs >= 0 && now-l.StartMs <= req.DurationFilterMillis {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = l.ID, l.ProducerID, l.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
