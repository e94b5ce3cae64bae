package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/testbroker"
	"github.com/moonmq/moonmq/internal/testcerts"
)

// TestToolkitOnSecuredNode: the toolkit against a real SASL_SSL `moonmq
// serve` offering channel binding. The admin (a bootstrap user and super
// user) logs in with SCRAM-SHA-256-PLUS — the toolkit asks the broker
// first, as no --mechanism is given — makes a user and grants it a topic;
// that user then produces and reads it, with the password from the
// environment and the CA from a Kafka client properties file (the one kcat
// reads too), and is denied what it was not granted; a wrong password is
// refused with a clear message; `bench connect` logs in repeatedly.
func TestToolkitOnSecuredNode(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "e2e ca")
	certFile, keyFile := ca.Server(t, "broker").Write(t, dir, "server")
	caFile := ca.Write(t, dir, "ca")
	b := testbroker.Start(t, "--security-protocol", "SASL_SSL", "--tls-cert", certFile, "--tls-key", keyFile,
		"--sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512,SCRAM-SHA-256-PLUS",
		"--bootstrap-user", "admin:adm1n-s3cret", "--superusers", "User:admin")

	moonmq := func(password string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, testbroker.Binary(t), args...)
		cmd.Env = append(os.Environ(), "MOONMQ_PASSWORD="+password)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := moonmq("adm1n-s3cret", "--addr", b.Addr, "--tls-ca", caFile, "--user", "admin", "-e",
		"CREATE USER alice PASSWORD 'al1ce-pw'; CREATE TOPIC orders PARTITIONS 2; "+
			"GRANT READ, WRITE ON TOPIC 'orders' TO alice; SHOW ACLS FOR alice;")
	require.NoError(t, err, out)
	require.Contains(t, out, "OK user 'alice' created")
	require.Contains(t, out, "User:alice")
	testbroker.WaitFor(t, 10*time.Second, "the admin's -PLUS login in the log", func() bool {
		return strings.Contains(b.Log(), `"mechanism":"SCRAM-SHA-256-PLUS","principal":"User:admin"`)
	})

	props := filepath.Join(dir, "client.properties")
	require.NoError(t, os.WriteFile(props, []byte("security.protocol=SASL_SSL\nsasl.mechanisms=SCRAM-SHA-256\n"+
		"sasl.username=alice\nssl.ca.location="+caFile+"\n"), 0o600))
	out, err = moonmq("al1ce-pw", "--addr", b.Addr, "--client-config", props, "-e",
		"PRODUCE INTO orders PARTITION 0 VALUE 'hello'; SELECT value FROM orders PARTITION 0;")
	require.NoError(t, err, out)
	require.Contains(t, out, "hello")
	out, err = moonmq("al1ce-pw", "--addr", b.Addr, "--client-config", props, "-e", "CREATE TOPIC payments;")
	require.Error(t, err)
	require.Contains(t, out, "not authorized")
	// kcat reads the same file.
	require.Equal(t, "hello\n", testbroker.Kcat(t, "", "-b", b.Addr, "-F", props, "-X", "sasl.password=al1ce-pw",
		"-C", "-t", "orders", "-p", "0", "-o", "beginning", "-e", "-f", "%s\n"))

	out, err = moonmq("wrong", "--addr", b.Addr, "--tls-ca", caFile, "--user", "alice", "-e", "SHOW TOPICS;")
	require.Error(t, err)
	require.Contains(t, out, "authentication failed")

	out, err = moonmq("adm1n-s3cret", "bench", "connect", "--addr", b.Addr, "--tls-ca", caFile, "--user", "admin",
		"--mechanism", "SCRAM-SHA-512", "--connections", "5")
	require.NoError(t, err, out)
	require.Contains(t, out, "connections 5 set up, 0 failed")
	require.NotContains(t, b.Log(), "adm1n-s3cret")
	require.NotContains(t, b.Log(), "al1ce-pw")
}
