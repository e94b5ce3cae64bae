package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/net/auth"
	"github.com/moonmq/moonmq/net/kafka"
)

// BootstrapUser is a user --bootstrap-user creates at start if it has no
// SCRAM credential yet, so a secured cluster can be reached the first
// time. Its String never shows the password.
type BootstrapUser struct {
	Name, Password string
}

func (u BootstrapUser) String() string { return u.Name + ":<redacted>" }

// ParseBootstrapUser parses NAME:PASSWORD (the password may contain ':').
func ParseBootstrapUser(s string) (BootstrapUser, error) {
	name, pw, ok := strings.Cut(s, ":")
	switch {
	case !ok:
		return BootstrapUser{}, errors.New("want NAME:PASSWORD")
	case name == "":
		return BootstrapUser{}, errors.New("empty user name (want NAME:PASSWORD)")
	case pw == "":
		return BootstrapUser{}, fmt.Errorf("empty password for user %q (want NAME:PASSWORD)", name)
	case strings.ContainsAny(name, "\x00"):
		return BootstrapUser{}, errors.New("user name contains NUL")
	}
	return BootstrapUser{Name: name, Password: pw}, nil
}

// BootstrapIterations is the PBKDF2 iteration count of bootstrap users'
// credentials.
const BootstrapIterations = 8192

// scramStore is the controller's SCRAM credential store (the contract the
// security metadata implements on *controller.Controller). The node looks
// it up at run time, so it builds before the store exists.
type scramStore interface {
	ScramCredential(user, mechanism string) (metadata.ScramCredential, bool)
	AlterScramCredentials(ctx context.Context, upserts []metadata.ScramCredential, deletions []metadata.ScramDeletion) []error
}

// saslCredentials fills in what the Kafka listener's SASL needs from the
// node: the controller as the credentials source (unless the
// configuration brings its own, as tests do) and the key of unknown
// users' salts, kept in the data directory so they stay the same across
// restarts.
func saslCredentials(o *kafka.AuthOptions, ctrl auth.Credentials, dataDir string) error {
	if p, err := kafka.ParseSecurityProtocol(string(o.SecurityProtocol)); err != nil || !p.SASL() {
		return nil // Validate refuses a bad protocol
	}
	if o.SASL.Credentials == nil {
		o.SASL.Credentials = ctrl
	}
	if o.SASL.FakeSaltKey == nil {
		key, err := loadOrCreateKey(filepath.Join(dataDir, saltKeyFile))
		if err != nil {
			return err
		}
		o.SASL.FakeSaltKey = key
	}
	return nil
}

// saltKeyFile holds the key of the salts unknown users are shown.
const saltKeyFile = "sasl-unknown-user.key"

func loadOrCreateKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err == nil && len(key) >= 16 {
		return key, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("SASL: reading %s: %w", path, err)
	}
	key = make([]byte, 32)
	_, _ = rand.Read(key)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, key, 0o600); err != nil {
		return nil, fmt.Errorf("SASL: writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("SASL: %w", err)
	}
	return key, nil
}

// bootstrapUsers creates each user's SCRAM-SHA-256 and SCRAM-SHA-512
// credentials if the user has neither, with a random salt, one credential
// per change (a change may name a user once). It retries while the
// metadata cannot take a change (an election), for bootstrapTimeout at
// most: the listener waits for it, so a client started with the node can
// log in at once. Passwords are not logged.
func bootstrapUsers(ctx context.Context, store scramStore, users []BootstrapUser, log *slog.Logger) error {
	if len(users) == 0 {
		return nil
	}
	var upserts []metadata.ScramCredential
	var names []string
	for _, u := range users {
		_, has256 := store.ScramCredential(u.Name, metadata.ScramSHA256)
		_, has512 := store.ScramCredential(u.Name, metadata.ScramSHA512)
		if has256 || has512 {
			log.Info("bootstrap user exists already; its credentials are left as they are", "user", u.Name)
			continue
		}
		for _, mech := range []string{metadata.ScramSHA256, metadata.ScramSHA512} {
			salt := make([]byte, 32)
			_, _ = rand.Read(salt)
			c, err := metadata.ScramCredentialFromPassword(u.Name, mech, u.Password, salt, BootstrapIterations)
			if err != nil {
				return fmt.Errorf("bootstrap-user %s: %w", u.Name, err)
			}
			upserts = append(upserts, c)
		}
		names = append(names, u.Name)
	}
	if len(upserts) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, bootstrapTimeout)
	defer cancel()
	for _, c := range upserts {
		for {
			err := errors.Join(store.AlterScramCredentials(ctx, []metadata.ScramCredential{c}, nil)...)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("bootstrap-user %s: creating its %s credential: %w", c.User, c.Mechanism, err)
			case <-time.After(200 * time.Millisecond):
				log.Debug("bootstrap user not created yet; retrying", "user", c.User, "mechanism", c.Mechanism, "err", err)
			}
		}
	}
	log.Info("created bootstrap users", "users", names)
	return nil
}

// bootstrapTimeout bounds how long the start waits to create the bootstrap
// users.
const bootstrapTimeout = 15 * time.Second
