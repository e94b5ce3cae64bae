// Package clock is the time source of the broker's timers: the log
// flusher's interval and group-commit window, produce durability timeouts,
// long-poll fetches and the replica manager's housekeeping. Production code
// uses Real; tests that must not depend on the machine's speed use a Fake
// and move its time themselves, so they assert what happens in which order
// instead of how long it took. (Tests without sockets can also run the real
// clock inside testing/synctest; a Fake serves those that talk TCP.)
//
// The package is a leaf: it imports no other MoonMQ package, so the storage
// packages may use it.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers, as package time does.
type Clock interface {
	Now() time.Time
	// NewTimer is time.NewTimer.
	NewTimer(d time.Duration) Timer
	// AfterFunc is time.AfterFunc: f runs on its own goroutine.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTicker is time.NewTicker.
	NewTicker(d time.Duration) Ticker
}

// Timer is a *time.Timer.
type Timer interface {
	// C is the channel the time is sent on; nil for an AfterFunc timer.
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Ticker is a *time.Ticker.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	Reset(d time.Duration)
}

// Real is the machine's clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer            { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker          { return realTicker{time.NewTicker(d)} }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

// realTimer and realTicker hold one pointer, so storing them in an
// interface allocates nothing.
type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time   { return t.t.C }
func (t realTicker) Stop()                 { t.t.Stop() }
func (t realTicker) Reset(d time.Duration) { t.t.Reset(d) }

// Fake is a clock whose time moves only when Advance is called. Its timers
// fire during Advance, in deadline order, each with Now at its deadline.
// Like package time's since Go 1.23, a stopped or reset timer never
// delivers a value from before. Safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	pending []*fakeTimer
}

// NewFake returns a Fake clock reading now.
func NewFake(now time.Time) *Fake { return &Fake{now: now} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the time on by d, firing every timer due by then.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	target := f.now.Add(d)
	for {
		sort.SliceStable(f.pending, func(i, j int) bool { return f.pending[i].at.Before(f.pending[j].at) })
		if len(f.pending) == 0 || f.pending[0].at.After(target) {
			break
		}
		t := f.pending[0]
		f.pending = f.pending[1:]
		if t.at.After(f.now) {
			f.now = t.at
		}
		t.fire(f, target)
	}
	f.now = target
}

// Timers returns how long after Now each pending timer and ticker fires,
// soonest first: a test waits until the timer it means to fire is armed.
func (f *Fake) Timers() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]time.Duration, 0, len(f.pending))
	for _, t := range f.pending {
		out = append(out, t.at.Sub(f.now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// NewTimer returns a timer that fires once Advance passes now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	return f.add(&fakeTimer{c: make(chan time.Time, 1)}, d)
}

// AfterFunc returns a timer that runs fn on its own goroutine once Advance
// passes now+d.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	return f.add(&fakeTimer{fn: fn}, d)
}

// NewTicker returns a ticker that fires every d of fake time. Like a real
// one, it drops ticks its reader misses, and one Advance across many
// periods delivers one tick.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	return fakeTicker{f.add(&fakeTimer{c: make(chan time.Time, 1), period: d}, d)}
}

func (f *Fake) add(t *fakeTimer, d time.Duration) *fakeTimer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t.clock = f
	t.at = f.now.Add(d)
	f.pending = append(f.pending, t)
	return t
}

// fakeTimer is a Fake's timer, ticker or AfterFunc.
type fakeTimer struct {
	clock  *Fake
	at     time.Time
	c      chan time.Time // nil for AfterFunc
	fn     func()
	period time.Duration // tickers
}

// fire delivers t's tick and, for a ticker, schedules the next one after
// target, the time Advance moves to: one Advance delivers one tick (see
// NewTicker), even to a reader draining the channel meanwhile, and costs
// one step, not one per period. Caller holds f.mu and has removed t from
// f.pending.
func (t *fakeTimer) fire(f *Fake, target time.Time) {
	if t.fn != nil {
		go t.fn()
		return
	}
	select {
	case t.c <- t.at:
	default: // the reader missed the previous tick: drop this one
	}
	if t.period > 0 {
		missed := target.Sub(t.at) / t.period
		t.at = t.at.Add((missed + 1) * t.period)
		f.pending = append(f.pending, t)
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

// Stop disarms t and reports whether it was armed.
func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	return t.disarm()
}

// Reset rearms t to fire d after now and reports whether it was armed.
func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	was := t.disarm()
	t.at = f.now.Add(d)
	if t.period > 0 {
		t.period = d
	}
	f.pending = append(f.pending, t)
	return was
}

// disarm removes t from the pending timers and drains a tick it sent
// before. Caller holds the clock's mutex.
func (t *fakeTimer) disarm() bool {
	if t.c != nil {
		select {
		case <-t.c:
		default:
		}
	}
	f := t.clock
	for i, p := range f.pending {
		if p == t {
			f.pending = append(f.pending[:i], f.pending[i+1:]...)
			return true
		}
	}
	return false
}

// The Ticker methods of a fake ticker.
type fakeTicker struct{ *fakeTimer }

var (
	_ Timer  = (*fakeTimer)(nil)
	_ Ticker = fakeTicker{}
)

func (t fakeTicker) Stop() { t.fakeTimer.Stop() }

// Reset panics on a non-positive period as time.Ticker.Reset does (the
// timer's Reset would turn the ticker into a one-shot timer instead).
func (t fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	t.fakeTimer.Reset(d)
}
