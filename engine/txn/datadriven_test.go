package txn

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the scenarios in testdata/producers/: one
// ProducerState driven by commands, each printing what it did. Run with
// -rewrite to regenerate the expected output after a deliberate change, and
// read the diff.
//
// Commands (arguments key=value; flags bare):
//
//	data pid= epoch= seq= n= off= [ts=] [txn] [guard=NAME] [origin=client|coordinator|replication]
//	    a data batch of n records at offset off, in its own update
//	marker pid= epoch= off= commit|abort [coord=0] [ts=] [tv2] [origin=coordinator|replication]
//	check pid= epoch= seq= n=        Check, the non-transactional client check alone
//	needs pid= epoch=                NeedsVerification
//	verify pid= epoch= seq= as=NAME [now=]   StartVerification, the guard named NAME
//	hw N                             OnHighWatermark
//	lso hw= [start=0]                the last stable offset
//	expire now= age=
//	restart                          snapshot, then load the snapshot
//	state                            the producers, sorted
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/producers", func(t *testing.T, path string) {
		h := &ddHarness{s: NewProducerState(), guards: map[string]*Verification{}}
		datadriven.RunTest(t, path, h.run)
	})
}

type ddHarness struct {
	s      *ProducerState
	guards map[string]*Verification
}

type ddArgs map[string]string

func parseArgs(d *datadriven.TestData) ddArgs {
	a := ddArgs{}
	for _, arg := range d.CmdArgs {
		if len(arg.Vals) == 0 {
			a[arg.Key] = "true"
		} else {
			a[arg.Key] = arg.Vals[0]
		}
	}
	return a
}

func (a ddArgs) int(d *datadriven.TestData, key string, def int64) int64 {
	v, ok := a[key]
	if !ok {
		if def == missing {
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

const missing = -1 << 62

func (a ddArgs) origin(d *datadriven.TestData, def Origin) Origin {
	switch a["origin"] {
	case "":
		return def
	case "client":
		return OriginClient
	case "coordinator":
		return OriginCoordinator
	case "replication":
		return OriginReplication
	}
	d.Fatalf(nil, "unknown origin %q", a["origin"])
	return 0
}

func (h *ddHarness) run(t *testing.T, d *datadriven.TestData) string {
	a := parseArgs(d)
	switch d.Cmd {
	case "data":
		n := int32(a.int(d, "n", 1))
		off := a.int(d, "off", missing)
		b := Batch{ProducerID: a.int(d, "pid", missing), Epoch: int16(a.int(d, "epoch", missing)),
			FirstSeq: int32(a.int(d, "seq", missing)), Count: n, BaseOffset: off, LastOffset: off + int64(n) - 1,
			MaxTimestamp: a.int(d, "ts", 0), Transactional: a["txn"] == "true"}
		var guard *Verification
		if name, ok := a["guard"]; ok {
			if guard = h.guards[name]; guard == nil {
				d.Fatalf(t, "no guard %q", name)
			}
		}
		u := h.s.Begin(a.origin(d, OriginClient))
		dup, err := u.Add(b, guard)
		switch {
		case err != nil:
			return "error: " + err.Error() + "\n"
		case dup != nil:
			return fmt.Sprintf("duplicate of offsets %d-%d\n", dup.BaseOffset, dup.LastOffset)
		}
		h.s.Apply(u)
		return "ok\n"
	case "marker":
		m := &Marker{Commit: a["commit"] == "true", CoordinatorEpoch: int32(a.int(d, "coord", 0)), TV2: a["tv2"] == "true"}
		if m.Commit == (a["abort"] == "true") {
			d.Fatalf(t, "marker: say commit or abort")
		}
		off := a.int(d, "off", missing)
		u := h.s.Begin(a.origin(d, OriginCoordinator))
		_, err := u.Add(Batch{ProducerID: a.int(d, "pid", missing), Epoch: int16(a.int(d, "epoch", missing)),
			FirstSeq: -1, Count: 1, BaseOffset: off, LastOffset: off, MaxTimestamp: a.int(d, "ts", 0), Transactional: true,
			Marker: m}, nil)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		var out strings.Builder
		for _, e := range u.Aborted() {
			fmt.Fprintf(&out, "aborted index entry: pid %d offsets %d-%d lso %d\n", e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset)
		}
		h.s.Apply(u)
		return out.String() + "ok\n"
	case "check":
		dup, err := h.s.Check(a.int(d, "pid", missing), int16(a.int(d, "epoch", missing)),
			int32(a.int(d, "seq", missing)), int32(a.int(d, "n", 1)))
		switch {
		case err != nil:
			return "error: " + err.Error() + "\n"
		case dup != nil:
			return fmt.Sprintf("duplicate of offsets %d-%d\n", dup.BaseOffset, dup.LastOffset)
		}
		return "ok\n"
	case "needs":
		return fmt.Sprintf("%v\n", h.s.NeedsVerification(a.int(d, "pid", missing), int16(a.int(d, "epoch", missing))))
	case "verify":
		h.guards[a["as"]] = h.s.StartVerification(a.int(d, "pid", missing), int16(a.int(d, "epoch", missing)),
			int32(a.int(d, "seq", 0)), a.int(d, "now", 0))
		return "ok\n"
	case "hw":
		hw, err := strconv.ParseInt(d.CmdArgs[0].Key, 10, 64)
		if err != nil {
			d.Fatalf(t, "hw N: %v", err)
		}
		h.s.OnHighWatermark(hw)
		return "ok\n"
	case "lso":
		return fmt.Sprintf("%d\n", h.s.Stable().LastStable(a.int(d, "hw", missing), a.int(d, "start", 0)))
	case "expire":
		return fmt.Sprintf("expired %d\n", h.s.Expire(a.int(d, "now", missing), a.int(d, "age", missing)))
	case "restart":
		b, err := h.s.Snapshot(0)
		if err != nil {
			d.Fatalf(t, "snapshot: %v", err)
		}
		s, _, err := LoadSnapshot(b)
		if err != nil {
			d.Fatalf(t, "load: %v", err)
		}
		h.s, h.guards = s, map[string]*Verification{}
		return "ok\n"
	case "state":
		return h.state()
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func (h *ddHarness) state() string {
	ids := make([]int64, 0, len(h.s.producers))
	for id := range h.s.producers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out strings.Builder
	for _, id := range ids {
		p := h.s.producers[id]
		fmt.Fprintf(&out, "pid %d epoch %d coord %d txn-first %d last-ts %d", id, p.epoch, p.coordinatorEpoch, p.txnFirst, p.lastTimestamp)
		if p.verifying != nil {
			fmt.Fprintf(&out, " verifying from seq %d", p.verifying.lowestSeq)
		}
		for _, b := range p.batches {
			fmt.Fprintf(&out, " [%d-%d @%d]", b.FirstSeq, b.LastSeq, b.BaseOffset)
		}
		out.WriteString("\n")
	}
	for _, c := range h.s.unreplicated {
		fmt.Fprintf(&out, "unreplicated: pid %d offsets %d-%d aborted %v\n", c.ProducerID, c.FirstOffset, c.LastOffset, c.Aborted)
	}
	if out.Len() == 0 {
		return "empty\n"
	}
	return out.String()
}
