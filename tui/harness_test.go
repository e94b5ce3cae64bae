package tui

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/net/client"
)

// t0 is the fixed start of every test clock, so goldens are stable.
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	// Timestamps render in local time; pin it so goldens do not depend
	// on the machine.
	time.Local = time.UTC
	m.Run()
}

// fakeClock is a settable clock shared by a test and the model.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// errBrokerDown stands in for a transport failure.
var errBrokerDown = &client.Error{Op: "describe cluster", Err: errors.New("dial tcp 127.0.0.1:9092: connect: connection refused")}

// fakeSource is an in-memory cluster. Tests mutate it between refreshes.
type fakeSource struct {
	mu         sync.Mutex
	down       error         // every call fails with it while set
	gate       chan struct{} // Cluster waits for it while set: a slow broker
	dialErr    error
	cluster    client.ClusterInfo
	topics     []client.TopicInfo
	ends       map[string]map[int32]int64
	stable     map[string]map[int32]int64
	descs      map[string]client.TopicDescription
	groups     []client.GroupSummary
	groupDescs map[string]client.GroupDescription
	groupsErr  error
	txns       []client.TransactionSummary
	txnsErr    error // nil: ListTransactions answers txns
	records    map[string][]client.Record
	consumed   []client.Position // Consume start positions, in call order
	calls      map[string]int
	closed     bool
}

func newFakeSource() *fakeSource {
	return &fakeSource{
		cluster: client.ClusterInfo{ID: "test-cluster", Controller: 1, Brokers: []client.Broker{
			{ID: 1, Host: "127.0.0.1", Port: 9092},
		}},
		ends:       map[string]map[int32]int64{},
		stable:     map[string]map[int32]int64{},
		descs:      map[string]client.TopicDescription{},
		groupDescs: map[string]client.GroupDescription{},
		records:    map[string][]client.Record{},
		calls:      map[string]int{},
		// Like most tests' imaginary broker, one without transactions.
		txnsErr: &client.Error{Op: "list transactions", Err: client.ErrUnsupported},
	}
}

func (f *fakeSource) call(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[name]++
	return f.down
}

func (f *fakeSource) setDown(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = err
}

func (f *fakeSource) callCount(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fakeSource) Cluster(ctx context.Context) (client.ClusterHealth, error) {
	if err := f.call("cluster"); err != nil {
		return client.ClusterHealth{}, err
	}
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return client.ClusterHealth{}, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.health(), nil
}

func (f *fakeSource) ListTopics(ctx context.Context) ([]client.TopicInfo, error) {
	if err := f.call("topics"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.topics), nil
}

func (f *fakeSource) EndOffsets(ctx context.Context, topics []string) (map[string]map[int32]int64, error) {
	if err := f.call("ends"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]map[int32]int64{}
	for _, t := range topics {
		if e, ok := f.ends[t]; ok {
			out[t] = maps.Clone(e)
		}
	}
	return out, nil
}

func (f *fakeSource) StableOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	if err := f.call("stable"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.stable[topic]), nil
}

func (f *fakeSource) DescribeTopic(ctx context.Context, name string) (client.TopicDescription, error) {
	if err := f.call("describe topic"); err != nil {
		return client.TopicDescription{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.descs[name]
	if !ok {
		return d, &client.Error{Op: "describe topic", Resource: "topic '" + name + "'", Err: client.ErrNotFound}
	}
	return d, nil
}

func (f *fakeSource) ListGroups(ctx context.Context) ([]client.GroupSummary, error) {
	if err := f.call("groups"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.groupsErr != nil {
		return nil, f.groupsErr
	}
	return slices.Clone(f.groups), nil
}

func (f *fakeSource) DescribeGroup(ctx context.Context, name string) (client.GroupDescription, error) {
	if err := f.call("describe group"); err != nil {
		return client.GroupDescription{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.groupDescs[name]
	if !ok {
		return d, &client.Error{Op: "describe group", Err: client.ErrNotFound}
	}
	d.Offsets = slices.Clone(d.Offsets)
	return d, nil
}

func (f *fakeSource) ListTransactions(ctx context.Context) ([]client.TransactionSummary, error) {
	if err := f.call("txns"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.txnsErr != nil {
		return nil, f.txnsErr
	}
	return slices.Clone(f.txns), nil
}

// Consume delivers the topic's canned records, then waits for ctx like a
// live consumer on a quiet topic.
func (f *fakeSource) Consume(ctx context.Context, topic string, from client.Position, fn func(client.Record) error) error {
	if err := f.call("consume"); err != nil {
		return err
	}
	f.mu.Lock()
	recs := slices.Clone(f.records[topic])
	f.consumed = append(f.consumed, from)
	f.mu.Unlock()
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

func (f *fakeSource) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

// runner is a minimal Bubble Tea program for tests: Update and View run on
// the test goroutine only, commands run in goroutines and post their
// messages back, and time moves only when the test ticks.
type runner struct {
	t     *testing.T
	m     *Model
	src   *fakeSource
	clock *fakeClock
	msgs  chan tea.Msg
	done  chan struct{}
	quit  bool
}

func newRunner(t *testing.T, src *fakeSource, w, h int) *runner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	clock := newClock()
	opts := Options{
		Addr: "127.0.0.1:9092", Refresh: time.Second, History: time.Minute, Now: clock.Now,
		Dial: func(ctx context.Context) (Source, error) {
			src.mu.Lock()
			defer src.mu.Unlock()
			if src.dialErr != nil {
				return nil, src.dialErr
			}
			return src, nil
		},
	}
	opts.EnsureDefaults()
	require.NoError(t, opts.Validate())
	m := newModel(ctx, opts)
	m.tick = func() tea.Cmd { return nil } // the test ticks by hand
	r := &runner{t: t, m: m, src: src, clock: clock, msgs: make(chan tea.Msg, 4096), done: make(chan struct{})}
	t.Cleanup(func() {
		close(r.done)
		cancel()
		m.close()
	})
	r.send(tea.WindowSizeMsg{Width: w, Height: h})
	r.run(m.Init())
	return r
}

// run executes a command like Bubble Tea would: batches fan out, each
// command in its own goroutine.
func (r *runner) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	go func() {
		msg := cmd()
		if batch, ok := msg.(tea.BatchMsg); ok {
			for _, c := range batch {
				r.run(c)
			}
			return
		}
		if msg == nil {
			return
		}
		select {
		case r.msgs <- msg:
		case <-r.done:
		}
	}()
}

// send delivers one message to Update and runs the resulting command.
func (r *runner) send(msg tea.Msg) {
	if _, ok := msg.(tea.QuitMsg); ok {
		r.quit = true
		return
	}
	_, cmd := r.m.Update(msg)
	r.run(cmd)
}

// until processes messages until cond holds, failing after a deadline.
func (r *runner) until(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	// Some conditions change without a message (a command starting to
	// run), so poll as well.
	poll := time.NewTicker(2 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case msg := <-r.msgs:
			r.send(msg)
		case <-poll.C:
		case <-deadline.C:
			r.t.Fatalf("timed out waiting for %s; screen:\n%s", what, r.screen())
		}
	}
}

// keys presses keys in order.
func (r *runner) keys(ks ...string) {
	for _, k := range ks {
		r.send(keyMsg(k))
	}
}

// tick advances the clock by the refresh interval and delivers a tick.
func (r *runner) tick() {
	r.send(tickMsg{at: r.clock.advance(r.m.opts.Refresh)})
}

// refresh ticks and waits until the resulting snapshot is applied.
func (r *runner) refresh() {
	r.t.Helper()
	r.until("connection", func() bool { return r.m.src != nil || r.m.lastErr != nil && !r.m.dialing })
	r.until("in-flight refreshes", func() bool { return !r.m.refreshing && !r.m.detailBusy })
	before := r.src.callCount("cluster")
	r.tick()
	r.until("snapshot", func() bool { return r.src.callCount("cluster") > before && !r.m.refreshing })
}

func (r *runner) screen() string { return plain(r.m.View().Content) }

// keyMsg builds the key press Bubble Tea would deliver for a key name.
func keyMsg(s string) tea.KeyPressMsg {
	switch s {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "shift+tab":
		return tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "pgdown":
		return tea.KeyPressMsg{Code: tea.KeyPgDown}
	case "pgup":
		return tea.KeyPressMsg{Code: tea.KeyPgUp}
	case "end":
		return tea.KeyPressMsg{Code: tea.KeyEnd}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	}
	rs := []rune(s)
	return tea.KeyPressMsg{Code: rs[0], Text: s}
}

// typeText presses one key per rune.
func (r *runner) typeText(s string) {
	for _, c := range s {
		r.send(keyMsg(string(c)))
	}
}

// health is what Metadata would say about f: its brokers, and the
// partitions of the topics it describes. The caller holds f.mu.
func (f *fakeSource) health() client.ClusterHealth {
	h := client.ClusterHealth{ClusterInfo: f.cluster, Leaders: map[int32]int{}, Replicas: map[int32]int{}}
	live := map[int32]bool{}
	for _, b := range f.cluster.Brokers {
		live[b.ID] = true
	}
	down := map[int32]bool{}
	for _, name := range slices.Sorted(maps.Keys(f.descs)) {
		for _, p := range f.descs[name].Partitions {
			h.Partitions++
			if p.Leader < 0 {
				h.Offline++
			} else {
				h.Leaders[p.Leader]++
			}
			if len(p.ISR) < len(p.Replicas) {
				h.UnderReplicated++
			}
			for _, r := range p.Replicas {
				h.Replicas[r]++
				if !live[r] {
					down[r] = true
				}
			}
		}
	}
	h.Down = slices.Sorted(maps.Keys(down))
	return h
}
