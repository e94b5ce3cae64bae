package txncoord

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/coord/coordtest"
)

// TestDataDriven runs the scenarios in testdata/: a Coordinator over an
// in-memory __transaction_state of one partition, with a fake clock,
// producer ids from 1000, and markers driven by hand. Each command prints
// the replies it completed and the records it appended. Run with -rewrite
// to regenerate the expected output after a deliberate change.
//
// Commands (key=value):
//
//	config tv=2 max-timeout=15m expiration=168h   (before the first command that starts the coordinator)
//	init id= [timeout=60000] [expect=pid/epoch]
//	add id= pid= epoch= parts=t/0,t/1 [tv=0]
//	verify id= pid= epoch= parts=
//	end id= pid= epoch= commit|abort [tv=0]
//	tick <duration>                 advance the clock, then run the timers
//	markers                         the markers now due (each must be answered)
//	answer [old] t/0=ok,t/1=retry,...  answers to the markers last listed (ok, retry, fenced,
//	                                failed); old: those listed before the last restart
//	restart                         a new coordinator over the same log, one leader epoch later
//	describe id=
//	list [states=Ongoing,...]
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{t: t, log: coordtest.NewMemLog(), now: time.UnixMilli(1_700_000_000_000),
			cfg: Config{TransactionVersion: 2}}
		h.pids.Store(999)
		h.Harness = coordtest.NewHarness(h.log, func(_ int32, r batch.Record) string { return formatRecord(r) })
		datadriven.RunTest(t, path, h.run)
		if h.c != nil {
			h.c.Close()
		}
	})
}

type harness struct {
	t     *testing.T
	log   *coordtest.MemLog
	now   time.Time
	cfg   Config
	c     *Coordinator
	epoch int32
	pids  atomic.Int64
	// out are the markers listed and not answered yet, by partition; old
	// those of the coordinator before the last restart.
	out, old map[string]MarkerWrite
	*coordtest.Harness
}

// memStore is the MemLog with the leader epoch the harness sets.
type memStore struct {
	*coordtest.MemLog
	epoch func() int32
}

func (m memStore) LeaderEpoch(int32) int32 { return m.epoch() }

type fakePIDs struct{ n *atomic.Int64 }

func (f fakePIDs) Next(context.Context) (int64, error) { return f.n.Add(1), nil }

func (h *harness) start() {
	if h.c != nil {
		return
	}
	cfg := h.cfg
	cfg.Partitions = 1
	cfg.Now = func() time.Time { return h.now }
	cfg.TickInterval = time.Hour // the harness ticks
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := New(cfg, memStore{MemLog: h.log, epoch: func() int32 { return h.epoch }}, fakePIDs{&h.pids}, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := c.EnsureTopic(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	c.Start([]int32{0})
	<-c.Loaded()
	h.c = c
}

type args map[string]string

func parse(d *datadriven.TestData) args {
	a := args{}
	for _, arg := range d.CmdArgs {
		if len(arg.Vals) == 0 {
			a[arg.Key] = "true"
		} else {
			a[arg.Key] = strings.Join(arg.Vals, ",")
		}
	}
	return a
}

func (a args) int(d *datadriven.TestData, key string, def int64) int64 {
	v, ok := a[key]
	if !ok {
		if def == -1<<62 {
			d.Fatalf(nil, "%s: missing %s=", d.Cmd, key)
		}
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		d.Fatalf(nil, "%s: %s=%q: %v", d.Cmd, key, v, err)
	}
	return n
}

const must = -1 << 62

func parseTPs(d *datadriven.TestData, s string) []TP {
	var out []TP
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		topic, p, ok := strings.Cut(part, "/")
		n, err := strconv.Atoi(p)
		if !ok || err != nil {
			d.Fatalf(nil, "partition %q: want topic/N", part)
		}
		out = append(out, TP{Topic: topic, Partition: int32(n)})
	}
	return out
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return "error: " + err.Error()
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	a := parse(d)
	if d.Cmd == "config" {
		h.cfg.TransactionVersion = int16(a.int(d, "tv", 2))
		if v, ok := a["max-timeout"]; ok {
			h.cfg.TransactionMaxTimeout, _ = time.ParseDuration(v)
		}
		if v, ok := a["expiration"]; ok {
			h.cfg.TransactionalIDExpiration, _ = time.ParseDuration(v)
		}
		return "ok\n"
	}
	h.start()
	ctx := context.Background()
	switch d.Cmd {
	case "init":
		var expected *PidEpoch
		if v, ok := a["expect"]; ok {
			pid, epoch, _ := strings.Cut(v, "/")
			p, _ := strconv.ParseInt(pid, 10, 64)
			e, _ := strconv.ParseInt(epoch, 10, 16)
			expected = &PidEpoch{ProducerID: p, Epoch: int16(e)}
		}
		r := h.c.InitProducerID(ctx, a["id"], int32(a.int(d, "timeout", 60000)), expected)
		coordtest.Park(h.Harness, "init", r, func(v InitResult, err error) string {
			if v.Err != nil || err != nil {
				return errString(firstErr(v.Err, err))
			}
			return fmt.Sprintf("producer %d epoch %d", v.ProducerID, v.Epoch)
		})
	case "add":
		r := h.c.AddPartitions(a["id"], a.int(d, "pid", must), int16(a.int(d, "epoch", must)), parseTPs(d, a["parts"]),
			int16(a.int(d, "tv", 0)))
		coordtest.Park(h.Harness, "add", r, func(v error, err error) string { return errString(firstErr(v, err)) })
	case "verify":
		r := h.c.VerifyPartitions(a["id"], a.int(d, "pid", must), int16(a.int(d, "epoch", must)), parseTPs(d, a["parts"]))
		coordtest.Park(h.Harness, "verify", r, func(v VerifyResult, err error) string {
			if v.Err != nil || err != nil {
				return errString(firstErr(v.Err, err))
			}
			var parts []string
			for _, tp := range parseTPs(d, a["parts"]) {
				parts = append(parts, fmt.Sprintf("%s/%d %s", tp.Topic, tp.Partition, errString(v.Partitions[tp])))
			}
			return strings.Join(parts, "; ")
		})
	case "end":
		r := h.c.EndTxn(ctx, a["id"], a.int(d, "pid", must), int16(a.int(d, "epoch", must)), a["commit"] == "true",
			int16(a.int(d, "tv", 0)))
		coordtest.Park(h.Harness, "end", r, func(v EndResult, err error) string {
			if v.Err != nil || err != nil {
				return errString(firstErr(v.Err, err))
			}
			return fmt.Sprintf("producer %d epoch %d", v.ProducerID, v.Epoch)
		})
	case "tick":
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			d.Fatalf(t, "tick: %v", err)
		}
		h.now = h.now.Add(dur)
		h.c.Tick(h.now)
	case "markers":
		h.c.Settle()
		polled := h.c.PollMarkers(h.now)
		var b strings.Builder
		for _, w := range polled {
			if h.out == nil {
				h.out = map[string]MarkerWrite{}
			}
			h.out[fmt.Sprintf("%s/%d", w.TP.Topic, w.TP.Partition)] = w
			verb := "abort"
			if w.Commit {
				verb = "commit"
			}
			fmt.Fprintf(&b, "marker %s %s/%d producer %d epoch %d coordinator epoch %d tv %d\n", verb, w.TP.Topic,
				w.TP.Partition, w.ProducerID, w.ProducerEpoch, w.CoordinatorEpoch, w.TransactionVersion)
		}
		if b.Len() == 0 {
			b.WriteString("no markers due\n")
		}
		return h.Output(b.String())
	case "answer":
		outcomes := map[string]MarkerOutcome{"ok": MarkerDone, "retry": MarkerRetry, "fenced": MarkerFenced, "failed": MarkerFailed}
		var results []MarkerResult
		writes := h.out
		for _, kv := range strings.Split(a.keys(d), ",") {
			if kv == "old" {
				writes = h.old
				continue
			}
			tp, o, _ := strings.Cut(kv, "=")
			outcome, ok := outcomes[o]
			if !ok {
				d.Fatalf(t, "answer %q: want ok, retry, fenced or failed", kv)
			}
			w, ok := writes[tp]
			if !ok {
				d.Fatalf(t, "answer: no marker for %s outstanding", tp)
			}
			delete(writes, tp)
			results = append(results, MarkerResult{Write: w, Outcome: outcome, Err: fmt.Errorf("%s", o)})
		}
		h.c.MarkersWritten(h.now, results)
	case "restart":
		h.old, h.out = h.out, nil
		h.c.Close()
		h.c = nil
		h.epoch++
		h.start()
	case "describe":
		for _, r := range h.c.Describe([]string{a["id"]}) {
			coordtest.Park(h.Harness, "describe", r, func(v Description, err error) string {
				if v.Err != nil || err != nil {
					return errString(firstErr(v.Err, err))
				}
				var parts []string
				for _, tp := range v.Partitions {
					parts = append(parts, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
				}
				return fmt.Sprintf("%s %s producer %d epoch %d timeout %d start %d partitions [%s]", v.ID, v.State,
					v.ProducerID, v.Epoch, v.TimeoutMs, v.StartMs, strings.Join(parts, " "))
			})
		}
	case "list":
		var states []State
		for _, name := range strings.Split(a["states"], ",") {
			if st, ok := ParseState(name); ok {
				states = append(states, st)
			}
		}
		var b strings.Builder
		for _, l := range h.c.List(states, nil) {
			fmt.Fprintf(&b, "%s producer %d %s\n", l.ID, l.ProducerID, l.State)
		}
		return h.Output(b.String())
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return h.Output("")
}

// keys is the command's arguments as written (answer t/0=ok,...).
func (a args) keys(d *datadriven.TestData) string {
	var parts []string
	for _, arg := range d.CmdArgs {
		s := arg.Key
		if len(arg.Vals) > 0 {
			s += "=" + strings.Join(arg.Vals, ",")
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// formatRecord prints a __transaction_state record.
func formatRecord(r batch.Record) string {
	d, known, err := decodeRecord(r.Key, r.Value)
	switch {
	case err != nil:
		return "undecodable: " + err.Error()
	case !known:
		return "unknown key version"
	case d.deleted:
		return d.id + " tombstone"
	}
	m := d.m
	var parts []string
	for _, tp := range m.SortedPartitions() {
		parts = append(parts, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
	}
	slices.Sort(parts)
	s := fmt.Sprintf("%s %s producer %d epoch %d", m.ID, m.State, m.ProducerID, m.Epoch)
	if m.PrevProducerID >= 0 {
		s += fmt.Sprintf(" prev %d", m.PrevProducerID)
	}
	if m.NextProducerID >= 0 {
		s += fmt.Sprintf(" next %d", m.NextProducerID)
	}
	if len(parts) > 0 {
		s += " [" + strings.Join(parts, " ") + "]"
	}
	return s + fmt.Sprintf(" tv %d", m.ClientTV)
}
