package main

import (
	"bytes"
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/node"
)

func TestSASLFlags(t *testing.T) {
	file := writeConfig(t, `
security_protocol = "SASL_PLAINTEXT"
sasl_mechanisms = "SCRAM-SHA-512,PLAIN"
allow_plain_without_tls = true
auth_lockout_window = "90s"
`)
	env := []string{"MOONMQ_AUTH_LOCKOUT_FAILURES=7", "MOONMQ_BOOTSTRAP_USER=carol:c:pw"}
	cfg, err := load(t, []string{"--config", file, "--bootstrap-user", "admin:s3cret", "--bootstrap-user", "bob:pw2",
		"--auth-lockout-duration", "10m"}, env)
	require.NoError(t, err)
	nc := cfg.nodeConfig(nil)
	require.EqualValues(t, "SASL_PLAINTEXT", nc.SecurityProtocol)
	require.Equal(t, []string{"SCRAM-SHA-512", "PLAIN"}, nc.SASL.Mechanisms)
	require.True(t, nc.SASL.AllowPlainWithoutTLS)
	require.Equal(t, 7, nc.SASL.Lockout.Failures)
	require.Equal(t, 90*time.Second, nc.SASL.Lockout.Window)
	require.Equal(t, 10*time.Minute, nc.SASL.Lockout.Duration)
	require.Equal(t, []node.BootstrapUser{{Name: "admin", Password: "s3cret"}, {Name: "bob", Password: "pw2"}}, nc.BootstrapUsers,
		"the flag beats the environment")

	// From the environment alone, a password with ':' in it.
	cfg, err = load(t, nil, env)
	require.NoError(t, err)
	require.Equal(t, []node.BootstrapUser{{Name: "carol", Password: "c:pw"}}, cfg.nodeConfig(nil).BootstrapUsers)
	// Defaults.
	cfg, err = load(t, nil, nil)
	require.NoError(t, err)
	nc = cfg.nodeConfig(nil)
	require.EqualValues(t, "PLAINTEXT", nc.SecurityProtocol)
	require.Equal(t, 5, nc.SASL.Lockout.Failures)
	require.Equal(t, time.Minute, nc.SASL.Lockout.Window)
	require.Equal(t, 5*time.Minute, nc.SASL.Lockout.Duration)
}

func TestSASLFlagErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{args: []string{"--sasl-mechanisms", "SCRAM-SHA-1"}, want: `sasl-mechanisms`},
		{args: []string{"--bootstrap-user", "admin"}, want: "bootstrap-user"},
		{args: []string{"--auth-lockout-window", "60"}, want: "a duration needs a unit"},
		{env: []string{"MOONMQ_AUTH_LOCKOUT_DURATION=300000"}, want: "MOONMQ_AUTH_LOCKOUT_DURATION"},
		{args: []string{"--auth-lockout-failures", "-1"}, want: "auth-lockout-failures -1"},
		{args: []string{"--auth-lockout-window", "0s"}, want: "auth-lockout-window 0s"},
		{args: []string{"--sasl-mechanisms", "SCRAM-SHA-256"}, want: "sasl-mechanisms SCRAM-SHA-256: the listener does not use SASL"},
		{args: []string{"--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanisms", "PLAIN"}, want: "allow-plain-without-tls"},
		{args: []string{"--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanisms", "SCRAM-SHA-256-PLUS"}, want: "SCRAM-SHA-256-PLUS needs TLS"},
		{args: []string{"--security-protocol", "KERBEROS"}, want: "security-protocol"},
	} {
		var out, errb bytes.Buffer
		_, err := loadServeConfig(tc.args, tc.env, &out, &errb)
		require.Error(t, err, "%v %v", tc.args, tc.env)
		require.Contains(t, err.Error()+errb.String(), tc.want, "%v %v", tc.args, tc.env)
	}
}

// --print-config never prints a password, and what it prints loads back
// (without the secret, which the operator gives again).
func TestPrintConfigHidesPasswords(t *testing.T) {
	var out, errb bytes.Buffer
	_, err := loadServeConfig([]string{"--print-config", "--security-protocol", "SASL_PLAINTEXT", "--bootstrap-user", "admin:hunter2"},
		[]string{"MOONMQ_BOOTSTRAP_USER=x:env-secret"}, &out, &errb)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.NotContains(t, out.String(), "hunter2")
	require.NotContains(t, out.String(), "env-secret")
	require.Contains(t, out.String(), `# bootstrap_user = "admin:<redacted>"`)
	cfg, err := load(t, []string{"--config", writeConfig(t, out.String())}, nil)
	require.NoError(t, err)
	require.EqualValues(t, "SASL_PLAINTEXT", cfg.nodeConfig(nil).SecurityProtocol)
	require.Empty(t, cfg.nodeConfig(nil).BootstrapUsers)
}

func TestSASLSSLNeedsTLSMaterial(t *testing.T) {
	_, err := load(t, []string{"--security-protocol", "SASL_SSL"}, nil)
	require.ErrorContains(t, err, "tls-cert and tls-key are required")
}
