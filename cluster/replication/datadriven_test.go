package replication

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"
)

// TestDataDriven runs the scenarios in testdata/: one Leader (node 1,
// replica.lag.time.max.ms 30s) and a clock that
// moves only by tick. Every command prints its error, if any, then the
// state: HW, leader log end, committed ISR, maximal ISR, the change in
// flight. Run with -rewrite to regenerate the expected output after a
// deliberate change, and read the diff.
//
// Commands (arguments are key=value; lists are comma-separated):
//
//	become replicas= isr= epoch= [pepoch=0] [min=1] [leo=0] [hw=0]
//	append leo=                the leader's durable end
//	fetch r= off= [epoch=]     a follower's fetch (epoch: the current one)
//	tick [<duration>]          advance the clock, then run the lag check
//	                           (lag: a follower's end below the leader's for over 30s)
//	alter accepted|rejected [isr=] [epoch=] [pepoch=]
//	                           the controller's answer; accepted defaults to the
//	                           pending ISR at pepoch+1, rejected to no state
//	ready end=                 acks=all readiness of a produce ending at end
//	can-append
//	resign
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &ddHarness{now: time.Unix(1_000_000, 0), l: New(1, 30*time.Second)}
		datadriven.RunTest(t, path, h.run)
	})
}

type ddHarness struct {
	now time.Time
	l   *Leader
}

func (h *ddHarness) run(t *testing.T, d *datadriven.TestData) string {
	var err error
	var out strings.Builder
	switch d.Cmd {
	case "become":
		s := LeaderState{Replicas: idsArg(t, d, "replicas"), ISR: idsArg(t, d, "isr"),
			LeaderEpoch: int32(intArg(t, d, "epoch")), MinISR: 1}
		if d.HasArg("pepoch") {
			s.PartitionEpoch = int32(intArg(t, d, "pepoch"))
		}
		if d.HasArg("min") {
			s.MinISR = int(intArg(t, d, "min"))
		}
		if d.HasArg("leo") {
			s.LogEnd = intArg(t, d, "leo")
		}
		if d.HasArg("hw") {
			s.HighWatermark = intArg(t, d, "hw")
		}
		err = h.l.Become(h.now, s)
	case "append":
		err = h.l.Appended(intArg(t, d, "leo"))
	case "fetch":
		epoch := h.l.state.LeaderEpoch
		if d.HasArg("epoch") {
			epoch = int32(intArg(t, d, "epoch"))
		}
		err = h.l.FollowerFetched(h.now, int32(intArg(t, d, "r")), intArg(t, d, "off"), epoch)
	case "tick":
		if len(d.CmdArgs) > 0 {
			h.now = h.now.Add(dur(t, d.CmdArgs[0].Key))
		}
		err = h.l.Tick(h.now)
	case "alter":
		r := Result{Accepted: d.HasArg("accepted"), LeaderEpoch: h.l.state.LeaderEpoch}
		if p, ok := h.l.Pending(); ok && r.Accepted {
			r.ISR, r.PartitionEpoch = p.ISR, p.PartitionEpoch+1
		}
		if d.HasArg("isr") {
			r.ISR = idsArg(t, d, "isr")
		}
		if d.HasArg("epoch") {
			r.LeaderEpoch = int32(intArg(t, d, "epoch"))
		}
		if d.HasArg("pepoch") {
			r.PartitionEpoch = int32(intArg(t, d, "pepoch"))
		}
		err = h.l.AlterPartitionResult(r)
	case "ready":
		var ok bool
		ok, err = h.l.Ready(intArg(t, d, "end"))
		fmt.Fprintf(&out, "ready=%t\n", ok)
	case "can-append":
		err = h.l.CanAppend()
	case "resign":
		h.l.Resign()
	default:
		t.Fatalf("unknown command %q", d.Cmd)
	}
	if err != nil {
		fmt.Fprintf(&out, "error: %v\n", err)
	}
	out.WriteString(h.state())
	return out.String()
}

func (h *ddHarness) state() string {
	l := h.l
	if !l.leading {
		return "not leading\n"
	}
	s := fmt.Sprintf("hw=%d leo=%d isr=%v max=%v epoch=%d/%d", l.hw, l.logEnd, l.state.ISR, l.MaximalISR(),
		l.state.LeaderEpoch, l.state.PartitionEpoch)
	if p, ok := l.Pending(); ok {
		kind := "expand"
		if p.Shrink {
			kind = "shrink"
		}
		s += fmt.Sprintf(" pending=%s%v@%d", kind, p.ISR, p.PartitionEpoch)
	}
	return s + "\n"
}

func intArg(t *testing.T, d *datadriven.TestData, key string) int64 {
	t.Helper()
	var s string
	d.ScanArgs(t, key, &s)
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, "%s=%s", key, s)
	return n
}

func idsArg(t *testing.T, d *datadriven.TestData, key string) []int32 {
	t.Helper()
	var list string
	d.ScanArgs(t, key, &list)
	ss := strings.Split(list, ",")
	ids := make([]int32, 0, len(ss))
	for _, s := range ss {
		n, err := strconv.ParseInt(s, 10, 32)
		require.NoError(t, err, "%s=%v", key, ss)
		ids = append(ids, int32(n))
	}
	return ids
}

func dur(t *testing.T, s string) time.Duration {
	t.Helper()
	v, err := time.ParseDuration(s)
	require.NoError(t, err)
	return v
}
