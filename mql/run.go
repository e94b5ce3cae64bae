package mql

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// RunOptions configures RunScript and RunReader.
type RunOptions struct {
	// ContinueOnError runs the remaining statements after one fails; the
	// run still reports failure.
	ContinueOnError bool
	// Stderr receives error reports. Required.
	Stderr io.Writer
}

// Report writes an error the way scripts show them: "FILE:LINE:COL:
// message" (the statement's position; for syntax errors the error's, with
// the source line and a caret). With no file name (a -e statement, the
// REPL) it is "error: [LINE:COL: ]message".
// ExecChunk runs every statement of src, a chunk the REPL read (lines up
// to a complete statement), as the REPL does: a statement's syntax or
// execution error is reported to errOut with r and the next one still
// runs; EXIT stops the chunk and reports exit. run executes one statement
// (the REPL wraps Session.Exec to cancel it on Ctrl-C).
func ExecChunk(src string, errOut io.Writer, r *Renderer, run func(Statement) error) (exit bool) {
	for _, p := range ParseScript("", src) {
		if p.Err != nil {
			Report(errOut, r, "", p, p.Err)
			continue
		}
		err := run(p.Stmt)
		if errors.Is(err, ErrExit) {
			return true
		}
		if err != nil {
			Report(errOut, r, "", p, err)
		}
	}
	return false
}

func Report(w io.Writer, r *Renderer, filename string, p Parsed, err error) {
	var se *SyntaxError
	if errors.As(err, &se) {
		msg := se.Error()
		if filename == "" {
			r.Error(w, msg)
		} else {
			fmt.Fprintln(w, msg)
		}
		fmt.Fprint(w, se.Caret())
		return
	}
	if filename == "" {
		r.Error(w, err.Error())
		return
	}
	fmt.Fprintf(w, "%s:%d:%d: %s\n", filename, p.Pos.Line, p.Pos.Column, err)
}

// RunScript runs a whole script. It parses everything first, so a syntax
// error anywhere stops the run before any statement touched the broker;
// then it executes statements in order and stops at the first failure
// (unless ContinueOnError). It returns true if every statement succeeded
// (EXIT ends the run successfully).
func RunScript(ctx context.Context, s *Session, filename, src string, opts RunOptions) bool {
	parsed := ParseScript(filename, src)
	bad := false
	for _, p := range parsed {
		if p.Err != nil {
			Report(opts.Stderr, s.out, filename, p, p.Err)
			bad = true
		}
	}
	if bad {
		return false
	}
	ok := true
	for _, p := range parsed {
		if err := ctx.Err(); err != nil {
			fmt.Fprintf(opts.Stderr, "%s: interrupted\n", orStdin(filename))
			return false
		}
		err := s.Exec(ctx, p.Stmt)
		if errors.Is(err, ErrExit) {
			return ok
		}
		if err != nil {
			Report(opts.Stderr, s.out, filename, p, err)
			ok = false
			if !opts.ContinueOnError {
				return false
			}
		}
	}
	return ok
}

func orStdin(name string) string {
	if name == "" {
		return "<stdin>"
	}
	return name
}

// RunReader runs statements from r as they arrive (a pipe into `moonmq
// --repl`): each statement executes once its ';' is read, so a SUBSCRIBE
// in a pipe streams. Unlike RunScript it cannot check the whole input
// first; a syntax error is reported when reached and, like any failure,
// stops the run unless ContinueOnError.
func RunReader(ctx context.Context, s *Session, filename string, r io.Reader, opts RunOptions) bool {
	br := bufio.NewReader(r)
	var buf strings.Builder
	line, startLine := 0, 1
	ok := true
	for {
		text, readErr := br.ReadString('\n')
		if text != "" {
			line++
			buf.WriteString(text)
		}
		eof := readErr != nil
		if buf.Len() > 0 && (eof || Complete(buf.String())) {
			chunk := buf.String()
			buf.Reset()
			for _, p := range ParseScriptAt(filename, chunk, startLine) {
				var err error
				if p.Err != nil {
					err = p.Err
				} else if ctx.Err() != nil {
					fmt.Fprintf(opts.Stderr, "%s: interrupted\n", orStdin(filename))
					return false
				} else {
					err = s.Exec(ctx, p.Stmt)
				}
				if errors.Is(err, ErrExit) {
					return ok
				}
				if err != nil {
					Report(opts.Stderr, s.out, filename, p, err)
					ok = false
					if !opts.ContinueOnError {
						return false
					}
				}
			}
			startLine = line + 1
		}
		if eof {
			if !errors.Is(readErr, io.EOF) {
				fmt.Fprintf(opts.Stderr, "%s: reading: %v\n", orStdin(filename), readErr)
				return false
			}
			return ok
		}
	}
}
