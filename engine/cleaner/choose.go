package cleaner

import (
	"math"
	"time"
)

// Candidate is what the choice of the next partition to clean needs to know
// about one partition.
type Candidate struct {
	TopicPartition
	// Ratio and CleanableBytes (the dirty bytes) are Log.DirtyRatio at the
	// first uncleanable offset.
	Ratio          float64
	CleanableBytes int64
	// MinRatio is min.cleanable.dirty.ratio; MaxLag is
	// max.compaction.lag.ms (math.MaxInt64: never forced).
	MinRatio float64
	MaxLag   time.Duration
	// FirstDirtyTimestamp is the max timestamp of the oldest dirty batch in
	// Unix milliseconds, or NoTimestamp when it is unknown or there is none.
	FirstDirtyTimestamp int64
}

// NoTimestamp is a FirstDirtyTimestamp that is unknown (Kafka's
// RecordBatch.NO_TIMESTAMP).
const NoTimestamp = -1

// Verdict is the evaluation of one candidate at a given time.
type Verdict struct {
	// Eligible: the candidate may be cleaned now.
	Eligible bool
	// Forced: eligible because a dirty record waited past
	// max.compaction.lag.ms, whatever the ratio.
	Forced bool
	// CompactionDelay is how far past max.compaction.lag.ms the oldest
	// dirty record is (Kafka's max-compaction-delay-secs); 0 when it is not.
	CompactionDelay time.Duration
}

// Evaluate applies Kafka's rule to one candidate at now: eligible when
// the dirty ratio exceeds min.cleanable.dirty.ratio (strictly, as Kafka's
// cleanableRatio > minCleanableRatio, so a ratio of 0 never cleans a clean
// log in a loop), or when its oldest dirty batch is older than
// max.compaction.lag.ms and it has cleanable bytes.
func Evaluate(now time.Time, c Candidate) Verdict {
	var v Verdict
	if c.FirstDirtyTimestamp != NoTimestamp && c.FirstDirtyTimestamp > 0 && c.MaxLag < math.MaxInt64 {
		lagMs := max(c.MaxLag.Milliseconds(), 0)
		cleanUntil := now.UnixMilli() - lagMs
		if c.FirstDirtyTimestamp < cleanUntil {
			v.CompactionDelay = time.Duration(cleanUntil-c.FirstDirtyTimestamp) * time.Millisecond
		}
	}
	v.Forced = v.CompactionDelay > 0 && c.CleanableBytes > 0
	v.Eligible = c.CleanableBytes > 0 && (v.Forced || c.Ratio > c.MinRatio)
	return v
}

// Choose picks the candidate to clean next at now: the eligible one with
// the highest dirty ratio (Kafka's filthiest log), ties broken by more
// cleanable bytes, then by topic and partition so the choice is
// deterministic. ok is false when none is eligible.
func Choose(now time.Time, cands []Candidate) (index int, v Verdict, ok bool) {
	index = -1
	for i, c := range cands {
		cv := Evaluate(now, c)
		if !cv.Eligible {
			continue
		}
		if index < 0 || better(c, cands[index]) {
			index, v = i, cv
		}
	}
	return index, v, index >= 0
}

func better(a, b Candidate) bool {
	switch {
	case a.Ratio != b.Ratio:
		return a.Ratio > b.Ratio
	case a.CleanableBytes != b.CleanableBytes:
		return a.CleanableBytes > b.CleanableBytes
	case a.Topic != b.Topic:
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}
