package txncoord

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/replica/replicatest"
	"github.com/moonmq/moonmq/engine/vfs"
	"github.com/moonmq/moonmq/internal/syncbuf"
)

// __transaction_state is compacted: only the latest record of every
// transactional id survives, and a tombstone (an expired id) goes too once
// its delete horizon passed. The replay keeps the latest record of each id
// and deletes the id at a tombstone, so a compacted log must replay to the
// state the whole history replays to, and to the state before the
// restart; an id forgotten in memory without a tombstone would come back.
//
// TestReplayOfCompactedTransactionState drives two coordinators, each over
// its own broker (2 partitions of 1 KiB segments), with the same random
// transactions (InitProducerId, AddPartitions, commits and aborts, markers
// answered or retried, timeouts, expired ids), compacts one log for real
// (engine/log's Clean) at random moments, restarts both now and then, and
// compares the replayed states with each other and with the state before.
func TestReplayOfCompactedTransactionState(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { replayCompactedTxnState(t, seed, 500) })
	}
}

const stateParts = 2

type stateTwin struct {
	t        *testing.T
	fs       vfs.FS
	now      *atomic.Int64 // the shared clock, in ms
	pids     *atomic.Int64
	b        *replica.Manager
	c        *Coordinator
	warnings *syncbuf.Buffer
}

func openStateTwin(t *testing.T, fs vfs.FS, now, pids *atomic.Int64, exists bool) *stateTwin {
	t.Helper()
	b, err := replica.Open(replica.Options{DataDir: "/data", FS: fs, RetentionCheckInterval: time.Hour})
	require.NoError(t, err)
	var n atomic.Int32
	configs := TopicConfigs(1024)
	store := &group.BrokerStorage{Broker: b, Topic: Topic, Configs: configs, PartitionCount: n.Load,
		CreateTopic: replicatest.CreateTopic(b, Topic, &n)}
	if exists {
		require.NoError(t, store.CreateTopic(t.Context(), stateParts, configs))
	}
	warnings := &syncbuf.Buffer{}
	cfg := Config{Partitions: stateParts, TransactionVersion: 2, TransactionMaxTimeout: time.Hour,
		TransactionalIDExpiration: 3 * time.Hour, RemoveExpiredInterval: 10 * time.Minute,
		Now: func() time.Time { return time.UnixMilli(now.Load()) }, TickInterval: time.Hour, PartitionRecheckInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(warnings, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	c, err := New(cfg, store, fakePIDs{pids}, nil)
	require.NoError(t, err)
	_, err = c.EnsureTopic(t.Context())
	require.NoError(t, err)
	c.Start([]int32{0, 1})
	<-c.Loaded()
	require.Empty(t, warnings.String(), "warnings while replaying")
	return &stateTwin{t: t, fs: fs, now: now, pids: pids, b: b, c: c, warnings: warnings}
}

func (w *stateTwin) close() {
	w.c.Close()
	require.NoError(w.t, w.b.Close())
}

func (w *stateTwin) restart() *stateTwin {
	w.close()
	return openStateTwin(w.t, w.fs, w.now, w.pids, true)
}

func (w *stateTwin) partition(p int32) *replica.Partition {
	part, err := w.b.Partition(replica.TopicPartition{Topic: Topic, Partition: p})
	require.NoError(w.t, err)
	return part
}

// clean compacts every partition as engine/cleaner would, at the clock's
// time, and returns the records removed.
func (w *stateTwin) clean(rnd *rand.Rand) int64 {
	var removed int64
	for p := range int32(stateParts) {
		removed += replicatest.Clean(w.t.Context(), w.t, w.partition(p), time.UnixMilli(w.now.Load()), rnd)
	}
	return removed
}

// counts are the records (control records included; the topic has none)
// and tombstones the partitions hold.
func (w *stateTwin) counts() (records, tombstones int) {
	for p := range int32(stateParts) {
		c := replicatest.Count(w.t, w.partition(p))
		records += c.Records + c.Markers
		tombstones += c.Tombstones
	}
	return records, tombstones
}

// dump prints every transactional id's state; persisted leaves out what
// no record holds (LastEpoch, which Kafka also reads back as -1).
func (w *stateTwin) dump(persisted bool) string {
	var b strings.Builder
	for p := range int32(stateParts) {
		require.NoError(w.t, w.c.rt.Do(p, func(s *shard) {
			for _, id := range slices.Sorted(maps.Keys(s.txns)) {
				m := s.txns[id]
				var parts []string
				for _, tp := range m.SortedPartitions() {
					parts = append(parts, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
				}
				fmt.Fprintf(&b, "p%d %s %s pid=%d prev=%d next=%d epoch=%d timeout=%d start=%d update=%d tv=%d %v", p, id,
					m.State, m.ProducerID, m.PrevProducerID, m.NextProducerID, m.Epoch, m.TimeoutMs, m.StartMs,
					m.LastUpdateMs, m.ClientTV, parts)
				if !persisted {
					fmt.Fprintf(&b, " last-epoch=%d", m.LastEpoch)
				}
				b.WriteString("\n")
			}
		}))
	}
	return b.String()
}

type stateScenario struct {
	t         *testing.T
	rnd       *rand.Rand
	now       atomic.Int64
	full, cmp *stateTwin
	producers map[string]PidEpoch // what each id's producer was last given
	removed   int64
	restarts  int
	compared  int // ids compared across the restarts
}

var stateIDs = []string{"tx0", "tx1", "tx2", "tx3", "tx4", "tx5", "tx6", "tx7"}

func replayCompactedTxnState(t *testing.T, seed uint64, steps int) {
	sc := &stateScenario{t: t, rnd: rand.New(rand.NewPCG(seed, seed)), producers: map[string]PidEpoch{}}
	sc.now.Store(1_700_000_000_000)
	var fullPIDs, cmpPIDs atomic.Int64
	fullPIDs.Store(999)
	cmpPIDs.Store(999)
	sc.full = openStateTwin(t, vfs.NewMem(), &sc.now, &fullPIDs, false)
	sc.cmp = openStateTwin(t, vfs.NewMem(), &sc.now, &cmpPIDs, false)
	defer func() { sc.full.close(); sc.cmp.close() }()
	for range steps {
		sc.step()
	}
	sc.markers(true)
	sc.removed += sc.cmp.clean(sc.rnd)
	sc.restartAndCompare()
	// Then long enough for every id to expire and two cleanings to
	// remove the tombstones.
	for range 3 {
		sc.markers(true)
		sc.advance(2 * time.Hour)
		sc.removed += sc.cmp.clean(sc.rnd)
	}
	sc.restartAndCompare()
	fullRecords, fullTombstones := sc.full.counts()
	cmpRecords, cmpTombstones := sc.cmp.counts()
	require.Positive(t, sc.removed)
	require.Greater(t, sc.compared, 3*sc.restarts, "the restarts had transactional ids to compare")
	require.Less(t, cmpRecords, fullRecords, "the compacted log holds fewer records")
	require.Positive(t, fullTombstones, "ids expired")
	require.Less(t, cmpTombstones, fullTombstones, "tombstones past their horizon were removed")
	t.Logf("seed %d: %d records (%d tombstones) in the full log, %d (%d) compacted, %d restarts comparing %d ids", seed,
		fullRecords, fullTombstones, cmpRecords, cmpTombstones, sc.restarts, sc.compared)
}

func (sc *stateScenario) both(what string, op func(w *stateTwin) string) string {
	a, b := op(sc.full), op(sc.cmp)
	require.Equal(sc.t, a, b, "%s: the twins answered differently", what)
	return a
}

// await returns the answers of both twins to one request. One held (an
// AddPartitions waiting for the markers of the id's previous transaction)
// is released by answering the markers due, or by its hold running out.
func await[T any](sc *stateScenario, issue func(w *stateTwin) *Reply[T]) (full, cmp T) {
	rf, rc := issue(sc.full), issue(sc.cmp)
	done := func(r *Reply[T]) bool {
		select {
		case <-r.Done():
			return true
		default:
			return false
		}
	}
	for i := 0; !done(rf) || !done(rc); i++ {
		require.Equal(sc.t, done(rf), done(rc), "one twin held the request, the other did not")
		require.Less(sc.t, i, 10, "a request was held for good")
		sc.markers(true)
		if !done(rf) || !done(rc) {
			sc.advance(holdTimeout + time.Millisecond)
		}
	}
	var err error
	full, err = rf.Wait(sc.t.Context())
	require.NoError(sc.t, err)
	cmp, err = rc.Wait(sc.t.Context())
	require.NoError(sc.t, err)
	return full, cmp
}

func (sc *stateScenario) id() string { return stateIDs[sc.rnd.IntN(len(stateIDs))] }

func (sc *stateScenario) step() {
	ctx := sc.t.Context()
	switch r := sc.rnd.IntN(100); {
	case r < 15:
		id := sc.id()
		timeout := int32(60_000 * (1 + sc.rnd.IntN(30)))
		res, other := await(sc, func(w *stateTwin) *Reply[InitResult] { return w.c.InitProducerID(ctx, id, timeout, nil) })
		require.Equal(sc.t, fmt.Sprint(res), fmt.Sprint(other), "init")
		if res.Err == nil {
			sc.producers[id] = PidEpoch{ProducerID: res.ProducerID, Epoch: res.Epoch}
		}
	case r < 45:
		id := sc.id()
		pe, ok := sc.producers[id]
		if !ok {
			return
		}
		tps := []TP{{Topic: "orders", Partition: sc.rnd.Int32N(4)}}
		if sc.rnd.IntN(2) == 0 {
			tps = append(tps, TP{Topic: "payments", Partition: sc.rnd.Int32N(2)})
		}
		res, other := await(sc, func(w *stateTwin) *Reply[error] { return w.c.AddPartitions(id, pe.ProducerID, pe.Epoch, tps, 2) })
		require.Equal(sc.t, fmt.Sprint(res), fmt.Sprint(other), "add")
	case r < 62:
		id := sc.id()
		pe, ok := sc.producers[id]
		if !ok {
			return
		}
		commit := sc.rnd.IntN(10) < 7
		res, other := await(sc, func(w *stateTwin) *Reply[EndResult] { return w.c.EndTxn(ctx, id, pe.ProducerID, pe.Epoch, commit, 2) })
		require.Equal(sc.t, fmt.Sprint(res), fmt.Sprint(other), "end")
		if res.Err == nil {
			sc.producers[id] = PidEpoch{ProducerID: res.ProducerID, Epoch: res.Epoch}
		}
	case r < 80:
		sc.markers(sc.rnd.IntN(4) > 0)
	case r < 90:
		sc.advance(time.Duration(1+sc.rnd.IntN(60)) * time.Minute)
	case r < 97:
		sc.removed += sc.cmp.clean(sc.rnd)
	default:
		sc.restartAndCompare()
	}
}

// markers answers every marker due: written, or (not ok) to be retried.
func (sc *stateScenario) markers(ok bool) {
	now := time.UnixMilli(sc.now.Load())
	sc.both("markers", func(w *stateTwin) string {
		w.c.Settle()
		polled := w.c.PollMarkers(now)
		var results []MarkerResult
		for _, m := range polled {
			outcome := MarkerDone
			if !ok {
				outcome = MarkerRetry
			}
			results = append(results, MarkerResult{Write: m, Outcome: outcome})
		}
		w.c.MarkersWritten(now, results)
		w.c.Settle()
		return fmt.Sprint(polled)
	})
}

// advance moves the clock and ticks both coordinators: transactions past
// their timeout are aborted, idle ids expire.
func (sc *stateScenario) advance(d time.Duration) {
	now := time.UnixMilli(sc.now.Add(d.Milliseconds()))
	sc.full.c.Tick(now)
	sc.cmp.c.Tick(now)
	sc.full.c.Settle()
	sc.cmp.c.Settle()
}

func (sc *stateScenario) restartAndCompare() {
	sc.both("state before the restart", func(w *stateTwin) string { return w.dump(false) })
	before := sc.full.dump(true)
	sc.compared += strings.Count(before, "\n")
	sc.full, sc.cmp = sc.full.restart(), sc.cmp.restart()
	sc.restarts++
	require.Equal(sc.t, sc.full.dump(false), sc.cmp.dump(false), "the compacted log replays to another state than the whole history")
	require.Equal(sc.t, before, sc.cmp.dump(true), "the replay lost or resurrected transactional ids")
}
