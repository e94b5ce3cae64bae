package main

import (
	"bytes"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/net/auth"
	"github.com/moonmq/moonmq/net/kafka"
)

func TestTLSFlags(t *testing.T) {
	cfg, err := load(t, []string{"--security-protocol", "ssl", "--tls-cert", "c.pem", "--tls-key", "k.pem",
		"--tls-client-ca", "ca.pem", "--tls-principal-mapping", "RULE:^CN=(.*?),OU=apps.*$/$1/L,DEFAULT"}, nil)
	require.NoError(t, err)
	nc := cfg.nodeConfig(nil)
	require.Equal(t, kafka.ProtocolSSL, nc.SecurityProtocol)
	require.Equal(t, auth.TLSOptions{CertFile: "c.pem", KeyFile: "k.pem", ClientCAFile: "ca.pem",
		PrincipalMapping: "RULE:^CN=(.*?),OU=apps.*$/$1/L,DEFAULT"}, nc.TLS)
	require.Equal(t, auth.ClientAuthRequired, nc.TLS.EffectiveClientAuth(), "required is the default with a client CA")

	// The config file and the environment set them too.
	file := writeConfig(t, "security_protocol = \"SASL_SSL\"\ntls_cert = \"f.pem\"\ntls_client_auth = \"requested\"\n")
	cfg, err = load(t, []string{"--config", file}, []string{"MOONMQ_TLS_KEY=env-key.pem", "MOONMQ_TLS_CLIENT_CA=env-ca.pem"})
	require.NoError(t, err)
	nc = cfg.nodeConfig(nil)
	require.Equal(t, kafka.ProtocolSASLSSL, nc.SecurityProtocol)
	require.Equal(t, auth.TLSOptions{CertFile: "f.pem", KeyFile: "env-key.pem", ClientCAFile: "env-ca.pem",
		ClientAuth: auth.ClientAuthRequested}, nc.TLS)

	// The default is PLAINTEXT without TLS.
	cfg, err = load(t, nil, nil)
	require.NoError(t, err)
	nc = cfg.nodeConfig(nil)
	require.Equal(t, kafka.ProtocolPlaintext, nc.SecurityProtocol)
	require.Equal(t, auth.TLSOptions{}, nc.TLS)
}

func TestTLSFlagErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args, env []string
		want      string
	}{
		{args: []string{"--security-protocol", "TLS"}, want: `security-protocol "TLS"`},
		{env: []string{"MOONMQ_SECURITY_PROTOCOL=https"}, want: "MOONMQ_SECURITY_PROTOCOL"},
		{args: []string{"--tls-client-auth", "always"}, want: `tls-client-auth "always"`},
		{args: []string{"--tls-principal-mapping", "RULE:^CN=(.*)/$1"}, want: "tls-principal-mapping"},
		// Combinations.
		{args: []string{"--security-protocol", "SSL"}, want: "tls-cert and tls-key are required"},
		{args: []string{"--security-protocol", "SASL_SSL", "--tls-cert", "c.pem"}, want: "tls-key is required"},
		{args: []string{"--security-protocol", "SSL", "--tls-cert", "c", "--tls-key", "k", "--tls-client-auth", "required"},
			want: "needs tls-client-ca"},
		{args: []string{"--tls-cert", "c.pem", "--tls-key", "k.pem"}, want: "not PLAINTEXT: set --security-protocol SSL or SASL_SSL"},
		{args: []string{"--security-protocol", "SASL_PLAINTEXT", "--tls-client-ca", "ca.pem"}, want: "not SASL_PLAINTEXT"},
	} {
		var out, errb bytes.Buffer
		_, err := loadServeConfig(tc.args, tc.env, &out, &errb)
		require.Error(t, err, "%v %v", tc.args, tc.env)
		require.Contains(t, err.Error()+errb.String(), tc.want, "%v %v", tc.args, tc.env)
	}
}

func TestTLSPrintConfigRoundTrips(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"--print-config", "--security-protocol", "SSL", "--tls-cert", "c.pem", "--tls-key", "k.pem",
		"--tls-client-ca", "ca.pem", "--tls-client-auth", "requested", "--tls-principal-mapping", `RULE:^CN=(.*?),O=x$/$1\/y/U`}
	_, err := loadServeConfig(args, nil, &out, &errb)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Contains(t, out.String(), `security_protocol = "SSL"`)
	cfg, err := load(t, []string{"--config", writeConfig(t, out.String())}, nil)
	require.NoError(t, err)
	nc := cfg.nodeConfig(nil)
	require.Equal(t, kafka.ProtocolSSL, nc.SecurityProtocol)
	require.Equal(t, auth.TLSOptions{CertFile: "c.pem", KeyFile: "k.pem", ClientCAFile: "ca.pem",
		ClientAuth: auth.ClientAuthRequested, PrincipalMapping: `RULE:^CN=(.*?),O=x$/$1\/y/U`}, nc.TLS)
}
