// SASL (this file, scram.go, plain.go, external.go) and the per-IP lockout
// (lockout.go) of package auth, whose package comment is in tls.go.
//
// The SASL mechanisms are state machines with no I/O: the Kafka front end
// feeds each client message to Session.Step and sends back what it
// returns, so every rule of an exchange is testable without a socket.
//
// Invariants: a server never stores or sees a SCRAM password (only the
// salted StoredKey/ServerKey of metadata.ScramCredential; PLAIN derives
// from the password it is sent and forgets it); secrets are compared in
// constant time; a failed exchange returns ErrAuthFailed with a message
// that is the same for a wrong password and an unknown user, and an
// unknown user gets a salt and iteration count as stable as a real one's,
// so the exchange does not tell which users exist; every length in a
// client message is bounded (MaxMessageSize) before it is parsed.

package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// SASL mechanism names, as clients send them in SaslHandshake.
const (
	MechPlain           = "PLAIN"
	MechScramSHA256     = "SCRAM-SHA-256"
	MechScramSHA512     = "SCRAM-SHA-512"
	MechScramSHA256Plus = "SCRAM-SHA-256-PLUS"
	MechScramSHA512Plus = "SCRAM-SHA-512-PLUS"
	MechExternal        = "EXTERNAL"
)

// Mechanisms are the mechanisms this package implements, in the order a
// server lists them (strongest first).
var Mechanisms = []string{MechScramSHA512Plus, MechScramSHA256Plus, MechScramSHA512, MechScramSHA256, MechPlain, MechExternal}

// MaxMessageSize bounds one client SASL message. SCRAM messages are a few
// hundred bytes and PLAIN's is three short strings; Kafka bounds SASL
// frames at 512 KiB for GSSAPI tokens, which MoonMQ does not speak.
const MaxMessageSize = 16 << 10

// Errors of an exchange. A failure the client caused is ErrAuthFailed
// (SASL_AUTHENTICATION_FAILED); its text is safe to send to the client.
var (
	ErrAuthFailed           = errors.New("authentication failed")
	ErrUnsupportedMechanism = errors.New("unsupported SASL mechanism")
)

// Credentials looks up a user's stored SCRAM credential for one mechanism
// (SCRAM-SHA-256 or SCRAM-SHA-512). The cluster's controller implements
// it from the replicated metadata.
type Credentials interface {
	ScramCredential(user, mechanism string) (metadata.ScramCredential, bool)
}

// StaticCredentials is a fixed set of credentials, for tests and tools.
type StaticCredentials []metadata.ScramCredential

// ScramCredential implements Credentials.
func (s StaticCredentials) ScramCredential(user, mechanism string) (metadata.ScramCredential, bool) {
	for _, c := range s {
		if c.User == user && c.Mechanism == mechanism {
			return c, true
		}
	}
	return metadata.ScramCredential{}, false
}

// Config is the server side of SASL, shared by all connections.
type Config struct {
	// Mechanisms are the enabled mechanisms (names above).
	Mechanisms []string
	// Credentials verifies SCRAM and PLAIN users; required unless only
	// EXTERNAL is enabled.
	Credentials Credentials
	// FakeSaltKey keys the salt an unknown user is shown, so the same
	// unknown name gets the same salt every time. Give every node of a
	// cluster the same secret, kept across restarts, or a name's salt
	// changing between nodes or restarts tells that it is not a user.
	// Nil: a random key for this process.
	FakeSaltKey []byte
	// CertPrincipal maps a verified client certificate to a principal for
	// EXTERNAL; nil is "User:" + the subject's CN.
	CertPrincipal func(*x509.Certificate) (string, error)
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	if len(c.Mechanisms) == 0 {
		return errors.New("no SASL mechanisms enabled")
	}
	needCreds := false
	for _, m := range c.Mechanisms {
		if !slices.Contains(Mechanisms, m) {
			return fmt.Errorf("%w %q (want one of %s)", ErrUnsupportedMechanism, m, strings.Join(Mechanisms, ", "))
		}
		needCreds = needCreds || m != MechExternal
	}
	if needCreds && c.Credentials == nil {
		return errors.New("SASL mechanisms other than EXTERNAL need a credentials source")
	}
	return nil
}

// ParseMechanisms parses a comma-separated mechanism list (spaces allowed,
// names case-insensitive), rejecting unknown and repeated names.
func ParseMechanisms(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		m := strings.ToUpper(strings.TrimSpace(f))
		if m == "" {
			continue
		}
		if !slices.Contains(Mechanisms, m) {
			return nil, fmt.Errorf("unknown SASL mechanism %q (want %s)", strings.TrimSpace(f), strings.Join(Mechanisms, ", "))
		}
		if slices.Contains(out, m) {
			return nil, fmt.Errorf("SASL mechanism %s listed twice", m)
		}
		out = append(out, m)
	}
	return out, nil
}

// NeedsTLS reports whether a mechanism only works over TLS (channel
// binding, a client certificate).
func NeedsTLS(mechanism string) bool {
	switch mechanism {
	case MechScramSHA256Plus, MechScramSHA512Plus, MechExternal:
		return true
	}
	return false
}

// Server starts SASL exchanges.
type Server struct {
	cfg     Config
	fakeKey []byte
	nonce   func() string // the server's nonce part; tests fix it
}

// NewServer checks cfg and returns a server.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	key := cfg.FakeSaltKey
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key) // never fails (crypto/rand panics instead)
	}
	return &Server{cfg: cfg, fakeKey: key, nonce: randomNonce}, nil
}

// ConnInfo is what an exchange needs to know of its connection.
type ConnInfo struct {
	// TLS is the connection's TLS state, nil on a plaintext connection.
	TLS *tls.ConnectionState
	// ServerCert is the certificate this server presented on the
	// connection (tls-server-end-point binds to it); nil if unknown.
	ServerCert *x509.Certificate
	// CertPrincipal is the principal the client's verified certificate
	// maps to (--tls-principal-mapping), which EXTERNAL takes; empty:
	// Config.CertPrincipal or the subject's CN decides.
	CertPrincipal string
	// AllowPlainWithoutTLS lets PLAIN run on a plaintext connection.
	AllowPlainWithoutTLS bool
}

// Offered is the enabled mechanisms usable on a connection, in the
// configured order: the -PLUS ones and EXTERNAL need TLS (EXTERNAL a
// verified client certificate), PLAIN needs TLS unless allowed without.
func (s *Server) Offered(ci ConnInfo) []string {
	out := make([]string, 0, len(s.cfg.Mechanisms))
	for _, m := range s.cfg.Mechanisms {
		if s.usable(m, ci) {
			out = append(out, m)
		}
	}
	return out
}

func (s *Server) usable(m string, ci ConnInfo) bool {
	switch m {
	case MechScramSHA256Plus, MechScramSHA512Plus:
		return ci.TLS != nil
	case MechExternal:
		return ci.TLS != nil && len(ci.TLS.VerifiedChains) > 0
	case MechPlain:
		return ci.TLS != nil || ci.AllowPlainWithoutTLS
	}
	return slices.Contains(s.cfg.Mechanisms, m)
}

// offersPlus reports whether the server offers channel binding on this
// connection: then a SCRAM client that says it could bind but believes
// the server cannot ("y") has been downgraded by someone in between.
func (s *Server) offersPlus(ci ConnInfo) bool {
	return ci.TLS != nil && (slices.Contains(s.cfg.Mechanisms, MechScramSHA256Plus) || slices.Contains(s.cfg.Mechanisms, MechScramSHA512Plus))
}

// Session is one exchange. Step takes the client's next message and
// returns the reply to send; done is true once the exchange is over (the
// reply, possibly empty, is the last). After done with no error,
// Principal is who the client proved to be ("User:<name>").
type Session interface {
	Step(msg []byte) (reply []byte, done bool, err error)
	Principal() string
	// User is the name the client claimed, for logs ("" before it said).
	User() string
	Mechanism() string
}

// Start begins an exchange with mechanism on a connection. A mechanism not
// enabled, or not usable on this connection, is ErrUnsupportedMechanism.
func (s *Server) Start(mechanism string, ci ConnInfo) (Session, error) {
	if !slices.Contains(s.cfg.Mechanisms, mechanism) || !s.usable(mechanism, ci) {
		return nil, fmt.Errorf("%w %q", ErrUnsupportedMechanism, mechanism)
	}
	switch mechanism {
	case MechPlain:
		return &plainSession{s: s}, nil
	case MechExternal:
		return &externalSession{s: s, ci: ci}, nil
	case MechScramSHA256, MechScramSHA512:
		return newScramSession(s, mechanism, mechanism, false, ci), nil
	case MechScramSHA256Plus:
		return newScramSession(s, mechanism, MechScramSHA256, true, ci), nil
	case MechScramSHA512Plus:
		return newScramSession(s, mechanism, MechScramSHA512, true, ci), nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnsupportedMechanism, mechanism)
}

// fakeCredential is what an unknown user is shown: a salt derived from the
// name with the server's key, so it is the same at every attempt, and the
// iterations --bootstrap-user gives real users. Its keys are random, so
// no proof can match them.
func (s *Server) fakeCredential(user, mechanism string) metadata.ScramCredential {
	m := hmac.New(sha256.New, s.fakeKey)
	m.Write([]byte(mechanism))
	m.Write([]byte{0})
	m.Write([]byte(user))
	salt := m.Sum(nil)
	size := metadata.ScramHash(mechanism)().Size()
	stored, server := make([]byte, size), make([]byte, size)
	_, _ = rand.Read(stored)
	_, _ = rand.Read(server)
	return metadata.ScramCredential{User: user, Mechanism: mechanism, Salt: salt[:16], StoredKey: stored, ServerKey: server, Iterations: FakeIterations}
}

// randomNonce is 24 random bytes, base64url: printable and without ','.
func randomNonce() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// FakeIterations is the iteration count shown for an unknown user, the
// count --bootstrap-user gives real ones.
const FakeIterations = 8192

// failed is the error of a refused exchange: ErrAuthFailed with the
// reason for the log. Unless shown, the client is told only
// ClientMessage's generic words.
type failed struct {
	reason string
	shown  bool // the reason says nothing of users or passwords: tell the client
}

func (f *failed) Error() string { return "authentication failed: " + f.reason }
func (f *failed) Unwrap() error { return ErrAuthFailed }

// fail is a refusal whose reason only the log sees (wrong password,
// unknown user, bad proof).
func fail(format string, args ...any) error { return &failed{reason: fmt.Sprintf(format, args...)} }

// refuse is a refusal whose reason the client may see: a malformed
// message, a channel binding that does not match, a downgrade.
func refuse(format string, args ...any) error {
	return &failed{reason: fmt.Sprintf(format, args...), shown: true}
}

// ClientMessage is what a client is told about a failed exchange: for a
// wrong password, an unknown user or a forged proof alike the same words
// (Kafka's), so the answer does not say which; a malformed message or a
// refused channel binding gets its reason.
func ClientMessage(mechanism string, err error) string {
	var f *failed
	if errors.As(err, &f) && f.shown {
		return fmt.Sprintf("Authentication failed with SASL mechanism %s: %s", mechanism, f.reason)
	}
	return fmt.Sprintf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", mechanism)
}
