package quota

import (
	"math"
	"time"
)

// sample is one window of a rate: Kafka's SampledStat.Sample for a
// WindowedSum (value is the sum of what was recorded in the window).
type sample struct {
	start, last int64 // ms: when the window began, when it last saw a value
	count       int64
	value       float64
}

func (s *sample) reset(now int64) { *s = sample{start: now, last: now} }

// rate is Kafka's Rate over a WindowedSum: a ring of samples+1 windows
// (one extra for the window that overlaps the start of the monitored
// span), each windowMs long. Its value is the sum of the retained
// windows divided by the span they cover, and that span is at least
// samples-1 whole windows, so a client's first burst is measured over
// ten seconds, not over the milliseconds it took (which would throttle
// every new client).
type rate struct {
	samples []sample
	current int
}

// params are the window settings shared by every rate of a Manager.
type params struct {
	windowMs int64
	samples  int
}

func (r *rate) currentSample(now int64) *sample {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{start: now, last: now})
	}
	return &r.samples[r.current]
}

// record adds v at now (v may be negative: Kafka "unrecords" a throttled
// fetch's bytes that way).
func (r *rate) record(p params, v float64, now int64) {
	s := r.currentSample(now)
	if now-s.start >= p.windowMs {
		// advance to the next sample of the ring, reusing the oldest
		r.current = (r.current + 1) % (p.samples + 1)
		if r.current >= len(r.samples) {
			r.samples = append(r.samples, sample{start: now, last: now})
		} else {
			r.samples[r.current].reset(now)
		}
		s = &r.samples[r.current]
	}
	s.value += v
	s.count++
	s.last = now
}

// purge resets the samples that saw no value within the monitored span
// (samples windows); samples overlapping it are kept even if they
// started before it.
func (r *rate) purge(p params, now int64) {
	expire := int64(p.samples) * p.windowMs
	for i := range r.samples {
		if now-r.samples[i].last >= expire {
			r.samples[i].reset(now)
		}
	}
}

func (r *rate) oldest(now int64) *sample {
	o := r.currentSample(now)
	for i := range r.samples {
		if r.samples[i].start < o.start {
			o = &r.samples[i]
		}
	}
	return o
}

// windowSize is Rate.windowSize: the time since the oldest retained
// sample began, padded to at least samples-1 whole windows, at least 1 ms.
func (r *rate) windowSize(p params, now int64) int64 {
	r.purge(p, now)
	elapsed := now - r.oldest(now).start
	full := elapsed / p.windowMs
	if min := int64(p.samples - 1); full < min {
		elapsed += (min - full) * p.windowMs
	}
	return max(elapsed, 1)
}

// measure is the rate per second at now.
func (r *rate) measure(p params, now int64) float64 {
	r.purge(p, now)
	var sum float64
	for i := range r.samples {
		sum += r.samples[i].value
	}
	return sum / (float64(r.windowSize(p, now)) / 1000)
}

// idle reports whether every sample is past the monitored span: the rate
// then measures exactly what a new one would, so it can be dropped.
func (r *rate) idle(p params, now int64) bool {
	expire := int64(p.samples) * p.windowMs
	for i := range r.samples {
		if now-r.samples[i].last < expire {
			return false
		}
	}
	return true
}

// ThrottleTime is Kafka's QuotaUtils.throttleTime: the delay X that
// brings an observed rate O measured over a span W back to the bound T
// if nothing more is recorded, from O*W/(W+X) = T: X = (O-T)/T * W.
// Zero when the rate is within the bound.
func ThrottleTime(observed, bound float64, span time.Duration) time.Duration {
	if !(observed > bound) { // within, or NaN (no decision can be made)
		return 0
	}
	if bound <= 0 {
		// A zero quota: nothing is acceptable; the longest delay a
		// response can carry (Kafka would divide by zero into +Inf).
		return maxThrottle
	}
	ms := math.Round((observed - bound) / bound * float64(span.Milliseconds()))
	if ms >= float64(maxThrottle.Milliseconds()) {
		return maxThrottle
	}
	return time.Duration(ms) * time.Millisecond
}

// maxThrottle is the largest throttle time a response can carry (its
// throttle_time_ms is an int32).
const maxThrottle = time.Duration(math.MaxInt32) * time.Millisecond
