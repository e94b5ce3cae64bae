// Command moonmq is the MoonMQ broker and its toolkit in one binary:
//
//	moonmq serve   run a broker node
//	moonmq bench   produce/consume load generator
//	moonmq version print the version
//
// Package main holds the command line only: flags, the config file and the
// environment (config.go, serve.go), the toolkit commands' entry points
// (main_mql.go, main_top.go) and the dispatch below. The broker node itself
// is assembled by package node (serve.go turns the settings into a
// node.Config); nothing here holds broker logic.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/moonmq/moonmq/internal/bench"
	"github.com/moonmq/moonmq/internal/cli"
)

// version is set with -ldflags "-X main.version=..." by the Makefile.
var version = "dev"

const usage = `moonmq — a Kafka-compatible message broker and its toolkit

Usage:
  moonmq serve [flags]          run a broker node (moonmq serve --help for flags)
  moonmq bench produce|consume  load generator (moonmq bench produce --help)
  moonmq top [--addr host:port] live dashboard: brokers, topics, groups, records
  moonmq --repl [--addr ...]    MQL console (also: moonmq run FILE.mql, moonmq -e 'STMT;')
  moonmq version                print the version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stdout, stderr)
	case "bench":
		err = bench.Run(ctx, args[1:], stdout, stderr)
	case "top":
		err = top(ctx, args[1:], stderr)
	case "--repl", "-repl", "run", "-e", "--e":
		return mqlCommand(ctx, args, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "moonmq", versionString())
		return 0
	case "help", "--help", "-h", "-help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		if isMQLInvocation(args) {
			// Toolkit flags before the mode: moonmq --addr A -e '...'.
			return mqlCommand(ctx, args, stdout, stderr)
		}
		fmt.Fprintf(stderr, "moonmq: unknown command %q%s\n\n%s", args[0], cli.DidYouMean(strings.TrimLeft(args[0], "-"), commands, ""), usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintln(stderr, "moonmq:", err)
		return 1
	}
}

// commands are the first arguments run knows, for suggestions.
var commands = []string{"serve", "bench", "top", "run", "version", "help"}

// isMQLInvocation reports whether args, which start with a flag, name an
// MQL mode (--repl, -e or run) somewhere.
func isMQLInvocation(args []string) bool {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return false
	}
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if a == "run" || strings.HasPrefix(a, "-") && (name == "e" || name == "repl") {
			return true
		}
	}
	return false
}

// errUsage marks an error already reported by a FlagSet.
var errUsage = errors.New("usage error")

func versionString() string {
	v := version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return v
}
