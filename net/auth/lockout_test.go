package auth_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/net/auth"
)

func TestLockout(t *testing.T) {
	l, err := auth.NewLockout(auth.LockoutOptions{Failures: 3, Window: time.Minute, Duration: 5 * time.Minute})
	require.NoError(t, err)
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	const bad, good = "127.0.0.2", "127.0.0.1"

	// Two failures, then a third after the window: the first has aged out.
	l.Failure(bad, t0)
	l.Failure(bad, t0.Add(30*time.Second))
	_, locked := l.Failure(bad, t0.Add(61*time.Second))
	require.False(t, locked)
	require.NoError(t, l.Check(bad, t0.Add(61*time.Second)))

	// A third within the window locks.
	until, locked := l.Failure(bad, t0.Add(62*time.Second))
	require.True(t, locked)
	require.Equal(t, t0.Add(62*time.Second+5*time.Minute), until)
	err = l.Check(bad, t0.Add(63*time.Second))
	require.ErrorIs(t, err, auth.ErrLockedOut)
	require.EqualError(t, err, "too many failed authentications from 127.0.0.2; locked out until 2026-12-05T12:06:02Z")
	require.NoError(t, l.Check(good, t0.Add(63*time.Second)), "other IPs are unaffected")

	// More failures do not move the lock.
	_, locked = l.Failure(bad, t0.Add(65*time.Second))
	require.False(t, locked)
	require.Error(t, l.Check(bad, until.Add(-time.Nanosecond)))
	require.NoError(t, l.Check(bad, until), "the lock ends on time")

	// After the lock, counting starts over.
	l.Failure(bad, until.Add(time.Second))
	l.Failure(bad, until.Add(2*time.Second))
	_, locked = l.Failure(bad, until.Add(4*time.Second))
	require.True(t, locked)
}

func TestLockoutBounded(t *testing.T) {
	l, err := auth.NewLockout(auth.LockoutOptions{Failures: 2, Window: time.Minute, Duration: time.Minute, MaxTracked: 100})
	require.NoError(t, err)
	now := time.Unix(1_000_000, 0)
	l.Failure("10.0.0.0", now)
	l.Failure("10.0.0.0", now)
	require.Error(t, l.Check("10.0.0.0", now))
	for i := 1; i <= 1000; i++ {
		l.Failure(fmt.Sprintf("10.0.%d.%d", i/256, i%256), now)
		require.LessOrEqual(t, l.Tracked(), 100)
	}
	// Locked IPs are not what a flood of new addresses pushes out: the
	// least recently seen unlocked ones are forgotten first.
	require.Error(t, l.Check("10.0.0.0", now), "still locked after 1,000 other addresses")
	require.Equal(t, 100, l.Tracked())
}

func TestLockoutOptions(t *testing.T) {
	l, err := auth.NewLockout(auth.LockoutOptions{})
	require.NoError(t, err)
	require.Nil(t, l, "0 failures: off")
	require.NoError(t, l.Check("x", time.Now()))
	_, locked := l.Failure("x", time.Now())
	require.False(t, locked)
	_, err = auth.NewLockout(auth.LockoutOptions{Failures: 5})
	require.ErrorContains(t, err, "auth-lockout-window")
	_, err = auth.NewLockout(auth.LockoutOptions{Failures: 5, Window: time.Minute})
	require.ErrorContains(t, err, "auth-lockout-duration")
	_, err = auth.NewLockout(auth.LockoutOptions{Failures: -1})
	require.ErrorContains(t, err, "auth-lockout-failures")
}
