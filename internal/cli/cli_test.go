package cli

import (
	"errors"
	"flag"
	"testing"
	"time"
)

func TestSuggest(t *testing.T) {
	for _, c := range []struct {
		word, want string
		cands      []string
	}{
		{"serv", "serve", []string{"serve", "bench", "top"}},
		{"log_levle", "log_level", []string{"log_level", "log_format"}},
		{"SELCT", "SELECT", []string{"SELECT", "SHOW"}},
		{"listn", "listen", []string{"listen", "http"}},
		{"orders", "", []string{"serve", "bench"}},
		{"serve", "", []string{"serve"}}, // an exact match is no suggestion
	} {
		if got := Suggest(c.word, c.cands); got != c.want {
			t.Errorf("Suggest(%q) = %q, want %q", c.word, got, c.want)
		}
	}
}

func TestParseExplains(t *testing.T) {
	newFS := func() *flag.FlagSet {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.Int("node-id", 1, "")
		fs.Duration("timeout", 10*time.Second, "")
		fs.Bool("verbose", false, "")
		fs.String("listen", "", "")
		fs.String("e", "", "")
		return fs
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listn", "a"}, "unknown flag --listn; did you mean --listen?"},
		{[]string{"--node-id", "one"}, `--node-id "one": want an integer, e.g. 1`},
		{[]string{"--timeout", "10"}, `--timeout "10": a duration needs a unit, e.g. 10s (units: ms, s, m, h)`},
		{[]string{"--timeout", "soon"}, `--timeout "soon": want a duration such as 10s, 500ms or 1m30s`},
		{[]string{"--verbose=maybe"}, `--verbose "maybe": want true or false`},
		{[]string{"--listen"}, "flag --listen needs a value"},
		{[]string{"-e"}, "flag -e needs a value"},
	} {
		err := Parse(newFS(), c.args)
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%v) = %v, want %q", c.args, err, c.want)
		}
	}
	if err := Parse(newFS(), []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
	if err := Set(newFS(), "node-id", "x"); err == nil || err.Error() != "want an integer, e.g. 1" {
		t.Errorf("Set: %v", err)
	}
}

func TestAddr(t *testing.T) {
	t.Setenv(AddrEnv, "")
	if Addr() != DefaultAddr {
		t.Errorf("Addr() = %q without %s", Addr(), AddrEnv)
	}
	t.Setenv(AddrEnv, "10.0.0.1:9092")
	if Addr() != "10.0.0.1:9092" {
		t.Errorf("Addr() = %q", Addr())
	}
}
