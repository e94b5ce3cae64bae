package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/meta"
)

// Peer is one static controller voter: its broker id and its cluster
// address as the other voters reach it (the --peers entry; a proxy may sit
// between it and the voter's listener).
type Peer struct {
	ID   int32
	Addr string
}

const localKeyPeers = "peers"

// peersString is the canonical form of a voter set, as recorded in the
// metadata directory and shown in errors: "1@h:p,2@h:p" by id.
func peersString(peers []Peer) string {
	ps := slices.Clone(peers)
	slices.SortFunc(ps, func(a, b Peer) int { return int(a.ID) - int(b.ID) })
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = strconv.FormatInt(int64(p.ID), 10) + "@" + p.Addr
	}
	return strings.Join(parts, ",")
}

func validatePeers(self int32, peers []Peer) error {
	seen := map[int32]bool{}
	for _, p := range peers {
		switch {
		case p.ID < 0 || p.Addr == "":
			return fmt.Errorf("controller: peer %d@%q: want ID >= 0 and an address", p.ID, p.Addr)
		case seen[p.ID]:
			return fmt.Errorf("controller: peer id %d appears twice in %s", p.ID, peersString(peers))
		}
		seen[p.ID] = true
	}
	if !seen[self] {
		return fmt.Errorf("controller: node %d is not in the peers %s; every node is a voter", self, peersString(peers))
	}
	return nil
}

// checkPeers records the voter set on a fresh directory and refuses a
// different one later: Raft's stored configuration would disagree with
// the addresses given, and a node bootstrapped alone would never join.
func (c *Controller) checkPeers(fresh bool) error {
	want := peersString(c.opts.Peers)
	v, err := c.db.GetLocal(localKeyPeers)
	var have string
	switch {
	case errors.Is(err, meta.ErrNotFound):
		if fresh {
			if want == "" {
				return nil
			}
			if err := c.db.SetLocal(localKeyPeers, []byte(want)); err != nil {
				return fmt.Errorf("controller: %w", err)
			}
			return nil
		}
		have = "" // a single-node directory
	case err != nil:
		return fmt.Errorf("controller: %w", err)
	default:
		have = string(v)
	}
	if have == want {
		return nil
	}
	show := func(s string) string {
		if s == "" {
			return "none (a single-node cluster)"
		}
		return s
	}
	return fmt.Errorf("%w: %s was created with peers %s, but this start has peers %s; start with the recorded peers or use another directory",
		ErrPeersMismatch, c.opts.Dir, show(have), show(want))
}

// bootstrapConfiguration is the full voter set every node bootstraps on a
// fresh directory: identical on every node, so Raft accepts whichever
// nodes come up first as one cluster.
func bootstrapConfiguration(peers []Peer) raft.Configuration {
	var conf raft.Configuration
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter,
			ID: raft.ServerID(strconv.FormatInt(int64(p.ID), 10)), Address: raft.ServerAddress(p.Addr)})
	}
	slices.SortFunc(conf.Servers, func(a, b raft.Server) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return conf
}

// multi reports whether this is a multi-voter controller.
func (c *Controller) multi() bool { return len(c.opts.Peers) > 0 }

// Ready is closed once this broker's registration is committed and this
// node's state reached the log index the active controller had then. A
// single-node controller is ready when Open returns.
func (c *Controller) Ready() <-chan struct{} { return c.ready }

// live reports what Liveness says of a broker; this node is live, and
// without a Liveness every broker is.
func (c *Controller) live(id int32) bool {
	return id == c.opts.NodeID || c.opts.Liveness == nil || c.opts.Liveness.Alive(id)
}

// liveAs reports whether broker id is reachable as the process registered
// with incarnation inc: a new process of the broker that has not
// registered yet (its gossip carries another incarnation) is not, so it is
// neither unfenced nor elected before its registration handles the
// restart. Without incarnations on either side, live decides.
func (c *Controller) liveAs(id int32, inc string) bool {
	if !c.live(id) {
		return false
	}
	il, ok := c.opts.Liveness.(IncarnationLiveness)
	if !ok || inc == "" || id == c.opts.NodeID {
		return true
	}
	got, known := il.Incarnation(id)
	return !known || got == "" || got == inc
}

// liveIn is liveAs for the brokers as st registered them.
func (c *Controller) liveIn(st *state) func(int32) bool {
	return func(id int32) bool { return c.liveAs(id, st.brokers[id].Incarnation) }
}

// route runs a write on the active controller: here if this node is it,
// else over the controller RPC, retrying (with backoff, within ctx) while
// there is no active controller or it moved. A remote refusal is returned
// as it is; a call that may have reached the controller is resent only
// for idempotent operations.
func route[A, R any](c *Controller, ctx context.Context, op string, a A,
	local func(*Controller, context.Context, A) (R, uint64, error),
) (R, uint64, error) {
	if !c.multi() {
		return local(c, ctx, a)
	}
	var zero R
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	backoff := 20 * time.Millisecond
	for {
		if c.closed.Load() {
			return zero, 0, metadata.ErrClosed
		}
		var err error
		if c.raft.State() == raft.Leader {
			r, index, lerr := local(c, ctx, a)
			if !errors.Is(lerr, metadata.ErrNotController) {
				return r, index, lerr
			}
			err = lerr
		} else if id := c.ControllerID(); id >= 0 {
			var out R
			dial := dialTCP
			if c.mux != nil {
				dial = c.mux.dial
			}
			index, cerr := call(ctx, dial, c.peerAddr(id), op, a, &out)
			if cerr == nil {
				return out, index, nil
			}
			var remote *remoteError
			switch {
			case errors.As(cerr, &remote):
				// Not (or no longer) the controller, or shutting down:
				// the next one answers.
				if !errors.Is(cerr, metadata.ErrNotController) && !errors.Is(cerr, metadata.ErrClosed) {
					return zero, 0, cerr
				}
			case !errors.Is(cerr, errNotSent) && !rpcIdempotent[op]:
				return zero, 0, cerr
			}
			err = cerr
		} else {
			err = fmt.Errorf("%w: no active controller yet (is a majority of the peers up?)", metadata.ErrNotController)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return zero, 0, fmt.Errorf("controller: %s: %w (last attempt: %w)", op, ctx.Err(), err)
		case <-c.stop:
			t.Stop()
			return zero, 0, fmt.Errorf("%w: %s", metadata.ErrClosed, op)
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// peerAddr is the --peers address of voter id: never the address a leader
// announced itself at, which is its own idea of it.
func (c *Controller) peerAddr(id int32) string {
	for _, p := range c.opts.Peers {
		if p.ID == id {
			return p.Addr
		}
	}
	return ""
}

// awaitApplied waits until the local state includes log index index.
func (c *Controller) awaitApplied(ctx context.Context, index uint64) error {
	for {
		c.mu.RLock()
		done, ch := c.st.applied >= index, c.appliedCh
		c.mu.RUnlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("controller: wait for index %d: %w", index, ctx.Err())
		case <-c.stop:
			return metadata.ErrClosed
		}
	}
}

// afterChange waits (within ctx, or ApplyTimeout) until this node applied
// a committed change and, when reconcile is set, its awaiting subscribers
// hosted it. The change is committed either way; a slow wait is logged.
func (c *Controller) afterChange(ctx context.Context, op string, index uint64, reconcile bool) {
	if index == 0 {
		return
	}
	wctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if err := c.awaitApplied(wctx, index); err != nil {
		c.logger.Warn("metadata change committed; this node has not applied it yet", "op", op, "index", index, "err", err)
		return
	}
	if reconcile {
		c.awaitReconciled(wctx, op, index)
	}
}

// registerLoop registers this broker with the active controller until it
// succeeds, then waits until this node caught up and closes ready.
func (c *Controller) registerLoop(self metadata.Broker) {
	defer c.wg.Done()
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(c.stopCtx, c.opts.ApplyTimeout)
		_, index, err := route(c, ctx, rpcRegisterBroker, self, (*Controller).registerBrokerLocal)
		if err == nil {
			err = c.awaitApplied(ctx, index)
		}
		cancel()
		if err == nil {
			c.logger.Info("registered with the active controller", "controller", c.ControllerID(), "applied_index", c.AppliedIndex())
			close(c.ready)
			return
		}
		if c.stopCtx.Err() != nil {
			return
		}
		logf := c.logger.Debug
		if attempt%5 == 0 {
			logf = c.logger.Warn
		}
		logf("not registered with an active controller yet; retrying", "attempt", attempt, "err", err)
		select {
		case <-time.After(backoff):
		case <-c.stop:
			return
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// leaderLoop runs the active controller's duties while this node is the
// Raft leader: it first catches up with the log (a Barrier; until then
// writes here are refused with ErrNotController and callers retry), then,
// every LivenessInterval, fences and unfences brokers by liveness, elects
// leaders for offline partitions that can have one, and every
// LeaderRebalanceInterval moves leaderships back to preferred replicas.
func (c *Controller) leaderLoop() {
	defer c.wg.Done()
	tick := time.NewTicker(c.opts.LivenessInterval)
	defer tick.Stop()
	var lastRebalance time.Time
	for {
		select {
		case <-c.stop:
			return
		case <-c.raft.LeaderCh():
		case <-tick.C:
		}
		if c.raft.State() != raft.Leader {
			continue
		}
		if term := c.raft.CurrentTerm(); c.readyTerm.Load() != term {
			if err := c.raft.Barrier(c.opts.ApplyTimeout).Error(); err != nil {
				c.logger.Debug("new leader: catching up with the log failed", "err", err)
				continue
			}
			if c.raft.CurrentTerm() != term {
				continue
			}
			c.tmu.Lock()
			c.tracker = newLivenessTracker(c.opts.SessionTimeout)
			c.tmu.Unlock()
			c.readyTerm.Store(term)
			lastRebalance = time.Now()
			c.logger.Info("active controller", "term", term, "applied_index", c.AppliedIndex())
			c.leaderCommit("choose cluster id", func(st *state) ([]record, error) {
				return planInitCluster(st, newClusterID())
			})
		}
		now := time.Now()
		c.checkLiveness(now)
		if c.opts.LeaderRebalanceInterval > 0 && now.Sub(lastRebalance) >= c.opts.LeaderRebalanceInterval {
			lastRebalance = now
			c.leaderCommit("preferred leader rebalance", func(st *state) ([]record, error) {
				return planPreferredLeaders(st, eligibleIn(st, c.liveIn(st))), nil
			})
		}
	}
}

// checkLiveness fences brokers gone for the session timeout, unfences
// returning ones and elects leaders where an ISR member became eligible.
func (c *Controller) checkLiveness(now time.Time) {
	var contact func(int32) (time.Time, bool)
	if cl, ok := c.opts.Liveness.(ContactLiveness); ok {
		contact = cl.LastContact
	}
	brokers := c.Brokers()
	incarnation := make(map[int32]string, len(brokers))
	for _, b := range brokers {
		incarnation[b.ID] = b.Incarnation
	}
	alive := func(id int32) bool { return c.liveAs(id, incarnation[id]) }
	c.tmu.Lock()
	fence, unfence := c.tracker.observe(now, brokers, alive, contact)
	c.tmu.Unlock()
	for _, id := range fence {
		c.logger.Warn("fencing broker: unreachable for the session timeout", "broker", id, "session_timeout", c.opts.SessionTimeout)
		c.leaderCommit("fence broker", func(st *state) ([]record, error) {
			return planFenceBroker(st, id, eligibleIn(st, c.liveIn(st)))
		})
	}
	for _, id := range unfence {
		c.logger.Info("unfencing broker: reachable again", "broker", id)
		c.leaderCommit("unfence broker", func(st *state) ([]record, error) {
			return planUnfenceBroker(st, id, eligibleIn(st, c.liveIn(st)))
		})
	}
	c.leaderCommit("elect leaders of offline partitions", func(st *state) ([]record, error) {
		return planOfflineLeaders(st, eligibleIn(st, c.liveIn(st))), nil
	})
}

// leaderCommit commits a change of the active controller's own, logging a
// failure (the next round retries).
func (c *Controller) leaderCommit(op string, planFn planFunc) {
	ctx, cancel := context.WithTimeout(c.stopCtx, c.opts.ApplyTimeout)
	defer cancel()
	_, _, err := c.commit(ctx, op, planFn)
	switch {
	case err == nil, c.stopCtx.Err() != nil:
	case errors.Is(err, metadata.ErrNotController):
		c.logger.Debug("no longer the active controller", "op", op, "err", err)
	default:
		c.logger.Warn("active controller change failed; retrying next round", "op", op, "err", err)
	}
}
