package txncoord

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
)

// State is a transaction's state, numbered as Kafka's TransactionState ids
// (the transaction_status byte of __transaction_state values).
type State int8

const (
	StateEmpty             State = 0
	StateOngoing           State = 1
	StatePrepareCommit     State = 2
	StatePrepareAbort      State = 3
	StateCompleteCommit    State = 4
	StateCompleteAbort     State = 5
	StateDead              State = 6 // never written: a tombstone is
	StatePrepareEpochFence State = 7 // never written: transient in Kafka
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
	"CompleteAbort", "Dead", "PrepareEpochFence"}

// String is the state's name as DescribeTransactions and
// ListTransactions report it.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// ParseState is the state of a name String gives (ListTransactions
// filters), case as Kafka spells it.
func ParseState(name string) (State, bool) {
	i := slices.Index(stateNames[:], name)
	return State(i), i >= 0
}

// completed reports whether s ends a transaction (or none began): a new
// one may start.
func (s State) completed() bool {
	return s == StateEmpty || s == StateCompleteCommit || s == StateCompleteAbort
}

func (s State) preparing() bool { return s == StatePrepareCommit || s == StatePrepareAbort }

// TP is a topic partition.
type TP struct {
	Topic     string
	Partition int32
}

func compareTP(a, b TP) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// Metadata is the coordinator's state of one transactional id (Kafka's
// TransactionMetadata). A value: transitions return a new one.
type Metadata struct {
	ID         string
	ProducerID int64
	// PrevProducerID is the producer id before the last transition that
	// changed it (Kafka's prevProducerId): a producer retrying an EndTxn
	// across an id rotation is recognised by it. -1: none.
	PrevProducerID int64
	// NextProducerID is the id the producer moves to once the markers of
	// a transaction (version 2) whose epoch would overflow are written.
	NextProducerID int64
	Epoch          int16 // -1 only for a metadata made this instant
	// LastEpoch is the epoch before the last bump, for recognising a
	// retried request (KIP-360, KIP-890); not persisted (Kafka reads it
	// back as -1).
	LastEpoch    int16
	TimeoutMs    int32
	State        State
	Partitions   map[TP]struct{}
	StartMs      int64 // -1 unless a transaction is under way or was
	LastUpdateMs int64
	// ClientTV is the transaction version of the request that made the
	// last transition: 2 (KIP-890 part 2) bumps the epoch at every end.
	ClientTV int16
}

func (m Metadata) clone() Metadata {
	m.Partitions = maps.Clone(m.Partitions)
	if m.Partitions == nil {
		m.Partitions = map[TP]struct{}{}
	}
	return m
}

// SortedPartitions are the transaction's partitions by topic and partition.
func (m Metadata) SortedPartitions() []TP {
	out := slices.Collect(maps.Keys(m.Partitions))
	slices.SortFunc(out, compareTP)
	return out
}

const (
	noProducerID = -1
	noEpoch      = -1
	// maxEpoch is the largest producer epoch; an epoch at or above
	// maxEpoch-1 is exhausted (Kafka's isEpochExhausted: the next bump
	// and a fence bump must still fit).
	maxEpoch = math.MaxInt16
)

func exhausted(epoch int16) bool { return epoch >= maxEpoch-1 }

func tv2(tv int16) bool { return tv >= 2 }

// PidEpoch is a producer id and epoch.
type PidEpoch struct {
	ProducerID int64
	Epoch      int16
}

// newMetadata is the metadata of a transactional id seen for the first
// time, with producer id pid, before its first transition.
func newMetadata(id string, pid int64, timeoutMs int32, nowMs int64) Metadata {
	return Metadata{ID: id, ProducerID: pid, PrevProducerID: noProducerID, NextProducerID: noProducerID,
		Epoch: noEpoch, LastEpoch: noEpoch, TimeoutMs: timeoutMs, State: StateEmpty, Partitions: map[TP]struct{}{},
		StartMs: -1, LastUpdateMs: nowMs}
}

// initOutcome is what InitProducerId does to a transactional id.
type initOutcome int

const (
	initReply initOutcome = iota // the next metadata is Empty: reply its producer id and epoch
	initFence                    // an Ongoing transaction is aborted: reply CONCURRENT_TRANSACTIONS
)

// prepareInit is InitProducerId's transition (Kafka's handleInitProducerId
// and prepareInitProducerIdTransit, KIP-360 for expected). candidate is a
// fresh producer id, or -1 if none was allocated (errNeedProducerID when
// one is needed).
func prepareInit(m Metadata, timeoutMs int32, expected *PidEpoch, candidate int64, serverTV int16, nowMs int64) (Metadata, initOutcome, error) {
	if expected != nil && m.Epoch != noEpoch && expected.ProducerID != m.ProducerID &&
		!(expected.ProducerID == m.PrevProducerID && exhausted(expected.Epoch)) {
		return m, 0, fmt.Errorf("%w: %q is producer %d, not %d", ErrProducerFenced, m.ID, m.ProducerID, expected.ProducerID)
	}
	switch {
	case m.State.preparing():
		return m, 0, fmt.Errorf("%w: %q is in %s", ErrConcurrentTransactions, m.ID, m.State)
	case m.State == StateOngoing:
		next, err := prepareFence(m, serverTV, candidate, nowMs)
		return next, initFence, err
	case !m.State.completed():
		return m, 0, fmt.Errorf("%w: %q is in %s", ErrInvalidTxnState, m.ID, m.State)
	}
	next := m.clone()
	next.PrevProducerID = m.ProducerID
	if exhausted(m.Epoch) && (expected == nil || expected.Epoch == m.Epoch) {
		if candidate < 0 {
			return m, 0, errNeedProducerID
		}
		next.ProducerID, next.Epoch, next.LastEpoch = candidate, 0, noEpoch
		if expected != nil {
			next.LastEpoch = m.Epoch
		}
	} else {
		switch {
		case expected == nil:
			next.Epoch, next.LastEpoch = m.Epoch+1, noEpoch
		case m.Epoch == noEpoch || expected.Epoch == m.Epoch:
			next.Epoch, next.LastEpoch = m.Epoch+1, m.Epoch
		case expected.Epoch == m.LastEpoch:
			// A retry of an InitProducerId that succeeded: the same
			// answer again.
			next.PrevProducerID = m.PrevProducerID
		default:
			return m, 0, fmt.Errorf("%w: %q is at epoch %d, the producer expected %d", ErrProducerFenced,
				m.ID, m.Epoch, expected.Epoch)
		}
	}
	next.State, next.Partitions, next.StartMs, next.LastUpdateMs = StateEmpty, map[TP]struct{}{}, -1, nowMs
	next.TimeoutMs, next.ClientTV, next.NextProducerID = timeoutMs, 0, noProducerID
	return next, initReply, nil
}

// prepareFence aborts an Ongoing transaction on the coordinator's own
// initiative (a newer InitProducerId, or its timeout): the epoch is bumped
// so the producer is fenced, and once more under transaction version 2,
// whose markers carry an epoch above the data's (Kafka's
// prepareFenceProducerEpoch then endTransaction(ABORT, isFromClient=false)).
// An epoch that would overflow moves the producer to a new id after the
// markers.
func prepareFence(m Metadata, serverTV int16, candidate int64, nowMs int64) (Metadata, error) {
	next := m.clone()
	fence := int32(m.Epoch) + 1
	marker, last := fence, int32(noEpoch)
	if tv2(serverTV) {
		marker, last = fence+1, fence
	}
	if marker > maxEpoch {
		if candidate < 0 {
			return m, errNeedProducerID
		}
		marker = maxEpoch
		next.NextProducerID = candidate
	}
	next.State, next.Epoch, next.LastEpoch, next.ClientTV, next.LastUpdateMs = StatePrepareAbort, int16(marker), int16(last), serverTV, nowMs
	return next, nil
}

// prepareAdd adds partitions to the transaction of (pid, epoch), starting
// it if none is under way (Kafka's handleAddPartitionsToTransaction). It
// reports changed=false when every partition is in the transaction
// already (nothing to write).
func prepareAdd(m Metadata, pid int64, epoch int16, tps []TP, tv int16, maxPartitions int, nowMs int64) (Metadata, bool, error) {
	if err := checkProducer(m, pid, epoch); err != nil {
		return m, false, err
	}
	switch {
	case m.State.preparing():
		return m, false, fmt.Errorf("%w: %q is in %s", ErrConcurrentTransactions, m.ID, m.State)
	case m.State != StateOngoing && !m.State.completed():
		return m, false, fmt.Errorf("%w: %q is in %s", ErrInvalidTxnState, m.ID, m.State)
	}
	if m.State == StateOngoing && !slices.ContainsFunc(tps, func(tp TP) bool { _, in := m.Partitions[tp]; return !in }) {
		return m, false, nil
	}
	next := m.clone()
	for _, tp := range tps {
		next.Partitions[tp] = struct{}{}
	}
	if len(next.Partitions) > maxPartitions {
		return m, false, fmt.Errorf("%w: %q would hold %d partitions, at most %d", ErrTooManyPartitions, m.ID,
			len(next.Partitions), maxPartitions)
	}
	if m.State.completed() {
		next.StartMs, next.ClientTV = nowMs, tv
	}
	next.State, next.LastUpdateMs = StateOngoing, nowMs
	return next, true, nil
}

// checkProducer is the common check of a request naming (pid, epoch).
func checkProducer(m Metadata, pid int64, epoch int16) error {
	if m.ProducerID != pid {
		return fmt.Errorf("%w: %q is producer %d, not %d", ErrInvalidProducerIDMapping, m.ID, m.ProducerID, pid)
	}
	if m.Epoch != epoch {
		return fmt.Errorf("%w: %q is at epoch %d, the request %d", ErrProducerFenced, m.ID, m.Epoch, epoch)
	}
	return nil
}

// verify answers a partition leader's verification (AddPartitionsToTxn
// v4 VerifyOnly, KIP-890 part 1): for each partition, nil if it is in the
// transaction of (pid, epoch), else ErrTransactionAbortable; or one error
// for all.
func verify(m Metadata, pid int64, epoch int16, tps []TP) (map[TP]error, error) {
	if err := checkProducer(m, pid, epoch); err != nil {
		return nil, err
	}
	if m.State.preparing() {
		return nil, fmt.Errorf("%w: %q is in %s", ErrConcurrentTransactions, m.ID, m.State)
	}
	out := make(map[TP]error, len(tps))
	for _, tp := range tps {
		if _, in := m.Partitions[tp]; !in || m.State != StateOngoing {
			out[tp] = fmt.Errorf("%w: %s-%d is not in %q's transaction", ErrTransactionAbortable, tp.Topic, tp.Partition, m.ID)
		} else {
			out[tp] = nil
		}
	}
	return out, nil
}

// endOutcome is what EndTxn does.
type endOutcome int

const (
	endReplyOnly    endOutcome = iota // nothing to write: answer with the metadata's producer id and epoch
	endPrepare                        // write the Prepare*, then markers
	endAbortNothing                   // an empty abort (version 2): write PrepareAbort and CompleteAbort at once
)

// prepareEnd is EndTxn's transition (Kafka's endTransaction with
// isFromClient, KIP-890 part 2 and the Kafka 4.0 additions: an abort of an
// empty transaction under version 2 succeeds and bumps the epoch; Complete*
// accepts the current epoch).
func prepareEnd(m Metadata, pid int64, epoch int16, commit bool, tv int16, candidate int64, nowMs int64) (Metadata, endOutcome, error) {
	metaTV2 := tv2(m.ClientTV)
	retryOnOverflow := metaTV2 && m.PrevProducerID == pid && epoch == maxEpoch-1 && m.Epoch == 0
	retryOnBump := metaTV2 && int32(m.Epoch) == int32(epoch)+1
	if m.ProducerID != pid && !retryOnOverflow {
		return m, 0, fmt.Errorf("%w: %q is producer %d, not %d", ErrInvalidProducerIDMapping, m.ID, m.ProducerID, pid)
	}
	valid := epoch == m.Epoch
	if metaTV2 {
		switch {
		case m.State.preparing():
			valid = retryOnBump
		case m.State == StateCompleteCommit || m.State == StateCompleteAbort:
			valid = retryOnBump || retryOnOverflow || epoch == m.Epoch
		}
	}
	if !valid && metaTV2 && m.State.preparing() && epoch == m.Epoch {
		// The producer's next EndTxn (an empty abort, typically) while the
		// markers of the transaction that handed it this epoch are still
		// being written. Kafka answers PRODUCER_FENCED, which clients take
		// as fatal; only the producer that ended that transaction was told
		// this epoch, so it is asked to retry once the markers are in.
		return m, 0, fmt.Errorf("%w: %q is completing its previous transaction", ErrConcurrentTransactions, m.ID)
	}
	if !valid {
		return m, 0, fmt.Errorf("%w: %q is at epoch %d, the request %d", ErrProducerFenced, m.ID, m.Epoch, epoch)
	}
	isRetry := metaTV2 && (retryOnBump || retryOnOverflow)
	wrong := func() (Metadata, endOutcome, error) {
		verb := "abort"
		if commit {
			verb = "commit"
		}
		return m, 0, fmt.Errorf("%w: cannot %s %q in %s", ErrInvalidTxnState, verb, m.ID, m.State)
	}
	switch m.State {
	case StateOngoing:
		next, err := prepareEndOngoing(m, commit, tv, candidate, nowMs)
		return next, endPrepare, err
	case StatePrepareCommit:
		if commit {
			return m, 0, fmt.Errorf("%w: %q is committing", ErrConcurrentTransactions, m.ID)
		}
		return wrong()
	case StatePrepareAbort:
		if !commit {
			return m, 0, fmt.Errorf("%w: %q is aborting", ErrConcurrentTransactions, m.ID)
		}
		return wrong()
	case StateCompleteCommit:
		switch {
		case commit && (!metaTV2 || isRetry):
			return m, endReplyOnly, nil
		case commit || isRetry || !metaTV2:
			return wrong()
		}
	case StateCompleteAbort:
		switch {
		case commit:
			return wrong()
		case !metaTV2 || isRetry:
			return m, endReplyOnly, nil
		}
	case StateEmpty:
		if commit {
			return wrong()
		}
	default:
		return wrong()
	}
	// An abort with nothing under way: only a version-2 client, which
	// expects the epoch bump that fences what it may have sent.
	if !tv2(tv) {
		return wrong()
	}
	next := m.clone()
	next.Partitions, next.StartMs = map[TP]struct{}{}, nowMs
	next, err := prepareEndOngoing(next, false, tv, candidate, nowMs)
	return next, endAbortNothing, err
}

// prepareEndOngoing moves an Ongoing transaction to Prepare*: under
// version 2 the epoch is bumped (the markers carry it), and an exhausted
// epoch moves the producer to a new id after the markers.
func prepareEndOngoing(m Metadata, commit bool, tv int16, candidate int64, nowMs int64) (Metadata, error) {
	next := m.clone()
	next.NextProducerID = noProducerID
	if tv2(tv) {
		if exhausted(m.Epoch) {
			if candidate < 0 {
				return m, errNeedProducerID
			}
			next.NextProducerID = candidate
		}
		next.Epoch, next.LastEpoch = m.Epoch+1, m.Epoch
	}
	next.State = StatePrepareAbort
	if commit {
		next.State = StatePrepareCommit
	}
	next.ClientTV, next.LastUpdateMs = tv, nowMs
	return next, nil
}

// endReply is the producer id and epoch EndTxn v5 answers after a
// transition to next: the id the producer continues with.
func endReply(next Metadata) PidEpoch {
	if next.NextProducerID >= 0 {
		return PidEpoch{ProducerID: next.NextProducerID, Epoch: 0}
	}
	return PidEpoch{ProducerID: next.ProducerID, Epoch: next.Epoch}
}

// prepareComplete ends a Prepare* once every marker is written (Kafka's
// prepareComplete and completeTransitionTo).
func prepareComplete(m Metadata, nowMs int64) Metadata {
	next := m.clone()
	next.State = StateCompleteAbort
	if m.State == StatePrepareCommit {
		next.State = StateCompleteCommit
	}
	next.Partitions, next.LastUpdateMs = map[TP]struct{}{}, nowMs
	if tv2(m.ClientTV) {
		next.PrevProducerID, next.LastEpoch = m.ProducerID, m.Epoch
		if m.NextProducerID >= 0 {
			next.ProducerID, next.Epoch = m.NextProducerID, 0
		}
	}
	next.NextProducerID = noProducerID
	return next
}
