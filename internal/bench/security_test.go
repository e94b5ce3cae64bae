package bench

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/moonmq/moonmq/net/client"
)

// TestBenchSASL: produce and consume authenticate with --user and
// $MOONMQ_PASSWORD against a SASL cluster; without credentials the run
// fails.
func TestBenchSASL(t *testing.T) {
	if os.Getenv("MOONMQ_TEST_ADDR") != "" {
		t.Skip("needs the in-process fake cluster")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "admin", "pw"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	t.Setenv(client.PasswordEnv, "pw")

	out, errOut, err := run(t, "produce", "--addr", addr, "--topic", "secure", "--records", "200", "--create",
		"--output", "json", "--user", "admin", "--mechanism", "SCRAM-SHA-512")
	require.NoError(t, err, errOut)
	var res Result
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, int64(200), res.Records)
	require.Zero(t, res.Failed)

	// The same credentials from a client properties file.
	file := filepath.Join(t.TempDir(), "client.properties")
	require.NoError(t, os.WriteFile(file, []byte("bootstrap.servers="+addr+"\nsecurity.protocol=SASL_PLAINTEXT\n"+
		"sasl.mechanism=SCRAM-SHA-512\nsasl.username=admin\nsasl.password=pw\n"), 0o600))
	t.Setenv(client.PasswordEnv, "")
	t.Setenv("MOONMQ_ADDR", "")
	out, errOut, err = run(t, "consume", "--client-config", file, "--topic", "secure", "--output", "json")
	require.NoError(t, err, errOut)
	res = Result{}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, int64(200), res.Records)

	_, _, err = run(t, "consume", "--addr", addr, "--topic", "secure", "--timeout", "3s")
	require.Error(t, err, "no credentials")
}

// TestBenchSecurityFlagErrors: security flag mistakes are usage errors that
// name the flag; the password is never echoed.
func TestBenchSecurityFlagErrors(t *testing.T) {
	t.Setenv(client.PasswordEnv, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"produce", "--topic", "t", "--user", "alice"}, "--password: no password for user \"alice\""},
		{[]string{"consume", "--topic", "t", "--mechanism", "PLAIN"}, "--mechanism: SASL mechanism PLAIN needs a user"},
		{[]string{"produce", "--topic", "t", "--user", "a", "--password", "sekrit", "--mechanism", "KERBEROS"}, "--mechanism: unknown SASL mechanism"},
		{[]string{"consume", "--topic", "t", "--tls-ca", "/nonexistent/ca.pem"}, "--tls-ca: open /nonexistent/ca.pem"},
		{[]string{"produce", "--topic", "t", "--tls-key", "k.pem"}, "--tls-key: a client key needs its certificate (--tls-cert)"},
		{[]string{"produce", "--topic", "t", "--client-config", "/nonexistent.properties"}, "--client-config: open"},
	} {
		_, _, err := run(t, tc.args...)
		require.Error(t, err, tc.args)
		require.True(t, errors.Is(err, ErrUsage), "%v", err)
		require.ErrorContains(t, err, tc.want)
		require.NotContains(t, err.Error(), "sekrit")
	}
}
