// Package repl is the interactive MQL console: line editing and persistent
// history (chzyer/readline), `mq> ` / `..> ` prompts for statements that
// span lines, tab completion of keywords and of topic and group names
// fetched from the broker, Ctrl-C to cancel the statement being typed or
// running (a SUBSCRIBE stops, the console stays), Ctrl-D, `exit`, `quit`
// or `\q` (no ';' needed) to leave, Ctrl-L to clear the screen.
//
// Invariants: one statement runs at a time, on the goroutine that reads
// input; a running statement's context is canceled by SIGINT and by
// nothing else the user types; the terminal is in raw mode only while a
// line is being read, so Ctrl-C during a statement arrives as SIGINT.
package repl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/chzyer/readline"

	"github.com/moonmq/moonmq/mql"
)

// Options configures Run.
type Options struct {
	// Session executes statements. Required.
	Session *mql.Session
	// Stdin, Stdout, Stderr default to the process's.
	Stdin          io.ReadCloser
	Stdout, Stderr io.Writer
	// HistoryFile persists history across sessions; "" keeps it in memory.
	HistoryFile string
	// Banner is printed first, if set.
	Banner string
}

const (
	promptFirst = "mq> "
	promptMore  = "..> "
	// clearScreen homes the cursor and erases the screen (ECMA-48 CUP, ED).
	clearScreen = "\x1b[H\x1b[2J"
)

// leaves reports whether a line asks to leave the console without a ';':
// exit or quit (any case) at the start of a statement, as people type them
// in other consoles, or \q anywhere (psql's), which also drops a statement
// being typed.
func leaves(line string, pending bool) bool {
	w := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(line), ";"))
	return w == `\q` || (!pending && (w == "exit" || w == "quit"))
}

// Run reads and executes statements until EXIT, Ctrl-D or ctx is done.
func Run(ctx context.Context, opts Options) error {
	if opts.Stdin == nil {
		opts.Stdin = os.Stdin
	}
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	comp := &completer{session: opts.Session}
	rl, err := readline.NewEx(&readline.Config{
		Prompt:                 promptFirst,
		HistoryFile:            opts.HistoryFile,
		HistoryLimit:           1000,
		DisableAutoSaveHistory: true, // a statement is saved once, whole
		HistorySearchFold:      true,
		AutoComplete:           comp,
		InterruptPrompt:        "^C",
		EOFPrompt:              "",
		Stdin:                  opts.Stdin,
		Stdout:                 opts.Stdout,
		Stderr:                 opts.Stderr,
		// readline's own Ctrl-L only homes the cursor and redraws the
		// line over what was there; erase the screen first, then let it
		// redraw the prompt at the top.
		FuncFilterInputRune: func(r rune) (rune, bool) {
			if r == readline.CharCtrlL {
				_, _ = io.WriteString(opts.Stdout, clearScreen)
			}
			return r, true
		},
	})
	if err != nil {
		return fmt.Errorf("starting the line editor: %w", err)
	}
	defer rl.Close()

	// SIGINT cancels the running statement; while a line is being read
	// the terminal is raw and Ctrl-C comes from readline instead.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var (
		cancelStmt context.CancelFunc = func() {}
		stmtDone                      = make(chan struct{})
		terminated                    = make(chan struct{})
		cancelCh                      = make(chan context.CancelFunc, 1)
	)
	go func() {
		for {
			select {
			case <-stmtDone:
				return
			case c := <-cancelCh:
				cancelStmt = c
			case sig := <-sigs:
				cancelStmt()
				if sig == syscall.SIGTERM {
					close(terminated)
					return
				}
			}
		}
	}()
	defer close(stmtDone)

	out := opts.Session.Renderer()
	if opts.Banner != "" {
		fmt.Fprintln(opts.Stdout, opts.Banner)
	}
	var buf strings.Builder
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-terminated:
			return nil
		default:
		}
		if buf.Len() == 0 {
			rl.SetPrompt(promptFirst)
		} else {
			rl.SetPrompt(promptMore)
		}
		comp.setPending(buf.String())
		line, err := rl.Readline()
		switch {
		case errors.Is(err, readline.ErrInterrupt):
			// Ctrl-C while typing: drop the statement, stay.
			buf.Reset()
			continue
		case errors.Is(err, io.EOF):
			fmt.Fprintln(opts.Stdout)
			return nil
		case err != nil:
			return fmt.Errorf("reading input: %w", err)
		}
		if leaves(line, hasTokens(buf.String())) {
			return nil
		}
		buf.WriteString(line)
		buf.WriteByte('\n')
		src := buf.String()
		if !mql.Complete(src) {
			if strings.TrimSpace(src) == "" {
				buf.Reset()
			}
			continue
		}
		buf.Reset()
		if !hasPassword(src) {
			_ = rl.SaveHistory(historyLine(src))
		}
		// Every statement of the chunk runs; an error does not stop the
		// next (docs/mql.md's examples are run the same way).
		exit := mql.ExecChunk(src, opts.Stderr, out, func(st mql.Statement) error {
			sctx, cancel := context.WithCancel(ctx)
			cancelCh <- cancel
			err := opts.Session.Exec(sctx, st)
			cancel()
			if _, ok := st.(*mql.Connect); ok {
				comp.invalidate()
			}
			return err
		})
		if exit {
			return nil
		}
	}
}

// hasTokens reports whether src holds anything but space and comments: a
// statement has been started.
func hasTokens(src string) bool {
	toks, err := mql.Tokenize("", src)
	return err != nil || len(toks) > 1 // an unterminated string counts
}

// hasPassword reports whether src holds a PASSWORD clause (CONNECT ...
// USER, CREATE USER): such statements are kept out of the history file,
// where a password would stay in clear text.
func hasPassword(src string) bool {
	toks, err := mql.Tokenize("", src)
	if err != nil {
		return strings.Contains(strings.ToUpper(src), "PASSWORD")
	}
	for _, t := range toks {
		if t.Type == mql.KeywordType && t.Value == "PASSWORD" {
			return true
		}
	}
	return false
}

// historyLine stores a multi-line statement as one history entry, so the
// up arrow recalls the whole statement.
func historyLine(src string) string {
	lines := strings.Split(strings.TrimSpace(src), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, " ")
}
