package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/cluster/controller"
	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/internal/testbroker"
	"github.com/moonmq/moonmq/internal/testcerts"
)

// TestKcatSASLScram: librdkafka over SASL_PLAINTEXT with SCRAM-SHA-256
// and -512 against a real `moonmq serve --bootstrap-user`: the user
// created at start produces and consumes; a wrong password is refused
// with SASL_AUTHENTICATION_FAILED; the password appears nowhere in the
// broker's (debug-level) log.
func TestKcatSASLScram(t *testing.T) {
	if _, ok := any((*controller.Controller)(nil)).(interface {
		AlterScramCredentials(context.Context, []metadata.ScramCredential, []metadata.ScramDeletion) []error
	}); !ok {
		t.Skip("this build's controller stores no SCRAM credentials (the security metadata is a separate change)")
	}
	const password = "adm1n-s3cret-pw"
	b := testbroker.Start(t, "--security-protocol", "SASL_PLAINTEXT", "--bootstrap-user", "admin:"+password,
		"--superusers", "User:admin", "--auto-create-topics")
	sasl := func(mech, pw string) []string {
		return []string{"-b", b.Addr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=" + mech,
			"-X", "sasl.username=admin", "-X", "sasl.password=" + pw}
	}
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		topic := "secured-" + strings.ToLower(mech)
		testbroker.Kcat(t, "one\ntwo\n", append(sasl(mech, password), "-P", "-t", topic)...)
		out := testbroker.Kcat(t, "", append(sasl(mech, password), "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%s\n")...)
		require.Equal(t, "one\ntwo\n", out)
	}

	// A wrong password: kcat fails and says why.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", append(sasl("SCRAM-SHA-256", "wrong"), "-L", "-m", "5")...)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "kcat with a wrong password: %s", out)
	require.Contains(t, string(out), "Authentication failed")

	// Without SASL the broker answers nothing but closes the connection.
	cmd = exec.CommandContext(ctx, "kcat", "-b", b.Addr, "-L", "-m", "3")
	out, err = cmd.CombinedOutput()
	require.Error(t, err, "kcat without SASL: %s", out)

	require.Contains(t, b.Log(), "SASL authentication failed")
	require.NotContains(t, b.Log(), password)
}

// TestKcatSASLSSL: librdkafka over SASL_SSL, with SCRAM-SHA-512 and PLAIN
// (offered over TLS without --allow-plain-without-tls), against a real
// `moonmq serve`; PLAIN is refused at start on SASL_PLAINTEXT.
func TestKcatSASLSSL(t *testing.T) {
	if _, ok := any((*controller.Controller)(nil)).(interface {
		AlterScramCredentials(context.Context, []metadata.ScramCredential, []metadata.ScramDeletion) []error
	}); !ok {
		t.Skip("this build's controller stores no SCRAM credentials (the security metadata is a separate change)")
	}
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "e2e ca")
	certFile, keyFile := ca.Server(t, "broker").Write(t, dir, "server")
	caFile := ca.Write(t, dir, "ca")
	const password = "tls-s3cret"
	b := testbroker.Start(t, "--auto-create-topics", "--security-protocol", "SASL_SSL",
		"--tls-cert", certFile, "--tls-key", keyFile, "--sasl-mechanisms", "SCRAM-SHA-512,PLAIN",
		"--bootstrap-user", "app:"+password, "--superusers", "User:app")
	for _, mech := range []string{"SCRAM-SHA-512", "PLAIN"} {
		args := []string{"-b", b.Addr, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + caFile,
			"-X", "sasl.mechanism=" + mech, "-X", "sasl.username=app", "-X", "sasl.password=" + password}
		topic := "tls-" + strings.ToLower(mech)
		testbroker.Kcat(t, "a\nb\n", append(args, "-P", "-t", topic)...)
		require.Equal(t, "a\nb\n", testbroker.Kcat(t, "", append(args, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%s\n")...))
	}
	require.NotContains(t, b.Log(), password)

	out, err := exec.Command(testbroker.Binary(t), "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "",
		"--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanisms", "PLAIN").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "allow-plain-without-tls")
}
