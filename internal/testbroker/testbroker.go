// Package testbroker starts real `moonmq serve` processes for end-to-end
// tests: it builds the binary once per test binary, runs it on 127.0.0.1:0,
// learns the bound addresses from the startup log line, and stops (or
// SIGKILLs) it on demand and at cleanup.
package testbroker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
	// Addr is the Kafka listener, HTTPAddr the HTTP listener (host:port).
	Addr, HTTPAddr string

	cmd    *exec.Cmd
	exited chan struct{}
	log    syncbuf.Buffer
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
	b := &Broker{t: t, DataDir: dir, Args: extra, NoFile: nofile}
	b.Restart()
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Errorf("stopping moonmq: %v", err)
		}
		if t.Failed() {
			t.Logf("moonmq log:\n%s", b.log.Tail(100))
		}
	})
	return b
}

// Restart starts the process again on the same data dir (it must be stopped).
// The listeners are bound to new ports.
func (b *Broker) Restart() {
	b.t.Helper()
	args := append([]string{"serve", "--data", b.DataDir, "--listen", "127.0.0.1:0",
		"--http", "127.0.0.1:0", "--log-format", "json", "--log-level", "debug"}, b.Args...)
	cmd := exec.Command(Binary(b.t), args...)
	if b.NoFile > 0 {
		lim := fmt.Sprintf("--nofile=%d:%d", b.NoFile, b.NoFile)
		cmd = exec.Command("prlimit", append([]string{lim, "--", Binary(b.t)}, args...)...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("starting moonmq: %v", err)
	}
	b.cmd, b.exited = cmd, make(chan struct{})
	ready := make(chan [2]string, 1)
	go func() {
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
				ready <- [2]string{rec.Kafka, rec.HTTP}
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(b.exited)
	}()
	select {
	case a := <-ready:
		b.Addr, b.HTTPAddr = a[0], a[1]
	case <-b.exited:
		b.t.Fatalf("moonmq exited during start:\n%s", b.Log())
	case <-time.After(30 * time.Second):
		b.Kill()
		b.t.Fatalf("moonmq did not start within 30s:\n%s", b.Log())
	}
}

// Pid is the process id of the running broker.
func (b *Broker) Pid() int { return b.cmd.Process.Pid }

// Log returns everything the process wrote to stderr so far.
func (b *Broker) Log() string { return b.log.String() }

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
func (b *Broker) Stop() error {
	if b.cmd == nil {
		return nil
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(20 * time.Second):
		b.Kill()
		return fmt.Errorf("moonmq did not stop within 20s")
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
