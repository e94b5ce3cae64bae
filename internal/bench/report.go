package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// megabyte is the unit of MB/s: 10^6 bytes (SI), payload bytes (key+value).
const megabyte = 1e6

// Result is the outcome of a run. Its JSON form is the --output json object.
type Result struct {
	Mode  string `json:"mode"` // "produce", "consume" or "connect"
	Topic string `json:"topic"`
	// Records acknowledged (produce), committed (produce
	// --transactional) or read (consume).
	Records int64 `json:"records"`
	// Bytes of payload (key + value) in those records.
	Bytes int64 `json:"bytes"`
	// Failed records (produce); with --transactional, the records not
	// committed because of an error (every record of an aborted
	// transaction). First error in FirstError.
	Failed     int64   `json:"failed"`
	FirstError string  `json:"first_error,omitempty"`
	Elapsed    float64 `json:"elapsed_seconds"`
	RecordsPS  float64 `json:"records_per_sec"`
	MBPS       float64 `json:"mb_per_sec"`
	// Latency is produce-only: Produce call to acknowledgement.
	Latency *Latency `json:"latency_ms,omitempty"`
	// Stall is produce-only: the longest one partition went without an
	// acknowledgement (a failover's cost, with a steady --rate).
	Stall *Stall `json:"longest_stall,omitempty"`
	// Transactions is produce --transactional only: transactions
	// committed and aborted.
	Transactions *Transactions `json:"transactions,omitempty"`
	// Commit is produce --transactional only: the latency of
	// EndTransaction(commit), per committed transaction.
	Commit *Latency `json:"commit_latency_ms,omitempty"`
	// Params echoes the settings that shape the numbers.
	Params map[string]any `json:"params"`
}

// Latency percentiles in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Transactions counts the transactions of a transactional produce run.
type Transactions struct {
	Committed int64 `json:"committed"`
	Aborted   int64 `json:"aborted"`
	// Records per transaction (--transaction-records); a producer's last
	// transaction has fewer when they do not divide its share.
	Records int `json:"records_per_transaction"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func latencyOf(h *Histogram) *Latency {
	return &Latency{
		P50:  ms(h.Quantile(0.50)),
		P99:  ms(h.Quantile(0.99)),
		P999: ms(h.Quantile(0.999)),
		Max:  ms(h.Max()),
		Mean: ms(h.Mean()),
	}
}

// setRates fills the derived throughput fields.
func (r *Result) setRates(elapsed time.Duration) {
	r.Elapsed = elapsed.Seconds()
	if r.Elapsed > 0 {
		r.RecordsPS = float64(r.Records) / r.Elapsed
		r.MBPS = float64(r.Bytes) / megabyte / r.Elapsed
	}
}

// Print writes the result as text (output "text" or "") or one JSON object
// (output "json").
func (r Result) Print(w io.Writer, output string) error {
	if output == "json" {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var err error
	p := func(format string, args ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, args...)
		}
	}
	p("%s %s\n", r.Mode, r.Topic)
	switch {
	case r.Transactions != nil:
		t := r.Transactions
		p("  records     %d committed, %d failed\n", r.Records, r.Failed)
		p("  txns        %d committed, %d aborted, %d records each\n", t.Committed, t.Aborted, t.Records)
	case r.Mode == "produce":
		p("  records     %d acknowledged, %d failed\n", r.Records, r.Failed)
	case r.Mode == "connect":
		p("  connections %d set up, %d failed\n", r.Records, r.Failed)
	default:
		p("  records     %d\n", r.Records)
	}
	p("  elapsed     %s\n", time.Duration(r.Elapsed*float64(time.Second)).Round(time.Millisecond))
	if r.Mode == "connect" {
		p("  rate        %.1f connections/s\n", r.RecordsPS)
	} else {
		p("  throughput  %.0f records/s, %.2f MB/s\n", r.RecordsPS, r.MBPS)
	}
	if r.Latency != nil {
		l := r.Latency
		p("  latency     p50 %.3fms  p99 %.3fms  p99.9 %.3fms  max %.3fms\n", l.P50, l.P99, l.P999, l.Max)
	}
	if c := r.Commit; c != nil && r.Transactions != nil && r.Transactions.Committed > 0 {
		p("  commit      p50 %.3fms  p99 %.3fms  max %.3fms\n", c.P50, c.P99, c.Max)
	}
	if s := r.Stall; s != nil {
		p("  stall       %s on partition %d (%s to %s): the longest a partition went without an acknowledgement\n",
			time.Duration(s.Seconds*float64(time.Second)).Round(time.Millisecond), s.Partition,
			s.From.Format("15:04:05.000"), s.To.Format("15:04:05.000"))
	}
	if r.FirstError != "" {
		p("  first error %s\n", r.FirstError)
	}
	return err
}

// progress prints a live "records, rate" line every interval to a terminal
// until stopped.
type progress struct {
	stop chan struct{}
	done sync.WaitGroup
}

// startProgress starts the progress line on w; nil w disables it. count
// and bytes are read atomically.
func startProgress(w io.Writer, label string, interval time.Duration, count, bytes *atomic.Int64) *progress {
	p := &progress{stop: make(chan struct{})}
	if w == nil {
		return p
	}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		lastN, lastB, last := int64(0), int64(0), time.Now()
		for {
			select {
			case <-p.stop:
				fmt.Fprint(w, "\r\x1b[K") // clear the line for the final report
				return
			case now := <-t.C:
				n, b := count.Load(), bytes.Load()
				secs := now.Sub(last).Seconds()
				fmt.Fprintf(w, "\r\x1b[K%s: %d records, %.0f records/s, %.2f MB/s",
					label, n, float64(n-lastN)/secs, float64(b-lastB)/megabyte/secs)
				lastN, lastB, last = n, b, now
			}
		}
	}()
	return p
}

// Stop ends the progress line and waits for it to be cleared.
func (p *progress) Stop() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.done.Wait()
}
