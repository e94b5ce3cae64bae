// Package testpki makes throwaway certificates for tests: a CA, a server
// certificate for 127.0.0.1 and localhost, and a client certificate, as
// PEM files in a test's temp dir. Only tests import it (internal/archtest
// checks that).
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA with one server and one client certificate.
type PKI struct {
	// CAFile is the CA certificate (PEM).
	CAFile string
	// ServerCert/ServerKey are PEM files of the server certificate (for
	// 127.0.0.1 and localhost, CN "broker").
	ServerCert, ServerKey string
	// ClientCert/ClientKey are PEM files of the client certificate.
	ClientCert, ClientKey string
	// Pool holds the CA.
	Pool *x509.CertPool
	// Server is the server certificate, ready for a tls.Config.
	Server tls.Certificate
}

// New makes a PKI whose client certificate has common name clientCN.
func New(t testing.TB, clientCN string) *PKI {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "moonmq test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(err)
	ca, err := x509.ParseCertificate(caDER)
	must(err)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		must(os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return p
	}
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (string, string, tls.Certificate) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips, DNSNames: dns, KeyUsage: x509.KeyUsageDigitalSignature,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		must(err)
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		must(err)
		certFile := write(cn+".pem", "CERTIFICATE", der)
		keyFile := write(cn+"-key.pem", "PRIVATE KEY", kder)
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		must(err)
		return certFile, keyFile, c
	}
	p := &PKI{CAFile: write("ca.pem", "CERTIFICATE", caDER), Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	p.ServerCert, p.ServerKey, p.Server = issue(2, "broker", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	p.ClientCert, p.ClientKey, _ = issue(3, clientCN, x509.ExtKeyUsageClientAuth, nil, nil)
	return p
}

// ServerTLS is a listener config with the server certificate; clientCA
// requires and verifies client certificates (mTLS).
func (p *PKI) ServerTLS(clientCA bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.Server}, MinVersion: tls.VersionTLS12}
	if clientCA {
		c.ClientCAs, c.ClientAuth = p.Pool, tls.RequireAndVerifyClientCert
	}
	return c
}
