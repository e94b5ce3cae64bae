// Package cli owns what every MoonMQ command shares at its command line:
// where the broker address comes from (--addr, then $MOONMQ_ADDR, then
// 127.0.0.1:9092), flag errors that say what was expected, and the
// nearest valid name for a misspelt command, flag, config key or MQL
// keyword. It imports nothing of MoonMQ's.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// AddrEnv names the environment variable that sets the broker address of
// every toolkit command (MQL, top, bench) when --addr is not given.
const AddrEnv = "MOONMQ_ADDR"

// DefaultAddr is the address a toolkit command uses without --addr.
const DefaultAddr = "127.0.0.1:9092"

// Addr returns the default of a command's --addr flag: $MOONMQ_ADDR, else
// DefaultAddr.
func Addr() string {
	if a := os.Getenv(AddrEnv); a != "" {
		return a
	}
	return DefaultAddr
}

// AddrUsage is the help text of an --addr flag.
const AddrUsage = "broker address host:port[,host:port...] (env " + AddrEnv + ", default " + DefaultAddr + ")"

// Suggest returns the candidate closest to word, compared case-
// insensitively, if it is close enough to be a likely misspelling (one
// edit, two for words of five letters or more), else "".
func Suggest(word string, candidates []string) string {
	w := strings.ToLower(word)
	if len(w) < 2 || len(w) > 40 {
		return ""
	}
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted) // ties go to the first in order, whatever the input order
	best, bestD := "", 1<<30
	for _, c := range sorted {
		if d := editDistance(w, strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	limit := 1
	if len(w) >= 5 {
		limit = 2
	}
	if bestD == 0 || bestD > limit {
		return ""
	}
	return best
}

// DidYouMean returns "; did you mean PREFIX+NAME?" for the candidate
// closest to word, or "".
func DidYouMean(word string, candidates []string, prefix string) string {
	if best := Suggest(word, candidates); best != "" {
		return fmt.Sprintf("; did you mean %s%s?", prefix, best)
	}
	return ""
}

// editDistance is the Damerau-Levenshtein (optimal string alignment)
// distance, so a swapped pair of letters counts as one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// Parse parses args into fs without printing anything: it returns
// flag.ErrHelp for --help, and for a mistake an error that says what was
// wrong and what was expected, naming the nearest flag to an unknown one.
func Parse(fs *flag.FlagSet, args []string) error {
	// The flag package prints its own error and the usage on any mistake;
	// silence both for the parse.
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return errors.New(explain(fs, err))
}

// explain rewrites the flag package's errors (their wording is fixed in its
// source) into ones that say what to do.
func explain(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimPrefix(name, "-")
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		return fmt.Sprintf("unknown flag %s%s%s", dashes(name), name, DidYouMean(name, names, "--"))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		name = strings.TrimPrefix(name, "-")
		return fmt.Sprintf("flag %s%s needs a value", dashes(name), name)
	}
	// invalid value "one" for flag -node-id: parse error
	// invalid boolean value "maybe" for -auto-create-topics: parse error
	for _, form := range [][2]string{{"invalid value ", " for flag -"}, {"invalid boolean value ", " for -"}} {
		rest, ok := strings.CutPrefix(msg, form[0])
		if !ok {
			continue
		}
		if i := strings.Index(rest, form[1]); i > 0 {
			value, _ := strconv.Unquote(rest[:i])
			name, cause, _ := strings.Cut(rest[i+len(form[1]):], ": ")
			if f := fs.Lookup(name); f != nil {
				if want := Expected(f, value); want != "" {
					cause = want
				}
				if IsSecret(fs, name) {
					return fmt.Sprintf("%s%s (value not shown: it holds a secret): %s", dashes(name), name, cause)
				}
				return fmt.Sprintf("%s%s %q: %s", dashes(name), name, value, cause)
			}
		}
	}
	return msg
}

// IsSecret reports whether flag name holds a secret (its Value has an
// IsSecret method saying so): errors and printed configurations must not
// show its value.
func IsSecret(fs *flag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	s, ok := f.Value.(interface{ IsSecret() bool })
	return ok && s.IsSecret()
}

// dashes is how a flag is written: -e, --addr.
func dashes(name string) string {
	if len(name) == 1 {
		return "-"
	}
	return "--"
}

// Set sets a flag from a config file or the environment, with an error that
// says what the value should have been.
func Set(fs *flag.FlagSet, name, value string) error {
	if err := fs.Set(name, value); err != nil {
		if f := fs.Lookup(name); f != nil {
			if want := Expected(f, value); want != "" {
				return errors.New(want)
			}
		}
		return err
	}
	return nil
}

// Expected says what a flag's value must look like, given the value that
// was refused: for the flag package's typed values, whose own errors say
// only "parse error"; "" for others, whose errors say it themselves.
func Expected(f *flag.Flag, value string) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case int, int64:
		return "want an integer, e.g. " + f.DefValue
	case uint, uint64:
		return "want a non-negative integer, e.g. " + f.DefValue
	case float64:
		return "want a number, e.g. " + f.DefValue
	case bool:
		return "want true or false"
	case time.Duration:
		if _, err := strconv.ParseFloat(value, 64); err == nil {
			return fmt.Sprintf("a duration needs a unit, e.g. %ss (units: ms, s, m, h)", value)
		}
		return "want a duration such as " + f.DefValue + ", 500ms or 1m30s"
	}
	return ""
}
