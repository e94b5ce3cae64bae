package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/txn"
)

// Replication roles (issue 13), Kafka's Partition.makeLeader/makeFollower.
//
// A partition starts, and stays unless told otherwise, alone on its node
// (roleLocal): it leads, its high watermark is its log's committed end,
// follower fetches are refused, acks=all is the leader's fsync. This is
// every partition of a single node and of replication factor 1, and
// nothing on its produce path changes.
//
// BecomeLeader with an ISR makes it a replicated leader: the ISR (the pure
// state machine *cluster/replication.Leader, seen through the ISR
// interface so the engine never imports the cluster) owns the high
// watermark, which the partition publishes to its log
// (log.SetHighWatermark) after every input: its own committed end
// (Appended, from the log's durability callbacks), each follower fetch
// (FollowerFetched, with the follower's fetch offset = what it fsynced),
// and the node's calls through UpdateISR. Consumers read below it; acks=all
// produces wait for it (WaitReplicated) and are refused up front when the
// ISR is below min.insync.replicas (CanAppend). Followers read to the
// committed end, never past it: the ISR counts durable offsets only, so a
// follower can never report one the leader could still lose.
//
// A partition that reopens with a replicated high watermark checkpoint (it
// was replicated when it stopped, or when its log was healed) starts as a
// follower of nobody, until BecomeLeader or BecomeFollower: writes it took
// before knowing its role could be truncated by a leader elected meanwhile.
//
// BecomeFollower makes it a follower: produce, consumer and replica fetches
// and ListOffsets are refused with ErrNotLeader (NOT_LEADER_OR_FOLLOWER),
// and the partition takes the leader's batches instead (AppendAsFollower,
// offsets and epochs kept, idempotent-producer state rebuilt from them so a
// producer retrying against this replica once it leads is deduplicated),
// truncates a divergent tail (TruncateTo, TruncateFullyAndStartAt) and
// learns the leader's high watermark (SetFollowerHighWatermark).
//
// Locking: p.mu (appends, the producer state) is taken before repMu (the
// role and the ISR); role changes take both, so no append straddles one.

// ISR is the leader side of a replicated partition: its in-sync replicas,
// high watermark and acks=all readiness, as *cluster/replication.Leader
// implements them (the method set is that type's; a test in
// cluster/replication checks it satisfies this interface). Every call is
// made under the partition's replication lock, so it need not be safe for
// concurrent use.
type ISR interface {
	Appended(logEnd int64) error
	FollowerFetched(now time.Time, replica int32, fetchOffset int64, leaderEpoch int32) error
	Tick(now time.Time) error
	HighWatermark() int64
	CanAppend() error
	Ready(end int64) (bool, error)
}

// Errors of the replication roles.
var (
	// ErrNotLeader: this replica does not lead the partition now (Kafka
	// NOT_LEADER_OR_FOLLOWER): the client refreshes its metadata.
	ErrNotLeader = errors.New("not the leader of this partition")
	// ErrNotFollower: a follower-only operation (AppendAsFollower, a
	// truncation) on a replica that leads the partition.
	ErrNotFollower = errors.New("not a follower of this partition")
)

type role int32

const (
	roleLocal role = iota
	roleLeader
	roleFollower
)

// BecomeLeader makes this replica the partition's leader in epoch. With an
// ISR it is a replicated leader whose high watermark the ISR owns (the
// caller has installed the controller's state in it, with the partition's
// CommittedEnd and HighWatermark as its log end and HW); with a nil ISR it
// leads alone, as a partition of a single node does. An epoch older than
// the one the partition is in is refused with ErrFencedLeaderEpoch.
//
// A replicated partition's high watermark is checkpointed (when it takes a
// role, every HighWatermarkCheckpointInterval and at close), and a
// partition that reopens with a checkpoint starts from it, not from its
// log end: records it holds past the cluster's HW stay unread until the
// ISR says they are committed.
func (p *Partition) BecomeLeader(epoch int32, isr ISR) error {
	var failed []finished
	defer func() { report(failed) }() // after the locks are released
	p.mu.Lock()
	defer p.mu.Unlock()
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if epoch != p.LeaderEpoch() {
		// Appends waiting for verification were taken in another
		// leadership: the client retries against this one.
		failed = p.failTxnQueues(p.notLeader())
	}
	if err := p.enterEpoch(epoch, "lead"); err != nil {
		return err
	}
	p.isr, p.leaderID = isr, -1
	p.leaderHW.Store(-1)
	defer p.log.Wake() // waiters recheck the role
	if isr == nil {
		p.role.Store(int32(roleLocal))
		return p.log.ReleaseHighWatermark()
	}
	p.role.Store(int32(roleLeader))
	if err := isr.Appended(p.log.CommittedEnd()); err != nil {
		return fmt.Errorf("%s-%d becomes leader in epoch %d: %w", p.tp.Topic, p.tp.Partition, epoch, err)
	}
	p.log.SetHighWatermark(isr.HighWatermark())
	return p.log.CheckpointHighWatermark() // from now on a restart starts from the replicated HW
}

// BecomeFollower makes this replica a follower of broker leader in epoch:
// it stops taking produces and serving fetches (ErrNotLeader), and takes
// the leader's batches through AppendAsFollower. Its high watermark stays
// where it was until SetFollowerHighWatermark. An epoch older than the
// partition's is refused with ErrFencedLeaderEpoch.
func (p *Partition) BecomeFollower(epoch, leader int32) error {
	var failed []finished
	defer func() { report(failed) }() // after the locks are released
	p.mu.Lock()
	defer p.mu.Unlock()
	p.repMu.Lock()
	defer p.repMu.Unlock()
	failed = p.failTxnQueues(p.notLeader())
	same := p.currentRole() == roleFollower && p.leaderID == leader && p.LeaderEpoch() == epoch
	if err := p.enterEpoch(epoch, "follow"); err != nil {
		return err
	}
	if !same {
		p.leaderHW.Store(-1) // another leadership: its HW is not known yet
	}
	p.isr, p.leaderID = nil, leader
	p.role.Store(int32(roleFollower))
	p.log.SetHighWatermark(p.log.HighWatermark())
	p.log.Wake() // acks=all waiters and long polls learn it lost the leadership
	return p.log.CheckpointHighWatermark()
}

// enterEpoch moves the partition to leader epoch epoch for a role change
// (role names it), refusing an older one. Caller holds p.mu and repMu.
func (p *Partition) enterEpoch(epoch int32, role string) error {
	if cur := p.LeaderEpoch(); epoch < cur {
		return fmt.Errorf("%w: %s-%d is in leader epoch %d, asked to %s in %d", ErrFencedLeaderEpoch,
			p.tp.Topic, p.tp.Partition, cur, role, epoch)
	}
	p.leaderEpoch.Store(max(epoch, 0))
	return nil
}

func (p *Partition) currentRole() role { return role(p.role.Load()) }

// Replicated reports whether the partition is a replicated leader: its
// acks=all produces wait for the ISR (WaitReplicated), not only the fsync.
func (p *Partition) Replicated() bool { return p.currentRole() == roleLeader }

// IsFollower reports whether the partition follows another replica.
func (p *Partition) IsFollower() bool { return p.currentRole() == roleFollower }

// Leader is the broker this replica follows (-1 unless it is a follower).
func (p *Partition) Leader() int32 {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if p.currentRole() != roleFollower {
		return -1
	}
	return p.leaderID
}

// UpdateISR runs fn, which calls the ISR's own methods (Become, Tick,
// AlterPartitionResult...), under the partition's replication lock, then
// publishes the ISR's high watermark and wakes acks=all waiters and long
// polls. Without an ISR fn still runs under the lock.
func (p *Partition) UpdateISR(fn func()) {
	p.repMu.Lock()
	fn()
	if p.currentRole() == roleLeader {
		p.syncISRLocked()
	}
	p.repMu.Unlock()
	p.log.Wake()
}

// syncISRLocked tells the ISR the leader's committed end and publishes the
// HW it gives. Caller holds repMu and leads with an ISR.
func (p *Partition) syncISRLocked() {
	if err := p.isr.Appended(p.log.CommittedEnd()); err != nil {
		p.opts.Logger.Warn("the ISR refused the leader's committed end", "topic", p.tp.Topic,
			"partition", p.tp.Partition, "err", err)
	}
	p.log.SetHighWatermark(p.isr.HighWatermark())
}

// committed is the durability callback of a replicated leader's appends:
// the committed end moved, so the HW may.
func (p *Partition) committed(err error) {
	if err != nil {
		return // the append is not durable: nothing to report
	}
	p.repMu.Lock()
	if p.currentRole() == roleLeader {
		p.syncISRLocked()
	}
	p.repMu.Unlock()
}

// CanAppend says whether an acks=all produce may be appended now: a
// follower refuses with ErrNotLeader, a replicated leader whose ISR is
// below min.insync.replicas with the ISR's error (NOT_ENOUGH_REPLICAS).
func (p *Partition) CanAppend() error {
	switch p.currentRole() {
	case roleFollower:
		return p.notLeader()
	case roleLocal:
		return nil
	}
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if p.currentRole() != roleLeader {
		return p.notLeader()
	}
	return p.isr.CanAppend()
}

func (p *Partition) notLeader() error {
	return fmt.Errorf("%w: %s-%d", ErrNotLeader, p.tp.Topic, p.tp.Partition)
}

// WaitOffsetReplicated is WaitReplicated for the append that ended at
// offset (a coordinator's own write to its internal partition, which
// checks the log's generation itself after the wait): it waits for the
// ISR while the partition is a replicated leader, in whatever epoch.
func (p *Partition) WaitOffsetReplicated(ctx context.Context, offset int64) error {
	return p.waitReplicated(ctx, ProduceResult{lastOffset: offset}, false)
}

// WaitReplicated blocks until an acks=all produce may be answered: one
// appended alone, once it is durable (WaitDurable); one appended by a
// replicated leader, once it is durable here and the ISR's high watermark
// passed it while this replica still leads in the epoch and log
// generation of the append. The outcome is nil, the ISR's verdict
// (NOT_ENOUGH_REPLICAS_AFTER_APPEND: the ISR shrank below
// min.insync.replicas meanwhile), ErrNotLeader when this replica lost that
// leadership first (even if it leads again by now: its log may hold other
// records at those offsets), or the context's error.
func (p *Partition) WaitReplicated(ctx context.Context, r ProduceResult) error {
	if !r.replicated {
		return p.WaitDurable(ctx, r)
	}
	return p.waitReplicated(ctx, r, true)
}

func (p *Partition) waitReplicated(ctx context.Context, r ProduceResult, sameLeadership bool) error {
	if err := p.WaitDurable(ctx, r); err != nil {
		return err
	}
	end := r.lastOffset + 1
	for {
		changed := p.log.Changed() // before the check: a change after it closes it
		if !sameLeadership && p.currentRole() == roleLocal {
			return nil
		}
		p.repMu.Lock()
		if p.currentRole() != roleLeader ||
			sameLeadership && (p.LeaderEpoch() != r.epoch || p.log.Generation() != r.gen) {
			p.repMu.Unlock()
			return p.notLeader()
		}
		p.syncISRLocked()
		ok, err := p.isr.Ready(end)
		p.repMu.Unlock()
		if ok || err != nil {
			return err
		}
		if p.log.Closed() {
			return fmt.Errorf("%w: %s-%d", log.ErrClosed, p.tp.Topic, p.tp.Partition)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// replicaFetch serves a follower's fetch on a replicated leader: the
// fetch offset is what the follower has fsynced, reported to the ISR
// (which refuses an unknown replica or another leader epoch, and may move
// the HW); the read goes to the committed end. The offsets reported are
// taken after the ISR saw the fetch, so the follower learns the HW its own
// fetch made.
func (p *Partition) replicaFetch(fp FetchParams) (FetchResult, error) {
	res := FetchResult{Changed: p.log.Changed(), HighWatermark: -1, LastStable: -1, LogStart: -1}
	now := p.opts.Clock.Now()
	p.repMu.Lock()
	if p.currentRole() != roleLeader {
		p.repMu.Unlock()
		return res, p.notLeader()
	}
	p.syncISRLocked() // the ISR must know the end the follower may have read to
	err := p.isr.FollowerFetched(now, fp.ReplicaID, fp.Offset, fp.CurrentLeaderEpoch)
	if err == nil {
		p.log.SetHighWatermark(p.isr.HighWatermark())
	}
	res.HighWatermark = p.isr.HighWatermark()
	p.repMu.Unlock()
	res.LastStable, res.LogStart = res.HighWatermark, p.log.LogStartOffset()
	if err != nil {
		return res, fmt.Errorf("%s-%d: fetch from replica %d: %w", p.tp.Topic, p.tp.Partition, fp.ReplicaID, err)
	}
	res, _, err = p.read(res, fp, p.log.CommittedEnd())
	return res, err
}

// AppendAsFollower appends batches fetched from the leader, keeping their
// offsets and leader epochs (the log records the epochs in its
// leader-epoch checkpoint), and replays them into the idempotent-producer
// state. Each batch's CRC is checked; a partial batch at the end (a fetch
// cut short by its size limit) is left for the next fetch. Returns the
// result to wait on with WaitDurable (zero records: nothing to append).
func (p *Partition) AppendAsFollower(records []byte) (ProduceResult, error) {
	var (
		batches [][]byte
		headers []batch.Header
	)
	err := batch.Iterate(records, func(h batch.Header, raw []byte) bool {
		batches, headers = append(batches, raw), append(headers, h)
		return true
	})
	if err != nil {
		return ProduceResult{}, fmt.Errorf("%s-%d: batches from the leader: %w", p.tp.Topic, p.tp.Partition, err)
	}
	for i, b := range batches {
		if _, err := batch.ValidateStored(b); err != nil {
			return ProduceResult{}, fmt.Errorf("%s-%d: batch %d from the leader at offset %d: %w",
				p.tp.Topic, p.tp.Partition, i, headers[i].BaseOffset, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.followerOnly(); err != nil {
		return ProduceResult{}, err
	}
	if len(batches) == 0 {
		return ProduceResult{BaseOffset: -1, LogAppendTime: -1, LogStartOffset: p.log.LogStartOffset(),
			lastOffset: p.log.LogEndOffset() - 1}, nil
	}
	// The producer state follows the leader's decisions (origin
	// Replication refuses nothing), so this replica has the same open
	// transactions and aborted-transaction index as the leader and serves
	// read_committed correctly the moment it leads.
	u := p.producers.Begin(txn.OriginReplication)
	for i, h := range headers {
		p.stageStored(u, h, batches[i])
	}
	res, err := p.log.AppendReplicatedWith(batches, toLogAborted(u.Aborted()))
	if err != nil {
		return ProduceResult{}, err
	}
	p.applyAppended(res, u)
	out := ProduceResult{BaseOffset: res.BaseOffset, LogAppendTime: -1, LogStartOffset: res.LogStartOffset, lastOffset: res.LastOffset}
	out.count(batches, headers)
	return out, nil
}

// followerOnly refuses a follower operation on a deleted partition or a
// leader. Caller holds p.mu.
func (p *Partition) followerOnly() error {
	switch {
	case p.deleted:
		return fmt.Errorf("%w: %s-%d", ErrUnknownPartition, p.tp.Topic, p.tp.Partition)
	case p.currentRole() != roleFollower:
		return fmt.Errorf("%w: %s-%d", ErrNotFollower, p.tp.Topic, p.tp.Partition)
	}
	return nil
}

// TruncateTo removes a follower's records at and after offset (a tail the
// leader does not have, KIP-101/279) and rebuilds the producer state from
// what is left. Only a follower truncates: a leader's ISR counts its log
// end as never going back.
func (p *Partition) TruncateTo(offset int64) error {
	// Before the lock: the cleaning it waits for does not take it.
	defer p.opts.pauseCleaning(p.tp)()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.followerOnly(); err != nil {
		return err
	}
	if offset >= p.log.LogEndOffset() {
		return nil
	}
	if err := p.log.TruncateTo(offset); err != nil {
		return err
	}
	return p.loadProducers()
}

// TruncateFullyAndStartAt empties a follower's log and restarts it at
// offset, the leader's log start, when the follower's end fell below it.
func (p *Partition) TruncateFullyAndStartAt(offset int64) error {
	defer p.opts.pauseCleaning(p.tp)()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.followerOnly(); err != nil {
		return err
	}
	if err := p.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	return p.loadProducers()
}

// SetFollowerHighWatermark sets a follower's high watermark from the
// leader's fetch answer, never past its own log end.
func (p *Partition) SetFollowerHighWatermark(hw int64) {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	if p.currentRole() == roleFollower {
		p.log.SetHighWatermark(hw)
		p.leaderHW.Store(hw)
	}
}

// FollowerLag is how far a follower is behind its leader, as Kafka's
// replica fetcher measures it (FetcherLagMetrics): the high watermark of
// the leader's last fetch answer minus this replica's durable end (what
// its next fetch reports), 0 when it is at or past it. ok is false unless
// the replica follows and has had an answer from its leader in the
// current leadership. The fetch answers carry no byte positions, so the
// lag is in offsets only. It is a high-watermark lag: a lagging follower
// that is still in the ISR holds the HW back, so it shows 0 until it
// leaves the ISR (as in Kafka).
func (p *Partition) FollowerLag() (lag int64, ok bool) {
	if p.currentRole() != roleFollower {
		return 0, false
	}
	hw := p.leaderHW.Load()
	if hw < 0 {
		return 0, false
	}
	return max(0, hw-p.log.CommittedEnd()), true
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch at or
// below epoch this replica knows and the offset where the next one starts,
// its log end for the latest, (-1, -1) when it knows none. A leader's own
// epoch is known as soon as it leads, before it appended in it (Kafka
// records it at makeLeader): asked for it, the answer is its log end.
func (p *Partition) EndOffsetForEpoch(epoch int32) (int32, int64) {
	if p.currentRole() != roleFollower && epoch >= p.LeaderEpoch() {
		if latest, ok := p.log.LatestEpoch(); !ok || latest < p.LeaderEpoch() {
			if epoch == p.LeaderEpoch() {
				return epoch, p.log.LogEndOffset()
			}
			return -1, -1
		}
	}
	return p.log.EndOffsetForEpoch(epoch)
}

// LatestEpoch is the newest leader epoch recorded in the log.
func (p *Partition) LatestEpoch() (int32, bool) { return p.log.LatestEpoch() }

// CommittedEnd is the end of what the log has made as durable as the
// topic's flush policy promises: what a follower reports as its fetch
// offset and a leader serves followers up to.
func (p *Partition) CommittedEnd() int64 { return p.log.CommittedEnd() }

// AdvanceLogStart moves a follower's log start up to the leader's, as
// Kafka's follower does with the log start of each fetch answer: records
// the leader deleted (DeleteRecords, retention) go on every replica. It
// never passes the follower's high watermark.
func (p *Partition) AdvanceLogStart(leaderStart int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.followerOnly(); err != nil {
		return err
	}
	to := min(leaderStart, p.log.HighWatermark())
	if to <= p.log.LogStartOffset() {
		return nil
	}
	_, err := p.log.DeleteRecordsBefore(to)
	return err
}

// DebugReplicaID is the ReplicaID of a debugging client, which may ask a
// follower what a leader would be asked (Kafka's DebuggingConsumerId).
const DebugReplicaID int32 = -2

// OffsetForLeaderEpoch answers one partition of OffsetForLeaderEpoch (API
// 23) as Kafka's Partition.lastOffsetForLeaderEpoch does, for a follower
// truncating its log (KIP-101/279) and a consumer detecting truncation
// (KIP-320): the largest epoch at or below epoch and where it ends (see
// EndOffsetForEpoch; (-1, -1) with no error when none is known). A
// follower answers only a debugging client (replicaID DebugReplicaID),
// others get ErrNotLeader; current, the epoch the asker believes the
// leader is in, is checked as Fetch checks it.
func (p *Partition) OffsetForLeaderEpoch(replicaID, current, epoch int32) (int32, int64, error) {
	if replicaID != DebugReplicaID && p.IsFollower() {
		return -1, -1, p.notLeader()
	}
	if err := p.checkLeaderEpoch(current); err != nil {
		return -1, -1, err
	}
	e, end := p.EndOffsetForEpoch(epoch)
	return e, end, nil
}
