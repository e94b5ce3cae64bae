package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/internal/testbroker"
)

// killPoint is a moment of the cleaner's work to SIGKILL the broker at:
// an event of the partition directory that one step of the swap protocol
// makes (engine/log/cleaner.go), or a random moment (match nil).
type killPoint struct {
	name  string
	match func(dirEvent) bool
}

func onEvent(mask uint32, pred func(string) bool) func(dirEvent) bool {
	return func(e dirEvent) bool { return e.mask&mask != 0 && pred(e.name) }
}

func suffix(s string) func(string) bool {
	return func(n string) bool { return strings.HasSuffix(n, s) }
}
func named(s string) func(string) bool { return func(n string) bool { return n == s } }

// killPoints walk the swap in order: the cleaned copy being written, its
// indexes, the manifest, the renames to .swap (the .log's is the commit
// point), the replaced segments set aside (.deleted), the renames to the
// final names, the manifest's removal, the replaced segments' removal
// (after the swap, a few MiB at a time), and the cleaner checkpoint
// written after a pass.
var killPoints = []killPoint{
	{"writing .log.cleaned", onEvent(syscall.IN_CREATE, suffix(".log.cleaned"))},
	{"writing .timeindex.cleaned", onEvent(syscall.IN_CREATE, suffix(".timeindex.cleaned"))},
	{"manifest in place", onEvent(syscall.IN_MOVED_TO, named("cleaner-swap"))},
	{"renamed .index.cleaned to .swap", onEvent(syscall.IN_MOVED_TO, suffix(".index.swap"))},
	{"renamed .log.cleaned to .swap (commit)", onEvent(syscall.IN_MOVED_TO, suffix(".log.swap"))},
	{"setting a replaced segment aside", onEvent(syscall.IN_MOVED_TO, suffix(".log.deleted"))},
	{"renaming .swap to the final name", onEvent(syscall.IN_MOVED_FROM, suffix(".swap"))},
	{"removing the manifest", onEvent(syscall.IN_DELETE, named("cleaner-swap"))},
	{"removing a replaced segment", onEvent(syscall.IN_DELETE, suffix(".log.deleted"))},
	{"cleaner checkpoint moved", onEvent(syscall.IN_MOVED_TO, named("cleaner-offset-checkpoint"))},
	{"any moment", nil},
}

// swapState names what a SIGKILL left of a swap in a partition directory,
// by the files of the protocol present: the manifest (cleaner-swap, "base
// end has-txnindex"), the cleaned copy (.cleaned), the renamed copy
// (.swap; the .log's rename is the commit point), the group's old
// segments after its first, and the replaced files set aside (.deleted).
func swapState(t *testing.T, dir string) string {
	t.Helper()
	var manifest, manifestTmp, logCleaned, cleaned, logSwap, otherSwap, deleted bool
	for _, n := range cleanerLeftovers(t, dir) {
		switch {
		case strings.HasSuffix(n, ".deleted"):
			deleted = true
		case n == "cleaner-swap":
			manifest = true
		case strings.HasPrefix(n, "cleaner-swap"):
			manifestTmp = true
		case strings.HasSuffix(n, ".log.cleaned"):
			logCleaned, cleaned = true, true
		case strings.HasSuffix(n, ".cleaned"):
			cleaned = true
		case strings.HasSuffix(n, ".log.swap"):
			logSwap = true
		default:
			otherSwap = true
		}
	}
	oldSegments := false
	if manifest {
		b, err := os.ReadFile(filepath.Join(dir, "cleaner-swap"))
		require.NoError(t, err)
		var version, base, end, txn int64
		_, err = fmt.Sscanf(string(b), "%d\n%d %d %d", &version, &base, &end, &txn)
		require.NoError(t, err, "cleaner-swap: %q", b)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			if b, ext, ok := segmentName(e.Name()); ok && ext == ".log" && b > base && b < end {
				oldSegments = true
			}
		}
	}
	switch {
	case logSwap && oldSegments:
		return "committed: setting the group's old segments aside"
	case logSwap && otherSwap:
		return "committed: .swap files not all renamed to their final names yet"
	case logSwap:
		return "committed: indexes in place, .log.swap not renamed yet"
	case manifest && logCleaned && otherSwap:
		return "renaming .cleaned to .swap, before the commit"
	case manifest && logCleaned:
		return "manifest written, nothing renamed"
	case manifest && !cleaned && !otherSwap:
		return "swap done, manifest not removed yet"
	case deleted && !manifest && !cleaned && !otherSwap:
		return "swap done, removing the replaced segments"
	case manifest:
		return "manifest with a partial set of files (recovery discards them)"
	case manifestTmp:
		return "writing the manifest"
	case cleaned || otherSwap:
		return "writing .cleaned files"
	}
	return "no swap in progress"
}

// cleanerCheckpoint reads a partition's cleaner-offset-checkpoint (the
// offset its log is cleaned up to; 0 when there is none).
func cleanerCheckpoint(t *testing.T, dir string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cleaner-offset-checkpoint"))
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	lines := strings.Fields(string(b))
	require.Len(t, lines, 2, "cleaner-offset-checkpoint: %q", b)
	off, err := strconv.ParseInt(lines[1], 10, 64)
	require.NoError(t, err)
	return off
}

// envInt reads a positive integer knob of a long test from the environment.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// produceKV writes keyed records to partition 0 of topic at about rate
// records a second until stopped: keys drawn from keys of them, one write in
// twenty a tombstone, each in h, compressed with a random codec. stop ends the writes and closes the client:
// with flush, once every record was answered; without, at once, failing
// whatever was not acknowledged (after a SIGKILL).
func produceKV(t *testing.T, addr, topic string, h *kvHistory, rng *rand.Rand, keys, rate int) (stop func(flush bool)) {
	t.Helper()
	// A codec drawn for each producer: the cleaner decompresses,
	// filters and recompresses every codec's batches.
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(),
		kgo.Lz4Compression(), kgo.ZstdCompression()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(10*time.Second),
		kgo.ProducerBatchCompression(codecs[rng.IntN(len(codecs))]))
	require.NoError(t, err)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// One goroutine, so the records of the partition are appended in
		// the order of their seq (the idempotent producer keeps it). A
		// burst every 20 ms leaves a reader at the end of the partition
		// time to see it (kcat -e stops at a fetch that finds nothing new).
		const tick = 20 * time.Millisecond
		per := max(1, rate*int(tick)/int(time.Second))
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			for i := 0; i < per; i++ {
				key := fmt.Sprintf("k%d", rng.IntN(keys))
				cl.Produce(context.Background(), h.next(key, rng.IntN(20) == 0), h.ack)
			}
			select {
			case <-done:
				return
			case <-tk.C:
			}
		}
	}()
	return func(flush bool) {
		close(done)
		wg.Wait()
		if flush {
			require.NoError(t, cl.Flush(ctxT(t, 30*time.Second)))
		}
		cl.Close()
	}
}

// checkCompacted checks one read_uncommitted read of a whole compacted
// partition, taken with no cleaning running, against the history of its
// writes (a transaction that a kill interrupted has an unknown outcome:
// txnOpen):
//   - offsets strictly increase, and so do the seqs of the writes outside
//     transactions (one producer's: order kept, nothing moved);
//   - every record is a write, unchanged, at its acknowledged offset;
//   - below the cleaner checkpoint each key appears at most once and no
//     aborted record is left (that part was cleaned: the swaps that cleaned
//     it are all in);
//   - the last record read of every key, aborted ones aside, is its latest
//     acknowledged (and, in a transaction, committed) write or a later one
//     (which may have been written without its acknowledgement coming
//     back): no acknowledged latest value is lost;
//   - a key with nothing read had, as its latest write that may be in the
//     log, a tombstone written at least deleteRetention ago (only then may
//     a cleaning remove it).
func checkCompacted(writes []kvWrite, recs []readRec, cleanedTo int64, now time.Time, deleteRetention time.Duration) error {
	if err := checkOffsetsIncrease(recs); err != nil {
		return err
	}
	below := map[string]int64{}
	last := map[string]int{}
	prev := -1 // the last write outside transactions read
	for _, r := range recs {
		if err := r.match(writes); err != nil {
			return err
		}
		w := writes[r.seq]
		if w.txn == notTransactional {
			if prev >= 0 && r.seq <= prev {
				return fmt.Errorf("offset %d (seq %d) after offset %d (seq %d): records out of write order", r.offset, r.seq, writes[prev].offset, prev)
			}
			prev = r.seq
		}
		if r.offset < cleanedTo {
			if at, dup := below[r.key]; dup {
				return fmt.Errorf("key %s at offsets %d and %d, both below the cleaner checkpoint %d", r.key, at, r.offset, cleanedTo)
			}
			below[r.key] = r.offset
			if w.txn == txnAborted {
				return fmt.Errorf("offset %d: seq %d of an aborted transaction, below the cleaner checkpoint %d", r.offset, r.seq, cleanedTo)
			}
		}
		if w.txn != txnAborted {
			last[r.key] = r.seq
		}
	}
	latestAcked := map[string]int{}
	for seq, w := range writes {
		if w.acked && (w.txn == notTransactional || w.txn == txnCommitted) {
			latestAcked[w.key] = seq
		}
	}
	for key, acked := range latestAcked {
		if seq, ok := last[key]; ok {
			if seq < acked {
				return fmt.Errorf("key %s: acknowledged write seq %d (offset %d) lost: the last record of the key read is seq %d", key, acked, writes[acked].offset, seq)
			}
			continue
		}
		gone := false
		for seq := acked; seq < len(writes) && !gone; seq++ {
			w := writes[seq]
			gone = w.key == key && w.tombstone && w.txn != txnAborted && !now.Before(w.sent.Add(deleteRetention))
		}
		if !gone {
			return fmt.Errorf("key %s: nothing read, but its acknowledged write seq %d (offset %d, tombstone %v) is not a tombstone past delete.retention.ms, nor followed by one",
				key, acked, writes[acked].offset, writes[acked].tombstone)
		}
	}
	return nil
}

// TestCompactionSurvivesSIGKILL kills a real broker with SIGKILL while its
// log cleaner compacts a topic that a producer and a transactional producer
// (some transactions aborted) keep writing, at every step
// of the cleaner's segment swap in turn (an inotify watch of the partition
// directory fires the kill at the step's rename, creation or removal) and
// at random moments, restarting it on the same data each time. After every
// kill the broker restarts with the cleaner off and the whole partition is
// checked: it opens ready with no damage reported and no cleaner file left,
// its segments are valid and do not overlap, and a franz-go read from the
// start has the latest acknowledged value of every key, in write order, at
// the offsets acknowledged, nothing never written, and the cleaned part
// deduplicated. Then it restarts with the cleaner on for the next round.
//
// MOONMQ_COMPACTION_KILLS sets the number of kills (make compaction-crash
// KILLS=60), MOONMQ_COMPACTION_SEED replays the choices of a run.
func TestCompactionSurvivesSIGKILL(t *testing.T) {
	kills := envInt(t, "MOONMQ_COMPACTION_KILLS", 4)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("MOONMQ_COMPACTION_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "MOONMQ_COMPACTION_SEED")
	}
	t.Logf("seed %d (MOONMQ_COMPACTION_SEED replays the kill points)", seed)
	rng := rand.New(rand.NewPCG(seed, 16))

	const (
		topic = "kv"
		keys  = 2500
		rate  = 4000
		// deleteRetention is short, so tombstones are removed too, across kills.
		deleteRetention = time.Second
	)
	// The cleaner looks for work every 10 ms, and its 64 KiB key map (1,843
	// keys) makes a cleaning of 2,500 keys take several passes.
	cleanerOn := []string{"--log-cleaner-backoff", "10ms", "--log-cleaner-dedupe-buffer-size", "65536", "--transaction-state-partitions", "1"}
	cleanerOff := []string{"--log-cleaner-threads", "0", "--transaction-state-partitions", "1"}
	b := testbroker.Start(t, cleanerOn...)
	_, adm := newClient(t, b.Addr)
	createCompactedTopic(t, adm, topic, map[string]string{"segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
		"min.compaction.lag.ms": "0", "delete.retention.ms": strconv.FormatInt(deleteRetention.Milliseconds(), 10)})
	dir := filepath.Join(b.DataDir, topic+"-0")
	h := newKVHistory()

	states, points := map[string]int{}, map[string]int{}
	var txns txnCounts
	var lastRead []readRec
	start := time.Now()
	for k := 0; k < kills; k++ {
		point := killPoints[rng.IntN(len(killPoints))]
		skip := rng.IntN(3) // which occurrence of the event
		warmup := time.Duration(200+rng.IntN(800)) * time.Millisecond
		var delay time.Duration // after the event: right at it, or a little later
		if rng.IntN(2) == 0 {
			delay = time.Duration(rng.IntN(2000)) * time.Microsecond
		}
		if point.match == nil {
			delay = time.Duration(rng.IntN(2000)) * time.Millisecond
		}

		stop := produceKV(t, b.Addr, topic, h, rand.New(rand.NewPCG(rng.Uint64(), 1)), keys, rate)
		// The same transactional id each round: its new producer fences
		// the one the kill interrupted, whose open transaction the
		// coordinator (loaded from a __transaction_state compacted across
		// kills too) then aborts.
		stopTxns := produceTxns(t, b.Addr, topic, "compaction-kills", h, rand.New(rand.NewPCG(rng.Uint64(), 2)))
		warm := time.NewTimer(warmup)
		<-warm.C // lets data and cleanings pile up: the kill lands at a different log each round
		reached := killAt(t, b, dir, point, skip, delay)
		stop(false)
		tc, _ := stopTxns(true) // failures are the kill's
		txns.committed += tc.committed
		txns.aborted += tc.aborted
		state := swapState(t, dir)
		for _, n := range cleanerLeftovers(t, dir) {
			if strings.Contains(n, ".txnindex.") {
				states["  (with a cleaned .txnindex among them)"]++
				break
			}
		}
		cleanedTo := cleanerCheckpoint(t, dir)
		how := point.name
		if !reached {
			how += " (not reached: killed at the deadline)"
		}
		points[how]++
		states[state]++
		t.Logf("kill %d at %s (+%v): %s; cleaner checkpoint %d", k+1, how, delay, state, cleanedTo)

		b.Args = cleanerOff
		b.Restart()
		lastRead = verifyCompacted(t, b, topic, dir, h, cleanedTo, deleteRetention)
		require.NoError(t, b.Stop())
		b.Args = cleanerOn
		b.Restart()
	}

	writes := h.snapshot()
	acked := 0
	for _, w := range writes {
		if w.acked {
			acked++
		}
	}
	require.Less(t, len(lastRead), acked/2, "the cleaner removed superseded records")
	require.Positive(t, txns.committed+txns.aborted, "transactions ended")
	t.Logf("%d kills in %v: %d writes, %d acknowledged, %d failed, %d transactions committed and %d aborted; the last read had %d records",
		kills, time.Since(start).Round(time.Millisecond), len(writes), acked, h.failed(), txns.committed, txns.aborted, len(lastRead))
	t.Logf("kill points:\n%s", counts(points))
	t.Logf("states the kills left:\n%s", counts(states))
}

// killAt SIGKILLs b when the watch of dir sees point's event for the
// skip+1-th time, delay after it (or delay after now for a random
// point), and waits for the process to die. It reports whether the event
// was seen: a point not reached within the deadline is killed then.
func killAt(t *testing.T, b *testbroker.Broker, dir string, point killPoint, skip int, delay time.Duration) bool {
	t.Helper()
	w := watchDir(t, dir)
	hit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			evs, err := w.read(buf)
			if err != nil {
				return // closed
			}
			for _, e := range evs {
				if point.match == nil || !point.match(e) {
					continue
				}
				if skip > 0 {
					skip--
					continue
				}
				if delay > 0 {
					time.Sleep(delay) // a kill point, not a wait for state
				}
				// Through the process handle (a pidfd): never another
				// process that took the pid of one that died meanwhile.
				_ = b.Signal(syscall.SIGKILL)
				close(hit)
				return
			}
		}
	}()
	deadline := 10 * time.Second
	if point.match == nil {
		deadline = delay
	}
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	reached := point.match == nil
	select {
	case <-hit:
		reached = true
	case <-timer.C:
	}
	require.NoError(t, w.Close())
	<-done // no signal is sent after this: Kill reaps the process
	b.Kill()
	return reached
}

// verifyCompacted checks the partition of a broker just restarted after a
// SIGKILL, with its cleaner off (nothing changes the files meanwhile), and
// returns what it read.
func verifyCompacted(t *testing.T, b *testbroker.Broker, topic, dir string, h *kvHistory, cleanedTo int64, deleteRetention time.Duration) []readRec {
	t.Helper()
	code, body := brokerGet(t, b, "/readyz")
	require.Equal(t, 200, code, body)
	for _, tp := range stats(t, b).Topics {
		if tp.Name == topic {
			require.Empty(t, tp.Partitions[0].CorruptRanges, "damage reported after the kill")
			require.Empty(t, tp.Partitions[0].Error)
		}
	}
	// One acknowledged write marks the end to read to.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	r := h.next("k0", false)
	res := cl.ProduceSync(ctxT(t, 10*time.Second), r)
	h.ack(r, res.FirstErr())
	cl.Close()
	require.NoError(t, res.FirstErr())

	segs := checkSegments(t, dir)
	now := time.Now()
	recs := readPartition(t, b.Addr, topic, r.Offset, 30*time.Second)
	require.NoError(t, checkCompacted(h.snapshot(), recs, cleanedTo, now, deleteRetention))
	_, adm := newClient(t, b.Addr)
	t.Logf("  after restart: %d segments (%d with aborted transactions), %d batches, %d records read up to offset %d (last stable offset %d)",
		segs.segments, segs.txnIndexes, segs.batches, len(recs), r.Offset, lastStable(t, adm, topic))
	return recs
}

// counts renders a tally, largest first.
func counts(m map[string]int) string {
	type kv struct {
		k string
		n int
	}
	var l []kv
	for k, n := range m {
		l = append(l, kv{k, n})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].n > l[j].n || l[i].n == l[j].n && l[i].k < l[j].k })
	var sb strings.Builder
	for _, e := range l {
		fmt.Fprintf(&sb, "  %4d  %s\n", e.n, e.k)
	}
	return sb.String()
}
