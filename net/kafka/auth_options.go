package kafka

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/moonmq/moonmq/net/auth"
)

// SASLOptions configure SASL authentication (AuthOptions.SASL).
type SASLOptions struct {
	// Mechanisms enabled (auth.Mechanisms' names); empty on a SASL
	// listener is SCRAM-SHA-256 and SCRAM-SHA-512.
	Mechanisms []string
	// Credentials looks users' SCRAM credentials up (the controller).
	Credentials auth.Credentials
	// AllowPlainWithoutTLS offers PLAIN on SASL_PLAINTEXT, where the
	// password crosses the network in clear.
	AllowPlainWithoutTLS bool
	// Lockout locks out an IP after repeated failed authentications.
	Lockout auth.LockoutOptions
	// FakeSaltKey keys the salts unknown users are shown (auth.Config).
	FakeSaltKey []byte
}

// DefaultSASLMechanisms are enabled on a SASL listener that names none.
var DefaultSASLMechanisms = []string{auth.MechScramSHA256, auth.MechScramSHA512}

func (a *AuthOptions) ensureSASLDefaults() {
	if a.SecurityProtocol.SASL() && len(a.SASL.Mechanisms) == 0 {
		a.SASL.Mechanisms = slices.Clone(DefaultSASLMechanisms)
	}
	a.SASL.Lockout.EnsureDefaults()
}

// ValidateSASL reports SASL settings that cannot work with the security
// protocol, naming the flag to change.
func (a AuthOptions) ValidateSASL() error {
	if err := a.SASL.Lockout.Validate(); err != nil {
		return err
	}
	p, err := ParseSecurityProtocol(string(a.SecurityProtocol))
	if err != nil {
		return fmt.Errorf("security-protocol %w", err)
	}
	if !p.SASL() {
		if len(a.SASL.Mechanisms) > 0 {
			return fmt.Errorf("sasl-mechanisms %s: the listener does not use SASL (set --security-protocol %s or %s)",
				strings.Join(a.SASL.Mechanisms, ","), ProtocolSASLPlaintext, ProtocolSASLSSL)
		}
		return nil
	}
	for _, m := range a.SASL.Mechanisms {
		if !slices.Contains(auth.Mechanisms, m) {
			return fmt.Errorf("sasl-mechanisms: unknown mechanism %q (want %s)", m, strings.Join(auth.Mechanisms, ", "))
		}
		if !p.TLS() && auth.NeedsTLS(m) {
			return fmt.Errorf("sasl-mechanisms: %s needs TLS; use --security-protocol %s", m, ProtocolSASLSSL)
		}
		if !p.TLS() && m == auth.MechPlain && !a.SASL.AllowPlainWithoutTLS {
			return fmt.Errorf("sasl-mechanisms: PLAIN over %s sends passwords in clear; use --security-protocol %s, or --allow-plain-without-tls",
				ProtocolSASLPlaintext, ProtocolSASLSSL)
		}
	}
	return nil
}

// saslServer builds the listener's SASL server and lockout (nil, nil when
// the listener does not use SASL).
func (a *AuthOptions) saslServer() (*auth.Server, *auth.Lockout, error) {
	if !a.SecurityProtocol.SASL() {
		return nil, nil, nil
	}
	if a.SASL.Credentials == nil && slices.ContainsFunc(a.SASL.Mechanisms, func(m string) bool { return m != auth.MechExternal }) {
		return nil, nil, errors.New("kafka: SASL: no credentials source for SCRAM/PLAIN users")
	}
	srv, err := auth.NewServer(auth.Config{Mechanisms: a.SASL.Mechanisms, Credentials: a.SASL.Credentials, FakeSaltKey: a.SASL.FakeSaltKey})
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: SASL: %w", err)
	}
	lock, err := auth.NewLockout(a.SASL.Lockout)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: %w", err)
	}
	return srv, lock, nil
}
