package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/testcerts"
)

// files is a listener's PEM files in a test directory.
type files struct {
	dir, cert, key, ca string
}

func writeFiles(t *testing.T, ca *testcerts.CA, server *testcerts.Pair) files {
	dir := t.TempDir()
	cert, key := server.Write(t, dir, "server")
	return files{dir: dir, cert: cert, key: key, ca: ca.Write(t, dir, "ca")}
}

func TestClientAuthParse(t *testing.T) {
	for s, want := range map[string]ClientAuth{"": ClientAuthDefault, "none": ClientAuthNone,
		"Requested": ClientAuthRequested, "required": ClientAuthRequired} {
		got, err := ParseClientAuth(s)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := ParseClientAuth("want")
	require.ErrorContains(t, err, "none, requested or required")

	require.Equal(t, ClientAuthRequired, TLSOptions{ClientCAFile: "ca.pem"}.EffectiveClientAuth())
	require.Equal(t, ClientAuthNone, TLSOptions{}.EffectiveClientAuth())
	require.Equal(t, ClientAuthRequested, TLSOptions{ClientCAFile: "ca.pem", ClientAuth: ClientAuthRequested}.EffectiveClientAuth())
}

func TestTLSOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts TLSOptions
		err  string
	}{
		{TLSOptions{}, "tls-cert and tls-key are required"},
		{TLSOptions{CertFile: "c"}, "tls-key is required"},
		{TLSOptions{KeyFile: "k"}, "tls-cert is required"},
		{TLSOptions{CertFile: "c", KeyFile: "k", ClientAuth: ClientAuthRequired}, "needs tls-client-ca"},
		{TLSOptions{CertFile: "c", KeyFile: "k", PrincipalMapping: "nonsense"}, "tls-principal-mapping"},
	} {
		require.ErrorContains(t, tc.opts.Validate(), tc.err)
	}
	require.NoError(t, TLSOptions{CertFile: "c", KeyFile: "k"}.Validate())
}

func TestLoadTLSErrorsNameTheFile(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	f := writeFiles(t, ca, ca.Server(t, "broker"))
	_, err := LoadTLS(TLSOptions{CertFile: filepath.Join(f.dir, "missing.pem"), KeyFile: f.key})
	require.ErrorContains(t, err, "tls-cert "+filepath.Join(f.dir, "missing.pem"))

	other := ca.Server(t, "other")
	_, otherKey := other.Write(t, f.dir, "other")
	_, err = LoadTLS(TLSOptions{CertFile: f.cert, KeyFile: otherKey})
	require.ErrorContains(t, err, "with tls-key "+otherKey, "a key that is not the certificate's")

	bad := filepath.Join(f.dir, "bad-ca.pem")
	require.NoError(t, os.WriteFile(bad, other.KeyPEM, 0o600))
	_, err = LoadTLS(TLSOptions{CertFile: f.cert, KeyFile: f.key, ClientCAFile: bad})
	require.ErrorContains(t, err, "tls-client-ca "+bad)
	require.ErrorContains(t, err, "want CERTIFICATE")
	require.NoError(t, os.WriteFile(bad, []byte("nothing"), 0o600))
	_, err = LoadTLS(TLSOptions{CertFile: f.cert, KeyFile: f.key, ClientCAFile: bad})
	require.ErrorContains(t, err, "no PEM certificate")
}

// serve accepts TLS connections with tl's server configuration and
// handshakes each; it returns the listener's address and a counter of
// successful handshakes.
func serve(t *testing.T, tl *TLS) (string, *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var ok atomic.Int64
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				tc := tls.Server(nc, tl.ServerConfig(nil))
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if tc.HandshakeContext(ctx) == nil {
					ok.Add(1)
					_, _ = tc.Write([]byte("x")) // lets the client finish reading TLS 1.3 tickets/alerts
					buf := make([]byte, 1)
					_, _ = tc.Read(buf)
				}
			}()
		}
	}()
	return ln.Addr().String(), &ok
}

func dial(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, error) {
	d := &tls.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: 5 * time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := c.(*tls.Conn)
	// Under TLS 1.3 a refused client certificate is reported at the
	// client's first read, not by its handshake.
	_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1)
	if _, err := tc.Read(buf); err != nil {
		tc.Close()
		return nil, err
	}
	t.Cleanup(func() { tc.Close() })
	return tc, nil
}

func TestReload(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	first := ca.Server(t, "broker")
	f := writeFiles(t, ca, first)
	tl, err := LoadTLS(TLSOptions{CertFile: f.cert, KeyFile: f.key})
	require.NoError(t, err)
	require.Equal(t, first.Cert.SerialNumber, tl.Leaf().SerialNumber)
	addr, _ := serve(t, tl)

	client := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	before, err := dial(t, addr, client)
	require.NoError(t, err)
	require.Equal(t, first.Cert.SerialNumber, before.ConnectionState().PeerCertificates[0].SerialNumber)

	// A good reload: the next handshake presents the new certificate.
	second := ca.Server(t, "broker")
	second.Write(t, f.dir, "server")
	require.NoError(t, tl.Reload())
	require.Equal(t, second.Cert.SerialNumber, tl.Leaf().SerialNumber)
	after, err := dial(t, addr, client)
	require.NoError(t, err)
	require.Equal(t, second.Cert.SerialNumber, after.ConnectionState().PeerCertificates[0].SerialNumber)
	// The connection made before is untouched.
	require.Equal(t, first.Cert.SerialNumber, before.ConnectionState().PeerCertificates[0].SerialNumber)

	// Bad files: the old material stays in use. A truncated certificate, a
	// key that does not match, a missing file.
	for name, breakIt := range map[string]func(){
		"truncated cert": func() { testcerts.WriteFile(t, f.cert, second.CertPEM[:40]) },
		"mismatched key": func() {
			second.Write(t, f.dir, "server")
			testcerts.WriteFile(t, f.key, ca.Server(t, "x").KeyPEM)
		},
		"missing key": func() { require.NoError(t, os.Remove(f.key)) },
	} {
		breakIt()
		require.Error(t, tl.Reload(), name)
		require.Equal(t, second.Cert.SerialNumber, tl.Leaf().SerialNumber, name)
		c, err := dial(t, addr, client)
		require.NoError(t, err, name)
		require.Equal(t, second.Cert.SerialNumber, c.ConnectionState().PeerCertificates[0].SerialNumber, name)
	}
}

func TestClientCertificates(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	f := writeFiles(t, ca, ca.Server(t, "broker"))
	alice := ca.Client(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"apps"}})
	stranger := testcerts.NewCA(t, "other ca").Client(t, pkix.Name{CommonName: "mallory"})
	cfg := func(p *testcerts.Pair) *tls.Config {
		c := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
		if p != nil {
			// Sent whatever CAs the server names (a Go client with
			// Certificates would send none that the CAs did not sign).
			cert := p.TLS(t)
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
		}
		return c
	}

	required, err := LoadTLS(TLSOptions{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.ca})
	require.NoError(t, err)
	require.Equal(t, ClientAuthRequired, required.ClientAuth())
	addr, _ := serve(t, required)
	c, err := dial(t, addr, cfg(alice))
	require.NoError(t, err)
	_, err = dial(t, addr, cfg(nil))
	require.Error(t, err, "no certificate under required")
	_, err = dial(t, addr, cfg(stranger))
	require.Error(t, err, "a certificate of another CA")

	// The principal of the verified certificate, from the server's view.
	srv := serverState(t, required, cfg(alice))
	p, ok, err := required.Principal(srv)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "User:alice", p)
	_ = c

	requested, err := LoadTLS(TLSOptions{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.ca,
		ClientAuth: ClientAuthRequested, PrincipalMapping: "RULE:^CN=(.*?),OU=(.*)$/$2.$1/"})
	require.NoError(t, err)
	addr, _ = serve(t, requested)
	_, err = dial(t, addr, cfg(nil))
	require.NoError(t, err, "no certificate is fine when only requested")
	_, err = dial(t, addr, cfg(stranger))
	require.Error(t, err, "a certificate given is verified")
	p, ok, err = requested.Principal(serverState(t, requested, cfg(alice)))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "User:apps.alice", p)
	_, ok, err = requested.Principal(serverState(t, requested, cfg(nil)))
	require.NoError(t, err)
	require.False(t, ok, "no certificate: no principal (ANONYMOUS)")

	// A certificate no rule maps is an error.
	strict, err := LoadTLS(TLSOptions{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.ca,
		PrincipalMapping: "RULE:^CN=(.*),OU=ops$/$1/"})
	require.NoError(t, err)
	_, _, err = strict.Principal(serverState(t, strict, cfg(alice)))
	require.ErrorContains(t, err, "no principal mapping rule applies")

	// Reloading the CA: a client of the new CA is accepted, the old CA's
	// clients no longer.
	other := testcerts.NewCA(t, "rotated ca")
	testcerts.WriteFile(t, f.ca, other.CertPEM)
	require.NoError(t, required.Reload())
	addr, _ = serve(t, required)
	_, err = dial(t, addr, cfg(alice))
	require.Error(t, err)
	_, err = dial(t, addr, cfg(other.Client(t, pkix.Name{CommonName: "bob"})))
	require.NoError(t, err)
}

// serverState runs one handshake in memory and returns the server's view.
func serverState(t *testing.T, tl *TLS, client *tls.Config) tls.ConnectionState {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var presented *x509.Certificate
	srv := tls.Server(a, tl.ServerConfig(func(leaf *x509.Certificate) { presented = leaf }))
	done := make(chan error, 1)
	go func() { done <- tls.Client(b, client).Handshake() }()
	err := srv.Handshake()
	if err == nil {
		require.NoError(t, <-done)
		require.Equal(t, tl.Leaf(), presented, "the presented certificate is reported")
	}
	return srv.ConnectionState()
}

func TestClientConfigVerifiesPeers(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	f := writeFiles(t, ca, ca.Server(t, "broker"))
	tl, err := LoadTLS(TLSOptions{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.ca})
	require.NoError(t, err)
	addr, ok := serve(t, tl)

	// A node dials another with the same material: mTLS both ways.
	_, err = dial(t, addr, tl.ClientConfig("127.0.0.1"))
	require.NoError(t, err)
	require.Equal(t, int64(1), ok.Load())
	_, err = dial(t, addr, tl.ClientConfig("broker.example"))
	require.ErrorContains(t, err, "verifying the peer's certificate", "the name is checked")

	// Dial does the same from an address.
	c, err := tl.Dial(context.Background(), addr)
	require.NoError(t, err)
	c.Close()

	// The cluster port requires a client certificate even when the Kafka
	// listener only requests one.
	requested, err := LoadTLS(TLSOptions{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.ca, ClientAuth: ClientAuthRequested})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				tc := tls.Server(nc, requested.PeerServerConfig())
				if tc.Handshake() == nil {
					_, _ = tc.Write([]byte("x"))
					_, _ = tc.Read(make([]byte, 1))
				}
			}()
		}
	}()
	_, err = dial(t, ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
	require.Error(t, err, "no client certificate on the cluster port")
	_, err = dial(t, ln.Addr().String(), requested.ClientConfig("127.0.0.1"))
	require.NoError(t, err)

	// A peer whose certificate another CA signed is refused.
	g := writeFiles(t, ca, testcerts.NewCA(t, "rogue").Server(t, "rogue"))
	rogue, err := LoadTLS(TLSOptions{CertFile: g.cert, KeyFile: g.key})
	require.NoError(t, err)
	rogueAddr, _ := serve(t, rogue)
	_, err = dial(t, rogueAddr, tl.ClientConfig("127.0.0.1"))
	require.ErrorContains(t, err, "verifying the peer's certificate")
}

func FuzzParseCAs(f *testing.F) {
	ca := testcerts.NewCA(f, "ca")
	f.Add(ca.CertPEM)
	f.Add(append(append([]byte{}, ca.CertPEM...), ca.CertPEM...))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pool, n, err := parseCAs(b)
		if err != nil {
			require.Nil(t, pool)
			return
		}
		require.Positive(t, n)
		require.NotNil(t, pool)
	})
}
