package log

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/moonmq/moonmq/engine/batch"
)

// headerChunk is how much a header scan reads per pread: a few index
// intervals of small batches, or one header of a large batch.
const headerChunk = 16 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, headerChunk); return &b }}

// headerScanner walks batch headers of a segment from a position up to a
// limit (a published size, so every batch below it is whole), reading in
// chunks rather than one pread per header.
type headerScanner struct {
	s        *segment
	pos      int64
	limit    int64
	bufp     *[]byte
	buf      []byte // valid bytes of the chunk, starting at bufStart
	bufStart int64
}

func newHeaderScanner(s *segment, pos, limit int64) *headerScanner {
	return &headerScanner{s: s, pos: pos, limit: limit, bufp: chunkPool.Get().(*[]byte)}
}

func (sc *headerScanner) close() { chunkPool.Put(sc.bufp) }

// next returns the header at the current position and its position, and
// advances past the batch. ok is false at the limit.
func (sc *headerScanner) next() (h batch.Header, pos int64, ok bool, err error) {
	if sc.limit-sc.pos < batch.HeaderSize {
		return h, 0, false, nil
	}
	if sc.pos < sc.bufStart || sc.pos+batch.HeaderSize > sc.bufStart+int64(len(sc.buf)) {
		n := min(int64(len(*sc.bufp)), sc.limit-sc.pos)
		m, rerr := sc.s.f.ReadAt((*sc.bufp)[:n], sc.pos)
		if int64(m) < batch.HeaderSize {
			if rerr == nil || errors.Is(rerr, io.EOF) {
				rerr = io.ErrUnexpectedEOF
			}
			return h, 0, false, fmt.Errorf("read segment %s at %d: %w", sc.s.f.Name(), sc.pos, rerr)
		}
		sc.buf, sc.bufStart = (*sc.bufp)[:m], sc.pos
	}
	off := sc.pos - sc.bufStart
	h, err = batch.ParseHeader(sc.buf[off:])
	if err == nil && h.Length < batch.HeaderSize-batch.LengthFieldEnd {
		err = fmt.Errorf("batch length %d", h.Length)
	}
	if err != nil {
		return h, 0, false, fmt.Errorf("%w: segment %s at %d: %v", ErrCorrupt, sc.s.f.Name(), sc.pos, err)
	}
	if int64(h.Size()) > sc.limit-sc.pos {
		return h, 0, false, fmt.Errorf("%w: segment %s at %d: batch of %d bytes crosses the end (%d)",
			ErrCorrupt, sc.s.f.Name(), sc.pos, h.Size(), sc.limit)
	}
	pos = sc.pos
	sc.pos += int64(h.Size())
	return h, pos, true, nil
}

// seekPosition returns where to start scanning a segment for offset: the
// position of the last indexed batch whose base offset is <= offset.
func (s *segment) seekPosition(offset int64) (int64, error) {
	rel := offset - s.base
	if rel <= 0 {
		return 0, nil
	}
	if rel > maxRelativeOffset {
		rel = maxRelativeOffset
	}
	i, pos, err := s.offIdx.floor(rel, false)
	if err != nil || i < 0 {
		return 0, err
	}
	return pos, nil
}

// findBatch finds the first batch in s whose last offset is >= offset,
// scanning below limit (0 means the published size, read after the index so
// every index entry is below it).
func (s *segment) findBatch(offset int64) (h batch.Header, pos, limit int64, found bool, err error) {
	start, err := s.seekPosition(offset)
	if err != nil {
		return h, 0, 0, false, err
	}
	limit = s.size.Load()
	sc := newHeaderScanner(s, start, limit)
	defer sc.close()
	for {
		h, pos, ok, err := sc.next()
		if err != nil || !ok {
			return h, 0, limit, false, err
		}
		if h.LastOffset() >= offset {
			return h, pos, limit, true, nil
		}
	}
}

// Read returns whole stored batches starting with the one containing offset:
// up to maxBytes, but always at least that first batch (so a consumer
// progresses past a batch larger than its limit), and never a batch whose
// base offset is >= maxOffset (the caller passes the high watermark, or the
// last stable offset). Batches come from one segment per call. It returns
// ErrOffsetOutOfRange when offset is below the log start or beyond the log
// end, and no bytes at the end. The result is freshly allocated.
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
			return dst, err
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
		if _, err := s.f.ReadAt(buf, pos); err != nil {
			return dst[:n], fmt.Errorf("read segment %s at %d: %w", s.f.Name(), pos, err)
		}
		// Keep whole batches below maxOffset; the first is always whole.
		end := 0
		ierr := batch.Iterate(buf, func(bh batch.Header, raw []byte) bool {
			if bh.BaseOffset >= maxOffset {
				return false
			}
			end += len(raw)
			return true
		})
		if ierr != nil {
			return dst[:n], fmt.Errorf("%w: segment %s at %d: %v", ErrCorrupt, s.f.Name(), pos, ierr)
		}
		return dst[:n+end], nil
	}
	return dst, nil
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
// only. fn must not call methods that truncate the log.
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
		start, err := s.seekPosition(from)
		if err != nil {
			return err
		}
		sc := newHeaderScanner(s, start, s.size.Load())
		for {
			h, _, ok, err := sc.next()
			if err != nil {
				sc.close()
				return err
			}
			if !ok {
				break
			}
			if h.LastOffset() < from {
				continue
			}
			if !fn(h) {
				sc.close()
				return nil
			}
		}
		sc.close()
	}
	return nil
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
// to one index interval. The batch found is decoded (decompressed if need
// be) to find the exact record, as Kafka does; a compressed batch that cannot
// be trusted or decoded within the limits (see lookupRecords) answers with
// its first offset at or above the log start and its MaxTimestamp. With LogAppendTime every record
// of a batch has its MaxTimestamp. ok is false when no record qualifies. For
// read_committed, the caller also rejects an offset at or above the last
// stable offset.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, ok bool, err error) {
	if l.isClosed.Load() {
		return 0, 0, false, ErrClosed
	}
	l.truncMu.RLock()
	defer l.truncMu.RUnlock()
	start, hw := l.logStart.Load(), l.hw.Load()
	segs, sok := l.snapshot(start)
	if !sok {
		return 0, 0, false, ErrClosed
	}
	defer releaseAll(segs)
	for _, s := range segs {
		if s.maxTs.Load() < ts {
			continue
		}
		pos := int64(0)
		if i, rel, err := s.timeIdx.floor(ts, true); err != nil {
			return 0, 0, false, err
		} else if i >= 0 {
			if pos, err = s.seekPosition(s.base + rel); err != nil {
				return 0, 0, false, err
			}
		}
		sc := newHeaderScanner(s, pos, s.size.Load())
		off, rts, found, atHW, err := scanForTimestamp(sc, ts, start, hw)
		sc.close()
		if err != nil || found || atHW {
			return off, rts, found, err
		}
	}
	return 0, 0, false, nil
}

// scanForTimestamp continues a header scan to the first record at or after
// start, below hw, with timestamp >= ts. atHW reports that the scan reached
// the high watermark, so later segments need not be searched.
func scanForTimestamp(sc *headerScanner, ts, start, hw int64) (offset, timestamp int64, found, atHW bool, err error) {
	decodes := 0
	for {
		h, pos, ok, err := sc.next()
		if err != nil || !ok {
			return 0, 0, false, false, err
		}
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
		if _, err := sc.s.f.ReadAt(raw, pos); err != nil {
			return 0, 0, false, false, fmt.Errorf("read segment %s at %d: %w", sc.s.f.Name(), pos, err)
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
			return 0, 0, false, false, fmt.Errorf("segment %s at %d: %w", sc.s.f.Name(), pos, err)
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
	if _, err := best.f.ReadAt(raw, pos); err != nil {
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
