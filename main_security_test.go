package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/moonmq/moonmq/internal/cli"
	"github.com/moonmq/moonmq/internal/testcerts"
	"github.com/moonmq/moonmq/net/client"
)

func runSecure(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestToolkitSecurityFlags: moonmq -e / run reach a SASL_SSL cluster with
// --user and $MOONMQ_PASSWORD, or with a kcat-style client properties file
// alone; mistakes are usage errors (exit 2) that name the flag or key, and
// a password is never printed.
func TestToolkitSecurityFlags(t *testing.T) {
	t.Setenv(cli.AddrEnv, "")
	t.Setenv(client.PasswordEnv, "")
	pki := testcerts.NewPKI(t, "alice")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(pki.ServerTLS(false)), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "admin", "admin-secret"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]

	t.Setenv(client.PasswordEnv, "admin-secret")
	code, out, errOut := runSecure("-e", "CREATE TOPIC sec PARTITIONS 1; SHOW TOPICS;", "--addr", addr,
		"--user", "admin", "--mechanism", "SCRAM-SHA-512", "--tls-ca", pki.CAFile, "--timeout", "5s")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "sec")
	t.Setenv(client.PasswordEnv, "")

	props := filepath.Join(t.TempDir(), "client.properties")
	require.NoError(t, os.WriteFile(props, []byte(fmt.Sprintf("# the same file works for kcat -F\nbootstrap.servers=%s\n"+
		"security.protocol=SASL_SSL\nsasl.mechanisms=SCRAM-SHA-512\nsasl.username=admin\nsasl.password=admin-secret\n"+
		"ssl.ca.location=%s\n", addr, pki.CAFile)), 0o600))
	code, out, errOut = runSecure("-e", "SHOW TOPICS;", "--client-config", props, "--output", "json", "--timeout", "5s")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"sec"`)

	// A wrong password from the flag overrides the file's, and fails.
	code, _, errOut = runSecure("-e", "SHOW TOPICS;", "--client-config", props, "--password", "sekrit-wrong", "--timeout", "3s")
	require.Equal(t, 1, code, errOut)
	require.NotContains(t, errOut, "sekrit-wrong")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-e", "SHOW TOPICS;", "--user", "alice"}, `--password: no password for user "alice"`},
		{[]string{"--repl", "--user", "alice"}, `--password: no password for user "alice"`}, // stdin is no terminal: no prompt
		{[]string{"-e", "SHOW TOPICS;", "--mechanism", "PLAIN"}, "--mechanism: SASL mechanism PLAIN needs a user"},
		{[]string{"-e", "SHOW TOPICS;", "--user", "a", "--password", "sekrit", "--mechanism", "OAUTHBEARER"}, "--mechanism: OAUTHBEARER is not supported"},
		{[]string{"-e", "SHOW TOPICS;", "--tls-ca", "/nonexistent/ca.pem"}, "--tls-ca: open /nonexistent/ca.pem"},
		{[]string{"-e", "SHOW TOPICS;", "--tls-key", "k.pem"}, "--tls-key: a client key needs its certificate (--tls-cert)"},
		{[]string{"-e", "SHOW TOPICS;", "--client-config", "/nonexistent.properties"}, "--client-config: open /nonexistent.properties"},
	} {
		code, _, errOut := runSecure(tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
		require.NotContains(t, errOut, "sekrit")
	}

	bad := filepath.Join(t.TempDir(), "bad.properties")
	require.NoError(t, os.WriteFile(bad, []byte("security.protocol=SASL_SSL\nsasl.mechansim=PLAIN\n"), 0o600))
	code, _, errOut = runSecure("-e", "SHOW TOPICS;", "--client-config", bad)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `--client-config: sasl.mechansim (`+bad+`:2): unknown client config key "sasl.mechansim"`)
}
