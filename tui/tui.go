// Package tui is `moonmq top`: a full-screen terminal dashboard of a
// Kafka-compatible cluster (brokers, topics, partitions, consumer groups and
// lag, live records), built on Bubble Tea v2, Lip Gloss v2 and Bubbles v2.
// It reaches the cluster only through net/client (the Source interface), so
// it works against MoonMQ and any other Kafka-compatible broker.
//
// What it owns and guarantees:
//   - The root Model owns the connection, the refresh tick, the shared
//     snapshot and rate history, the live-tail goroutine, the prompt line and
//     the help overlay. It routes keys to the active view and lays out header,
//     tab line, body, status line and footer. Each view (overview, topics,
//     topic detail, groups, group detail, records) is its own model holding
//     only UI state (cursor, sort, filter, buffer) and renders from the
//     shared data.
//   - Update never blocks: every broker call is a tea.Cmd bounded by a
//     context deadline; at most one snapshot refresh and one detail fetch are
//     in flight, so a slow broker causes "waiting for …" on the status line,
//     never a pile-up or a frozen screen; the tick re-arms itself whatever
//     the broker does, and an unreachable broker shows "reconnecting to …"
//     until it answers again.
//   - Rates are differences between consecutive snapshots (end offsets for
//     produce, committed offsets of consumer groups for consume, log sizes
//     for bytes when the broker reports them); anything unknown is shown as
//     "–", never as a guess.
//   - The records tail is one goroutine per tail, started and cancelled by
//     the root; Run cancels it on exit and waits for it, and closes the
//     client.
//   - Every frame is exactly the terminal's width x height (lines truncated
//     with an ellipsis and padded), so the renderer never leaves stale cells;
//     only the 16 basic ANSI colours plus bold/reverse/faint are used, so it
//     works in 16-colour terminals and, with NO_COLOR, keeps selection and
//     the active tab visible through reverse video.
package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	tea "charm.land/bubbletea/v2"
)

// Defaults for Options.
const (
	DefaultRefresh = time.Second
	DefaultHistory = 5 * time.Minute
	// MinRefresh keeps a mistyped --refresh from hammering the broker.
	MinRefresh = 100 * time.Millisecond
)

// Options configures Run.
type Options struct {
	// Addr is the broker address, shown in the header and status line.
	Addr string
	// Principal is whom the dashboard is connected as ("User:alice",
	// the client certificate's "User:<CN>", or "User:ANONYMOUS"), shown
	// in the header; empty shows nothing.
	Principal string
	// Refresh is the interval between refreshes. Default 1s.
	Refresh time.Duration
	// History is how far back the sparklines reach. Default 5m.
	History time.Duration
	// Dial connects to the cluster. Required; DialClient builds one over
	// net/client. It is retried every Refresh until it succeeds.
	Dial func(context.Context) (Source, error)
	// Input and Output default to the terminal (stdin / stdout).
	Input  io.Reader
	Output io.Writer
	// Now is the clock, for tests. Default time.Now.
	Now func() time.Time
}

// EnsureDefaults fills zero fields with defaults.
func (o *Options) EnsureDefaults() {
	if o.Refresh == 0 {
		o.Refresh = DefaultRefresh
	}
	if o.History == 0 {
		o.History = DefaultHistory
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	if o.Dial == nil {
		return errors.New("top: no way to connect (Options.Dial is nil)")
	}
	if o.Refresh < MinRefresh {
		return fmt.Errorf("top: refresh interval %v is too short (minimum %v)", o.Refresh, MinRefresh)
	}
	if o.History < 10*o.Refresh {
		return fmt.Errorf("top: history %v must cover at least 10 refreshes of %v", o.History, o.Refresh)
	}
	return nil
}

// Run shows the dashboard until the user quits (q, Ctrl-C) or ctx ends, and
// restores the terminal. A cancelled ctx is a clean exit, not an error.
func Run(ctx context.Context, opts Options) error {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := newModel(ctx, opts)
	popts := []tea.ProgramOption{tea.WithContext(ctx)}
	if opts.Input != nil {
		popts = append(popts, tea.WithInput(opts.Input))
	}
	if opts.Output != nil {
		popts = append(popts, tea.WithOutput(opts.Output))
	}
	_, err := tea.NewProgram(m, popts...).Run()
	parentDone := ctx.Err() != nil
	cancel()
	m.close()
	if err != nil && !(parentDone && errors.Is(err, tea.ErrProgramKilled)) {
		return fmt.Errorf("top: %w", err)
	}
	return nil
}

// close stops the tail goroutines and the connection. Everything in flight
// uses m.ctx, which the caller has cancelled, so the wait is short.
func (m *Model) close() {
	m.stopAnyTail()
	m.tails.Wait()
	m.conn.close()
}
