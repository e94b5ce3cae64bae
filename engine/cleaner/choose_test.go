package cleaner

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFirstUncleanable(t *testing.T) {
	for _, tc := range []struct{ hw, lso, active, want int64 }{
		{100, 100, 100, 100},
		{50, 100, 100, 50}, // above the HW records may be truncated
		{100, 40, 100, 40}, // an open transaction's records may be aborted
		{100, 100, 70, 70}, // the active segment is never cleaned
		{0, 0, 0, 0},
	} {
		require.Equal(t, tc.want, FirstUncleanable(tc.hw, tc.lso, tc.active), "%+v", tc)
	}
}

// Kafka's eligibility rule, table-driven, time as an argument.
func TestEvaluate(t *testing.T) {
	now := time.UnixMilli(1_000_000_000)
	hour := time.Hour
	never := time.Duration(math.MaxInt64)
	base := Candidate{MinRatio: 0.5, MaxLag: never, FirstDirtyTimestamp: NoTimestamp, CleanableBytes: 1000}
	with := func(f func(*Candidate)) Candidate { c := base; f(&c); return c }
	for _, tc := range []struct {
		name string
		c    Candidate
		want Verdict
	}{
		{"clean log", with(func(c *Candidate) { c.Ratio = 0 }), Verdict{}},
		{"below the ratio", with(func(c *Candidate) { c.Ratio = 0.49 }), Verdict{}},
		{"at the ratio: Kafka wants strictly more", with(func(c *Candidate) { c.Ratio = 0.5 }), Verdict{}},
		{"above the ratio", with(func(c *Candidate) { c.Ratio = 0.51 }), Verdict{Eligible: true}},
		{"min ratio 0 and a dirty byte", with(func(c *Candidate) { c.MinRatio, c.Ratio = 0, 0.001 }), Verdict{Eligible: true}},
		{"min ratio 0 and nothing dirty", with(func(c *Candidate) { c.MinRatio, c.Ratio = 0, 0 }), Verdict{}},
		{"nothing cleanable", with(func(c *Candidate) { c.Ratio, c.CleanableBytes = 0.9, 0 }), Verdict{}},
		{"max lag passed: forced below the ratio", with(func(c *Candidate) {
			c.Ratio, c.MaxLag, c.FirstDirtyTimestamp = 0.1, hour, now.Add(-2*hour).UnixMilli()
		}), Verdict{Eligible: true, Forced: true, CompactionDelay: hour}},
		{"max lag not passed", with(func(c *Candidate) {
			c.Ratio, c.MaxLag, c.FirstDirtyTimestamp = 0.1, hour, now.Add(-hour+time.Millisecond).UnixMilli()
		}), Verdict{}},
		{"max lag exactly reached: not past it", with(func(c *Candidate) {
			c.Ratio, c.MaxLag, c.FirstDirtyTimestamp = 0.1, hour, now.Add(-hour).UnixMilli()
		}), Verdict{}},
		{"max lag passed but nothing cleanable", with(func(c *Candidate) {
			c.Ratio, c.CleanableBytes, c.MaxLag, c.FirstDirtyTimestamp = 0, 0, hour, now.Add(-2*hour).UnixMilli()
		}), Verdict{CompactionDelay: hour}},
		{"max lag unset (Long.MAX)", with(func(c *Candidate) {
			c.Ratio, c.FirstDirtyTimestamp = 0.1, now.Add(-1000*hour).UnixMilli()
		}), Verdict{}},
		{"dirty timestamp unknown", with(func(c *Candidate) { c.Ratio, c.MaxLag = 0.1, hour }), Verdict{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Evaluate(now, tc.c))
		})
	}
}

func TestChoosePicksTheDirtiest(t *testing.T) {
	now := time.UnixMilli(1_000_000_000)
	never := time.Duration(math.MaxInt64)
	c := func(topic string, p int32, ratio float64, bytes int64) Candidate {
		return Candidate{TopicPartition: TopicPartition{topic, p}, Ratio: ratio, CleanableBytes: bytes,
			MinRatio: 0.5, MaxLag: never, FirstDirtyTimestamp: NoTimestamp}
	}
	for _, tc := range []struct {
		name  string
		cands []Candidate
		want  int // -1: none
	}{
		{"none", nil, -1},
		{"none eligible", []Candidate{c("a", 0, 0.2, 10), c("b", 0, 0.5, 10)}, -1},
		{"dirtiest", []Candidate{c("a", 0, 0.6, 10), c("b", 0, 0.9, 10), c("c", 0, 0.7, 10)}, 1},
		{"ratio tie: more bytes", []Candidate{c("a", 0, 0.8, 10), c("b", 0, 0.8, 20)}, 1},
		{"full tie: by name", []Candidate{c("b", 0, 0.8, 10), c("a", 1, 0.8, 10), c("a", 0, 0.8, 10)}, 2},
		{"forced one is eligible, the dirtiest eligible wins", []Candidate{
			func() Candidate {
				x := c("lagging", 0, 0.1, 10)
				x.MaxLag, x.FirstDirtyTimestamp = time.Minute, now.Add(-time.Hour).UnixMilli()
				return x
			}(),
			c("dirty", 0, 0.3, 10),
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, _, ok := Choose(now, tc.cands)
			require.Equal(t, tc.want >= 0, ok)
			require.Equal(t, tc.want, i)
		})
	}
}
