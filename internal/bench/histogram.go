package bench

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram is a log-bucketed latency histogram in the spirit of
// HdrHistogram: values below 2^subBits nanoseconds are counted exactly;
// above, each power-of-two range is split into 2^subBits linear sub-buckets,
// so any recorded value is reported within 1/2^subBits (< 0.8%) of its true
// value, from 1ns to the full int64 range, in a fixed 59 KiB.
//
// Record is safe for concurrent use (atomic counters, no locks on the hot
// path); read methods should run after recording stopped (or tolerate a
// slightly inconsistent snapshot).
type Histogram struct {
	counts [numBuckets]atomic.Uint64
	total  atomic.Uint64
	sum    atomic.Uint64 // nanoseconds; wraps only after ~584 years of latency
	min    atomic.Uint64 // stored as value+1 so zero means "unset"
	max    atomic.Uint64
}

const (
	subBits    = 7
	subCount   = 1 << subBits                     // 128 exact values, then 128 sub-buckets per octave
	numBuckets = subCount + (64-subBits)*subCount // 7424
)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram { return &Histogram{} }

// bucketOf maps a value to its bucket index.
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	// v has l significant bits (l > subBits); keep the top subBits+1 bits.
	shift := bits.Len64(v) - subBits - 1
	top := v >> uint(shift) // in [subCount, 2*subCount)
	return subCount + shift*subCount + int(top-subCount)
}

// bucketHigh returns the largest value that maps to bucket i, the value
// reported for it (so percentiles never understate latency).
func bucketHigh(i int) uint64 {
	if i < subCount {
		return uint64(i)
	}
	shift := (i - subCount) / subCount
	top := uint64(subCount + (i-subCount)%subCount)
	hi := (top+1)<<uint(shift) - 1
	if hi < top { // overflow at the very top bucket
		return math.MaxUint64
	}
	return hi
}

// Record adds one observation. Negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucketOf(v)].Add(1)
	h.total.Add(1)
	h.sum.Add(v)
	for {
		cur := h.max.Load()
		if v <= cur || h.max.CompareAndSwap(cur, v) {
			break
		}
	}
	for {
		cur := h.min.Load()
		if (cur != 0 && v+1 >= cur) || h.min.CompareAndSwap(cur, v+1) {
			break
		}
	}
}

// Merge adds o's observations to h.
func (h *Histogram) Merge(o *Histogram) {
	for i := range o.counts {
		if n := o.counts[i].Load(); n > 0 {
			h.counts[i].Add(n)
		}
	}
	h.total.Add(o.total.Load())
	h.sum.Add(o.sum.Load())
	if m := o.max.Load(); m > h.max.Load() {
		h.max.Store(m)
	}
	if m := o.min.Load(); m != 0 && (h.min.Load() == 0 || m < h.min.Load()) {
		h.min.Store(m)
	}
}

// Count returns the number of observations.
func (h *Histogram) Count() uint64 { return h.total.Load() }

// Max returns the largest observation (exact).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Min returns the smallest observation (exact), 0 if empty.
func (h *Histogram) Min() time.Duration {
	if m := h.min.Load(); m > 0 {
		return time.Duration(m - 1)
	}
	return 0
}

// Mean returns the average observation, 0 if empty.
func (h *Histogram) Mean() time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / n)
}

// Quantile returns the value at quantile q in [0, 1] (0.99 = p99): the
// upper bound of the bucket holding the ceil(q*count)-th observation,
// capped at Max. 0 if empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return min(time.Duration(bucketHigh(i)), h.Max())
		}
	}
	return h.Max()
}
