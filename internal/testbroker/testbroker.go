// Package testbroker starts real `moonmq serve` processes for end-to-end
// tests: it builds the binary once per test binary, runs it on 127.0.0.1:0,
// learns the bound addresses from the startup log line, and stops (or
// SIGKILLs) it on demand and at cleanup. internal/cluster runs several of
// its processes as one cluster.
package testbroker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moonmq/moonmq/internal/syncbuf"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds the moonmq binary (once per test process) and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "moonmq-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "moonmq")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building moonmq: %v", buildErr)
	}
	return binPath
}

// Broker is one running `moonmq serve` process.
type Broker struct {
	t       testing.TB
	DataDir string
	Args    []string
	// NoFile, when set, is the file descriptor limit the process runs
	// under (through prlimit), from the next Restart.
	NoFile int
	// Prefix, when set, is a command the process runs under, one that
	// execs it in place (ip netns exec NAME, say), so the pid and the
	// signals stay the process's.
	Prefix []string
	// Addr is the Kafka listener, HTTPAddr the HTTP listener (host:port).
	Addr, HTTPAddr string

	cmd     *exec.Cmd
	exited  chan struct{}
	serving chan [2]string // the listeners, once the process logs it serves
	log     syncbuf.Buffer
}

// Start runs a broker on a fresh temp data dir with extra flags.
func Start(t testing.TB, extra ...string) *Broker {
	t.Helper()
	return StartIn(t, t.TempDir(), 0, extra...)
}

// StartIn runs a broker on dir (a tmpfs, say) under a file descriptor
// limit (0: inherited) with extra flags.
func StartIn(t testing.TB, dir string, nofile int, extra ...string) *Broker {
	t.Helper()
	b := New(t, dir, extra...)
	b.NoFile = nofile
	b.Restart()
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Errorf("stopping moonmq: %v", err)
		}
		if t.Failed() {
			t.Logf("moonmq log:\n%s", b.LogTail(100))
		}
	})
	return b
}

// New prepares a broker on dir with extra flags without starting it (Launch
// or Restart does) and without a cleanup: the caller stops it. The flags
// come after the defaults (--listen and --http on 127.0.0.1:0, JSON logs at
// debug level), so they can override them.
func New(t testing.TB, dir string, extra ...string) *Broker {
	return &Broker{t: t, DataDir: dir, Args: extra}
}

// Restart starts the process again on the same data dir (it must be stopped)
// and waits until it serves. Listeners on port 0 are bound to new ports.
func (b *Broker) Restart() {
	b.t.Helper()
	b.Launch()
	if err := b.WaitServing(30 * time.Second); err != nil {
		b.t.Fatal(err)
	}
}

// Launch starts the process (it must be stopped) and returns at once: nodes
// of a cluster start together, each waiting for the others. WaitServing
// waits for its listeners.
func (b *Broker) Launch() {
	b.t.Helper()
	args := append([]string{"serve", "--data", b.DataDir, "--listen", "127.0.0.1:0",
		"--http", "127.0.0.1:0", "--log-format", "json", "--log-level", "debug"}, b.Args...)
	argv := append([]string{Binary(b.t)}, args...)
	if b.NoFile > 0 {
		argv = append([]string{"prlimit", fmt.Sprintf("--nofile=%d:%d", b.NoFile, b.NoFile), "--"}, argv...)
	}
	argv = append(append([]string(nil), b.Prefix...), argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("starting moonmq: %v", err)
	}
	b.cmd, b.exited = cmd, make(chan struct{})
	serving := make(chan [2]string, 1)
	b.serving = serving
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			_, _ = b.log.Write([]byte(line + "\n"))
			var rec struct {
				Msg   string `json:"msg"`
				Kafka string `json:"kafka"`
				HTTP  string `json:"http"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "moonmq serving" {
				serving <- [2]string{rec.Kafka, rec.HTTP}
			}
		}
		_, _ = io.Copy(&b.log, stderr) // a line too long for the scanner: keep the rest
	}()
	exited := b.exited
	go func() {
		// Wait closes the pipe: read it to its end first, so Exited
		// means the whole log is in (a test reads its last lines).
		<-logged
		_ = cmd.Wait()
		close(exited)
	}()
}

// WaitServing waits until the launched process logs that it serves, then
// sets Addr and HTTPAddr. A process that exits or does not serve in time
// is an error (and is killed in the second case).
func (b *Broker) WaitServing(timeout time.Duration) error {
	select {
	case a := <-b.serving:
		b.Addr, b.HTTPAddr = a[0], a[1]
		return nil
	case <-b.exited:
		return fmt.Errorf("moonmq exited during start:\n%s", b.Log())
	case <-time.After(timeout):
		b.Kill()
		return fmt.Errorf("moonmq did not start within %v:\n%s", timeout, b.Log())
	}
}

// Signal sends sig to the running process (SIGSTOP, SIGCONT, ...).
func (b *Broker) Signal(sig syscall.Signal) error {
	if b.cmd == nil {
		return fmt.Errorf("moonmq is not running")
	}
	return b.cmd.Process.Signal(sig)
}

// Running reports whether a process was started and not yet reaped by
// Kill or Stop (it may have exited by itself: see Exited).
func (b *Broker) Running() bool { return b.cmd != nil }

// Pid is the process id of the running broker.
func (b *Broker) Pid() int { return b.cmd.Process.Pid }

// Log returns everything the process wrote to stderr so far (over every
// start on this Broker).
func (b *Broker) Log() string { return b.log.String() }

// LogTail returns the last n lines of Log.
func (b *Broker) LogTail(n int) string { return b.log.Tail(n) }

// Kill sends SIGKILL and waits for the process to die.
func (b *Broker) Kill() {
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
	b.cmd = nil
}

// Stop sends SIGTERM and waits (up to 20 s, then SIGKILL). It reports the
// exit status as an error if the process did not exit cleanly.
func (b *Broker) Stop() error { return b.StopWithin(20 * time.Second) }

// StopWithin is Stop with another deadline.
func (b *Broker) StopWithin(timeout time.Duration) error {
	if b.cmd == nil {
		return nil
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(timeout):
		// SIGQUIT first: the Go runtime writes every goroutine's stack to
		// stderr (the log), which shows where the shutdown hangs.
		_ = b.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-b.exited:
		case <-time.After(5 * time.Second):
		}
		b.Kill()
		return fmt.Errorf("moonmq did not stop within %v (its goroutines are in its log)", timeout)
	}
	state := b.cmd.ProcessState
	b.cmd = nil
	if state != nil && !state.Success() {
		return fmt.Errorf("moonmq exited with %v", state)
	}
	return nil
}

// Exited reports whether the process has exited.
func (b *Broker) Exited() <-chan struct{} { return b.exited }

// WaitFor polls cond until it is true or the deadline passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}

// Kcat runs kcat (librdkafka's CLI, installed by `make deps`) with args and
// stdin, within 30 s, and returns its output; a failure fails the test.
func Kcat(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	out, _ := KcatStreams(t, stdin, args...)
	return out
}

// KcatStreams is Kcat returning standard error too: kcat's own messages
// ("% Reached end of topic ... at offset N") and librdkafka's log lines
// ("%3|..." for errors), for tests that check what it reported.
func KcatStreams(t testing.TB, stdin string, args ...string) (stdout, stderr string) {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat is not installed (make deps installs it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %v: %v: %s", args, err, errb.String())
	}
	return out.String(), errb.String()
}
