package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/log"
)

// fakeISR is the smallest ISR that behaves like one: HW = the smallest
// end over the leader and its in-sync followers, min.insync.replicas, the
// times it was given. cluster/replication's Leader is the real one (see
// net/peer's tests); this one keeps these tests about the partition.
type fakeISR struct {
	leaderEnd int64
	isr       map[int32]int64 // follower -> end it fetched at
	minISR    int
	epoch     int32
	hw        int64
	fetchedAt []time.Time
}

var (
	errFakeUnknownReplica = errors.New("fake: unknown replica")
	errFakeNotEnough      = errors.New("fake: not enough replicas")
	errFakeAfterAppend    = errors.New("fake: not enough replicas after append")
)

func (f *fakeISR) Appended(end int64) error {
	if end < f.leaderEnd {
		return fmt.Errorf("fake: end %d behind %d", end, f.leaderEnd)
	}
	f.leaderEnd = end
	f.advance()
	return nil
}

func (f *fakeISR) FollowerFetched(now time.Time, replica int32, off int64, epoch int32) error {
	if _, ok := f.isr[replica]; !ok {
		return errFakeUnknownReplica
	}
	if epoch != f.epoch || off > f.leaderEnd {
		return fmt.Errorf("fake: epoch %d offset %d", epoch, off)
	}
	f.fetchedAt = append(f.fetchedAt, now)
	f.isr[replica] = off
	f.advance()
	return nil
}

func (f *fakeISR) advance() {
	hw := f.leaderEnd
	for _, e := range f.isr {
		hw = min(hw, e)
	}
	f.hw = max(f.hw, hw)
}

func (f *fakeISR) Tick(time.Time) error { return nil }
func (f *fakeISR) HighWatermark() int64 { return f.hw }
func (f *fakeISR) CanAppend() error {
	if len(f.isr)+1 < f.minISR {
		return errFakeNotEnough
	}
	return nil
}

func (f *fakeISR) Ready(end int64) (bool, error) {
	if f.hw < end {
		return false, nil
	}
	if len(f.isr)+1 < f.minISR {
		return true, errFakeAfterAppend
	}
	return true, nil
}

var epoch0 = time.UnixMilli(1_700_000_000_000)

func hostPartition(t *testing.T, clk clock.Clock, topic string) *Partition {
	t.Helper()
	b, err := Open(Options{DataDir: t.TempDir(), Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	p, err := b.EnsurePartition(TopicPartition{Topic: topic, Partition: 0}, nil)
	require.NoError(t, err)
	return p
}

func consumerFetch(t *testing.T, p *Partition, off int64) FetchResult {
	t.Helper()
	res, err := p.Fetch(FetchParams{Offset: off, MaxBytes: 1 << 20, ReplicaID: -1, CurrentLeaderEpoch: NoLeaderEpoch})
	require.NoError(t, err)
	return res
}

// A replicated leader serves consumers below the ISR's high watermark and
// followers to its committed end; a follower's fetch offset moves the HW
// (at the partition's clock's time), which answers acks=all.
func TestReplicatedLeaderHighWatermark(t *testing.T) {
	clk := clock.NewFake(epoch0)
	p := hostPartition(t, clk, "r")
	isr := &fakeISR{isr: map[int32]int64{2: 0}, minISR: 2, epoch: 5}
	require.NoError(t, p.BecomeLeader(5, isr))

	res, err := p.Append(producerBatch(-1, -1, -1, "a", "b", "c"))
	require.NoError(t, err)
	require.NoError(t, p.WaitDurable(context.Background(), res))
	require.Equal(t, int64(3), p.CommittedEnd())
	require.Equal(t, int64(0), p.HighWatermark(), "no follower has it yet")
	require.Empty(t, consumerFetch(t, p, 0).Batches, "consumers read below the HW only")

	acked := make(chan error, 1)
	go func() { acked <- p.WaitReplicated(context.Background(), res) }()

	fr, err := p.Fetch(FetchParams{Offset: 0, MaxBytes: 1 << 20, ReplicaID: 2, CurrentLeaderEpoch: 5})
	require.NoError(t, err)
	require.NotEmpty(t, fr.Batches, "a follower reads to the committed end")
	require.Equal(t, int64(0), fr.HighWatermark)
	select {
	case err := <-acked:
		t.Fatalf("acks=all answered (%v) before the follower had the records", err)
	default:
	}

	clk.Advance(time.Second)
	fr, err = p.Fetch(FetchParams{Offset: 3, MaxBytes: 1 << 20, ReplicaID: 2, CurrentLeaderEpoch: 5})
	require.NoError(t, err)
	require.Empty(t, fr.Batches)
	require.Equal(t, int64(3), fr.HighWatermark, "the answer carries the HW the fetch made")
	require.Equal(t, []time.Time{epoch0, epoch0.Add(time.Second)}, isr.fetchedAt, "fetch times come from the clock")
	require.NoError(t, waitErr(t, acked))
	require.NotEmpty(t, consumerFetch(t, p, 0).Batches)

	_, err = p.Fetch(FetchParams{Offset: 3, MaxBytes: 1 << 20, ReplicaID: 9, CurrentLeaderEpoch: 5})
	require.ErrorIs(t, err, errFakeUnknownReplica, "the ISR refuses a replica it does not know")
	_, err = p.Fetch(FetchParams{Offset: 3, MaxBytes: 1 << 20, ReplicaID: 2, CurrentLeaderEpoch: 4})
	require.ErrorIs(t, err, ErrFencedLeaderEpoch)
}

func waitErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
		return nil
	}
}

// acks=all: refused before the append when the ISR is too small; answered
// with the ISR's verdict after it; ErrNotLeader once the leadership is
// lost.
func TestAcksAllOutcomes(t *testing.T) {
	p := hostPartition(t, clock.NewFake(epoch0), "a")
	isr := &fakeISR{isr: map[int32]int64{}, minISR: 2, epoch: 1}
	require.NoError(t, p.BecomeLeader(1, isr))
	require.ErrorIs(t, p.CanAppend(), errFakeNotEnough)

	isr.minISR = 1
	require.NoError(t, p.CanAppend())
	res, err := p.Append(producerBatch(-1, -1, -1, "x"))
	require.NoError(t, err)
	require.NoError(t, p.WaitReplicated(context.Background(), res), "alone in its ISR: the leader's fsync is enough")

	p.UpdateISR(func() { isr.isr[2] = 1 })
	res, err = p.Append(producerBatch(-1, -1, -1, "y"))
	require.NoError(t, err)
	waiting := make(chan error, 1)
	go func() { waiting <- p.WaitReplicated(context.Background(), res) }()
	p.UpdateISR(func() { isr.minISR = 3; isr.isr[2] = 2 })
	require.ErrorIs(t, waitErr(t, waiting), errFakeAfterAppend, "written, but the ISR shrank below min.insync.replicas")

	res, err = p.Append(producerBatch(-1, -1, -1, "z"))
	require.NoError(t, err)
	go func() { waiting <- p.WaitReplicated(context.Background(), res) }()
	require.NoError(t, p.BecomeFollower(2, 7))
	require.ErrorIs(t, waitErr(t, waiting), ErrNotLeader)
	require.Equal(t, int32(7), p.Leader())
}

// A follower takes nothing from clients: produce, fetches, ListOffsets,
// DeleteRecords and acks=all are NOT_LEADER_OR_FOLLOWER; and a leader
// takes no follower operations.
func TestFollowerRefusesClients(t *testing.T) {
	p := hostPartition(t, clock.NewFake(epoch0), "f")
	require.ErrorIs(t, p.TruncateTo(0), ErrNotFollower)
	_, err := p.AppendAsFollower(nil)
	require.ErrorIs(t, err, ErrNotFollower)

	require.NoError(t, p.BecomeFollower(3, 1))
	require.True(t, p.IsFollower())
	_, err = p.Append(producerBatch(-1, -1, -1, "x"))
	require.ErrorIs(t, err, ErrNotLeader)
	require.ErrorIs(t, p.CanAppend(), ErrNotLeader)
	_, err = p.Fetch(FetchParams{MaxBytes: 1, ReplicaID: -1, CurrentLeaderEpoch: NoLeaderEpoch})
	require.ErrorIs(t, err, ErrNotLeader)
	_, err = p.Fetch(FetchParams{MaxBytes: 1, ReplicaID: 2, CurrentLeaderEpoch: 3})
	require.ErrorIs(t, err, ErrNotLeader)
	_, err = p.ListOffset(ListOffsetParams{Timestamp: ListLatest, CurrentLeaderEpoch: NoLeaderEpoch})
	require.ErrorIs(t, err, ErrNotLeader)
	_, err = p.DeleteRecords(0)
	require.ErrorIs(t, err, ErrNotLeader)
	require.ErrorIs(t, p.BecomeLeader(2, nil), ErrFencedLeaderEpoch, "an older epoch is refused")
}

// A follower keeps the leader's offsets and epochs, records the epochs,
// rebuilds the producer state from the batches (a producer retrying
// against it once it leads is deduplicated), and truncates a divergent
// tail, forgetting the producer state of what it removed.
func TestFollowerAppendAndTruncate(t *testing.T) {
	clk := clock.NewFake(epoch0)
	leader := hostPartition(t, clk, "l")
	follower := hostPartition(t, clk, "l2")
	var sent [][]byte
	for i, e := range []int32{2, 2, 4} {
		require.NoError(t, leader.BecomeLeader(e, nil))
		res, err := leader.Append(producerBatch(7, 0, int32(2*i), "a", "b"))
		require.NoError(t, err)
		require.NoError(t, leader.WaitDurable(context.Background(), res))
	}
	data, err := leader.ReadToEnd(0, 1<<20)
	require.NoError(t, err)
	require.NoError(t, batch.Iterate(data, func(_ batch.Header, raw []byte) bool {
		sent = append(sent, slices.Clone(raw))
		return true
	}))

	require.NoError(t, follower.BecomeFollower(4, 1))
	res, err := follower.AppendAsFollower(slices.Concat(sent...))
	require.NoError(t, err)
	require.NoError(t, follower.WaitDurable(context.Background(), res))
	require.Equal(t, int64(6), follower.CommittedEnd())
	require.Equal(t, []log.EpochEntry{{Epoch: 2, StartOffset: 0}, {Epoch: 4, StartOffset: 4}}, follower.log.LeaderEpochs())
	e, end := follower.EndOffsetForEpoch(3)
	require.Equal(t, int32(2), e)
	require.Equal(t, int64(4), end)
	got, err := follower.ReadToEnd(0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, data, got, "batches stored as the leader stored them")

	follower.SetFollowerHighWatermark(100)
	require.Equal(t, int64(6), follower.HighWatermark(), "never past its own end")

	// A partial batch at the end of a fetch waits for the next one.
	res, err = follower.AppendAsFollower(sent[0][:len(sent[0])-3])
	require.NoError(t, err)
	require.Zero(t, res.Records)

	// Truncating the epoch-4 tail drops its producer state with it.
	require.NoError(t, follower.TruncateTo(4))
	require.Equal(t, []log.EpochEntry{{Epoch: 2, StartOffset: 0}}, follower.log.LeaderEpochs())
	require.Equal(t, int64(4), follower.HighWatermark())

	require.NoError(t, follower.BecomeLeader(5, nil))
	dup, err := follower.Append(producerBatch(7, 0, 2, "a", "b"))
	require.NoError(t, err)
	require.Equal(t, int64(2), dup.BaseOffset, "a retry of a replicated batch is deduplicated")
	again, err := follower.Append(producerBatch(7, 0, 4, "a", "b"))
	require.NoError(t, err)
	require.Equal(t, int64(4), again.BaseOffset, "the truncated batch is written again, not taken for a duplicate")
	e, end = follower.EndOffsetForEpoch(5)
	require.Equal(t, int32(5), e)
	require.Equal(t, int64(6), end)
}

// A follower whose end fell below the leader's log start restarts there;
// the leader's log start moves the follower's, never past its HW.
func TestFollowerRestartsAtTheLeadersStart(t *testing.T) {
	p := hostPartition(t, clock.NewFake(epoch0), "s")
	require.NoError(t, p.BecomeFollower(1, 1))
	b := producerBatch(-1, -1, -1, "a", "b", "c", "d")
	batch.SetBaseOffset(b, 0)
	batch.SetPartitionLeaderEpoch(b, 1)
	_, err := p.AppendAsFollower(b)
	require.NoError(t, err)
	p.SetFollowerHighWatermark(2)
	require.NoError(t, p.AdvanceLogStart(3))
	start, _ := p.Bounds()
	require.Equal(t, int64(2), start, "not past the HW")
	require.NoError(t, p.TruncateFullyAndStartAt(50))
	start, end := p.Bounds()
	require.Equal(t, int64(50), start)
	require.Equal(t, int64(50), end)
}

// A replica that restarts keeps the replicated high watermark, not its own
// end: what it holds past the cluster's HW stays unread until a role and
// its ISR say otherwise.
func TestReplicatedHighWatermarkSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(epoch0)
	tp := TopicPartition{Topic: "h", Partition: 0}
	b, err := Open(Options{DataDir: dir, Clock: clk})
	require.NoError(t, err)
	p, err := b.EnsurePartition(tp, nil)
	require.NoError(t, err)
	require.NoError(t, p.BecomeFollower(1, 2))
	rec := producerBatch(-1, -1, -1, "a", "b", "c", "d")
	batch.SetPartitionLeaderEpoch(rec, 1)
	res, err := p.AppendAsFollower(rec)
	require.NoError(t, err)
	require.NoError(t, p.WaitDurable(context.Background(), res))
	p.SetFollowerHighWatermark(2)
	require.NoError(t, b.Close())

	b, err = Open(Options{DataDir: dir, Clock: clk})
	require.NoError(t, err)
	defer b.Close()
	p, err = b.EnsurePartition(tp, nil)
	require.NoError(t, err)
	require.Equal(t, int64(2), p.HighWatermark())
	require.Equal(t, int64(4), p.CommittedEnd())
	require.True(t, p.IsFollower(), "reopened replicated: a follower of nobody until told")
	require.Equal(t, int32(-1), p.Leader())
	_, err = p.Append(producerBatch(-1, -1, -1, "x"))
	require.ErrorIs(t, err, ErrNotLeader, "no writes before the node says it leads")

	require.NoError(t, p.BecomeLeader(2, &fakeISR{leaderEnd: 2, hw: 2, isr: map[int32]int64{3: 2}, minISR: 1, epoch: 2}))
	require.Equal(t, int64(2), p.HighWatermark(), "the ISR starts from the checkpointed HW")
	require.Empty(t, consumerFetch(t, p, 2).Batches, "nothing past the replicated HW is served")

	require.NoError(t, p.BecomeLeader(2, nil))
	require.Equal(t, int64(4), p.HighWatermark(), "alone again: its own committed end")
}

// What an append was made as decides its acks=all wait, not the role at
// the time of the wait: a produce appended by a replicated leader that
// became a follower before its caller got to wait is not answered by the
// local fsync; and one whose leadership was lost and won again (its tail
// may have been truncated and rewritten meanwhile) is refused even when
// the new epoch's HW passes its offsets.
func TestAcksAllWaitBelongsToTheLeadershipOfTheAppend(t *testing.T) {
	p := hostPartition(t, clock.NewFake(epoch0), "w")
	require.NoError(t, p.BecomeLeader(1, &fakeISR{isr: map[int32]int64{2: 0}, minISR: 1, epoch: 1}))
	res, err := p.Append(producerBatch(-1, -1, -1, "a"))
	require.NoError(t, err)
	require.True(t, res.Replicated())
	require.NoError(t, p.BecomeFollower(2, 2))
	require.ErrorIs(t, p.WaitReplicated(context.Background(), res), ErrNotLeader,
		"lost the leadership between the append and the wait: not acknowledged by the fsync alone")

	// Truncated as a follower, other records written at its offset, and
	// leading again with an ISR whose HW is past them.
	require.NoError(t, p.TruncateTo(0))
	other := producerBatch(-1, -1, -1, "b")
	batch.SetPartitionLeaderEpoch(other, 2)
	r2, err := p.AppendAsFollower(other)
	require.NoError(t, err)
	require.NoError(t, p.WaitDurable(context.Background(), r2))
	require.NoError(t, p.BecomeLeader(3, &fakeISR{leaderEnd: 1, hw: 1, isr: map[int32]int64{}, minISR: 1, epoch: 3}))
	require.Equal(t, int64(1), p.HighWatermark())
	require.ErrorIs(t, p.WaitReplicated(context.Background(), res), ErrNotLeader,
		"the offset is committed, but in another leadership: maybe not these records")

	local := hostPartition(t, clock.NewFake(epoch0), "w2")
	res, err = local.Append(producerBatch(-1, -1, -1, "c"))
	require.NoError(t, err)
	require.False(t, res.Replicated(), "alone: the fsync is the acknowledgement")
	require.NoError(t, local.WaitReplicated(context.Background(), res))
}

// On a clustered node a partition opens as a follower of nobody, new or
// reopened, so no client write is taken before the metadata gives it a
// role.
func TestReplicatedManagerOpensFollowersOfNobody(t *testing.T) {
	b, err := Open(Options{DataDir: t.TempDir(), Clock: clock.NewFake(epoch0), Replicated: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	p, err := b.EnsureFollower(TopicPartition{Topic: "n", Partition: 0}, TopicID{1}, nil)
	require.NoError(t, err)
	require.True(t, p.IsFollower())
	require.Equal(t, int32(-1), p.Leader())
	_, err = p.Append(producerBatch(-1, -1, -1, "x"))
	require.ErrorIs(t, err, ErrNotLeader)
	require.NoError(t, p.BecomeLeader(1, &fakeISR{isr: map[int32]int64{}, minISR: 1, epoch: 1}))
	_, err = p.Append(producerBatch(-1, -1, -1, "x"))
	require.NoError(t, err)
}

// A follower's lag is the leader's last answered high watermark minus its
// own durable end (never negative), known only while it follows and once
// an answer came in the current leadership; the manager reports it per
// partition.
func TestFollowerLag(t *testing.T) {
	b, err := Open(Options{DataDir: t.TempDir(), Clock: clock.NewFake(epoch0)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	tp := TopicPartition{Topic: "lag", Partition: 0}
	p, err := b.EnsurePartition(tp, nil)
	require.NoError(t, err)
	lagOf := func() (int64, bool) {
		for _, ps := range b.PartitionStates() {
			if ps.TopicPartition == tp {
				return ps.FollowerLag, ps.Following
			}
		}
		t.Fatalf("%v not in PartitionStates", tp)
		return 0, false
	}

	_, ok := p.FollowerLag()
	require.False(t, ok, "a partition alone on its node follows nobody")
	require.NoError(t, p.BecomeFollower(1, 2))
	_, ok = p.FollowerLag()
	require.False(t, ok, "no answer from the leader yet")

	batches := producerBatch(-1, -1, -1, "a", "b", "c", "d")
	batch.SetBaseOffset(batches, 0)
	batch.SetPartitionLeaderEpoch(batches, 1)
	res, err := p.AppendAsFollower(batches)
	require.NoError(t, err)
	require.NoError(t, p.WaitDurable(context.Background(), res))
	p.SetFollowerHighWatermark(10)
	lag, ok := lagOf()
	require.True(t, ok)
	require.Equal(t, int64(6), lag, "the leader's HW 10, this replica's end 4")
	p.SetFollowerHighWatermark(3)
	lag, ok = lagOf()
	require.True(t, ok)
	require.Zero(t, lag, "ahead of the leader's HW: no lag")

	require.NoError(t, p.BecomeFollower(1, 2))
	_, ok = p.FollowerLag()
	require.True(t, ok, "the same leadership again keeps what the leader said")
	require.NoError(t, p.BecomeFollower(2, 3))
	_, ok = p.FollowerLag()
	require.False(t, ok, "a new leadership: its HW is not known yet")
	p.SetFollowerHighWatermark(4)
	_, ok = p.FollowerLag()
	require.True(t, ok)
	require.NoError(t, p.BecomeLeader(3, nil))
	_, ok = lagOf()
	require.False(t, ok, "a leader has no follower lag")
}
