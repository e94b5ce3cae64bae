package peer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/replica"
)

// follow is one partition a session replicates.
type follow struct {
	tp    replica.TopicPartition
	p     *replica.Partition
	epoch int32 // the leader epoch it follows in

	// mu is held while the session applies an answer to the partition;
	// gone is set under it when the partition leaves the session, so no
	// apply starts after remove returns.
	mu   sync.Mutex
	gone bool

	// Owned by the session goroutine.
	truncated bool      // the tail was checked against the leader in this epoch
	askEpoch  int32     // the epoch to ask OffsetForLeaderEpoch about next; -1: the latest
	fenced    bool      // the leader said epoch is stale: wait for a new Follow
	retryAt   time.Time // backed off until then
}

// session fetches every partition followed from one leader.
type session struct {
	f        *Fetcher
	leaderID int32
	addr     string
	log      logger

	mu    sync.Mutex
	parts map[replica.TopicPartition]*follow

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

type logger interface {
	Debug(msg string, args ...any)
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
}

func newSession(f *Fetcher, leaderID int32, addr string) *session {
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{
		f: f, leaderID: leaderID, addr: addr,
		log:   f.opts.Logger.With("leader", leaderID, "leader_addr", addr),
		parts: make(map[replica.TopicPartition]*follow),
		kick:  make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}),
	}
	go s.run(ctx)
	return s
}

func (s *session) add(tp replica.TopicPartition, epoch int32, p *replica.Partition) {
	s.mu.Lock()
	s.parts[tp] = &follow{tp: tp, p: p, epoch: epoch, askEpoch: -1}
	s.mu.Unlock()
	s.wake()
}

// following reports whether tp is followed here in epoch for p.
func (s *session) following(tp replica.TopicPartition, epoch int32, p *replica.Partition) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	fl := s.parts[tp]
	return fl != nil && fl.epoch == epoch && fl.p == p
}

// remove takes tp out, waiting for an apply to it in progress, and returns
// how many partitions are left.
func (s *session) remove(tp replica.TopicPartition) int {
	s.mu.Lock()
	fl := s.parts[tp]
	delete(s.parts, tp)
	n := len(s.parts)
	s.mu.Unlock()
	if fl != nil {
		fl.mu.Lock()
		fl.gone = true
		fl.mu.Unlock()
	}
	return n
}

type member struct {
	tp    replica.TopicPartition
	epoch int32
	p     *replica.Partition
}

func (s *session) members() []member {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]member, 0, len(s.parts))
	for _, fl := range s.parts {
		out = append(out, member{fl.tp, fl.epoch, fl.p})
	}
	return out
}

func (s *session) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *session) stop() {
	s.cancel()
	<-s.done
}

// snapshot returns the partitions followed now, ordered by name (stable
// requests), and the earliest time a backed-off one may go again.
func (s *session) snapshot() []*follow {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*follow, 0, len(s.parts))
	for _, fl := range s.parts {
		out = append(out, fl)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].tp.Topic != out[j].tp.Topic {
			return out[i].tp.Topic < out[j].tp.Topic
		}
		return out[i].tp.Partition < out[j].tp.Partition
	})
	return out
}

// run is the session's loop: connect, truncate what needs it, fetch, apply;
// on a connection or decoding error, drop the connection and back off.
func (s *session) run(ctx context.Context) {
	defer close(s.done)
	o := &s.f.opts
	var (
		c       *wireConn
		backoff = o.Backoff
	)
	defer func() {
		if c != nil {
			_ = c.Close()
		}
	}()
	for ctx.Err() == nil {
		parts := s.snapshot()
		now := o.Clock.Now()
		ready, next := readyParts(parts, now)
		if len(ready) == 0 {
			s.idle(ctx, next, now)
			continue
		}
		if c == nil {
			nc, err := o.Dial(ctx, s.addr)
			if err != nil {
				s.log.Warn("cannot reach the leader; retrying", "err", err, "backoff", backoff)
				s.sleep(ctx, backoff)
				backoff = min(2*backoff, o.MaxBackoff)
				continue
			}
			c = newWireConn(nc, fmt.Sprintf("moonmq-replica-%d", o.NodeID), o.MaxFrameBytes, o.MaxWait+o.RequestTimeout)
		}
		err := s.truncate(ctx, c, ready, now)
		if err == nil {
			err = s.fetch(ctx, c, ready, now)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("replica fetch failed; reconnecting", "err", err, "backoff", backoff)
			_ = c.Close()
			c = nil
			s.sleep(ctx, backoff)
			backoff = min(2*backoff, o.MaxBackoff)
			continue
		}
		backoff = o.Backoff
	}
}

// readyParts are the partitions that may be worked on at now, and the
// earliest retry time of the others (zero: none is waiting on a time).
func readyParts(parts []*follow, now time.Time) (ready []*follow, next time.Time) {
	for _, fl := range parts {
		switch {
		case fl.fenced:
		case now.Before(fl.retryAt):
			if next.IsZero() || fl.retryAt.Before(next) {
				next = fl.retryAt
			}
		default:
			ready = append(ready, fl)
		}
	}
	return ready, next
}

// idle waits for a Follow, the next retry time, or the end.
func (s *session) idle(ctx context.Context, next, now time.Time) {
	if next.IsZero() {
		select {
		case <-ctx.Done():
		case <-s.kick:
		}
		return
	}
	t := s.f.opts.Clock.NewTimer(next.Sub(now))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-s.kick:
	case <-t.C():
	}
}

func (s *session) sleep(ctx context.Context, d time.Duration) {
	t := s.f.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}

// apply runs fn on a partition unless it left the session, excluding the
// move meanwhile.
func apply(fl *follow, fn func()) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if !fl.gone {
		fn()
	}
}

func (s *session) backOff(fl *follow, now time.Time, why string, err error) {
	fl.retryAt = now.Add(s.f.opts.Backoff)
	s.log.Info("replica fetch of a partition backs off", "topic", fl.tp.Topic, "partition", fl.tp.Partition,
		"why", why, "err", err)
}

// truncate checks the tail of every ready partition not yet checked in
// its epoch against the leader (KIP-279): one OffsetForLeaderEpoch for
// all of them, repeated while a partition needs an older epoch asked.
func (s *session) truncate(ctx context.Context, c *wireConn, ready []*follow, now time.Time) error {
	for {
		var ask []*follow
		for _, fl := range ready {
			if fl.truncated || fl.fenced || now.Before(fl.retryAt) {
				continue
			}
			if fl.askEpoch < 0 {
				latest, ok := fl.p.LatestEpoch()
				if !ok {
					// No epoch to ask about: a log with nothing in it has
					// nothing to truncate; otherwise (records written
					// before epochs were kept) the HW is the safe point.
					ok := true
					apply(fl, func() { ok = s.truncateTo(fl, fl.p.HighWatermark(), "no leader epoch recorded") })
					fl.truncated = ok
					continue
				}
				fl.askEpoch = latest
			}
			ask = append(ask, fl)
		}
		if len(ask) == 0 {
			return nil
		}
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.Version, req.ReplicaID = epochsVersion, s.f.opts.NodeID
		byTopic := topicIndex{}
		for _, fl := range ask {
			i := byTopic.of(fl.tp.Topic, func(name string) {
				rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
				rt.Topic = name
				req.Topics = append(req.Topics, rt)
			})
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = fl.tp.Partition, fl.epoch, fl.askEpoch
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		}
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		if err := c.roundTrip(ctx, req, resp, func(b []byte) error { return checkEpochsResponse(b, len(req.Topics), len(ask)) }); err != nil {
			return err
		}
		answered := map[replica.TopicPartition]kmsg.OffsetForLeaderEpochResponseTopicPartition{}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				answered[replica.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p
			}
		}
		for _, fl := range ask {
			p, ok := answered[fl.tp]
			if !ok {
				s.backOff(fl, now, "no answer for the partition", nil)
				continue
			}
			s.truncated(fl, p, now)
		}
	}
}

// truncated applies one OffsetForLeaderEpoch answer: the truncation
// decideTruncation gives, then either done or another round.
func (s *session) truncated(fl *follow, p kmsg.OffsetForLeaderEpochResponseTopicPartition, now time.Time) {
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		s.refused(fl, err, now)
		return
	}
	_, leo := fl.p.Bounds()
	d := decideTruncation(p.LeaderEpoch, p.EndOffset, fl.p.EndOffsetForEpoch, leo, fl.p.HighWatermark())
	ok := true
	apply(fl, func() { ok = s.truncateTo(fl, d.to, "diverged from the leader") })
	switch {
	case !ok: // backed off; the same answer is asked for again
	case d.askEpoch >= 0:
		fl.askEpoch = d.askEpoch
	default:
		fl.truncated, fl.askEpoch = true, -1
	}
}

// truncation is what a follower does with one OffsetForLeaderEpoch answer.
type truncation struct {
	to       int64 // cut the log here (nothing to do at or past its end)
	askEpoch int32 // >= 0: then ask about this epoch; -1: the tail is checked
}

// decideTruncation is Kafka's AbstractFetcherThread.getOffsetTruncationState
// (KIP-279), a pure function of the leader's answer (its largest epoch at
// or below the one asked, and where that epoch ends on its log), the
// follower's own epochs (followerEnd: its EndOffsetForEpoch), log end and
// high watermark:
//   - the leader knows no such epoch: keep what is known committed, the HW;
//   - the follower has nothing at or below the leader's epoch: keep what
//     the leader has;
//   - the follower has that epoch: cut where the first of the two logs
//     ends it;
//   - the follower lacks it: cut where its own largest epoch below ends,
//     and ask again about that epoch.
func decideTruncation(leaderEpoch int32, leaderEnd int64, followerEnd func(int32) (int32, int64), leo, hw int64) truncation {
	if leaderEnd < 0 || leaderEpoch < 0 {
		return truncation{to: min(hw, leo), askEpoch: -1}
	}
	switch fe, fend := followerEnd(leaderEpoch); {
	case fe < 0:
		return truncation{to: min(leaderEnd, leo), askEpoch: -1}
	case fe == leaderEpoch:
		return truncation{to: min(leaderEnd, fend, leo), askEpoch: -1}
	default:
		return truncation{to: min(fend, leo), askEpoch: fe}
	}
}

// truncateTo cuts the partition's log at offset, logging why, and reports
// whether it could (a failure backs the partition off). Caller is inside
// apply.
func (s *session) truncateTo(fl *follow, offset int64, why string) bool {
	if _, leo := fl.p.Bounds(); offset >= leo {
		return true
	}
	if err := fl.p.TruncateTo(offset); err != nil {
		s.log.Warn("replica truncation failed", "topic", fl.tp.Topic, "partition", fl.tp.Partition, "offset", offset, "err", err)
		fl.retryAt = s.f.opts.Clock.Now().Add(s.f.opts.Backoff)
		return false
	}
	s.log.Info("replica truncated", "topic", fl.tp.Topic, "partition", fl.tp.Partition, "offset", offset, "why", why)
	return true
}

// refused handles a partition error of the leader: a stale epoch waits for
// the next Follow, anything else backs off.
func (s *session) refused(fl *follow, err error, now time.Time) {
	if errors.Is(err, kerr.FencedLeaderEpoch) {
		fl.fenced = true
		s.log.Info("the leader is in a newer epoch; waiting for the metadata", "topic", fl.tp.Topic,
			"partition", fl.tp.Partition, "epoch", fl.epoch)
		return
	}
	s.backOff(fl, now, "refused by the leader", err)
}

// fetch sends one Fetch for the ready, truncated partitions, applies the
// answer and waits for what it appended to be durable, so the next fetch
// reports it.
func (s *session) fetch(ctx context.Context, c *wireConn, ready []*follow, now time.Time) error {
	o := &s.f.opts
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID = fetchVersion, o.NodeID
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(o.MaxWait/time.Millisecond), 1, o.MaxBytes
	req.SessionID, req.SessionEpoch = 0, -1
	var asked []*follow
	offsets := map[replica.TopicPartition]int64{}
	byTopic := topicIndex{}
	for _, fl := range ready {
		if !fl.truncated || fl.fenced || now.Before(fl.retryAt) {
			continue
		}
		i := byTopic.of(fl.tp.Topic, func(name string) {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = name
			req.Topics = append(req.Topics, rt)
		})
		start, _ := fl.p.Bounds()
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch = fl.tp.Partition, fl.epoch
		rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes = fl.p.CommittedEnd(), start, o.PartitionMaxBytes
		offsets[fl.tp] = rp.FetchOffset
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		asked = append(asked, fl)
	}
	if len(asked) == 0 {
		return nil
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if err := c.roundTrip(ctx, req, resp, func(b []byte) error { return checkFetchResponse(b, len(req.Topics), len(asked)) }); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("fetch refused: %w", err)
	}
	byTP := make(map[replica.TopicPartition]*follow, len(asked))
	for _, fl := range asked {
		byTP[fl.tp] = fl
	}
	type appended struct {
		fl  *follow
		res replica.ProduceResult
	}
	var wait []appended
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			tp := replica.TopicPartition{Topic: t.Topic, Partition: rp.Partition}
			fl := byTP[tp]
			if fl == nil {
				continue // not asked (or asked twice): ignored
			}
			delete(byTP, tp)
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				s.fetchRefused(fl, rp, offsets[tp], err, now)
				continue
			}
			apply(fl, func() {
				if len(rp.RecordBatches) > 0 {
					res, err := fl.p.AppendAsFollower(rp.RecordBatches)
					if err != nil {
						s.backOff(fl, now, "append of the leader's batches failed", err)
						fl.truncated = false // an out-of-order answer means the logs diverged
						return
					}
					if res.Records > 0 || res.Bytes > 0 {
						wait = append(wait, appended{fl, res})
					}
				}
				fl.p.SetFollowerHighWatermark(rp.HighWatermark)
				if err := fl.p.AdvanceLogStart(rp.LogStartOffset); err != nil {
					s.log.Warn("replica log start not advanced", "topic", tp.Topic, "partition", tp.Partition, "err", err)
				}
			})
		}
	}
	// Group commit: every partition's fsync runs on its own flusher at
	// once; the next fetch reports what they made durable.
	for _, w := range wait {
		if err := w.fl.p.WaitDurable(ctx, w.res); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.backOff(w.fl, now, "replicated records not made durable", err)
		}
	}
	return nil
}

// fetchRefused handles one partition's fetch error.
func (s *session) fetchRefused(fl *follow, rp kmsg.FetchResponseTopicPartition, offset int64, err error, now time.Time) {
	if !errors.Is(err, kerr.OffsetOutOfRange) {
		s.refused(fl, err, now)
		return
	}
	if rp.LogStartOffset >= 0 && offset < rp.LogStartOffset {
		// The leader deleted what this replica would fetch next: start
		// over at its log start, as Kafka's follower does.
		apply(fl, func() {
			if err := fl.p.TruncateFullyAndStartAt(rp.LogStartOffset); err != nil {
				s.backOff(fl, now, "restart at the leader's log start failed", err)
				return
			}
			s.log.Info("replica restarted at the leader's log start", "topic", fl.tp.Topic,
				"partition", fl.tp.Partition, "offset", rp.LogStartOffset)
		})
		return
	}
	// Past the leader's end: the logs diverged; check the tail again.
	fl.truncated, fl.askEpoch = false, -1
}

// topicIndex numbers the topics of a request being built: of returns a
// topic's index, calling add to append it the first time.
type topicIndex map[string]int

func (ti topicIndex) of(topic string, add func(name string)) int {
	i, ok := ti[topic]
	if !ok {
		i = len(ti)
		ti[topic] = i
		add(topic)
	}
	return i
}
