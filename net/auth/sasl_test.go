package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/net/auth"
)

func cred(t testing.TB, user, mech, password string) metadata.ScramCredential {
	t.Helper()
	c, err := metadata.ScramCredentialFromPassword(user, mech, password, []byte("salt-"+user+mech), 4096)
	require.NoError(t, err)
	return c
}

func newServer(t testing.TB, mechs ...string) *auth.Server {
	t.Helper()
	creds := auth.StaticCredentials{
		cred(t, "alice", metadata.ScramSHA256, "alice-secret"),
		cred(t, "alice", metadata.ScramSHA512, "alice-secret"),
		cred(t, "bob,=x", metadata.ScramSHA256, "bob-secret"),
	}
	s, err := auth.NewServer(auth.Config{Mechanisms: mechs, Credentials: creds, FakeSaltKey: []byte("k")})
	require.NoError(t, err)
	return s
}

// exchange runs a whole SCRAM exchange between c and a session of s.
func exchange(t testing.TB, s *auth.Server, c *auth.ScramClient, ci auth.ConnInfo) (auth.Session, error) {
	t.Helper()
	sess, err := s.Start(c.Mechanism, ci)
	if err != nil {
		return nil, err
	}
	msg, _, err := c.Step(nil)
	require.NoError(t, err)
	for {
		reply, done, err := sess.Step(msg)
		if err != nil {
			require.True(t, done, "a failed step ends the exchange")
			return sess, err
		}
		out, cdone, cerr := c.Step(reply)
		require.NoError(t, cerr, "client rejects the server's message")
		if done {
			require.True(t, cdone)
			return sess, nil
		}
		msg = out
	}
}

// TestRFC7677Vector runs the SCRAM-SHA-256 example of RFC 7677 section 3
// through the server: same server-first and server-final, to the byte.
func TestRFC7677Vector(t *testing.T) {
	salt, err := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	require.NoError(t, err)
	c, err := metadata.ScramCredentialFromPassword("user", metadata.ScramSHA256, "pencil", salt, 4096)
	require.NoError(t, err)
	s, err := auth.NewServer(auth.Config{Mechanisms: []string{auth.MechScramSHA256}, Credentials: auth.StaticCredentials{c}})
	require.NoError(t, err)
	s.SetNonce("%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
	sess, err := s.Start(auth.MechScramSHA256, auth.ConnInfo{})
	require.NoError(t, err)

	reply, done, err := sess.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	require.NoError(t, err)
	require.False(t, done)
	require.Equal(t, "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", string(reply))
	reply, done, err = sess.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", string(reply))
	require.Equal(t, "User:user", sess.Principal())

	// The same client-final with one bit of the proof flipped fails.
	sess, err = s.Start(auth.MechScramSHA256, auth.ConnInfo{})
	require.NoError(t, err)
	_, _, err = sess.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	require.NoError(t, err)
	_, done, err = sess.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVU="))
	require.ErrorIs(t, err, auth.ErrAuthFailed)
	require.True(t, done)
	require.Empty(t, sess.Principal())
}

func TestScram(t *testing.T) {
	s := newServer(t, auth.MechScramSHA256, auth.MechScramSHA512)
	for _, mech := range []string{auth.MechScramSHA256, auth.MechScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			sess, err := exchange(t, s, &auth.ScramClient{User: "alice", Password: "alice-secret", Mechanism: mech}, auth.ConnInfo{})
			require.NoError(t, err)
			require.Equal(t, "User:alice", sess.Principal())

			_, wrong := exchange(t, s, &auth.ScramClient{User: "alice", Password: "nope", Mechanism: mech}, auth.ConnInfo{})
			require.ErrorIs(t, wrong, auth.ErrAuthFailed)
			_, unknown := exchange(t, s, &auth.ScramClient{User: "mallory", Password: "x", Mechanism: mech}, auth.ConnInfo{})
			require.ErrorIs(t, unknown, auth.ErrAuthFailed)
			// The client cannot tell a wrong password from an unknown user.
			require.Equal(t, auth.ClientMessage(mech, wrong), auth.ClientMessage(mech, unknown))
			require.NotContains(t, auth.ClientMessage(mech, unknown), "mallory")
			require.Contains(t, unknown.Error(), "unknown user", "the log says which")
		})
	}
	// A name with ',' and '=' is escaped in the message and matched unescaped.
	sess, err := exchange(t, s, &auth.ScramClient{User: "bob,=x", Password: "bob-secret", Mechanism: auth.MechScramSHA256}, auth.ConnInfo{})
	require.NoError(t, err)
	require.Equal(t, "User:bob,=x", sess.Principal())
	// alice has no SHA-512 credential under bob's name; bob has none for 512.
	_, err = exchange(t, s, &auth.ScramClient{User: "bob,=x", Password: "bob-secret", Mechanism: auth.MechScramSHA512}, auth.ConnInfo{})
	require.ErrorIs(t, err, auth.ErrAuthFailed)
}

// An unknown user is shown a salt and iteration count as stable as a real
// user's, so asking twice does not reveal that the name is not a user.
func TestScramUnknownUserLooksReal(t *testing.T) {
	s := newServer(t, auth.MechScramSHA256)
	first := func(user string) string {
		sess, err := s.Start(auth.MechScramSHA256, auth.ConnInfo{})
		require.NoError(t, err)
		reply, _, err := sess.Step([]byte("n,,n=" + user + ",r=abc"))
		require.NoError(t, err)
		parts := strings.SplitN(string(reply), ",", 2) // drop the nonce
		return parts[1]
	}
	require.Equal(t, first("ghost"), first("ghost"))
	require.NotEqual(t, first("ghost"), first("phantom"))
	require.Equal(t, first("alice"), first("alice"))
	require.Contains(t, first("ghost"), ",i=8192")
	// Another server with the same key shows the same fake salt (a
	// cluster's nodes agree).
	s2 := newServer(t, auth.MechScramSHA256)
	sess, err := s2.Start(auth.MechScramSHA256, auth.ConnInfo{})
	require.NoError(t, err)
	reply, _, err := sess.Step([]byte("n,,n=ghost,r=abc"))
	require.NoError(t, err)
	require.Equal(t, first("ghost"), strings.SplitN(string(reply), ",", 2)[1])
}

func TestScramRefusals(t *testing.T) {
	s := newServer(t, auth.MechScramSHA256, auth.MechScramSHA256Plus)
	tlsState := &tls.ConnectionState{Version: tls.VersionTLS12}
	for _, tc := range []struct {
		name, mech, first string
		ci                auth.ConnInfo
		want              string
	}{
		{"binding without PLUS", auth.MechScramSHA256, "p=tls-server-end-point,,n=alice,r=x", auth.ConnInfo{TLS: tlsState}, "use SCRAM-SHA-256-PLUS"},
		{"downgrade", auth.MechScramSHA256, "y,,n=alice,r=x", auth.ConnInfo{TLS: tlsState}, "downgrade"},
		{"PLUS without binding", auth.MechScramSHA256Plus, "n,,n=alice,r=x", auth.ConnInfo{TLS: tlsState}, "requires channel binding"},
		{"tls-unique", auth.MechScramSHA256Plus, "p=tls-unique,,n=alice,r=x", auth.ConnInfo{TLS: tlsState}, "not supported"},
		{"exporter on TLS 1.2", auth.MechScramSHA256Plus, "p=tls-exporter,,n=alice,r=x", auth.ConnInfo{TLS: tlsState}, "needs TLS 1.3"},
		{"end-point, certificate unknown", auth.MechScramSHA256Plus, "p=tls-server-end-point,,n=alice,r=x", auth.ConnInfo{TLS: tlsState}, "not known"},
		{"authzid", auth.MechScramSHA256, "n,a=bob,n=alice,r=x", auth.ConnInfo{}, "differs"},
		{"mandatory extension", auth.MechScramSHA256, "n,,m=x,n=alice,r=x", auth.ConnInfo{}, "mandatory extension"},
		{"token auth", auth.MechScramSHA256, "n,,n=alice,r=x,tokenauth=true", auth.ConnInfo{}, "delegation tokens"},
		{"bad escape", auth.MechScramSHA256, "n,,n=al=ice,r=x", auth.ConnInfo{}, "escape"},
		{"no nonce", auth.MechScramSHA256, "n,,n=alice", auth.ConnInfo{}, "malformed"},
		{"garbage", auth.MechScramSHA256, "\x00\xff", auth.ConnInfo{}, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess, err := s.Start(tc.mech, tc.ci)
			require.NoError(t, err)
			_, done, err := sess.Step([]byte(tc.first))
			require.ErrorIs(t, err, auth.ErrAuthFailed)
			require.True(t, done)
			require.Contains(t, auth.ClientMessage(tc.mech, err), tc.want)
		})
	}
	// "y" is fine where the server offers no channel binding (plaintext).
	_, err := exchange(t, s, &auth.ScramClient{User: "alice", Password: "alice-secret", Mechanism: auth.MechScramSHA256, CBFlag: "y"}, auth.ConnInfo{})
	require.NoError(t, err)
	// The -PLUS mechanisms are not offered without TLS.
	require.Equal(t, []string{auth.MechScramSHA256}, s.Offered(auth.ConnInfo{}))
	_, err = s.Start(auth.MechScramSHA256Plus, auth.ConnInfo{})
	require.ErrorIs(t, err, auth.ErrUnsupportedMechanism)
	_, err = s.Start(auth.MechScramSHA512, auth.ConnInfo{})
	require.ErrorIs(t, err, auth.ErrUnsupportedMechanism, "not enabled")

	// A client-final that does not repeat the header, or changes the nonce.
	for _, final := range []func(nonce string) string{
		func(n string) string { return "c=eSws,r=" + n + ",p=AAAA" },
		func(n string) string { return "c=biws,r=" + n + "x,p=AAAA" },
		func(n string) string { return "c=biws,r=" + n[1:] + ",p=AAAA" },
		func(n string) string { return "c=biws,r=" + n },
	} {
		sess, err := s.Start(auth.MechScramSHA256, auth.ConnInfo{})
		require.NoError(t, err)
		reply, _, err := sess.Step([]byte("n,,n=alice,r=abc"))
		require.NoError(t, err)
		nonce := strings.TrimPrefix(strings.SplitN(string(reply), ",", 2)[0], "r=")
		_, done, err := sess.Step([]byte(final(nonce)))
		require.ErrorIs(t, err, auth.ErrAuthFailed)
		require.True(t, done)
	}
}

func selfSigned(t testing.TB, cn string) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, leaf
}

// tlsPair returns the server's and the client's state of one real TLS
// connection over a pipe.
func tlsPair(t *testing.T, cert tls.Certificate, version uint16) (server, client tls.ConnectionState) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	srv := tls.Server(a, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: version, MaxVersion: version})
	cli := tls.Client(b, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: version, MaxVersion: version})
	errc := make(chan error, 1)
	go func() { errc <- srv.Handshake() }()
	require.NoError(t, cli.Handshake())
	require.NoError(t, <-errc)
	return srv.ConnectionState(), cli.ConnectionState()
}

func TestScramPlus(t *testing.T) {
	s := newServer(t, auth.MechScramSHA256Plus, auth.MechScramSHA512Plus, auth.MechScramSHA256)
	cert, leaf := selfSigned(t, "server")
	_, otherLeaf := selfSigned(t, "impostor")

	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		srvState, cliState := tlsPair(t, cert, version)
		ci := auth.ConnInfo{TLS: &srvState, ServerCert: leaf}
		require.Equal(t, []string{auth.MechScramSHA256Plus, auth.MechScramSHA512Plus, auth.MechScramSHA256}, s.Offered(ci))

		// tls-server-end-point: the client hashes the certificate it saw.
		good, err := auth.BindingData(auth.BindingServerEndPoint, &cliState, cliState.PeerCertificates[0])
		require.NoError(t, err)
		for _, mech := range []string{auth.MechScramSHA256Plus, auth.MechScramSHA512Plus} {
			sess, err := exchange(t, s, &auth.ScramClient{User: "alice", Password: "alice-secret", Mechanism: mech,
				CBName: auth.BindingServerEndPoint, CBData: good}, ci)
			require.NoError(t, err, "%s %s", mech, tls.VersionName(version))
			require.Equal(t, "User:alice", sess.Principal())
		}
		// A client that saw another certificate (a proxy's) is refused.
		bad, err := auth.ServerEndPoint(otherLeaf)
		require.NoError(t, err)
		_, err = exchange(t, s, &auth.ScramClient{User: "alice", Password: "alice-secret", Mechanism: auth.MechScramSHA256Plus,
			CBName: auth.BindingServerEndPoint, CBData: bad}, ci)
		require.ErrorIs(t, err, auth.ErrAuthFailed)
		require.Contains(t, auth.ClientMessage(auth.MechScramSHA256Plus, err), "channel binding does not match")

		if version != tls.VersionTLS13 {
			continue
		}
		// tls-exporter: both ends derive the same keying material.
		exp, err := auth.BindingData(auth.BindingExporter, &cliState, nil)
		require.NoError(t, err)
		_, err = exchange(t, s, &auth.ScramClient{User: "alice", Password: "alice-secret", Mechanism: auth.MechScramSHA256Plus,
			CBName: auth.BindingExporter, CBData: exp}, ci)
		require.NoError(t, err)
		// The exporter of another TLS connection does not match.
		_, otherCli := tlsPair(t, cert, version)
		exp2, err := auth.BindingData(auth.BindingExporter, &otherCli, nil)
		require.NoError(t, err)
		require.NotEqual(t, exp, exp2)
		_, err = exchange(t, s, &auth.ScramClient{User: "alice", Password: "alice-secret", Mechanism: auth.MechScramSHA256Plus,
			CBName: auth.BindingExporter, CBData: exp2}, ci)
		require.ErrorIs(t, err, auth.ErrAuthFailed)
	}
}

func TestServerEndPointHash(t *testing.T) {
	_, leaf := selfSigned(t, "x") // ECDSA with SHA-256
	got, err := auth.ServerEndPoint(leaf)
	require.NoError(t, err)
	require.Len(t, got, 32)
	for alg, size := range map[x509.SignatureAlgorithm]int{x509.SHA1WithRSA: 32, x509.MD5WithRSA: 32, x509.ECDSAWithSHA384: 48, x509.SHA512WithRSA: 64} {
		c := *leaf
		c.SignatureAlgorithm = alg
		got, err := auth.ServerEndPoint(&c)
		require.NoError(t, err)
		require.Len(t, got, size, "%v", alg)
	}
	c := *leaf
	c.SignatureAlgorithm = x509.PureEd25519
	_, err = auth.ServerEndPoint(&c)
	require.ErrorContains(t, err, "defines no hash")
}

func TestPlain(t *testing.T) {
	s := newServer(t, auth.MechPlain)
	require.Empty(t, s.Offered(auth.ConnInfo{}), "PLAIN needs TLS by default")
	require.Equal(t, []string{auth.MechPlain}, s.Offered(auth.ConnInfo{AllowPlainWithoutTLS: true}))
	ci := auth.ConnInfo{TLS: &tls.ConnectionState{Version: tls.VersionTLS13}}
	run := func(msg string) (auth.Session, error) {
		sess, err := s.Start(auth.MechPlain, ci)
		require.NoError(t, err)
		reply, done, err := sess.Step([]byte(msg))
		require.True(t, done)
		require.Empty(t, reply)
		return sess, err
	}
	sess, err := run("\x00alice\x00alice-secret")
	require.NoError(t, err)
	require.Equal(t, "User:alice", sess.Principal())
	_, err = run("alice\x00alice\x00alice-secret")
	require.NoError(t, err, "authzid equal to the user")
	_, wrong := run("\x00alice\x00wrong")
	require.ErrorIs(t, wrong, auth.ErrAuthFailed)
	_, unknown := run("\x00nobody\x00x")
	require.ErrorIs(t, unknown, auth.ErrAuthFailed)
	require.Equal(t, auth.ClientMessage(auth.MechPlain, wrong), auth.ClientMessage(auth.MechPlain, unknown))
	for _, bad := range []string{"bob\x00alice\x00alice-secret", "\x00\x00pw", "\x00alice\x00", "alice", "\x00a\x00b\x00c"} {
		_, err := run(bad)
		require.ErrorIs(t, err, auth.ErrAuthFailed, "%q", bad)
	}
}

func TestExternal(t *testing.T) {
	s, err := auth.NewServer(auth.Config{Mechanisms: []string{auth.MechExternal}})
	require.NoError(t, err)
	_, leaf := selfSigned(t, "svc-orders")
	noCert := auth.ConnInfo{TLS: &tls.ConnectionState{}}
	require.Empty(t, s.Offered(noCert))
	ci := auth.ConnInfo{TLS: &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}}}
	require.Equal(t, []string{auth.MechExternal}, s.Offered(ci))
	for msg, ok := range map[string]bool{"": true, "svc-orders": true, "User:svc-orders": true, "admin": false} {
		sess, err := s.Start(auth.MechExternal, ci)
		require.NoError(t, err)
		_, done, err := sess.Step([]byte(msg))
		require.True(t, done)
		if ok {
			require.NoError(t, err, msg)
			require.Equal(t, "User:svc-orders", sess.Principal())
		} else {
			require.ErrorIs(t, err, auth.ErrAuthFailed, msg)
		}
	}
}

func TestParseMechanisms(t *testing.T) {
	got, err := auth.ParseMechanisms(" scram-sha-256, SCRAM-SHA-512-PLUS,PLAIN ")
	require.NoError(t, err)
	require.Equal(t, []string{"SCRAM-SHA-256", "SCRAM-SHA-512-PLUS", "PLAIN"}, got)
	_, err = auth.ParseMechanisms("SCRAM-SHA-1")
	require.ErrorContains(t, err, "unknown SASL mechanism")
	_, err = auth.ParseMechanisms("PLAIN,plain")
	require.ErrorContains(t, err, "twice")
	_, err = auth.NewServer(auth.Config{Mechanisms: []string{auth.MechPlain}})
	require.ErrorContains(t, err, "credentials")
}

// librdkafka repeats its own nonce in front of the server's in
// client-final; Kafka accepts a nonce that ends with the server's, and so
// does MoonMQ, with the AuthMessage over what the client sent.
func TestScramLibrdkafkaNonce(t *testing.T) {
	s := newServer(t, auth.MechScramSHA256)
	sess, err := s.Start(auth.MechScramSHA256, auth.ConnInfo{})
	require.NoError(t, err)
	bare := "n=alice,r=cnonce"
	serverFirst, _, err := sess.Step([]byte("n,," + bare))
	require.NoError(t, err)
	var nonce, salt string
	for _, a := range strings.Split(string(serverFirst), ",") {
		switch a[:2] {
		case "r=":
			nonce = a[2:]
		case "s=":
			salt = a[2:]
		}
	}
	saltBytes, err := base64.StdEncoding.DecodeString(salt)
	require.NoError(t, err)
	salted, err := pbkdf2.Key(sha256.New, "alice-secret", saltBytes, 4096, 32)
	require.NoError(t, err)
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	withoutProof := "c=biws,r=cnonce" + nonce // librdkafka's doubled client nonce
	authMessage := bare + "," + string(serverFirst) + "," + withoutProof
	proof := mac(storedKey[:], authMessage)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	reply, done, err := sess.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)))
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, "v="+base64.StdEncoding.EncodeToString(mac(mac(salted, "Server Key"), authMessage)), string(reply))
}
