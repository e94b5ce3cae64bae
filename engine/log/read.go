package log

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/vfs"
)

// headerChunk is how much a header scan reads per pread: a few index
// intervals of small batches, or one header of a large batch.
const headerChunk = 16 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, headerChunk); return &b }}

// step is one element of a segment walk: a batch, or a damaged stretch.
type step struct {
	h   batch.Header
	pos int64
	bad *badRange // set for a damaged stretch
}

// headerScanner walks the batch headers of a segment from a position up to
// a limit (a published size, so every batch below it is whole unless the
// disk damaged it), reading in chunks rather than one pread per header. It
// steps over damaged stretches known from recovery, and records the ones it
// finds itself (a header that does not parse or does not follow its
// predecessor), so one bad spot costs its own offsets and nothing else.
type headerScanner struct {
	s        *segment
	cf       *cachedFile
	pos      int64
	limit    int64
	expect   int64 // base offset the next batch must reach; -1 when unknown
	bufp     *[]byte
	buf      []byte // valid bytes of the chunk, starting at bufStart
	bufStart int64
}

func newHeaderScanner(s *segment, pos, expect, limit int64) (*headerScanner, error) {
	cf, err := s.logRef.open()
	if err != nil {
		return nil, err
	}
	return &headerScanner{s: s, cf: cf, pos: pos, limit: limit, expect: expect, bufp: chunkPool.Get().(*[]byte)}, nil
}

func (sc *headerScanner) close() {
	chunkPool.Put(sc.bufp)
	sc.s.logRef.release(sc.cf)
}

// next returns the next step and advances past it. ok is false at the limit.
func (sc *headerScanner) next() (st step, ok bool, err error) {
	if sc.pos >= sc.limit {
		return st, false, nil
	}
	if b, known := sc.s.badAt(sc.pos); known {
		return sc.skip(b), true, nil
	}
	if sc.limit-sc.pos < batch.HeaderSize {
		return sc.damaged(fmt.Sprintf("%d stray bytes at the end", sc.limit-sc.pos))
	}
	if sc.pos < sc.bufStart || sc.pos+batch.HeaderSize > sc.bufStart+int64(len(sc.buf)) {
		n := min(int64(len(*sc.bufp)), sc.limit-sc.pos)
		m, rerr := sc.cf.f.ReadAt((*sc.bufp)[:n], sc.pos)
		if int64(m) < batch.HeaderSize {
			if rerr == nil || errors.Is(rerr, io.EOF) {
				rerr = io.ErrUnexpectedEOF
			}
			return st, false, fmt.Errorf("read segment %s at %d: %w", sc.s.name(), sc.pos, rerr)
		}
		sc.buf, sc.bufStart = (*sc.bufp)[:m], sc.pos
	}
	h, err := batch.ParseHeader(sc.buf[sc.pos-sc.bufStart:])
	reason := ""
	switch {
	case err != nil:
		reason = err.Error()
	case sc.expect >= 0:
		reason = sc.s.checkBatch(h, sc.pos, sc.limit, sc.expect)
	default:
		reason = sc.s.checkBatch(h, sc.pos, sc.limit, sc.s.base)
	}
	if reason != "" {
		return sc.damaged(reason)
	}
	st = step{h: h, pos: sc.pos}
	sc.pos += int64(h.Size())
	sc.expect = h.NextOffset()
	return st, true, nil
}

func (sc *headerScanner) skip(b badRange) step {
	sc.pos = b.toPos
	sc.expect = b.toOffset
	return step{pos: b.fromPos, bad: &b}
}

// damaged records the stretch starting at the current position as damaged
// and steps over it.
func (sc *headerScanner) damaged(reason string) (step, bool, error) {
	b, err := sc.s.discoverBad(sc.cf.f, sc.pos, sc.expect, sc.limit, reason)
	if err != nil {
		return step{}, false, err
	}
	return sc.skip(b), true, nil
}

// discoverBad records damage found by a read at pos (expected offset
// expect, -1 if unknown): it looks for the next valid batch before limit to
// learn where the damage ends, and reports it.
func (s *segment) discoverBad(f vfs.File, pos, expect, limit int64, reason string) (badRange, error) {
	if b, known := s.badAt(pos); known {
		return b, nil
	}
	minOffset := max(expect, s.base)
	to, toOffset, err := s.resync(f, pos+1, limit, minOffset, -1, s.claimedEnd(f, pos, limit))
	if err != nil {
		return badRange{}, err
	}
	if to < 0 {
		to, toOffset = limit, -1
	}
	b := badRange{fromPos: pos, toPos: to, fromOffset: minOffset, toOffset: toOffset, reason: reason}
	s.addBad(b)
	return b, nil
}

// claimedEnd is where the damaged batch at pos ends by its own length
// field, if that is sane; -1 otherwise.
func (s *segment) claimedEnd(f io.ReaderAt, pos, limit int64) int64 {
	var hdr [batch.HeaderSize]byte
	if _, err := f.ReadAt(hdr[:], pos); err != nil {
		return -1
	}
	return rawExtent(hdr[:], pos, limit)
}

// walk calls fn with every batch header from pos (where a batch at or past
// offset expect starts; -1 if unknown) to limit, skipping damaged stretches,
// until fn returns false.
func (s *segment) walk(pos, expect, limit int64, fn func(h batch.Header, pos int64) bool) error {
	sc, err := newHeaderScanner(s, pos, expect, limit)
	if err != nil {
		return err
	}
	defer sc.close()
	for {
		st, ok, err := sc.next()
		if err != nil || !ok {
			return err
		}
		if st.bad == nil && !fn(st.h, st.pos) {
			return nil
		}
	}
}

// seekPosition returns where to start scanning the segment for offset and
// the offset expected there: the last offset index entry at or below
// offset, once checked against the batch it points at. An entry that does
// not match (the index is damaged, or the batch it points at) is not
// trusted: the lookup starts at the beginning of the segment and the
// segment's indexes are rebuilt.
func (s *segment) seekPosition(offset int64) (pos, expect int64, err error) {
	rel := offset - s.base
	if rel <= 0 {
		return 0, s.base, nil
	}
	if s.indexBad.Load() && !s.retryRebuild() {
		return 0, s.base, nil
	}
	i, key, p, err := s.offIdx.floor(min(rel, maxRelativeOffset), false)
	if err != nil || i < 0 {
		return 0, s.base, err
	}
	if _, known := s.badAt(p); known {
		return p, s.base + key, nil // the batch it points at is damaged; the scan reports it
	}
	if ok, err := s.batchAt(p, s.base+key, -1); err != nil {
		return 0, s.base, err
	} else if !ok {
		s.indexFailed(fmt.Sprintf("offset index entry %d says offset %d is at position %d, which holds no such batch", i, s.base+key, p))
		return 0, s.base, nil
	}
	return p, s.base + key, nil
}

// batchAt reports whether a well-formed batch with base offset base (and,
// when maxTs >= 0, that MaxTimestamp) starts at pos.
func (s *segment) batchAt(pos, base, maxTs int64) (bool, error) {
	size := s.size.Load()
	if pos < 0 || pos+batch.HeaderSize > size {
		return false, nil
	}
	var hdr [batch.HeaderSize]byte
	if err := s.readAt(hdr[:], pos); err != nil {
		return false, err
	}
	h, err := batch.ParseHeader(hdr[:])
	if err != nil || h.BaseOffset != base || int64(h.Size()) > size-pos || s.checkBatch(h, pos, size, base) != "" {
		return false, nil
	}
	return maxTs < 0 || h.MaxTimestamp == maxTs, nil
}

// indexFailed stops trusting the segment's indexes after an entry did not
// match the data, and rebuilds them from the segment (sealed segments; the
// active segment's indexes are in memory, owned by the appender, and are
// only bypassed).
func (s *segment) indexFailed(reason string) {
	if s.indexBad.CompareAndSwap(false, true) {
		s.st.health.indexFailed(s, reason)
	}
	if s.offIdx.isActive() {
		return
	}
	if err := s.rebuildIndexes(); err != nil {
		s.st.health.logger.Warn("rebuilding segment indexes failed; lookups keep scanning the segment",
			"segment", s.base, "err", err)
	}
}

// rebuildRetry spaces out rebuilds of untrusted indexes that failed (a
// full disk): lookups scan meanwhile.
const rebuildRetry = 30 * time.Second

// retryRebuild tries, at most every rebuildRetry, to rebuild the indexes of
// a sealed segment that are not trusted (one that was active when an entry
// failed, or whose files a failed heal may have rewritten). It reports
// whether they are trusted again.
func (s *segment) retryRebuild() bool {
	if s.offIdx.isActive() {
		return false // the appender owns the in-memory indexes
	}
	now := time.Now().UnixNano()
	last := s.rebuildTried.Load()
	if now-last < int64(rebuildRetry) || !s.rebuildTried.CompareAndSwap(last, now) {
		return false
	}
	if err := s.rebuildIndexes(); err != nil {
		s.st.health.logger.Warn("rebuilding segment indexes failed; lookups keep scanning the segment",
			"segment", s.base, "err", err)
		return false
	}
	return !s.indexBad.Load()
}

// rebuildIndexes rewrites a sealed segment's .index and .timeindex from its
// batches, then trusts them again.
func (s *segment) rebuildIndexes() error {
	s.rebuildMu.Lock()
	defer s.rebuildMu.Unlock()
	if !s.indexBad.Load() {
		return nil // rebuilt meanwhile
	}
	b := newSegment(s.st, s.base) // a scratch appender state; never released
	b.offIdx.mem, b.timeIdx.mem = []byte{}, []byte{}
	interval := s.st.indexInterval()
	if err := s.walk(0, s.base, s.size.Load(), func(h batch.Header, pos int64) bool {
		b.indexBatch(h, pos, interval)
		return true
	}); err != nil {
		return err
	}
	b.appendTimeEntry()
	if err := s.offIdx.replace(b.offIdx.mem); err != nil {
		return err
	}
	if err := s.timeIdx.replace(b.timeIdx.mem); err != nil {
		return err
	}
	s.indexBad.Store(false)
	s.st.health.logger.Info("segment indexes rebuilt", "segment", s.base,
		"index_entries", b.offIdx.n, "time_entries", b.timeIdx.n)
	return nil
}

// findBatch finds the first batch in s whose last offset is >= offset,
// scanning below the published size (read after the index, so every index
// entry is below it). An offset inside a damaged stretch is ErrCorrupt.
func (s *segment) findBatch(offset int64) (h batch.Header, pos, limit int64, found bool, err error) {
	start, expect, err := s.seekPosition(offset)
	if err != nil {
		return h, 0, 0, false, err
	}
	limit = s.size.Load()
	sc, err := newHeaderScanner(s, start, expect, limit)
	if err != nil {
		return h, 0, 0, false, err
	}
	defer sc.close()
	var damaged *badRange // a damaged stretch that may cover offset
	for {
		st, ok, err := sc.next()
		if err != nil {
			return h, 0, limit, false, err
		}
		if !ok {
			if damaged != nil {
				return h, 0, limit, false, damaged.errFor(s, offset)
			}
			return h, 0, limit, false, nil
		}
		if st.bad != nil {
			if offset >= st.bad.fromOffset {
				damaged = st.bad
			}
			continue
		}
		if st.h.LastOffset() >= offset {
			if damaged != nil && offset < st.h.BaseOffset {
				return h, 0, limit, false, damaged.errFor(s, offset)
			}
			return st.h, st.pos, limit, true, nil
		}
		damaged = nil
	}
}

func (b *badRange) errFor(s *segment, offset int64) error {
	return fmt.Errorf("%w: offset %d is in a damaged part of segment %s (bytes %d-%d: %s)",
		ErrCorrupt, offset, s.name(), b.fromPos, b.toPos, b.reason)
}

// Read returns whole stored batches starting with the one containing offset:
// up to maxBytes, but always at least that first batch (so a consumer
// progresses past a batch larger than its limit), and never a batch whose
// base offset is >= maxOffset (the caller passes the high watermark, or the
// last stable offset). Batches come from one segment per call. It returns
// ErrOffsetOutOfRange when offset is below the log start or beyond the log
// end, and no bytes at the end. The result is freshly allocated.
//
// Every batch returned has passed its CRC check on the way out, so damage
// on disk is never served: an offset in a damaged stretch is ErrCorrupt,
// and a read that meets damage after good batches returns those. Damage
// found this way is recorded (CorruptRanges) and reported once.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	return l.ReadAppend(nil, offset, maxBytes, maxOffset)
}

// ReadAppend is Read appending to dst, so callers can reuse buffers.
func (l *Log) ReadAppend(dst []byte, offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	if l.isClosed.Load() {
		return dst, ErrClosed
	}
	l.truncMu.RLock()
	defer l.truncMu.RUnlock()
	if err := l.checkRange(offset); err != nil {
		return dst, err
	}
	if offset >= maxOffset || offset == l.leo.Load() {
		return dst, nil
	}
	if m, gone := l.missingAt(offset); gone {
		return dst, fmt.Errorf("%w: offset %d is in flushed data missing from the log [%d, %d)", ErrCorrupt, offset, m.FromOffset, m.ToOffset)
	}
	segs, ok := l.snapshot(offset)
	if !ok {
		return dst, ErrClosed
	}
	defer releaseAll(segs)
	if offset < segs[0].base && offset < l.logStart.Load() {
		return dst, l.outOfRange(offset) // retention moved past it meanwhile
	}
	for _, s := range segs {
		h, pos, limit, found, err := s.findBatch(offset)
		if err != nil {
			return dst, l.readErr(offset, err)
		}
		if !found {
			continue // offset is past this segment's last batch (a gap)
		}
		if h.BaseOffset >= maxOffset {
			return dst, nil
		}
		want := int64(max(maxBytes, h.Size()))
		want = min(want, limit-pos)
		n := len(dst)
		dst = growLen(dst, int(want))
		buf := dst[n:]
		if err := s.readAt(buf, pos); err != nil {
			return dst[:n], l.readErr(offset, err)
		}
		end, err := s.verified(buf, pos, h.BaseOffset, maxOffset, limit)
		if err != nil {
			return dst[:n], l.readErr(offset, err)
		}
		return dst[:n+end], nil
	}
	return dst, nil
}

// readErr turns a segment removed under the read into the out-of-range
// answer it would have had a moment later.
func (l *Log) readErr(offset int64, err error) error {
	if errors.Is(err, errFileGone) {
		return l.outOfRange(offset)
	}
	return err
}

// verified returns how many bytes at the start of buf (read from pos) are
// whole, CRC-checked batches below maxOffset, starting with the batch whose
// base offset is first. The first batch must be good (else ErrCorrupt);
// damage after it ends the result there and is recorded for the next read.
func (s *segment) verified(buf []byte, pos, first, maxOffset, limit int64) (int, error) {
	end, expect := 0, first
	for {
		rest := buf[end:]
		if len(rest) < batch.HeaderSize {
			return end, nil
		}
		at := pos + int64(end)
		if _, known := s.badAt(at); known {
			return end, nil
		}
		h, err := batch.ParseHeader(rest)
		reason := ""
		switch {
		case err != nil:
			reason = err.Error()
		case h.Size() > len(rest) && int64(h.Size()) <= limit-at:
			return end, nil // the read stopped inside this batch: it is the next read's
		default:
			reason = s.checkBatch(h, at, limit, expect)
		}
		if reason == "" && h.BaseOffset >= maxOffset {
			return end, nil
		}
		if reason == "" && batch.Checksum(rest[batch.CRCStart:h.Size()]) != h.CRC {
			reason = fmt.Sprintf("crc mismatch in the batch at offset %d", h.BaseOffset)
		}
		if reason != "" {
			var b badRange
			derr := s.withLog(func(f vfs.File) error {
				var err error
				b, err = s.discoverBad(f, at, expect, limit, reason)
				return err
			})
			if derr != nil {
				return end, derr
			}
			if end == 0 {
				return 0, b.errFor(s, first)
			}
			return end, nil
		}
		end += h.Size()
		expect = h.NextOffset()
	}
}

// growLen extends b by n bytes, reallocating if needed.
func growLen(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n)
	copy(nb, b)
	return nb
}

func (l *Log) checkRange(offset int64) error {
	if offset < l.logStart.Load() || offset > l.leo.Load() {
		return l.outOfRange(offset)
	}
	return nil
}

func (l *Log) outOfRange(offset int64) error {
	return fmt.Errorf("%w: offset %d, log covers [%d, %d)", ErrOffsetOutOfRange, offset, l.logStart.Load(), l.leo.Load())
}

// Batches calls fn with the header of every batch from the one containing
// from to the log end, in order, until fn returns false. It reads headers
// only, and skips damaged stretches. fn must not call methods that truncate
// the log.
func (l *Log) Batches(from int64, fn func(h batch.Header) bool) error {
	if l.isClosed.Load() {
		return ErrClosed
	}
	l.truncMu.RLock()
	defer l.truncMu.RUnlock()
	segs, ok := l.snapshot(from)
	if !ok {
		return ErrClosed
	}
	defer releaseAll(segs)
	for _, s := range segs {
		start, expect, err := s.seekPosition(from)
		if err != nil {
			return err
		}
		stop := false
		if err := s.walk(start, expect, s.size.Load(), func(h batch.Header, _ int64) bool {
			if h.LastOffset() < from {
				return true
			}
			stop = !fn(h)
			return !stop
		}); err != nil {
			return err
		}
		if stop {
			return nil
		}
	}
	return nil
}

// VerifiedBatches calls fn with the header and bytes of every batch from the one
// containing from to the log end, like Batches, but reads whole batches and
// passes only those whose CRC checks out: state rebuilt from the log (the
// idempotent-producer sequences) must not come from damaged bytes. Damaged
// and missing ranges are skipped.
func (l *Log) VerifiedBatches(from int64, fn func(h batch.Header, raw []byte) bool) error {
	var buf []byte
	for off := max(from, l.LogStartOffset()); off < l.LogEndOffset(); {
		data, err := l.ReadAppend(buf[:0], off, 1<<20, l.LogEndOffset())
		switch {
		case errors.Is(err, ErrCorrupt):
			next, _ := l.DamagedEnd(off)
			if next <= off {
				return err
			}
			off = next
			continue
		case err != nil:
			return err
		case len(data) == 0:
			return nil
		}
		buf = data
		stop := false
		if err := batch.Iterate(data, func(h batch.Header, raw []byte) bool {
			off = h.NextOffset()
			if h.LastOffset() >= from && !fn(h, raw) {
				stop = true
				return false
			}
			return true
		}); err != nil || stop {
			return err
		}
	}
	return nil
}

// DamagedEnd returns where the damaged or missing range holding offset
// ends (the log end when the damage runs to it), and whether one does:
// replays of the log (producer state, group offsets) resume there.
func (l *Log) DamagedEnd(offset int64) (int64, bool) {
	for _, cr := range l.CorruptRanges() {
		if offset >= cr.FromOffset && (offset < cr.ToOffset || cr.ToOffset < 0) {
			if cr.ToOffset < 0 {
				return l.LogEndOffset(), true
			}
			return cr.ToOffset, true
		}
	}
	return offset, false
}

// Limits on decoding compressed batches for timestamp lookups. Their
// payloads are not decoded on produce, so a stored batch may be hostile: a
// lookup decodes at most maxDecodedBatch bytes of one batch (a few times that
// in memory while decoding), at most maxDecodesPerLookup batches, and only
// decodeSlots lookups decode at once. Past a limit, a batch answers as a
// whole (its first offset and MaxTimestamp), as it did before lookups looked
// inside compressed batches.
const (
	maxDecodedBatch     = 8 << 20
	maxDecodesPerLookup = 16
)

var decodeSlots = make(chan struct{}, 4)

// lookupRecords walks the records of the stored batch raw (header h) for a
// timestamp lookup, calling fn until it returns false. For a compressed
// batch, ok is false when the payload does not decode within the limits or
// its records' offsets are not increasing inside [BaseOffset, LastOffset]:
// the caller then answers for the batch as a whole. Uncompressed batches were
// validated on produce; a bad one is corruption (ErrCorrupt).
func lookupRecords(h batch.Header, raw []byte, fn func(batch.Record) bool) (ok bool, err error) {
	if h.Compression() == batch.CompressionNone {
		if err := batch.Records(raw, fn); err != nil {
			return false, fmt.Errorf("%w: batch at offset %d: %v", ErrCorrupt, h.BaseOffset, err)
		}
		return true, nil
	}
	decodeSlots <- struct{}{}
	defer func() { <-decodeSlots }()
	next, trusted := int32(0), true
	err = batch.DecodeRecords(raw, maxDecodedBatch, func(r batch.Record) bool {
		if r.OffsetDelta < next || r.OffsetDelta > h.LastOffsetDelta {
			trusted = false
			return false
		}
		next = r.OffsetDelta + 1
		return fn(r)
	})
	return err == nil && trusted, nil
}

// OffsetForTimestamp returns the first offset whose record timestamp is >=
// ts, and that timestamp, considering records from the log start up to the
// high watermark (ListOffsets by timestamp). The time index narrows the scan
// to one index interval; an entry that does not match its batch is not
// trusted (the segment is scanned from its start and its indexes rebuilt).
// The batch found is decoded (decompressed if need be) to find the exact
// record, as Kafka does; a compressed batch that cannot be trusted or
// decoded within the limits (see lookupRecords) answers with its first
// offset at or above the log start and its MaxTimestamp. With LogAppendTime
// every record of a batch has its MaxTimestamp. ok is false when no record
// qualifies. For read_committed, the caller also rejects an offset at or
// above the last stable offset.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, ok bool, err error) {
	if l.isClosed.Load() {
		return 0, 0, false, ErrClosed
	}
	l.truncMu.RLock()
	defer l.truncMu.RUnlock()
	start, hw := l.logStart.Load(), l.HighWatermark()
	segs, sok := l.snapshot(start)
	if !sok {
		return 0, 0, false, ErrClosed
	}
	defer releaseAll(segs)
	for _, s := range segs {
		if s.maxTs.Load() < ts {
			continue
		}
		pos, expect, err := s.timeSeek(ts)
		if err != nil {
			return 0, 0, false, l.readErr(start, err)
		}
		sc, err := newHeaderScanner(s, pos, expect, s.size.Load())
		if err != nil {
			return 0, 0, false, l.readErr(start, err)
		}
		off, rts, found, atHW, err := scanForTimestamp(sc, ts, start, hw)
		sc.close()
		if err != nil || found || atHW {
			return off, rts, found, err
		}
	}
	return 0, 0, false, nil
}

// timeSeek returns where a timestamp scan for ts may start in s: the batch
// of the last time index entry below ts (every batch before it has a
// smaller MaxTimestamp), once checked against the segment.
func (s *segment) timeSeek(ts int64) (pos, expect int64, err error) {
	if s.indexBad.Load() && !s.retryRebuild() {
		return 0, s.base, nil
	}
	i, entryTs, rel, err := s.timeIdx.floor(ts, true)
	if err != nil || i < 0 {
		return 0, s.base, err
	}
	h, p, _, found, err := s.findBatch(s.base + rel)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return 0, s.base, err
	}
	if err == nil && found && h.BaseOffset == s.base+rel && h.MaxTimestamp == entryTs {
		return p, h.BaseOffset, nil
	}
	s.indexFailed(fmt.Sprintf("time index entry %d says timestamp %d was reached at offset %d, which the segment does not confirm", i, entryTs, s.base+rel))
	return 0, s.base, nil
}

// scanForTimestamp continues a header scan to the first record at or after
// start, below hw, with timestamp >= ts. atHW reports that the scan reached
// the high watermark, so later segments need not be searched.
func scanForTimestamp(sc *headerScanner, ts, start, hw int64) (offset, timestamp int64, found, atHW bool, err error) {
	decodes := 0
	for {
		st, ok, err := sc.next()
		if err != nil || !ok {
			return 0, 0, false, false, err
		}
		if st.bad != nil {
			continue // nothing to learn from damaged bytes
		}
		h, pos := st.h, st.pos
		if h.BaseOffset >= hw {
			return 0, 0, false, true, nil
		}
		if h.LastOffset() < start || h.MaxTimestamp < ts {
			continue
		}
		wholeBatch := h.LogAppendTime()
		if h.Compression() != batch.CompressionNone {
			decodes++
			wholeBatch = wholeBatch || decodes > maxDecodesPerLookup
		}
		if wholeBatch {
			return max(h.BaseOffset, start), h.MaxTimestamp, true, false, nil
		}
		raw := make([]byte, h.Size())
		if _, err := sc.cf.f.ReadAt(raw, pos); err != nil {
			return 0, 0, false, false, fmt.Errorf("read segment %s at %d: %w", sc.s.name(), pos, err)
		}
		decoded, err := lookupRecords(h, raw, func(r batch.Record) bool {
			o, t := h.RecordOffset(r), h.RecordTimestamp(r)
			if o >= start && o < hw && t >= ts {
				offset, timestamp, found = o, t, true
				return false
			}
			return true
		})
		switch {
		case err != nil:
			return 0, 0, false, false, fmt.Errorf("segment %s at %d: %w", sc.s.name(), pos, err)
		case !decoded:
			return max(h.BaseOffset, start), h.MaxTimestamp, true, false, nil
		case found:
			return offset, timestamp, true, false, nil
		}
	}
}

// MaxTimestamp returns the largest timestamp in the log and the offset of the
// record carrying it (ListOffsets MAX_TIMESTAMP, KIP-734), or (-1, -1) for a
// log without timestamps. Tracking is per batch; the exact record is found
// by decoding (decompressing) the batch; the batch's base offset is returned
// when it cannot be decoded.
func (l *Log) MaxTimestamp() (offset int64, timestamp int64) {
	l.appendMu.Lock()
	if l.closed {
		l.appendMu.Unlock()
		return -1, -1
	}
	var (
		best    *segment
		bestTs  int64 = -1
		bestOff int64 = -1
	)
	l.segMu.RLock()
	for _, s := range l.segments {
		if ts := s.maxTs.Load(); ts > bestTs && s.maxTsOffset >= l.logStart.Load() {
			best, bestTs, bestOff = s, ts, s.maxTsOffset
		}
	}
	if best != nil && !best.tryAcquire() {
		best = nil
	}
	l.segMu.RUnlock()
	l.appendMu.Unlock()
	if best == nil {
		return -1, -1
	}
	defer best.release()

	l.truncMu.RLock()
	defer l.truncMu.RUnlock()
	h, pos, _, found, err := best.findBatch(bestOff)
	if err != nil || !found || h.BaseOffset != bestOff || h.LogAppendTime() {
		return bestOff, bestTs
	}
	raw := make([]byte, h.Size())
	if err := best.readAt(raw, pos); err != nil {
		return bestOff, bestTs
	}
	off := bestOff
	if decoded, err := lookupRecords(h, raw, func(r batch.Record) bool {
		if h.RecordTimestamp(r) == bestTs {
			off = h.RecordOffset(r)
			return false
		}
		return true
	}); err != nil || !decoded {
		return bestOff, bestTs
	}
	return off, bestTs
}
