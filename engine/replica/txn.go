package replica

import (
	"errors"
	"fmt"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/txn"
)

// Transactions on a partition (issue 14; docs/design/transactions.md §3).
//
// Every write that goes through the producer state is staged in a
// txn.Update, appended to the log with the aborted-transaction index
// entries the update derived (log.AppendWith), and applied once the append
// succeeded: a client's idempotent or transactional batch, an
// end-transaction marker a coordinator writes (WriteMarker), a
// coordinator's own transactional batch (AppendCoordinator), a follower's
// copy of the leader's batches and the replay at load. The partition then
// publishes an immutable txn.StableView, from which fetches compute the
// last stable offset (LSO) without the append lock.
//
// A transactional produce that would open a transaction on the partition
// is first verified with the transaction coordinator (KIP-890 part 1):
// AppendTxn asks through the caller's VerifyFunc and appends once the
// answer comes, holding the producer's later appends in a FIFO queue
// meanwhile, so a producer's batches are appended in the order they
// arrived. The guard the producer state hands out for a verification is
// cleared by any marker of the producer, so an append verified against a
// transaction that ended meanwhile is refused (txn.ErrTxnNotVerified).

// ErrVerificationQueueFull: a producer has maxTxnQueue appends waiting
// behind a verification on the partition (NOT_ENOUGH_REPLICAS: the client
// retries). Kafka clients keep at most 5 requests in flight, so only a
// misbehaving one meets it.
var ErrVerificationQueueFull = errors.New("too many transactional appends waiting for verification")

// maxTxnQueue bounds the appends of one producer waiting behind a
// verification on one partition.
const maxTxnQueue = 32

// VerifyFunc asks the transaction coordinator whether (or makes it so that)
// the partition is in the transaction of producer (pid, epoch). done is
// called exactly once, from any goroutine, with nil or the coordinator's
// answer as an error.
type VerifyFunc func(pid int64, epoch int16, done func(error))

// txnQueue holds a producer's transactional appends waiting behind a
// verification, oldest first; items[0] is the one being verified.
type txnQueue struct {
	items []txnItem
}

type txnItem struct {
	batch  []byte
	header batch.Validated
	verify VerifyFunc
	done   func(ProduceResult, error)
}

// finished is an append's outcome to report outside the append lock.
type finished struct {
	done func(ProduceResult, error)
	res  ProduceResult
	err  error
}

func report(fin []finished) {
	for _, f := range fin {
		f.done(f.res, f.err)
	}
}

// writeSpec says how appendLocked treats the batches.
type writeSpec struct {
	origin txn.Origin
	guard  *txn.Verification
	tv2    bool // markers are written by a transaction-version-2 coordinator
	// appendTime is the LogAppendTime stamped on the batches, -1 for CreateTime.
	appendTime int64
	// deferred starts no fsync round (log.AppendDeferred).
	deferred bool
}

// txnBatch describes a batch to the producer state, with its offsets as
// they are (stored) or will be (base, when the log assigns them). ok is
// false for a batch the producer state ignores: a control batch that is
// not an end-transaction marker, or one compaction emptied.
func txnBatch(h batch.Header, raw []byte, base int64) (b txn.Batch, ok bool, err error) {
	b = txn.Batch{ProducerID: h.ProducerID, Epoch: h.ProducerEpoch, FirstSeq: h.BaseSequence, Count: h.NumRecords,
		BaseOffset: base, LastOffset: base + int64(h.LastOffsetDelta), MaxTimestamp: h.MaxTimestamp,
		Transactional: h.IsTransactional()}
	if !h.IsControl() {
		return b, true, nil
	}
	if h.NumRecords == 0 {
		// A marker the log cleaner removed, kept as an empty batch
		// because it was its producer's last: the transaction it ended
		// is gone from the log, and the producer state takes nothing
		// from it (Kafka's ProducerAppendInfo.append).
		return b, false, nil
	}
	m, err := batch.ParseEndTxnMarker(raw)
	switch {
	case errors.Is(err, batch.ErrNotMarker):
		return b, false, nil
	case err != nil:
		return b, false, err
	}
	b.Marker = &txn.Marker{Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
	return b, true, nil
}

// appendLocked appends validated batches as the partition's leader (or
// alone): the producer state checks and stages them by spec, the log
// assigns their offsets from its end, and the state is applied once they
// are written. A client's retry of one of its producer's last batches is
// answered with the original's offsets and appends nothing. Caller holds
// p.mu and has checked the role (replicated: it leads with an ISR).
func (p *Partition) appendLocked(batches [][]byte, headers []batch.Header, spec writeSpec, replicated bool) (ProduceResult, error) {
	// p.mu serialises every append, so the log assigns offsets from its
	// current end: the state can be staged with them before the write,
	// and the index entries of the markers among the batches written with
	// them.
	off := p.log.LogEndOffset()
	u := p.producers.Begin(spec.origin)
	for i, h := range headers {
		b, ok, err := txnBatch(h, batches[i], off)
		if err != nil {
			return ProduceResult{}, fmt.Errorf("batch %d: %w", i, err)
		}
		off = b.LastOffset + 1
		if !ok || h.ProducerID < 0 {
			continue
		}
		if spec.appendTime >= 0 {
			b.MaxTimestamp = spec.appendTime
		}
		if b.Marker != nil {
			b.Marker.TV2 = spec.tv2
		}
		dup, err := u.Add(b, spec.guard)
		if err != nil {
			return ProduceResult{}, err
		}
		if dup != nil {
			appendTime := int64(-1)
			if spec.appendTime >= 0 {
				appendTime = dup.Timestamp // the broker's stamp, recorded when it was appended
			}
			return ProduceResult{BaseOffset: dup.BaseOffset, LogAppendTime: appendTime,
				LogStartOffset: p.log.LogStartOffset(), lastOffset: dup.LastOffset,
				replicated: replicated, epoch: p.LeaderEpoch(), gen: p.log.Generation()}, nil
		}
	}
	if spec.appendTime >= 0 {
		for _, b := range batches {
			batch.SetLogAppendTime(b, spec.appendTime)
		}
	}
	var res log.AppendResult
	var err error
	aborted := toLogAborted(u.Aborted())
	deferred := spec.deferred && len(aborted) == 0 // index entries are fsynced before their markers
	if deferred {
		res, err = p.log.AppendDeferred(batches, p.LeaderEpoch())
	} else {
		res, err = p.log.AppendWith(batches, p.LeaderEpoch(), aborted)
	}
	if err != nil {
		return ProduceResult{}, err
	}
	p.applyAppended(res, u)
	if replicated {
		// The ISR learns the leader's new committed end once it is durable.
		if deferred {
			p.log.NotifyDurableDeferred(res.LastOffset, p.committed)
		} else {
			p.log.NotifyDurable(res.LastOffset, p.committed)
		}
	}
	out := ProduceResult{BaseOffset: res.BaseOffset, LogAppendTime: spec.appendTime,
		LogStartOffset: res.LogStartOffset, lastOffset: res.LastOffset,
		replicated: replicated, epoch: p.LeaderEpoch(), gen: p.log.Generation()}
	out.count(batches, headers)
	return out, nil
}

// applyAppended applies update u once the log took its batches (res): at
// a roll the producer snapshot as of the new segment's base comes first
// (this append is not applied yet, so recovery replays at most a segment),
// then the update, then the LSO view if transactions changed. Caller
// holds p.mu.
func (p *Partition) applyAppended(res log.AppendResult, u *txn.Update) {
	if res.Rolled {
		p.snapshotAtRoll(res.BaseOffset)
	}
	changed := u.ChangesStable()
	p.producers.Apply(u)
	if changed {
		p.publishStable()
	}
}

// count adds the records and bytes of the appended batches.
func (r *ProduceResult) count(batches [][]byte, headers []batch.Header) {
	for i, h := range headers {
		r.Records += int(h.NumRecords)
		r.Bytes += len(batches[i])
	}
}

// stageStored stages a stored batch (the leader's, copied by a follower,
// or the log's own, replayed) in an update of origin Replication, which
// refuses nothing: the state follows what the log holds. A control batch that cannot be read is skipped, with a warning.
func (p *Partition) stageStored(u *txn.Update, h batch.Header, raw []byte) {
	b, ok, err := txnBatch(h, raw, h.BaseOffset)
	if err != nil {
		p.opts.Logger.Warn("control batch not understood; producer state skips it", "topic", p.tp.Topic,
			"partition", p.tp.Partition, "offset", h.BaseOffset, "err", err)
		return
	}
	if ok && h.ProducerID >= 0 {
		_, _ = u.Add(b, nil) // origin Replication refuses nothing
	}
}

func toLogAborted(in []txn.AbortedTxn) []log.AbortedTxn {
	if len(in) == 0 {
		return nil
	}
	out := make([]log.AbortedTxn, len(in))
	for i, a := range in {
		out[i] = log.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset,
			LastOffset: a.LastOffset, LastStableOffset: a.LastStableOffset}
	}
	return out
}

// publishStable publishes the producer state's view of open and completed
// transactions for lastStable, first forgetting the completed ones below
// the high watermark. Caller holds p.mu.
func (p *Partition) publishStable() {
	p.producers.OnHighWatermark(p.HighWatermark())
	v := p.producers.Stable()
	p.stable.Store(&v)
}

// leaderWrite checks that the partition takes writes as a leader now and
// says whether it is a replicated one. Caller holds p.mu.
func (p *Partition) leaderWrite() (replicated bool, err error) {
	if p.deleted {
		return false, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, p.tp.Topic, p.tp.Partition)
	}
	switch p.currentRole() {
	case roleFollower:
		return false, p.notLeader()
	case roleLeader:
		return true, nil
	}
	return false, nil
}

// AppendTxn appends a transactional produce: one transactional batch of a
// producer (pid >= 0). If the producer has no transaction open on the
// partition at the batch's epoch, the partition asks verify whether the
// partition is in the producer's transaction first (KIP-890) and appends
// once it is; a producer's appends run in the order they arrived, later
// ones waiting behind a verification. done is called exactly once, never
// under the partition's locks: before AppendTxn returns (sync true) or
// later, from the goroutine that completed a verification. The result is
// waited on as Append's (WaitReplicated).
func (p *Partition) AppendTxn(records []byte, verify VerifyFunc, done func(ProduceResult, error)) (sync bool) {
	batches, headers, err := p.validate(records)
	if err == nil {
		err = checkTxnProduce(headers)
	}
	if err != nil {
		done(ProduceResult{}, err)
		return true
	}
	item := txnItem{batch: batches[0], header: headers[0], verify: verify, done: done}
	h := item.header
	p.mu.Lock()
	if q := p.txnq[h.ProducerID]; q != nil {
		if len(q.items) >= maxTxnQueue {
			p.mu.Unlock()
			done(ProduceResult{}, fmt.Errorf("%w: producer %d on %s-%d", ErrVerificationQueueFull, h.ProducerID, p.tp.Topic, p.tp.Partition))
			return true
		}
		q.items = append(q.items, item)
		p.mu.Unlock()
		return false
	}
	if !p.producers.NeedsVerification(h.ProducerID, h.ProducerEpoch) {
		res, err := p.appendTxnItem(item, nil)
		p.mu.Unlock()
		done(res, err)
		return true
	}
	g, err := p.startVerification(item)
	if err != nil {
		p.mu.Unlock()
		done(ProduceResult{}, err)
		return true
	}
	q := &txnQueue{items: []txnItem{item}}
	if p.txnq == nil {
		p.txnq = map[int64]*txnQueue{}
	}
	p.txnq[h.ProducerID] = q
	p.mu.Unlock()
	verify(h.ProducerID, h.ProducerEpoch, func(err error) { p.resumeTxn(h.ProducerID, q, g, err) })
	return false
}

// checkTxnProduce applies the produce-side rules to a transactional
// produce: one batch, transactional, of a producer, not a control batch.
func checkTxnProduce(headers []batch.Validated) error {
	if len(headers) != 1 {
		return fmt.Errorf("%w: a transactional produce must carry exactly one batch per partition, got %d", batch.ErrInvalidRecord, len(headers))
	}
	switch h := headers[0]; {
	case h.IsControl():
		return fmt.Errorf("%w: control batches are written by the broker, not by clients", batch.ErrInvalidRecord)
	case !h.IsTransactional():
		return fmt.Errorf("%w: not a transactional batch", batch.ErrInvalidRecord)
	case h.ProducerID < 0:
		return fmt.Errorf("%w: transactional batch without a producer id", batch.ErrInvalidRecord)
	}
	return nil
}

// startVerification hands out the guard for item's verification, or fails
// it at once when its epoch is already fenced here. Caller holds p.mu.
func (p *Partition) startVerification(item txnItem) (*txn.Verification, error) {
	h := item.header
	return p.startGuard(h.ProducerID, h.ProducerEpoch, h.BaseSequence)
}

// startGuard hands out the verification guard of producer (pid, epoch)
// from sequence seq, refusing a leader that no longer takes writes or an
// epoch already fenced here. Caller holds p.mu.
func (p *Partition) startGuard(pid int64, epoch int16, seq int32) (*txn.Verification, error) {
	if _, err := p.leaderWrite(); err != nil {
		return nil, err
	}
	if cur, ok := p.producers.Epoch(pid); ok && epoch < cur {
		return nil, fmt.Errorf("%w: producer %d epoch %d < current %d", txn.ErrInvalidEpoch, pid, epoch, cur)
	}
	return p.producers.StartVerification(pid, epoch, seq, p.opts.Clock.Now().UnixMilli()), nil
}

// appendTxnItem appends a queued or direct transactional produce with
// guard (nil: none needed). Caller holds p.mu.
func (p *Partition) appendTxnItem(item txnItem, guard *txn.Verification) (ProduceResult, error) {
	replicated, err := p.leaderWrite()
	if err != nil {
		return ProduceResult{}, err
	}
	appendTime := int64(-1)
	if p.cfg.LogAppendTime {
		appendTime = p.opts.Clock.Now().UnixMilli()
	}
	return p.appendLocked([][]byte{item.batch}, []batch.Header{item.header.Header},
		writeSpec{origin: txn.OriginClient, guard: guard, appendTime: appendTime}, replicated)
}

// resumeTxn completes the verification of the head of pid's queue q with
// the coordinator's answer, appends what it may, and starts the next
// verification if a later append needs one.
func (p *Partition) resumeTxn(pid int64, q *txnQueue, guard *txn.Verification, verr error) {
	p.mu.Lock()
	if p.txnq[pid] != q || len(q.items) == 0 {
		p.mu.Unlock() // failed meanwhile (role change, deletion): already answered
		return
	}
	var fin []finished
	head := q.items[0]
	q.items = q.items[1:]
	if verr != nil {
		fin = append(fin, finished{done: head.done, err: verr})
	} else {
		res, err := p.appendTxnItem(head, guard)
		fin = append(fin, finished{done: head.done, res: res, err: err})
	}
	var next *txnItem
	var nextGuard *txn.Verification
	for len(q.items) > 0 {
		it := q.items[0]
		if p.producers.NeedsVerification(pid, it.header.ProducerEpoch) {
			g, err := p.startVerification(it)
			if err == nil {
				next, nextGuard = &it, g
				break
			}
			q.items = q.items[1:]
			fin = append(fin, finished{done: it.done, err: err})
			continue
		}
		q.items = q.items[1:]
		res, err := p.appendTxnItem(it, nil)
		fin = append(fin, finished{done: it.done, res: res, err: err})
	}
	if next == nil {
		delete(p.txnq, pid)
	}
	p.mu.Unlock()
	report(fin)
	if next != nil {
		next.verify(pid, next.header.ProducerEpoch, func(err error) { p.resumeTxn(pid, q, nextGuard, err) })
	}
}

// failTxnQueues fails every queued transactional append with err (the
// partition stopped leading, or is going away) and returns them to report
// once the caller released the partition's locks. Caller holds p.mu.
func (p *Partition) failTxnQueues(err error) []finished {
	var fin []finished
	for pid, q := range p.txnq {
		for _, it := range q.items {
			fin = append(fin, finished{done: it.done, err: err})
		}
		delete(p.txnq, pid)
	}
	return fin
}

// MarkerParams is an end-transaction marker to write (WriteTxnMarkers).
type MarkerParams struct {
	ProducerID       int64
	Epoch            int16
	Commit           bool
	CoordinatorEpoch int32
	// TV2: the coordinator runs transaction version 2, whose markers carry
	// the bumped epoch (see txn.Marker).
	TV2 bool
}

// WriteMarker appends the end-transaction marker of a producer's
// transaction, as a transaction coordinator asks (WriteTxnMarkers): it
// ends the producer's open transaction on the partition, committing or
// aborting it (an aborted one gets its index entry), and fences a stale
// producer or coordinator epoch (txn.ErrInvalidEpoch,
// txn.ErrCoordinatorFenced). A marker for a producer without an open
// transaction here is written anyway, as Kafka does. Markers are acks=all:
// the caller waits with WaitReplicated; their fsync does not wait out the
// group-commit window (log.Hurry).
func (p *Partition) WriteMarker(m MarkerParams) (ProduceResult, error) {
	b := batch.BuildEndTxnMarker(m.ProducerID, m.Epoch,
		batch.EndTxnMarker{Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}, p.opts.Clock.Now().UnixMilli())
	h, err := batch.ParseHeader(b)
	if err != nil {
		return ProduceResult{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	replicated, err := p.leaderWrite()
	if err != nil {
		return ProduceResult{}, err
	}
	res, err := p.appendLocked([][]byte{b}, []batch.Header{h},
		writeSpec{origin: txn.OriginCoordinator, tv2: m.TV2, appendTime: -1}, replicated)
	if err == nil {
		// The coordinator completes the transaction once every marker is
		// durable, and the producer's next transaction waits for that:
		// the fsync skips the group-commit window.
		p.log.Hurry()
	}
	return res, err
}

// StartTxnWrite is for a coordinator writing inside a producer's
// transaction to its own partition (the group coordinator's transactional
// offset commits): it says whether the write would open the transaction
// here, and if so hands out the guard to append it with once the
// transaction coordinator confirmed the partition is in the transaction.
func (p *Partition) StartTxnWrite(pid int64, epoch int16) (guard *txn.Verification, needed bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.leaderWrite(); err != nil {
		return nil, false, err
	}
	if !p.producers.NeedsVerification(pid, epoch) {
		return nil, false, nil
	}
	g, err := p.startGuard(pid, epoch, 0)
	return g, err == nil, err
}

// AppendCoordinator appends one transactional batch a coordinator wrote
// for producer (pid, epoch) to its own partition, with the guard
// StartTxnWrite handed out (nil when none was needed): epoch and
// verification are checked, sequences are not (the coordinator numbers
// its batches from 0, as Kafka's does). acks=all: the caller waits with
// WaitReplicated.
func (p *Partition) AppendCoordinator(b []byte, guard *txn.Verification) (ProduceResult, error) {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return ProduceResult{}, err
	}
	if !h.IsTransactional() || h.IsControl() || h.ProducerID < 0 {
		return ProduceResult{}, fmt.Errorf("%w: a coordinator's transactional write must be a transactional data batch of a producer", batch.ErrInvalidRecord)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	replicated, err := p.leaderWrite()
	if err != nil {
		return ProduceResult{}, err
	}
	return p.appendLocked([][]byte{b}, []batch.Header{h},
		writeSpec{origin: txn.OriginCoordinator, guard: guard, appendTime: -1}, replicated)
}

// TxnState is the partition's last stable offset and how many
// transactions are open on it, for /stats and /metrics (read without the
// append lock, from the published view).
func (p *Partition) TxnState() (lastStable int64, open int) {
	hw := p.HighWatermark()
	lso := p.lastStable(hw, p.log.LogStartOffset())
	if v := p.stable.Load(); v != nil {
		open = v.Open
	}
	return lso, open
}

// Producers describes the producers the partition knows, for
// DescribeProducers. A follower refuses (ErrNotLeader), as Kafka's does.
func (p *Partition) Producers() ([]txn.ProducerInfo, error) {
	if p.IsFollower() {
		return nil, p.notLeader()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.Producers(), nil
}

// abortedIn lists the aborted transactions a read_committed consumer
// reading [from, upTo) must know to drop their records: never nil.
func (p *Partition) abortedIn(from, upTo int64) ([]AbortedTxn, error) {
	out := []AbortedTxn{}
	if upTo <= from {
		return out, nil
	}
	entries, err := p.log.AbortedTxns(from, upTo)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		out = append(out, AbortedTxn{ProducerID: e.ProducerID, FirstOffset: e.FirstOffset})
	}
	return out, nil
}
