package main

// The MQL console's command line:
//
//	moonmq --repl [--addr host:port] [--output table|json|csv] [--history FILE]
//	moonmq run [--addr] [--output] [--continue-on-error] FILE.mql...   (FILE "-" is stdin)
//	moonmq -e 'STATEMENT;' [--addr] [--output]
//
// all with the security flags of net/client.RegisterSecurityFlags (--user,
// --password, --mechanism, --tls, --tls-ca, --tls-cert, --tls-key,
// --client-config). The address defaults to $MOONMQ_ADDR, then the client
// config's bootstrap.servers, then 127.0.0.1:9092.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chzyer/readline"

	"github.com/moonmq/moonmq/internal/cli"
	"github.com/moonmq/moonmq/mql"
	"github.com/moonmq/moonmq/mql/repl"
	"github.com/moonmq/moonmq/net/client"
)

type mqlConfig struct {
	repl            bool
	exec            string
	addr            string
	sec             *client.SecurityFlags
	output          string
	history         string
	timeout         time.Duration
	continueOnError bool
}

func mqlFlags(name string, stderr io.Writer) (*flag.FlagSet, *mqlConfig) {
	cfg := &mqlConfig{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	home, _ := os.UserHomeDir()
	history := ""
	if home != "" {
		history = filepath.Join(home, ".moonmq_history")
	}
	fs.BoolVar(&cfg.repl, "repl", false, "open the interactive MQL console")
	fs.StringVar(&cfg.exec, "e", "", "run one or more statements and exit")
	fs.StringVar(&cfg.addr, "addr", cli.Addr(), cli.AddrUsage)
	cfg.sec = client.RegisterSecurityFlags(fs)
	fs.StringVar(&cfg.output, "output", "table", "output format: table, json or csv")
	fs.StringVar(&cfg.history, "history", history, "REPL history file (empty: no history file)")
	fs.DurationVar(&cfg.timeout, "timeout", 15*time.Second, "bound on each broker request")
	fs.BoolVar(&cfg.continueOnError, "continue-on-error", false, "run: keep going after a failed statement (still exits 1)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage:
  moonmq --repl [flags]                          interactive MQL console
  moonmq run [flags] FILE.mql...                 run scripts (FILE "-" reads stdin); exit 1 on the first failure
  moonmq -e 'STATEMENT; ...' [flags]             run statements and exit

Flags:
`)
		fs.PrintDefaults()
	}
	return fs, cfg
}

// parseInterleaved parses flags that may come before, between or after
// positional arguments (moonmq run a.mql --output json).
func parseInterleaved(fs *flag.FlagSet, args []string, stderr io.Writer) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args, stderr); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// mqlCommand runs `moonmq --repl`, `moonmq run` and `moonmq -e`, returning
// the process exit code: 0 success, 1 a failed statement, 2 usage.
func mqlCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	name := "moonmq"
	if len(args) > 0 && args[0] == "run" {
		name = "moonmq run"
	}
	fs, cfg := mqlFlags(name, stderr)
	// Flags may come anywhere, before or after the mode: `moonmq --addr A
	// -e ...`, `moonmq -e ... --addr A` and `moonmq --output json run f.mql`
	// all mean the same. "run" is the first positional argument.
	files, err := parseInterleaved(fs, args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	isRun := len(files) > 0 && files[0] == "run"
	if isRun {
		files = files[1:]
	}
	format, err := mql.ParseFormat(cfg.output)
	if err != nil {
		fmt.Fprintf(stderr, "moonmq: --output: %v\n", err)
		return 2
	}
	modes := 0
	for _, on := range []bool{isRun, cfg.repl, cfg.exec != ""} {
		if on {
			modes++
		}
	}
	if modes != 1 {
		fmt.Fprintln(stderr, "moonmq: choose one of --repl, run FILE.mql or -e 'STATEMENT;'")
		fs.Usage()
		return 2
	}
	if !isRun && len(files) > 0 {
		fmt.Fprintf(stderr, "moonmq: unexpected argument %q\n", files[0])
		return 2
	}
	if isRun && len(files) == 0 {
		fmt.Fprintln(stderr, "moonmq run: no script given (moonmq run FILE.mql)")
		return 2
	}

	stdinTTY := readline.IsTerminal(int(os.Stdin.Fd()))
	sec, err := resolveToolkitSecurity(cfg.sec, cfg.repl && stdinTTY, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "moonmq:", err)
		return 2
	}
	stdoutTTY := stdout == io.Writer(os.Stdout) && readline.IsTerminal(int(os.Stdout.Fd()))
	sess := mql.NewSession(mql.Options{
		Addr: cfg.sec.Addr(cfg.addr), RequestTimeout: cfg.timeout, DialTimeout: min(cfg.timeout, 5*time.Second),
		Out: stdout, Status: stderr, Format: format, Color: stdoutTTY && os.Getenv("NO_COLOR") == "",
		Security: sec,
	})
	defer sess.Close()
	runOpts := mql.RunOptions{ContinueOnError: cfg.continueOnError, Stderr: stderr}

	switch {
	case cfg.exec != "":
		return exitCode(mql.RunScript(ctx, sess, "", cfg.exec, runOpts))
	case isRun:
		ok := true
		for _, f := range files {
			if f == "-" {
				ok = mql.RunReader(ctx, sess, "<stdin>", os.Stdin, runOpts) && ok
			} else {
				src, err := os.ReadFile(f)
				if err != nil {
					fmt.Fprintf(stderr, "moonmq run: %v\n", err)
					return 1
				}
				ok = mql.RunScript(ctx, sess, f, string(src), runOpts) && ok
			}
			if !ok && !cfg.continueOnError {
				break
			}
		}
		return exitCode(ok)
	case !stdinTTY:
		// `moonmq --repl < script.mql`: no prompts, statements run as
		// they arrive, failures behave as in scripts.
		return exitCode(mql.RunReader(ctx, sess, "<stdin>", os.Stdin, runOpts))
	}

	// Interactive. SIGINT must cancel one statement, not the console, so
	// the REPL handles signals itself and ignores the process context's
	// cancellation (it still stops on SIGTERM and EXIT).
	bctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	banner := replBanner(bctx, sess)
	cancel()
	if err := repl.Run(context.WithoutCancel(ctx), repl.Options{
		Session: sess, Stdout: stdout, Stderr: stderr, HistoryFile: strings.TrimSpace(cfg.history), Banner: banner,
	}); err != nil {
		fmt.Fprintln(stderr, "moonmq:", err)
		return 1
	}
	return 0
}

// replBanner is what the interactive console prints first: where it is
// connected and how to use and leave it. The README shows it; its
// walkthrough test compares the two.
func replBanner(ctx context.Context, sess *mql.Session) string {
	const head = "MoonMQ console"
	banner, err := sess.Banner(ctx)
	if err != nil {
		banner = fmt.Sprintf("%s — not connected: %v\nUse CONNECT 'host:port'; to connect.", head, err)
	} else {
		banner = head + " — " + banner
	}
	return banner + "\nType HELP; for the statements. End statements with ';'. Ctrl-C cancels; exit, \\q or Ctrl-D leaves."
}

func exitCode(ok bool) int {
	if ok {
		return 0
	}
	return 1
}
