package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/controller"
	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/txncoord"
	"github.com/moonmq/moonmq/net/httpapi"
	"github.com/moonmq/moonmq/net/kafka"
	"github.com/moonmq/moonmq/net/peer"
)

// The transaction coordinator on a node (issue 14): the coordinator of a
// transactional id is the leader of its __transaction_state partition, so
// the reconciler loads a partition's transactions where this node leads it
// (in its leader epoch, the coordinator epoch) and unloads them where it
// stops. The coordinator reaches the partitions of its transactions
// through txnLinks: markers to partitions this node leads go straight to
// the local Kafka server, others over the broker-to-broker Caller; so do
// the verifications a partition leader asks of a transactional id's
// coordinator (KIP-890).

// txnLinks connects the coordinator to the partitions of its transactions
// and partition leaders to coordinators, wherever they run. It is built
// before the Kafka server it uses for local writes (the server needs the
// coordinator), which is set once it exists.
type txnLinks struct {
	nodeID int32
	ctrl   *controller.Controller
	caller *peer.Caller
	log    *slog.Logger
	local  atomic.Pointer[kafka.Server]
	txns   atomic.Pointer[txncoord.Coordinator]
}

// leaderOf is the broker leading tp and its Kafka address.
func (l *txnLinks) leaderOf(tp txncoord.TP) (id int32, addr string, err error) {
	t, ok := l.ctrl.Topic(tp.Topic)
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return -1, "", fmt.Errorf("%w: %s-%d", metadata.ErrUnknownTopic, tp.Topic, tp.Partition)
	}
	leader := t.Partitions[tp.Partition].Leader
	if leader < 0 {
		return -1, "", fmt.Errorf("%s-%d has no leader", tp.Topic, tp.Partition)
	}
	if leader == l.nodeID {
		return leader, "", nil
	}
	for _, b := range l.ctrl.Brokers() {
		if b.ID == leader {
			return leader, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), nil
		}
	}
	return -1, "", fmt.Errorf("broker %d leading %s-%d is unknown", leader, tp.Topic, tp.Partition)
}

// WriteMarkers implements txncoord.MarkerWriter: one WriteTxnMarkers per
// leading broker, sent at once.
func (l *txnLinks) WriteMarkers(ctx context.Context, writes []txncoord.MarkerWrite) []txncoord.MarkerResult {
	results := make([]txncoord.MarkerResult, len(writes))
	type dest struct {
		addr string
		idx  []int
	}
	byLeader := map[int32]*dest{}
	for i, w := range writes {
		results[i].Write = w
		id, addr, err := l.leaderOf(w.TP)
		if err != nil {
			if _, exists := l.ctrl.Topic(w.TP.Topic); !exists {
				results[i].Outcome, results[i].Err = txncoord.MarkerDone, err // the topic is gone: nothing to end there
			} else {
				results[i].Outcome, results[i].Err = txncoord.MarkerRetry, err
			}
			continue
		}
		d := byLeader[id]
		if d == nil {
			d = &dest{addr: addr}
			byLeader[id] = d
		}
		d.idx = append(d.idx, i)
	}
	var wg sync.WaitGroup
	for id, d := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrWriteTxnMarkersRequest()
			req.Version = 1
			// One marker per write: writes of a transaction to one broker
			// could share one, but the answers are per write anyway.
			for _, i := range d.idx {
				w := writes[i]
				m := kmsg.NewWriteTxnMarkersRequestMarker()
				m.ProducerID, m.ProducerEpoch, m.Committed = w.ProducerID, w.ProducerEpoch, w.Commit
				m.CoordinatorEpoch, m.TransactionVersion = w.CoordinatorEpoch, int8(w.TransactionVersion)
				t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				t.Topic, t.Partitions = w.TP.Topic, []int32{w.TP.Partition}
				m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{t}
				req.Markers = append(req.Markers, m)
			}
			resp, err := l.writeMarkers(ctx, id, d.addr, req)
			var codes map[markerKey]int16
			if err == nil {
				codes = markerCodes(resp)
			}
			for _, i := range d.idx {
				w := writes[i]
				code, ok := codes[markerKey{w.ProducerID, w.TP}]
				switch {
				case err != nil:
					results[i].Outcome, results[i].Err = txncoord.MarkerRetry, err
				case !ok:
					// A peer that left a marker unanswered: ask again.
					results[i].Outcome, results[i].Err = txncoord.MarkerRetry, errors.New("the partition's leader did not answer for its marker")
				default:
					results[i].Outcome, results[i].Err = markerOutcome(code), kerr.ErrorForCode(code)
				}
			}
		}()
	}
	wg.Wait()
	return results
}

// markerKey names one marker's answer: its producer and partition.
type markerKey struct {
	pid int64
	tp  txncoord.TP
}

// markerCodes indexes a WriteTxnMarkers answer by producer and partition,
// so an answer shaped otherwise than the request (a peer's) is read by
// name, never by position.
func markerCodes(resp *kmsg.WriteTxnMarkersResponse) map[markerKey]int16 {
	codes := map[markerKey]int16{}
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				codes[markerKey{m.ProducerID, txncoord.TP{Topic: t.Topic, Partition: p.Partition}}] = p.ErrorCode
			}
		}
	}
	return codes
}

func (l *txnLinks) writeMarkers(ctx context.Context, id int32, addr string, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	if id == l.nodeID {
		ks := l.local.Load()
		if ks == nil {
			return nil, errors.New("the Kafka server is not started yet")
		}
		return ks.WriteTxnMarkers(ctx, req), nil
	}
	req.Version = 2 // peers speak the version that carries the transaction version
	return l.caller.WriteTxnMarkers(ctx, id, addr, req)
}

// markerOutcome classifies a partition's answer to a marker as Kafka's
// TransactionMarkerRequestCompletionHandler does: a stale producer or
// coordinator epoch ends the marker's life; leadership, replication and
// timeouts are retried; anything else should not happen and is retried
// after being logged by the coordinator.
func markerOutcome(code int16) txncoord.MarkerOutcome {
	switch code {
	case 0:
		return txncoord.MarkerDone
	case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
		return txncoord.MarkerFenced
	case kerr.UnknownTopicOrPartition.Code, kerr.NotLeaderForPartition.Code, kerr.NotEnoughReplicas.Code,
		kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code, kerr.KafkaStorageError.Code,
		kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
		return txncoord.MarkerRetry
	}
	return txncoord.MarkerFailed
}

// Verify implements kafka.Verifier: the coordinator of txnID is the
// leader of its __transaction_state partition, here or on a peer.
func (l *txnLinks) Verify(ctx context.Context, txnID string, pid int64, epoch int16, tps []txncoord.TP, add bool) (map[txncoord.TP]error, error) {
	txns := l.txns.Load()
	if txns == nil {
		return nil, txncoord.ErrUnavailable
	}
	p, err := txns.PartitionFor(txnID)
	if err != nil {
		return nil, err
	}
	id, addr, err := l.leaderOf(txncoord.TP{Topic: txncoord.Topic, Partition: p})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", txncoord.ErrUnavailable, err)
	}
	if id == l.nodeID {
		if add {
			v, err := txns.AddPartitions(txnID, pid, epoch, tps, 2).Wait(ctx)
			if err != nil {
				return nil, err // the wait failed
			}
			if v != nil {
				return nil, v // the coordinator's answer, for every partition
			}
			added := make(map[txncoord.TP]error, len(tps))
			for _, tp := range tps {
				added[tp] = nil
			}
			return added, nil
		}
		v, err := txns.VerifyPartitions(txnID, pid, epoch, tps).Wait(ctx)
		if err != nil {
			return nil, err
		}
		return v.Partitions, v.Err
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	if add {
		req.Version = 5
	}
	t := kmsg.NewAddPartitionsToTxnRequestTransaction()
	t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = txnID, pid, epoch, !add
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.Topic]
		if !ok {
			tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			tt.Topic = tp.Topic
			t.Topics = append(t.Topics, tt)
			i = len(t.Topics) - 1
			byTopic[tp.Topic] = i
		}
		t.Topics[i].Partitions = append(t.Topics[i].Partitions, tp.Partition)
	}
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{t}
	resp, err := l.caller.AddPartitionsToTxn(ctx, id, addr, req)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	// Every partition asked has an answer: one the coordinator left out is
	// not verified (a missing answer must never read as "in the
	// transaction").
	out := make(map[txncoord.TP]error, len(tps))
	for _, tp := range tps {
		out[tp] = fmt.Errorf("%w: the coordinator did not answer for %s-%d", txncoord.ErrUnavailable, tp.Topic, tp.Partition)
	}
	for _, rt := range resp.Transactions {
		for _, tt := range rt.Topics {
			for _, p := range tt.Partitions {
				if tp := (txncoord.TP{Topic: tt.Topic, Partition: p.Partition}); out[tp] != nil {
					out[tp] = kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}
	}
	return out, nil
}

// newTxns builds the transaction coordinator over the broker's partitions
// of __transaction_state. It starts with what the reconciler hosts now
// (startTxns); the reconciler loads and unloads partitions from then on.
func newTxns(cfg txncoord.Config, ctrl *controller.Controller, b *replica.Manager, links *txnLinks) (*txncoord.Coordinator, error) {
	store := internalTopicStorage(ctrl, b, txncoord.Topic, txncoord.TopicConfigs(cfg.SegmentBytes))
	txns, err := txncoord.New(cfg, store, &txncoord.IDBlocks{Reserve: ctrl.AllocateProducerIDs}, links)
	if err != nil {
		return nil, fmt.Errorf("transaction coordinator: %w", err)
	}
	links.txns.Store(txns)
	return txns, nil
}

// transactionStatsOf is the coordinator's counts for /stats and /metrics.
func transactionStatsOf(txns *txncoord.Coordinator) *httpapi.TransactionStats {
	st := txns.Stats()
	out := &httpapi.TransactionStats{ByState: map[string]int{}, Committed: st.Committed, Aborted: st.Aborted,
		TimedOut: st.TimedOut, MarkersPending: st.MarkersPending}
	for state, n := range st.ByState {
		out.ByState[state.String()] = n
	}
	return out
}
