package controller

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
)

// recorder is a slog.Handler that keeps records.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.recs {
		out = append(out, rec.Level.String()+" "+rec.Message)
	}
	return out
}

func TestHCLoggerLevels(t *testing.T) {
	rec := &recorder{}
	lv := &slog.LevelVar{}
	lv.Set(slog.LevelWarn)
	h := newHCLogger(slog.New(rec), lv)

	h.Info("hidden")
	h.Warn("shown", "k", 1)
	h.Warn("heartbeat timeout reached, starting election") // expected on every start: demoted, hidden
	h.Error("bad")
	require.False(t, h.IsInfo())
	require.True(t, h.IsWarn())

	lv.Set(slog.LevelDebug)
	require.True(t, h.IsDebug())
	h.Named("snap").With("a", 1).Debug("debug now")
	h.Warn("heartbeat timeout reached, starting election")
	h.Log(hclog.Off, "never")

	h.SetLevel(hclog.Error)
	h.Warn("suppressed by SetLevel")
	require.Equal(t, hclog.Error, h.GetLevel())

	w := h.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	w.Print("[ERR] from std logger")

	require.Equal(t, []string{
		"WARN shown",
		"ERROR bad",
		"DEBUG debug now",
		"INFO heartbeat timeout reached, starting election",
		"ERROR from std logger",
	}, rec.messages())
}

// Raft's per-retry complaints about an unreachable peer are logged once per
// interval per peer, the next one counting those left out; other messages
// are not limited.
func TestHCLoggerLimitsRepeatedPeerErrors(t *testing.T) {
	rec := &recorder{}
	now := time.Unix(1_700_000_000, 0)
	h := newHCLoggerAt(slog.New(rec), slog.LevelInfo, func() time.Time { return now })
	for range 10 {
		h.Error("failed to heartbeat to", "peer", "127.0.0.1:9193", "error", "connection refused")
		h.Error("failed to heartbeat to", "peer", "127.0.0.1:9293", "error", "connection refused")
		h.Error("failed to commit logs", "error", "disk")
		now = now.Add(time.Second)
	}
	now = now.Add(repeatInterval)
	h.Named("replication").Error("failed to heartbeat to", "peer", "127.0.0.1:9193", "error", "connection refused")

	var heartbeats, commits int
	var repeated []int64
	rec.mu.Lock()
	for _, r := range rec.recs {
		switch r.Message {
		case "failed to heartbeat to":
			heartbeats++
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "repeated" {
					repeated = append(repeated, a.Value.Int64())
				}
				return true
			})
		case "failed to commit logs":
			commits++
		}
	}
	rec.mu.Unlock()
	require.Equal(t, 3, heartbeats, "once per peer, then once more after the interval")
	require.Equal(t, []int64{9}, repeated, "the later one counts what was left out")
	require.Equal(t, 10, commits, "other errors are never limited")
}
