package controller

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue makes a certificate for 127.0.0.1 usable by servers and clients.
func (ca *testCA) issue(t *testing.T, cn string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsDial dials a cluster port over TLS with cfg.
func tlsDial(cfg *tls.Config) dialFunc {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		d := tls.Dialer{Config: cfg}
		return d.DialContext(ctx, "tcp", addr)
	}
}

// secure makes a node's cluster port mutual TLS with cert, trusting ca.
func (ca *testCA) secure(cert tls.Certificate) func(*Options) {
	server := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: ca.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	client := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
	return func(o *Options) {
		o.ClusterListener = tls.NewListener(o.ClusterListener, server)
		o.ClusterDial = tlsDial(client)
	}
}

// TestClusterPortTLS: three controllers elect, replicate and forward
// writes over mutual TLS; a client without a certificate, with one from
// another CA, or in plaintext gets no answer from the cluster port.
func TestClusterPortTLS(t *testing.T) {
	ca := newTestCA(t)
	tc := newTestCluster(t, 3, ca.secure(ca.issue(t, "node")))
	tc.awaitReady()
	ctx := testCtx(t)
	f := tc.follower()
	top, err := f.CreateTopic(ctx, "secured", 2, 3, nil, false)
	require.NoError(t, err, "a write forwarded over the TLS controller RPC")
	for _, c := range tc.nodes {
		require.Eventually(t, func() bool { _, ok := c.Topic("secured"); return ok }, 10*time.Second, 5*time.Millisecond)
	}
	require.Len(t, top.Partitions, 2)

	addr := tc.peers[0].Addr
	rpc := func(dial dialFunc) error {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := call(cctx, dial, addr, "create_topic", struct{}{}, nil)
		return err
	}
	require.Error(t, rpc(dialTCP), "plaintext on a TLS cluster port")
	// The intruder trusts the cluster's CA (it can verify the server) but
	// its own certificate is from another: the server must refuse it.
	other := newTestCA(t)
	intruder := &tls.Config{Certificates: []tls.Certificate{other.issue(t, "intruder")}, RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
	require.Error(t, rpc(tlsDial(intruder)), "a certificate of another CA")
	noCert := &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
	require.Error(t, rpc(tlsDial(noCert)), "no client certificate")
	// The cluster still works after the refused connections.
	_, err = f.CreateTopic(ctx, "secured2", 1, 3, nil, false)
	require.NoError(t, err)
}
