package client

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseClientConfig(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      ClientConfig // labels are not compared
		err       string
	}{
		{name: "empty", src: "", want: ClientConfig{}},
		{name: "kcat sasl_ssl scram", src: `
# kcat -F client.properties
bootstrap.servers=broker1:9093,broker2:9093
security.protocol=SASL_SSL
sasl.mechanisms=SCRAM-SHA-512
sasl.username=alice
sasl.password=s3cr=t:with spaces
ssl.ca.location=/etc/ca.pem
`, want: ClientConfig{Bootstrap: "broker1:9093,broker2:9093", Security: Security{
			TLS: true, TLSCAFile: "/etc/ca.pem", Mechanism: "SCRAM-SHA-512", User: "alice", Password: "s3cr=t:with spaces"}}},
		{name: "java jaas plain", src: `security.protocol = sasl_plaintext
sasl.mechanism: PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    username="bob" \
    password="p\\\"w";
acks=all
linger.ms=5
client.id=tools
`, want: ClientConfig{ClientID: "tools", Security: Security{Mechanism: "PLAIN", User: "bob", Password: `p"w`}}},
		{name: "scram jaas unquoted", src: "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n" +
			"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=carol password=pw;\n",
			want: ClientConfig{Security: Security{TLS: true, Mechanism: "SCRAM-SHA-256", User: "carol", Password: "pw"}}},
		{name: "mtls", src: "security.protocol=SSL\nssl.ca.location=ca.pem\nssl.certificate.location=c.pem\nssl.key.location=k.pem\nssl.endpoint.identification.algorithm=none\n",
			want: ClientConfig{Security: Security{TLS: true, TLSCAFile: "ca.pem", TLSCertFile: "c.pem", TLSKeyFile: "k.pem", TLSSkipHostnameVerify: true}}},
		{name: "insecure", src: "security.protocol=SSL\nenable.ssl.certificate.verification=false\n",
			want: ClientConfig{Security: Security{TLS: true, TLSInsecure: true}}},
		{name: "escapes and comments", src: "! comment\n  # another\nmetadata.broker.list\tb:9092\nsasl.password=a\\u0041\\tb\nsasl.username=x\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n",
			want: ClientConfig{Bootstrap: "b:9092", Security: Security{User: "x", Password: "aA\tb", Mechanism: "PLAIN"}}},
		{name: "plaintext ignores tls-only knobs", src: "security.protocol=PLAINTEXT\nssl.endpoint.identification.algorithm=none\n", want: ClientConfig{}},

		{name: "unknown key", src: "security.protocl=SSL\n", err: "security.protocl (f.properties:1): unknown client config key"},
		{name: "bad protocol", src: "security.protocol=TLS\n", err: `security.protocol "TLS" is not PLAINTEXT`},
		{name: "sasl without protocol", src: "sasl.username=a\nsasl.password=b\n", err: "sasl.username is set but security.protocol is PLAINTEXT"},
		{name: "ssl file without protocol", src: "ssl.ca.location=ca.pem\n", err: "ssl.ca.location is set but security.protocol is PLAINTEXT"},
		{name: "no mechanism", src: "security.protocol=SASL_SSL\nsasl.username=a\nsasl.password=b\n", err: "needs sasl.mechanism"},
		{name: "no user", src: "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", err: "needs sasl.username"},
		{name: "gssapi", src: "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.username=a\nsasl.password=b\n", err: "GSSAPI is not supported"},
		{name: "jks", src: "security.protocol=SSL\nssl.truststore.location=/x.jks\n", err: "ssl.truststore.location (f.properties:2): not supported"},
		{name: "encrypted key", src: "security.protocol=SSL\nssl.key.password=pw\n", err: "encrypted private keys are not supported"},
		{name: "oauth jaas", src: "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n", err: "OAuthBearerLoginModule is not supported"},
		{name: "bad jaas", src: "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=nonsense\n", err: "cannot read it"},
		{name: "bad bool", src: "enable.ssl.certificate.verification=maybe\n", err: "is not true or false"},
		{name: "bad escape", src: "sasl.password=\\u12\n", err: "malformed"},
		{name: "binary", src: "a=\xff\xfe\n", err: "not UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseClientConfig("f.properties", strings.NewReader(tc.src))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			got.Security.labels = nil
			require.Equal(t, tc.want, got)
		})
	}
}

// TestClientConfigLabels: errors about a file's setting name the key and
// line it came from.
func TestClientConfigLabels(t *testing.T) {
	cc, err := ParseClientConfig("c.properties", strings.NewReader("security.protocol=SSL\nssl.ca.location=/nonexistent/ca.pem\n"))
	require.NoError(t, err)
	_, err = cc.Security.TLSConfig()
	require.ErrorContains(t, err, "ssl.ca.location (c.properties:2): open /nonexistent/ca.pem")
}

func TestClientConfigTooLarge(t *testing.T) {
	_, err := ParseClientConfig("big", io.LimitReader(neverEnding('a'), MaxClientConfigSize+10))
	require.ErrorContains(t, err, "larger than")
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// FuzzParseClientConfig: any input parses or fails with an error; no
// panic, and a parsed config's settings pass Validate once a password is
// given (a file may leave it to $MOONMQ_PASSWORD or the prompt).
func FuzzParseClientConfig(f *testing.F) {
	f.Add("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.username=a\nsasl.password=b\n")
	f.Add("sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"b\";\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN")
	f.Add("a\\\n b=\\u0041\\")
	f.Add("key:value\n!x\n#y\n\\=\\:=1")
	f.Fuzz(func(t *testing.T, src string) {
		cc, err := ParseClientConfig("fuzz", strings.NewReader(src))
		if err != nil {
			return
		}
		sec := cc.Security
		if NeedsPassword(sec) {
			sec.Password = "from elsewhere"
		}
		require.NoError(t, sec.Validate())
	})
}

// TestSecurityFlags: flags override the client config file, the password
// comes from --password, else $MOONMQ_PASSWORD, else the file; errors name
// the flag.
func TestSecurityFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "client.properties")
	require.NoError(t, os.WriteFile(file, []byte("bootstrap.servers=b:9093\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"+
		"sasl.username=alice\nsasl.password=file-pw\nssl.ca.location=ca.pem\n"), 0o600))
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	parse := func(t *testing.T, getenv func(string) string, args ...string) (*SecurityFlags, Security, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("addr", "127.0.0.1:9092", "")
		f := RegisterSecurityFlags(fs)
		require.NoError(t, fs.Parse(args))
		sec, err := f.Resolve(getenv)
		return f, sec, err
	}

	t.Run("none", func(t *testing.T) {
		_, sec, err := parse(t, env(nil))
		require.NoError(t, err)
		require.Equal(t, "PLAINTEXT", sec.Protocol())
	})
	t.Run("user defaults to SCRAM-SHA-256", func(t *testing.T) {
		_, sec, err := parse(t, env(nil), "--user", "bob", "--password", "pw")
		require.NoError(t, err)
		require.Empty(t, sec.Mechanism, "not named: -PLUS may be chosen over TLS")
		require.Equal(t, MechScramSHA256, sec.mechanism())
		require.Equal(t, "SASL_PLAINTEXT", sec.Protocol())
		require.NoError(t, sec.Validate())
	})
	t.Run("file", func(t *testing.T) {
		f, sec, err := parse(t, env(nil), "--client-config", file)
		require.NoError(t, err)
		require.Equal(t, "SASL_SSL", sec.Protocol())
		require.Equal(t, "file-pw", sec.Password)
		require.Equal(t, "b:9093", f.Addr("127.0.0.1:9092"))
	})
	t.Run("flags override the file", func(t *testing.T) {
		f, sec, err := parse(t, env(map[string]string{PasswordEnv: "env-pw"}), "--client-config", file, "--mechanism", "plain", "--tls-ca", "other.pem", "--addr", "x:1")
		require.NoError(t, err)
		require.Equal(t, "PLAIN", sec.Mechanism)
		require.Equal(t, "other.pem", sec.TLSCAFile)
		require.Equal(t, "env-pw", sec.Password) // env over the file
		require.Equal(t, "x:1", f.Addr("x:1"))   // --addr over bootstrap.servers
		_, sec, err = parse(t, env(map[string]string{PasswordEnv: "env-pw"}), "--client-config", file, "--password", "flag-pw")
		require.NoError(t, err)
		require.Equal(t, "flag-pw", sec.Password)
	})
	t.Run("another user drops the file's password", func(t *testing.T) {
		_, sec, err := parse(t, env(nil), "--client-config", file, "--user", "bob")
		require.NoError(t, err)
		require.True(t, NeedsPassword(sec))
		require.ErrorContains(t, MissingPasswordError(sec), "--password: no password for user \"bob\"")
	})
	t.Run("tls=false overrides the file", func(t *testing.T) {
		_, sec, err := parse(t, env(nil), "--client-config", file, "--tls=false")
		require.NoError(t, err)
		require.Equal(t, "SASL_PLAINTEXT", sec.Protocol())
	})
	t.Run("errors name the flag", func(t *testing.T) {
		_, _, err := parse(t, env(nil), "--mechanism", "PLAIN")
		require.ErrorContains(t, err, "--mechanism: SASL mechanism PLAIN needs a user (--user)")
		_, _, err = parse(t, env(nil), "--password", "x")
		require.ErrorContains(t, err, "--password: a password without a user")
		_, _, err = parse(t, env(nil), "--client-config", filepath.Join(dir, "missing"))
		require.ErrorContains(t, err, "--client-config: open ")
		_, sec, err := parse(t, env(nil), "--user", "u", "--password", "p", "--mechanism", "SCRAM-SHA-1")
		require.NoError(t, err)
		require.ErrorContains(t, sec.Validate(), "--mechanism: unknown SASL mechanism")
		_, sec, err = parse(t, env(nil), "--tls-cert", "c.pem")
		require.NoError(t, err)
		require.ErrorContains(t, sec.Validate(), "--tls-cert: a client certificate needs its key (--tls-key)")
	})
}

// TestClientConfigWithoutPassword: a file may name the user and leave the
// password to $MOONMQ_PASSWORD, --password or the console's prompt.
func TestClientConfigWithoutPassword(t *testing.T) {
	cc, err := ParseClientConfig("f.properties", strings.NewReader("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=a\n"))
	require.NoError(t, err)
	require.Equal(t, "a", cc.Security.User)
	require.Empty(t, cc.Security.Password)
	require.True(t, NeedsPassword(cc.Security))
}
