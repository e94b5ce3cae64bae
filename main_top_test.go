package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/cli"
)

// TestTopCommandLine covers what `moonmq top` checks before it takes over
// the terminal (the dashboard itself is tested in tui/, end to end in tmux
// by tui.TestTopEndToEnd). Under go test stdin is not a terminal.
func TestTopCommandLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		code int
		want string
	}{
		{[]string{"top", "--help"}, "", 0, "Usage: moonmq top"},
		{[]string{"top", "--bogus"}, "", 2, "unknown flag --bogus"},
		{[]string{"top", "--adr", "x"}, "", 2, "did you mean --addr?"},
		{[]string{"top", "extra"}, "", 1, `unexpected argument "extra"`},
		{[]string{"top", "--addr", "nohost"}, "", 1, `broker address "nohost" has no port`},
		{[]string{"top"}, "envhost", 1, `broker address "envhost" has no port`},
		{[]string{"top", "--refresh", "1ms"}, "", 1, "refresh interval 1ms is too short"},
		{[]string{"top", "--refresh", "1m"}, "", 1, "must cover at least 10 refreshes"},
		{[]string{"top"}, "", 1, "needs an interactive terminal"},
		{[]string{"top", "--user", "alice"}, "", 1, `--password: no password for user "alice"`},
		{[]string{"top", "--mechanism", "PLAIN"}, "", 1, "--mechanism: SASL mechanism PLAIN needs a user"},
		{[]string{"top", "--user", "a", "--password", "p", "--mechanism", "NTLM"}, "", 1, "--mechanism: unknown SASL mechanism"},
		{[]string{"top", "--tls-ca", "/nonexistent/ca.pem"}, "", 1, "--tls-ca: open /nonexistent/ca.pem"},
		{[]string{"top", "--tls-cert", "c.pem"}, "", 1, "--tls-cert: a client certificate needs its key (--tls-key)"},
		{[]string{"top", "--client-config", "/nonexistent.properties"}, "", 1, "--client-config: open"},
		{[]string{"top", "--user", "alice", "--password", "pw", "--tls"}, "", 1, "needs an interactive terminal"},
	} {
		t.Setenv(cli.AddrEnv, c.env)
		t.Setenv("MOONMQ_PASSWORD", "")
		var stdout, stderr bytes.Buffer
		code := run(c.args, &stdout, &stderr)
		require.Equal(t, c.code, code, "%v: %s", c.args, stderr.String())
		require.Contains(t, stderr.String(), c.want, "%v", c.args)
	}
}
