package auth

import (
	"container/list"
	"errors"
	"fmt"
	"sync"
	"time"
)

// LockoutOptions configure the per-IP lockout.
type LockoutOptions struct {
	// Failures is how many failed authentications from one IP within
	// Window lock it out; 0 disables the lockout.
	Failures int
	// Window is the span Failures must happen in.
	Window time.Duration
	// Duration is how long a locked IP stays locked.
	Duration time.Duration
	// MaxTracked bounds the IPs remembered; past it the least recently
	// seen is forgotten (default 100,000: about 10 MB).
	MaxTracked int
}

// Defaults of the lockout (--auth-lockout-*).
const (
	DefaultLockoutFailures   = 5
	DefaultLockoutWindow     = time.Minute
	DefaultLockoutDuration   = 5 * time.Minute
	DefaultLockoutMaxTracked = 100_000
	// MaxLockoutFailures bounds Failures: each tracked IP keeps that many
	// timestamps.
	MaxLockoutFailures = 1000
)

// EnsureDefaults fills MaxTracked.
func (o *LockoutOptions) EnsureDefaults() {
	if o.MaxTracked <= 0 {
		o.MaxTracked = DefaultLockoutMaxTracked
	}
}

// Validate reports settings that cannot work.
func (o *LockoutOptions) Validate() error {
	switch {
	case o.Failures < 0 || o.Failures > MaxLockoutFailures:
		return fmt.Errorf("auth-lockout-failures %d: must be between 0 (off) and %d", o.Failures, MaxLockoutFailures)
	case o.Failures == 0:
		return nil
	case o.Window <= 0:
		return fmt.Errorf("auth-lockout-window %v: must be a positive duration (e.g. 1m)", o.Window)
	case o.Duration <= 0:
		return fmt.Errorf("auth-lockout-duration %v: must be a positive duration (e.g. 5m)", o.Duration)
	}
	return nil
}

// Lockout counts failed authentications per client IP and locks an IP out
// after Failures of them within Window, for Duration. It is pure: every
// call takes the time, so tests drive it. Safe for concurrent use.
//
// Successes are not recorded: they neither lift a lock nor reset the
// failures counted in the window (an attacker who also knows one password
// must not keep its guessing under the limit by logging in between). A
// lock is not extended by failures while it lasts: connections opened
// before it may still fail, but the lock's end stays where it was set.
type Lockout struct {
	opts LockoutOptions
	mu   sync.Mutex
	ips  map[string]*list.Element // of *ipRecord
	lru  *list.List               // front: most recently seen
}

type ipRecord struct {
	ip       string
	failures []time.Time // the last Failures failures, oldest first
	until    time.Time   // locked until, zero if not locked
}

// NewLockout returns a lockout, or nil (never locks) if opts.Failures is 0.
func NewLockout(opts LockoutOptions) (*Lockout, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Failures == 0 {
		return nil, nil
	}
	return &Lockout{opts: opts, ips: make(map[string]*list.Element), lru: list.New()}, nil
}

// ErrLockedOut is the error of an IP in lockout (wrapped with the details).
var ErrLockedOut = errors.New("locked out")

// LockedError says an IP is locked and until when.
type LockedError struct {
	IP    string
	Until time.Time
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("too many failed authentications from %s; locked out until %s", e.IP, e.Until.UTC().Format(time.RFC3339))
}

func (e *LockedError) Unwrap() error { return ErrLockedOut }

// Check returns a *LockedError if ip is locked at now, else nil.
func (l *Lockout) Check(ip string, now time.Time) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.ips[ip]
	if !ok {
		return nil
	}
	r := el.Value.(*ipRecord)
	if now.Before(r.until) {
		return &LockedError{IP: ip, Until: r.until}
	}
	return nil
}

// Failure records a failed authentication from ip at now. It returns the
// end of the lock if this failure started one (locked true), so the
// caller logs and counts it once.
func (l *Lockout) Failure(ip string, now time.Time) (until time.Time, locked bool) {
	if l == nil {
		return time.Time{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.touch(ip, now)
	if now.Before(r.until) {
		return r.until, false // a lock in force is not extended
	}
	// Forget failures older than the window, then add this one; only the
	// last Failures matter.
	cut := 0
	for cut < len(r.failures) && now.Sub(r.failures[cut]) >= l.opts.Window {
		cut++
	}
	r.failures = append(r.failures[:0], r.failures[cut:]...)
	if len(r.failures) == l.opts.Failures {
		r.failures = append(r.failures[:0], r.failures[1:]...)
	}
	r.failures = append(r.failures, now)
	if len(r.failures) < l.opts.Failures {
		return time.Time{}, false
	}
	r.until = now.Add(l.opts.Duration)
	r.failures = r.failures[:0]
	return r.until, true
}

// evictScan is how many of the least recently seen IPs eviction looks at
// for one that is not locked out.
const evictScan = 64

// Tracked is how many IPs the lockout remembers.
func (l *Lockout) Tracked() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ips)
}

// touch returns ip's record, made the most recently seen, creating it (and
// forgetting the least recently seen IP when full). l.mu is held.
func (l *Lockout) touch(ip string, now time.Time) *ipRecord {
	if el, ok := l.ips[ip]; ok {
		l.lru.MoveToFront(el)
		return el.Value.(*ipRecord)
	}
	if l.lru.Len() >= l.opts.MaxTracked {
		// Forget the least recently seen IP that is not locked out (of the
		// oldest few), so a flood of new addresses cannot wipe the locks.
		old := l.lru.Back()
		for el, n := old, 0; el != nil && n < evictScan; el, n = el.Prev(), n+1 {
			if !now.Before(el.Value.(*ipRecord).until) {
				old = el
				break
			}
		}
		l.lru.Remove(old)
		delete(l.ips, old.Value.(*ipRecord).ip)
	}
	r := &ipRecord{ip: ip, failures: make([]time.Time, 0, min(l.opts.Failures, 8))}
	l.ips[ip] = l.lru.PushFront(r)
	return r
}
