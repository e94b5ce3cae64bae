package e2e

// The MQL console (`moonmq --repl`) on a pseudo-terminal: the binary runs
// on a pty, as a person uses it.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/testbroker"
	"github.com/moonmq/moonmq/internal/testnode"
	"github.com/moonmq/moonmq/net/client"
	"github.com/moonmq/moonmq/node"
)

// term is a process running on a pseudo-terminal, with its output
// collected for expectations.
type term struct {
	t    *testing.T
	f    *os.File
	mu   sync.Mutex
	buf  strings.Builder
	mark int // expectations look at output after mark
	done chan struct{}
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r`)

func (tm *term) output() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return ansi.ReplaceAllString(tm.buf.String(), "")
}

// raw is the output with its escape sequences.
func (tm *term) raw() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.buf.String()
}

// startTerm runs `moonmq args...` on a pseudo-terminal and collects its
// output; the process is killed at cleanup.
func startTerm(t *testing.T, ctx context.Context, args ...string) (*term, *exec.Cmd) {
	t.Helper()
	cmd := exec.CommandContext(ctx, testbroker.Binary(t), args...)
	cmd.Env = append(os.Environ(), "TERM=xterm", "MOONMQ_ADDR=")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	require.NoError(t, err)
	tm := &term{t: t, f: f, done: make(chan struct{})}
	go func() {
		defer close(tm.done)
		chunk := make([]byte, 4096)
		for {
			n, err := f.Read(chunk)
			tm.mu.Lock()
			tm.buf.Write(chunk[:n])
			tm.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = f.Close()
		<-tm.done
		if t.Failed() {
			t.Logf("terminal output:\n%s", tm.output())
		}
	})
	return tm, cmd
}

// waitExit waits for the console to end by itself, with status 0.
func waitExit(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("the console did not leave")
	}
}

// expect waits until the screen output after the last match contains want.
func (tm *term) expect(want string) {
	tm.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := tm.output()
		if i := strings.Index(out[min(tm.mark, len(out)):], want); i >= 0 {
			tm.mark += i + len(want)
			return
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("timed out waiting for %q; output after the last match:\n%s", want, out[min(tm.mark, len(out)):])
		}
		time.Sleep(20 * time.Millisecond) // polling a pty: there is no event to wait on
	}
}

func (tm *term) send(s string) {
	tm.t.Helper()
	_, err := tm.f.Write([]byte(s))
	require.NoError(tm.t, err)
}

// TestREPLOnTerminal drives `moonmq --repl` through a real pseudo-terminal:
// banner, multi-line input with the continuation prompt, history recall
// with the up arrow (and the history file), tab completion of a keyword, a
// topic and a group, Ctrl-C cancelling a statement being typed and a
// running SUBSCRIBE, and Ctrl-D leaving.
func TestREPLOnTerminal(t *testing.T) {
	addr := testnode.Start(t, node.Config{}).Addr().String() // the broker needs no process
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, client.Options{Addr: addr})
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.CreateTopic(ctx, "orders-repl", 1, 1, nil))
	_, err = cl.Produce(ctx, "orders-repl", []client.Record{{Partition: client.AnyPartition, Value: []byte("v1")}})
	require.NoError(t, err)
	require.NoError(t, cl.CommitOffset(ctx, "billing-repl", "orders-repl", 0, 1))

	history := filepath.Join(t.TempDir(), "history")
	tm, cmd := startTerm(t, ctx, "--repl", "--addr", addr, "--history", history)

	tm.expect("MoonMQ console — connected to " + addr)
	tm.expect("mq> ")

	// Multi-line statement: the continuation prompt until ';'.
	tm.send("SELECT count(*)\r")
	tm.expect("..> ")
	tm.send("FROM orders-repl;\r")
	tm.expect("count")
	tm.expect("(1 row)")
	tm.expect("mq> ")

	// Up arrow recalls the whole statement as one line.
	tm.send("\x1b[A")
	tm.expect("SELECT count(*) FROM orders-repl;")
	tm.send("\r")
	tm.expect("(1 row)")
	tm.expect("mq> ")

	// Tab completes a keyword (keeping the case typed), a topic and a group.
	tm.send("descr\t")
	tm.expect("describe ")
	tm.send("TOPIC ord\t")
	tm.expect("orders-repl ")
	tm.send(";\r")
	tm.expect("topic 'orders-repl': 1 partition")
	tm.expect("mq> ")
	tm.send("DESCRIBE GROUP bill\t")
	tm.expect("billing-repl ")
	tm.send(";\r")
	tm.expect("coordinator")
	tm.expect("billing-repl  Empty  NULL")
	tm.expect("mq> ")

	// Ctrl-C while typing drops the unfinished statement.
	tm.send("SELECT * FROM\r")
	tm.expect("..> ")
	tm.send("\x03")
	tm.expect("mq> ")
	tm.send("SHOW TOPICS;\r")
	tm.expect("orders-repl")
	tm.expect("mq> ")

	// A syntax error shows the caret and the console stays.
	tm.send("SHOW TOPICZ;\r")
	tm.expect("error: 1:6: unexpected \"TOPICZ\"")
	tm.expect("did you mean TOPICS?")
	tm.expect("^")
	tm.expect("mq> ")

	// Ctrl-C stops a running SUBSCRIBE without leaving the console.
	tm.send("SUBSCRIBE TO orders-repl;\r")
	tm.expect("partition  offset")
	tm.send("\x03")
	tm.expect("(0 rows)")
	tm.expect("mq> ")
	tm.send("SHOW BROKERS;\r")
	tm.expect("(1 row)")
	tm.expect("mq> ")

	// Ctrl-D leaves with status 0; the history file kept the statements.
	tm.send("\x04")
	require.NoError(t, cmd.Wait())
	h, err := os.ReadFile(history)
	require.NoError(t, err)
	require.Contains(t, string(h), "SELECT count(*) FROM orders-repl;\n")
	require.Contains(t, string(h), "SUBSCRIBE TO orders-repl;\n")
}

// exit, quit and \q leave without a ';' (\q even in the middle of a
// statement), and Ctrl-L clears the screen and redraws the prompt. No
// broker is needed: the console starts disconnected.
func TestREPLLeaveWordsAndClearScreen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := []string{"--repl", "--addr", "127.0.0.1:1", "--timeout", "2s", "--history", ""}

	tm, cmd := startTerm(t, ctx, args...)
	tm.expect("not connected")
	tm.expect("mq> ")
	tm.send("SHOW TOPICS")
	tm.send("\x0c")
	testbroker.WaitFor(t, 10*time.Second, "the screen cleared", func() bool {
		return strings.Contains(tm.raw(), "\x1b[H\x1b[2J")
	})
	// The prompt and the line being typed come back at the top.
	tm.expect("mq> SHOW TOPICS")
	tm.send("\x15exit\r") // Ctrl-U clears the line first
	waitExit(t, cmd)

	for _, word := range []string{"quit", "QUIT", "Exit;", `\q`} {
		tm, cmd := startTerm(t, ctx, args...)
		tm.expect("mq> ")
		tm.send(word + "\r")
		waitExit(t, cmd)
	}

	// In a statement, "exit" is part of it (a syntax error later), but \q
	// leaves.
	tm, cmd = startTerm(t, ctx, args...)
	tm.expect("mq> ")
	tm.send("SELECT *\r")
	tm.expect("..> ")
	tm.send("exit\r")
	tm.expect("..> ")
	tm.send(`\q` + "\r")
	waitExit(t, cmd)
}
