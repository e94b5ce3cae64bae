package node

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/moonmq/moonmq/cluster/controller"
	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/net/auth"
	"github.com/moonmq/moonmq/net/kafka"
)

// fakeStore is a SCRAM credential store that refuses changes naming a
// user twice (as the controller does) and fails the first few changes
// (an election).
type fakeStore struct {
	creds    auth.StaticCredentials
	failures int
	changes  int
}

func (f *fakeStore) ScramCredential(user, mech string) (metadata.ScramCredential, bool) {
	return f.creds.ScramCredential(user, mech)
}

func (f *fakeStore) AlterScramCredentials(_ context.Context, ups []metadata.ScramCredential, _ []metadata.ScramDeletion) []error {
	f.changes++
	if f.failures > 0 {
		f.failures--
		return []error{errors.New("not the controller")}
	}
	seen := map[string]bool{}
	for _, c := range ups {
		if seen[c.User] {
			return []error{errors.New("duplicate user")}
		}
		seen[c.User] = true
	}
	f.creds = append(f.creds, ups...)
	return nil
}

func TestBootstrapUsers(t *testing.T) {
	existing, err := metadata.ScramCredentialFromPassword("old", metadata.ScramSHA512, "old-pw", []byte("salt"), 4096)
	require.NoError(t, err)
	store := &fakeStore{creds: auth.StaticCredentials{existing}, failures: 2}
	users := []BootstrapUser{{Name: "admin", Password: "admin-secret"}, {Name: "old", Password: "new-pw"}}
	require.NoError(t, bootstrapUsers(context.Background(), store, users, slog.New(slog.DiscardHandler)))

	// admin has both mechanisms, with random salts and 8192 iterations;
	// old keeps its credential and gets no other.
	a256, ok := store.ScramCredential("admin", metadata.ScramSHA256)
	require.True(t, ok)
	a512, ok := store.ScramCredential("admin", metadata.ScramSHA512)
	require.True(t, ok)
	require.EqualValues(t, BootstrapIterations, a256.Iterations)
	require.NotEqual(t, a256.Salt, a512.Salt)
	_, ok = store.ScramCredential("old", metadata.ScramSHA256)
	require.False(t, ok)
	require.Len(t, store.creds, 3)

	// The credentials verify the password (PLAIN checks it the same way).
	srv, err := auth.NewServer(auth.Config{Mechanisms: []string{auth.MechPlain}, Credentials: store.creds})
	require.NoError(t, err)
	sess, err := srv.Start(auth.MechPlain, auth.ConnInfo{AllowPlainWithoutTLS: true})
	require.NoError(t, err)
	_, _, err = sess.Step([]byte("\x00admin\x00admin-secret"))
	require.NoError(t, err)

	// A second start changes nothing.
	before := store.changes
	require.NoError(t, bootstrapUsers(context.Background(), store, users, slog.New(slog.DiscardHandler)))
	require.Equal(t, before, store.changes)

	// A store that never takes the change: the error names the user, not the password.
	never := &fakeStore{failures: 1 << 30}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = bootstrapUsers(ctx, never, users[:1], slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "bootstrap-user admin")
	require.NotContains(t, err.Error(), "admin-secret")
}

func TestParseBootstrapUser(t *testing.T) {
	u, err := ParseBootstrapUser("admin:pa:ss")
	require.NoError(t, err)
	require.Equal(t, BootstrapUser{Name: "admin", Password: "pa:ss"}, u)
	require.Equal(t, "admin:<redacted>", u.String())
	for _, bad := range []string{"admin", ":pw", "admin:"} {
		_, err := ParseBootstrapUser(bad)
		require.Error(t, err, bad)
	}
}

func TestSASLCredentials(t *testing.T) {
	dir := t.TempDir()
	o := kafka.AuthOptions{SecurityProtocol: kafka.ProtocolSASLPlaintext}
	store := &fakeStore{}
	require.NoError(t, saslCredentials(&o, store, dir))
	require.Same(t, store, o.SASL.Credentials.(*fakeStore))
	require.Len(t, o.SASL.FakeSaltKey, 32)
	// The key survives a restart.
	o2 := kafka.AuthOptions{SecurityProtocol: kafka.ProtocolSASLPlaintext}
	require.NoError(t, saslCredentials(&o2, store, dir))
	require.Equal(t, o.SASL.FakeSaltKey, o2.SASL.FakeSaltKey)
	require.FileExists(t, filepath.Join(dir, saltKeyFile))
	// Nothing to do without SASL.
	o3 := kafka.AuthOptions{SecurityProtocol: kafka.ProtocolSSL}
	require.NoError(t, saslCredentials(&o3, store, dir))
	require.Nil(t, o3.SASL.Credentials)
}

// A node started with SASL and a bootstrap user serves that user, with
// the credentials in the controller's metadata, across a restart.
func TestOpenWithBootstrapUser(t *testing.T) {
	if _, ok := any((*controller.Controller)(nil)).(scramStore); !ok {
		t.Skip("this build's controller stores no SCRAM credentials (the security metadata is a separate change)")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := testConfig(t, dir)
	cfg.SecurityProtocol = kafka.ProtocolSASLPlaintext
	cfg.BootstrapUsers = []BootstrapUser{{Name: "admin", Password: "admin-secret"}}
	for round := 0; round < 2; round++ {
		n, err := Open(ctx, cfg)
		require.NoError(t, err)
		select {
		case <-n.Ready():
		case <-ctx.Done():
			t.Fatal("never ready")
		}
		for pw, ok := range map[string]bool{"admin-secret": true, "wrong": false} {
			cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()),
				kgo.SASL(scram.Auth{User: "admin", Pass: pw}.AsSha512Mechanism()), kgo.RequestRetries(0))
			require.NoError(t, err)
			err = cl.Ping(ctx)
			cl.Close()
			if ok {
				require.NoError(t, err, "round %d", round)
			} else {
				require.ErrorIs(t, err, kerr.SaslAuthenticationFailed, "round %d", round)
			}
		}
		require.NoError(t, n.Shutdown(ctx))
		// The second start finds the user and leaves it alone.
		cfg.BootstrapUsers[0].Password = "another"
	}
}
