package client

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func loadCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	b, _ := pem.Decode(data)
	require.NotNil(t, b, path)
	c, err := x509.ParseCertificate(b.Bytes)
	require.NoError(t, err)
	return c
}

// fingerprint parses openssl's "AA:BB:..." output.
func fingerprint(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, ":", ""))
	require.NoError(t, err)
	return b
}

// TestTLSServerEndPoint checks the channel-binding data against digests
// computed by openssl (openssl x509 -fingerprint -sha256/-sha384) for
// certificates signed with SHA-256, SHA-384 and SHA-1 (RFC 5929: SHA-1
// and MD5 are replaced by SHA-256).
func TestTLSServerEndPoint(t *testing.T) {
	for _, tc := range []struct {
		file, want string
	}{
		{"testdata/cb-rsa-sha256.pem", "F5:FD:E2:5F:DA:1A:EA:5A:9B:F8:6B:A7:1F:00:DD:22:04:02:08:FE:AF:20:37:23:20:17:A9:1B:DA:0C:FE:3A"},
		{"testdata/cb-ecdsa-sha384.pem", "2C:5B:B8:AB:26:50:94:14:21:BF:1A:6B:B9:E1:F4:22:8C:FB:20:16:1F:BD:DA:1A:8D:72:D6:32:50:ED:F0:06:0D:B7:3A:01:07:DC:B0:B4:18:9B:C4:B8:0E:AD:62:F4"},
		{"testdata/cb-rsa-sha1.pem", "5B:86:3F:10:61:0C:EE:D7:96:64:A5:38:0E:05:B6:15:F3:51:DB:05:BB:85:1A:67:3B:FE:94:E9:9A:0E:FC:A2"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := TLSServerEndPoint(loadCert(t, tc.file))
			require.NoError(t, err)
			require.Equal(t, fingerprint(t, tc.want), got)
		})
	}
	c := loadCert(t, "testdata/cb-rsa-sha256.pem")
	c.SignatureAlgorithm = x509.PureEd25519
	_, err := TLSServerEndPoint(c)
	require.ErrorContains(t, err, "defines no hash")
}

// TestScramRFC7677Vector runs the SCRAM-SHA-256 example of RFC 7677
// section 3 through the session (GS2 header "n,,", no channel binding).
func TestScramRFC7677Vector(t *testing.T) {
	m := newScramPlus(MechScramSHA256Plus, "user", "pencil", &peerCerts{})
	m.nonce = func() []byte { return []byte("rOprNGfwEbeRWgbNEkqO") }
	s, first, err := m.start("n,,", nil)
	require.NoError(t, err)
	require.Equal(t, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO", string(first))
	done, final, err := s.Challenge([]byte("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"))
	require.NoError(t, err)
	require.False(t, done)
	require.Equal(t, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", string(final))
	done, _, err = s.Challenge([]byte("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="))
	require.NoError(t, err)
	require.True(t, done)
}

// TestScramPlusMessages: the -PLUS client-first message carries the
// tls-server-end-point GS2 header, and the client-final message's c= is
// that header followed by the certificate's SHA-256 digest (computed by
// openssl), base64.
func TestScramPlusMessages(t *testing.T) {
	certs := &peerCerts{}
	certs.set("broker:9093", loadCert(t, "testdata/cb-rsa-sha256.pem"))
	m := newScramPlus(MechScramSHA256Plus, "us=er,1", "pencil", certs)
	m.nonce = func() []byte { return []byte("fixednonce") }
	sess, first, err := m.Authenticate(context.Background(), "broker:9093")
	require.NoError(t, err)
	require.Equal(t, "p=tls-server-end-point,,n=us=3Der=2C1,r=fixednonce", string(first))
	_, final, err := sess.Challenge([]byte("r=fixednonceSERVER,s=" + base64.StdEncoding.EncodeToString([]byte("salt")) + ",i=4096"))
	require.NoError(t, err)
	cb := fingerprint(t, "F5:FD:E2:5F:DA:1A:EA:5A:9B:F8:6B:A7:1F:00:DD:22:04:02:08:FE:AF:20:37:23:20:17:A9:1B:DA:0C:FE:3A")
	wantC := base64.StdEncoding.EncodeToString(append([]byte("p=tls-server-end-point,,"), cb...))
	require.True(t, strings.HasPrefix(string(final), "c="+wantC+",r=fixednonceSERVER,p="), string(final))

	// No certificate recorded for the address: no binding, no session.
	_, _, err = m.Authenticate(context.Background(), "other:9093")
	require.ErrorContains(t, err, "no TLS certificate recorded")
}

// scramTestServer is the server side of one SCRAM-SHA-256 exchange with
// channel binding, written from RFC 5802 for the tests.
type scramTestServer struct {
	salt                 []byte
	iters                int
	storedKey, serverKey []byte
	cb                   []byte // the binding the server expects
	bare, first          string
	nonce                string
}

func newScramTestServer(pass string, cb []byte) *scramTestServer {
	salt := []byte("0123456789abcdef")
	salted, _ := pbkdf2.Key(sha256.New, pass, salt, 4096, 32)
	mac := func(k []byte, m string) []byte { h := hmac.New(sha256.New, k); h.Write([]byte(m)); return h.Sum(nil) }
	ck := mac(salted, "Client Key")
	sk := sha256.Sum256(ck)
	return &scramTestServer{salt: salt, iters: 4096, storedKey: sk[:], serverKey: mac(salted, "Server Key"), cb: cb}
}

func (s *scramTestServer) handleFirst(msg []byte) ([]byte, error) {
	rest, ok := strings.CutPrefix(string(msg), gs2CBHeader)
	if !ok {
		return nil, fmt.Errorf("no channel-binding GS2 header: %q", msg)
	}
	s.bare = rest
	i := strings.Index(rest, ",r=")
	if i < 0 {
		return nil, fmt.Errorf("no nonce")
	}
	s.nonce = rest[i+3:] + "srvnonce"
	s.first = fmt.Sprintf("r=%s,s=%s,i=%d", s.nonce, base64.StdEncoding.EncodeToString(s.salt), s.iters)
	return []byte(s.first), nil
}

func (s *scramTestServer) handleFinal(msg []byte) []byte {
	str := string(msg)
	i := strings.LastIndex(str, ",p=")
	without, proofB64 := str[:i], str[i+3:]
	wantC := "c=" + base64.StdEncoding.EncodeToString(append([]byte(gs2CBHeader), s.cb...)) + ",r=" + s.nonce
	if without != wantC {
		return []byte("e=channel-bindings-dont-match")
	}
	auth := s.bare + "," + s.first + "," + without
	h := hmac.New(sha256.New, s.storedKey)
	h.Write([]byte(auth))
	sig := h.Sum(nil)
	proof, _ := base64.StdEncoding.DecodeString(proofB64)
	if len(proof) != len(sig) {
		return []byte("e=invalid-proof")
	}
	for i := range sig {
		sig[i] ^= proof[i]
	}
	ck := sha256.Sum256(sig)
	if !bytes.Equal(ck[:], s.storedKey) {
		return []byte("e=invalid-proof")
	}
	h = hmac.New(sha256.New, s.serverKey)
	h.Write([]byte(auth))
	return []byte("v=" + base64.StdEncoding.EncodeToString(h.Sum(nil)))
}

// TestScramPlusExchange runs full exchanges against a server that expects
// a given binding: the right certificate and password pass (and the
// client verifies the server's signature); a client bound to another
// certificate, or with a wrong password, is refused; a server that does
// not know the password is caught by the client.
func TestScramPlusExchange(t *testing.T) {
	right := loadCert(t, "testdata/cb-rsa-sha256.pem")
	wrong := loadCert(t, "testdata/cb-ecdsa-sha384.pem")
	rightCB, err := TLSServerEndPoint(right)
	require.NoError(t, err)

	run := func(clientCert *x509.Certificate, clientPass, serverPass string) error {
		certs := &peerCerts{}
		certs.set("b:1", clientCert)
		srv := newScramTestServer(serverPass, rightCB)
		sess, first, err := newScramPlus(MechScramSHA256Plus, "alice", clientPass, certs).Authenticate(context.Background(), "b:1")
		require.NoError(t, err)
		sfirst, err := srv.handleFirst(first)
		require.NoError(t, err)
		_, final, err := sess.Challenge(sfirst)
		require.NoError(t, err)
		done, _, err := sess.Challenge(srv.handleFinal(final))
		if err == nil {
			require.True(t, done)
		}
		return err
	}
	require.NoError(t, run(right, "secret", "secret"))
	require.ErrorContains(t, run(wrong, "secret", "secret"), "channel-bindings-dont-match")
	require.ErrorContains(t, run(right, "nope", "secret"), "invalid-proof")
}

// TestScramServerFirstChecks: a hostile or broken server-first message is
// refused before any expensive work.
func TestScramServerFirstChecks(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"r=fixednonceX,s=c2FsdA==,i=100", "out of range"},
		{"r=fixednonceX,s=c2FsdA==,i=2147483647", "out of range"},
		{"r=othernonce,s=c2FsdA==,i=4096", "does not extend"},
		{"r=fixednonce,s=c2FsdA==,i=4096", "does not extend"},
		{"m=ext,r=fixednonceX,s=c2FsdA==,i=4096", "not r=,s=,i="},
		{"r=fixednonceX,s=!!!,i=4096", "bad salt"},
		{"e=unknown-user", "broker refused: unknown-user"},
		{"garbage", "malformed"},
		{"", "malformed"},
	} {
		m := newScramPlus(MechScramSHA256Plus, "u", "p", &peerCerts{})
		m.nonce = func() []byte { return []byte("fixednonce") }
		s, _, err := m.start(gs2CBHeader, []byte{1})
		require.NoError(t, err)
		_, _, err = s.Challenge([]byte(tc.msg))
		require.ErrorContains(t, err, tc.want, tc.msg)
	}
}

// FuzzScramSession feeds arbitrary server messages to a session: it
// errors or proceeds, never panics.
func FuzzScramSession(f *testing.F) {
	f.Add([]byte("r=fixednonceX,s=c2FsdA==,i=4096"), []byte("v=AAAA"))
	f.Add([]byte("e=x"), []byte(""))
	f.Add([]byte(",,,"), []byte("v="))
	f.Fuzz(func(t *testing.T, first, final []byte) {
		m := newScramPlus(MechScramSHA256Plus, "u", "p", &peerCerts{})
		m.nonce = func() []byte { return []byte("fixednonce") }
		m.maxIters = scramMinIterations // keep PBKDF2 cheap
		s, _, err := m.start(gs2CBHeader, []byte{1})
		require.NoError(t, err)
		if _, _, err := s.Challenge(first); err != nil {
			return
		}
		_, _, _ = s.Challenge(final)
	})
}
