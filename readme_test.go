package main

// TestREADMEWalkthrough follows the README top to bottom as a new user
// would, on one fresh broker: every ```sh block runs, line by line, in
// order (`./bin/moonmq` is the binary under test, 127.0.0.1:9092 the
// broker's address), and every MQL console transcript (a block starting
// with `$ moonmq --repl`) runs statement by statement, its output compared
// with the transcript's. A block preceded by `<!-- walkthrough: skip (why) -->`
// is not run; the comment says why. Keeps the README true: a step that
// fails as written, or prints something else than shown, fails the test.

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/testbroker"
	"github.com/moonmq/moonmq/mql"
)

// readmeBlock is one fenced block of the README.
type readmeBlock struct {
	line int // of the opening fence
	lang string
	body []string
	skip string // the reason given in a walkthrough: skip comment
}

var skipComment = regexp.MustCompile(`^<!-- walkthrough: skip \((.+)\) -->$`)

func readmeBlocks(t *testing.T, path string) []readmeBlock {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var (
		out  []readmeBlock
		cur  *readmeBlock
		skip string
		n    int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.body = append(cur.body, line)
		case strings.HasPrefix(line, "```"):
			cur = &readmeBlock{line: n, lang: strings.TrimPrefix(line, "```"), skip: skip}
			skip = ""
		default:
			if m := skipComment.FindStringSubmatch(line); m != nil {
				skip = m[1]
			} else if strings.TrimSpace(line) != "" {
				skip = "" // a skip comment applies to the block right after it
			}
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "README has an unclosed code block")
	return out
}

// transcriptStep is one statement of a console transcript and the output
// shown after it.
type transcriptStep struct {
	stmt string
	want []string
}

// parseTranscript splits a `$ moonmq --repl` block: the banner (the lines
// before the first prompt), then statements (`mq> ` and `..> ` lines)
// each followed by its output.
func parseTranscript(body []string) (banner []string, steps []transcriptStep) {
	for _, line := range body[1:] {
		switch {
		case strings.HasPrefix(line, "mq> "):
			steps = append(steps, transcriptStep{stmt: strings.TrimPrefix(line, "mq> ")})
		case strings.HasPrefix(line, "..> ") && len(steps) > 0:
			steps[len(steps)-1].stmt += "\n" + strings.TrimPrefix(line, "..> ")
		case len(steps) == 0:
			banner = append(banner, line)
		default:
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, line)
		}
	}
	return banner, steps
}

// session is an MQL session to addr, for the banner.
func session(addr string) *mql.Session {
	return mql.NewSession(mql.Options{Addr: addr, Out: io.Discard, Status: io.Discard})
}

var (
	bannerAddr    = regexp.MustCompile(`connected to \S+ —`)
	bannerVersion = regexp.MustCompile(`— MoonMQ \S+, cluster \S+,`)
)

// maskBanner replaces what differs between brokers: the address, the
// version and the cluster id.
func maskBanner(t *testing.T, s string) string {
	t.Helper()
	s = bannerAddr.ReplaceAllString(s, "connected to ADDR —")
	return bannerVersion.ReplaceAllString(s, "— MoonMQ VERSION, cluster ID,")
}

func TestREADMEWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatalf("kcat is not installed (make deps installs it): %v", err)
	}
	b := testbroker.Start(t)
	bin := t.TempDir()
	require.NoError(t, os.Symlink(testbroker.Binary(t), filepath.Join(bin, "moonmq")))
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "MOONMQ_ADDR="+b.Addr, "NO_COLOR=1", "HOME="+t.TempDir())
	localize := strings.NewReplacer("./bin/moonmq", "moonmq", "127.0.0.1:9092", b.Addr, "127.0.0.1:9090", b.HTTPAddr)

	var shells, transcripts int
	for _, blk := range readmeBlocks(t, "README.md") {
		if blk.skip != "" {
			continue
		}
		switch {
		case blk.lang == "sh":
			shells++
			for i, line := range blk.body {
				if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
					continue
				}
				cmd := exec.Command("bash", "-o", "pipefail", "-c", "timeout 60 "+localize.Replace(line))
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "README.md:%d: %s\n%s", blk.line+1+i, line, out)
			}
		case len(blk.body) > 0 && strings.HasPrefix(blk.body[0], "$ moonmq --repl"):
			transcripts++
			banner, steps := parseTranscript(blk.body)
			sess := session(b.Addr)
			require.Equal(t, maskBanner(t, replBanner(t.Context(), sess)), maskBanner(t, strings.Join(banner, "\n")),
				"README.md:%d: the console's banner", blk.line)
			sess.Close()
			for _, st := range steps {
				switch strings.TrimSuffix(strings.ToLower(st.stmt), ";") {
				case "exit", "quit", `\q`:
					continue // the REPL's own words: nothing to run
				}
				cmd := exec.Command(testbroker.Binary(t), "-e", st.stmt)
				cmd.Env = env
				cmd.WaitDelay = 30 * time.Second
				out, _ := cmd.CombinedOutput()
				got := strings.TrimRight(localize.Replace(string(out)), "\n")
				got = strings.ReplaceAll(got, b.Addr, "127.0.0.1:9092")
				require.Equal(t, strings.Join(st.want, "\n"), got, "README.md:%d: the output of\n%s", blk.line, st.stmt)
			}
		}
	}
	require.NotZero(t, shells, "no shell blocks found: did the README's fences change?")
	require.NotZero(t, transcripts, "no console transcript found")
}
