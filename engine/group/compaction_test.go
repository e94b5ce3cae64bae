package group

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

	"github.com/moonmq/moonmq/engine/coord"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/replica/replicatest"
	"github.com/moonmq/moonmq/engine/vfs"
	"github.com/moonmq/moonmq/internal/syncbuf"
)

// __consumer_offsets is compacted (cleanup.policy=compact): superseded
// commits and group records are removed, tombstones too once their delete
// horizon passed, aborted transactional commits with them, and markers
// once their transaction has no data left. A replay of what compaction
// leaves must give the state a replay of the whole history gives, and the
// state the coordinator had before it restarted: that holds only if every
// removal of a key is written as a tombstone (an offset or a group deleted
// in memory alone would come back from its last record) and no replay rule
// depends on a record compaction removes.
//
// TestReplayOfCompactedOffsetsTopic drives two coordinators, each over
// its own broker, with the same random operations (plain and transactional
// commits, commits and aborts, OffsetDelete, DeleteGroups, classic groups
// joining and leaving, offset expiry, topic deletion), compacts one of the
// two logs for real (engine/log's Clean, at random moments, with a small
// key map so cleanings take several passes, and times far enough apart that
// tombstones and markers are removed), restarts both from their logs now
// and then, and compares: the compacted replay with the full one, and both
// with the state before the restart.
func TestReplayOfCompactedOffsetsTopic(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { replayCompactedOffsets(t, seed, 600) })
	}
}

// compactionTopics are the topics the random operations commit to; u is
// deleted and created again (with another id) now and then.
func compactionTopics(uGeneration int) []TopicInfo {
	return []TopicInfo{{Name: "t", ID: tid("t"), Partitions: 3},
		{Name: "u", ID: tid(fmt.Sprintf("u%d", uGeneration)), Partitions: 1}}
}

// offsetsTwin is a coordinator over a real broker's __consumer_offsets (4
// partitions of 1 KiB segments, so cleanings have sealed segments to work
// on), in memory.
type offsetsTwin struct {
	t     *testing.T
	name  string
	fs    vfs.FS
	clk   *clock
	b     *replica.Manager
	store *BrokerStorage
	c     *Coordinator
	// warnings are what the coordinator logged at WARN and above: a
	// replay must skip no record of a compacted log as undecodable.
	warnings *syncbuf.Buffer
}

const twinPartitions = 4

func openOffsetsTwin(t *testing.T, name string, fs vfs.FS, clk *clock, topics []TopicInfo) *offsetsTwin {
	t.Helper()
	b, err := replica.Open(replica.Options{DataDir: "/data", FS: fs, RetentionCheckInterval: time.Hour})
	require.NoError(t, err)
	var n atomic.Int32
	configs := OffsetsTopicConfigs(1024)
	store := &BrokerStorage{Broker: b, Configs: configs, PartitionCount: n.Load,
		CreateTopic: replicatest.CreateTopic(b, OffsetsTopic, &n)}
	if name != "" { // a reopened broker: the topic exists
		require.NoError(t, store.CreateTopic(t.Context(), twinPartitions, configs))
	}
	warnings := &syncbuf.Buffer{}
	cfg := testConfig()
	cfg.Now = clk.Now
	cfg.Logger = slog.New(slog.NewTextHandler(warnings, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.OffsetsTopicPartitions, cfg.TickInterval, cfg.PartitionRecheckInterval = twinPartitions, time.Hour, time.Hour
	cfg.OffsetsRetention, cfg.RetentionCheckInterval = 3*time.Hour, time.Minute
	c, err := New(cfg, store)
	require.NoError(t, err)
	c.SetTopics(topics)
	c.Start()
	require.NoError(t, c.EnsureTopic(t.Context()))
	require.Eventually(t, func() bool { return c.Ready() == nil }, 10*time.Second, time.Millisecond)
	require.Empty(t, warnings.String(), "warnings while replaying")
	return &offsetsTwin{t: t, name: name, fs: fs, clk: clk, b: b, store: store, c: c, warnings: warnings}
}

// restart closes the coordinator and the broker and opens both again from
// the files: the coordinator replays what is in the log.
func (w *offsetsTwin) restart(topics []TopicInfo) *offsetsTwin {
	w.close()
	name := w.name
	if name == "" {
		name = "reopened"
	}
	return openOffsetsTwin(w.t, name, w.fs, w.clk, topics)
}

func (w *offsetsTwin) close() {
	require.NoError(w.t, w.c.Close())
	require.NoError(w.t, w.b.Close())
}

func (w *offsetsTwin) partition(p int32) *replica.Partition {
	part, err := w.b.Partition(replica.TopicPartition{Topic: OffsetsTopic, Partition: p})
	require.NoError(w.t, err)
	return part
}

// clean compacts every partition as engine/cleaner would, at the clock's
// time, and returns the records removed.
func (w *offsetsTwin) clean(rnd *rand.Rand) int64 {
	var removed int64
	for p := range int32(twinPartitions) {
		removed += replicatest.Clean(w.t.Context(), w.t, w.partition(p), w.clk.Now(), rnd)
	}
	return removed
}

// counts counts the records, tombstones and end-transaction markers every
// partition holds.
func (w *offsetsTwin) counts() replicatest.Counts {
	var n replicatest.Counts
	for p := range int32(twinPartitions) {
		c := replicatest.Count(w.t, w.partition(p))
		n.Records, n.Tombstones, n.Markers = n.Records+c.Records, n.Tombstones+c.Tombstones, n.Markers+c.Markers
	}
	return n
}

// dump prints every shard's groups and offsets; offsetsOnly leaves out
// what only a live coordinator knows exactly (membership timers, groups
// holding nothing yet).
func (w *offsetsTwin) dump(offsetsOnly bool) string {
	var b strings.Builder
	for p := range int32(twinPartitions) {
		require.NoError(w.t, w.c.rt.Do(p, func(s *shard) {
			for _, id := range slices.Sorted(maps.Keys(s.groups)) {
				g := s.groups[id]
				if !offsetsOnly {
					fmt.Fprintf(&b, "p%d %s: %s %s protocol-type=%q persisted=%v members=%d", p, id, g.Type(), g.State(),
						g.ProtocolType(), g.persisted, g.members())
					if cl, ok := g.kind.(*Classic); ok {
						fmt.Fprintf(&b, " generation=%d protocol=%q since=%d", cl.generation, cl.protocol, cl.stateSince.UnixMilli())
					}
					b.WriteString("\n")
				}
				for _, k := range g.sortedOffsets() {
					fmt.Fprintf(&b, "p%d %s %s-%d: %s\n", p, id, k.topic, k.part, formatEntry(g.offsets[k]))
				}
			}
			for _, pid := range slices.Sorted(maps.Keys(s.txnOffsets)) {
				for _, id := range slices.Sorted(maps.Keys(s.txnOffsets[pid])) {
					offs := s.txnOffsets[pid][id]
					for _, k := range slices.SortedFunc(maps.Keys(offs), compareTP) {
						fmt.Fprintf(&b, "p%d pending pid %d %s %s-%d: %s\n", p, pid, id, k.topic, k.part, formatEntry(offs[k]))
					}
				}
			}
		}))
	}
	return b.String()
}

func formatEntry(o *offsetEntry) string {
	return fmt.Sprintf("offset=%d epoch=%d metadata=%q commit=%d expire=%d topic-id=%x record=%d",
		o.offset, o.leaderEpoch, o.metadata, o.commitTime, o.expireTime, o.topicID[:2], o.recordOffset)
}

// offsetsScenario applies the same random operations to both twins and
// checks that they answer alike.
type offsetsScenario struct {
	t         *testing.T
	rnd       *rand.Rand
	clk       *clock
	full, cmp *offsetsTwin
	uGen      int
	uDeleted  bool
	open      map[int64]map[int32]bool // transactions open: producer id -> offsets partitions
	removed   int64                    // records the cleanings removed
	restarts  int
	compared  int // offsets compared across the restarts
}

var compactionGroups = []string{"g0", "g1", "g2", "g3", "g4", "g5", "g6"}

func replayCompactedOffsets(t *testing.T, seed uint64, steps int) {
	clk := &clock{now: time.Unix(1_000_000, 0)}
	sc := &offsetsScenario{t: t, rnd: rand.New(rand.NewPCG(seed, seed)), clk: clk, open: map[int64]map[int32]bool{}}
	sc.full = openOffsetsTwin(t, "", vfs.NewMem(), clk, sc.topics())
	sc.cmp = openOffsetsTwin(t, "", vfs.NewMem(), clk, sc.topics())
	defer func() { sc.full.close(); sc.cmp.close() }()
	for range steps {
		sc.step()
	}
	// End every transaction, then let enough time pass for two cleanings
	// to remove every tombstone and marker they may remove.
	for _, pid := range slices.Sorted(maps.Keys(sc.open)) {
		sc.endTxn(pid, sc.rnd.IntN(2) == 0)
	}
	sc.removed += sc.cmp.clean(sc.rnd)
	sc.restartAndCompare()
	for range 3 {
		sc.advance(2 * time.Hour)
		sc.removed += sc.cmp.clean(sc.rnd)
	}
	sc.restartAndCompare()
	// The compaction did what the comparison is about: superseded
	// records, tombstones and markers were removed.
	full, cmp := sc.full.counts(), sc.cmp.counts()
	require.Positive(t, sc.removed, "the cleanings removed records")
	require.Greater(t, sc.compared, 3*sc.restarts, "the restarts had offsets to compare")
	require.Less(t, cmp.Records, full.Records, "the compacted log holds fewer records")
	require.Less(t, cmp.Tombstones, full.Tombstones, "tombstones past their horizon were removed")
	require.Less(t, cmp.Markers, full.Markers, "markers of transactions without records left were removed")
	t.Logf("seed %d: full log %+v, compacted %+v (%d removed by the cleanings), %d restarts comparing %d offsets",
		seed, full, cmp, sc.removed, sc.restarts, sc.compared)
}

func (sc *offsetsScenario) topics() []TopicInfo {
	all := compactionTopics(sc.uGen)
	if sc.uDeleted {
		return all[:1]
	}
	return all
}

// both runs op on each twin and requires the same answer from both.
func (sc *offsetsScenario) both(what string, op func(w *offsetsTwin) string) string {
	a, b := op(sc.full), op(sc.cmp)
	require.Equal(sc.t, a, b, "%s: the twins answered differently", what)
	return a
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func (sc *offsetsScenario) group() string {
	return compactionGroups[sc.rnd.IntN(len(compactionGroups))]
}

// partitions are 1 to 3 distinct partitions of t and u.
func (sc *offsetsScenario) partitions() []tpKey {
	all := []tpKey{{"t", 0}, {"t", 1}, {"t", 2}, {"u", 0}}
	sc.rnd.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all[:1+sc.rnd.IntN(3)]
}

func commitTopics(keys []tpKey, rnd *rand.Rand) []CommitTopic {
	var out []CommitTopic
	for _, k := range keys {
		md := fmt.Sprintf("m%d", rnd.IntN(10))
		out = append(out, CommitTopic{Topic: k.topic, Partitions: []CommitPartition{{Partition: k.part,
			Offset: rnd.Int64N(1_000_000), LeaderEpoch: rnd.Int32N(5), Metadata: &md, Timestamp: -1}}})
	}
	return out
}

func (sc *offsetsScenario) step() {
	switch r := sc.rnd.IntN(100); {
	case r < 35:
		sc.commit(nil)
	case r < 47:
		pid := 9000 + sc.rnd.Int64N(3)
		sc.commit(&pid)
	case r < 55:
		if len(sc.open) > 0 {
			pids := slices.Sorted(maps.Keys(sc.open))
			sc.endTxn(pids[sc.rnd.IntN(len(pids))], sc.rnd.IntN(10) < 7)
		}
	case r < 61:
		g, keys := sc.group(), sc.partitions()
		var topics []FetchTopic
		for _, k := range keys {
			topics = append(topics, FetchTopic{Topic: k.topic, Partitions: []int32{k.part}})
		}
		sc.both("delete offsets", func(w *offsetsTwin) string {
			res := get(sc.t, w.c.DeleteOffsets(g, topics))
			return fmt.Sprint(errText(res.Err), res.Partitions)
		})
	case r < 66:
		g := sc.group()
		sc.both("delete group", func(w *offsetsTwin) string { return fmt.Sprint(deleteGroups(sc.t, w.c, g)) })
	case r < 72:
		sc.classicLifecycle(sc.group())
	case r < 84:
		sc.advance(time.Duration(1+sc.rnd.IntN(90)) * time.Minute)
	case r < 87:
		sc.toggleTopicU()
	case r < 97:
		sc.removed += sc.cmp.clean(sc.rnd)
	default:
		sc.restartAndCompare()
	}
}

// commit is an OffsetCommit, or with pid a TxnOffsetCommit in producer
// pid's transaction (opened on the group's partition if it is not yet).
func (sc *offsetsScenario) commit(pid *int64) {
	g := sc.group()
	topics := commitTopics(sc.partitions(), sc.rnd)
	p := PartitionFor(g, twinPartitions)
	sc.both("commit", func(w *offsetsTwin) string {
		req := CommitRequest{Group: g, Version: 8, Generation: -1, Topics: topics}
		if pid != nil {
			guard, _, err := w.store.StartTxnWrite(p, *pid, 0)
			require.NoError(sc.t, err)
			req.Producer = &TxnProducer{ID: *pid, Epoch: 0, Guard: guard}
		}
		return fmt.Sprint(commitErrs(w.c.CommitOffsets(req)))
	})
	if pid != nil {
		if sc.open[*pid] == nil {
			sc.open[*pid] = map[int32]bool{}
		}
		sc.open[*pid][p] = true
	}
}

// endTxn writes producer pid's markers to every partition of its
// transaction, as the transaction coordinator does.
func (sc *offsetsScenario) endTxn(pid int64, commit bool) {
	for _, p := range slices.Sorted(maps.Keys(sc.open[pid])) {
		sc.both("marker", func(w *offsetsTwin) string {
			return errText(get(sc.t, w.c.CompleteTransaction(p, coord.Marker{ProducerID: pid, Commit: commit})))
		})
	}
	delete(sc.open, pid)
}

// classicLifecycle joins one member to g (a classic group), syncs, commits
// with its generation and leaves: GroupMetadata records, later a
// tombstone when the sweep removes the empty group.
func (sc *offsetsScenario) classicLifecycle(g string) {
	joins := map[*offsetsTwin]*Reply[JoinResult]{}
	for _, w := range []*offsetsTwin{sc.full, sc.cmp} {
		joins[w] = w.c.JoinGroup(JoinRequest{Group: g, Version: 3, ClientID: "c", ClientHost: "/127.0.0.1",
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second, ProtocolType: "consumer",
			Protocols: []Protocol{{Name: "range", Metadata: []byte("sub")}}})
	}
	sc.advance(4 * time.Second) // the initial rebalance delay
	topics := commitTopics(sc.partitions(), sc.rnd)
	sc.both("classic member", func(w *offsetsTwin) string {
		j := get(sc.t, joins[w])
		if j.Err != nil {
			return "join: " + j.Err.Error()
		}
		s := get(sc.t, w.c.SyncGroup(SyncRequest{Group: g, Generation: j.Generation, MemberID: j.MemberID,
			Assignments: map[string][]byte{j.MemberID: []byte("all")}}))
		errs := commitErrs(w.c.CommitOffsets(CommitRequest{Group: g, Version: 8, Generation: j.Generation,
			MemberID: j.MemberID, Topics: topics}))
		l := get(sc.t, w.c.LeaveGroup(g, []LeaveMember{{MemberID: j.MemberID}}))
		return fmt.Sprint(j.Generation, errText(s.Err), errs, errText(l.Err))
	})
	sc.advance(time.Minute) // the rebalance without members completes
}

// advance moves the clock and ticks both coordinators (timeouts, offset
// expiry).
func (sc *offsetsScenario) advance(d time.Duration) {
	now := sc.clk.add(d)
	sc.full.c.Tick(now)
	sc.cmp.c.Tick(now)
}

// toggleTopicU deletes topic u (its offsets get tombstones) or creates it
// again with a new topic id.
func (sc *offsetsScenario) toggleTopicU() {
	if sc.uDeleted {
		sc.uDeleted = false
		sc.uGen++
	} else {
		sc.uDeleted = true
	}
	for _, w := range []*offsetsTwin{sc.full, sc.cmp} {
		w.c.SetTopics(sc.topics())
		if sc.uDeleted {
			w.c.TopicDeleted("u")
		}
	}
}

// restartAndCompare restarts both twins from their logs and compares
// their states with each other and with the state before.
func (sc *offsetsScenario) restartAndCompare() {
	sc.both("state before the restart", func(w *offsetsTwin) string { return w.dump(false) })
	beforeOffsets := sc.full.dump(true)
	sc.compared += strings.Count(beforeOffsets, "\n")
	sc.full, sc.cmp = sc.full.restart(sc.topics()), sc.cmp.restart(sc.topics())
	sc.restarts++
	full, cmp := sc.full.dump(false), sc.cmp.dump(false)
	require.Equal(sc.t, full, cmp, "the compacted log replays to another state than the whole history")
	require.Equal(sc.t, beforeOffsets, sc.cmp.dump(true), "the replay lost or resurrected offsets")
}
