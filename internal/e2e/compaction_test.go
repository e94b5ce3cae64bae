package e2e

// Helpers of the compaction tests (compaction_crash_test.go,
// compaction_read_test.go): a history of keyed writes whose records
// identify themselves, a reader of a compacted partition, a file-level
// check of its segments, and an inotify watch of its directory.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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
	"unsafe"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createCompactedTopic creates a one-partition topic with
// cleanup.policy=compact and the given configs on top.
func createCompactedTopic(t *testing.T, adm *kadm.Client, name string, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	createTopic(t, adm, name, 1, cfg)
}

// kvWrite is one record a producer handed to its client.
type kvWrite struct {
	key       string
	tombstone bool
	txn       txnOutcome
	sent      time.Time
	acked     bool
	offset    int64 // when acked
}

// txnOutcome is what became of a write's transaction.
type txnOutcome int8

const (
	notTransactional txnOutcome = iota
	txnOpen
	txnCommitted
	txnAborted
)

// kvHistory records every write to a compacted topic, acknowledged or not.
// A record names itself: its "seq" header is its index here (a tombstone
// has no value to carry it) and its value is kvValue(key, seq), so a read
// record is matched with the write it came from exactly, and a record that
// was never written is recognised.
type kvHistory struct {
	mu     sync.Mutex
	writes []kvWrite
	byOff  map[int64]int // acknowledged offset -> seq
	errs   int           // writes whose produce failed
}

func newKVHistory() *kvHistory { return &kvHistory{byOff: map[int64]int{}} }

// kvValue is the value of write seq of key: the key and seq, padded to a
// length that varies with seq (so batches and segments vary too).
func kvValue(key string, seq int) []byte {
	return fmt.Appendf(nil, "%s:%d:%s", key, seq, strings.Repeat("v", 40+seq%120))
}

// next returns the record of a new write of key (a tombstone when
// tombstone), registered as sent.
func (h *kvHistory) next(key string, tombstone bool) *kgo.Record {
	return h.add(kvWrite{key: key, tombstone: tombstone})
}

// nextInTxn is next for a write in an open transaction (endTxn ends it).
func (h *kvHistory) nextInTxn(key string, tombstone bool) *kgo.Record {
	return h.add(kvWrite{key: key, tombstone: tombstone, txn: txnOpen})
}

// endTxn records the outcome of the transaction of the writes of seqs.
func (h *kvHistory) endTxn(seqs []int, committed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, seq := range seqs {
		h.writes[seq].txn = txnAborted
		if committed {
			h.writes[seq].txn = txnCommitted
		}
	}
}

func (h *kvHistory) add(w kvWrite) *kgo.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	seq := len(h.writes)
	w.sent = time.Now()
	h.writes = append(h.writes, w)
	key, tombstone := w.key, w.tombstone
	r := &kgo.Record{Key: []byte(key), Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(seq))}}}
	if !tombstone {
		r.Value = kvValue(key, seq)
	}
	return r
}

// seqOf is the seq of a record next made.
func seqOf(r *kgo.Record) int {
	seq, err := strconv.Atoi(string(r.Headers[0].Value))
	if err != nil {
		panic(fmt.Sprintf("a record this history did not make: %q", r.Headers[0].Value))
	}
	return seq
}

// ack is the produce promise: it records the acknowledgement and offset.
func (h *kvHistory) ack(r *kgo.Record, err error) {
	seq := seqOf(r)
	h.mu.Lock()
	defer h.mu.Unlock()
	if seq < 0 || seq >= len(h.writes) {
		panic(fmt.Sprintf("ack of a record this history did not send: %q", r.Headers[0].Value))
	}
	if err != nil {
		h.errs++
		return
	}
	w := &h.writes[seq]
	w.acked, w.offset = true, r.Offset
	h.byOff[r.Offset] = seq
}

// failed is how many writes failed.
func (h *kvHistory) failed() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.errs
}

// snapshot copies the writes so far.
func (h *kvHistory) snapshot() []kvWrite {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]kvWrite(nil), h.writes...)
}

// readRec is one record read back, by franz-go or kcat.
type readRec struct {
	offset    int64
	key       string
	seq       int
	tombstone bool
	value     string
}

// match checks r against the write it names: it must exist, with the
// same key, kind and value.
func (r readRec) match(writes []kvWrite) error {
	if r.seq < 0 || r.seq >= len(writes) {
		return fmt.Errorf("offset %d: record with seq %d was never produced (%d writes)", r.offset, r.seq, len(writes))
	}
	w := writes[r.seq]
	switch {
	case w.key != r.key:
		return fmt.Errorf("offset %d: seq %d has key %q, write %d had key %q", r.offset, r.seq, r.key, r.seq, w.key)
	case w.tombstone != r.tombstone:
		return fmt.Errorf("offset %d: seq %d: tombstone %v, written as tombstone %v", r.offset, r.seq, r.tombstone, w.tombstone)
	case !r.tombstone && r.value != string(kvValue(w.key, r.seq)):
		return fmt.Errorf("offset %d: seq %d: value %.40q... was never produced", r.offset, r.seq, r.value)
	case w.acked && w.offset != r.offset:
		return fmt.Errorf("seq %d was acknowledged at offset %d, read at %d", r.seq, w.offset, r.offset)
	}
	return nil
}

func fromKgo(r *kgo.Record) (readRec, error) {
	out := readRec{offset: r.Offset, key: string(r.Key), tombstone: r.Value == nil, value: string(r.Value), seq: -1}
	for _, h := range r.Headers {
		if h.Key == "seq" {
			seq, err := strconv.Atoi(string(h.Value))
			if err != nil {
				return out, fmt.Errorf("offset %d: bad seq header %q", r.Offset, h.Value)
			}
			out.seq = seq
		}
	}
	if out.seq < 0 {
		return out, fmt.Errorf("offset %d: record without a seq header", r.Offset)
	}
	return out, nil
}

// kcatFormat prints what fromKcat parses (with -Z, a null value is NULL).
const kcatFormat = "%o\t%k\t%h\t%s\n"

func fromKcat(out string) ([]readRec, error) {
	var recs []readRec
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("kcat line %q: want 4 tab-separated fields", line)
		}
		off, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("kcat line %q: offset: %v", line, err)
		}
		seq, err := strconv.Atoi(strings.TrimPrefix(f[2], "seq="))
		if err != nil || !strings.HasPrefix(f[2], "seq=") {
			return nil, fmt.Errorf("kcat line %q: headers %q: want seq=N", line, f[2])
		}
		r := readRec{offset: off, key: f[1], seq: seq, value: f[3], tombstone: f[3] == "NULL"}
		if r.tombstone {
			r.value = ""
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// readPartition reads partition 0 of topic from its start with franz-go
// until it has returned a record at or past until, and returns every
// record it got, in the order it got them. A fetch error fails the test.
func readPartition(t *testing.T, addr, topic string, until int64, timeout time.Duration, opts ...kgo.Opt) []readRec {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})}, opts...)...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []readRec
	for len(out) == 0 || out[len(out)-1].offset < until {
		fs := cl.PollFetches(ctx)
		last := int64(-1)
		if len(out) > 0 {
			last = out[len(out)-1].offset
		}
		require.NoError(t, ctx.Err(), "reading %s up to offset %d: got to %d", topic, until, last)
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			rec, err := fromKgo(r)
			require.NoError(t, err)
			out = append(out, rec)
		})
	}
	return out
}

// highWatermark is partition 0's end offset (ListOffsets latest).
func highWatermark(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctxT(t, 10*time.Second), topic)
	return endOffset(t, ends, err, topic)
}

// lastStable is partition 0's last stable offset (ListOffsets latest at
// read_committed): where read_committed readers end.
func lastStable(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ends, err := adm.ListCommittedOffsets(ctxT(t, 10*time.Second), topic)
	return endOffset(t, ends, err, topic)
}

func endOffset(t *testing.T, ends kadm.ListedOffsets, err error, topic string) int64 {
	t.Helper()
	require.NoError(t, err)
	o, ok := ends.Lookup(topic, 0)
	require.True(t, ok)
	require.NoError(t, o.Err)
	return o.Offset
}

// checkOffsetsIncrease: offsets strictly increase within one read.
func checkOffsetsIncrease(recs []readRec) error {
	for i := 1; i < len(recs); i++ {
		if recs[i].offset <= recs[i-1].offset {
			return fmt.Errorf("offset %d read after offset %d", recs[i].offset, recs[i-1].offset)
		}
	}
	return nil
}

// segmentName parses "<20 digits>.<ext>", a segment's file name.
func segmentName(name string) (base int64, ext string, ok bool) {
	i := strings.IndexByte(name, '.')
	if i != 20 {
		return 0, "", false
	}
	b, err := strconv.ParseInt(name[:i], 10, 64)
	return b, name[i:], err == nil
}

// cleanerLeftovers are the cleaner's files in a partition directory: its
// output (.cleaned), a swap in progress (.swap), the files a swap replaced
// until they are removed (.deleted) and the swap manifest
// (engine/log/cleaner.go's protocol).
func cleanerLeftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, ".cleaned") || strings.HasSuffix(n, ".swap") || strings.HasSuffix(n, ".deleted") ||
			strings.HasPrefix(n, "cleaner-swap") {
			out = append(out, n)
		}
	}
	return out
}

// segmentCheck is what checkSegments found.
type segmentCheck struct {
	segments, batches, records int
	txnIndexes                 int // segments with aborted transactions
	bytes                      int64
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkSegments reads a partition directory's files as an outside tool
// would, with the broker idle: every index file has its segment, no
// cleaner file is left, and the segments hold valid v2 batches (framing,
// CRC-32C) whose offsets lie within their segment and strictly increase
// across the whole log: no two generations of a segment mixed.
func checkSegments(t *testing.T, dir string) segmentCheck {
	t.Helper()
	require.Empty(t, cleanerLeftovers(t, dir), "cleaner files left in %s", dir)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	logs := map[int64]bool{}
	var bases []int64
	for _, e := range entries {
		if b, ext, ok := segmentName(e.Name()); ok && ext == ".log" {
			logs[b] = true
			bases = append(bases, b)
		}
	}
	for _, e := range entries {
		if b, ext, ok := segmentName(e.Name()); ok && (ext == ".index" || ext == ".timeindex" || ext == ".txnindex") {
			require.True(t, logs[b], "%s has no segment", e.Name())
		}
	}
	var c segmentCheck
	for _, e := range entries {
		if _, ext, ok := segmentName(e.Name()); ok && ext == ".txnindex" {
			c.txnIndexes++
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	prevLast := int64(-1)
	for i, base := range bases {
		name := fmt.Sprintf("%020d.log", base)
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		c.segments++
		c.bytes += int64(len(data))
		for p := 0; p < len(data); {
			require.GreaterOrEqual(t, len(data)-p, 61, "%s: torn batch header at %d", name, p)
			n := 12 + int(int32(binary.BigEndian.Uint32(data[p+8:])))
			require.True(t, n >= 61 && n <= len(data)-p, "%s: batch at %d has a bad length %d", name, p, n)
			raw := data[p : p+n]
			var rb kmsg.RecordBatch
			require.NoError(t, rb.ReadFrom(raw), "%s: batch at %d", name, p)
			require.Equal(t, int8(2), rb.Magic, "%s: batch at %d", name, p)
			require.Equal(t, uint32(rb.CRC), crc32.Checksum(raw[21:], castagnoli), "%s: CRC of the batch at offset %d", name, rb.FirstOffset)
			last := rb.FirstOffset + int64(rb.LastOffsetDelta)
			require.GreaterOrEqual(t, rb.FirstOffset, base, "%s: batch at offset %d below its segment", name, rb.FirstOffset)
			require.Greater(t, rb.FirstOffset, prevLast, "%s: batch at offset %d overlaps the one before (last %d)", name, rb.FirstOffset, prevLast)
			if i+1 < len(bases) {
				require.Less(t, last, bases[i+1], "%s: batch [%d, %d] runs into the next segment", name, rb.FirstOffset, last)
			}
			prevLast = last
			c.batches++
			c.records += int(rb.NumRecords)
			p += n
		}
	}
	return c
}

// dirEvent is one inotify event of a watched directory.
type dirEvent struct {
	mask uint32
	name string
}

func (e dirEvent) String() string {
	var kinds []string
	for _, k := range []struct {
		bit  uint32
		name string
	}{{syscall.IN_CREATE, "create"}, {syscall.IN_DELETE, "delete"}, {syscall.IN_MOVED_FROM, "rename-from"}, {syscall.IN_MOVED_TO, "rename-to"}} {
		if e.mask&k.bit != 0 {
			kinds = append(kinds, k.name)
		}
	}
	return strings.Join(kinds, "|") + " " + e.name
}

// dirWatch reports the creations, removals and renames in one directory
// as they happen (inotify), so a test can act at one step of a protocol
// made of renames (the cleaner's swap) that polling would rarely catch.
type dirWatch struct {
	f *os.File
}

func watchDir(t *testing.T, dir string) *dirWatch {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	require.NoError(t, err, "inotify")
	_, err = syscall.InotifyAddWatch(fd, dir, syscall.IN_CREATE|syscall.IN_DELETE|syscall.IN_MOVED_FROM|syscall.IN_MOVED_TO)
	if err != nil {
		_ = syscall.Close(fd)
		require.NoError(t, err, "inotify watch %s", dir)
	}
	// Non-blocking, so reads go through the runtime poller and Close
	// ends a read in progress.
	return &dirWatch{f: os.NewFile(uintptr(fd), "inotify "+dir)}
}

// read returns the next events, waiting for at least one; os.ErrClosed
// after Close.
func (w *dirWatch) read(buf []byte) ([]dirEvent, error) {
	n, err := w.f.Read(buf)
	if err != nil {
		return nil, err
	}
	var out []dirEvent
	for p := 0; p+syscall.SizeofInotifyEvent <= n; {
		ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[p]))
		name := buf[p+syscall.SizeofInotifyEvent : p+syscall.SizeofInotifyEvent+int(ev.Len)]
		out = append(out, dirEvent{mask: ev.Mask, name: string(bytes.TrimRight(name, "\x00"))})
		p += syscall.SizeofInotifyEvent + int(ev.Len)
	}
	if len(out) == 0 {
		return nil, errors.New("inotify: short read")
	}
	return out, nil
}

func (w *dirWatch) Close() error { return w.f.Close() }

// txnCounts are the transactions produceTxns ended.
type txnCounts struct{ committed, aborted int }

// produceTxns writes transactions of one to four records to partition 0 of
// topic every 20 ms until stopped, with transactional id txnID, over 100
// keys of their own ("t0"...), a tombstone now and then, committing two in
// three and aborting the rest, each write and its outcome in h. stop waits
// for the transaction in progress to end (abandon: cancels it, after a
// SIGKILL; its writes' outcome stays unknown, txnOpen) and returns what
// was ended and the first failure.
func produceTxns(t *testing.T, addr, topic, txnID string, h *kvHistory, rng *rand.Rand) (stop func(abandon bool) (txnCounts, error)) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.TransactionalID(txnID),
		kgo.RecordDeliveryTimeout(10*time.Second))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	result := make(chan error, 1)
	var counts txnCounts
	go func() {
		result <- func() error {
			tk := time.NewTicker(20 * time.Millisecond)
			defer tk.Stop()
			for {
				select {
				case <-done:
					return nil
				case <-tk.C:
				}
				commit, err := oneTxn(ctx, cl, h, rng)
				if err != nil {
					return err
				}
				if commit {
					counts.committed++
				} else {
					counts.aborted++
				}
			}
		}()
	}()
	return func(abandon bool) (txnCounts, error) {
		close(done)
		if abandon {
			// The broker it knew is dead (a restart listens elsewhere):
			// closing fails what it has in flight, which it would
			// otherwise retry until the delivery timeout.
			cancel()
			cl.Close()
		}
		err := <-result
		cancel()
		cl.Close()
		return counts, err
	}
}

// oneTxn writes one transaction and commits or aborts it (commit says which).
func oneTxn(ctx context.Context, cl *kgo.Client, h *kvHistory, rng *rand.Rand) (commit bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	recs := make([]*kgo.Record, 1+rng.IntN(4))
	seqs := make([]int, len(recs))
	for i := range recs {
		recs[i] = h.nextInTxn(fmt.Sprintf("t%d", rng.IntN(100)), rng.IntN(20) == 0)
		seqs[i] = seqOf(recs[i])
	}
	results := cl.ProduceSync(ctx, recs...)
	for _, r := range results {
		h.ack(r.Record, r.Err)
	}
	if err := results.FirstErr(); err != nil {
		return false, fmt.Errorf("produce in a transaction: %w", err)
	}
	commit = rng.IntN(3) != 0
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		return false, fmt.Errorf("end transaction (commit %v): %w", commit, err)
	}
	h.endTxn(seqs, commit)
	return commit, nil
}
