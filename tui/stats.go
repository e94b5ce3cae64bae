package tui

import (
	"math"
	"strings"
	"time"

	"github.com/moonmq/moonmq/net/client"
)

// sample is one observation of a series; NaN means "not known at that time"
// (the broker did not answer, or there was no previous snapshot to diff).
type sample struct {
	at time.Time
	v  float64
}

// series is a time-ordered history of samples, trimmed to a window.
type series struct {
	samples []sample
}

func (s *series) add(at time.Time, v float64, window time.Duration) {
	s.samples = append(s.samples, sample{at, v})
	// Trim in chunks so the slice is not copied on every add.
	cut := 0
	for cut < len(s.samples) && at.Sub(s.samples[cut].at) > window {
		cut++
	}
	if cut > 0 && (cut >= 64 || cut*2 >= len(s.samples)) {
		s.samples = append(s.samples[:0], s.samples[cut:]...)
	}
}

// last returns the newest sample, if any.
func (s *series) last() (sample, bool) {
	if s == nil || len(s.samples) == 0 {
		return sample{}, false
	}
	return s.samples[len(s.samples)-1], true
}

// sparkRunes are the eight heights of a sparkline cell, lowest first.
var sparkRunes = []rune("▁▂▃▄▅▆▇█")

// sparkline renders the series over [now-window, now] as width cells, oldest
// on the left. Each cell averages the samples that fall in its time slice;
// a slice without samples repeats the previous value if that sample is
// younger than maxGap (refresh slower than the slice width), and is blank
// otherwise (before the dashboard started, or while the broker was away).
// Zero is the lowest bar; any positive value is at least one step higher,
// so "a little" never looks like "nothing".
func sparkline(s *series, now time.Time, window, maxGap time.Duration, width int) string {
	if width <= 0 {
		return ""
	}
	vals := make([]float64, width)
	for i := range vals {
		vals[i] = math.NaN()
	}
	if s != nil && window > 0 {
		start := now.Add(-window)
		slice := float64(window) / float64(width)
		sums := make([]float64, width)
		counts := make([]int, width)
		gaps := make([]bool, width) // a NaN sample: the value was unknown then
		for _, sm := range s.samples {
			if sm.at.Before(start) || sm.at.After(now) {
				continue
			}
			i := min(int(float64(sm.at.Sub(start))/slice), width-1)
			if math.IsNaN(sm.v) {
				gaps[i] = true
				continue
			}
			sums[i] += sm.v
			counts[i]++
		}
		// Carry-forward needs the last sample before the window.
		lastV, lastAt, have := 0.0, time.Time{}, false
		for _, sm := range s.samples {
			if !sm.at.Before(start) {
				break
			}
			lastV, lastAt, have = sm.v, sm.at, !math.IsNaN(sm.v)
		}
		for i := range vals {
			sliceStart := start.Add(time.Duration(float64(i) * slice))
			switch {
			case counts[i] > 0:
				vals[i] = sums[i] / float64(counts[i])
				lastV, lastAt, have = vals[i], sliceStart, true
			case gaps[i]:
				have = false // an outage ends the carry-forward
			case have && sliceStart.Sub(lastAt) <= maxGap:
				vals[i] = lastV
			}
		}
	}
	peak := 0.0
	for _, v := range vals {
		if !math.IsNaN(v) && v > peak {
			peak = v
		}
	}
	var sb strings.Builder
	for _, v := range vals {
		switch {
		case math.IsNaN(v):
			sb.WriteByte(' ')
		case v <= 0 || peak == 0:
			sb.WriteRune(sparkRunes[0])
		default:
			lvl := int(math.Ceil(v / peak * float64(len(sparkRunes)-1)))
			sb.WriteRune(sparkRunes[min(max(lvl, 1), len(sparkRunes)-1)])
		}
	}
	return sb.String()
}

// commitWindow is the span consume (commit) rates are averaged over. Kafka
// consumers commit every 5 s by default (auto.commit.interval.ms), so a
// shorter span would show bursts and zeros instead of a rate.
const commitWindow = 10 * time.Second

// brokerSeen remembers a broker so the overview can show it as down after it
// leaves the metadata (Kafka lists only live brokers).
type brokerSeen struct {
	broker   client.Broker
	lastSeen time.Time
	up       bool
}

// tracker turns successive snapshots into rates and histories. Rates are
// differences between the last two snapshots that both carried the numbers
// (end offsets, sizes, committed offsets) divided by the time between them;
// a number that went down (topic re-created, group reset, retention) counts
// as zero progress rather than a negative rate.
type tracker struct {
	window time.Duration
	// minInterval is the shortest time between two snapshots that rates
	// are computed over: an extra refresh (r, opening a view) right after
	// a tick would otherwise turn jitter into wild rates.
	minInterval time.Duration

	prev   *snapshot   // last snapshot (produce rates are computed against it)
	recent []*snapshot // base for commit rates, then newer snapshots; see commitWindow

	// Latest rates; the *Known flags say whether a rate could be computed.
	topicIn      map[string]float64
	topicInBytes map[string]float64 // absent: size unknown
	topicOut     map[string]float64
	partIn       map[string]map[int32]float64
	groupCommit  map[string]float64
	totalIn      float64
	totalOut     float64
	totalBytes   float64
	inKnown      bool
	outKnown     bool
	bytesKnown   bool

	inHist, outHist, bytesHist series
	lagHist                    map[string]*series

	brokers map[int32]*brokerSeen
}

func newTracker(window, minInterval time.Duration) *tracker {
	return &tracker{
		window:      window,
		minInterval: minInterval,
		lagHist:     map[string]*series{},
		brokers:     map[int32]*brokerSeen{},
	}
}

// observe folds a snapshot in. A failed snapshot (s.err set) records gaps
// in the histories so sparklines show the outage.
func (t *tracker) observe(s *snapshot) {
	if s.err != nil {
		t.inHist.add(s.at, math.NaN(), t.window)
		t.outHist.add(s.at, math.NaN(), t.window)
		t.bytesHist.add(s.at, math.NaN(), t.window)
		t.inKnown, t.outKnown, t.bytesKnown = false, false, false
		return
	}
	for _, b := range t.brokers {
		b.up = false
	}
	for _, b := range s.cluster.Brokers {
		t.brokers[b.ID] = &brokerSeen{broker: b, lastSeen: s.at, up: true}
	}

	for _, g := range s.groups {
		if g.desc != nil {
			h := t.lagHist[g.summary.Name]
			if h == nil {
				h = &series{}
				t.lagHist[g.summary.Name] = h
			}
			h.add(s.at, float64(g.desc.TotalLag), t.window)
		}
	}
	for name, h := range t.lagHist {
		if last, ok := h.last(); ok && s.at.Sub(last.at) > t.window {
			delete(t.lagHist, name) // group gone for longer than the window
		}
	}

	prev := t.prev
	if prev != nil && s.at.Sub(prev.at) < t.minInterval {
		return // too soon after the last one: keep its rates and baseline
	}
	t.prev = s
	// Keep the snapshots of the last commitWindow, plus the newest one
	// older than that, as the base for commit rates.
	t.recent = append(t.recent, s)
	for len(t.recent) > 2 && s.at.Sub(t.recent[1].at) >= commitWindow {
		t.recent = t.recent[1:]
	}
	t.topicIn, t.topicInBytes, t.topicOut = map[string]float64{}, map[string]float64{}, map[string]float64{}
	t.partIn, t.groupCommit = map[string]map[int32]float64{}, map[string]float64{}
	t.totalIn, t.totalOut, t.totalBytes = 0, 0, 0
	t.inKnown, t.outKnown, t.bytesKnown = false, false, false

	var dt float64
	if prev != nil {
		dt = s.at.Sub(prev.at).Seconds()
	}
	if dt <= 0 {
		t.inHist.add(s.at, math.NaN(), t.window)
		t.outHist.add(s.at, math.NaN(), t.window)
		t.bytesHist.add(s.at, math.NaN(), t.window)
		return
	}
	internal := map[string]bool{}
	for _, ti := range s.topics {
		internal[ti.Name] = ti.Internal
	}

	// Produce: end-offset deltas.
	if s.ends != nil && prev.ends != nil {
		t.inKnown = true
		for topic, parts := range s.ends {
			before, ok := prev.ends[topic]
			if !ok {
				continue
			}
			var sum float64
			for p, end := range parts {
				if b, ok := before[p]; ok && end > b {
					r := float64(end-b) / dt
					if t.partIn[topic] == nil {
						t.partIn[topic] = map[int32]float64{}
					}
					t.partIn[topic][p] = r
					sum += r
				}
			}
			t.topicIn[topic] = sum
			if !internal[topic] {
				t.totalIn += sum
			}
		}
	}

	// Bytes: size deltas, only where both snapshots know the size.
	prevBytes := map[string]int64{}
	for _, ti := range prev.topics {
		prevBytes[ti.Name] = ti.Bytes
	}
	t.bytesKnown = len(s.topics) > 0
	for _, ti := range s.topics {
		b, ok := prevBytes[ti.Name]
		if !ok || b < 0 || ti.Bytes < 0 {
			if !ti.Internal {
				t.bytesKnown = false
			}
			continue
		}
		r := float64(max(ti.Bytes-b, 0)) / dt
		t.topicInBytes[ti.Name] = r
		if !ti.Internal {
			t.totalBytes += r
		}
	}

	// Consume: committed-offset deltas of every group seen in both, over
	// commitWindow: consumers commit every few seconds, so a per-refresh
	// difference would flicker between zero and bursts.
	base := t.recent[0]
	dtOut := s.at.Sub(base.at).Seconds()
	if s.groupsErr == nil && base.groupsErr == nil && dtOut > 0 {
		t.outKnown = true
		before := map[string]map[tp]int64{}
		for _, g := range base.groups {
			if g.desc != nil {
				before[g.summary.Name] = committedMap(g.desc)
			}
		}
		for _, g := range s.groups {
			if g.desc == nil {
				continue
			}
			old, ok := before[g.summary.Name]
			if !ok {
				continue
			}
			var sum float64
			for k, c := range committedMap(g.desc) {
				if b, ok := old[k]; ok && c > b {
					r := float64(c-b) / dtOut
					t.topicOut[k.topic] += r
					sum += r
					if !internal[k.topic] {
						t.totalOut += r
					}
				}
			}
			t.groupCommit[g.summary.Name] = sum
		}
	}

	t.addRate(&t.inHist, s.at, t.totalIn, t.inKnown)
	t.addRate(&t.outHist, s.at, t.totalOut, t.outKnown)
	t.addRate(&t.bytesHist, s.at, t.totalBytes, t.bytesKnown)
}

func (t *tracker) addRate(h *series, at time.Time, v float64, known bool) {
	if !known {
		v = math.NaN()
	}
	h.add(at, v, t.window)
}

// tp is a topic-partition map key.
type tp struct {
	topic     string
	partition int32
}

func committedMap(d *client.GroupDescription) map[tp]int64 {
	out := make(map[tp]int64, len(d.Offsets))
	for _, o := range d.Offsets {
		if o.Committed >= 0 {
			out[tp{o.Topic, o.Partition}] = o.Committed
		}
	}
	return out
}

// in returns a topic's produce rate and whether it is known.
func (t *tracker) in(topic string) (float64, bool) {
	if !t.inKnown {
		return 0, false
	}
	v, ok := t.topicIn[topic]
	return v, ok
}

// out returns a topic's consume (commit) rate and whether it is known. A
// topic no group commits to has a known rate of zero.
func (t *tracker) out(topic string) (float64, bool) {
	if !t.outKnown {
		return 0, false
	}
	return t.topicOut[topic], true
}

// inBytes returns a topic's produce rate in bytes/s and whether it is known.
func (t *tracker) inBytes(topic string) (float64, bool) {
	v, ok := t.topicInBytes[topic]
	return v, ok
}

// partitionIn returns one partition's produce rate.
func (t *tracker) partitionIn(topic string, p int32) (float64, bool) {
	if !t.inKnown {
		return 0, false
	}
	if _, ok := t.topicIn[topic]; !ok {
		return 0, false
	}
	return t.partIn[topic][p], true
}
