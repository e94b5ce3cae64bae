package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.UnixMilli(1_700_000_000_000)

func TestFakeTimersFireInOrderAtTheirDeadlines(t *testing.T) {
	f := NewFake(t0)
	late, early := f.NewTimer(2*time.Second), f.NewTimer(time.Second)
	ran := make(chan time.Time, 1)
	f.AfterFunc(1500*time.Millisecond, func() { ran <- f.Now() })
	require.Equal(t, []time.Duration{time.Second, 1500 * time.Millisecond, 2 * time.Second}, f.Timers())

	f.Advance(time.Second - 1)
	select {
	case <-early.C():
		t.Fatal("fired before its deadline")
	default:
	}
	f.Advance(1)
	require.Equal(t, t0.Add(time.Second), <-early.C())
	f.Advance(time.Hour)
	require.Equal(t, t0.Add(2*time.Second), <-late.C())
	require.Equal(t, t0.Add(time.Second+time.Hour), <-ran, "AfterFunc runs on its own goroutine, after Advance")
	require.Empty(t, f.Timers())
	require.Equal(t, t0.Add(time.Second+time.Hour), f.Now())
}

func TestFakeStopAndResetDropStaleTicks(t *testing.T) {
	f := NewFake(t0)
	tm := f.NewTimer(time.Second)
	f.Advance(time.Second) // fires; nobody reads it
	require.False(t, tm.Stop(), "already fired")
	require.False(t, tm.Reset(time.Second))
	select {
	case <-tm.C():
		t.Fatal("a value from before the Reset")
	default:
	}
	require.True(t, tm.Stop())
	f.Advance(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	fn := f.AfterFunc(time.Second, func() { t.Error("a stopped AfterFunc ran") })
	require.True(t, fn.Stop())
	f.Advance(time.Hour)
}

func TestFakeTicker(t *testing.T) {
	f := NewFake(t0)
	tk := f.NewTicker(time.Second)
	f.Advance(10 * time.Second) // one tick: the others are dropped, as a real ticker drops them
	require.Equal(t, t0.Add(time.Second), <-tk.C())
	select {
	case <-tk.C():
		t.Fatal("missed ticks are dropped")
	default:
	}
	require.Equal(t, []time.Duration{time.Second}, f.Timers(), "the next tick is a period after now")
	tk.Reset(time.Minute)
	require.Equal(t, []time.Duration{time.Minute}, f.Timers())
	tk.Stop()
	require.Empty(t, f.Timers())
	require.Panics(t, func() { tk.Reset(0) }, "as time.Ticker.Reset panics")
}

// TestFakeTickerLongAdvance: an Advance across a huge number of periods
// is one step (it used to walk every period) and still delivers one tick.
func TestFakeTickerLongAdvance(t *testing.T) {
	f := NewFake(t0)
	tk := f.NewTicker(time.Nanosecond)
	f.Advance(time.Hour)
	require.Equal(t, t0.Add(time.Nanosecond), <-tk.C())
	require.Equal(t, []time.Duration{time.Nanosecond}, f.Timers())
}

func TestRealClock(t *testing.T) {
	tm := Real.NewTimer(time.Millisecond)
	<-tm.C()
	done := make(chan struct{})
	Real.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
	tk := Real.NewTicker(time.Millisecond)
	<-tk.C()
	tk.Stop()
	require.False(t, Real.Now().IsZero())
}
