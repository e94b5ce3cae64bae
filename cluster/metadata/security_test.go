package metadata

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScramCredentialRFC7677 derives the keys of RFC 7677's SCRAM-SHA-256
// example (user "user", password "pencil", 4096 iterations) and checks the
// server signature of its exchange, which only a correct ServerKey gives.
func TestScramCredentialRFC7677(t *testing.T) {
	salt, err := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	require.NoError(t, err)
	cred, err := ScramCredentialFromPassword("user", ScramSHA256, "pencil", salt, 4096)
	require.NoError(t, err)
	authMessage := "n=user,r=rOprNGfwEbeRWgbNEkqO," +
		"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096," +
		"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	m := hmac.New(sha256.New, cred.ServerKey)
	m.Write([]byte(authMessage))
	require.Equal(t, "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", base64.StdEncoding.EncodeToString(m.Sum(nil)))

	_, err = NewScramCredential("user", "SCRAM-SHA-1", salt, []byte("x"), 4096)
	require.ErrorIs(t, err, ErrUnsupportedSaslMechanism)
	_, err = NewScramCredential("user", ScramSHA512, salt, []byte("x"), 100)
	require.ErrorIs(t, err, ErrInvalidRequest)
}
