package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// AnyPartition as Record.Partition lets the partitioner choose: records with
// a key go to murmur2(key) % partitions (the Kafka default, so keys land
// where Java clients put them), records without a key round-robin.
const AnyPartition int32 = -1

// Header is a record header.
type Header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// Record is a record read from or written to a topic.
type Record struct {
	Topic string `json:"topic"`
	// Partition: set by reads; for Produce, the target partition or
	// AnyPartition (-1).
	Partition int32 `json:"partition"`
	// Offset: set by reads; ignored by Produce.
	Offset int64 `json:"offset"`
	// Timestamp: set by reads; for Produce, zero means "now".
	Timestamp time.Time `json:"timestamp"`
	Key       []byte    `json:"key"`
	Value     []byte    `json:"value"`
	Headers   []Header  `json:"headers,omitempty"`
}

// Produced is where Produce wrote a record.
type Produced struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Timestamp time.Time `json:"timestamp"`
}

// ReadRequest describes a bounded read.
type ReadRequest struct {
	Topic string
	// Partitions to read, nil for all.
	Partitions []int32
	// Start is where each partition is read from. The zero value is
	// Earliest.
	Start Position
	// Limit caps the number of records returned (after Filter); 0 means
	// no cap beyond the end-offset snapshot.
	Limit int
	// Filter, if set, keeps only records for which it returns true.
	Filter func(Record) bool
	// Isolation: ReadUncommitted (the default) reads up to the high
	// watermark, records of open and aborted transactions included;
	// ReadCommitted reads up to the last stable offset and leaves out the
	// records of aborted transactions.
	Isolation Isolation
}

// Produce writes records to topic in one call (franz-go batches them per
// partition) and waits for every acknowledgement (acks=all, idempotent when
// the broker supports it). The result has one entry per record, in order.
// On failure the entries of failed records have Offset -1 and the error is
// that of the first failed record.
func (c *Client) Produce(ctx context.Context, topic string, records []Record) ([]Produced, error) {
	const op = "produce to"
	if topic == "" {
		return nil, invalid(op, "empty topic name")
	}
	if len(records) == 0 {
		return nil, nil
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, topicRes(topic), err)
	}
	defer cancel()
	return c.produceWith(ctx, c.cl, op, topic, records)
}

// produceWith is Produce through producer cl (the Client's own, or a
// transaction's). ctx is already bounded.
func (c *Client) produceWith(ctx context.Context, cl *kgo.Client, op, topic string, records []Record) ([]Produced, error) {

	// An explicit partition outside the topic would fail deep inside the
	// producer with an opaque message; check it up front.
	maxPart := int32(-1)
	for i, r := range records {
		if r.Partition < AnyPartition {
			return nil, invalid(op, "record %d: partition %d (want >= 0, or -1 for any)", i, r.Partition)
		}
		maxPart = max(maxPart, r.Partition)
	}
	if maxPart >= 0 {
		td, err := c.topicDetail(ctx, topic)
		if err != nil {
			return nil, wrap(op, topicRes(topic), err)
		}
		if int(maxPart) >= len(td.Partitions) {
			return nil, wrap(op, partRes(topic, maxPart), kerr.UnknownTopicOrPartition)
		}
		if err := awaitProducerPartition(ctx, cl, topic, maxPart); err != nil {
			return nil, wrap(op, partRes(topic, maxPart), err)
		}
	}

	krs := make([]*kgo.Record, len(records))
	for i, r := range records {
		kr := &kgo.Record{
			Topic:     topic,
			Partition: r.Partition,
			Key:       r.Key,
			Value:     r.Value,
			Timestamp: r.Timestamp,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		krs[i] = kr
	}
	// Not ProduceSync: it reports results in completion order, and we
	// promise results in input order.
	errs := make([]error, len(krs))
	var wg sync.WaitGroup
	wg.Add(len(krs))
	for i, kr := range krs {
		cl.Produce(ctx, kr, func(_ *kgo.Record, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	wg.Wait()
	out := make([]Produced, len(records))
	var first error
	for i, kr := range krs {
		if errs[i] != nil {
			out[i] = Produced{Partition: kr.Partition, Offset: -1}
			if first == nil {
				first = errs[i]
			}
			continue
		}
		out[i] = Produced{Partition: kr.Partition, Offset: kr.Offset, Timestamp: kr.Timestamp}
	}
	if first != nil {
		return out, wrap(op, topicRes(topic), first)
	}
	return out, nil
}

// awaitProducerPartition makes sure the producer's cached metadata knows
// partition p of topic, which the broker says exists. After partitions were
// added (by us or anyone), the producer may still hold the old count and
// would fail the record with an opaque partitioning error. A topic the
// producer has not loaded yet is fine: its first load sees every partition.
func awaitProducerPartition(ctx context.Context, cl *kgo.Client, topic string, p int32) error {
	if l, _, _ := cl.PartitionLeader(topic, 0); l < 0 {
		return nil // not loaded yet
	}
	if l, _, _ := cl.PartitionLeader(topic, p); l >= 0 {
		return nil
	}
	cl.ForceMetadataRefresh()
	t := time.NewTicker(metadataPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if l, _, _ := cl.PartitionLeader(topic, p); l >= 0 {
			return nil
		}
		cl.ForceMetadataRefresh()
	}
}

// readPart tracks one partition of a Read.
type readPart struct {
	end     int64 // snapshot end offset: stop before it
	matched int   // records kept (after Filter)
	// committed is set for a ReadCommitted read: it decides which records
	// are visible, and holds transactional ones until their marker.
	committed *committedFilter
}

// Read returns the records of a bounded range: it snapshots each partition's
// end offset first, then reads from Start until every partition reached its
// snapshot end or contributed Limit records, so it returns promptly on a
// quiet topic. Records are returned ordered by (timestamp, partition,
// offset), truncated to Limit: with several partitions, that is the oldest
// Limit records among the first Limit of each partition.
//
// Control records (transaction markers) are skipped. At ReadUncommitted
// records of open and aborted transactions are included, as the end offset
// is the high watermark. At ReadCommitted the visible end is the last stable
// offset and the records of aborted transactions are left out (see
// committedFilter: the read may continue past the last stable offset to find
// the markers of transactions that began before it).
func (c *Client) Read(ctx context.Context, req ReadRequest) ([]Record, error) {
	const op = "read"
	res := topicRes(req.Topic)
	if req.Topic == "" {
		return nil, invalid(op, "empty topic name")
	}
	if req.Limit < 0 {
		return nil, invalid(op, "negative limit %d", req.Limit)
	}
	ranges, err := c.readRanges(ctx, req.Topic, req.Partitions, req.Start, req.Isolation)
	if err != nil {
		return nil, wrap(op, res, err)
	}
	parts := make(map[int32]*readPart, len(ranges))
	offsets := make(map[int32]kgo.Offset, len(ranges))
	for _, r := range ranges {
		if r.From >= r.visible {
			continue // nothing visible to read
		}
		rp := &readPart{end: r.End}
		if req.Isolation == ReadCommitted {
			rp.committed = newCommittedFilter(r.visible)
		}
		parts[r.Partition] = rp
		offsets[r.Partition] = kgo.NewOffset().At(r.From)
	}
	if len(parts) == 0 {
		return []Record{}, nil
	}

	cl, err := kgo.NewClient(c.opts.baseKgoOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{req.Topic: offsets}),
		// Control records occupy offsets: keeping them lets us see every
		// offset up to the snapshot end, so a partition whose tail is a
		// transaction marker still completes.
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(250*time.Millisecond),
		// If retention removed our start offset meanwhile, continue
		// from the new log start.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)...)
	if err != nil {
		return nil, wrap(op, res, err)
	}
	defer cl.Close()

	// The idle guard is a backstop for a partition whose last offsets
	// before the snapshot end are gone (compaction): no record at or
	// beyond end-1 will ever arrive. Ordinary reads finish by offsets.
	idle := c.opts.RequestTimeout
	lastProgress := time.Now()
	var out []Record
	for len(parts) > 0 {
		pctx, cancel := context.WithTimeout(ctx, idle)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, wrap(op, res, err)
		}
		var fatal error
		fs.EachError(func(_ string, p int32, err error) {
			switch {
			case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.TopicAuthorizationFailed),
				errors.Is(err, kgo.ErrClientClosed):
				if fatal == nil {
					fatal = err
				}
			default:
				// Retriable fetch errors (leader moves...) are
				// retried by franz-go; nothing to do.
			}
		})
		if fatal != nil {
			return nil, wrap(op, res, fatal)
		}
		var done []int32
		keep := func(st *readPart, r *kgo.Record) {
			if req.Limit > 0 && st.matched >= req.Limit {
				return
			}
			rec := fromKgo(r)
			if req.Filter == nil || req.Filter(rec) {
				out = append(out, rec)
				st.matched++
			}
		}
		finish := func(p int32, st *readPart) {
			if st.committed != nil {
				for _, kr := range st.committed.finish() {
					keep(st, kr)
				}
			}
			delete(parts, p)
			done = append(done, p)
		}
		fs.EachRecord(func(r *kgo.Record) {
			st := parts[r.Partition]
			if st == nil {
				return
			}
			if r.Offset >= st.end {
				finish(r.Partition, st)
				return
			}
			lastProgress = time.Now()
			complete := r.Offset+1 >= st.end
			switch {
			case st.committed != nil:
				for _, kr := range st.committed.add(r) {
					keep(st, kr)
				}
				// Past the stable offset the read only looks for the
				// markers of transactions begun before it.
				complete = complete || (r.Offset+1 >= st.committed.stable && !st.committed.undecided())
			case !r.Attrs.IsControl():
				keep(st, r)
			}
			if complete || (req.Limit > 0 && st.matched >= req.Limit) {
				finish(r.Partition, st)
			}
		})
		if len(done) > 0 && len(parts) > 0 {
			cl.RemoveConsumePartitions(map[string][]int32{req.Topic: done})
		}
		if len(parts) > 0 && time.Since(lastProgress) >= idle {
			// Stalled. That is fine only where the unread offsets are gone
			// (compaction or retention moved past them); a broker that
			// stopped answering must not turn into a short, silent result.
			if err := c.checkStalled(ctx, req.Topic, parts); err != nil {
				return nil, wrap(op, res, err)
			}
			break
		}
	}
	sortRecords(out)
	if req.Limit > 0 && len(out) > req.Limit {
		if req.Start.kind == posFromEnd {
			out = out[len(out)-req.Limit:] // the newest, not the oldest, of the tails
		} else {
			out = out[:req.Limit]
		}
	}
	if out == nil {
		out = []Record{}
	}
	return out, nil
}

// PartitionRange is the part of one partition a read starting at a Position
// would cover, as of now.
type PartitionRange struct {
	Partition int32 `json:"partition"`
	// From is the resolved start offset, within [log start, End].
	From int64 `json:"from"`
	// End is the high watermark when the range was taken.
	End int64 `json:"end"`
}

// Records returns End - From.
func (r PartitionRange) Records() int64 { return max(r.End-r.From, 0) }

// Range resolves from against each partition (nil partitions = all) and
// snapshots the end offsets: exactly what Read would read at
// ReadUncommitted. Sorted by partition.
func (c *Client) Range(ctx context.Context, topic string, partitions []int32, from Position) ([]PartitionRange, error) {
	rs, err := c.readRanges(ctx, topic, partitions, from, ReadUncommitted)
	if err != nil {
		return nil, err
	}
	out := make([]PartitionRange, len(rs))
	for i, r := range rs {
		out[i] = r.PartitionRange
	}
	return out, nil
}

// readRange is a PartitionRange with the end of what is visible at the
// read's isolation: the high watermark (End) at ReadUncommitted, the last
// stable offset at ReadCommitted, where From is resolved against it (FROM
// LATEST is the stable end).
type readRange struct {
	PartitionRange
	visible int64
}

func (c *Client) readRanges(ctx context.Context, topic string, partitions []int32, from Position, iso Isolation) ([]readRange, error) {
	const op = "read"
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, topicRes(topic), err)
	}
	defer cancel()
	td, err := c.topicDetail(ctx, topic)
	if err != nil {
		return nil, wrap(op, topicRes(topic), err)
	}
	want := partitions
	if want == nil {
		want = td.Partitions.Numbers()
	}
	for _, p := range want {
		if _, ok := td.Partitions[p]; !ok {
			return nil, wrap(op, partRes(topic, p), kerr.UnknownTopicOrPartition)
		}
	}
	lstart, err := c.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, wrap(op, topicRes(topic), err)
	}
	lend, err := c.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, wrap(op, topicRes(topic), err)
	}
	lstable := lend
	if iso == ReadCommitted {
		if lstable, err = c.adm.ListCommittedOffsets(ctx, topic); err != nil {
			return nil, wrap(op, topicRes(topic), err)
		}
	}
	var lts map[int32]int64
	if from.kind == posTime {
		lt, err := c.adm.ListOffsetsAfterMilli(ctx, from.t.UnixMilli(), topic)
		if err != nil {
			return nil, wrap(op, topicRes(topic), err)
		}
		lts = make(map[int32]int64)
		for p, o := range lt[topic] {
			if o.Err == nil {
				lts[p] = o.Offset
			}
		}
	}
	out := make([]readRange, 0, len(want))
	for _, p := range want {
		s, err := lookupOffset(lstart, topic, p)
		if err != nil {
			return nil, wrap(op, partRes(topic, p), err)
		}
		e, err := lookupOffset(lend, topic, p)
		if err != nil {
			return nil, wrap(op, partRes(topic, p), err)
		}
		v, err := lookupOffset(lstable, topic, p)
		if err != nil {
			return nil, wrap(op, partRes(topic, p), err)
		}
		// The stable offset is never past the high watermark (the two
		// answers are not taken at the same instant).
		visible := min(v.Offset, e.Offset)
		ts, ok := lts[p]
		if !ok {
			ts = -1
		}
		out = append(out, readRange{
			PartitionRange: PartitionRange{Partition: p, From: from.resolve(s.Offset, visible, ts), End: e.Offset},
			visible:        visible,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out, nil
}

// Consume streams records of topic to fn until ctx is done (then it returns
// nil) or fn returns an error (returned wrapped). With group "" it reads
// every partition directly from `from`, picking up partitions added later;
// with a group it joins the consumer group, starts from the committed
// offsets (from applies to partitions without one), and commits a record's
// offset only after fn returned nil for it, so a crash re-delivers rather
// than loses records. fn is called from one goroutine.
func (c *Client) Consume(ctx context.Context, topic, group string, from Position, fn func(Record) error) error {
	return c.ConsumeIsolated(ctx, topic, group, from, ReadUncommitted, fn)
}

// ConsumeIsolated is Consume at the given isolation. At ReadCommitted the
// broker serves records only up to the last stable offset and the consumer
// drops those of aborted transactions (the fetch's AbortedTransactions list,
// applied per producer from each aborted transaction's first offset to that
// producer's abort marker, as Kafka consumers do): a record appears once its
// transaction commits, never if it aborts.
func (c *Client) ConsumeIsolated(ctx context.Context, topic, group string, from Position, iso Isolation, fn func(Record) error) error {
	const op = "consume"
	res := topicRes(topic)
	if topic == "" {
		return invalid(op, "empty topic name")
	}
	if fn == nil {
		return invalid(op, "nil record callback")
	}
	// Fail fast on a missing topic: franz-go would wait for it to appear.
	cctx, cancel, err := c.call(ctx)
	if err != nil {
		return wrap(op, res, err)
	}
	_, err = c.topicDetail(cctx, topic)
	cancel()
	if err != nil {
		return wrap(op, res, err)
	}

	opts := []kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(from.kgoOffset()),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.FetchIsolationLevel(iso.kgo()),
	}
	if group != "" {
		opts = append(opts, kgo.ConsumerGroup(group), kgo.AutoCommitMarks())
	}
	cl, err := kgo.NewClient(c.opts.baseKgoOpts(opts...)...)
	if err != nil {
		return wrap(op, res, err)
	}
	defer cl.Close()
	if group != "" {
		// Commit what fn accepted before leaving the group; ctx is done
		// by then, so use a fresh bounded context.
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), c.opts.RequestTimeout)
			defer cancel()
			_ = cl.CommitMarkedOffsets(cctx)
		}()
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var fatal error
		fs.EachError(func(_ string, _ int32, err error) {
			if fatal != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			if errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, kerr.TopicAuthorizationFailed) ||
				errors.Is(err, kerr.GroupAuthorizationFailed) {
				fatal = err
			}
		})
		if fatal != nil {
			return wrap(op, res, fatal)
		}
		var fnErr error
		fs.EachRecord(func(r *kgo.Record) {
			if fnErr != nil || r.Attrs.IsControl() {
				return
			}
			if err := fn(fromKgo(r)); err != nil {
				fnErr = err
				return
			}
			if group != "" {
				cl.MarkCommitRecords(r)
			}
		})
		if fnErr != nil {
			return fmt.Errorf("consume %s: %w", res, fnErr)
		}
	}
}

func fromKgo(r *kgo.Record) Record {
	rec := Record{
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Timestamp: r.Timestamp,
		Key:       r.Key,
		Value:     r.Value,
	}
	if len(r.Headers) > 0 {
		rec.Headers = make([]Header, len(r.Headers))
		for i, h := range r.Headers {
			rec.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	return rec
}

func sortRecords(rs []Record) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if !a.Timestamp.Equal(b.Timestamp) {
			return a.Timestamp.Before(b.Timestamp)
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Offset < b.Offset
	})
}

// partitioner honours an explicit Record.Partition and otherwise partitions
// like Kafka's default: murmur2 for keyed records, spreading keyless ones.
type partitioner struct{}

func newPartitioner() kgo.Partitioner { return partitioner{} }

func (partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &topicPartitioner{keyed: kgo.StickyKeyPartitioner(nil).ForTopic(topic)}
}

type topicPartitioner struct {
	keyed kgo.TopicPartitioner
	next  int // round-robin cursor; franz-go serialises calls per topic
}

// RequiresConsistency: explicit and keyed records must land on their
// partition even if it is briefly unwritable (n is then the full partition
// count, so the index is the partition number); keyless ones may go to any
// writable partition.
func (tp *topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Partition >= 0 || r.Key != nil
}

func (tp *topicPartitioner) Partition(r *kgo.Record, n int) int {
	switch {
	case r.Partition >= 0:
		return int(r.Partition)
	case r.Key != nil:
		return tp.keyed.Partition(r, n)
	default:
		tp.next++
		return tp.next % n
	}
}

// checkStalled decides what a read that stopped receiving records means:
// nil when every unfinished partition's remaining offsets are gone (the log
// start moved past the snapshot end), otherwise an error saying where the
// read stopped, so a stalled broker never yields a silently short result.
func (c *Client) checkStalled(ctx context.Context, topic string, parts map[int32]*readPart) error {
	offs, err := c.ListOffsets(ctx, topic)
	if err != nil {
		return err
	}
	start := make(map[int32]int64, len(offs))
	for _, o := range offs {
		start[o.Partition] = o.Start
	}
	for p, st := range parts {
		if s, ok := start[p]; !ok || s < st.end {
			return fmt.Errorf("%w: no records from partition %d for %v before its end offset %d",
				ErrUnreachable, p, c.opts.RequestTimeout, st.end)
		}
	}
	return nil
}
