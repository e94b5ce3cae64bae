package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/cluster/replication"
	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/topicconfig"
	"github.com/moonmq/moonmq/net/peer"
)

// replicator gives this node's replicas the roles the metadata names, on
// a clustered node: a partition it leads gets a replication.Leader (the
// ISR/HW state machine) installed with the controller's state, a
// partition it follows is handed to the follower fetcher (net/peer) with
// its leader's address. It owns the leaders' inputs the partitions do not
// see themselves — time (Tick, for the ISR's lag check) and the
// controller's answers to the ISR changes they propose (AlterPartition) —
// in one goroutine that stops on close.
//
// It also reports the storage of every replica this node hosts to the
// controller, as a Kafka broker reports its offline log directories
// (KIP-858), per partition: at each tick it compares what the replica
// manager says of a replica (it could not be opened, or its log failed a
// write or an fsync: StorageFailure) with whether the metadata lists this
// node in the partition's Offline, and when they differ it sends
// ReportReplicaStorage (at most one report in flight per partition; a
// failed one is sent again at the next tick, so a lost answer or a
// restart converges). The controller then moves the leadership off an
// offline replica and takes it out of the ISR, and lets it back once it is
// reported online. A follower whose storage failed follows nobody until it
// serves again (its log takes no batches), then catches up and rejoins the
// ISR as any follower does.
//
// The reconciler calls it with every partition change it applies, in
// metadata order; a newer controller state always wins over a change in
// flight (replication.Leader drops it).
type replicator struct {
	self    int32
	ctrl    replicaController
	storage storageState
	fetch   *peer.Fetcher
	clock   clock.Clock
	maxLag  time.Duration
	tick    time.Duration
	log     *slog.Logger

	// isrShrinks and isrExpands count the ISR changes the leaders here
	// proposed and the controller committed (Kafka's IsrShrinksPerSec and
	// IsrExpandsPerSec).
	isrShrinks, isrExpands atomic.Uint64

	mu      sync.Mutex
	led     map[replica.TopicPartition]*ledPartition
	follows map[replica.TopicPartition]followed
	brokers map[int32]metadata.Broker
	// hosted holds every replica of a partition this node hosts, whether
	// its storage serves or not (the reconciler skips roles for one the
	// replica manager holds offline), for the storage reports.
	hosted map[replica.TopicPartition]*hostedReplica

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// replicaController is what the replicator asks of the controller: the
// ISR changes of this node's leaders and the storage of its replicas (a
// seam for tests).
type replicaController interface {
	AlterPartition(ctx context.Context, req metadata.AlterPartitionRequest) (metadata.Partition, error)
	ReportReplicaStorage(ctx context.Context, broker int32, topic string, topicID [16]byte, partition int32, offline bool) (metadata.Partition, error)
}

// storageState is the replica manager's view of a replica's storage: why
// it cannot take appends, or nil while it serves.
type storageState interface {
	StorageFailure(tp replica.TopicPartition) error
}

// hostedReplica is one replica this node hosts, as the metadata last
// described its partition (or the controller's answer to a report, when
// newer).
type hostedReplica struct {
	topicID [16]byte
	mp      metadata.Partition
	// failed is the storage state the last tick saw: a follower follows
	// again when it changes back.
	failed bool
	// reporting is set while a report is out: at most one at a time.
	reporting bool
	// refused counts the reports in a row that failed, to log fewer.
	refused int
}

type ledPartition struct {
	tp       replica.TopicPartition
	topicID  [16]byte
	p        *replica.Partition
	l        *replication.Leader
	inflight bool // an AlterPartition is out; at most one at a time
}

// followed is what a follower replica follows, to follow it again when
// the leader's address becomes known or changes.
type followed struct {
	p      *replica.Partition
	leader int32
	epoch  int32
}

const (
	// defaultReplicaMaxLag is the lag Kafka allows before a follower
	// leaves the ISR (replica.lag.time.max.ms); isrTickInterval is how
	// often the leaders check it.
	defaultReplicaMaxLag = 30 * time.Second
	isrTickInterval      = 250 * time.Millisecond
	// followerBackoff is how long a follower refused by its leader (an
	// epoch it does not know yet, a leadership that moved) waits before it
	// asks again: short, since failover time is the time followers take to
	// find the new leader.
	followerBackoff = 100 * time.Millisecond
)

func newReplicator(self int32, ctrl replicaController, storage storageState, fetch *peer.Fetcher, clk clock.Clock, logger *slog.Logger) *replicator {
	if clk == nil {
		clk = clock.Real
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &replicator{
		self: self, ctrl: ctrl, storage: storage, fetch: fetch, clock: clk, maxLag: defaultReplicaMaxLag, tick: isrTickInterval,
		log: logger.With("component", "replication"),
		led: map[replica.TopicPartition]*ledPartition{}, follows: map[replica.TopicPartition]followed{},
		brokers: map[int32]metadata.Broker{}, hosted: map[replica.TopicPartition]*hostedReplica{},
		ctx: ctx, cancel: cancel,
	}
}

// start runs the leaders' clock and the storage reports until close.
func (r *replicator) start() {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := r.clock.NewTicker(r.tick)
		defer t.Stop()
		for {
			select {
			case <-r.ctx.Done():
				return
			case <-t.C():
				r.tickLeaders()
				r.checkStorage()
			}
		}
	}()
}

// close stops the clock and the fetcher and waits for answers in flight.
func (r *replicator) close() {
	r.cancel()
	r.wg.Wait()
	if err := r.fetch.Close(); err != nil {
		r.log.Warn("closing the follower fetcher", "err", err)
	}
}

// setRole makes p (partition tp of the topic with id, hosted here as one
// of mp's replicas) leader or follower as mp says.
func (r *replicator) setRole(tp replica.TopicPartition, id [16]byte, configs map[string]string, mp metadata.Partition, p *replica.Partition) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if mp.Leader == r.self {
		return r.leadLocked(tp, id, configs, mp, p)
	}
	err := p.BecomeFollower(mp.LeaderEpoch, mp.Leader)
	if errors.Is(err, replica.ErrFencedLeaderEpoch) {
		return err
	}
	if lp := r.led[tp]; lp != nil {
		// The partition dropped the ISR as it became a follower: nothing
		// calls into it any more (resigning first would have the
		// partition tell a resigned ISR its committed end).
		delete(r.led, tp)
		lp.l.Resign()
	}
	// Any other error is the high watermark checkpoint's (a replica whose
	// storage failed): the role is taken all the same, and the replica
	// must follow once its storage serves again.
	r.follows[tp] = followed{p: p, leader: mp.Leader, epoch: mp.LeaderEpoch}
	return errors.Join(err, r.followLocked(tp))
}

func (r *replicator) leadLocked(tp replica.TopicPartition, id [16]byte, configs map[string]string, mp metadata.Partition, p *replica.Partition) error {
	delete(r.follows, tp)
	r.fetch.Unfollow(tp)
	state := replication.LeaderState{
		Replicas: mp.Replicas, ISR: mp.ISR, LeaderEpoch: mp.LeaderEpoch, PartitionEpoch: mp.PartitionEpoch,
		MinISR: topicconfig.MinInsyncReplicasOf(configs, len(mp.Replicas)), LogEnd: p.CommittedEnd(), HighWatermark: p.HighWatermark(),
	}
	now := r.clock.Now()
	if lp := r.led[tp]; lp != nil && lp.p == p && p.Replicated() && p.LeaderEpoch() == mp.LeaderEpoch {
		// Same leadership, newer state (an ISR change): install it.
		var err error
		p.UpdateISR(func() { err = lp.l.Become(now, state) })
		if errors.Is(err, replication.ErrStaleState) {
			return nil // an answer to our own change already installed it
		}
		return err
	}
	l := replication.New(r.self, r.maxLag)
	if err := l.Become(now, state); err != nil {
		return fmt.Errorf("lead %s-%d in epoch %d: %w", tp.Topic, tp.Partition, mp.LeaderEpoch, err)
	}
	err := p.BecomeLeader(mp.LeaderEpoch, l)
	if errors.Is(err, replica.ErrFencedLeaderEpoch) {
		return err
	}
	// Any other error came after the role was taken (the high watermark
	// checkpoint of a replica whose storage failed): it leads with l.
	r.led[tp] = &ledPartition{tp: tp, topicID: id, p: p, l: l}
	return err
}

// followLocked hands a follower to the fetcher, once its leader's address
// is known; a partition without a leader (offline) follows nobody, and
// neither does a replica whose storage failed (its log takes no batches):
// checkStorage follows again once it serves.
func (r *replicator) followLocked(tp replica.TopicPartition) error {
	f := r.follows[tp]
	b, ok := r.brokers[f.leader]
	if f.leader < 0 || !ok || b.Fenced || r.storage.StorageFailure(tp) != nil {
		r.fetch.Unfollow(tp)
		return nil
	}
	addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	return r.fetch.Follow(tp, f.leader, addr, f.epoch, f.p)
}

// leads reports whether this node leads tp now (as the metadata it
// reconciled says).
func (r *replicator) leads(tp replica.TopicPartition) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.led[tp] != nil
}

// authoritative reports whether err is the controller's verdict on an ISR
// change (it was refused and will not be committed), rather than a failure
// to get one.
func authoritative(err error) bool {
	return errors.Is(err, metadata.ErrFencedLeaderEpoch) || errors.Is(err, metadata.ErrInvalidUpdateVersion) ||
		errors.Is(err, metadata.ErrIneligibleReplica) || errors.Is(err, metadata.ErrInvalidRequest) ||
		errors.Is(err, metadata.ErrUnknownTopic)
}

// forget stops replicating tp here (its topic was deleted, or this node
// no longer hosts a replica) and reporting its storage.
func (r *replicator) forget(tp replica.TopicPartition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.led, tp)
	delete(r.follows, tp)
	delete(r.hosted, tp)
	r.fetch.Unfollow(tp)
}

// track notes that this node hosts a replica of partition tp of the topic
// with id, as mp describes it now: whether the replica manager could open
// it or not, its storage is reported from here on. A state older than
// one a report's answer brought (the reconciler is behind) is not taken.
func (r *replicator) track(tp replica.TopicPartition, id [16]byte, mp metadata.Partition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hosted[tp]
	if h == nil || h.topicID != id {
		r.hosted[tp] = &hostedReplica{topicID: id, mp: mp}
		return
	}
	if mp.PartitionEpoch >= h.mp.PartitionEpoch {
		h.mp = mp
	}
}

// checkStorage compares the storage of every hosted replica with what the
// metadata says of it, sends a report where they differ (unless one is
// out), and makes a follower whose storage failed or healed stop or
// resume following.
func (r *replicator) checkStorage() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for tp, h := range r.hosted {
		cause := r.storage.StorageFailure(tp)
		failed := cause != nil
		if failed != h.failed {
			h.failed = failed
			if _, ok := r.follows[tp]; ok {
				if err := r.followLocked(tp); err != nil {
					r.log.Warn("follow the leader again", "topic", tp.Topic, "partition", tp.Partition, "err", err)
				}
			}
		}
		if failed == slices.Contains(h.mp.Offline, r.self) || h.reporting {
			continue
		}
		h.reporting = true
		r.wg.Add(1)
		go r.reportStorage(tp, h, cause, h.refused == 0)
	}
}

// reportStorage sends one storage report (offline when cause is not nil)
// and keeps the controller's answer, so the next tick does not send it
// again before the reconciler applied the change. first is set unless it
// is sent again after a failed attempt (which says so itself).
func (r *replicator) reportStorage(tp replica.TopicPartition, h *hostedReplica, cause error, first bool) {
	defer r.wg.Done()
	offline := cause != nil
	switch {
	case !first:
	case offline:
		r.log.Warn("reporting a replica offline: its storage failed; its leadership moves and it leaves the ISR until it serves again",
			"topic", tp.Topic, "partition", tp.Partition, "cause", cause)
	default:
		r.log.Info("reporting a replica online again", "topic", tp.Topic, "partition", tp.Partition)
	}
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	np, err := r.ctrl.ReportReplicaStorage(ctx, r.self, tp.Topic, h.topicID, tp.Partition, offline)
	r.mu.Lock()
	defer r.mu.Unlock()
	h.reporting = false
	if err != nil {
		h.refused++
		if r.ctx.Err() == nil {
			logf := r.log.Debug
			if h.refused == 1 || h.refused%20 == 0 {
				logf = r.log.Warn
			}
			logf("replica storage report not committed; sending it again", "topic", tp.Topic, "partition", tp.Partition,
				"offline", offline, "attempts", h.refused, "err", err)
		}
		return
	}
	h.refused = 0
	if r.hosted[tp] == h && np.PartitionEpoch > h.mp.PartitionEpoch {
		h.mp = np
	}
}

// brokerChanged notes a broker's registration; followers of it follow its
// (new) address.
func (r *replicator) brokerChanged(b metadata.Broker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, had := r.brokers[b.ID]
	r.brokers[b.ID] = b
	if had && old == b {
		return
	}
	for tp, f := range r.follows {
		if f.leader == b.ID {
			if err := r.followLocked(tp); err != nil {
				r.log.Warn("follow the leader at its new address", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
		}
	}
}

// tickLeaders advances every led partition's clock and sends the ISR
// changes they propose.
func (r *replicator) tickLeaders() {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, lp := range r.led {
		var (
			change replication.Change
			ok     bool
		)
		lp.p.UpdateISR(func() {
			if err := lp.l.Tick(now); err != nil {
				return
			}
			change, ok = lp.l.Pending()
		})
		if ok && !lp.inflight {
			lp.inflight = true
			r.wg.Add(1)
			go r.alter(lp, change)
		}
	}
}

// countISRChange counts a change the controller answered: committed when
// the answer is a newer partition epoch of the same leadership (an ISR the
// controller already had is answered with the current state, unchanged).
// A change committed without an answer reaching here (a lost connection,
// a timeout) is not counted: its resend is refused as stale.
func (r *replicator) countISRChange(change replication.Change, np metadata.Partition) {
	if np.LeaderEpoch != change.LeaderEpoch || np.PartitionEpoch <= change.PartitionEpoch {
		return
	}
	if change.Shrink {
		r.isrShrinks.Add(1)
	} else {
		r.isrExpands.Add(1)
	}
}

// isrChanges is how many ISR shrinks and expansions of this node's leaders
// the controller committed.
func (r *replicator) isrChanges() (shrinks, expands uint64) {
	return r.isrShrinks.Load(), r.isrExpands.Load()
}

// alter sends one ISR change to the controller and hands the answer back
// to the leader that proposed it (if it still leads).
func (r *replicator) alter(lp *ledPartition, change replication.Change) {
	defer r.wg.Done()
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	np, err := r.ctrl.AlterPartition(ctx, metadata.AlterPartitionRequest{
		Topic: lp.tp.Topic, TopicID: lp.topicID, Partition: lp.tp.Partition, LeaderID: r.self,
		LeaderEpoch: change.LeaderEpoch, PartitionEpoch: change.PartitionEpoch, NewISR: change.ISR,
	})
	res := replication.Result{Accepted: err == nil}
	if err == nil {
		res.ISR, res.LeaderEpoch, res.PartitionEpoch = np.ISR, np.LeaderEpoch, np.PartitionEpoch
		r.countISRChange(change, np)
	} else if r.ctx.Err() == nil {
		r.log.Info("ISR change not committed", "topic", lp.tp.Topic, "partition", lp.tp.Partition,
			"isr", change.ISR, "err", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	lp.inflight = false
	if r.led[lp.tp] != lp {
		return // it no longer leads: the controller's state said so
	}
	if err != nil && !authoritative(err) {
		// No answer (a timeout, no active controller, a lost connection):
		// the change may still have been committed. Keep it in flight, so
		// the HW keeps counting the maximal ISR (KIP-841), and send it
		// again at the next tick; the controller's state, when it
		// arrives, replaces it.
		return
	}
	var aerr error
	lp.p.UpdateISR(func() { aerr = lp.l.AlterPartitionResult(res) })
	if aerr != nil && !errors.Is(aerr, replication.ErrNoPendingChange) {
		r.log.Warn("the controller's ISR answer was refused", "topic", lp.tp.Topic, "partition", lp.tp.Partition, "err", aerr)
	}
}
