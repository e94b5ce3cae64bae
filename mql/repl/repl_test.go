package repl

// The console on a real terminal (a pty running the binary) is tested in
// internal/e2e (repl_test.go), where the binary is built.

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/mql"
)

func TestCandidates(t *testing.T) {
	for _, tc := range []struct {
		src, word string
		kw        []string
		names     NameKind
	}{
		{"", "", nil, NamesNone},
		{"SEL", "SEL", nil, NamesNone},
		{"SHOW ", "", []string{"ACLS", "BROKERS", "CLUSTER", "GROUPS", "OFFSETS", "QUOTAS", "REASSIGNMENTS", "TOPICS", "TRANSACTIONS", "USERS"}, NamesNone},
		{"SHOW OFFSETS ", "", nil, NamesTopics},
		{"select * from ord", "ord", nil, NamesTopics},
		{"SELECT * FROM orders WH", "WH", []string{"FROM", "ISOLATION", "LIMIT", "PARTITION", "WHERE"}, NamesNone},
		{"DESCRIBE GROUP b", "b", nil, NamesGroups},
		{"FETCH FROM t GROUP ", "", nil, NamesGroups},
		{"SHOW TOPICS; DROP TOPIC x; JOIN GROUP g ON ", "", nil, NamesTopics},
		{"GRANT READ ON TOPIC t TO ", "", nil, NamesNone},
		{"SELECT * FROM\n  orders\n  WHERE ", "", []string{"HEADER", "KEY", "NOT", "OFFSET", "PARTITION", "TIMESTAMP", "VALUE"}, NamesNone},
	} {
		word, c, ok := Candidates(tc.src)
		require.True(t, ok, tc.src)
		require.Equal(t, tc.word, word, tc.src)
		if tc.kw != nil || tc.src == "" {
			if tc.src == "" {
				require.Contains(t, c.Keywords, "SELECT")
			} else {
				require.Equal(t, tc.kw, c.Keywords, tc.src)
			}
		}
		require.Equal(t, tc.names, c.Names, tc.src)
	}
	_, _, ok := Candidates("PRODUCE INTO t VALUE 'unterminated")
	require.False(t, ok)
}

func TestLeaves(t *testing.T) {
	for _, line := range []string{"exit", " QUIT ", "quit;", `\q`, `\Q`} {
		require.True(t, leaves(line, false), line)
	}
	require.True(t, leaves(`\q`, true))
	for _, line := range []string{"exit", "quit;"} {
		require.False(t, leaves(line, true), line)
	}
	for _, line := range []string{"", "exits", "exit now", "SELECT"} {
		require.False(t, leaves(line, false), line)
	}
	require.False(t, hasTokens("  -- a comment\n"))
	require.True(t, hasTokens("SELECT\n"))
	require.True(t, hasTokens("PRODUCE INTO t VALUE 'open"))
}

func TestHistoryLine(t *testing.T) {
	require.Equal(t, "SELECT * FROM t WHERE key = 'a';", historyLine("SELECT *\n  FROM t\n  WHERE key = 'a';\n"))
	require.True(t, mql.Complete(historyLine("SELECT *\nFROM t;\n")))

	// Statements with a password never reach the history file.
	require.True(t, hasPassword("CONNECT 'b:9093' USER 'alice' PASSWORD 'pw';"))
	require.True(t, hasPassword("create user bob\n  password 'pw';"))
	require.False(t, hasPassword("PRODUCE INTO t VALUE 'password';"))
	require.False(t, hasPassword("SHOW USERS;"))
}
