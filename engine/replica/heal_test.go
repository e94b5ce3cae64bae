package replica

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/txn"
	"github.com/moonmq/moonmq/engine/vfs"
)

func memBroker(t *testing.T, fsys vfs.FS, configure ...func(*Options)) *Manager {
	t.Helper()
	opts := Options{DataDir: "/data", FS: fsys, HealInterval: time.Hour,
		Clock: clock.NewFake(time.UnixMilli(1_700_000_000_000))}
	for _, c := range configure {
		c(&opts)
	}
	b, err := Open(opts)
	require.NoError(t, err)
	return b
}

// Idempotence survives a crash whatever the segment size: the last five
// batches of a producer are recognised as retries afterwards (finding 6 of
// issue 10: with 1 KiB segments the state was rebuilt from the last two
// segments only, so older retries were stored twice).
func TestIdempotenceSurvivesCrashWithSmallSegments(t *testing.T) {
	for _, powerCut := range []bool{false, true} {
		t.Run(fmt.Sprintf("power-cut=%v", powerCut), func(t *testing.T) {
			mem := vfs.NewMem()
			b := memBroker(t, mem)
			tp := TopicPartition{Topic: "t", Partition: 0}
			p, err := b.EnsurePartition(tp, map[string]string{"segment.bytes": "1024"})
			require.NoError(t, err)
			var sent [][]byte
			var offsets []int64
			seq := int32(0)
			for i := 0; i < 40; i++ {
				raw := producerBatch(7, 0, seq, strings.Repeat("v", 150), strings.Repeat("w", 150))
				sent = append(sent, raw)
				res, err := p.Append(append([]byte(nil), raw...))
				require.NoError(t, err)
				require.NoError(t, p.WaitDurable(context.Background(), res))
				offsets = append(offsets, res.BaseOffset)
				seq += 2
			}
			require.Greater(t, len(p.log.SegmentBases()), 10)
			snaps, err := listSnapshots(mem, p.log.Dir())
			require.NoError(t, err)
			require.Len(t, snaps, keepSnapshots, "a snapshot at every roll, the older ones pruned")
			// The first broker is abandoned, as a kill -9 leaves it; the
			// second works on what the crash left.
			fsys := mem.Crash(vfs.CrashOptions{ProcessOnly: !powerCut})
			b2 := memBroker(t, fsys)
			defer b2.Close()
			p2, err := b2.EnsurePartition(tp, map[string]string{"segment.bytes": "1024"})
			require.NoError(t, err)
			leo := p2.log.LogEndOffset()
			require.Equal(t, offsets[len(offsets)-1]+2, leo)
			for k := 1; k <= txn.MaxCachedBatches; k++ {
				i := len(sent) - k
				res, err := p2.Append(append([]byte(nil), sent[i]...))
				require.NoError(t, err, "retry of the batch %d back", k)
				require.Equal(t, offsets[i], res.BaseOffset, "retry of the batch %d back is answered with its offset", k)
			}
			_, err = p2.Append(append([]byte(nil), sent[len(sent)-txn.MaxCachedBatches-1]...))
			require.ErrorIs(t, err, txn.ErrOutOfOrderSequence, "older than the cached batches")
			require.Equal(t, leo, p2.log.LogEndOffset(), "no retry was stored again")
			_ = b.Close()
		})
	}
}

// sickBroker is a broker on which partition sick-0 fails every file
// operation while broken is set.
func sickBroker(t *testing.T, configure ...func(*Options)) (*Manager, *atomic.Bool) {
	faults := vfs.NewFaults(vfs.NewMem())
	broken := new(atomic.Bool)
	faults.SetInjector(func(op vfs.Op, path string) error {
		if broken.Load() && strings.Contains(path, "/sick-0") {
			return syscall.EIO
		}
		return nil
	})
	return memBroker(t, faults, configure...), broken
}

// A partition that cannot be opened is offline, not fatal: the rest of the
// broker serves, and the healer brings it back once opening works.
func TestOfflinePartitionHeals(t *testing.T) {
	b, broken := sickBroker(t)
	defer b.Close()
	broken.Store(true)
	sick := TopicPartition{Topic: "sick", Partition: 0}
	_, err := b.EnsurePartition(sick, nil)
	require.ErrorIs(t, err, ErrPartitionOffline)
	_, err = b.Partition(sick)
	require.ErrorIs(t, err, ErrPartitionOffline)
	healthy, err := b.EnsurePartition(TopicPartition{Topic: "fine", Partition: 0}, nil)
	require.NoError(t, err)
	_, err = healthy.Append(producerBatch(-1, -1, -1, "x"))
	require.NoError(t, err)
	require.Equal(t, 1, b.HealNow(), "still broken")
	states := b.PartitionStates()
	require.Len(t, states, 2)
	require.Equal(t, sick, states[1].TopicPartition)
	require.False(t, states[1].Online)
	require.Contains(t, states[1].Error, "input/output error")

	broken.Store(false)
	require.Zero(t, b.HealNow())
	p, err := b.Partition(sick)
	require.NoError(t, err)
	_, err = p.Append(producerBatch(-1, -1, -1, "y"))
	require.NoError(t, err)
	require.True(t, b.PartitionStates()[1].Online)
}

// On a cluster a partition healed from offline opens as a follower of
// nobody, and the manager says it is back (OnOnline) so the node gives it
// its role; until then it takes no writes.
func TestHealedReplicatedPartitionWaitsForItsRole(t *testing.T) {
	var online []TopicPartition
	b, broken := sickBroker(t, func(o *Options) {
		o.Replicated = true
		o.OnOnline = func(tp TopicPartition) { online = append(online, tp) }
	})
	defer b.Close()
	broken.Store(true)
	sick := TopicPartition{Topic: "sick", Partition: 0}
	_, err := b.EnsureLeader(sick, TopicID{1}, nil, 3)
	require.ErrorIs(t, err, ErrPartitionOffline)
	require.Equal(t, 1, b.HealNow())
	require.Empty(t, online, "still offline")

	broken.Store(false)
	require.Zero(t, b.HealNow())
	require.Equal(t, []TopicPartition{sick}, online)
	p, err := b.Partition(sick)
	require.NoError(t, err)
	_, err = p.Append(producerBatch(-1, -1, -1, "y"))
	require.ErrorIs(t, err, ErrNotLeader, "no role yet")
}

// A partition healed from offline leads in the epoch the metadata gave it
// (the latest, if it changed while offline), and stamps it on its appends.
func TestHealedPartitionKeepsLeaderEpoch(t *testing.T) {
	b, broken := sickBroker(t)
	defer b.Close()
	broken.Store(true)
	sick := TopicPartition{Topic: "sick", Partition: 0}
	_, err := b.EnsureLeader(sick, TopicID{1}, nil, 7)
	require.ErrorIs(t, err, ErrPartitionOffline)
	_, err = b.EnsureLeader(sick, TopicID{1}, nil, 9) // a leader change while it is offline
	require.ErrorIs(t, err, ErrPartitionOffline)
	_, err = b.EnsurePartition(sick, map[string]string{"retention.ms": "5"}) // configs only: the epoch stays
	require.ErrorIs(t, err, ErrPartitionOffline)

	broken.Store(false)
	require.Zero(t, b.HealNow())
	p, err := b.Partition(sick)
	require.NoError(t, err)
	require.EqualValues(t, 9, p.LeaderEpoch())
	res, err := p.Append(producerBatch(-1, -1, -1, "y"))
	require.NoError(t, err)
	require.NoError(t, p.WaitDurable(context.Background(), res))
	raw, err := p.Read(0, 1<<20)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(raw), 16)
	require.EqualValues(t, 9, int32(binary.BigEndian.Uint32(raw[12:16])), "the batch carries the epoch (partitionLeaderEpoch)")

	// An open partition takes a new epoch from EnsureLeader, and keeps it
	// through EnsurePartition.
	_, err = b.EnsureLeader(sick, TopicID{1}, nil, 11)
	require.NoError(t, err)
	_, err = b.EnsurePartition(sick, nil)
	require.NoError(t, err)
	require.EqualValues(t, 11, p.LeaderEpoch())
}

// A log that failed on a full disk takes no appends but frees space through
// DeleteRecords and retention, and comes back by itself when the disk has
// room, with its producer state consistent with what was kept.
func TestFullDiskPartitionHeals(t *testing.T) {
	faults := vfs.NewFaults(vfs.NewMem())
	var full atomic.Bool
	faults.SetInjector(func(op vfs.Op, path string) error {
		if full.Load() && op == vfs.OpWrite {
			return syscall.ENOSPC
		}
		return nil
	})
	b := memBroker(t, faults)
	defer b.Close()
	tp := TopicPartition{Topic: "t", Partition: 0}
	p, err := b.EnsurePartition(tp, map[string]string{"segment.bytes": "1024"})
	require.NoError(t, err)
	var last ProduceResult
	for i := int32(0); i < 20; i++ {
		last, err = p.Append(producerBatch(5, 0, i, strings.Repeat("x", 200)))
		require.NoError(t, err)
	}
	require.NoError(t, p.WaitDurable(context.Background(), last))

	full.Store(true)
	_, err = p.Append(producerBatch(5, 0, 20, "z"))
	require.ErrorIs(t, err, log.ErrFailed)
	st := b.PartitionStates()[0]
	require.False(t, st.Online)
	require.Contains(t, st.Error, "no space left")
	require.Equal(t, 1, b.HealNow())

	full.Store(false)
	require.Zero(t, b.HealNow())
	require.True(t, b.PartitionStates()[0].Online)
	res, err := p.Append(producerBatch(5, 0, 20, "z"))
	require.NoError(t, err, "the sequence continues where the durable log ends")
	require.Equal(t, int64(20), res.BaseOffset)
	dup, err := p.Append(producerBatch(5, 0, 19, strings.Repeat("x", 200)))
	require.NoError(t, err)
	require.Equal(t, int64(19), dup.BaseOffset)
}

func TestCapacity(t *testing.T) {
	b, err := Open(Options{DataDir: "/data", FS: vfs.NewMem(), FDLimit: 300, FDReserve: 200, FileCacheCapacity: 90,
		Files: log.NewFileCache(90)})
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, 10, b.Capacity())
	require.NoError(t, b.CheckCapacity(10))
	for i := int32(0); i < 8; i++ {
		_, err := b.EnsurePartition(TopicPartition{Topic: "t", Partition: i}, nil)
		require.NoError(t, err)
	}
	require.NoError(t, b.CheckCapacity(2))
	err = b.CheckCapacity(3)
	require.ErrorIs(t, err, ErrOverCapacity)
	require.Contains(t, err.Error(), "file descriptor limit of 300")
	for i := int32(8); i < 12; i++ {
		_, err := b.EnsurePartition(TopicPartition{Topic: "t", Partition: i}, nil)
		if i < 10 {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, ErrPartitionOffline, "over the budget the partition is offline, not opened")
		}
	}
	require.NoError(t, b.DeleteTopic("t"))
	require.NoError(t, b.CheckCapacity(10))
}

// healGate makes the first open of a gated partition's log (t-0 unless
// named otherwise) block until released, after a phase in which every
// access to them fails (so they go offline). first is the topic whose open
// blocked.
type healGate struct {
	topics  []string
	failing atomic.Bool
	once    atomic.Bool
	first   atomic.Value // string
	blocked chan struct{}
	release chan struct{}
}

func newHealGate(faults *vfs.Faults, topics ...string) *healGate {
	if len(topics) == 0 {
		topics = []string{"t"}
	}
	g := &healGate{topics: topics, blocked: make(chan struct{}), release: make(chan struct{})}
	g.failing.Store(true)
	faults.SetInjector(func(op vfs.Op, path string) error {
		i := slices.IndexFunc(topics, func(topic string) bool { return strings.Contains(path, "/"+topic+"-0") })
		if i < 0 {
			return nil
		}
		if g.failing.Load() {
			return syscall.EIO
		}
		if op == vfs.OpOpen && strings.HasSuffix(path, ".log") && g.once.CompareAndSwap(false, true) {
			g.first.Store(topics[i])
			close(g.blocked)
			<-g.release
		}
		return nil
	})
	return g
}

// healUntilBlocked checks that b, opened in the failing phase, has every
// gated partition offline, ends that phase and starts a heal, returning
// once the heal blocks in its first open; the channel gives HealNow's count.
func (g *healGate) healUntilBlocked(t *testing.T, b *Manager) <-chan int {
	t.Helper()
	for _, topic := range g.topics {
		_, err := b.EnsurePartition(TopicPartition{Topic: topic, Partition: 0}, nil)
		require.ErrorIs(t, err, ErrPartitionOffline)
	}
	g.failing.Store(false)
	healed := make(chan int)
	go func() { healed <- b.HealNow() }()
	<-g.blocked
	return healed
}

// A shutdown that lands while the healer opens an offline partition closes
// that partition; it never removes its data.
func TestCloseDuringHealKeepsTheData(t *testing.T) {
	mem := vfs.NewMem()
	faults := vfs.NewFaults(mem)
	b := memBroker(t, faults)
	tp := TopicPartition{Topic: "t", Partition: 0}
	p, err := b.EnsurePartition(tp, nil)
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		_, err = p.Append(producerBatch(-1, -1, -1, "x"))
		require.NoError(t, err)
	}
	require.NoError(t, b.Close())

	gate := newHealGate(faults)
	b2 := memBroker(t, faults)
	healed := gate.healUntilBlocked(t, b2)
	closed := make(chan error)
	go func() { closed <- b2.Close() }()
	require.Eventually(t, func() bool {
		b2.mu.RLock()
		defer b2.mu.RUnlock()
		return b2.closed
	}, 10*time.Second, time.Millisecond)
	close(gate.release)
	<-healed
	require.NoError(t, <-closed)

	b3 := memBroker(t, mem)
	defer b3.Close()
	p, err = b3.EnsurePartition(tp, nil)
	require.NoError(t, err)
	require.Equal(t, int64(10), p.log.LogEndOffset(), "every record survives a shutdown during a heal")
}

// A topic deleted and created again while the healer opens its old
// partition: the delete waits for the open, and until it is over the
// partition cannot be opened a second time, so one Log at a time writes
// the directory and nothing of the old partition comes back.
func TestDeleteDuringHealWaitsForTheOpen(t *testing.T) {
	mem := vfs.NewMem()
	faults := vfs.NewFaults(mem)
	b := memBroker(t, faults)
	tp := TopicPartition{Topic: "t", Partition: 0}
	p, err := b.EnsurePartition(tp, nil)
	require.NoError(t, err)
	_, err = p.Append(producerBatch(-1, -1, -1, "old", "old"))
	require.NoError(t, err)
	require.NoError(t, b.Close())

	gate := newHealGate(faults)
	waiting := make(chan struct{})
	b, err = Open(Options{DataDir: "/data", FS: faults, HealInterval: time.Hour,
		deleteWaits: func() { close(waiting) }})
	require.NoError(t, err)
	defer b.Close()
	healed := gate.healUntilBlocked(t, b)
	_, err = b.EnsurePartition(tp, nil)
	require.ErrorIs(t, err, ErrPartitionOffline, "a partition being opened is still offline")
	deleted := make(chan error, 1)
	go func() { deleted <- b.DeleteTopic("t") }()
	select {
	case <-waiting:
	case <-deleted:
		t.Fatal("the delete finished while the heal was still opening the partition")
	}
	_, err = b.EnsurePartition(tp, nil)
	require.ErrorIs(t, err, ErrPartitionOffline, "no second open while the first is in flight")
	close(gate.release)
	<-healed
	require.NoError(t, <-deleted)

	p, err = b.EnsurePartition(tp, nil) // the topic is created again
	require.NoError(t, err)
	require.Equal(t, int64(0), p.log.LogEndOffset(), "the old partition's records are gone")
	_, err = p.Append(producerBatch(-1, -1, -1, "new"))
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b = memBroker(t, mem)
	defer b.Close()
	p, err = b.EnsurePartition(tp, nil)
	require.NoError(t, err)
	require.Equal(t, int64(1), p.log.LogEndOffset(), "the new partition's record survives a restart")
}

// A heal opens offline partitions one by one, and a topic delete waits
// only for an open of its own partitions: not for a queue of other
// topics' opens (the delete runs in the metadata reconciler, so every metadata
// change would wait for them). A partition deleted while queued is
// skipped.
func TestDeleteDoesNotWaitForOtherTopicsOpens(t *testing.T) {
	mem := vfs.NewMem()
	faults := vfs.NewFaults(mem)
	b := memBroker(t, faults)
	for _, topic := range []string{"t", "u"} {
		p, err := b.EnsurePartition(TopicPartition{Topic: topic, Partition: 0}, nil)
		require.NoError(t, err)
		_, err = p.Append(producerBatch(-1, -1, -1, "x"))
		require.NoError(t, err)
	}
	require.NoError(t, b.Close())

	gate := newHealGate(faults, "t", "u")
	b2 := memBroker(t, faults)
	defer b2.Close()
	healed := gate.healUntilBlocked(t, b2)
	first := gate.first.Load().(string)
	other := "u"
	if first == "u" {
		other = "t"
	}
	deleted := make(chan error, 1)
	go func() { deleted <- b2.DeleteTopic(other) }()
	select {
	case err := <-deleted:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		close(gate.release)
		<-healed
		t.Fatalf("DeleteTopic(%q) waited for the heal's open of %s-0", other, first)
	}
	close(gate.release)
	require.Zero(t, <-healed, "the deleted topic's partition is not opened")
	_, err := b2.EnsurePartition(TopicPartition{Topic: first, Partition: 0}, nil)
	require.NoError(t, err, "the other topic's partition healed")
}

// StorageFailure says, per partition, what PartitionStates says: the cause
// while it cannot be opened or its log failed, nil once it serves.
func TestStorageFailure(t *testing.T) {
	b, broken := sickBroker(t)
	defer b.Close()
	sick := TopicPartition{Topic: "sick", Partition: 0}
	require.NoError(t, b.StorageFailure(sick), "not hosted")

	broken.Store(true)
	_, err := b.EnsurePartition(sick, nil)
	require.ErrorIs(t, err, ErrPartitionOffline)
	require.ErrorIs(t, b.StorageFailure(sick), ErrPartitionOffline)
	broken.Store(false)
	require.Zero(t, b.HealNow())
	require.NoError(t, b.StorageFailure(sick))

	p, err := b.Partition(sick)
	require.NoError(t, err)
	broken.Store(true)
	_, err = p.Append(producerBatch(-1, -1, -1, "x"))
	require.Error(t, err)
	require.Error(t, b.StorageFailure(sick), "the log failed")
	require.False(t, b.PartitionStates()[0].Online)
	broken.Store(false)
	require.Zero(t, b.HealNow())
	require.NoError(t, b.StorageFailure(sick))
}
