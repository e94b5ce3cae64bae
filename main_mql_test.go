package main

// End-to-end tests of the MQL console: every testdata/*.mql script runs as
// `moonmq run` against a fresh broker, and its stdout, stderr and exit code
// are compared with testdata/NAME.out. The broker and the command run
// in-process (startBroker, runInProcess): they need a broker and main's
// command line, not processes. TestMQLRunFileAsAProcess runs a script
// through the real binary once, and the command-line tests spawn it too.
// `go test -run TestMQLScripts -update .` rewrites the golden files.
//
// A script may start with a line `-- args: FLAGS` to pass extra flags.
// Output is made deterministic by masking what legitimately varies between
// runs with same-width placeholders (so tables stay aligned): timestamps
// within a day of the run, the broker's port and the cluster id.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/syncbuf"
	"github.com/moonmq/moonmq/internal/testbroker"
	"github.com/moonmq/moonmq/internal/testnode"
	"github.com/moonmq/moonmq/net/client"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.out golden files")

type mqlRun struct {
	stdout, stderr string
	exit           int
}

// runMoonMQ runs the binary with args (and stdin), bounded in time.
func runMoonMQ(t *testing.T, stdin string, args ...string) mqlRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbroker.Binary(t), args...)
	cmd.Env = append(os.Environ(), "MOONMQ_ADDR=", "NO_COLOR=1", "HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	require.NoError(t, ctx.Err(), "moonmq %v did not finish in time; stdout:\n%s\nstderr:\n%s", args, out.String(), errb.String())
	return mqlRun{out.String(), errb.String(), code}
}

// startBroker runs a broker in-process, configured as `moonmq serve --data
// DIR --listen 127.0.0.1:0 --http=` is from its defaults (no config file,
// no environment), and returns its address.
func startBroker(t *testing.T) string {
	t.Helper()
	cfg, err := loadServeConfig([]string{"--data", t.TempDir(), "--listen", "127.0.0.1:0", "--http="}, nil, io.Discard, io.Discard)
	require.NoError(t, err)
	return testnode.Start(t, cfg.nodeConfig(nil)).Addr().String()
}

// clusterID asks the broker at addr for its cluster id.
func clusterID(t *testing.T, addr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, client.Options{Addr: addr})
	require.NoError(t, err)
	defer cl.Close()
	info, err := cl.Cluster(ctx)
	require.NoError(t, err)
	return info.ID
}

// runInProcess runs a command line through run, as main does, without a
// process: stdout and stderr are buffers (one, when merged, as a terminal
// shows them) and stdin is not read, so args must not need it (run -, a
// REPL). Bounded in time like runMoonMQ.
func runInProcess(t *testing.T, merged bool, args ...string) mqlRun {
	t.Helper()
	var out, errb syncbuf.Buffer
	stderr := io.Writer(&errb)
	if merged {
		stderr = &out
	}
	done := make(chan int, 1)
	go func() { done <- run(args, &out, stderr) }()
	select {
	case code := <-done:
		return mqlRun{out.String(), errb.String(), code}
	case <-time.After(60 * time.Second):
		t.Fatalf("moonmq %v did not finish in time; stdout:\n%s\nstderr:\n%s", args, out.String(), errb.String())
		return mqlRun{}
	}
}

var tsRe = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)

// mask replaces run-specific values with placeholders of the same width.
func mask(s, addr, clusterID string) string {
	now := time.Now()
	s = tsRe.ReplaceAllStringFunc(s, func(m string) string {
		ts, err := time.Parse(time.RFC3339Nano, m)
		if err == nil && ts.After(now.Add(-24*time.Hour)) && ts.Before(now.Add(24*time.Hour)) {
			return "<timestamp-of-the-run>.."[:len(m)]
		}
		return m
	})
	_, port, _ := strings.Cut(addr, ":")
	s = strings.ReplaceAll(s, addr, "<address>")
	if port != "" {
		s = regexp.MustCompile(`\b`+port+`\b`).ReplaceAllString(s, "<prt>"[:min(5, len(port))]+strings.Repeat("#", max(0, len(port)-5)))
	}
	if clusterID != "" {
		s = strings.ReplaceAll(s, clusterID, ("<cluster-id" + strings.Repeat("-", len(clusterID)))[:len(clusterID)-1]+">")
	}
	return s
}

func TestMQLScripts(t *testing.T) {
	scripts, err := filepath.Glob("testdata/*.mql")
	require.NoError(t, err)
	require.NotEmpty(t, scripts)
	for _, script := range scripts {
		name := strings.TrimSuffix(filepath.Base(script), ".mql")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkScript(t, script, func(args ...string) mqlRun { return runInProcess(t, false, args...) })
		})
	}
}

// TestMQLRunFileAsAProcess: `moonmq run FILE` as a process gives what the
// in-process run of the golden scripts gives: stdout, stderr and an exit
// code (1 here: the script fails).
func TestMQLRunFileAsAProcess(t *testing.T) {
	checkScript(t, "testdata/unknown_topic.mql", func(args ...string) mqlRun { return runMoonMQ(t, "", args...) })
}

// checkScript runs script through run(args) against a fresh broker and
// compares what it printed, and its exit code, with its golden file.
func checkScript(t *testing.T, script string, run func(args ...string) mqlRun) {
	t.Helper()
	src, err := os.ReadFile(script)
	require.NoError(t, err)
	var extra []string
	if first, _, _ := strings.Cut(string(src), "\n"); strings.HasPrefix(first, "-- args:") {
		extra = strings.Fields(strings.TrimPrefix(first, "-- args:"))
	}
	addr := startBroker(t)
	id := clusterID(t, addr)

	args := append([]string{"run", "--addr", addr, "--timeout", "10s"}, extra...)
	res := run(append(args, script)...)
	got := fmt.Sprintf("-- exit: %d --\n-- stdout --\n%s-- stderr --\n%s",
		res.exit, mask(res.stdout, addr, id), mask(res.stderr, addr, id))
	golden := strings.TrimSuffix(script, ".mql") + ".out"
	if *updateGolden {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "no golden file: run go test -run TestMQLScripts -update .")
	require.Equal(t, string(want), got, "output of %s differs from %s (go test -run TestMQLScripts -update . rewrites it)", script, golden)
}

// The other entry points: -e, a script on stdin (run -), --repl with a
// non-terminal stdin, and usage errors.
func TestMQLCommandLine(t *testing.T) {
	addr := startBroker(t)

	res := runMoonMQ(t, "", "-e", "CREATE TOPIC cli PARTITIONS 2; PRODUCE INTO cli PARTITION 1 KEY 'k' VALUE 'v';", "--addr", addr)
	require.Equal(t, 0, res.exit, res.stderr)
	require.Equal(t, "OK topic 'cli' created (2 partitions)\nOK produced to cli → partition 1, offset 0\n", res.stdout)

	// The address also comes from MOONMQ_ADDR; json is one object per row.
	cmd := exec.Command(testbroker.Binary(t), "-e", "SELECT partition, offset, key, value FROM cli", "--output", "json")
	cmd.Env = append(os.Environ(), "MOONMQ_ADDR="+addr)
	out, err := cmd.Output()
	require.NoError(t, err)
	require.Equal(t, `{"partition":1,"offset":0,"key":"k","value":"v"}`+"\n", string(out))

	// -e errors: "error: ..." and exit 1.
	res = runMoonMQ(t, "", "-e", "DESCRIBE TOPIC nope;", "--addr", addr)
	require.Equal(t, 1, res.exit)
	require.Equal(t, "error: topic 'nope' does not exist\n", res.stderr)
	res = runMoonMQ(t, "", "-e", "SELCT 1;", "--addr", addr)
	require.Equal(t, 1, res.exit)
	require.Contains(t, res.stderr, "error: 1:1: unexpected \"SELCT\"")
	require.Contains(t, res.stderr, "did you mean SELECT?\n  SELCT 1;\n  ^\n")

	// A piped REPL runs statements as they arrive, without prompts, and
	// stops at the first failure with <stdin>:LINE:COL.
	stdin := "SHOW TOPICS;\nSELECT count(*)\n  FROM cli;\nDESCRIBE TOPIC nope;\nSHOW TOPICS;\n"
	res = runMoonMQ(t, stdin, "--repl", "--addr", addr)
	require.Equal(t, 1, res.exit)
	require.NotContains(t, res.stdout, "mq>")
	require.Equal(t, "name  partitions  replicas  records  bytes\n----  ----------  --------  -------  -----\n", res.stdout[:strings.Index(res.stdout, "cli ")])
	require.Equal(t, 2, strings.Count(res.stdout, "(1 row)"), res.stdout)
	require.Equal(t, "<stdin>:4:1: topic 'nope' does not exist\n", res.stderr)

	res = runMoonMQ(t, stdin, "run", "--addr", addr, "--continue-on-error", "-")
	require.Equal(t, 1, res.exit)
	require.Equal(t, 3, strings.Count(res.stdout, "(1 row)"), res.stdout)

	// A json run's stdout is rows only: what a script consumer pipes into
	// jq. Acknowledgements, SET FORMAT's too, go to stderr.
	res = runMoonMQ(t, "", "-e", "SET FORMAT json; CREATE TOPIC cli2; PRODUCE INTO cli2 KEY 'a' VALUE '1'; SELECT key, value FROM cli2;", "--addr", addr)
	require.Equal(t, 0, res.exit, res.stderr)
	require.Equal(t, `{"key":"a","value":1}`+"\n", res.stdout)
	require.Equal(t, "OK format json\nOK topic 'cli2' created (1 partition)\nOK produced to cli2 → partition 0, offset 0\n", res.stderr)

	// A broker that is not there: a clear error, exit 1.
	res = runMoonMQ(t, "", "-e", "SHOW TOPICS;", "--addr", "127.0.0.1:1", "--timeout", "2s")
	require.Equal(t, 1, res.exit)
	require.Contains(t, res.stderr, "error: cannot connect to 127.0.0.1:1: ")

	// Usage errors exit 2.
	for _, args := range [][]string{
		{"run"}, {"-e", "SHOW TOPICS;", "--output", "xml"}, {"--repl", "--user", "alice"}, {"-e", "X;", "extra"},
	} {
		res = runMoonMQ(t, "", args...)
		require.Equal(t, 2, res.exit, "%v: %s", args, res.stderr)
	}
}

// Issue 11: the toolkit's flags may come before or after the mode, every
// command takes its address the same way (--addr, then MOONMQ_ADDR, then
// the default), and a misspelt command or flag names the nearest one.
func TestToolkitFlagsAnywhere(t *testing.T) {
	addr := startBroker(t)
	for _, args := range [][]string{
		{"--addr", addr, "-e", "SHOW TOPICS;"},
		{"-e", "SHOW TOPICS;", "--addr", addr},
		{"--output", "json", "--addr", addr, "-e", "SHOW TOPICS;"},
	} {
		res := runMoonMQ(t, "", args...)
		require.Equal(t, 0, res.exit, "%v: %s", args, res.stderr)
	}
	script := filepath.Join(t.TempDir(), "s.mql")
	require.NoError(t, os.WriteFile(script, []byte("SHOW TOPICS;\n"), 0o644))
	res := runMoonMQ(t, "", "--addr", addr, "run", script)
	require.Equal(t, 0, res.exit, res.stderr)
	res = runMoonMQ(t, "", "--addr", addr, "--repl")
	require.Equal(t, 0, res.exit, res.stderr)

	res = runMoonMQ(t, "", "serv")
	require.Equal(t, 2, res.exit)
	require.Contains(t, res.stderr, `unknown command "serv"; did you mean serve?`)
	res = runMoonMQ(t, "", "-e", "SHOW TOPICS;", "--adr", addr)
	require.Equal(t, 2, res.exit)
	require.Contains(t, res.stderr, "unknown flag --adr; did you mean --addr?")

	// moonmq bench reads MOONMQ_ADDR too: it used to load-test
	// 127.0.0.1:9092 whatever the environment said.
	cmd := exec.Command(testbroker.Binary(t), "bench", "produce", "--topic", "benched", "--create", "--records", "10", "--output", "json")
	cmd.Env = append(os.Environ(), "MOONMQ_ADDR="+addr)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	res = runMoonMQ(t, "", "--addr", addr, "--output", "json", "-e", "SELECT count(*) FROM benched;")
	require.Equal(t, 0, res.exit, res.stderr)
	require.Equal(t, `{"count":10}`+"\n", res.stdout)
}

// TestMQLExamples runs every examples/*.mql twice in a row against one
// broker that also holds a user's topic and group, named as the
// testdata scripts name theirs (orders, billing). Each run must succeed
// (exit 0, nothing but acknowledgements on stderr) and leave the broker's
// topics, their records and its groups as they were: the examples are
// re-runnable and safe against a broker with real data.
func TestMQLExamples(t *testing.T) {
	scripts, err := filepath.Glob("examples/*.mql")
	require.NoError(t, err)
	require.NotEmpty(t, scripts)
	addr := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, client.Options{Addr: addr})
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.CreateTopic(ctx, "orders", 2, 1, nil))
	_, err = cl.Produce(ctx, "orders", []client.Record{{Partition: 1, Key: []byte("mine"), Value: []byte("keep me")}})
	require.NoError(t, err)
	require.NoError(t, cl.CommitOffset(ctx, "billing", "orders", 1, 1))

	// state is what a user would miss: every user topic with its records
	// per partition, every group with its committed offsets. It asks
	// through a new client each time: a client may answer a topic listing
	// from metadata it fetched a moment ago, before a script created a
	// topic.
	state := func() string {
		t.Helper()
		cl, err := client.Dial(ctx, client.Options{Addr: addr})
		require.NoError(t, err)
		defer cl.Close()
		var sb strings.Builder
		topics, err := cl.ListTopics(ctx)
		require.NoError(t, err)
		for _, ti := range topics {
			if ti.Internal {
				continue // __consumer_offsets grows with every commit
			}
			offs, err := cl.ListOffsets(ctx, ti.Name)
			require.NoError(t, err)
			fmt.Fprintf(&sb, "topic %s:", ti.Name)
			for _, o := range offs {
				fmt.Fprintf(&sb, " %d=[%d,%d)", o.Partition, o.Start, o.End)
			}
			sb.WriteString("\n")
		}
		groups, err := cl.ListGroups(ctx)
		require.NoError(t, err)
		for _, g := range groups {
			d, err := cl.DescribeGroup(ctx, g.Name)
			require.NoError(t, err)
			fmt.Fprintf(&sb, "group %s:", g.Name)
			for _, o := range d.Offsets {
				fmt.Fprintf(&sb, " %s/%d@%d", o.Topic, o.Partition, o.Committed)
			}
			sb.WriteString("\n")
		}
		return sb.String()
	}
	before := state()
	require.Contains(t, before, "topic orders: 0=[0,0) 1=[0,1)")
	require.Contains(t, before, "group billing: orders/0@-1 orders/1@1")

	for _, script := range scripts {
		for run := 1; run <= 2; run++ {
			res := runInProcess(t, false, "run", "--addr", addr, "--timeout", "10s", script)
			require.Equal(t, 0, res.exit, "%s, run %d:\nstdout:\n%s\nstderr:\n%s", script, run, res.stdout, res.stderr)
			for _, line := range strings.Split(strings.TrimSpace(res.stderr), "\n") {
				require.True(t, line == "" || strings.HasPrefix(line, "OK "), "%s, run %d: stderr has more than acknowledgements: %q", script, run, line)
			}
			require.Equal(t, before, state(), "%s, run %d, left the broker changed", script, run)
		}
	}
}
