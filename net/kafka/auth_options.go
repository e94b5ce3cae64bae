package kafka

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/moonmq/moonmq/net/auth"
)

// Security protocols of a listener (Kafka's security.protocol).
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// AuthOptions is how the listener authenticates its clients.
type AuthOptions struct {
	// SecurityProtocol is PLAINTEXT (the default), SSL, SASL_PLAINTEXT or
	// SASL_SSL. On the SASL ones a connection must authenticate with
	// SaslHandshake and SaslAuthenticate before any other request.
	SecurityProtocol string
	// TLSConfig is the listener's TLS configuration on SSL and SASL_SSL.
	// SCRAM -PLUS's tls-server-end-point binding hashes the certificate
	// it presents when the connection does not record it (conn.tlsLeaf).
	TLSConfig *tls.Config
	// SASL configures the mechanisms of a SASL_* listener.
	SASL SASLOptions
}

// SASLOptions configure SASL authentication.
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

// SASLEnabled reports whether the listener requires SASL authentication.
func (a AuthOptions) SASLEnabled() bool {
	return a.SecurityProtocol == ProtocolSASLPlaintext || a.SecurityProtocol == ProtocolSASLSSL
}

// TLSEnabled reports whether the listener speaks TLS.
func (a AuthOptions) TLSEnabled() bool {
	return a.SecurityProtocol == ProtocolSSL || a.SecurityProtocol == ProtocolSASLSSL
}

func (a *AuthOptions) ensureDefaults() {
	if a.SecurityProtocol == "" {
		a.SecurityProtocol = ProtocolPlaintext
	}
	if a.SASLEnabled() && len(a.SASL.Mechanisms) == 0 {
		a.SASL.Mechanisms = slices.Clone(DefaultSASLMechanisms)
	}
	a.SASL.Lockout.EnsureDefaults()
}

// validate reports settings that cannot work, naming the flag to change.
func (a *AuthOptions) validate() error {
	switch a.SecurityProtocol {
	case "", ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
	default:
		return fmt.Errorf("security-protocol %q: want %s, %s, %s or %s", a.SecurityProtocol,
			ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL)
	}
	if err := a.SASL.Lockout.Validate(); err != nil {
		return err
	}
	if a.TLSEnabled() && a.TLSConfig == nil {
		// Never serve a listener that claims TLS in clear.
		return fmt.Errorf("security-protocol %s needs TLS material (--tls-cert and --tls-key)", a.SecurityProtocol)
	}
	if !a.SASLEnabled() {
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
		if !a.TLSEnabled() && auth.NeedsTLS(m) {
			return fmt.Errorf("sasl-mechanisms: %s needs TLS; use --security-protocol %s", m, ProtocolSASLSSL)
		}
		if !a.TLSEnabled() && m == auth.MechPlain && !a.SASL.AllowPlainWithoutTLS {
			return fmt.Errorf("sasl-mechanisms: PLAIN over %s sends passwords in clear; use --security-protocol %s, or --allow-plain-without-tls",
				ProtocolSASLPlaintext, ProtocolSASLSSL)
		}
	}
	return nil
}

// saslServer builds the listener's SASL server and lockout (nil, nil when
// the listener does not use SASL).
func (a *AuthOptions) saslServer() (*auth.Server, *auth.Lockout, error) {
	if !a.SASLEnabled() {
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
