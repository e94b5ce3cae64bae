package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/coord"
	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/txn"
	"github.com/moonmq/moonmq/engine/txncoord"
)

// The writes of a transaction outside its data partitions:
//
//   - TxnOffsetCommit v0-5: a consumer group's offsets written in the
//     producer's transaction to the group's __consumer_offsets partition,
//     visible to the group only once the transaction commits. The offsets
//     partition is verified with the transaction coordinator first when the
//     commit opens the transaction there (KIP-890).
//   - WriteTxnMarkers v0-2: the end-transaction markers a transaction
//     coordinator writes to the partitions this node leads (also
//     (*Server).WriteTxnMarkers, the same without a network hop, for the
//     coordinator on this node). Markers are acks=all writes.

// maxMarkerPartitions bounds the partition markers of one WriteTxnMarkers,
// and markerWriters how many of them are written at once.
const (
	maxMarkerPartitions = 10000
	markerWriters       = 32
)

func (c *conn) handleTxnOffsetCommit(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		*rt = kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rt.Partitions[j] = kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rt.Partitions[j].Partition = p.Partition
		}
	}
	setAll := func(code int16) kmsg.Response {
		if code == kerr.CoordinatorLoadInProgress.Code && req.Version < 2 {
			code = kerr.CoordinatorNotAvailable.Code
		}
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if p := &resp.Topics[i].Partitions[j]; p.ErrorCode == 0 {
					p.ErrorCode = code
				}
			}
		}
		return resp
	}
	// Kafka: WRITE on the transactional id, READ on the group, then READ
	// on each topic (a refused topic's partitions are
	// TOPIC_AUTHORIZATION_FAILED, the others committed).
	z := c.authz(r)
	switch {
	case !z.allowed(acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		return setAll(kerr.TransactionalIDAuthorizationFailed.Code), nil
	case !z.allowed(acl.OpRead, acl.ResourceGroup, req.Group):
		return setAll(kerr.GroupAuthorizationFailed.Code), nil
	}
	readable := z.topics(acl.OpRead, namesOf(req.Topics, func(t *kmsg.TxnOffsetCommitRequestTopic) string { return t.Topic }))
	var committed []int // the indexes in req.Topics of the topics committed
	for i, t := range req.Topics {
		if readable[t.Topic] {
			committed = append(committed, i)
			continue
		}
		for j := range resp.Topics[i].Partitions {
			resp.Topics[i].Partitions[j].ErrorCode = kerr.TopicAuthorizationFailed.Code
		}
	}
	if len(committed) == 0 && len(req.Topics) > 0 {
		return resp, nil
	}
	groups, txns := c.s.opts.Groups, c.s.opts.Txns
	switch {
	case groups == nil || txns == nil:
		return setAll(kerr.CoordinatorNotAvailable.Code), nil
	case req.TransactionalID == "" || req.ProducerID < 0 || req.ProducerEpoch < 0:
		return setAll(kerr.InvalidRequest.Code), nil
	}
	cr := group.CommitRequest{Group: req.Group, Version: req.Version, Generation: req.Generation,
		MemberID: req.MemberID, InstanceID: deref(req.InstanceID)}
	for _, i := range committed {
		t := req.Topics[i]
		ct := group.CommitTopic{Topic: t.Topic, Partitions: make([]group.CommitPartition, 0, len(t.Partitions))}
		for _, p := range t.Partitions {
			ct.Partitions = append(ct.Partitions, group.CommitPartition{Partition: p.Partition, Offset: p.Offset,
				LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, Timestamp: -1})
		}
		cr.Topics = append(cr.Topics, ct)
	}
	return nil, func() kmsg.Response {
		ctx, cancel := context.WithTimeout(c.ctx, txnWait)
		defer cancel()
		guard, err := c.verifyOffsetsPartition(ctx, req)
		if err != nil {
			return setAll(c.errCode(err))
		}
		cr.Producer = &group.TxnProducer{ID: req.ProducerID, Epoch: req.ProducerEpoch, Guard: guard}
		errs, err := groups.CommitOffsets(cr).Wait(ctx)
		if errs == nil {
			return setAll(c.errCode(err))
		}
		for k, i := range committed {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = txnCommitCode(c.errCode(errs[k][j]), req.Version)
			}
		}
		if err != nil {
			setAll(c.errCode(err))
		}
		return resp
	}
}

// verifyOffsetsPartition makes sure the group's offsets partition is in
// the producer's transaction before a TxnOffsetCommit opens the
// transaction there, and returns the partition's guard for the write (nil
// when the transaction is open there already). The transaction
// coordinator's unavailability is COORDINATOR_NOT_AVAILABLE: passing its
// NOT_COORDINATOR through would send the client to look for another group
// coordinator.
func (c *conn) verifyOffsetsPartition(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (any, error) {
	p, err := c.s.opts.Groups.OffsetsPartition(req.Group)
	if err != nil {
		return nil, err
	}
	part, err := c.s.broker.Partition(replica.TopicPartition{Topic: group.OffsetsTopic, Partition: p})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", group.ErrNotCoordinator, err)
	}
	guard, needed, err := part.StartTxnWrite(req.ProducerID, req.ProducerEpoch)
	switch {
	case errors.Is(err, replica.ErrNotLeader), errors.Is(err, replica.ErrUnknownPartition):
		return nil, fmt.Errorf("%w: %v", group.ErrNotCoordinator, err)
	case err != nil:
		return nil, err
	case !needed:
		return nil, nil
	}
	v := c.s.opts.Verifier
	if v == nil {
		return nil, group.ErrCoordinatorNotAvailable
	}
	tp := txncoord.TP{Topic: group.OffsetsTopic, Partition: p}
	// v5 (transaction version 2) adds the partition: the client sent no
	// AddOffsetsToTxn.
	res, err := verifyRetrying(ctx, v, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txncoord.TP{tp}, req.Version >= 5)
	if err == nil {
		err = answerFor(res, tp)
	}
	if err != nil {
		switch code := c.errCode(err); code {
		case kerr.TransactionAbortable.Code:
			return nil, kerr.InvalidTxnState
		case kerr.ProducerFenced.Code:
			return nil, kerr.InvalidProducerEpoch
		case kerr.InvalidProducerEpoch.Code, kerr.InvalidProducerIDMapping.Code, kerr.ConcurrentTransactions.Code, kerr.InvalidTxnState.Code:
			return nil, err
		default:
			return nil, fmt.Errorf("%w: verifying %s-%d in the transaction: %v", group.ErrCoordinatorNotAvailable, group.OffsetsTopic, p, err)
		}
	}
	return guard, nil
}

// txnCommitCode rewrites a TxnOffsetCommit partition's code as Kafka
// answers it: the offsets partition's own write failures become the
// coordinator errors a client acts on.
func txnCommitCode(code, version int16) int16 {
	switch code {
	case kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return kerr.NotCoordinator.Code
	case kerr.CoordinatorLoadInProgress.Code:
		if version < 2 {
			return kerr.CoordinatorNotAvailable.Code
		}
	}
	return code
}

func (c *conn) handleWriteTxnMarkers(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.WriteTxnMarkersRequest)
	// Only transaction coordinators write markers: Kafka asks ALTER or
	// CLUSTER_ACTION on the cluster.
	z := c.authz(r)
	if !z.quietly(acl.OpAlter, acl.ResourceCluster, acl.ClusterName) && !z.cluster(acl.OpClusterAction) {
		resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return resp, nil
	}
	return nil, func() kmsg.Response { return c.s.WriteTxnMarkers(c.ctx, req) }
}

// WriteTxnMarkers writes the end-transaction markers of req to the
// partitions this node leads and answers when every one is replicated (or
// failed): the WriteTxnMarkers API, for the transaction coordinator on
// this node as for a remote one.
func (s *Server) WriteTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	n := 0
	for _, m := range req.Markers {
		for _, t := range m.Topics {
			n += len(t.Partitions)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, txnWait)
	defer cancel()
	var wg sync.WaitGroup
	// The partitions' markers are written and waited for in parallel, a
	// bounded number at a time: a request may name thousands.
	slots := make(chan struct{}, markerWriters)
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	for i, m := range req.Markers {
		rm := &resp.Markers[i]
		*rm = kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		rm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		for j, t := range m.Topics {
			rt := &rm.Topics[j]
			*rt = kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
			for k, p := range t.Partitions {
				rp := &rt.Partitions[k]
				*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				if n > maxMarkerPartitions {
					rp.ErrorCode = kerr.InvalidRequest.Code
					continue
				}
				wg.Add(1)
				slots <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-slots }()
					rp.ErrorCode = s.errCode(s.writeMarker(ctx, m, t.Topic, p), "api", "WriteTxnMarkers")
				}()
			}
		}
	}
	wg.Wait()
	return resp
}

// writeMarker writes one partition's marker and waits for it to be
// replicated.
func (s *Server) writeMarker(ctx context.Context, m kmsg.WriteTxnMarkersRequestMarker, topic string, p int32) error {
	mk := coord.Marker{ProducerID: m.ProducerID, Epoch: m.ProducerEpoch, Commit: m.Committed,
		CoordinatorEpoch: m.CoordinatorEpoch, TransactionVersion: int16(m.TransactionVersion)}
	switch topic {
	case group.OffsetsTopic:
		groups := s.opts.Groups
		if groups == nil {
			return replica.ErrNotLeader
		}
		err := firstErr(groups.CompleteTransaction(p, mk).Wait(ctx))
		if errors.Is(err, group.ErrCoordinatorNotAvailable) || errors.Is(err, group.ErrCoordinatorLoadInProgress) ||
			errors.Is(err, group.ErrNotCoordinator) || errors.Is(err, coord.ErrUnavailable) {
			// Retriable for the coordinator's sender, which looks the
			// leader up again.
			return fmt.Errorf("%w: %v", replica.ErrNotLeader, err)
		}
		return err
	case txncoord.Topic:
		return fmt.Errorf("%w: no transaction writes to %s", metadata.ErrInvalidTopicName, topic)
	}
	part, err := s.broker.Partition(replica.TopicPartition{Topic: topic, Partition: p})
	if err != nil {
		return err
	}
	res, err := part.WriteMarker(replica.MarkerParams{ProducerID: mk.ProducerID, Epoch: mk.Epoch, Commit: mk.Commit,
		CoordinatorEpoch: mk.CoordinatorEpoch, TV2: mk.TransactionVersion >= 2})
	if err != nil {
		return err
	}
	return part.WaitReplicated(ctx, res)
}

// handleDescribeProducers answers DescribeProducers v0 (KIP-664): the
// producers each partition this node leads knows, with their open
// transaction's start offset, for tools that look for hanging
// transactions (kafka-transactions.sh describe-producers, find-hanging).
func (c *conn) handleDescribeProducers(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	readable := c.authz(r).topics(acl.OpRead, namesOf(req.Topics, func(t *kmsg.DescribeProducersRequestTopic) string { return t.Topic }))
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			if !readable[t.Topic] { // Kafka asks READ on the topic
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			part, err := c.s.broker.Partition(replica.TopicPartition{Topic: t.Topic, Partition: p})
			var infos []txn.ProducerInfo
			if err == nil {
				infos, err = part.Producers()
			}
			if err != nil {
				rp.ErrorCode = c.errCode(err)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			for _, info := range infos {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = info.ProducerID, int32(info.Epoch), info.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = info.LastTimestamp, info.CoordinatorEpoch, info.TxnStartOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
