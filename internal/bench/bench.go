// Package bench is the `moonmq bench` load generator: `produce` drives P
// concurrent producers at a topic (optionally at a fixed rate) and reports
// throughput and per-record latency percentiles (with --transactional, in
// transactions of N records, adding commit latency percentiles and the
// transactions committed and aborted); `consume` reads a topic from
// a start position to the end offsets snapshotted at start (or N records)
// and reports throughput.
//
// It talks to any Kafka-compatible broker. Topic housekeeping (existence
// check, --create, end offsets) goes through net/client; the hot paths use
// franz-go kgo clients tuned for throughput, which net/client.NewKgo
// creates so that seeds, dialing and timeouts are configured in one place.
//
// Invariants: every run is bounded (a record count, the end-offset snapshot,
// or --timeout); the live progress line goes to stderr only when stderr is a
// terminal, so piped output stays clean; with --output json the final result
// is exactly one JSON object on stdout.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"

	"github.com/moonmq/moonmq/internal/cli"
)

// ErrUsage marks errors in the command line (unknown subcommand, bad flag or
// flag value); the CLI exits with status 2 for them.
var ErrUsage = errors.New("usage error")

// ErrFailed marks a run that completed but with failed records.
var ErrFailed = errors.New("records failed")

const topUsage = `usage: moonmq bench <produce|consume|connect> [flags]

  produce   write records as fast as possible (or at --rate) and report
            throughput and latency percentiles
  consume   read a topic from --from to its current end (or --records N)
            and report throughput
  connect   open --connections connections (TLS and SASL as the security
            flags say) and report connections/s and set-up latency

Run 'moonmq bench <command> --help' for the flags of a command.
`

// Run parses args (the words after "moonmq bench") and runs the subcommand,
// writing the result to stdout and the live progress line (terminals only) to
// stderr. --help prints the flags with their defaults and returns nil.
// Command-line mistakes return an error matching ErrUsage that names the
// offending flag.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage)
		return fmt.Errorf("bench: %w: missing command (produce, consume or connect)", ErrUsage)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, topUsage)
		return nil
	case "produce":
		cfg, help, err := parseProduce(args[1:])
		if help {
			printUsage(stdout, produceSynopsis, cfg.flags)
			return nil
		}
		if err != nil {
			return err
		}
		res, err := Produce(ctx, cfg, progressWriter(stderr))
		return finish(stdout, cfg.Output, res, err)
	case "consume":
		cfg, help, err := parseConsume(args[1:])
		if help {
			printUsage(stdout, consumeSynopsis, cfg.flags)
			return nil
		}
		if err != nil {
			return err
		}
		res, err := Consume(ctx, cfg, progressWriter(stderr))
		return finish(stdout, cfg.Output, res, err)
	case "connect":
		cfg, help, err := parseConnect(args[1:])
		if help {
			printUsage(stdout, connectSynopsis, cfg.flags)
			return nil
		}
		if err != nil {
			return err
		}
		res, err := Connect(ctx, cfg)
		return finish(stdout, cfg.Output, res, err)
	default:
		return fmt.Errorf("bench: %w: unknown command %q (want produce, consume or connect)", ErrUsage, args[0])
	}
}

// finish prints the result of a run that got far enough to have one.
func finish(stdout io.Writer, output string, res Result, err error) error {
	if res.Mode == "" { // the run never started
		return err
	}
	if perr := res.Print(stdout, output); perr != nil {
		return errors.Join(err, fmt.Errorf("bench: write result: %w", perr))
	}
	return err
}

// parseFlags parses args into fs, turning flag-package errors into ErrUsage
// errors that name the flag. help reports --help / -h.
func parseFlags(cmd string, fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := cli.Parse(fs, args); err != nil { // prints nothing: we print usage and errors ourselves
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, fmt.Errorf("bench %s: %w: %v (see 'moonmq bench %s --help')", cmd, ErrUsage, err, cmd)
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("bench %s: %w: unexpected argument %q (flags only)", cmd, ErrUsage, fs.Arg(0))
	}
	return false, nil
}

// flagError reports an invalid flag value, naming the flag.
func flagError(cmd, name, format string, args ...any) error {
	return fmt.Errorf("bench %s: %w: --%s: %s", cmd, ErrUsage, name, fmt.Sprintf(format, args...))
}

// printUsage lists every flag with its default (flag.PrintDefaults hides
// zero defaults, which are meaningful here: --rate 0 means unlimited).
func printUsage(w io.Writer, synopsis string, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: moonmq bench %s\n\nflags:\n", synopsis)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	for _, n := range names {
		f := fs.Lookup(n)
		arg, usage := flag.UnquoteUsage(f)
		if arg != "" {
			arg = " " + arg
		}
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(tw, "  --%s%s\t%s (default %s)\n", n, arg, usage, def)
	}
	_ = tw.Flush()
}

// progressWriter returns w if it is a terminal, else nil (no progress line).
func progressWriter(w io.Writer) io.Writer {
	if isTerminal(w) {
		return w
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
