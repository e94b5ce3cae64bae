// Package httpapi serves the operator's HTTP endpoints: /healthz (the
// process is alive), /readyz (200 only while the node serves everything it
// should: see SetReadiness), /metrics (Prometheus text), /stats (JSON) and,
// when enabled, /debug/pprof. It also owns the storage-side Prometheus
// collectors and the cluster ones (controller, Raft, replication counts,
// follower lag), which read the same snapshots as /stats.
//
// Invariant: handlers never block on the broker's locks for long; they read
// snapshots supplied by the caller.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options configures the HTTP server.
type Options struct {
	Addr     string
	Pprof    bool
	Registry *prometheus.Registry // nil: a new registry with Go and process collectors
	// Stats builds the /stats document; nil disables the endpoint.
	Stats  func() *Stats
	Logger *slog.Logger
}

// Server is the running HTTP endpoint.
type Server struct {
	ln        net.Listener
	srv       *http.Server
	readiness atomic.Pointer[func() (bool, string)]
	log       *slog.Logger
}

// Listen binds the address; Serve must be called to answer.
func Listen(opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("httpapi: listen on %s: %w", opts.Addr, err)
	}
	s := &Server{ln: ln, log: opts.Logger}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	s.SetReady(false)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready, why := (*s.readiness.Load())(); !ready {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	if opts.Stats != nil {
		mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			if err := enc.Encode(opts.Stats()); err != nil {
				s.log.Debug("writing /stats", "err", err)
			}
		})
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if opts.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		// No /debug/pprof/cmdline: the command line may hold secrets
		// (--inter-broker-user, --gossip-key, --bootstrap-user).
		mux.Handle("/debug/pprof/cmdline", http.NotFoundHandler())
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// SetReady sets /readyz to a fixed answer: 200, or 503 saying that start
// up (storage recovery, metadata load) is in progress.
func (s *Server) SetReady(ready bool) {
	s.SetReadiness(func() (bool, string) {
		return ready, "storage recovery or metadata load in progress"
	})
}

// SetReadiness makes /readyz ask f on every request: 200 when it says
// ready, 503 with its reason otherwise.
func (s *Server) SetReadiness(f func() (ready bool, why string)) { s.readiness.Store(&f) }

// Serve answers until Close.
func (s *Server) Serve() error {
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("httpapi: %w", err)
	}
	return nil
}

// Close shuts the server down, waiting briefly for in-flight requests.
func (s *Server) Close(ctx context.Context) error {
	return s.srv.Shutdown(ctx)
}
