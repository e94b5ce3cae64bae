package main

// TestMQLDoc keeps docs/mql.md true: every ```mql block of the reference is
// run, in the order of the document, and what it prints must be the
// ```output block that follows it. `go test -run TestMQLDoc -update .`
// rewrites the output blocks from a run (review the diff).
//
// A block runs as if typed into the REPL line by line, in one session: each
// statement runs once its ';' ends a line, an error (syntax or not) is
// reported as the REPL reports it (`error: ...`) and the next statement
// still runs, EXIT ends the block. Results, acknowledgements and errors are
// shown together, in the order they were written, as on a terminal. The
// session is the console's (mql.Session, with the REPL's handling of each
// statement, mirrored by replLike); only the line editing is left out. The
// info string after "mql" may say:
//
//	kfake            run against franz-go's kfake cluster instead of MoonMQ,
//	                 for the statements MoonMQ does not implement yet
//	                 (transactions, reassignments)
//	file=NAME.mql    write the block to NAME.mql and show `moonmq run
//	                 [flags] NAME.mql` as a shell transcript, exit status
//	                 included (script semantics)
//	--flag[=value]   flags: --output=json|csv for a REPL block (as `moonmq
//	                 --repl --output json`), any `moonmq run` flag for a
//	                 file block
//
// All blocks share one MoonMQ broker and one kfake cluster, so a topic an
// example creates is there for the next; session state (USE GROUP, SET
// FORMAT, an open transaction) lasts for one block. What varies between
// runs is replaced with a fixed stand-in of the same width, so tables stay
// aligned: the broker's address and port (shown as 127.0.0.1:9092, which
// an example may also name: CONNECT '127.0.0.1:9092' reaches the test
// broker), the cluster id and UUIDs (member ids). An example that prints the time of the
// run fails the test: give its records a TIMESTAMP.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/moonmq/moonmq/mql"
)

const mqlDoc = "docs/mql.md"

// docExample is one ```mql block and the ```output block after it.
type docExample struct {
	line   int // 1-based line of the ```mql fence, for messages
	kfake  bool
	file   string
	flags  []string
	src    string
	output string
	// outFrom and outTo delimit the output block's content lines
	// (0-based, half-open), for -update.
	outFrom, outTo int
}

// parseDocExamples finds the examples of a Markdown document. Every ```mql
// block must be followed (blank lines aside) by an ```output block, so no
// example goes unchecked.
func parseDocExamples(lines []string) ([]docExample, error) {
	var out []docExample
	for i := 0; i < len(lines); i++ {
		info, ok := strings.CutPrefix(lines[i], "```mql")
		if !ok || (info != "" && info[0] != ' ') {
			continue
		}
		ex := docExample{line: i + 1}
		for _, f := range strings.Fields(info) {
			switch {
			case f == "kfake":
				ex.kfake = true
			case strings.HasPrefix(f, "file="):
				ex.file = strings.TrimPrefix(f, "file=")
			case strings.HasPrefix(f, "-"):
				ex.flags = append(ex.flags, f)
			default:
				return nil, fmt.Errorf("%s:%d: unknown example option %q", mqlDoc, i+1, f)
			}
		}
		end := closing(lines, i+1)
		if end < 0 {
			return nil, fmt.Errorf("%s:%d: unclosed ```mql block", mqlDoc, i+1)
		}
		ex.src = strings.Join(lines[i+1:end], "\n") + "\n"
		j := end + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j >= len(lines) || lines[j] != "```output" {
			return nil, fmt.Errorf("%s:%d: the ```mql block has no ```output block after it", mqlDoc, i+1)
		}
		oend := closing(lines, j+1)
		if oend < 0 {
			return nil, fmt.Errorf("%s:%d: unclosed ```output block", mqlDoc, j+1)
		}
		ex.outFrom, ex.outTo = j+1, oend
		ex.output = strings.Join(lines[j+1:oend], "\n")
		out = append(out, ex)
		i = oend
	}
	return out, nil
}

// closing returns the index of the line closing a fenced block opened
// before from, or -1.
func closing(lines []string, from int) int {
	for k := from; k < len(lines); k++ {
		if lines[k] == "```" {
			return k
		}
	}
	return -1
}

func TestParseDocExamples(t *testing.T) {
	lines := strings.Split("intro\n```mql kfake --output=json\nSHOW USERS;\n```\n\n```output\nOK\n```\n```sh\nls\n```\n```mql file=a.mql\nX;\n```\n```output\n```", "\n")
	exs, err := parseDocExamples(lines)
	require.NoError(t, err)
	require.Equal(t, []docExample{
		{line: 2, kfake: true, flags: []string{"--output=json"}, src: "SHOW USERS;\n", output: "OK", outFrom: 6, outTo: 7},
		{line: 12, file: "a.mql", src: "X;\n", output: "", outFrom: 15, outTo: 15},
	}, exs)

	_, err = parseDocExamples(strings.Split("```mql\nSHOW TOPICS;\n```\ntext\n```output\n```", "\n"))
	require.ErrorContains(t, err, "no ```output block")
	_, err = parseDocExamples(strings.Split("```mql bogus\n```\n```output\n```", "\n"))
	require.ErrorContains(t, err, "unknown example option")
}

var (
	uuidRe     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	docAddrStd = "127.0.0.1:9092"
)

const (
	docUUID = "0c1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"
	// docClusterID stands in for MoonMQ's cluster id (22 characters, like
	// Kafka's: a base64 UUID).
	docClusterID = "MkU3OEVBNTcwNTJENDM2Qg"
)

// maskDoc replaces what varies between runs with fixed stand-ins of the
// same width.
func maskDoc(s string, addrs []string, clusterIDs []string) string {
	for _, a := range addrs {
		_, port, _ := strings.Cut(a, ":")
		s = strings.ReplaceAll(s, a, docAddrStd)
		// A port alone (SHOW BROKERS) is a right-aligned number.
		s = regexp.MustCompile(`\b`+regexp.QuoteMeta(port)+`\b`).ReplaceAllString(s, fmt.Sprintf("%*s", len(port), "9092"))
	}
	for _, id := range clusterIDs {
		if id != "" {
			s = strings.ReplaceAll(s, id, (docClusterID + strings.Repeat("x", len(id)))[:len(id)])
		}
	}
	return uuidRe.ReplaceAllString(s, docUUID)
}

// replLike runs src as the REPL runs what is typed: lines are gathered
// until they end a statement (mql.Complete), then the chunk runs through
// mql.ExecChunk, as the REPL runs it. The
// session writes results, acknowledgements and errors to one buffer, as a
// terminal shows stdout and stderr.
func replLike(t *testing.T, addr, src string, flags []string) string {
	t.Helper()
	format := mql.FormatTable
	for _, f := range flags {
		v, ok := strings.CutPrefix(f, "--output=")
		require.True(t, ok, "a REPL example takes only --output=FORMAT, not %s", f)
		var err error
		format, err = mql.ParseFormat(v)
		require.NoError(t, err)
	}
	var out bytes.Buffer
	s := mql.NewSession(mql.Options{
		Addr: addr, Out: &out, Status: &out, Format: format,
		RequestTimeout: 10 * time.Second, DialTimeout: 5 * time.Second,
	})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var chunk strings.Builder
	for _, line := range strings.SplitAfter(src, "\n") {
		chunk.WriteString(line)
		if !mql.Complete(chunk.String()) {
			continue
		}
		if mql.ExecChunk(chunk.String(), &out, s.Renderer(), func(st mql.Statement) error { return s.Exec(ctx, st) }) {
			return out.String()
		}
		chunk.Reset()
	}
	require.Empty(t, strings.TrimSpace(chunk.String()), "the example ends inside a statement")
	return out.String()
}

// readDocExamples reads docs/mql.md: its absolute path (the file examples
// run in their own directory), its lines and its examples, of which there
// is at least one.
func readDocExamples(t *testing.T) (doc string, lines []string, exs []docExample) {
	t.Helper()
	doc, err := filepath.Abs(mqlDoc)
	require.NoError(t, err)
	raw, err := os.ReadFile(doc)
	require.NoError(t, err)
	lines = strings.Split(string(raw), "\n")
	exs, err = parseDocExamples(lines)
	require.NoError(t, err)
	require.NotEmpty(t, exs, "no examples in %s", mqlDoc)
	return doc, lines, exs
}

// TestMQLDocCoversEveryStatement: every statement HELP knows (and the mql
// tests check that every statement the parser accepts has a HELP entry)
// has at least one example in docs/mql.md.
func TestMQLDocCoversEveryStatement(t *testing.T) {
	_, _, exs := readDocExamples(t)
	seen := map[string]bool{}
	for _, ex := range exs {
		for _, p := range mql.ParseScript("", ex.src) {
			if p.Err != nil {
				continue // an example of an error
			}
			// The longest entry name the statement starts with: COMMIT
			// TRANSACTION is not an example of COMMIT.
			text, best := mql.FormatStatement(p.Stmt)+" ", ""
			for _, e := range mql.HelpEntries {
				if strings.HasPrefix(text, e.Name+" ") && len(e.Name) > len(best) {
					best = e.Name
				}
			}
			seen[best] = true
		}
	}
	for _, e := range mql.HelpEntries {
		require.True(t, seen[e.Name], "%s has no example in %s", e.Name, mqlDoc)
	}
}

func TestMQLDoc(t *testing.T) {
	doc, lines, exs := readDocExamples(t)

	moonAddr := startBroker(t)
	const fakeID = "kfake-cluster"
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID(fakeID))
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	fakeAddr := fake.ListenAddrs()[0]
	moonID := clusterID(t, moonAddr)

	// File examples run as `moonmq run NAME.mql` in a directory of their
	// own; the command line runs in-process, so the test moves there.
	t.Chdir(t.TempDir())
	now := time.Now()
	got := make([]string, len(exs))
	for i, ex := range exs {
		addr := moonAddr
		if ex.kfake {
			addr = fakeAddr
		}
		// The document shows the default address; the examples reach the
		// test broker.
		src := strings.ReplaceAll(ex.src, docAddrStd, addr)
		var out string
		if ex.file != "" {
			require.NoError(t, os.WriteFile(ex.file, []byte(src), 0o644))
			args := append([]string{"run", "--addr", addr, "--timeout", "10s"}, ex.flags...)
			res := runInProcess(t, true, append(args, ex.file)...)
			shown := strings.Join(append(append([]string{"moonmq", "run"}, ex.flags...), ex.file), " ")
			out = "$ " + shown + "\n" + res.stdout + "$ echo $?\n" + fmt.Sprint(res.exit)
		} else {
			out = strings.TrimSuffix(replLike(t, addr, src, ex.flags), "\n")
		}
		for _, m := range tsRe.FindAllString(out, -1) {
			if ts, err := time.Parse(time.RFC3339Nano, m); err == nil && ts.After(now.Add(-24*time.Hour)) && ts.Before(now.Add(24*time.Hour)) {
				t.Errorf("%s:%d: the example prints the time of the run (%s): give its records a TIMESTAMP", mqlDoc, ex.line, m)
			}
		}
		got[i] = maskDoc(out, []string{moonAddr, fakeAddr}, []string{moonID})
	}

	if *updateGolden {
		// Replace from the last block up, so earlier line numbers hold.
		for i := len(exs) - 1; i >= 0; i-- {
			ex := exs[i]
			var repl []string
			if got[i] != "" {
				repl = strings.Split(got[i], "\n")
			}
			lines = append(lines[:ex.outFrom], append(repl, lines[ex.outTo:]...)...)
		}
		require.NoError(t, os.WriteFile(doc, []byte(strings.Join(lines, "\n")), 0o644))
		return
	}
	for i, ex := range exs {
		require.Equal(t, ex.output, got[i], "%s:%d: the example's output differs from the document (go test -run TestMQLDoc -update . rewrites it)", mqlDoc, ex.line)
	}
}
