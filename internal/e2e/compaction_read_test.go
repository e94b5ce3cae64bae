package e2e

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/internal/testbroker"
)

// compactedRead is one read of a compacted partition from its start, taken
// while the cleaner works on it and a producer writes to it.
type compactedRead struct {
	client    string
	committed bool // read_committed
	// hw is the high watermark when the read started (the last stable
	// offset for a read_committed reader): every key's latest record below
	// it must be seen or have been superseded.
	hw int64
	// cleanedTo is the cleaner checkpoint when the read started: the
	// swaps that cleaned the log below it were all in.
	cleanedTo int64
	// eof is where the reader said the partition ended (kcat's "Reached
	// end ... at offset"), -1 when it does not say.
	eof   int64
	recs  []readRec
	swaps int64 // cleaned segments swapped in while it read
	took  time.Duration
}

// kcatEOF is kcat's message when -e reaches the end of a partition.
var kcatEOF = regexp.MustCompile(`Reached end of topic \S+ \[0\] at offset (\d+)`)

// checkCompactedRead checks one read against the history of the writes,
// every one of them acknowledged and every transaction ended by now (byKey:
// each key's offsets, in order, aborted writes left out: they are no
// value of their key, and the cleaner removes them):
//   - offsets strictly increase within the read;
//   - every record read is a write, unchanged, at its acknowledged offset;
//   - a read_committed reader reads no record of an aborted transaction;
//   - below the cleaner checkpoint of its start no reader reads a key twice
//     or an aborted record: that part was cleaned before it started;
//   - the read ends at the high watermark it started under, or past it;
//   - of every key, the last record at or below where the read ended was
//     read, unless a later record of the key (past that end) superseded it,
//     which lets the cleaner remove it first: so every key's latest value
//     below the starting high watermark was seen or superseded.
func checkCompactedRead(writes []kvWrite, byKey map[string][]int64, rd compactedRead) error {
	if err := checkOffsetsIncrease(rd.recs); err != nil {
		return err
	}
	read := make(map[int64]bool, len(rd.recs))
	cleaned := map[string]int64{}
	end := rd.hw - 1
	for _, r := range rd.recs {
		if err := r.match(writes); err != nil {
			return err
		}
		if r.offset < rd.cleanedTo {
			if prev, dup := cleaned[r.key]; dup {
				return fmt.Errorf("key %s at offsets %d and %d, both below the cleaner checkpoint %d", r.key, prev, r.offset, rd.cleanedTo)
			}
			cleaned[r.key] = r.offset
			if writes[r.seq].txn == txnAborted {
				return fmt.Errorf("offset %d: seq %d of an aborted transaction, below the cleaner checkpoint %d", r.offset, r.seq, rd.cleanedTo)
			}
		}
		switch w := writes[r.seq]; {
		case !w.acked:
			return fmt.Errorf("offset %d: seq %d was read but its write failed", r.offset, r.seq)
		case w.txn == txnOpen:
			return fmt.Errorf("offset %d: seq %d: its transaction did not end", r.offset, r.seq)
		case w.txn == txnAborted && rd.committed:
			return fmt.Errorf("offset %d: seq %d of an aborted transaction read at read_committed", r.offset, r.seq)
		}
		read[r.offset] = true
		end = max(end, r.offset)
	}
	if rd.eof >= 0 {
		if rd.eof < rd.hw {
			return fmt.Errorf("the reader reported the end at offset %d, below the high watermark %d it started under", rd.eof, rd.hw)
		}
		end = max(end, rd.eof-1)
	}
	if n := len(rd.recs); n == 0 || rd.recs[n-1].offset < rd.hw-1 && rd.eof < 0 {
		return fmt.Errorf("the read ended before the high watermark %d it started under", rd.hw)
	}
	for key, offs := range byKey {
		if offs[0] >= rd.hw {
			continue // first written after the read started
		}
		i := sort.Search(len(offs), func(i int) bool { return offs[i] > end }) - 1
		last := offs[i]
		if !read[last] && i == len(offs)-1 {
			return fmt.Errorf("key %s: its latest record at or below offset %d, at offset %d, was not read and nothing superseded it (%d records read, high watermark %d at the start)",
				key, end, last, len(rd.recs), rd.hw)
		}
	}
	return nil
}

// TestCompactedTopicReadWhileCleaning reads a compacted partition from its
// start again and again, with franz-go and with kcat (librdkafka), each at
// read_uncommitted and read_committed (franz-go's default is the first,
// librdkafka's the second), while a producer keeps writing to it and the
// log cleaner keeps compacting it (every 10 ms, swapping cleaned segments
// in under the readers: an inotify watch of the partition directory counts
// the swaps each read overlapped). No read may fail or go back, every
// record read must be a write at its acknowledged offset, each read reaches
// the high watermark it started under, and every key's latest value below
// it is seen or superseded. A transactional producer writes to it too,
// committing two transactions in three and aborting the others: a
// read_committed reader must never see an aborted record, whether the
// cleaner has removed it yet or not. MOONMQ_COMPACTION_READ_SECONDS sets how long it
// reads (8 s, and then until each client had 3 reads with a swap under
// them).
func TestCompactedTopicReadWhileCleaning(t *testing.T) {
	readFor := time.Duration(envInt(t, "MOONMQ_COMPACTION_READ_SECONDS", 8)) * time.Second
	const (
		topic = "table"
		keys  = 2000
	)
	b := testbroker.Start(t, "--log-cleaner-backoff", "10ms", "--log-cleaner-dedupe-buffer-size", "65536",
		"--transaction-state-partitions", "1")
	_, adm := newClient(t, b.Addr)
	createCompactedTopic(t, adm, topic, map[string]string{"segment.bytes": "16384",
		"min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"})
	dir := filepath.Join(b.DataDir, topic+"-0")

	// Swaps commit with the rename of <base>.log.cleaned to .log.swap.
	var swaps atomic.Int64
	w := watchDir(t, dir)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		buf := make([]byte, 64<<10)
		for {
			evs, err := w.read(buf)
			if err != nil {
				return
			}
			for _, e := range evs {
				if e.mask&syscall.IN_MOVED_TO != 0 && strings.HasSuffix(e.name, ".log.swap") {
					swaps.Add(1)
				}
			}
		}
	}()
	defer func() { _ = w.Close(); <-watched }()

	h := newKVHistory()
	// Each producer its own generator: produceKV's goroutine draws from
	// its one while this one is still drawn from.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	kvRng, txnRng := rand.New(rand.NewPCG(rng.Uint64(), 1)), rand.New(rand.NewPCG(rng.Uint64(), 3))
	// A head start, so the first reads already span many cleaned segments.
	stop := produceKV(t, b.Addr, topic, h, kvRng, keys, 3000)
	stopTxns := produceTxns(t, b.Addr, topic, "compaction-readers", h, txnRng)
	testbroker.WaitFor(t, 30*time.Second, "10,000 records and a cleaning", func() bool {
		return highWatermark(t, adm, topic) > 10_000 && swaps.Load() > 0
	})

	clients := []struct {
		name      string
		committed bool
		read      func(hw int64) ([]readRec, int64)
	}{
		{"franz-go read_uncommitted (its default)", false, func(hw int64) ([]readRec, int64) {
			return readPartition(t, b.Addr, topic, hw-1, 30*time.Second), -1
		}},
		{"kcat read_committed (librdkafka's default)", true, func(int64) ([]readRec, int64) { return kcatRead(t, b.Addr, topic) }},
		{"franz-go read_committed", true, func(hw int64) ([]readRec, int64) {
			return readPartition(t, b.Addr, topic, hw-1, 30*time.Second, kgo.FetchIsolationLevel(kgo.ReadCommitted())), -1
		}},
		{"kcat read_uncommitted", false, func(int64) ([]readRec, int64) {
			return kcatRead(t, b.Addr, topic, "-X", "isolation.level=read_uncommitted")
		}},
	}
	// Reads go on for readFor, and then until every client had a few reads
	// with a swap under them (a slow machine reads less often, but each read
	// is longer), within a hard deadline.
	const overlapsWanted = 3
	var reads []compactedRead
	overlaps := map[string]int{}
	enough := func() bool {
		for _, c := range clients {
			if overlaps[c.name] < overlapsWanted {
				return false
			}
		}
		return true
	}
	cleanings0 := stats(t, b).Cleaner.Cleanings
	start := time.Now()
	for i := 0; time.Since(start) < readFor || !enough(); i++ {
		require.Less(t, time.Since(start), readFor+time.Minute, "reads with a swap under them: %v", overlaps)
		c := clients[i%len(clients)]
		hw := highWatermark(t, adm, topic)
		if c.committed {
			hw = lastStable(t, adm, topic)
		}
		cleanedTo := cleanerCheckpoint(t, dir)
		s0, t0 := swaps.Load(), time.Now()
		recs, eof := c.read(hw)
		rd := compactedRead{client: c.name, committed: c.committed, hw: hw, cleanedTo: cleanedTo, eof: eof, recs: recs,
			swaps: swaps.Load() - s0, took: time.Since(t0)}
		if rd.swaps > 0 {
			overlaps[c.name]++
		}
		reads = append(reads, rd)
	}
	cleanings := stats(t, b).Cleaner.Cleanings - cleanings0
	stop(true)
	txns, err := stopTxns(false)
	require.NoError(t, err, "transactional producer")
	require.Zero(t, h.failed(), "every write is acknowledged")

	writes := h.snapshot()
	byKey := map[string][]int64{}
	for _, w := range writes {
		if w.txn != txnAborted {
			byKey[w.key] = append(byKey[w.key], w.offset)
		}
	}
	for _, offs := range byKey {
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	}
	type tally struct {
		reads, overlapped int
		swaps, records    int64
		aborted           int64 // aborted records read (at read_uncommitted, before the cleaner removed them)
		took              time.Duration
	}
	per := map[string]*tally{}
	for i, rd := range reads {
		require.NoError(t, checkCompactedRead(writes, byKey, rd), "read %d by %s", i, rd.client)
		tl := per[rd.client]
		if tl == nil {
			tl = &tally{}
			per[rd.client] = tl
		}
		tl.reads++
		tl.swaps += rd.swaps
		tl.records += int64(len(rd.recs))
		tl.took += rd.took
		for _, r := range rd.recs {
			if writes[r.seq].txn == txnAborted {
				tl.aborted++
			}
		}
		if rd.swaps > 0 {
			tl.overlapped++
		}
	}
	t.Logf("%d writes (%d transactions, %d aborted), %d cleanings and %d swaps during %d reads:",
		len(writes), txns.committed+txns.aborted, txns.aborted, cleanings, swaps.Load(), len(reads))
	for _, c := range clients {
		tl := per[c.name]
		t.Logf("  %-45s %3d reads, %3d with a swap under them (%d swaps), %6d records a read (%d aborted in all), %v a read",
			c.name, tl.reads, tl.overlapped, tl.swaps, tl.records/int64(tl.reads), tl.aborted,
			(tl.took / time.Duration(tl.reads)).Round(time.Millisecond))
	}
	require.Positive(t, txns.aborted, "transactions were aborted")
}

// kcatRead reads partition 0 of topic from the beginning to its end (-e)
// with kcat and extra args, and returns the records and where kcat said
// the partition ended. Any error kcat or librdkafka reports fails the test.
//
// librdkafka reports the end only on a fetch answered with nothing new,
// and a fetch at the end waits up to fetch.wait.max.ms (500 ms) for new
// records: against a producer writing more often than that it would chase
// the end for ever (so would it against Kafka). 2 ms lets it stop between
// two of the producer's bursts.
func kcatRead(t *testing.T, addr, topic string, extra ...string) ([]readRec, int64) {
	t.Helper()
	args := append([]string{"-b", addr, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-Z", "-f", kcatFormat,
		"-X", "fetch.wait.max.ms=2"}, extra...)
	out, errOut := testbroker.KcatStreams(t, "", args...)
	for _, line := range strings.Split(errOut, "\n") {
		require.False(t, strings.Contains(line, "ERROR") || strings.HasPrefix(line, "%3|"), "kcat reported: %s", line)
	}
	m := kcatEOF.FindStringSubmatch(errOut)
	require.NotNil(t, m, "kcat did not reach the end of the partition: %s", errOut)
	eof, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	recs, err := fromKcat(out)
	require.NoError(t, err)
	return recs, eof
}
