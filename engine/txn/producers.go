// Package txn owns a partition's producer state: per producer id, the last
// sequence numbers it wrote (to drop retried duplicates and reject gaps),
// its epoch (fencing), the coordinator epoch of the last transaction marker
// it got, and the transaction it has open on the partition, if any; over all
// producers, the open transactions in offset order and the completed ones
// whose marker is not yet below the high watermark, from which the last
// stable offset (LSO) follows, and the aborted transactions the partition's
// aborted-transaction index records. It is pure: no I/O, no clock (times come
// in as arguments), and it imports no other MoonMQ package.
//
// Appends are staged and applied (Kafka's ProducerAppendInfo): Begin starts
// an Update over the current state, Add checks and stages one batch (a data
// batch or an end-transaction marker) by the rules of its Origin, and Apply
// commits the Update once the log append succeeded. A failed append applies
// nothing.
//
// Invariants: a ProducerState is touched only under its partition's append
// lock, so Updates see the log in the order it was written; a producer with
// an open transaction is never expired; the LSO never passes the first offset
// of an open transaction, nor that of a completed one whose marker is at or
// above the high watermark.
package txn

import (
	"errors"
	"fmt"
	"slices"
)

// Errors of Check and Update.Add, mapped by net/kafka to the Kafka codes of
// the same names.
var (
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	ErrInvalidEpoch       = errors.New("producer epoch is stale (fenced by a newer producer)")
	ErrInvalidSequence    = errors.New("invalid sequence number")
	// ErrInvalidTxnState: a non-transactional write from a producer with a
	// transaction open on the partition (INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("invalid transaction state")
	// ErrTxnNotVerified: a transactional write that would open a
	// transaction on the partition without the coordinator having
	// confirmed the partition is in it (KIP-890 part 1), or whose
	// verification a marker made stale (INVALID_TXN_STATE to the client).
	ErrTxnNotVerified = errors.New("transaction not verified for this partition")
	// ErrCoordinatorFenced: an end-transaction marker from a coordinator
	// epoch older than the last one seen (TRANSACTION_COORDINATOR_FENCED).
	ErrCoordinatorFenced = errors.New("transaction coordinator epoch is stale")
)

// MaxCachedBatches is how many recent batches per producer are remembered for
// duplicate detection: Kafka clients keep at most 5 requests in flight per
// connection when idempotence is on, so a retry is always among the last 5.
const MaxCachedBatches = 5

// BatchInfo is what the log knows about an appended producer batch.
type BatchInfo struct {
	FirstSeq, LastSeq      int32
	BaseOffset, LastOffset int64
	Timestamp              int64 // MaxTimestamp as stored, returned again for duplicates
}

// Origin is who writes a batch, which decides the checks it gets.
type Origin uint8

const (
	// OriginClient: a producer's write; every check, verification included.
	OriginClient Origin = iota
	// OriginCoordinator: a marker, or a coordinator's transactional write
	// to its own partition: epoch and verification checks, no sequences.
	OriginCoordinator
	// OriginReplication: a follower's copy of the leader's log, or a replay
	// of the log at load: nothing is refused (the leader decided); the
	// state follows what is written.
	OriginReplication
)

// Batch describes one batch to append, as its header and (for a marker) its
// control record say.
type Batch struct {
	ProducerID    int64
	Epoch         int16
	FirstSeq      int32
	Count         int32
	BaseOffset    int64
	LastOffset    int64
	MaxTimestamp  int64
	Transactional bool
	// Marker is set for a control batch that ends a transaction.
	Marker *Marker
}

// Marker is an end-transaction marker.
type Marker struct {
	Commit           bool
	CoordinatorEpoch int32
	// TV2: written by a coordinator of transaction version 2 (KIP-890 part
	// 2), whose markers always carry an epoch above the transaction's data:
	// such a marker at the epoch of an open transaction can only be a late
	// duplicate and must not end it.
	TV2 bool
}

type producer struct {
	epoch            int16
	batches          []BatchInfo // oldest first, at most MaxCachedBatches, of the current epoch
	coordinatorEpoch int32       // of the last marker; -1 none
	txnFirst         int64       // first offset of the open transaction here; -1 none
	lastTimestamp    int64       // of the last data batch or marker, for expiry
	verifying        *Verification
}

func newProducer(epoch int16) *producer {
	return &producer{epoch: epoch, coordinatorEpoch: -1, txnFirst: -1, lastTimestamp: -1}
}

func (p *producer) clone() *producer {
	c := *p
	c.batches = slices.Clone(p.batches)
	return &c
}

func (p *producer) record(info BatchInfo) {
	if len(p.batches) == MaxCachedBatches {
		copy(p.batches, p.batches[1:])
		p.batches = p.batches[:MaxCachedBatches-1]
	}
	p.batches = append(p.batches, info)
}

// setEpoch moves the producer to epoch; a new epoch restarts sequences.
func (p *producer) setEpoch(epoch int16) {
	if epoch != p.epoch {
		p.epoch = epoch
		p.batches = p.batches[:0]
	}
}

// Verification is the guard of a KIP-890 verification: StartVerification
// hands it out before the coordinator is asked whether the partition is in
// the producer's transaction, and the append that follows a positive answer
// passes it back. A marker or another transactional append for the producer
// in between replaces or clears it, so a stale answer opens nothing.
type Verification struct {
	pid       int64
	epoch     int16
	lowestSeq int32
	startedMs int64
}

// ProducerState tracks the producers that wrote to one partition.
type ProducerState struct {
	producers map[int64]*producer
	// unreplicated are completed transactions whose marker was not yet
	// below the high watermark when last pruned, in marker order.
	unreplicated []CompletedTxn
}

// NewProducerState returns empty state.
func NewProducerState() *ProducerState {
	return &ProducerState{producers: make(map[int64]*producer)}
}

// Len is the number of producers tracked.
func (s *ProducerState) Len() int { return len(s.producers) }

// Check decides whether a non-transactional batch from (pid, epoch) with
// sequences [firstSeq, firstSeq+count-1] may be appended by a client. It
// returns the earlier append's info when the batch is a retry of one of the
// last MaxCachedBatches batches (the caller answers success with those
// offsets and appends nothing), or an error when it must be rejected.
func (s *ProducerState) Check(pid int64, epoch int16, firstSeq, count int32) (dup *BatchInfo, err error) {
	return s.Begin(OriginClient).Add(Batch{ProducerID: pid, Epoch: epoch, FirstSeq: firstSeq, Count: count,
		BaseOffset: -1, LastOffset: -1, MaxTimestamp: -1}, nil)
}

// Record notes a successfully appended non-transactional batch.
func (s *ProducerState) Record(pid int64, epoch int16, info BatchInfo) {
	if pid < 0 {
		return
	}
	u := s.Begin(OriginReplication)
	_, _ = u.Add(Batch{ProducerID: pid, Epoch: epoch, FirstSeq: info.FirstSeq,
		Count: info.LastSeq - info.FirstSeq + 1, BaseOffset: info.BaseOffset, LastOffset: info.LastOffset,
		MaxTimestamp: info.Timestamp}, nil)
	s.Apply(u)
}

// addSeq adds to a sequence number, wrapping at int32 max as Kafka does.
func addSeq(seq, n int32) int32 {
	if seq > int32(^uint32(0)>>1)-n {
		return n - (int32(^uint32(0)>>1) - seq) - 1
	}
	return seq + n
}

// Epoch returns the current epoch of producer pid, if the partition knows
// it: a write at an older epoch is fenced without asking anyone.
func (s *ProducerState) Epoch(pid int64) (int16, bool) {
	p := s.producers[pid]
	if p == nil {
		return 0, false
	}
	return p.epoch, true
}

// LastSeq returns the last sequence of a batch of count records starting at firstSeq.
func LastSeq(firstSeq, count int32) int32 { return addSeq(firstSeq, count-1) }

// NeedsVerification reports whether a transactional write of (pid, epoch)
// would open a transaction on the partition: the producer has none open at
// that epoch (Kafka 4.0's hasOngoingTransaction(pid, epoch): a TV2
// producer's next transaction, at a bumped epoch, must not join the
// previous one whose marker has not arrived yet).
func (s *ProducerState) NeedsVerification(pid int64, epoch int16) bool {
	p := s.producers[pid]
	return p == nil || p.txnFirst < 0 || p.epoch != epoch
}

// StartVerification hands out the guard of a verification of (pid, epoch)
// starting at sequence seq, replacing any earlier one of the producer.
func (s *ProducerState) StartVerification(pid int64, epoch int16, seq int32, nowMs int64) *Verification {
	p := s.producers[pid]
	if p == nil {
		// Known only for the verification: not snapshotted, and expired
		// with it.
		p = newProducer(epoch)
		s.producers[pid] = p
	}
	v := &Verification{pid: pid, epoch: epoch, lowestSeq: seq, startedMs: nowMs}
	p.verifying = v
	return v
}

// Expire forgets producers whose last write is older than maxAge (Kafka's
// producer.id.expiration.ms), so short-lived producers do not accumulate
// forever; a producer with an open transaction is never forgotten, and a
// verification older than maxAge is dropped. It returns how many producers
// were removed.
func (s *ProducerState) Expire(nowMillis int64, maxAge int64) int {
	n := 0
	for id, p := range s.producers {
		if p.verifying != nil && nowMillis-p.verifying.startedMs >= maxAge {
			p.verifying = nil
		}
		if p.txnFirst >= 0 || p.verifying != nil {
			continue
		}
		if nowMillis-p.lastTimestamp >= maxAge {
			delete(s.producers, id)
			n++
		}
	}
	return n
}

// Update stages the effect of appends on a ProducerState without changing
// it; Apply commits it.
type Update struct {
	base    *ProducerState
	origin  Origin
	touched map[int64]*producer
	// completed in this update, in marker order; aborted are their index
	// entries.
	completed []CompletedTxn
	aborted   []AbortedTxn
	// opened: a transaction starts on the partition in this update.
	opened bool
}

// Begin starts an update of appends from origin.
func (s *ProducerState) Begin(origin Origin) *Update {
	return &Update{base: s, origin: origin}
}

// staged returns the producer as the update sees it (nil: unknown), and
// whether it is a copy the update owns.
func (u *Update) staged(pid int64) *producer {
	if p, ok := u.touched[pid]; ok {
		return p
	}
	return u.base.producers[pid]
}

func (u *Update) own(pid int64, epoch int16) *producer {
	if p, ok := u.touched[pid]; ok {
		return p
	}
	var p *producer
	if b := u.base.producers[pid]; b != nil {
		p = b.clone()
	} else {
		p = newProducer(epoch)
	}
	if u.touched == nil {
		u.touched = map[int64]*producer{}
	}
	u.touched[pid] = p
	return p
}

// Add checks batch b by the rules of the update's origin and stages it. For
// a client's duplicate of one of the producer's last batches it returns
// that batch's info and stages nothing. guard is the verification the
// caller obtained for a transactional write that opens a transaction (nil
// otherwise).
func (u *Update) Add(b Batch, guard *Verification) (dup *BatchInfo, err error) {
	if b.ProducerID < 0 {
		if b.Marker != nil || b.Transactional {
			return nil, fmt.Errorf("%w: transactional batch without a producer id", ErrInvalidTxnState)
		}
		return nil, nil // not an idempotent batch
	}
	if b.Marker != nil {
		return nil, u.addMarker(b)
	}
	if u.origin == OriginClient && b.FirstSeq < 0 {
		return nil, fmt.Errorf("%w: producer %d sent base sequence %d", ErrInvalidSequence, b.ProducerID, b.FirstSeq)
	}
	p := u.staged(b.ProducerID)
	switch {
	case u.origin == OriginReplication:
	case p != nil:
		if d := p.duplicate(b); d != nil && u.origin == OriginClient {
			return d, nil
		}
		if err := u.check(p, b, guard); err != nil {
			return nil, err
		}
	case b.Transactional:
		// Unknown producer: StartVerification would have made it known.
		return nil, fmt.Errorf("%w: producer %d epoch %d", ErrTxnNotVerified, b.ProducerID, b.Epoch)
	}
	if b.BaseOffset < 0 {
		return nil, nil // a check only (Check): nothing to stage
	}
	p = u.own(b.ProducerID, b.Epoch)
	if b.Epoch > p.epoch || u.origin == OriginReplication {
		p.setEpoch(b.Epoch)
	}
	if u.origin != OriginCoordinator {
		p.record(BatchInfo{FirstSeq: b.FirstSeq, LastSeq: addSeq(b.FirstSeq, b.Count-1),
			BaseOffset: b.BaseOffset, LastOffset: b.LastOffset, Timestamp: b.MaxTimestamp})
	}
	if b.Transactional && p.txnFirst < 0 {
		p.txnFirst = b.BaseOffset
		u.opened = true
	}
	p.lastTimestamp = max(p.lastTimestamp, b.MaxTimestamp)
	if b.Transactional {
		p.verifying = nil
	}
	return nil, nil
}

func (v *Verification) matches(b Batch) bool {
	return v != nil && v.pid == b.ProducerID && v.epoch == b.Epoch
}

// duplicate returns the cached batch b retries, if any.
func (p *producer) duplicate(b Batch) *BatchInfo {
	if b.Epoch != p.epoch {
		return nil
	}
	lastSeq := addSeq(b.FirstSeq, b.Count-1)
	for i := range p.batches {
		if c := p.batches[i]; c.FirstSeq == b.FirstSeq && c.LastSeq == lastSeq {
			return &c
		}
	}
	return nil
}

// check applies the epoch, verification, sequence and transaction
// membership rules to a data batch of a known producer.
func (u *Update) check(p *producer, b Batch, guard *Verification) error {
	pid := b.ProducerID
	if b.Epoch < p.epoch {
		return fmt.Errorf("%w: producer %d epoch %d < current %d", ErrInvalidEpoch, pid, b.Epoch, p.epoch)
	}
	if b.Transactional && (p.txnFirst < 0 || p.epoch != b.Epoch) {
		// Opening a transaction here: only with the verification handed
		// out for it, still current.
		if guard == nil || p.verifying != guard || !guard.matches(b) {
			return fmt.Errorf("%w: producer %d epoch %d", ErrTxnNotVerified, pid, b.Epoch)
		}
		if u.origin == OriginClient && b.FirstSeq > guard.lowestSeq {
			// Kafka's checkSequence: the verified batch opens the
			// transaction, a later one must wait for it.
			return fmt.Errorf("%w: producer %d epoch %d verified from sequence %d, got %d first",
				ErrOutOfOrderSequence, pid, b.Epoch, guard.lowestSeq, b.FirstSeq)
		}
	}
	if u.origin == OriginClient {
		switch {
		case b.Epoch > p.epoch:
			// A bumped epoch restarts sequences at 0.
			if b.FirstSeq != 0 {
				return fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, got %d",
					ErrOutOfOrderSequence, pid, b.Epoch, b.FirstSeq)
			}
		case len(p.batches) > 0:
			if want := addSeq(p.batches[len(p.batches)-1].LastSeq, 1); b.FirstSeq != want {
				return fmt.Errorf("%w: producer %d epoch %d expected sequence %d, got %d",
					ErrOutOfOrderSequence, pid, b.Epoch, want, b.FirstSeq)
			}
		}
	}
	if !b.Transactional && p.txnFirst >= 0 {
		return fmt.Errorf("%w: producer %d has a transaction open at offset %d and wrote a non-transactional batch",
			ErrInvalidTxnState, pid, p.txnFirst)
	}
	return nil
}

// addMarker stages an end-transaction marker at b.BaseOffset.
func (u *Update) addMarker(b Batch) error {
	pid, m := b.ProducerID, b.Marker
	p := u.staged(pid)
	if u.origin != OriginReplication && p != nil {
		switch {
		case b.Epoch < p.epoch:
			return fmt.Errorf("%w: marker for producer %d at epoch %d < current %d", ErrInvalidEpoch, pid, b.Epoch, p.epoch)
		case m.CoordinatorEpoch < p.coordinatorEpoch:
			return fmt.Errorf("%w: marker for producer %d from coordinator epoch %d < %d", ErrCoordinatorFenced,
				pid, m.CoordinatorEpoch, p.coordinatorEpoch)
		case m.TV2 && p.txnFirst >= 0 && b.Epoch <= p.epoch:
			return fmt.Errorf("%w: transaction version 2 marker for producer %d at epoch %d, not above its open transaction's",
				ErrInvalidEpoch, pid, b.Epoch)
		}
	}
	if b.BaseOffset < 0 {
		return nil
	}
	p = u.own(pid, b.Epoch)
	if p.txnFirst >= 0 {
		c := CompletedTxn{ProducerID: pid, FirstOffset: p.txnFirst, LastOffset: b.BaseOffset, Aborted: !m.Commit}
		if c.Aborted {
			u.aborted = append(u.aborted, AbortedTxn{ProducerID: pid, FirstOffset: c.FirstOffset,
				LastOffset: c.LastOffset, LastStableOffset: u.firstOngoingBut(pid, b.BaseOffset+1)})
		}
		u.completed = append(u.completed, c)
	}
	p.setEpoch(b.Epoch)
	p.coordinatorEpoch = max(p.coordinatorEpoch, m.CoordinatorEpoch)
	if u.origin == OriginReplication {
		p.coordinatorEpoch = m.CoordinatorEpoch
	}
	p.txnFirst = -1
	if !(m.TV2 && p.verifying != nil && p.verifying.epoch >= b.Epoch) {
		// A verification handed out before the marker may be a late write
		// of the transaction it ends (same epoch before transaction
		// version 2): it must not open a new one. Under version 2 the
		// marker carries the bumped epoch, and a verification at it (or
		// above) is for the producer's next transaction, which the
		// coordinator confirms only after this one completed: it stays.
		p.verifying = nil
	}
	p.lastTimestamp = max(p.lastTimestamp, b.MaxTimestamp)
	return nil
}

// firstOngoingBut is the first offset of the first transaction open, as the
// update sees them, of a producer other than pid; else otherwise (Kafka's
// lastStableOffset of an aborted transaction's index entry).
func (u *Update) firstOngoingBut(pid int64, otherwise int64) int64 {
	first := int64(-1)
	consider := func(id int64, p *producer) {
		if id != pid && p.txnFirst >= 0 && (first < 0 || p.txnFirst < first) {
			first = p.txnFirst
		}
	}
	for id, p := range u.base.producers {
		if _, ok := u.touched[id]; !ok {
			consider(id, p)
		}
	}
	for id, p := range u.touched {
		consider(id, p)
	}
	if first < 0 {
		return otherwise
	}
	return first
}

// Aborted returns the index entries of the transactions the staged markers
// aborted, in offset order.
func (u *Update) Aborted() []AbortedTxn { return u.aborted }

// Apply commits the update.
func (s *ProducerState) Apply(u *Update) {
	if u.base != s {
		panic("txn: Apply of another state's update")
	}
	for id, p := range u.touched {
		s.producers[id] = p
	}
	s.unreplicated = append(s.unreplicated, u.completed...)
	u.touched, u.completed, u.aborted, u.opened = nil, nil, nil, false
}

// ChangesStable reports whether the update opens or ends a transaction:
// only then does the view the last stable offset comes from change.
func (u *Update) ChangesStable() bool { return u.opened || len(u.completed) > 0 }
