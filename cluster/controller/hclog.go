package controller

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// hcLogger routes hashicorp/raft's hclog output to slog, filtered by level,
// with raft's per-retry messages about an unreachable peer rate-limited.
type hcLogger struct {
	l       *slog.Logger
	name    string
	implied []any
	min     slog.Leveler
	// override is an hclog.Level set through SetLevel (0: none), shared by
	// derived loggers like hclog's own.
	override *atomic.Int32
	repeats  *repeatLimiter // shared by derived loggers
}

var _ hclog.Logger = (*hcLogger)(nil)

func newHCLogger(l *slog.Logger, min slog.Leveler) hclog.Logger {
	return newHCLoggerAt(l, min, time.Now)
}

// newHCLoggerAt is newHCLogger with the clock the rate limit reads (tests).
func newHCLoggerAt(l *slog.Logger, min slog.Leveler, now func() time.Time) hclog.Logger {
	return &hcLogger{l: l, min: min, override: &atomic.Int32{},
		repeats: &repeatLimiter{now: now, every: repeatInterval, last: map[string]*repeat{}}}
}

// repetitive are the raft messages logged at every retry while a peer is
// unreachable: a leader heartbeats a dead voter several times a second, so
// a node down for an hour would write tens of thousands of identical errors
// and bury everything else. Each is logged once per repeatInterval per peer,
// the next one saying how many were left out meanwhile.
var repetitive = map[string]bool{
	"failed to heartbeat to":                  true,
	"failed to appendEntries to":              true,
	"failed to pipeline appendEntries":        true,
	"failed to start pipeline replication to": true,
	"failed to contact":                       true,
	"failed to make requestVote RPC":          true,
	"failed to send snapshot to":              true,
}

const repeatInterval = 30 * time.Second

type repeat struct {
	at         time.Time
	suppressed int
}

// repeatLimiter decides which of the repetitive messages are logged.
type repeatLimiter struct {
	now   func() time.Time
	every time.Duration

	mu   sync.Mutex
	last map[string]*repeat // by message and peer
}

// allow reports whether a message with key is logged now and how many
// like it were left out since the last one logged.
func (r *repeatLimiter) allow(key string) (bool, int) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	rp := r.last[key]
	if rp == nil {
		if len(r.last) >= 1024 { // bounded: peers are few, but keys come from log arguments
			clear(r.last)
		}
		r.last[key] = &repeat{at: now}
		return true, 0
	}
	if now.Sub(rp.at) < r.every {
		rp.suppressed++
		return false, 0
	}
	n := rp.suppressed
	rp.at, rp.suppressed = now, 0
	return true, n
}

// peerOf is the peer a raft message is about, from its arguments.
func peerOf(args []any) string {
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "peer", "server-id", "target":
			return fmt.Sprint(args[i+1])
		}
	}
	return ""
}

// level is the current minimum level.
func (h *hcLogger) level() hclog.Level {
	if o := hclog.Level(h.override.Load()); o != hclog.NoLevel {
		return o
	}
	return fromSlogLevel(h.min.Level())
}

func fromSlogLevel(l slog.Level) hclog.Level {
	switch {
	case l <= slog.LevelDebug-4:
		return hclog.Trace
	case l <= slog.LevelDebug:
		return hclog.Debug
	case l <= slog.LevelInfo:
		return hclog.Info
	case l <= slog.LevelWarn:
		return hclog.Warn
	}
	return hclog.Error
}

func toSlogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Info, hclog.NoLevel, hclog.DefaultLevel:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// expectedWarnings are Raft warnings that every start of a single voter
// produces by design (it has no leader to hear from, so it elects itself);
// logging them as warnings would teach operators to ignore warnings.
var expectedWarnings = map[string]bool{
	"heartbeat timeout reached, starting election": true,
}

func (h *hcLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Warn && expectedWarnings[msg] {
		level = hclog.Info
	}
	switch level {
	case hclog.Off:
		return
	case hclog.NoLevel:
		level = hclog.Info
	}
	if level < h.level() {
		return
	}
	if repetitive[msg] {
		ok, suppressed := h.repeats.allow(msg + "\x00" + peerOf(args))
		if !ok {
			return
		}
		if suppressed > 0 {
			args = append(slices.Clip(args), "repeated", suppressed, "repeat_window", h.repeats.every)
		}
	}
	attrs := make([]any, 0, len(h.implied)+len(args)+2)
	if h.name != "" {
		attrs = append(attrs, "logger", h.name)
	}
	attrs = append(attrs, h.implied...)
	attrs = append(attrs, args...)
	h.l.Log(context.Background(), toSlogLevel(level), msg, attrs...)
}

func (h *hcLogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hcLogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hcLogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hcLogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hcLogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hcLogger) IsTrace() bool { return h.level() <= hclog.Trace }
func (h *hcLogger) IsDebug() bool { return h.level() <= hclog.Debug }
func (h *hcLogger) IsInfo() bool  { return h.level() <= hclog.Info }
func (h *hcLogger) IsWarn() bool  { return h.level() <= hclog.Warn }
func (h *hcLogger) IsError() bool { return h.level() <= hclog.Error }

func (h *hcLogger) ImpliedArgs() []any { return h.implied }

func (h *hcLogger) With(args ...any) hclog.Logger {
	c := *h
	c.implied = append(append([]any(nil), h.implied...), args...)
	return &c
}

func (h *hcLogger) Name() string { return h.name }

func (h *hcLogger) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (h *hcLogger) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

func (h *hcLogger) SetLevel(level hclog.Level) { h.override.Store(int32(level)) }
func (h *hcLogger) GetLevel() hclog.Level      { return h.level() }

func (h *hcLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hcLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	infer := opts != nil && (opts.InferLevels || opts.InferLevelsWithTimestamp)
	return &hcWriter{h: h, infer: infer}
}

// hcWriter turns lines written through a *log.Logger into log records,
// reading "[WARN]"-style prefixes when asked to.
type hcWriter struct {
	h     *hcLogger
	infer bool
}

func (w *hcWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		msg, level := strings.TrimSpace(string(line)), hclog.Info
		if w.infer {
			for prefix, lv := range map[string]hclog.Level{
				"[TRACE]": hclog.Trace, "[DEBUG]": hclog.Debug, "[INFO]": hclog.Info,
				"[WARN]": hclog.Warn, "[ERROR]": hclog.Error, "[ERR]": hclog.Error,
			} {
				if i := strings.Index(msg, prefix); i >= 0 {
					msg, level = strings.TrimSpace(msg[i+len(prefix):]), lv
					break
				}
			}
		}
		if msg != "" {
			w.h.Log(level, msg)
		}
	}
	return len(p), nil
}
