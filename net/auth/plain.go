package auth

import (
	"bytes"
	"crypto/subtle"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// PLAIN (RFC 4616): one client message, authzid NUL authcid NUL password.
// The password is checked against the user's stored SCRAM credential
// (SCRAM-SHA-256, else SCRAM-SHA-512) by deriving the StoredKey the
// password would give with the stored salt and iterations, so PLAIN needs
// no other copy of the password. It sends the password itself, so it is
// offered over TLS only unless the operator allows otherwise.

type plainSession struct {
	s         *Server
	user      string
	principal string
	done      bool
}

func (p *plainSession) Principal() string { return p.principal }
func (p *plainSession) User() string      { return p.user }
func (p *plainSession) Mechanism() string { return MechPlain }

// PlainMessage is a parsed PLAIN message.
type PlainMessage struct {
	AuthzID, User, Password string
}

// ParsePlain parses a PLAIN message (RFC 4616 2).
func ParsePlain(msg []byte) (PlainMessage, error) {
	if len(msg) > MaxMessageSize {
		return PlainMessage{}, refuse("malformed PLAIN message: %d bytes", len(msg))
	}
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return PlainMessage{}, refuse("malformed PLAIN message: want authzid NUL user NUL password")
	}
	m := PlainMessage{AuthzID: string(parts[0]), User: string(parts[1]), Password: string(parts[2])}
	switch {
	case m.User == "":
		return m, refuse("malformed PLAIN message: user name not specified")
	case m.Password == "":
		return m, refuse("malformed PLAIN message: password not specified")
	}
	return m, nil
}

func (p *plainSession) Step(msg []byte) ([]byte, bool, error) {
	if p.done {
		return nil, true, refuse("PLAIN exchange already finished")
	}
	p.done = true
	m, err := ParsePlain(msg)
	if err != nil {
		return nil, true, err
	}
	p.user = m.User
	if m.AuthzID != "" && m.AuthzID != m.User {
		return nil, true, refuse("authorization id %q differs from the user name", m.AuthzID)
	}
	cred, ok := p.s.cfg.Credentials.ScramCredential(m.User, metadata.ScramSHA256)
	if !ok {
		cred, ok = p.s.cfg.Credentials.ScramCredential(m.User, metadata.ScramSHA512)
	}
	if !ok {
		// Spend the time a real check would, so a timing does not tell
		// whether the user exists.
		cred = p.s.fakeCredential(m.User, metadata.ScramSHA256)
	}
	if !checkPassword(cred, m.Password) || !ok {
		if !ok {
			return nil, true, fail("unknown user %q", m.User)
		}
		return nil, true, fail("wrong password for user %q", m.User)
	}
	p.principal = "User:" + m.User
	return nil, true, nil
}

// checkPassword derives the StoredKey password gives under cred's salt
// and iterations and compares it with cred's in constant time. The
// derivation runs whatever cred is (a fake one for an unknown user too),
// so the time taken does not tell them apart.
func checkPassword(cred metadata.ScramCredential, password string) bool {
	if cred.Iterations < 1 || cred.Iterations > metadata.MaxScramIterations {
		return false
	}
	got, err := metadata.ScramCredentialFromPassword(cred.User, cred.Mechanism, password, cred.Salt, cred.Iterations)
	return err == nil && subtle.ConstantTimeCompare(got.StoredKey, cred.StoredKey) == 1
}
