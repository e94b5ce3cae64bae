package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParsePosition(t *testing.T) {
	ts := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want Position
	}{
		{"earliest", Earliest()},
		{"Oldest", Earliest()},
		{"latest", Latest()},
		{" end ", Latest()},
		{"42", Offset(42)},
		{"0", Offset(0)},
		{"-10", FromEnd(10)},
		{"2024-05-01T12:00:00Z", Timestamp(ts)},
		{"@1714564800000", Timestamp(time.UnixMilli(1714564800000))},
	} {
		got, err := ParsePosition(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want.kind, got.kind, tc.in)
		require.Equal(t, tc.want.n, got.n, tc.in)
		require.True(t, tc.want.t.Equal(got.t), tc.in)
	}
	for _, bad := range []string{"", "soon", "@x", "12abc", "2024-13-01"} {
		_, err := ParsePosition(bad)
		require.ErrorIs(t, err, ErrInvalidArgument, bad)
	}
	// String round-trips through ParsePosition.
	for _, p := range []Position{Earliest(), Latest(), Offset(7), FromEnd(3), Timestamp(ts)} {
		back, err := ParsePosition(p.String())
		require.NoError(t, err)
		require.Equal(t, p.String(), back.String())
	}
	require.True(t, Position{}.IsEarliest(), "zero value is Earliest")
	require.True(t, Latest().IsLatest())
	require.Equal(t, Offset(0), Offset(-5), "negative offsets clamp to 0")
}

func TestPositionResolve(t *testing.T) {
	// Partition retains [10, 20).
	for _, tc := range []struct {
		p    Position
		ts   int64
		want int64
	}{
		{Earliest(), -1, 10},
		{Latest(), -1, 20},
		{Offset(15), -1, 15},
		{Offset(3), -1, 10},
		{Offset(30), -1, 20},
		{FromEnd(4), -1, 16},
		{FromEnd(40), -1, 10},
		{Timestamp(time.Now()), 12, 12},
		{Timestamp(time.Now()), -1, 20},
	} {
		require.Equal(t, tc.want, tc.p.resolve(10, 20, tc.ts), tc.p.String())
	}
}

// FuzzParsePosition: any input either parses to a Position whose String
// parses back to the same String, or fails with ErrInvalidArgument.
func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{"earliest", "latest", "0", "42", "-10", "@1714564800000",
		"2024-05-01T12:00:00Z", "", "@", "-", "9223372036854775808", "--1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePosition(s)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidArgument)
			return
		}
		back, err := ParsePosition(p.String())
		require.NoError(t, err, "String of %q = %q", s, p.String())
		require.Equal(t, p.String(), back.String())
	})
}
