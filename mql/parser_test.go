package mql

import (
	"flag"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/participle/v2/lexer"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/cli"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestGrammarGolden(t *testing.T) {
	const path = "testdata/grammar.ebnf"
	got := Grammar() + "\n"
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got, "the grammar changed: review it and run go test ./mql -run TestGrammarGolden -update")
}

// The lexer reclassifies reserved words as keywords; a word the grammar uses
// that is not in Keywords could never match, and a keyword the grammar does
// not use would be reserved for nothing.
func TestKeywordsMatchGrammar(t *testing.T) {
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`"([A-Z_]+)"`).FindAllStringSubmatch(Grammar(), -1) {
		used[m[1]] = true
	}
	var words []string
	for w := range used {
		words = append(words, w)
	}
	sort.Strings(words)
	require.Equal(t, Keywords, words)
}

func corpus(t testing.TB) []string {
	b, err := os.ReadFile("testdata/statements.mql")
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "--") {
			out = append(out, line)
		}
	}
	return out
}

// stripPositions zeroes every lexer.Position in an AST so trees parsed from
// different text compare equal.
func stripPositions(v any) {
	var walk func(reflect.Value)
	posType := reflect.TypeOf(lexer.Position{})
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			if v.Type() == posType {
				if v.CanSet() {
					v.Set(reflect.Zero(posType))
				}
				return
			}
			for i := 0; i < v.NumField(); i++ {
				walk(v.Field(i))
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(v))
}

func requireRoundTrip(t testing.TB, src string, st Statement) {
	text := FormatStatement(st)
	again, err := Parse(text)
	require.NoError(t, err, "formatted %q as %q, which does not parse", src, text)
	require.Equal(t, text, FormatStatement(again), "formatting is not idempotent")
	stripPositions(st)
	stripPositions(again)
	require.Equal(t, st, again, "round trip of %q through %q", src, text)
}

func TestRoundTrip(t *testing.T) {
	for _, src := range corpus(t) {
		st, err := Parse(src)
		require.NoError(t, err, src)
		requireRoundTrip(t, src, st)
	}
}

func TestEveryStatementTypeIsInCorpusAndHelp(t *testing.T) {
	seen := map[reflect.Type]bool{}
	for _, src := range corpus(t) {
		st, err := Parse(src)
		require.NoError(t, err)
		seen[reflect.TypeOf(st)] = true
	}
	for _, st := range statementTypes {
		require.True(t, seen[reflect.TypeOf(st)], "%T has no example in testdata/statements.mql", st)
	}
	for _, e := range HelpEntries {
		_, err := Parse(e.Example)
		require.NoError(t, err, "HELP %s example", e.Name)
		require.NotEmpty(t, FindHelp(strings.Fields(e.Name)))
	}
	// Every statement's first words lead to a help entry.
	for _, src := range corpus(t) {
		words := strings.Fields(strings.ToUpper(strings.TrimSuffix(src, ";")))
		if len(FindHelp(words[:1])) == 0 {
			t.Errorf("no HELP entry for %s", words[0])
		}
	}
}

func TestParsePositions(t *testing.T) {
	ps := ParseScript("f.mql", "SHOW TOPICS;\n  -- comment\n  DESCRIBE TOPIC x;\nSELECT *\nFROM y\nLIMIT 2")
	require.Len(t, ps, 3)
	require.Equal(t, 1, ps[0].Pos.Line)
	require.Equal(t, 3, ps[1].Pos.Line)
	require.Equal(t, 3, ps[1].Pos.Column)
	require.Equal(t, "DESCRIBE TOPIC x;", ps[1].Text)
	require.Equal(t, "f.mql", ps[1].Stmt.Position().Filename)
	require.Equal(t, 4, ps[2].Stmt.Position().Line)
	require.Equal(t, "SELECT *\nFROM y\nLIMIT 2", ps[2].Text)
	sel := ps[2].Stmt.(*Select)
	require.Equal(t, Name("y"), sel.Topic)
	require.Equal(t, Int(2), *sel.Limit)
}

func TestSyntaxErrors(t *testing.T) {
	for _, tc := range []struct {
		src, msg, caret string
	}{
		{"DESCRIBX TOPIC x;", "1:1: unexpected \"DESCRIBX\"; expected a statement such as SELECT, SHOW, CREATE or PRODUCE (HELP; lists them); did you mean DESCRIBE?", "  DESCRIBX TOPIC x;\n  ^\n"},
		{"SELCT * FROM x;", "did you mean SELECT?", ""},
		{"SHOW TOPICZ;", "1:6: unexpected \"TOPICZ\"; expected ACLS, BROKERS, CLUSTER, GROUPS, OFFSETS, QUOTAS, REASSIGNMENTS, TOPICS, TRANSACTIONS or USERS; did you mean TOPICS?", "  SHOW TOPICZ;\n       ^\n"},
		{"SELECT * FROM orders WHERE key = 'a' LIMT 3;", "1:38: unexpected \"LIMT\"", ""},
		{"SELECT * FROM orders WHERE key = 'a' LIMT 3;", "did you mean LIMIT?", ""},
		{"CREATE TOPIC select;", "unexpected keyword SELECT; expected a name; SELECT is a keyword: quote it to use it as a name ('select')", ""},
		{"SELECT * FROM", "1:14: unexpected end of statement; expected a name", "  SELECT * FROM\n               ^\n"},
		{"CREATE TOPIC x PARTITIONS 0;", "1:27: PARTITIONS must be at least 1", "  CREATE TOPIC x PARTITIONS 0;\n                            ^\n"},
		// Errors point at the offending literal, not at the statement.
		{"SELECT * FROM t FROM TIMESTAMP '5x';", "1:32: invalid timestamp '5x': unknown unit \"x\"", "  SELECT * FROM t FROM TIMESTAMP '5x';\n                                 ^\n"},
		{"SHOW OFFSETS t AT TIMESTAMP 'soon';", "1:29: invalid timestamp 'soon': want an RFC 3339 time", ""},
		{"PRODUCE INTO t VALUE 'v' TIMESTAMP '5';", "1:36: invalid timestamp '5': the number 5 needs a unit", ""},
		{"PRODUCE INTO t PARTITION 4294967296 VALUE 'v';", "1:26: PARTITION must be between", ""},
		{"SELECT partition FROM t PARTITION 4294967296;", "1:35: PARTITION must be between", ""},
		{"SELECT * FROM t LIMIT -1;", "1:23: LIMIT must be between", ""},
		{"RESET GROUP g TO OFFSET -3;", "1:25: OFFSET must not be negative", ""},
		{"COMMIT t PARTITION 0 OFFSET -3;", "1:29: OFFSET must not be negative", ""},
		{"MOVE PARTITION t -1 TO BROKERS (1);", "1:18: partition must be between", ""},
		{"MOVE PARTITION t 0 TO BROKERS (1, 4294967296);", "1:35: broker id 4294967296 is out of range", ""},
		{"ALTER TOPIC t ADD PARTITIONS 0;", "1:30: ADD PARTITIONS needs a positive number", ""},
		{"CREATE TOPIC x REPLICAS 0;", "1:25: REPLICAS must be between", ""},
		{"SET FORMAT xml;", "1:12: unknown format", ""},
		{"ASSERT (SELECT key FROM t WHERE timestamp > '1 hour') = 'a';", "1:45: invalid timestamp '1 hour'", ""},
		{"SELECT * FROM x WHERE key = 5;", "compare key with a string ('5'), not a number", ""},
		{"SELECT * FROM x WHERE offset = 'a';", "compare offset with a number", ""},
		{"SELECT * FROM x WHERE timestamp > 'yesterday';", "invalid timestamp 'yesterday'", ""},
		{"SELECT *, key FROM x;", "* must be the only column", ""},
		{"SET FORMAT xml;", "unknown format \"xml\" (want table, json or csv)", ""},
		{"PRODUCE INTO x VALUE 'unterminated;", "1:22: unterminated string", ""},
		{"SHOW TOPICS; SHOW $;", "1:19: unexpected character '$'", "  SHOW TOPICS; SHOW $;\n                    ^\n"},
		{"CREATE TOPIC x WITH (retention.ms = 7parsecs);", "unknown duration unit \"parsecs\"", ""},
		{"CREATE TOPIC x WITH (foo = 7d);", "a unit is only understood for keys ending in .ms or .bytes", ""},
		{"GRANT REED ON TOPIC x TO a;", "did you mean READ?", ""},
		{"GRANT READ, REED ON TOPIC x TO a;", "1:13: unknown operation REED", ""},
		{"SUBSCRIBE TO x TIMEOUT 5y;", "1:24: invalid TIMEOUT 5y: unit \"y\"", ""},
		{"SELECT * FROM x LIMIT 99999999999999999999;", "number 99999999999999999999 is out of range", ""},
		{"SET QUOTA (producer_byte_rat = 1) FOR USER a;", "1:12: unknown quota producer_byte_rat (want connection_creation_rate, consumer_byte_rate, controller_mutation_rate, producer_byte_rate, request_percentage)", ""},
		{"SET QUOTA (producer_byte_rate = 0) FOR USER a;", "1:33: 0: a quota must be positive (RESET QUOTA removes one)", ""},
		{"SET QUOTA (producer_byte_rate = 1, producer_byte_rate = 2) FOR USER a;", "quota producer_byte_rate is given twice", ""},
		{"SET QUOTA (request_percentage = 5MiB) FOR USER a;", "a unit is only understood for byte rates", ""},
		{"SET QUOTA (request_percentage = lots) FOR USER a;", "lots is not a number", ""},
		{"SET QUOTA (producer_byte_rate = 1) FOR;", "FOR needs USER name, CLIENT 'id' (or both), or IP 'address'", ""},
		{"SET QUOTA (connection_creation_rate = 1) FOR USER a IP '1.2.3.4';", "1:56: an IP quota cannot be combined with USER or CLIENT", ""},
		{"SET QUOTA (producer_byte_rate = 1) FOR USER '';", "empty name (use DEFAULT for the default entity)", ""},
		{"RESET QUOTA (bytes) FOR USER a;", "1:14: unknown quota bytes", ""},
		{"SHOW QUOTAS FOR IP DEFAULT CLIENT x;", "1:28: unexpected keyword CLIENT; expected ';'", ""},
		{"\tSHOW\tTOPICZ;", "1:7:", "  \tSHOW\tTOPICZ;\n  \t    \t^\n"},
	} {
		var err *SyntaxError
		for _, p := range ParseScript("", tc.src) {
			if p.Err != nil {
				err = p.Err
				break
			}
		}
		require.NotNil(t, err, tc.src)
		require.Contains(t, err.Error(), tc.msg, tc.src)
		if tc.caret != "" {
			require.Equal(t, tc.caret, err.Caret(), tc.src)
		}
	}
}

// TIMESTAMP literals take what `moonmq top`'s jump prompt takes: RFC 3339,
// dates, a duration ago and @unix-millis.
func TestTimestampForms(t *testing.T) {
	for _, lit := range []string{"'2026-05-01T12:00:00Z'", "'2026-05-01'", "'2026-05-01 12:00:00'", "'5m'", "'1h30m'", "'2d ago'", "'@1714564800000'"} {
		for _, src := range []string{
			"SELECT * FROM t FROM TIMESTAMP " + lit,
			"SELECT * FROM t WHERE timestamp >= " + lit,
			"SHOW OFFSETS t AT TIMESTAMP " + lit,
			"PRODUCE INTO t VALUE 'v' TIMESTAMP " + lit,
			"RESET GROUP g TO TIMESTAMP " + lit,
			"SUBSCRIBE TO t FROM TIMESTAMP " + lit,
		} {
			_, err := Parse(src)
			require.NoError(t, err, src)
		}
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	got, err := ParseTime("90m", now)
	require.NoError(t, err)
	require.Equal(t, now.Add(-90*time.Minute), got)
}

func TestLexer(t *testing.T) {
	toks, err := Tokenize("", "select 7d 512MiB -1 2024-orders my-topic.v2 a--comment\n'it''s' \"q\"\"q\" <= <> != ;")
	require.NoError(t, err)
	var got []string
	for _, tk := range toks {
		got = append(got, tk.Value)
	}
	require.Equal(t, []string{"SELECT", "7d", "512MiB", "-1", "2024-orders", "my-topic.v2", "a", `'it''s'`, `"q""q"`, "<=", "<>", "!=", ";", ""}, got)
	require.Equal(t, tokQuantity, toks[1].Type)
	require.Equal(t, tokNumber, toks[3].Type)
	require.Equal(t, tokIdent, toks[4].Type)
	require.Equal(t, 2, toks[7].Pos.Line)

	require.Equal(t, "it's", unquote(`'it''s'`))
	require.Equal(t, `q"q`, unquote(`"q""q"`))
	for name, want := range map[string]string{
		"orders": "orders", "my-topic": "my-topic", "select": "'select'", "": "''",
		"a b": "'a b'", "2024-x": "2024-x", "12": "'12'", "it's": "'it''s'", "a--b": "'a--b'",
	} {
		require.Equal(t, want, QuoteName(name), name)
	}
}

func TestComplete(t *testing.T) {
	for src, want := range map[string]bool{
		"":                           false,
		"SHOW TOPICS":                false,
		"SHOW TOPICS;":               true,
		"SHOW TOPICS; -- done":       true,
		"SHOW TOPICS;\n  ":           true,
		"SELECT * FROM x\nWHERE":     false,
		"PRODUCE INTO x VALUE 'a;":   false, // inside a string
		"PRODUCE INTO x VALUE 'a';":  true,
		"SHOW $":                     true, // cannot become valid: show the error
		"-- only a comment":          false,
		"SHOW TOPICS; SELECT * FROM": false,
	} {
		require.Equal(t, want, Complete(src), "%q", src)
	}
}

func TestSuggest(t *testing.T) {
	require.Equal(t, "DESCRIBE", cli.Suggest("describ", Keywords))
	require.Equal(t, "SELECT", cli.Suggest("selcet", Keywords))
	require.Equal(t, "", cli.Suggest("orders", Keywords))
	require.Equal(t, "", cli.Suggest("x", Keywords))
}

func TestConfigValues(t *testing.T) {
	str := func(s string) *ConfigValue { v := Str(s); return &ConfigValue{Str: &v} }
	qty := func(s string) *ConfigValue { return &ConfigValue{Qty: &s} }
	for _, tc := range []struct {
		key  string
		v    *ConfigValue
		want string
	}{
		{"retention.ms", str("7d"), "604800000"},
		{"retention.ms", qty("15m"), "900000"},
		{"retention.ms", str("-1"), "-1"},
		{"segment.bytes", qty("512MiB"), "536870912"},
		{"segment.bytes", str("1GB"), "1000000000"},
		{"cleanup.policy", str("compact"), "compact"},
		{"message.timestamp.type", str("1d"), "1d"}, // not a .ms key: sent as written
	} {
		got, err := ConfigValueFor(tc.key, tc.v)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%s", tc.key)
	}
	_, err := ConfigValueFor("retention.ms", qty("9999999999999999999d"))
	require.Error(t, err)
}

// FuzzParse: no input panics the lexer, parser, validator or formatter, and
// whatever parses round-trips through the formatter.
func FuzzParse(f *testing.F) {
	for _, src := range corpus(f) {
		f.Add(src)
	}
	f.Add("SELECT * FROM x WHERE ((key = 'a')) AND NOT NOT value IS NULL;")
	f.Add("'unterminated")
	f.Fuzz(func(t *testing.T, src string) {
		for _, p := range ParseScript("fuzz", src) {
			if p.Err != nil {
				_ = p.Err.Error()
				_ = p.Err.Caret()
				continue
			}
			requireRoundTrip(t, p.Text, p.Stmt)
		}
		_ = Complete(src)
	})
}

// Deeply nested parentheses are a syntax error, not a stack overflow:
// 200,000 of them used to kill the process (a fatal error, not a panic).
func TestDeepNestingIsASyntaxError(t *testing.T) {
	src := "SELECT * FROM t WHERE " + strings.Repeat("(", 200_000) + "key = 'a'" + strings.Repeat(")", 200_000) + ";"
	got := ParseScript("", src)
	require.Len(t, got, 1)
	require.NotNil(t, got[0].Err)
	require.Contains(t, got[0].Err.Error(), "parentheses nested deeper than 100")
	ok := ParseScript("", "SELECT * FROM t WHERE "+strings.Repeat("(", 20)+"key = 'a'"+strings.Repeat(")", 20)+";")
	require.Nil(t, ok[0].Err, "ordinary nesting parses")
}
