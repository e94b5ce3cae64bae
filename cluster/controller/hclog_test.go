package controller

import (
	"context"
	"log/slog"
	"sync"
	"testing"

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
