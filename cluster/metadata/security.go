package metadata

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
)

// Sentinel errors of the security metadata (users, ACLs, quotas).
var (
	// ErrResourceNotFound: a SCRAM credential to delete does not exist
	// (RESOURCE_NOT_FOUND).
	ErrResourceNotFound = errors.New("resource not found")
	// ErrUnsupportedSaslMechanism: a SCRAM credential names a mechanism
	// other than SCRAM-SHA-256/512 (UNSUPPORTED_SASL_MECHANISM).
	ErrUnsupportedSaslMechanism = errors.New("unsupported SASL mechanism")
)

// ScramCredential is what the cluster stores of a user's SCRAM password
// (RFC 5802): never the password, only the salted keys a server needs to
// verify a client and to prove itself.
type ScramCredential struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"` // SCRAM-SHA-256 or SCRAM-SHA-512
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
	Iterations int32  `json:"iterations"`
}

// ScramDeletion removes one mechanism's credential of a user.
type ScramDeletion struct {
	User      string
	Mechanism string
}

// Quota entity types (Kafka's ClientQuotaEntity keys).
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
	QuotaEntityIP       = "ip"
)

// QuotaEntityPart is one component of a quota entity: Name nil is the
// type's default entity (Kafka's "<default>").
type QuotaEntityPart struct {
	Type string  `json:"type"`
	Name *string `json:"name,omitempty"`
}

// ClientQuota is the quota values set for one entity (user, client-id,
// user and client-id, or ip), keyed by Kafka's names: producer_byte_rate,
// consumer_byte_rate, request_percentage, connection_creation_rate.
type ClientQuota struct {
	Entity []QuotaEntityPart  `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// ClientQuotaAlteration sets (Remove false) or removes values of one
// entity's quota.
type ClientQuotaAlteration struct {
	Entity []QuotaEntityPart
	Ops    []ClientQuotaOp
}

// ClientQuotaOp sets Key to Value, or removes Key.
type ClientQuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// Scram mechanisms a credential may be stored for.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// ScramHash is the hash function of a SCRAM mechanism, nil for an unknown
// one.
func ScramHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	return nil
}

// MinScramIterations is the fewest PBKDF2 iterations a credential may use
// (Kafka's minimum for SCRAM-SHA-256/512).
const MinScramIterations = 4096

// MaxScramIterations bounds what a client may ask for (Kafka's maximum):
// every login of the user costs that many HMACs on the broker.
const MaxScramIterations = 16384

// NewScramCredential derives the stored form of a SCRAM credential from
// the salted password (Hi(password, salt, iterations) of RFC 5802, which
// AlterUserScramCredentials carries instead of the password):
// StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
// ServerKey = HMAC(SaltedPassword, "Server Key").
func NewScramCredential(user, mechanism string, salt, saltedPassword []byte, iterations int32) (ScramCredential, error) {
	h := ScramHash(mechanism)
	switch {
	case h == nil:
		return ScramCredential{}, fmt.Errorf("%w: %q (want %s or %s)", ErrUnsupportedSaslMechanism, mechanism, ScramSHA256, ScramSHA512)
	case iterations < MinScramIterations || iterations > MaxScramIterations:
		return ScramCredential{}, fmt.Errorf("%w: %d iterations (want %d to %d)", ErrInvalidRequest, iterations, MinScramIterations, MaxScramIterations)
	case user == "":
		return ScramCredential{}, fmt.Errorf("%w: empty user name", ErrInvalidRequest)
	case len(salt) == 0 || len(saltedPassword) == 0:
		return ScramCredential{}, fmt.Errorf("%w: empty salt or salted password", ErrInvalidRequest)
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(saltedPassword, "Client Key")
	sh := h()
	sh.Write(clientKey)
	return ScramCredential{
		User: user, Mechanism: mechanism, Salt: append([]byte(nil), salt...),
		StoredKey: sh.Sum(nil), ServerKey: mac(saltedPassword, "Server Key"), Iterations: iterations,
	}, nil
}

// ScramCredentialFromPassword derives a credential from a password (the
// broker's --bootstrap-user), with Hi = PBKDF2-HMAC.
func ScramCredentialFromPassword(user, mechanism, password string, salt []byte, iterations int32) (ScramCredential, error) {
	h := ScramHash(mechanism)
	if h == nil {
		return ScramCredential{}, fmt.Errorf("%w: %q", ErrUnsupportedSaslMechanism, mechanism)
	}
	salted, err := pbkdf2.Key(h, password, salt, int(iterations), h().Size())
	if err != nil {
		return ScramCredential{}, fmt.Errorf("scram: %w", err)
	}
	return NewScramCredential(user, mechanism, salt, salted, iterations)
}
