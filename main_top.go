package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/charmbracelet/x/term"

	"github.com/moonmq/moonmq/internal/cli"
	"github.com/moonmq/moonmq/net/client"
	"github.com/moonmq/moonmq/tui"
)

// top runs `moonmq top`: the live dashboard.
func top(ctx context.Context, args []string, stderr io.Writer) error {
	addr := cli.Addr()
	fs := flag.NewFlagSet("moonmq top", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&addr, "addr", addr, cli.AddrUsage)
	refresh := fs.Duration("refresh", tui.DefaultRefresh, "refresh interval")
	history := fs.Duration("history", tui.DefaultHistory, "how far back the sparklines reach")
	secFlags := client.RegisterSecurityFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: moonmq top [flags]\n\n"+
			"Full-screen live dashboard of a Kafka-compatible cluster: brokers, topics,\n"+
			"partitions, consumer groups and lag, live records. Press ? inside for keys.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("top: unexpected argument %q", fs.Arg(0))
	}
	sec, err := secFlags.Resolve(os.Getenv)
	if err != nil {
		return fmt.Errorf("top: %w", err)
	}
	if client.NeedsPassword(sec) {
		// The dashboard owns the terminal: no prompt.
		return fmt.Errorf("top: %w", client.MissingPasswordError(sec))
	}
	addr = secFlags.Addr(addr)
	copts := client.Options{
		Addr:     addr,
		ClientID: "moonmq-top",
		// Short timeouts: a dashboard should say "reconnecting" quickly
		// rather than wait on a dead broker.
		DialTimeout:    3 * time.Second,
		RequestTimeout: 5 * time.Second,
		Security:       sec,
	}
	copts.EnsureDefaults()
	if err := copts.Validate(); err != nil {
		if sec.Validate() != nil {
			return fmt.Errorf("top: %w", err)
		}
		return fmt.Errorf("top: --addr: %w", err)
	}
	if _, err := sec.TLSConfig(); err != nil {
		return fmt.Errorf("top: %w", err)
	}
	opts := tui.Options{
		Addr:      addr,
		Principal: sec.Principal(),
		Refresh:   *refresh,
		History:   *history,
		Dial:      tui.DialClient(copts),
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return err
	}
	if !term.IsTerminal(os.Stdin.Fd()) || !term.IsTerminal(os.Stdout.Fd()) {
		return errors.New("top: needs an interactive terminal (stdin and stdout must be a TTY)")
	}
	return tui.Run(ctx, opts)
}
