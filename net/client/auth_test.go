package client

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/moonmq/moonmq/internal/testcerts"
)

// newTestPKI makes a CA, a server certificate for 127.0.0.1 and a client
// certificate with CN alice.
func newTestPKI(t *testing.T) *testcerts.PKI { return testcerts.NewPKI(t, "alice") }

// newSecureCluster starts a one-broker kfake cluster with opts.
func newSecureCluster(t *testing.T, opts ...kfake.Opt) string {
	t.Helper()
	requireKfake(t)
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

func dialSecure(t *testing.T, addr string, sec Security) (*Client, error) {
	t.Helper()
	cl, err := Dial(testCtx(t), Options{Addr: addr, ClientID: "client-test", DialTimeout: 3 * time.Second, RequestTimeout: 5 * time.Second, Security: sec})
	if err == nil {
		t.Cleanup(cl.Close)
	}
	return cl, err
}

// useCluster proves the connection is usable: create a topic, produce
// nothing fancy, list it.
func useCluster(t *testing.T, cl *Client) {
	t.Helper()
	ctx := testCtx(t)
	require.NoError(t, cl.CreateTopic(ctx, "sec-topic", 1, 1, nil))
	ts, err := cl.ListTopics(ctx)
	require.NoError(t, err)
	var names []string
	for _, tp := range ts {
		names = append(names, tp.Name)
	}
	require.Contains(t, names, "sec-topic")
}

// TestSASLAgainstKfake: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 over
// SASL_PLAINTEXT authenticate and work; a wrong password is reported as an
// authentication failure (ErrNotAuthorized), not as an unreachable broker.
func TestSASLAgainstKfake(t *testing.T) {
	for _, mech := range []string{MechPlain, MechScramSHA256, MechScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			addr := newSecureCluster(t, kfake.EnableSASL(), kfake.Superuser(mech, "admin", "admin-secret"))
			cl, err := dialSecure(t, addr, Security{Mechanism: mech, User: "admin", Password: "admin-secret"})
			require.NoError(t, err)
			require.Equal(t, "User:admin", cl.Principal())
			useCluster(t, cl)

			// kfake closes the connection on a failed authentication
			// (Kafka answers SASL_AUTHENTICATION_FAILED:
			// TestDialErrorSASLFailed).
			_, err = dialSecure(t, addr, Security{Mechanism: mech, User: "admin", Password: "wrong"})
			require.Error(t, err)
			require.Contains(t, Explain(err), "wrong user, password or mechanism")
			require.NotContains(t, err.Error(), "wrong\"", "the password must never be printed")

			// No credentials at all: the broker refuses every request.
			_, err = dialSecure(t, addr, Security{})
			require.Error(t, err)
		})
	}
}

// TestDialErrorSASLFailed: Kafka's answer to a wrong password is an
// authentication failure (ErrNotAuthorized) with the broker's message,
// not an unreachable broker.
func TestDialErrorSASLFailed(t *testing.T) {
	opts := Options{Addr: "b:9092", Security: Security{User: "u", Password: "p"}}
	err := dialError(opts, fmt.Errorf("%w: %s", kerr.SaslAuthenticationFailed, "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"))
	require.ErrorIs(t, err, ErrNotAuthorized)
	require.NotErrorIs(t, err, ErrUnreachable)
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	require.Equal(t, "cannot dial b:9092: authentication failed; check the user name and password (Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256)", err.Error())

	err = dialError(opts, errors.New("SCRAM-SHA-256-PLUS: the broker's signature is wrong"))
	require.NotErrorIs(t, err, ErrUnreachable)
	require.ErrorIs(t, dialError(Options{Addr: "b:1"}, syscall.ECONNREFUSED), ErrUnreachable)
}

// TestSCRAMUserCreatedThenUsed: a user created over an admin connection
// (AlterUserScramCredentials) can then log in, with either mechanism.
func TestSCRAMUserCreatedThenUsed(t *testing.T) {
	addr := newSecureCluster(t, kfake.EnableSASL(), kfake.Superuser(MechScramSHA256, "admin", "admin-secret"))
	admin, err := dialSecure(t, addr, Security{User: "admin", Password: "admin-secret"}) // default SCRAM-SHA-256
	require.NoError(t, err)
	require.NoError(t, admin.UpsertUser(testCtx(t), "bob", MechScramSHA512, "bob-pw", 4096))
	bob, err := dialSecure(t, addr, Security{Mechanism: "scram-sha-512", User: "bob", Password: "bob-pw"})
	require.NoError(t, err)
	_, err = bob.ListTopics(testCtx(t))
	require.NoError(t, err)
}

// TestTLSAgainstKfake: TLS with the CA verifies the broker; without it the
// handshake fails with an explanation naming --tls-ca; mTLS presents the
// client certificate, whose CN is the principal; SCRAM over TLS offers
// SCRAM-SHA-256-PLUS first and falls back to SCRAM-SHA-256 with a broker
// that does not offer channel binding (kfake, like Kafka).
func TestTLSAgainstKfake(t *testing.T) {
	pki := newTestPKI(t)

	t.Run("ssl", func(t *testing.T) {
		addr := newSecureCluster(t, kfake.TLS(pki.ServerTLS(false)))
		cl, err := dialSecure(t, addr, Security{TLSCAFile: pki.CAFile})
		require.NoError(t, err)
		require.Equal(t, AnonymousPrincipal, cl.Principal())
		useCluster(t, cl)

		_, err = dialSecure(t, addr, Security{TLS: true}) // system roots: unknown CA
		require.Error(t, err)
		require.Contains(t, Explain(err), "--tls-ca")
		_, ok := err.(*Error)
		require.True(t, ok)

		// Explicitly insecure: accepted without the CA.
		_, err = dialSecure(t, addr, Security{TLS: true, TLSInsecure: true})
		require.NoError(t, err)

		// Plaintext client against a TLS listener: fails, not hangs.
		_, err = dialSecure(t, addr, Security{})
		require.Error(t, err)
	})

	t.Run("mtls", func(t *testing.T) {
		addr := newSecureCluster(t, kfake.TLS(pki.ServerTLS(true)))
		cl, err := dialSecure(t, addr, Security{TLSCAFile: pki.CAFile, TLSCertFile: pki.ClientCert, TLSKeyFile: pki.ClientKey})
		require.NoError(t, err)
		require.Equal(t, "User:alice", cl.Principal())
		useCluster(t, cl)

		_, err = dialSecure(t, addr, Security{TLSCAFile: pki.CAFile}) // no client certificate
		require.Error(t, err)
	})

	t.Run("sasl_ssl fallback from -PLUS", func(t *testing.T) {
		addr := newSecureCluster(t, kfake.TLS(pki.ServerTLS(false)), kfake.EnableSASL(),
			kfake.Superuser(MechScramSHA256, "admin", "admin-secret"))
		sec := Security{TLSCAFile: pki.CAFile, User: "admin", Password: "admin-secret"}
		ms := sec.mechanisms(&peerCerts{})
		require.Len(t, ms, 2)
		require.Equal(t, MechScramSHA256Plus, ms[0].Name())
		require.Equal(t, MechScramSHA256, ms[1].Name())
		cl, err := dialSecure(t, addr, sec)
		require.NoError(t, err)
		require.Equal(t, "SASL_SSL", cl.Options().Security.Protocol())
		useCluster(t, cl)

		// An explicit -PLUS does not fall back: kfake lacks it.
		_, err = dialSecure(t, addr, Security{TLSCAFile: pki.CAFile, Mechanism: MechScramSHA256Plus, User: "admin", Password: "admin-secret"})
		require.Error(t, err)
		require.ErrorIs(t, err, kerr.UnsupportedSaslMechanism)
	})
}

// TestSecurityValidate covers the refusals made before dialing, and that
// they name the setting at fault.
func TestSecurityValidate(t *testing.T) {
	for _, tc := range []struct {
		sec  Security
		want string
	}{
		{Security{Mechanism: "PLAIN"}, "needs a user"},
		{Security{User: "u"}, "no password"},
		{Security{User: "u", Password: "p", Mechanism: "GSSAPI"}, "not supported"},
		{Security{User: "u", Password: "p", Mechanism: "SCRAM-SHA-1"}, "unknown SASL mechanism"},
		{Security{User: "u", Password: "p", Mechanism: MechScramSHA512Plus}, "needs TLS"},
		{Security{TLSCertFile: "c.pem"}, "needs its key"},
		{Security{TLSKeyFile: "k.pem"}, "needs its certificate"},
	} {
		err := tc.sec.Validate()
		require.ErrorContains(t, err, tc.want, "%+v", tc.sec)
		require.ErrorIs(t, err, ErrInvalidArgument)
	}
	require.NoError(t, Security{}.Validate())
	require.NoError(t, Security{User: "u", Password: "p", TLS: true, Mechanism: "scram-sha-512-plus"}.Validate())

	// Unreadable files are named by their flag.
	sec := Security{TLSCAFile: "/nonexistent/ca.pem"}
	sec.setLabel("TLSCAFile", "--tls-ca")
	_, err := Dial(testCtx(t), Options{Addr: "127.0.0.1:1", Security: sec})
	require.ErrorContains(t, err, "--tls-ca: open /nonexistent/ca.pem")
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("hello"), 0o600))
	_, err = Security{TLSCAFile: notPEM}.TLSConfig()
	require.ErrorContains(t, err, "holds no PEM certificate")
}

// TestSecurityString never shows the password.
func TestSecurityString(t *testing.T) {
	s := Security{User: "alice", Password: "hunter2", TLS: true}
	require.Equal(t, "SASL_SSL, SCRAM-SHA-256, user alice", s.String())
	require.NotContains(t, s.String(), "hunter2")
	require.Equal(t, "SSL", Security{TLSCAFile: "x"}.Protocol())
	require.Equal(t, "SASL_PLAINTEXT", Security{User: "a"}.Protocol())
	require.Equal(t, "PLAINTEXT", Security{}.Protocol())
}
