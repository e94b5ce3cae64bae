package log

import (
	"log/slog"
	"sort"
	"sync/atomic"
)

// health is where a log's segments report damage, so that it is logged
// once at the level an operator watches and counted for metrics.
type health struct {
	logger        *slog.Logger
	corruptFound  atomic.Uint64
	indexFailures atomic.Uint64
}

func (h *health) corruptionFound(s *segment, b badRange) {
	h.corruptFound.Add(1)
	to := any(b.toOffset)
	if b.toOffset < 0 {
		to = "end of segment"
	}
	h.logger.Error("damaged data in the log: these offsets are not served (reads answer a corruption error) and nothing is deleted",
		"segment", s.name(), "from_offset", b.fromOffset, "to_offset", to,
		"from_byte", b.fromPos, "to_byte", b.toPos, "reason", b.reason)
}

func (h *health) missingFound(s *segment, from, to int64) {
	h.corruptFound.Add(1)
	h.logger.Error("flushed data missing from the log: these offsets are not served (reads answer a corruption error) and are not given again",
		"segment", s.name(), "from_offset", from, "to_offset", to)
}

func (h *health) indexFailed(s *segment, reason string) {
	h.indexFailures.Add(1)
	h.logger.Warn("segment index does not match its data; scanning the segment and rebuilding the index",
		"segment", s.name(), "reason", reason)
}

// CorruptRange is a stretch of the log whose stored bytes are damaged: the
// offsets in [FromOffset, ToOffset) cannot be read (ToOffset is -1 when the
// damage runs to the end of its segment, whose successor starts at the
// next segment's base). Recovery and reads find them; nothing in them is
// served and nothing around them is deleted. An operator clears one by
// moving the log start past it (DeleteRecords) once its data is written
// off, or, in a cluster, by letting the replica be rebuilt from another.
type CorruptRange struct {
	Segment    int64 // base offset of the segment holding it
	FromOffset int64
	ToOffset   int64
	FromByte   int64 // position in the segment file; -1 for missing offsets (no bytes are left)
	ToByte     int64
	Reason     string
}

// CorruptRanges lists the damaged stretches found so far, oldest first.
// Ranges below the log start are gone with their segments.
func (l *Log) CorruptRanges() []CorruptRange {
	l.segMu.RLock()
	var out []CorruptRange
	var open []*segment // segments whose damage ends where nothing was known yet
	for i, s := range l.segments {
		for _, b := range s.badRanges() {
			to := b.toOffset
			if to < 0 && i+1 < len(l.segments) {
				to = l.segments[i+1].base
			}
			if to < 0 && s.tryAcquire() {
				open = append(open, s)
			}
			out = append(out, CorruptRange{Segment: s.base, FromOffset: b.fromOffset, ToOffset: to,
				FromByte: b.fromPos, ToByte: b.toPos, Reason: b.reason})
		}
	}
	for _, m := range l.missing {
		if m.ToOffset > l.logStart.Load() {
			out = append(out, m)
		}
	}
	l.segMu.RUnlock()
	// Damage found by a read in the active segment ends where that read
	// could see; a batch written after it says where it really ends.
	for _, s := range open {
		for i := range out {
			if out[i].Segment == s.base && out[i].ToOffset < 0 {
				out[i].ToOffset = s.offsetAfterBad(out[i].FromByte, out[i].ToByte, out[i].FromOffset)
			}
		}
		s.release()
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].FromOffset < out[j].FromOffset })
	return out
}

// missingRange describes offsets [from, to) gone from the end of segment
// seg (no bytes are left of them).
func missingRange(seg, from, to int64) CorruptRange {
	return CorruptRange{Segment: seg, FromOffset: from, ToOffset: to, FromByte: -1, ToByte: -1,
		Reason: "flushed batches missing at the end of a segment"}
}

// clipMissing keeps the missing ranges still inside [logStart, leo),
// clipped to it; changed says whether any was dropped or clipped.
func clipMissing(ranges []CorruptRange, logStart, leo int64) (kept []CorruptRange, changed bool) {
	for _, m := range ranges {
		if m.ToOffset <= logStart || m.FromOffset >= leo {
			changed = true
			continue
		}
		if m.ToOffset > leo {
			m.ToOffset, changed = leo, true
		}
		kept = append(kept, m)
	}
	return kept, changed
}

// missingAt returns the missing range holding offset, if any.
func (l *Log) missingAt(offset int64) (CorruptRange, bool) {
	for _, m := range l.missing {
		if offset >= m.FromOffset && offset < m.ToOffset {
			return m, true
		}
	}
	return CorruptRange{}, false
}
