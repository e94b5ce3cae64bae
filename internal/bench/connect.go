package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonmq/moonmq/internal/cli"
	"github.com/moonmq/moonmq/net/client"
)

const connectSynopsis = `usage: moonmq bench connect [flags]

Opens --connections new connections (--concurrency at a time), each set up
as a client does it (TCP, the TLS handshake and the SASL login the security
flags ask for, ApiVersions) and used for one Metadata request, then closed;
reports connections per second and the set-up latency percentiles. With
SCRAM, most of a connection's cost is the client's PBKDF2 of the password
(the credential's iterations), which is what makes guessing slow.
`

// ConnectConfig is a connect run's settings.
type ConnectConfig struct {
	Addr        string
	Connections int
	Concurrency int
	Output      string
	ClientID    string
	Timeout     time.Duration
	Security    client.Security

	flags *flag.FlagSet
}

func parseConnect(args []string) (ConnectConfig, bool, error) {
	cfg := ConnectConfig{Addr: cli.Addr(), Connections: 200, Concurrency: 1, Output: "text", ClientID: "moonmq-bench"}
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	cfg.flags = fs
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, cli.AddrUsage)
	fs.IntVar(&cfg.Connections, "connections", cfg.Connections, "connections to open (`N`)")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "connections set up at once (`N`)")
	fs.StringVar(&cfg.Output, "output", cfg.Output, "result `format`: text or json")
	fs.StringVar(&cfg.ClientID, "client-id", cfg.ClientID, "client `id` sent to the broker")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "stop after this `duration`, 0 = no limit")
	sf := securityFlags(fs)
	help, err := parseFlags("connect", fs, args)
	if help || err != nil {
		return cfg, help, err
	}
	if err := resolveSecurity("connect", sf, &cfg.Addr, &cfg.Security); err != nil {
		return cfg, false, err
	}
	const cmd = "connect"
	switch {
	case strings.TrimSpace(cfg.Addr) == "":
		return cfg, false, flagError(cmd, "addr", "required")
	case cfg.Connections < 1:
		return cfg, false, flagError(cmd, "connections", "must be at least 1 (got %d)", cfg.Connections)
	case cfg.Concurrency < 1 || cfg.Concurrency > 1000:
		return cfg, false, flagError(cmd, "concurrency", "must be between 1 and 1000 (got %d)", cfg.Concurrency)
	case cfg.Output != "text" && cfg.Output != "json":
		return cfg, false, flagError(cmd, "output", "must be text or json (got %q)", cfg.Output)
	case cfg.Timeout < 0:
		return cfg, false, flagError(cmd, "timeout", "must not be negative (got %s)", cfg.Timeout)
	}
	return cfg, false, nil
}

// Connect runs a connect benchmark. A connection that fails is counted
// (Failed) with the first error kept; the run goes on.
func Connect(ctx context.Context, cfg ConnectConfig) (Result, error) {
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	res := Result{Mode: "connect", Topic: "", Params: map[string]any{
		"connections": cfg.Connections, "concurrency": cfg.Concurrency,
		"security": cfg.Security.Protocol(), "mechanism": cfg.Security.Mechanism,
	}}
	hist := NewHistogram()
	var (
		next, ok, failed atomic.Int64
		firstErr         error
		errOnce          sync.Once
		wg               sync.WaitGroup
	)
	opts := clientOptions(cfg.Addr, cfg.ClientID, cfg.Security)
	start := time.Now()
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(cfg.Connections) && ctx.Err() == nil {
				t0 := time.Now()
				err := connectOnce(ctx, opts)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
					continue
				}
				hist.Record(time.Since(t0))
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	res.Records, res.Failed = ok.Load(), failed.Load()
	res.setRates(time.Since(start))
	if hist.Count() > 0 {
		res.Latency = latencyOf(hist)
	}
	if firstErr != nil {
		res.FirstError = firstErr.Error()
		return res, fmt.Errorf("bench connect: %d of %d connections failed: %w", res.Failed, res.Failed+res.Records, firstErr)
	}
	if res.Records == 0 && ctx.Err() != nil {
		return res, errors.New("bench connect: stopped before any connection was set up")
	}
	return res, nil
}

// connectOnce sets up one connection and asks for the cluster's metadata
// over it, as a client's first request.
func connectOnce(ctx context.Context, opts client.Options) error {
	cl, err := client.NewKgo(opts)
	if err != nil {
		return err
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return cl.Ping(cctx)
}
