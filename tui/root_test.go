package tui

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/net/client"
)

func TestRootNavigation(t *testing.T) {
	r := demoRunner(t, 80, 24)
	require.Equal(t, vOverview, r.m.active)

	r.keys("2")
	require.Equal(t, vTopics, r.m.active)
	r.keys("j", "j", "enter")
	require.Equal(t, vTopic, r.m.active)
	require.Equal(t, "orders", r.m.topic.topic)
	r.until("topic detail", func() bool { return r.m.topic.detail != nil })
	require.Contains(t, r.screen(), "› topic orders")

	// The detail refreshes on every tick while it is shown, and only then.
	before := r.src.callCount("describe topic")
	r.refresh()
	r.until("detail refresh", func() bool { return !r.m.detailBusy })
	require.Greater(t, r.src.callCount("describe topic"), before)

	r.keys("esc")
	require.Equal(t, vTopics, r.m.active)
	before = r.src.callCount("describe topic")
	r.refresh()
	require.Equal(t, before, r.src.callCount("describe topic"))
	r.keys("esc")
	require.Equal(t, vOverview, r.m.active)
	r.keys("esc")
	require.Equal(t, vOverview, r.m.active, "esc on the first view stays")

	// `:` jumps by name, with arguments.
	r.keys(":")
	r.typeText("groups")
	r.keys("enter")
	require.Equal(t, vGroups, r.m.active)
	r.keys(":")
	r.typeText("group billing")
	r.keys("enter")
	require.Equal(t, vGroup, r.m.active)
	require.Contains(t, r.screen(), "Group billing")
	r.keys(":")
	r.typeText("nonsense")
	r.keys("enter")
	require.Contains(t, r.screen(), `unknown view "nonsense"`)
	r.keys(":")
	r.typeText("records orders x")
	r.keys("enter")
	require.Contains(t, r.screen(), "not a partition number")
	r.keys(":")
	r.typeText("topi")
	r.keys("esc")
	require.Equal(t, promptNone, r.m.prompt)
	require.Equal(t, vGroup, r.m.active, "esc cancels the prompt only")

	// Help overlay: ? opens, keys do not leak to the view, esc closes.
	r.keys("?")
	require.True(t, r.m.showHelp)
	require.Contains(t, r.screen(), "? or esc closes this help")
	r.keys("2")
	require.Equal(t, vGroup, r.m.active)
	r.keys("esc")
	require.False(t, r.m.showHelp)

	r.keys("q")
	require.Eventually(t, func() bool {
		select {
		case msg := <-r.msgs:
			r.send(msg)
		default:
		}
		return r.quit
	}, 5*time.Second, time.Millisecond)
}

func TestRootCtrlCQuitsFromPrompt(t *testing.T) {
	r := demoRunner(t, 80, 24)
	r.keys("2", "/")
	r.keys("ctrl+c")
	r.until("quit", func() bool { return r.quit })
}

func TestRootFilterPrompt(t *testing.T) {
	r := demoRunner(t, 80, 24)
	r.keys("2", "/")
	require.Equal(t, promptFilter, r.m.prompt)
	r.typeText("pay")
	require.Equal(t, []string{"payments"}, rowKeys(&r.m.topics.tbl), "filters as you type")
	r.keys("enter")
	require.Equal(t, promptNone, r.m.prompt)
	require.Equal(t, "pay", r.m.topics.filterText())

	// Esc in the prompt restores the filter it started with.
	r.keys("/", "backspace", "backspace", "backspace")
	require.Len(t, r.m.topics.tbl.rows, 4)
	r.keys("esc")
	require.Equal(t, "pay", r.m.topics.filterText())

	// Esc in the view clears the filter before going back.
	r.keys("esc")
	require.Empty(t, r.m.topics.filterText())
	require.Equal(t, vTopics, r.m.active)

	// Views without a filter ignore /.
	r.keys("1", "/")
	require.Equal(t, promptNone, r.m.prompt)
}

func TestRootSortKeys(t *testing.T) {
	r := demoRunner(t, 80, 24)
	r.keys("2", "s")
	require.Equal(t, tcParts, r.m.topics.sort.col)
	r.keys("S")
	require.False(t, r.m.topics.sort.desc)
	r.keys("1", "s") // the overview has a fixed order: no effect, no panic
}

func TestRootReconnects(t *testing.T) {
	src := demoSource()
	src.dialErr = &client.Error{Op: "dial", Resource: "127.0.0.1:9092", Err: errors.New("connection refused")}
	r := newRunner(t, src, 80, 24)
	r.until("failed dial", func() bool { return r.m.lastErr != nil && !r.m.dialing })
	require.Contains(t, r.screen(), "reconnecting to 127.0.0.1:9092")
	require.Nil(t, r.m.src)

	// The tick retries the dial.
	src.mu.Lock()
	src.dialErr = nil
	src.mu.Unlock()
	r.tick()
	r.until("connected and refreshed", func() bool { return r.m.d.snap != nil })
	require.Contains(t, r.screen(), "updated")

	// The broker goes away: the data stays, the status line says so.
	r.src.setDown(errBrokerDown)
	r.refresh()
	screen := r.screen()
	require.Contains(t, screen, "reconnecting to 127.0.0.1:9092")
	require.Contains(t, screen, "orders", "last known data stays on screen")

	// ... and comes back.
	r.src.setDown(nil)
	r.refresh()
	require.NotContains(t, r.screen(), "reconnecting")
	require.Nil(t, r.m.lastErr)
}

func TestRootSlowBrokerDoesNotPileUp(t *testing.T) {
	src := demoSource()
	r := newRunner(t, src, 80, 24)
	r.until("first snapshot", func() bool { return r.m.d.snap != nil })
	gate := make(chan struct{})
	src.mu.Lock()
	src.gate = gate
	src.mu.Unlock()

	calls := src.callCount("cluster")
	for range 5 {
		r.tick() // Update returns at once although the broker hangs
	}

	r.until("the one outstanding refresh to start", func() bool { return src.callCount("cluster") == calls+1 })
	require.Equal(t, calls+1, src.callCount("cluster"), "one refresh in flight, not one per tick")
	require.Regexp(t, regexp.MustCompile(`waiting for 127\.0\.0\.1:9092 … 4s`), r.screen(),
		"the first hung refresh started at the first tick, 4s ago")

	// The keyboard still works while the broker hangs.
	r.keys("2")
	require.Equal(t, vTopics, r.m.active)

	src.mu.Lock()
	src.gate = nil
	src.mu.Unlock()
	close(gate)
	r.until("refresh done", func() bool { return !r.m.refreshing })
	require.NotContains(t, r.screen(), "waiting for")
}

func TestRootRecordsTail(t *testing.T) {
	r := demoRunner(t, 100, 24)
	r.keys("4")
	require.Equal(t, vRecords, r.m.active)
	require.Contains(t, r.screen(), "no topic chosen")

	r.keys("2", "j", "j", "t")
	require.Equal(t, vRecords, r.m.active)
	r.until("records", func() bool { return len(r.m.records.recs) == 3 })
	require.Contains(t, r.screen(), `{"id":"o-1001"`)
	require.Contains(t, r.screen(), "following live")
	src := r.src
	src.mu.Lock()
	require.Equal(t, []string{"-50"}, positions(src.consumed))
	src.mu.Unlock()

	// o jumps: a new consumer from the offset replaces the tail.
	r.keys("o")
	require.Equal(t, promptJump, r.m.prompt)
	r.typeText("39999")
	r.keys("enter")
	r.until("second consumer", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return len(src.consumed) == 2
	})
	src.mu.Lock()
	require.Equal(t, []string{"-50", "39999"}, positions(src.consumed))
	src.mu.Unlock()
	require.False(t, r.m.records.live)

	// Leaving the view stops the consumer goroutine; coming back with 4
	// restarts it.
	r.keys("1")
	require.Nil(t, r.m.tail)
	waitGroupDone(t, r.m)
	r.keys("4")
	r.until("records again", func() bool { return len(r.m.records.recs) == 3 })

	// Enter on a group's offset row reads from the committed offset.
	r.keys("3", "j", "enter", "enter")
	require.Equal(t, vRecords, r.m.active)
	src.mu.Lock()
	committed := src.groupDescs["billing"].Offsets[0].Committed
	src.mu.Unlock()
	require.Equal(t, "orders/0 from "+strconv.FormatInt(committed, 10), r.m.records.target()+" from "+r.m.records.from.String())
}

func positions(ps []client.Position) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// waitGroupDone waits for every tail goroutine to exit.
func waitGroupDone(t *testing.T, m *Model) {
	t.Helper()
	done := make(chan struct{})
	go func() { m.tails.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("tail goroutine did not stop")
	}
}

func TestRootMouseWheel(t *testing.T) {
	r := demoRunner(t, 80, 24)
	r.keys("2")
	r.send(tea.MouseWheelMsg{Button: tea.MouseWheelDown})
	require.Equal(t, 3, r.m.topics.tbl.cursor)
	r.send(tea.MouseWheelMsg{Button: tea.MouseWheelUp})
	require.Equal(t, 0, r.m.topics.tbl.cursor)
}

func TestRootResizeKeepsFrameExact(t *testing.T) {
	r := demoRunner(t, 80, 24)
	for _, v := range []string{"1", "2", "3", "4"} {
		r.keys(v)
		for _, sz := range [][2]int{{80, 24}, {81, 25}, {200, 60}, {120, 30}, {40, 10}, {20, 5}} {
			r.send(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			requireFrame(t, r.m.View().Content, sz[0], sz[1])
		}
	}
	r.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	r.keys("?")
	requireFrame(t, r.m.View().Content, 80, 24)
	v := r.m.View()
	require.True(t, v.AltScreen)
	require.Equal(t, tea.MouseModeCellMotion, v.MouseMode)
}

// sgrColour matches SGR parameters that set a colour (30-37, 39-47, 49,
// 90-107, 38;..., 48;...).
var sgrColour = regexp.MustCompile(`\x1b\[[0-9;]*?(?:^|;|\[)(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;|m)`)

func TestNoColorKeepsSelectionVisible(t *testing.T) {
	r := demoRunner(t, 80, 24)
	r.keys("2")
	frame := r.m.View().Content
	require.Regexp(t, sgrColour, frame, "colours are used when available")

	// What Bubble Tea writes with NO_COLOR (the ASCII profile).
	var buf bytes.Buffer
	w := &colorprofile.Writer{Forward: &buf, Profile: colorprofile.ASCII}
	_, err := w.Write([]byte(frame))
	require.NoError(t, err)
	out := buf.String()
	require.NotRegexp(t, sgrColour, out, "no colour under NO_COLOR")
	require.Contains(t, out, "\x1b[7m", "the selection stays visible in reverse video")
	require.Contains(t, plain(out), "payments")

	// 16-colour terminals get the same colours: only basic ones are used.
	buf.Reset()
	w.Profile = colorprofile.ANSI
	_, err = w.Write([]byte(frame))
	require.NoError(t, err)
	require.Equal(t, frame, buf.String(), "nothing to downsample")
}

func TestRunValidatesOptions(t *testing.T) {
	ctx := context.Background()
	require.ErrorContains(t, Run(ctx, Options{}), "Dial is nil")
	dial := func(context.Context) (Source, error) { return nil, errors.New("x") }
	require.ErrorContains(t, Run(ctx, Options{Dial: dial, Refresh: time.Millisecond}), "too short")
	require.ErrorContains(t, Run(ctx, Options{Dial: dial, Refresh: time.Minute}), "at least 10 refreshes")
}

func TestRunQuitsOnContextAndClosesSource(t *testing.T) {
	src := demoSource()
	ctx, cancel := context.WithCancel(context.Background())
	in, inW := ioPipe(t)
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{
			Addr: "fake", Dial: func(context.Context) (Source, error) { return src, nil },
			Input: in, Output: &out,
		})
	}()
	require.Eventually(t, func() bool { return src.callCount("cluster") > 0 }, 10*time.Second, 5*time.Millisecond)
	_, _ = inW.Write([]byte("q"))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("q did not quit")
	}
	cancel()
	src.mu.Lock()
	require.True(t, src.closed, "Run closes the connection")
	src.mu.Unlock()
	require.True(t, strings.Contains(out.String(), "\x1b[?1049h"), "alternate screen entered")
	require.True(t, strings.Contains(out.String(), "\x1b[?1049l"), "and left: the terminal is restored")

	// Cancelling the context (SIGTERM in main) is a clean exit too.
	ctx, cancel = context.WithCancel(context.Background())
	in, _ = ioPipe(t)
	go func() {
		done <- Run(ctx, Options{
			Addr: "fake", Dial: func(context.Context) (Source, error) { return src, nil },
			Input: in, Output: io.Discard,
		})
	}()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not stop Run")
	}
}

func ioPipe(t *testing.T) (io.Reader, io.WriteCloser) {
	r, w := io.Pipe()
	t.Cleanup(func() { _ = w.Close() })
	return r, w
}
