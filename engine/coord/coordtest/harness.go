package coordtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/coord"
)

// Harness is the coordinator-independent part of a datadriven test
// (github.com/cockroachdb/datadriven) of a coordinator on engine/coord.
// A coordinator's test wraps it with its own commands; each command's
// output is then Output(): the replies completed since the previous
// command, in the order they were parked, and the records appended since,
// decoded by Record. Replies that complete later (a join waiting for the
// rebalance) show under the command that completed them, so a test file
// reads as the sequence of effects.
//
// The log must auto-sync (the default) so a completed reply never waits
// on a durable mark the test would have to move.
type Harness struct {
	Log *MemLog
	// Record formats one record of partition p.
	Record func(p int32, r batch.Record) string

	parked []parked
	seen   map[int32]int // batches already printed, per partition
	n      int
}

type parked struct {
	label string
	done  <-chan struct{}
	print func() string
}

// NewHarness returns a harness over log.
func NewHarness(log *MemLog, record func(p int32, r batch.Record) string) *Harness {
	return &Harness{Log: log, Record: record, seen: map[int32]int{}}
}

// Park tracks reply under a label made of name and a sequence number
// (join#3), printed with format once it completes; it returns the label.
func Park[T any](h *Harness, name string, reply *coord.Future[T], format func(v T, err error) string) string {
	h.n++
	label := fmt.Sprintf("%s#%d", name, h.n)
	h.parked = append(h.parked, parked{label: label, done: reply.Done(), print: func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return format(reply.Wait(ctx))
	}})
	return label
}

// Completed prints the replies completed since the last call, in the
// order they were parked, and forgets them.
func (h *Harness) Completed() string {
	var b strings.Builder
	kept := h.parked[:0]
	for _, p := range h.parked {
		select {
		case <-p.done:
			fmt.Fprintf(&b, "%s: %s\n", p.label, p.print())
		default:
			kept = append(kept, p)
		}
	}
	h.parked = kept
	return b.String()
}

// Appended prints the records appended since the last call, partition by
// partition, each as "p<partition>@<offset> <Record>".
func (h *Harness) Appended() string {
	var b strings.Builder
	for p := range h.Log.Partitions() {
		batches, n := h.Log.Batches(p, h.seen[p])
		h.seen[p] = n
		for _, raw := range batches {
			err := batch.Iterate(raw, func(hd batch.Header, recs []byte) bool {
				if hd.IsControl() {
					verb := "abort"
					m, err := batch.ParseEndTxnMarker(recs)
					if m.Commit {
						verb = "commit"
					}
					if err != nil {
						verb = "unreadable: " + err.Error()
					}
					fmt.Fprintf(&b, "p%d@%d marker %s producer %d epoch %d\n", p, hd.BaseOffset, verb, hd.ProducerID, hd.ProducerEpoch)
					return true
				}
				txn := ""
				if hd.IsTransactional() {
					txn = fmt.Sprintf("txn(producer %d) ", hd.ProducerID)
				}
				_ = batch.Records(recs, func(r batch.Record) bool {
					fmt.Fprintf(&b, "p%d@%d %s%s\n", p, hd.BaseOffset+int64(r.OffsetDelta), txn, h.Record(p, r))
					return true
				})
				return true
			})
			if err != nil {
				fmt.Fprintf(&b, "p%d: undecodable batch: %v\n", p, err)
			}
		}
	}
	return b.String()
}

// Output is a command's output: result (its own line, if any), the
// replies completed and the records appended since the last command.
func (h *Harness) Output(result string) string {
	out := result
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	out += h.Completed() + h.Appended()
	if out == "" {
		return "ok\n"
	}
	return out
}

// MustWait waits for reply as a request handler does (for 10 s at most)
// and fails t if the wait fails.
func MustWait[T any](t testing.TB, reply *coord.Future[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := reply.Wait(ctx)
	if err != nil {
		t.Fatalf("waiting for a reply: %v", err)
	}
	return v
}

// Pending lists the labels of the replies still parked.
func (h *Harness) Pending() []string {
	out := make([]string, 0, len(h.parked))
	for _, p := range h.parked {
		out = append(out, p.label)
	}
	return out
}
