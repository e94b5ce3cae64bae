package e2e

// The dashboard (`moonmq top`) in a real terminal: tmux runs the binary.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/testbroker"
	"github.com/moonmq/moonmq/internal/testnode"
	"github.com/moonmq/moonmq/net/client"
	"github.com/moonmq/moonmq/node"
)

// tmuxSession drives one private tmux server (its own socket, so it never
// touches a user's tmux) running a shell.
type tmuxSession struct {
	t    *testing.T
	bin  string
	sock string
}

func newTmux(t *testing.T, width, height int) *tmuxSession {
	t.Helper()
	bin, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tmux is required for the dashboard end-to-end test (make deps installs it)")
		}
		t.Skip("tmux not installed (make deps installs it)")
	}
	s := &tmuxSession{t: t, bin: bin, sock: fmt.Sprintf("moonmq-top-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last screen:\n%s", s.capture())
		}
		_, _ = s.run("kill-server")
	})
	_, err = s.run("new-session", "-d", "-s", "top", "-x", strconv.Itoa(width), "-y", strconv.Itoa(height),
		"-e", "TERM=xterm-256color", "/bin/sh")
	require.NoError(t, err)
	// The marker is computed by the shell, so only its output shows it,
	// not the typed line (which the terminal may echo before the shell
	// even starts, leaving the output after the prompt on one line).
	s.text("echo SHELL-$((40+2))-READY")
	s.keys("Enter")
	s.waitFor("the shell", func(screen string) bool { return strings.Contains(screen, "SHELL-42-READY") })
	return s
}

func (s *tmuxSession) run(args ...string) (string, error) {
	out, err := exec.Command(s.bin, append([]string{"-L", s.sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("tmux %v: %w: %s", args, err, out)
	}
	return string(out), nil
}

// keys sends tmux key names (Enter, Escape, q, ...).
func (s *tmuxSession) keys(keys ...string) {
	s.t.Helper()
	_, err := s.run(append([]string{"send-keys", "-t", "top"}, keys...)...)
	require.NoError(s.t, err)
}

// text types a string literally.
func (s *tmuxSession) text(text string) {
	s.t.Helper()
	_, err := s.run("send-keys", "-t", "top", "-l", text)
	require.NoError(s.t, err)
}

func (s *tmuxSession) capture(extra ...string) string {
	out, err := s.run(append([]string{"capture-pane", "-p", "-t", "top"}, extra...)...)
	if err != nil {
		return err.Error()
	}
	return out
}

// waitFor polls the screen until cond holds or the deadline passes.
func (s *tmuxSession) waitFor(what string, cond func(screen string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		screen := s.capture()
		if cond(screen) {
			return screen
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s; screen:\n%s", what, screen)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not a wait for state
	}
}

// columnValue returns the text of a right-aligned column of the given
// width for the table row that starts with name, locating the column by
// its title in the header line. Every character on these lines is one
// cell wide, so rune indexes are screen columns.
func columnValue(screen, name, title string, width int) (string, bool) {
	var end int
	for _, line := range strings.Split(screen, "\n") {
		if i := strings.Index(line, title); i >= 0 && strings.Contains(line, "NAME") {
			end = len([]rune(line[:i])) + len([]rune(title))
			continue
		}
		rs := []rune(line)
		if end == 0 || !strings.HasPrefix(strings.TrimSpace(line), name+" ") || end > len(rs) {
			continue
		}
		return strings.TrimSpace(string(rs[max(end-width, 0):end])), true
	}
	return "", false
}

// TestTopEndToEnd runs the real `moonmq top` against a real broker inside
// tmux, the way a person uses it: it must show the topic, a non-zero rate
// while a producer runs, the produced records, and exit cleanly on q with
// the terminal restored.
func TestTopEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	tm := newTmux(t, 120, 32)
	addr := testnode.Start(t, node.Config{}).Addr().String() // the broker needs no process
	bin := testbroker.Binary(t)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, client.Options{Addr: addr})
	require.NoError(t, err)
	defer cl.Close()
	const topic = "e2e-orders"
	require.NoError(t, cl.CreateTopic(ctx, topic, 3, 1, nil))
	// A compacted topic, whose dirty ratio the topics view shows.
	const table = "e2e-table"
	require.NoError(t, cl.CreateTopic(ctx, table, 1, 1, map[string]string{"cleanup.policy": "compact"}))

	// NO_COLOR: the dashboard must stay usable without colour.
	tm.text(fmt.Sprintf("NO_COLOR=1 %s top --addr %s --refresh 250ms; echo EXITED $?", bin, addr))
	tm.keys("Enter")
	tm.waitFor("the dashboard", func(s string) bool {
		return strings.Contains(s, "1 Overview") && strings.Contains(s, "updated")
	})

	tm.keys("2")
	tm.waitFor("the topic in the topics view", func(s string) bool {
		return strings.Contains(s, "Topics") && strings.Contains(s, topic+" ")
	})
	percent := regexp.MustCompile(`^[0-9]+%$`)
	tm.waitFor("the compacted topic's dirty ratio", func(s string) bool {
		v, ok := columnValue(s, table, "COMPACT", 8)
		plain, _ := columnValue(s, topic, "COMPACT", 8)
		return ok && percent.MatchString(v) && plain == "" && strings.Contains(s, " compacted")
	})

	// A load generator: a steady trickle of JSON records.
	pctx, stopProducing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for seq := 0; ; seq++ {
			recs := make([]client.Record, 10)
			for i := range recs {
				recs[i] = client.Record{Partition: client.AnyPartition, Key: []byte("k" + strconv.Itoa(i)),
					Value: fmt.Appendf(nil, `{"hello":"moonmq-e2e","seq":%d}`, seq*10+i)}
			}
			if _, err := cl.Produce(pctx, topic, recs); err != nil && pctx.Err() == nil {
				t.Errorf("produce: %v", err)
				return
			}
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { stopProducing(); wg.Wait() }()

	rate := regexp.MustCompile(`^[0-9.]+[kMG]?$`)
	tm.waitFor("a non-zero produce rate", func(s string) bool {
		v, ok := columnValue(s, topic, "IN/s", 6)
		return ok && rate.MatchString(v) && v != "0"
	})

	// Reverse video marks the selected row even without colour, and no
	// colour is sent.
	styled := tm.capture("-e")
	require.Regexp(t, `\x1b\[(?:[0-9]*;)*7m`, styled, "selection is visible with NO_COLOR")
	require.NotRegexp(t, `\x1b\[(?:[0-9]*;)*(?:3[0-7]|4[0-7]|9[0-7]|10[0-7]|38|48)(?:;[0-9]*)*m`, styled,
		"no colour with NO_COLOR")

	tm.keys(":")
	tm.text("records " + topic)
	tm.keys("Enter")
	tm.waitFor("produced records in the records view", func(s string) bool {
		return strings.Contains(s, "following live") && strings.Contains(s, `{"hello":"moonmq-e2e","seq":`)
	})
	stopProducing()
	wg.Wait()
	tm.keys("Enter")
	tm.waitFor("the record detail, JSON pretty-printed", func(s string) bool {
		return strings.Contains(s, "Record "+topic+"/") && strings.Contains(s, `"hello": "moonmq-e2e"`)
	})
	tm.keys("Escape")
	tm.waitFor("back to the list", func(s string) bool { return strings.Contains(s, "following live") })

	tm.keys("q")
	screen := tm.waitFor("a clean exit", func(s string) bool { return strings.Contains(s, "EXITED 0") })
	require.NotContains(t, screen, "1 Overview", "the alternate screen is gone")

	// The terminal is back in cooked mode with echo.
	tm.text("stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo STTY-END")
	tm.keys("Enter")
	modes := regexp.MustCompile(`(?m)^(-?icanon) (-?echo) STTY-END`)
	screen = tm.waitFor("the terminal modes", func(s string) bool { return modes.MatchString(s) })
	require.Equal(t, []string{"icanon", "echo"}, modes.FindStringSubmatch(screen)[1:], "cooked mode with echo restored")
}
